"""Is a training step bound by its host? A step timed back to back (as ``blockfuse bench block`` does), then again
with the GPU given a head start each step: a spin kernel of known length (``torch.cuda._sleep``) queued before the
step's work.

    python benchmarks/host_slack.py te-4layer --layers 4 --linear fp8:tensorwise --providers fused,compile:default
        [--sleep-ms 0.5 1 2 4] [--json FILE]

A step bound by its GPU throughout takes the spin's length more (wall - spin = the step alone). Where the GPU
waited on the host within the step, the spin lets the host run that far ahead instead: wall - spin falls below
the step alone, and by how much says how long the GPU waited on the host in a step (up to the spin's length).
Each row: the median of 7 samples of 20 steps; the spin's own length is timed alone with CUDA events.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def spin_cycles_per_ms() -> float:
    cycles = 10_000_000
    torch.cuda._sleep(cycles)  # warm
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / start.elapsed_time(end)


def wall_ms(step, spin_cycles: int, steps: int = 20, samples: int = 7) -> float:
    per_step = []
    for _ in range(samples):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(steps):
            if spin_cycles:
                torch.cuda._sleep(spin_cycles)
            step()
        torch.cuda.synchronize()
        per_step.append((time.perf_counter() - began) * 1e3 / steps)
    return statistics.median(per_step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--providers", default="fused")
    parser.add_argument("--linear", default="bf16")
    parser.add_argument("--sleep-ms", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from blockfuse.bench.block import parse_linear, provider_module
    from blockfuse.models import build_model
    from blockfuse.nn.fp8 import clear_weight_cache

    per_ms = spin_cycles_per_ms()
    rows = []
    for provider in args.providers.split(","):
        eager, inputs = build_model(args.name, None, torch.bfloat16, "cuda", layers=args.layers, impl="eager")
        module, run = provider_module(eager, provider, parse_linear(args.linear))
        del eager
        x = inputs[0].detach().requires_grad_()
        dy = torch.randn_like(module(x, *inputs[1:]).detach())
        params = list(module.parameters())

        def step():
            for p in params:  # as bench block: an optimizer step would make the FP8 weight casts stale
                clear_weight_cache(p)
                p.grad = None
            x.grad = None
            run(x, *inputs[1:]).backward(dy)

        for _ in range(5):
            step()
        base = wall_ms(step, 0)
        print(f"{args.name} {args.linear} {provider}: step alone {base:.3f} ms")
        for sleep in args.sleep_ms:
            wall = wall_ms(step, int(sleep * per_ms))
            hidden = base - (wall - sleep)
            print(f"  spin {sleep:.1f} ms: wall {wall:.3f}, wall - spin {wall - sleep:.3f} ms "
                  f"(GPU waited on the host {hidden:+.3f} ms a step)")
            rows.append({"provider": provider, "spin_ms": sleep, "wall_ms": wall, "step_alone_ms": base,
                         "host_wait_ms": hidden})
        base_again = wall_ms(step, 0)
        print(f"  step alone again {base_again:.3f} ms")
        rows.append({"provider": provider, "spin_ms": 0.0, "wall_ms": base_again, "step_alone_ms": base,
                     "host_wait_ms": base - base_again})
        del module, run, x, inputs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"name": args.name, "layers": args.layers, "linear": args.linear,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
