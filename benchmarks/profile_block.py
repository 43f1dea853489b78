"""Where a block's time goes: the GPU kernels of one training step (or inference forward), per provider.

    python benchmarks/profile_block.py reordered --impl fused [--compile default] [--mode fwdbwd] [--top 25]

Prints the profiler's table of CUDA kernels (total time, calls) for one step after warm-up.
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from blockfuse.models import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("--impl", default="fused", choices=("eager", "fused"))
    parser.add_argument("--compile", default=None, help="torch.compile mode (default: no compile)")
    parser.add_argument("--mode", default="fwdbwd", choices=("infer", "fwdbwd"))
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cpu", action="store_true", help="also the host side: ops by self CPU time, and wall ms per step")
    args = parser.parse_args()
    module, inputs = build_model(args.name, None, torch.bfloat16, "cuda", layers=args.layers, impl=args.impl)
    run = torch.compile(module, mode=args.compile) if args.compile else module
    x = inputs[0].detach().requires_grad_()
    dy = torch.randn_like(x)

    def step():
        if args.mode == "infer":
            with torch.no_grad():
                run(x, *inputs[1:])
        else:
            run(x, *inputs[1:]).backward(dy)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if args.cpu:
        import time

        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(20):
            step()
        host = (time.perf_counter() - began) / 20 * 1e3
        torch.cuda.synchronize()
        wall = (time.perf_counter() - began) / 20 * 1e3
        print(f"host {host:.3f} ms per step to enqueue, {wall:.3f} ms per step with the GPU")
        with profile(activities=[ProfilerActivity.CPU]) as cpu_prof:
            step()
            torch.cuda.synchronize()
        print(cpu_prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.self_device_time_total for e in events)
    print(f"{args.name} impl={args.impl} compile={args.compile} mode={args.mode}: {total / 1e3:.3f} ms of kernels, "
          f"{sum(e.count for e in events)} launches")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[: args.top]:
        print(f"{e.self_device_time_total / 1e3:8.3f} ms {e.count:4d}x  {e.key[:110]}")


if __name__ == "__main__":
    main()
