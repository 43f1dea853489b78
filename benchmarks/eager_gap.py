"""Why an op's eager-call time exceeds its CUDA-graph time: host, back-to-back GPU work, or the L2 flush.

`blockfuse bench ops` times each provider two ways: CUDA-graph replays with the L2 flushed before each call (the
kernels' own time) and 50 back-to-back eager calls (host included). Where the two differ by more than the host
could explain, this script separates the causes, one op and shape at a time, forward + backward:

- ``graph+flush``: bench's graph time (L2 flushed before every call);
- ``graph loop``: the same calls captured back to back in one graph, no flush (no host, the GPU's queue full);
- ``eager loop``: bench's eager-call time (host included);
- ``host``: the host's own time a call, the calls queued behind a long spin kernel (``torch.cuda._sleep``) so that
  the host never waits for the GPU (a call that synchronizes shows up as the spin's length);
- ``kernels``: the profiler's per-kernel device time in the eager loop, and the GPU's busy fraction of the loop
  (kernel time over the loop's span): a busy fraction near 1 with ``kernels`` above ``graph+flush`` says the
  kernels themselves run slower back to back (clocks, or no flush between calls); a low busy fraction says the
  GPU waited on the host.

A same-byte device copy gets the same timings as the card's own reference. Every timing runs before any
profiling (a first version profiled each row right after timing it, and its later rows' eager loops read 1.4-2.0x
those of a call that profiled last: the profiler may leave a cost on later launches; not isolated).

    python benchmarks/eager_gap.py --op layer_norm rms_norm --shape 16384x10240 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from blockfuse.bench.timing import l2_flush, time_cuda_graph, time_cuda_loop


def _fwdbwd(op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor, provider: str):
    import blockfuse
    import torch.nn.functional as F

    n = x.shape[-1]
    if provider == "blockfuse":  # (else PyTorch's ops, eager or under torch.compile)
        fns = {"layer_norm": lambda t: blockfuse.layer_norm(t, w, b), "rms_norm": lambda t: blockfuse.rms_norm(t, w),
               "layer_norm_gelu": lambda t: blockfuse.layer_norm_gelu(t, w, b)}
    else:
        fns = {"layer_norm": lambda t: F.layer_norm(t, (n,), w, b),
               "rms_norm": lambda t: F.rms_norm(t, (n,), w, 1e-6),
               "layer_norm_gelu": lambda t: F.gelu(F.layer_norm(t, (n,), w, b), approximate="tanh")}
    fn = fns[op]
    if provider == "compile":
        fn = torch.compile(fn, dynamic=False)  # (one compile a shape: no dynamic-shape kernels)
    leaves = [x, w, b] if op != "rms_norm" else [x, w]

    def call():
        torch.autograd.grad(fn(x), leaves, dy)

    return call


def _graph_loop_ms(call, calls: int) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    graph.replay()
    samples = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    del graph
    return statistics.median(samples)


def _profiled_loop(call, calls: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0]
    if not kernels:
        return {}
    busy_us = sum(e.device_time for e in kernels)
    starts = [e.time_range.start for e in kernels]
    ends = [e.time_range.end for e in kernels]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name[:80], []).append(e.device_time)
    return {"kernel_ms_per_call": busy_us / 1e3 / calls, "busy_fraction": busy_us / max(max(ends) - min(starts), 1),
            "kernels": {k: {"n": len(v), "median_us": statistics.median(v)} for k, v in by_name.items()}}


def _clock_mhz() -> float | None:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:
        return None


def host_ms(call, calls: int = 50) -> float:
    """The host's time a call: ``calls`` calls queued behind a spin kernel long enough that the GPU never drains."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e6 * calls * 2))  # ~2 ms a call at ~2 GHz: longer than any host call here
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = (time.perf_counter() - start) * 1e3 / calls
    torch.cuda.synchronize()
    return elapsed


def measure(label: str, call, calls: int = 50) -> dict:
    """Every timing of ``call`` but the profiled one (see the module's docstring)."""
    flush = l2_flush()

    def body():
        flush()
        call()

    row = {"label": label}
    row["graph_flush_ms"] = time_cuda_graph(body, flush, reps=10, samples=15).median
    row["graph_loop_ms"] = _graph_loop_ms(call, calls)
    row["eager_loop_ms"] = time_cuda_loop(call, calls=calls, samples=9).median
    row["host_ms"] = statistics.median(host_ms(call, calls) for _ in range(5))
    row["sm_clock_mhz"] = _clock_mhz()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", nargs="+", default=["layer_norm", "rms_norm"])
    parser.add_argument("--shape", nargs="+", default=["16384x10240"])
    parser.add_argument("--providers", default="blockfuse,compile,eager")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows, calls = [], []
    for shape in args.shape:
        m, n = (int(v) for v in shape.split("x"))
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = (1 + 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)).requires_grad_()
        b = (0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)).requires_grad_()
        dy = torch.randn_like(x)
        dst = torch.empty(3 * m * n, device="cuda", dtype=torch.bfloat16)
        src = torch.randn_like(dst)
        calls.append((f"copy {3 * m * n * 2 / 2**20:.0f} MiB", lambda dst=dst, src=src: dst.copy_(src)))
        for op in args.op:
            for provider in args.providers.split(","):
                calls.append((f"{op} {shape} {provider}", _fwdbwd(op, x, w, b, dy, provider)))
    for label, call in calls:  # every timing first, then the profiler (the module's docstring)
        rows.append(measure(label, call))
    for row, (_, call) in zip(rows, calls):
        row.update(_profiled_loop(call, 50))
    for row in rows:
        print(f"{row['label']:36s} graph+flush {row['graph_flush_ms']:.4f}  graph loop {row['graph_loop_ms']:.4f}  "
              f"eager loop {row['eager_loop_ms']:.4f}  host {row['host_ms']:.4f}  (profiled: kernels "
              f"{row.get('kernel_ms_per_call', 0):.4f}, busy {row.get('busy_fraction', 0):.2f})  "
              f"clock {row['sm_clock_mhz']}")
        for name, k in sorted(row.get("kernels", {}).items(), key=lambda kv: -kv[1]["median_us"] * kv[1]["n"])[:4]:
            print(f"    {k['n']:4d} x {k['median_us']:8.1f} us  {name}")
    meta = {"card": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton
    meta["triton"] = triton.__version__
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
