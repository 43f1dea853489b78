"""How a benchmark is timed: the statistics of a list of samples, CUDA and CPU timers,
the device-to-device copy ceiling, and peak memory.

The statistics and ``do_bench``'s CUDA timer live in ``blockfuse.analyze.timing`` and the copy ceiling in
``blockfuse.analyze.ceilings``, where the compile analysis uses them too; they are imported here, so
every benchmark times through this one module."""

from __future__ import annotations

import time
from typing import Callable

import torch

from blockfuse.analyze.ceilings import copy_bandwidth
from blockfuse.analyze.timing import Timing, quantile, summarize, time_cuda

__all__ = ["Timing", "quantile", "summarize", "time_cuda", "time_cuda_loop", "time_cuda_graph", "l2_flush",
           "time_cpu", "copy_bandwidth", "peak_memory_mib"]


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


def peak_memory_mib(fn: Callable[[], object]) -> float:
    """Memory that one call of ``fn`` allocates above what is already allocated, in MiB."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20
