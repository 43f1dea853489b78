"""How one measurement is timed, for the compile analysis and the benchmarks alike: the statistics of a
list of samples (:class:`Timing`: median, p20, p80) and the CUDA timer (:func:`time_cuda`, Triton's
``do_bench``). The benchmarks' other timers build on these in ``blockfuse.bench.timing``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import torch


@dataclass(frozen=True)
class Timing:
    """Milliseconds of one call: the median and the 20th / 80th percentiles."""

    median: float
    p20: float
    p80: float


def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``samples`` with linear interpolation (as numpy and torch do)."""
    if not samples:
        raise ValueError("quantile of an empty list of samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {q}")
    ordered = sorted(samples)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(samples: Sequence[float]) -> Timing:
    """Median, p20 and p80 of a list of timings in milliseconds."""
    return Timing(median=quantile(samples, 0.5), p20=quantile(samples, 0.2), p80=quantile(samples, 0.8))


def time_cuda(
    fn: Callable, *, warmup_ms: float, rep_ms: float, grad_to_none=None, setup: Callable | None = None
) -> Timing:
    """Time ``fn`` on the current CUDA device.

    Without ``setup``: ``triton.testing.do_bench``, which warms up for ``warmup_ms``, then
    repeats for ``rep_ms`` with the L2 cache cleared before each call, timed by CUDA events.
    With ``setup``: the same loop, but each call first runs ``setup()`` untimed and the timed
    call is ``fn(setup())`` (the backward-only mode: a fresh forward, then the timed backward).
    """
    if setup is not None:
        return _time_cuda_after_setup(fn, setup, warmup_ms=warmup_ms, rep_ms=rep_ms, grad_to_none=grad_to_none)
    import triton.testing

    parameters = inspect.signature(triton.testing.do_bench).parameters
    kwargs = {"warmup": warmup_ms, "rep": rep_ms, "grad_to_none": grad_to_none}
    if "quantiles" in parameters:  # triton 2.1 and later, 3.6 and 3.9 included
        median, p20, p80 = triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8], **kwargs)
        return Timing(median=float(median), p20=float(p20), p80=float(p80))
    median = float(triton.testing.do_bench(fn, return_mode="median", **kwargs))
    return Timing(median=median, p20=median, p80=median)


def _time_cuda_after_setup(fn, setup, *, warmup_ms, rep_ms, grad_to_none) -> Timing:
    # NOTE: do_bench's loop with an untimed setup before each call. The L2 flush comes after
    # the setup so the timed call starts cold, as a backward does long after its forward.
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")  # above any L2 (50 MiB H100, 60 MiB H200)

    def once(start=None, end=None):
        for t in grad_to_none or ():
            t.grad = None
        state = setup()
        flush.zero_()
        if start is not None:
            start.record()
        fn(state)
        if end is not None:
            end.record()

    once()
    torch.cuda.synchronize()
    began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began.record()
    for _ in range(5):
        once()
    ended.record()
    torch.cuda.synchronize()
    estimate_ms = max(began.elapsed_time(ended) / 5, 1e-3)  # setup and flush included: the loop lasts about rep_ms
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        once()
    repeats = max(1, int(rep_ms / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        once(start, end)
    torch.cuda.synchronize()
    return summarize([start.elapsed_time(end) for start, end in zip(starts, ends)])
