"""What is alive at the peak of a block's training step: allocations grouped by the line that made them.

    python benchmarks/memory_block.py reordered --impl fused [--compile default] [--layers 1] [--encoder] [--top 15]
        [--linear fp8:tensorwise|fp8:rowwise|torchao:tensorwise|torchao:rowwise]

Under ``--compile`` an allocation made by Inductor's generated code is shown with that code's line.

Records the CUDA caching allocator's history for one forward + backward after warm-up, replays the
trace to find the moment of peak allocated memory, and prints the live allocations there.
"""

from __future__ import annotations

import argparse

import torch

from blockfuse.bench.memory import snapshot_call
from profile_block import build  # benchmarks/: the script's own folder is on sys.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("--impl", default="fused", choices=("eager", "fused"))
    parser.add_argument("--compile", default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--layers", type=int, default=None, help="default: 1, or the preset's for --encoder")
    parser.add_argument("--encoder", action="store_true", help="siglip2: the whole encoder on NaFlex inputs")
    parser.add_argument("--linear", default="bf16", help="the Linear layers, as `blockfuse bench block --linear`")
    args = parser.parse_args()
    layers = args.layers if args.layers is not None else (4 if args.encoder else 1)
    if args.linear == "bf16":
        module, inputs = build(args.name, args.impl, layers, args.encoder)
    else:  # the bench's own conversions (to fused, then blockfuse.fp8.convert or torchao's) of the eager module
        from blockfuse.bench.block import provider_module

        eager, inputs = build(args.name, "eager", layers, args.encoder)
        module, _ = provider_module(eager, "fused" if args.impl == "fused" else "eager", args.linear)
        del eager
    run = torch.compile(module, mode=args.compile) if args.compile else module
    x = inputs[0].detach().requires_grad_()
    dy = torch.randn_like(module(x, *inputs[1:]).detach())  # the output's shape (the encoder's differs)

    def step():
        x.grad = None
        for p in module.parameters():
            p.grad = None
        run(x, *inputs[1:]).backward(dy)

    for _ in range(3):
        step()
    x.grad = None
    for p in module.parameters():
        p.grad = None
    result = snapshot_call(step, top=args.top)
    label = (f"{args.name}{' encoder' if args.encoder else ''} layers={layers} impl={args.impl} compile={args.compile} "
             f"linear={args.linear}")
    print(f"{label}: peak {result['peak_mib']:.0f} MiB allocated during the step above {result['before_mib']:.0f} MiB")
    for group in result["at_peak"]:
        print(f"{group['mib']:8.1f} MiB {group['count']:3d}x  {group['where']}")


if __name__ == "__main__":
    main()
