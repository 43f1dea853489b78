"""``--max-batch``: per parallelism and provider, the largest batch per GPU that trains, each try its own
launch (a rank out of memory cannot hang the others)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from blockfuse.bench.distributed.launch import launch
from blockfuse.bench.distributed.settings import Settings, command, stem
from blockfuse.bench.distributed.tables import max_batch_markdown

MAX_BATCH_TRY_S = 600  # one try of --max-batch: build, compile and a few steps


def try_batch(settings: Settings, parallel: str, provider: str, batch: int, folder: Path) -> dict:
    """One launch of ``provider`` under ``parallel`` at ``batch`` per GPU, a few steps, no reference: its record,
    or ``{"error": ...}`` (out of memory, or the launch failed or hung)."""
    tried = dataclasses.replace(settings, shape=(batch, *settings.shape[1:]), providers=(provider,),
                                parallels=(parallel,), steps=settings.warmup + 3, reference=False, profile=False)
    out = folder / f"{parallel}-{provider}-b{batch}"
    out.mkdir(parents=True, exist_ok=True)
    code = launch(tried, out, timeout=MAX_BATCH_TRY_S, log=out / "launch.log")
    path = out / f"{stem(tried)}.json"
    if not path.exists():
        return {"error": f"launch exited {code} before writing results"}
    document = json.loads(path.read_text())
    record = document["records"][0] if document["records"] else {"error": f"launch exited {code} with no record"}
    return {**record, "meta": {key: document["meta"].get(key) for key in ("card", "cards", "torch", "triton")}}


def search_max_batch(settings: Settings, out: Path, limit: int = 1024) -> int:
    """Per parallelism and provider, the largest batch per GPU that trains (doubling from ``--shape``'s batch,
    then bisecting), each try its own launch; writes ``max-batch-NAME-xN.{json,md}``."""
    folder = out / "max-batch-tries"
    results, all_tries = [], []
    for parallel in settings.parallels:
        for provider in settings.providers:
            tries: dict[int, dict] = {}

            def fits(batch: int) -> bool:
                if batch not in tries:
                    tries[batch] = try_batch(settings, parallel, provider, batch, folder)
                    verdict = "fits" if not tries[batch].get("error") else tries[batch]["error"][:100]
                    print(f"max batch, {parallel} {provider}: batch {batch}: {verdict}", flush=True)
                return not tries[batch].get("error")

            low, high = 0, None  # low fits (0: none yet), high does not
            batch = settings.shape[0]
            while high is None and batch <= limit:
                if fits(batch):
                    low, batch = batch, batch * 2
                else:
                    high = batch
            while high is not None and high - low > 1:  # (the first batch failing: bisect below it)
                middle = (low + high) // 2
                low, high = (middle, high) if fits(middle) else (low, middle)
            all_tries += tries.values()
            best = tries.get(low, {}) if low else {}
            results.append({"parallel": parallel, "provider": provider, "max_batch": low or None,
                            "first_failing_batch": high, "tokens_per_s": best.get("tokens_per_s"),
                            "ms": best.get("ms"), "peak_mib": best.get("peak_mib"),
                            "tries": {str(b): (r.get("error") or "fits") for b, r in sorted(tries.items())}})
    meta = next((r["meta"] for r in all_tries if r.get("meta")), {})
    document = {"command": command(settings, out) + " --max-batch", "meta": meta, "try_s": MAX_BATCH_TRY_S,
                "memory_fraction": settings.memory_fraction, "shape_per_rank": list(settings.shape),
                "results": results}
    path = out / f"max-batch-{settings.name}-x{settings.nproc}"
    path.with_suffix(".json").write_text(json.dumps(document, indent=1) + "\n")
    path.with_suffix(".md").write_text(max_batch_markdown(document))
    print(max_batch_markdown(document))
    return 0
