"""What is alive at the peak of a block's training step: allocations grouped by the line that made them.

    python benchmarks/memory_block.py reordered --impl fused [--compile default] [--layers 1] [--encoder] [--top 15]
        [--linear fp8:tensorwise|fp8:rowwise|torchao:tensorwise|torchao:rowwise]

Under ``--compile`` an allocation made by Inductor's generated code is shown with that code's line.

Records the CUDA caching allocator's history for one forward + backward after warm-up, replays the
trace to find the moment of peak allocated memory, and prints the live allocations there.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from profile_block import build  # benchmarks/: the script's own folder is on sys.path


def _source_line(path: str, line: int) -> str:
    import linecache

    return linecache.getline(path, line).strip()[:90]


def _frame(frames) -> str:
    """The innermost frame in blockfuse or torch.nn/autograd code, or in Inductor's generated code (with
    its text: the buffer it allocates): the line responsible."""
    for frame in frames:
        name = frame.get("filename", "")
        if "torchinductor" in name:
            return f"inductor {name.split('/')[-1]}:{frame.get('line')} {_source_line(name, frame.get('line', 0))}"
        if "blockfuse" in name or "torch/nn/modules" in name:
            return f"{name.split('/')[-1]}:{frame.get('line')} {frame.get('name')}"
    return "(autograd engine / C++)" if frames else "(no stack)"


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
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    step()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for trace in snapshot["device_traces"] for e in trace if e["action"] in ("alloc", "free_completed")]
    live: dict[int, tuple[int, str]] = {}
    current = peak = 0
    peak_live: dict[int, tuple[int, str]] = {}
    for event in events:
        if event["action"] == "alloc":
            live[event["addr"]] = (event["size"], _frame(event.get("frames", [])))
            current += event["size"]
        elif event["addr"] in live:
            current -= live.pop(event["addr"])[0]
        if current > peak:
            peak, peak_live = current, dict(live)
    groups: dict[str, list[int]] = defaultdict(list)
    for size, where in peak_live.values():
        groups[where].append(size)
    label = (f"{args.name}{' encoder' if args.encoder else ''} layers={layers} impl={args.impl} compile={args.compile} "
             f"linear={args.linear}")
    print(f"{label}: peak {peak / 2**20:.0f} MiB allocated during the step above {before / 2**20:.0f} MiB")
    for where, sizes in sorted(groups.items(), key=lambda item: -sum(item[1]))[: args.top]:
        print(f"{sum(sizes) / 2**20:8.1f} MiB {len(sizes):3d}x  {where}")


if __name__ == "__main__":
    main()
