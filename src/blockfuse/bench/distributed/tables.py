"""The multi-GPU step's files: the JSON, the Markdown (a table per parallelism, the communication of the
profiled step), the plot, and the largest-batch table; written with ``bench.writer``."""

from __future__ import annotations

from pathlib import Path

from blockfuse.bench import writer
from blockfuse.bench.distributed.targets import LOSS_TARGET, find, targets
from blockfuse.bench.writer import NOISE_NOTE, noisy, number, spread_text
from blockfuse.cliutil import format_shape


def max_batch_markdown(document: dict) -> str:
    fraction = document.get("memory_fraction")
    meta = document.get("meta") or {}
    lines = ["# Largest batch per GPU", "",
             f"- cards: {len(meta.get('cards') or [None])} x {meta.get('card')}; torch {meta.get('torch')}, "
             f"triton {meta.get('triton')}", f"- command: `{document['command']}`",
             f"- memory cap: {f'{fraction:g} of each GPU' if fraction else 'none (the whole GPU)'}; seq and width "
             f"of {format_shape(document['shape_per_rank'])}; each try its own launch, {document.get('try_s')} s "
             "at most",
             "", "| parallel | provider | max batch per GPU | tokens/s | x compile | step ms | peak MiB | tries |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    compiled = {r["parallel"]: r.get("tokens_per_s") for r in document["results"] if r["provider"] == "compile"}
    for r in document["results"]:
        base = compiled.get(r["parallel"])
        ratio = r["tokens_per_s"] / base if r.get("tokens_per_s") and base else None
        tries = ", ".join(f"{b}: {'ok' if v == 'fits' else 'no'}" for b, v in r["tries"].items())
        lines.append(f"| {r['parallel']} | {r['provider']} | {r['max_batch'] or 'none'} "
                     f"| {number(r['tokens_per_s'], '.0f')} | {number(ratio, '.2f')} | {number(r['ms'], '.1f')} "
                     f"| {number(r['peak_mib'], '.0f')} | {tries} |")
    return "\n".join(lines) + "\n"


def write_json(path: Path, meta: dict, workload: dict, records: list[dict]) -> None:
    writer.write_json(path, {"meta": meta, "workload": workload, "targets": targets(workload, records, meta["device"]),
                             "records": records})


def markdown(meta: dict, workload: dict, records: list[dict]) -> str:
    cuda = meta["device"] == "cuda"
    shape = format_shape(workload["shape_per_rank"])
    cards = meta.get("cards") or [meta["card"]]
    lines = [
        f"# blockfuse multi-GPU training step: {workload['name']}",
        "",
        f"- cards: **{workload['nproc']} x {cards[0]}**" + ("" if len(set(cards)) == 1 else f" ({', '.join(cards)})")
        + f", {workload['backend']}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"python {meta['python']}",
        f"- blockfuse source digest {meta.get('source_digest')}, git {meta.get('git_commit')}, date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- workload: {workload['layers']} layer(s), {shape} ({workload['dtype']}"
        + ("" if workload.get("linear", "bf16") == "bf16" else f"; Linear layers {workload['linear']}")
        + ") per data-parallel rank; "
        f"{workload['steps']} steps ({workload['warmup']} untimed), {workload['optimizer']} lr {workload['lr']:g}, "
        f"seed {workload['seed']}" + (f"; memory fraction {workload['memory_fraction']:g}"
                                      if workload.get("memory_fraction") else ""),
        "",
        "A step: " + workload["step"] + "; the blocks compute in " + workload["dtype"] + ". Loss: "
        + workload["loss"] + ". fsdp: `fully_shard` per block and on the stack, `MixedPrecisionPolicy(param_dtype="
        + workload["dtype"] + ", reduce_dtype=float32)`, each rank its own batch; tp: `parallelize_module(stack, mesh, "
        "blockfuse.distributed.tp_plan(stack, sequence_parallel=True))`, every rank the same batch; fsdp+tp: both on "
        "a (dp, tp) mesh. compile: each block under `torch.compile`. Step ms: the median wall time of a synchronized "
        "step after the warm-up, the slowest rank's (p20-p80 in the JSON). Tokens/s: the global batch's tokens over "
        "it. Peak: the most CUDA memory a rank allocated during training, parameters, gradients and optimizer state "
        "included (the largest rank's). One GPU: rank 0 training the same provider unsharded on the whole global "
        "batch with the same seeds; loss diff: |loss - one GPU's| / one GPU's after the last step (in brackets: the "
        "largest over the steps).",
        "",
        "## Targets",
        "",
    ]
    checks = targets(workload, records, meta["device"])
    lines += [f"- **{t['status']}**: {t['text']}" for t in checks] or ["(none for these runs)"]
    for parallel in dict.fromkeys(r["parallel"] for r in records):
        mine = [r for r in records if r["parallel"] == parallel]
        compiled = find(records, parallel, "compile")
        mesh = next((r["mesh"] for r in mine if r.get("mesh")), None)
        lines += ["", f"## {parallel}" + (f" (dp {mesh['dp']} x tp {mesh['tp']})" if mesh else ""), "",
                  "| provider | step ms per GPU | x compile | tokens/s (global) | peak MiB per GPU | peak / compile "
                  "| loss after last step | one GPU's | loss diff | one GPU ms (global batch) | x one GPU tokens/s |",
                  "| --- " * 11 + "|"]
        for r in mine:
            if r.get("error"):
                lines.append(f"| {r['provider']} | error: {writer.code(r['error'])} |" + " |" * 9)
                continue
            speed = compiled["ms"] / r["ms"] if compiled and not noisy(compiled) and not noisy(r) else None
            has_peaks = compiled and r.get("peak_mib") and compiled.get("peak_mib")
            memory = r["peak_mib"] / compiled["peak_mib"] if has_peaks else None
            one = r.get("one_gpu") or {}
            ms = f"{r['ms']:.1f}" if not noisy(r) else f"{r['ms']:.1f} ({spread_text(r)})"
            diff = (f"{r['loss_rel_diff']:.2e} ({r['loss_rel_diff_max']:.1e})" if "loss_rel_diff" in r
                    else r.get("loss_error", "")[:80])
            lines.append(" | ".join([f"| {r['provider']}", ms, number(speed, ".2f"), f"{r['tokens_per_s']:.0f}",
                                     number(r.get("peak_mib"), ".0f"), number(memory, ".2f"), f"{r['loss']:.6g}",
                                     number(one.get("losses", [None])[-1], ".6g"), diff, number(one.get("ms"), ".1f"),
                                     number(r.get("speedup_vs_one_gpu"), ".2f")]) + " |")
        lines += _phase_lines(mine)
        lines += _above_state_lines(mine)
        lines += _allocator_lines(mine)
        lines += _snapshot_lines(mine)
        lines += _communication_lines(mine, workload)
    if not cuda:
        lines += ["", "On the CPU (gloo): the figures check the harness and the loss, not the speed; no CUDA memory."]
    if any(noisy(r) for r in records if not r.get("error")):
        lines += ["", NOISE_NOTE]
    lines += ["", "Providers: " + "; ".join(f"`{p}`: {text}" for p, text in workload["labels"].items()) + "."]
    return "\n".join(lines) + "\n"


def _largest_by_rank(records: list[dict], key: str) -> list[tuple[str, dict]]:
    """``(provider, {name: the largest rank's value})`` of each record whose ranks report the dict ``key``."""
    rows = []
    for r in records:
        by_rank = [values for values in r.get(key) or [] if values]
        if by_rank:
            rows.append((r["provider"], {name: max(values[name] for values in by_rank) for name in by_rank[0]}))
    return rows


def _phase_lines(records: list[dict]) -> list[str]:
    """Where each provider's peak sits: the largest rank's peak in each phase of a step."""
    rows = [f"- {provider}: " + ", ".join(f"{phase} {mib:.0f}" for phase, mib in peaks.items())
            for provider, peaks in _largest_by_rank(records, "peak_mib_by_phase_by_rank")]
    return ["", "Peak MiB per GPU in each phase of a step (the largest rank's; the step's peak is the largest):",
            "", *rows] if rows else []


def _above_state_lines(records: list[dict], reference: str = "compile") -> list[str]:
    """What each provider's step adds to the memory a step begins with (parameters, gradients, optimizer state,
    the batch: alike for every provider), the largest rank's, and its ratio to ``reference``'s: the activations'
    share of the peak, which a shared base dilutes in the ratio of whole peaks."""
    above = {}
    for r in records:
        pairs = [(peak, state) for peak, state in zip(r.get("peak_mib_by_rank") or [], r.get("state_mib_by_rank") or [])
                 if peak is not None and state is not None]
        if pairs:
            above[r["provider"]] = max(peak - state for peak, state in pairs)
    if not above:
        return []
    base = above.get(reference)
    rows = [f"- {provider}: {mib:.0f} MiB" + (f" ({mib / base:.2f}x {reference})" if base else "")
            for provider, mib in above.items()]
    return ["", "Peak MiB per GPU above the memory a step begins with (parameters, gradients, optimizer state, batch): "
            "what the step adds, activations and temporaries:", "", *rows]


def _allocator_lines(records: list[dict]) -> list[str]:
    """The caching allocator's host-costly events a timed step, per provider (the largest rank's)."""
    rows = [f"- {provider}: " + ", ".join(f"{name} {count:g}" for name, count in counts.items())
            for provider, counts in _largest_by_rank(records, "allocator_per_step_by_rank")]
    return ["", "The CUDA allocator a timed step (the largest rank's; `cudaMalloc` / `cudaFree` calls, retries after a "
            "failed allocation, which free the cache and synchronize, and all-stream synchronizations: each stalls "
            "the host):", "", *rows] if rows else []


def _snapshot_lines(records: list[dict]) -> list[str]:
    """``--memory-snapshot``: rank 0's live allocations at one step's peak and after it, by allocating line."""
    from blockfuse.bench.memory import snapshot_lines

    rows = [line for r in records if r.get("memory_snapshot")
            for line in snapshot_lines(r["provider"], r["memory_snapshot"])]
    if not rows:
        return []
    return ["", "One more step with rank 0's CUDA allocations recorded (`--memory-snapshot`):", "", *rows]


def _communication_lines(records: list[dict], workload: dict) -> list[str]:
    profiled = [r for r in records if r.get("communication") is not None]
    if not profiled:
        return []
    measured = "NCCL kernels, GPU time" if workload["backend"] == "nccl" else "gloo calls, wall time"
    lines = ["", f"Communication in one profiled step (rank 0; {measured}):", ""]
    for r in profiled:
        totals: dict[str, list] = {}
        for event in r["communication"]:
            count, ms = totals.setdefault(event["kind"], [0, 0.0])
            totals[event["kind"]] = [count + event["count"], ms + event["ms"]]
        found = ", ".join(f"{kind} {count}x {ms:.2f} ms" for kind, (count, ms) in totals.items()) or "none"
        lines.append(f"- {r['provider']}: {found}")
        planned = r.get("planned_collectives")
        if planned:
            lines[-1] += (f"; the plan's: all_gather {planned['all_gather']}x, reduce_scatter "
                          f"{planned['reduce_scatter']}x (one into and out of each attention and MLP, the output "
                          "gathered, forward and backward: a norm that gathered would add all-gathers; gloo runs a "
                          "reduce-scatter as an all-reduce, and the all-reduces also sum the replicated weights' "
                          "gradients)")
        for event in r["communication"][:6]:
            lines.append(f"  - `{event['name'][:90]}`: {event['count']}x, {event['ms']:.2f} ms")
    return lines


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Step ms, peak memory per GPU and the loss difference from one GPU, per parallelism and provider."""
    plt = writer.pyplot()
    if plt is None:
        return False
    ran = [r for r in records if not r.get("error")]
    parallels = list(dict.fromkeys(r["parallel"] for r in records))
    providers = list(dict.fromkeys(r["provider"] for r in records))
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels = (("ms", "step ms per GPU (lower is better)"), ("peak_mib", "peak MiB per GPU"),
              ("loss_rel_diff", "loss difference from one GPU"))
    for ax, (key, title) in zip(axes, panels):
        values = {parallel: [(find(ran, parallel, provider) or {}).get(key) or 0 for provider in providers]
                  for parallel in parallels}
        writer.grouped_bars(ax, providers, values, rotation=20)
        ax.set_title(title, fontsize=9)
    if meta["device"] != "cuda":
        axes[1].text(0.5, 0.5, "no CUDA memory on CPU", transform=axes[1].transAxes, ha="center", color="gray")
    if any(r.get("loss_rel_diff") for r in ran):
        axes[2].set_yscale("log")
        axes[2].axhline(LOSS_TARGET, color="black", linewidth=0.8, linestyle="--")
    return writer.save(figure, path, f"{workload['name']}, {workload['layers']} layers, "
                                     f"{format_shape(workload['shape_per_rank'])} {workload['dtype']} per rank: "
                                     f"{workload['nproc']} x {writer.versions_title(meta)}")
