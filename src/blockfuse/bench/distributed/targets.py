"""The project's checks of the multi-GPU step (its issue's targets, read by ``scripts/issue17_gpu.sh`` and the
tests from the JSON)."""

from __future__ import annotations

from typing import Optional

from blockfuse.bench.checks import check as one_check

# The targets (2 GPUs): a fused provider's step at least this fraction of compile's speed, its peak at
# most this fraction of compile's, and every provider's loss after the last step within this relative
# difference of one GPU's.
SPEED_TARGET = {"fsdp": 1.0, "tp": 1.0}
MEMORY_TARGET = {"fsdp": 0.8}
LOSS_TARGET = 1e-3


def find(records: list[dict], parallel: str, provider: str) -> Optional[dict]:
    return next((r for r in records if r["parallel"] == parallel and r["provider"] == provider
                 and not r.get("error")), None)


def targets(workload: dict, records: list[dict], device: str) -> list[dict]:
    """The issue's checks that apply to these records: fused speed and memory against compile under the same
    parallelism (CUDA only), and every provider's loss after the last step against one GPU's."""
    checks = []

    def check(text, value, bound, higher_is_better, speed):
        checks.append(one_check(text, value, bound, higher_is_better, cuda_only=speed, device=device, spec=".3g",
                                bound_spec="g"))

    for parallel in dict.fromkeys(r["parallel"] for r in records):
        compiled = find(records, parallel, "compile")
        for provider in ("fused", "fused+compile"):
            fused = find(records, parallel, provider)
            if fused is None or compiled is None:
                continue
            if parallel in SPEED_TARGET:
                check(f"{parallel}: compile's step ms / {provider}'s", compiled["ms"] / fused["ms"],
                      SPEED_TARGET[parallel], True, True)
            if parallel in MEMORY_TARGET:
                ratio = fused["peak_mib"] / compiled["peak_mib"] if fused.get("peak_mib") and compiled.get("peak_mib") \
                    else None
                check(f"{parallel}: {provider}'s peak memory per GPU / compile's", ratio, MEMORY_TARGET[parallel],
                      False, True)
        for record in records:
            if record["parallel"] == parallel and "loss_rel_diff" in record:
                check(f"{parallel} {record['provider']}: loss after {workload['steps']} steps, relative difference "
                      "from one GPU", record["loss_rel_diff"], LOSS_TARGET, False, False)
    return checks
