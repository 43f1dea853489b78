"""The communication of one training step: its collectives under the torch profiler (NCCL kernels on GPUs,
gloo's calls on the CPU), and the ones the TP plan should make."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional


def _collective(name: str) -> str:
    plain = name.lower().replace("_", "")
    for kind in ("allgather", "reducescatter", "allreduce", "broadcast", "alltoall", "sendrecv", "send", "recv"):
        if kind in plain:
            return {"allgather": "all_gather", "reducescatter": "reduce_scatter", "allreduce": "all_reduce",
                    "alltoall": "all_to_all"}.get(kind, kind)
    return "other"


def communication(step: Callable, world, trace: Optional[Path]) -> list[dict]:
    """One ``step()`` under the torch profiler on ``world`` (``training.World``); its communication: NCCL
    kernels on GPUs (their GPU time), gloo's calls on the CPU (their wall time), by name: ``{name, kind,
    count, ms}``. Writes the Chrome trace to ``trace`` (when given)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if world.cuda else [])
    with profile(activities=activities) as profiler:
        step()
        world.synchronize()
    if trace is not None:
        profiler.export_chrome_trace(str(trace))
    found = []
    for event in profiler.key_averages():
        name = event.key
        if world.cuda:
            if event.device_type != DeviceType.CUDA or not name.lower().startswith("nccl"):
                continue
            total_us = getattr(event, "device_time_total", None)
            if total_us is None:
                total_us = event.cuda_time_total
        else:
            if not name.startswith("gloo:"):
                continue
            total_us = event.cpu_time_total
        found.append({"name": name, "kind": _collective(name), "count": event.count, "ms": total_us / 1e3})
    return sorted(found, key=lambda e: -e["ms"])


def planned_collectives(parallel: str, layers: int) -> Optional[dict]:
    """The all-gathers and reduce-scatters a training step of the TP plan (sequence parallel) makes: in the forward
    one all-gather into each block's attention and MLP, one reduce-scatter out of each, and the stack's output
    gathered; in the backward their mirror images (the input's gradient, which the step does not need, is not
    gathered). A norm that gathered its input would add to them. (On gloo a reduce-scatter runs as an all-reduce;
    the all-reduces also sum the replicated weights' gradients, the norms' and the output biases', before the
    optimizer's step.)"""
    if parallel != "tp":
        return None
    return {"all_gather": 2 * (2 * layers + 1) - 1, "reduce_scatter": 2 * 2 * layers}
