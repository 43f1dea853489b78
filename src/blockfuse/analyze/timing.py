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
    fn: Callable, *, warmup_ms: float, rep_ms: float, grad_to_none=None, setup: Callable | None = None,
    min_reps: int = 1, min_warmup: int = 1,
) -> Timing:
    """Time ``fn`` on the current CUDA device.

    Without ``setup``: ``triton.testing.do_bench``, which warms up for ``warmup_ms``, then
    repeats for ``rep_ms`` with the L2 cache cleared before each call, timed by CUDA events.
    With ``setup``: the same loop, but each call first runs ``setup()`` untimed and the timed
    call is ``fn(setup())`` (the backward-only mode: a fresh forward, then the timed backward).

    ``min_reps`` / ``min_warmup``: at least that many timed / warm-up calls whatever the budgets
    give (NOTE: a call longer than the budgets otherwise gets one or two of each: a 24 ms training step
    under ``bench block --quick``'s 25 / 50 ms was timed twice, p20 = p80 in its record, and one such
    run on an H200 read 33.1 ms where its repeat read 26.6, benchmarks/results/fp8/
    7-weight-t-2026-11-28-h200/).
    """
    if setup is not None:
        return _time_cuda_after_setup(fn, setup, warmup_ms=warmup_ms, rep_ms=rep_ms, grad_to_none=grad_to_none,
                                      min_reps=min_reps, min_warmup=min_warmup)
    import triton.testing

    if min_reps > 1 or min_warmup > 1:
        estimate_ms = _estimate_ms(fn)
        warmup_ms = max(warmup_ms, min_warmup * estimate_ms)
        rep_ms = max(rep_ms, min_reps * estimate_ms)
    parameters = inspect.signature(triton.testing.do_bench).parameters
    kwargs = {"warmup": warmup_ms, "rep": rep_ms, "grad_to_none": grad_to_none}
    if "quantiles" in parameters:  # triton 2.1 and later, 3.6 and 3.9 included
        median, p20, p80 = triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8], **kwargs)
        return Timing(median=float(median), p20=float(p20), p80=float(p80))
    median = float(triton.testing.do_bench(fn, return_mode="median", **kwargs))
    return Timing(median=median, p20=median, p80=median)


def _estimate_ms(fn: Callable, calls: int = 3) -> float:
    """Milliseconds of one call of ``fn`` (after one untimed call), from ``calls`` timed back to back."""
    fn()
    torch.cuda.synchronize()
    began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began.record()
    for _ in range(calls):
        fn()
    ended.record()
    torch.cuda.synchronize()
    return max(began.elapsed_time(ended) / calls, 1e-3)


def call_counts(warmup_ms: float, rep_ms: float, estimate_ms: float, min_warmup: int = 1,
                min_reps: int = 1) -> tuple[int, int]:
    """``(warm-up calls, timed calls)`` for calls of ``estimate_ms`` within the budgets, at least ``min_warmup`` and
    ``min_reps``."""
    return (max(min_warmup, 1, int(warmup_ms / estimate_ms)), max(min_reps, 1, int(rep_ms / estimate_ms)))


def _time_cuda_after_setup(fn, setup, *, warmup_ms, rep_ms, grad_to_none, min_reps=1, min_warmup=1) -> Timing:
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

    estimate_ms = _estimate_ms(once, calls=5)  # setup and flush included: the loop lasts about rep_ms
    warmups, repeats = call_counts(warmup_ms, rep_ms, estimate_ms, min_warmup, min_reps)
    for _ in range(warmups):
        once()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        once(start, end)
    torch.cuda.synchronize()
    return summarize([start.elapsed_time(end) for start, end in zip(starts, ends)])
