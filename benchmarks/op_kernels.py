"""The kernels each provider of an op benchmark launches in one call, with their GPU times (torch profiler).

Run on the GPU:  PYTHONPATH=src python3 benchmarks/op_kernels.py swiglu:2048x1024 geglu:2048x1536 ...
    [--modes fwd,fwdbwd] [--providers compile,liger,blockfuse] [--calls 5] [--out FILE.json]

A sweep cell says only that a provider's call took longer than a peer's (`blockfuse bench ops --sweep`). This runs
each provider as the op benchmark's runner times it (``runner.Case``: the same inputs, the forward in no_grad, or
forward and ``autograd.grad``; the L2 flushed before each call), ``--calls`` times under the profiler, and prints for
the last call every kernel in launch order with its duration (CUPTI), their sum, and the span from the first kernel's
start to the last one's end: an extra kernel, a slower one, or gaps between them.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from blockfuse.bench import runner, timing
from blockfuse.bench.runner import DTYPES, Case, Reference


def _case(name: str, shape: tuple, provider: str, device: str = "cuda") -> Case:
    """``provider`` of op benchmark ``name`` at ``shape`` in bf16, as the runner builds it."""
    bench = next(b for b in runner.declared_ops() if b.name == name)
    settings = runner.Settings(dtype="bf16", modes=("fwd",), providers=(provider,), shapes=(shape,), quick=False,
                               device=torch.device(device))
    torch.manual_seed(0)
    torch.compiler.reset()
    inputs = bench.make_inputs(shape, DTYPES["bf16"], settings.device)
    return Case(bench, bench.providers[provider](), inputs, Reference(bench, inputs, DTYPES["bf16"]), settings)


def kernels(case: Case, mode: str, calls: int) -> list[dict]:
    """The last of ``calls`` profiled calls' kernels: name, start (us from the first), duration (us)."""
    setup, call, leaves = case.callable(mode)
    flush = timing.l2_flush()

    def once():
        for tensor in leaves:
            tensor.grad = None
        state = setup() if setup is not None else None
        flush()
        torch.cuda._sleep(1000)  # a marker: the kernels after the last one are the call's
        torch.cuda.synchronize()
        call(state) if setup is not None else call()
        torch.cuda.synchronize()

    for _ in range(3):  # compiles, autotunes
        once()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                            torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            once()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    # the last call's kernels: those after the last marker
    markers = [i for i, e in enumerate(events) if "spin" in e.name.lower() or "sleep" in e.name.lower()]
    last = events[markers[-1] + 1:] if markers else events
    if not last:
        return []
    start = last[0].time_range.start
    return [dict(name=e.name, start_us=e.time_range.start - start, us=e.time_range.elapsed_us()) for e in last]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="+", metavar="OP:MxN", help="e.g. swiglu:2048x1024")
    ap.add_argument("--modes", default="fwd,fwdbwd")
    ap.add_argument("--providers", default="compile,liger,blockfuse")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    out = []
    for cell in args.cells:
        name, _, dims = cell.partition(":")
        shape = tuple(int(v) for v in dims.split("x"))
        for mode in args.modes.split(","):
            for provider in args.providers.split(","):
                try:
                    listed = kernels(_case(name, shape, provider), mode, args.calls)
                except Exception as error:  # noqa: BLE001 (a provider the op does not have, say)
                    print(f"{name} {dims} {mode} {provider}: {type(error).__name__}: {error}"[:200])
                    continue
                total = sum(k["us"] for k in listed)
                span = max((k["start_us"] + k["us"] for k in listed), default=0.0)
                print(f"{name} {dims} {mode} {provider}: {len(listed)} kernels, {total:.1f} us busy, "
                      f"{span:.1f} us span")
                for k in listed:
                    print(f"    {k['start_us']:8.1f} {k['us']:7.1f} us  {k['name'][:110]}")
                out.append(dict(op=name, shape=shape, mode=mode, provider=provider, kernels=listed, busy_us=total,
                                span_us=span))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
