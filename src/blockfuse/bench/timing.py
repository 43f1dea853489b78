"""How a benchmark is timed: the statistics of a list of samples, CUDA and CPU timers,
the device-to-device copy ceiling, and peak memory."""

from __future__ import annotations

import inspect
import time
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


def time_cuda_loop(fn: Callable, *, before_each: Callable | None = None, calls: int = 50,
                   samples: int = 9) -> Timing:
    """Wall-clock time per call of ``fn`` called back to back, host overhead included.

    Each sample synchronizes, calls ``fn`` ``calls`` times (``before_each`` first, untimed
    only in the sense that it is cheap host work such as clearing grads), synchronizes
    again and divides. A call costs the larger of its host and GPU time, as in an eager
    loop; the median of several samples steadies the host's jitter, which a single
    do_bench pass of a launch-bound op does not.
    """
    for _ in range(3):
        if before_each is not None:
            before_each()
        fn()
    per_call = []
    for _ in range(samples):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            if before_each is not None:
                before_each()
            fn()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - start) * 1e3 / calls)
    return summarize(per_call)


def time_cuda_graph(body: Callable, baseline: Callable, *, reps: int = 10, samples: int = 15) -> Timing:
    """GPU time of ``body`` minus ``baseline``, from CUDA-graph replays: no host overhead.

    ``body`` and ``baseline`` are each captured ``reps`` times into one graph; each sample
    replays both graphs and takes the difference over ``reps``. Put the L2 flush (and any
    untimed setup, such as the forward before a backward) in both.

    NOTE: this is the kernels' own time, what a step sees when the GPU has queued work;
    ``time_cuda`` (do_bench) also counts the host's launch overhead whenever it exceeds the
    GPU time, which on a slow host makes every small op look launch-bound.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
        for _ in range(3):
            body()
            baseline()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    def capture(fn):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        return graph

    graphs = (capture(body), capture(baseline))

    def replay_ms(graph) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    for graph in graphs:
        graph.replay()
    differences = []
    for _ in range(samples):
        with_body, without = replay_ms(graphs[0]), replay_ms(graphs[1])
        differences.append(max(with_body - without, 0.0) / reps)
    del graphs
    torch.cuda.synchronize()
    return summarize(differences)


def l2_flush() -> Callable[[], None]:
    """A callable that evicts the L2 cache (writes a buffer larger than any L2)."""
    buffer = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")  # 50 MiB H100, 60 MiB H200
    return buffer.zero_


def time_cpu(
    fn: Callable,
    *,
    warmup: int,
    rep_ms: float,
    min_reps: int = 3,
    max_reps: int = 200,
    setup: Callable | None = None,
) -> Timing:
    """Time ``fn`` on the CPU with ``time.perf_counter``: ``warmup`` calls, then calls until
    ``rep_ms`` milliseconds have passed (at least ``min_reps``, at most ``max_reps``).
    With ``setup``, each call is ``fn(setup())`` and only ``fn`` is timed."""

    def once() -> float:
        state = setup() if setup is not None else None
        start = time.perf_counter()
        fn(state) if setup is not None else fn()
        return (time.perf_counter() - start) * 1e3

    for _ in range(warmup):
        once()
    samples: list[float] = []
    began = time.perf_counter()
    while len(samples) < min_reps or (len(samples) < max_reps and (time.perf_counter() - began) * 1e3 < rep_ms):
        samples.append(once())
    return summarize(samples)


def copy_bandwidth(*, gib: float = 1.0, warmup_ms: float = 25, rep_ms: float = 100) -> dict:
    """Device-to-device copy of a ``gib`` GiB bf16 buffer: the ceiling every op is measured against.

    Bytes moved = 2 x the buffer size (one read, one write).

    NOTE: timed eagerly with do_bench, not in a CUDA graph: captured, the copy becomes a
    memcpy node that may run on a copy engine (seen at 2.7 TB/s against 4.2 TB/s eagerly
    on an H200). A 1 GiB copy costs a few microseconds of host time against half a
    millisecond on the GPU, so the eager time is the kernel's.
    """
    numel = int(gib * 2**30) // 2
    source = torch.empty(numel, dtype=torch.bfloat16, device="cuda").normal_()
    target = torch.empty_like(source)
    moved = 2 * source.numel() * source.element_size()
    median = time_cuda(lambda: target.copy_(source), warmup_ms=warmup_ms, rep_ms=rep_ms).median
    source = target = None  # free the 2 GiB before the ops run
    torch.cuda.empty_cache()
    return {"bytes": moved, "ms": median, "gbps": moved / median / 1e6}


def peak_memory_mib(fn: Callable[[], object]) -> float:
    """Memory that one call of ``fn`` allocates above what is already allocated, in MiB."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20
