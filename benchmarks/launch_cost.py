"""What each kernel launch of a block's training step costs the host, by kernel: blockfuse's Triton launches
(``ops/launch.Kernel``) and the ``torch._scaled_mm`` / SDPA calls timed one by one with ``time.perf_counter_ns``,
over STEPS steps of the eager step, twice: as the step runs (launches may wait for a full launch queue) and with
the device synchronized before each timed call (the launch alone, on an idle queue).

    PYTHONPATH=src python benchmarks/launch_cost.py te-4layer --layers 4 --linear fp8:delayed [--steps 10]
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/launch_cost.py reordered --shape 1x8x1024 --device cpu
        (a smoke test: the interpreter's times say nothing of a GPU's host)

Why: te-4layer's eager FP8 step took 20-28 ms of host a step on an H200 against 21.4 ms of kernels, and cProfile
put most of it inside Triton's launcher (benchmarks/results/fp8/18-host-2026-12-02-h200/).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict

import torch

from blockfuse.bench.block import parse_linear, provider_module
from blockfuse.models import build_model
from blockfuse.ops import launch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--linear", default="bf16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--shape", default=None, help="BxSxD (default: the preset's)")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu with TRITON_INTERPRET=1 (a smoke test)")
    parser.add_argument("--json", default=None, help="also write the passes' figures here")
    args = parser.parse_args()
    shape = tuple(int(v) for v in args.shape.split("x")) if args.shape else None
    cuda = args.device == "cuda"

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    eager, inputs = build_model(args.name, shape, torch.bfloat16, args.device, layers=args.layers, seed=0)
    module, run = provider_module(eager, "fused", parse_linear(args.linear))
    x = inputs[0].detach().requires_grad_()
    dy = torch.randn_like(module(x).detach())
    times: dict = defaultdict(list)
    state = {"sync": False}

    def timed_call(name, fn, *a, **k):
        if state["sync"]:
            synchronize()
        began = time.perf_counter_ns()
        result = fn(*a, **k)
        times[(state["sync"], name)].append((time.perf_counter_ns() - began) / 1e3)
        return result

    def timed(name, fn):
        return lambda *a, **k: timed_call(name, fn, *a, **k)

    kernel_call = launch.Kernel.__call__

    def kernel_timed(self, *a, **k):
        return timed_call(self.name, kernel_call, self, *a, **k)

    launch.Kernel.__call__ = kernel_timed
    scaled_mm, sdpa = torch._scaled_mm, torch.nn.functional.scaled_dot_product_attention
    torch._scaled_mm = timed("torch._scaled_mm", scaled_mm)
    torch.nn.functional.scaled_dot_product_attention = timed("sdpa", sdpa)
    from blockfuse.nn.fp8 import clear_weight_cache

    def step():
        for p in module.parameters():
            clear_weight_cache(p)
            p.grad = None
        x.grad = None
        run(x).backward(dy)

    for _ in range(3):
        step()
    times.clear()
    record = {"name": args.name, "layers": args.layers, "linear": args.linear, "steps": args.steps,
              "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__, "passes": []}
    for sync in (False, True):
        state["sync"] = sync
        synchronize()
        began = time.perf_counter()
        for _ in range(args.steps):
            step()
        host = (time.perf_counter() - began) / args.steps * 1e3
        synchronize()
        wall = (time.perf_counter() - began) / args.steps * 1e3
        rows = [(name, v) for (s, name), v in times.items() if s == sync]
        total = sum(sum(v) for _, v in rows) / args.steps / 1e3
        print(f"\n{args.name} x{args.layers} {args.linear}, {'synchronized before each call' if sync else 'as it runs'}:"
              f" host {host:.2f} ms a step, wall {wall:.2f}; the timed calls {total:.2f} ms a step")
        record["passes"].append({
            "synchronized": sync, "host_ms": host, "wall_ms": wall, "timed_ms": total,
            "calls": {name: {"per_step": len(v) / args.steps, "median_us": statistics.median(v),
                             "ms_per_step": sum(v) / args.steps / 1e3} for name, v in rows}})
        print(f"{'call':44s} {'a step':>7s} {'median us':>10s} {'p90 us':>8s} {'max us':>8s} {'ms a step':>10s}")
        for name, v in sorted(rows, key=lambda r: -sum(r[1]))[:args.top]:
            v = sorted(v)
            print(f"{name[:44]:44s} {len(v) / args.steps:7.1f} {statistics.median(v):10.1f} "
                  f"{v[math.ceil(0.9 * len(v)) - 1]:8.1f} {v[-1]:8.1f} {sum(v) / args.steps / 1e3:10.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
