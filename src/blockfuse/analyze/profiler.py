"""What the GPU ran: CUDA kernels from ``torch.profiler`` for one warm step, and their reconciliation
with the launches the wrapper code makes.

A wrapper launch of a Triton kernel is one GPU kernel of the same name. A library call may run
several (cuDNN attention backward: a memset, a preprocessing kernel, the main kernel and a
conversion) or add a memset (cuBLAS workspaces); eager code between graphs and autograd's own work
run kernels no wrapper launched. ``reconcile`` pairs the two lists in order and says which is which.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from blockfuse.analyze.wrapper import Launch

_ATTENTION = re.compile(r"flash|fmha|attention|sdpa|attn|dot_do_o|convert_dq|cudnn", re.IGNORECASE)
_GEMM = re.compile(r"nvjet|gemm|cutlass|xmma|cublas|wgmma|s16816|h16816|hmma|splitk|_tn$|_nt$", re.IGNORECASE)


@dataclass
class DeviceKernel:
    name: str
    us: float


@dataclass
class Phase:
    """One measured part of a step: ``run(prepare())`` is measured, ``finish(result)`` is not."""

    name: str
    prepare: Callable[[], Any]
    run: Callable[[Any], Any]
    finish: Callable[[Any], None] = lambda result: None

    def once(self) -> None:
        self.finish(self.run(self.prepare()))


def kernel_class(name: str) -> str:
    if name.startswith("Memset"):
        return "memset"
    if name.startswith("Memcpy"):
        return "memcpy"
    if _ATTENTION.search(name):
        return "attention"
    if _GEMM.search(name):
        return "gemm"
    return "other"


def _device_kernels(prof) -> list[DeviceKernel]:
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: e.time_range.start)
    return [DeviceKernel(e.name, float(e.time_range.elapsed_us())) for e in events]


def profile_phase(phase: Phase, steps: int = 5) -> list[list[DeviceKernel]]:
    """The CUDA kernels of ``phase.run``, one list per step (one profiler session each)."""
    from torch.profiler import ProfilerActivity, profile

    result = []
    for _ in range(steps):
        state = phase.prepare()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            output = phase.run(state)
            torch.cuda.synchronize()
        phase.finish(output)
        result.append(_device_kernels(prof))
    return result


def median_step(steps: list[list[DeviceKernel]]) -> list[DeviceKernel]:
    """The kernel sequence most steps ran, each kernel with its median duration over those steps."""
    if not steps:
        return []
    sequences = Counter(tuple(k.name for k in step) for step in steps)
    common = sequences.most_common(1)[0][0]
    chosen = [step for step in steps if tuple(k.name for k in step) == common]
    return [DeviceKernel(name, statistics.median(step[i].us for step in chosen)) for i, name in enumerate(common)]


def time_phase(phase: Phase, device_type: str, reps: int = 20) -> list[float]:
    """Milliseconds of ``phase.run`` per step: CUDA events on the GPU (idle gaps included), wall clock on CPU."""
    times = []
    for _ in range(reps):
        state = phase.prepare()
        if device_type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            output = phase.run(state)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            output = phase.run(state)
            times.append((time.perf_counter() - began) * 1e3)
        phase.finish(output)
    return times


# ---------------------------------------------------------------- reconciliation


@dataclass
class Reconciliation:
    wrapper_launches: int
    device_kernels: int
    matched: int = 0  # wrapper launches that got at least one device kernel
    missing: list[str] = field(default_factory=list)  # wrapper launches the profiler did not show
    extras: dict[str, int] = field(default_factory=dict)  # device kernels beyond one per launch, by class
    unattributed: dict[str, int] = field(default_factory=dict)  # device kernels no wrapper launched

    def text(self) -> str:
        parts = [f"the wrapper launches {self.wrapper_launches} times; the profiler saw {self.device_kernels} "
                 f"GPU kernels: {self.matched} are those launches"]
        labels = {"memset": "memsets (library workspaces)", "memcpy": "memcpys",
                  "library": "more kernels inside library calls (cuBLAS / cuDNN run several per call)"}
        parts += [f"{count} {labels.get(kind, kind)}" for kind, count in self.extras.items() if count]
        if self.unattributed:
            count = sum(self.unattributed.values())
            names = ", ".join(f"{_short(n)} x{c}" if c > 1 else _short(n) for n, c in self.unattributed.items())
            parts.append(f"{count} launched outside the compiled graphs (eager code, autograd): {names}")
        text = "; ".join(parts)
        if self.missing:
            text += f". Not seen by the profiler: {', '.join(self.missing)}"
        return text


def _short(name: str, width: int = 70) -> str:
    """A readable kernel name: ``void at::native::reduce_kernel<512, 1, at::native::ReduceOp<...`` ->
    ``reduce_kernel<512, 1, ReduceOp<...``."""
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\b(?:at::native::|at::|c10::|std::|\(anonymous namespace\)::)", "", name)
    return name if len(name) <= width else name[: width - 3] + "..."


_PRIMARY = {"gemm": "gemm", "attention": "attention"}  # launch category -> the class of its main kernel
_MULTI = frozenset({"attention", "custom op", "fallback", "extern", "convolution", "collective"})


def _distribute(pending: list[Launch], gap: list[DeviceKernel], result: Reconciliation) -> None:
    held: list[DeviceKernel] = []  # memsets wait for the next call that takes a kernel
    position = 0
    has_primary: set[int] = set()

    def give(index: int, kernel: DeviceKernel, primary: bool) -> None:
        nonlocal held
        launch = pending[index]
        for memset in held:
            launch.device_kernels.append(memset.name)
            launch.time_us = (launch.time_us or 0.0) + memset.us
            result.extras[kernel_class(memset.name)] = result.extras.get(kernel_class(memset.name), 0) + 1
        held = []
        launch.device_kernels.append(kernel.name)
        launch.time_us = (launch.time_us or 0.0) + kernel.us
        if primary:
            has_primary.add(index)
        else:
            result.extras["library"] = result.extras.get("library", 0) + 1

    for kernel in gap:
        kind = kernel_class(kernel.name)
        if kind in ("memset", "memcpy"):
            held.append(kernel)
            continue
        wanted = kind if kind in ("gemm", "attention") else "other"
        # 1. the next call whose main kernel this is and which has none yet
        chosen = next((i for i in range(position, len(pending)) if i not in has_primary
                       and _PRIMARY.get(pending[i].category, "other") == wanted), None)
        if chosen is not None:
            give(chosen, kernel, primary=True)
            position = chosen
            continue
        # 2. the current call if it may run several kernels, else the next one that may
        chosen = next((i for i in range(position, len(pending)) if pending[i].category in _MULTI), None)
        if chosen is not None:
            give(chosen, kernel, primary=chosen not in has_primary)
            position = chosen
            continue
        result.unattributed[kernel.name] = result.unattributed.get(kernel.name, 0) + 1
    if held:
        taker = max(has_primary, default=None)
        for memset in held:
            if taker is None:
                result.unattributed[memset.name] = result.unattributed.get(memset.name, 0) + 1
            else:
                pending[taker].device_kernels.append(memset.name)
                pending[taker].time_us = (pending[taker].time_us or 0.0) + memset.us
                result.extras[kernel_class(memset.name)] = result.extras.get(kernel_class(memset.name), 0) + 1


def reconcile(launches: list[Launch], kernels: list[DeviceKernel]) -> Reconciliation:
    """Pair ``launches`` (one step's wrapper launches, in order) with the ``kernels`` the profiler saw;
    sets each launch's ``device_kernels`` and ``time_us``."""
    result = Reconciliation(wrapper_launches=len(launches), device_kernels=len(kernels))
    for launch in launches:
        launch.device_kernels, launch.time_us = [], None
    position, pending = 0, []
    for launch in launches:
        if launch.kind != "triton":
            pending.append(launch)
            continue
        names = tuple({launch.target, launch.device_name or launch.target})
        found = next((i for i in range(position, len(kernels)) if kernels[i].name.startswith(names)), None)
        if found is None:
            continue
        _distribute(pending, kernels[position:found], result)
        pending = []
        launch.device_kernels = [kernels[found].name]
        launch.time_us = kernels[found].us
        position = found + 1
    _distribute(pending, kernels[position:], result)
    result.matched = sum(1 for launch in launches if launch.device_kernels)
    result.missing = [launch.target for launch in launches if not launch.device_kernels]
    return result
