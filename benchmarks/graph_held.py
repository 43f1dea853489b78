"""What a block's autograd graph holds for its backward, eagerly and compiled: every storage the graph keeps after
the forward (saved tensors and tensors on a Function's ctx, parameters left out), side by side.

    TRITON_INTERPRET=1 python benchmarks/graph_held.py te-4layer [--linear fp8:delayed] [--shape 2x64x256]
        [--d-model 256 --heads 4 --ffn 512] [--top 12]

Why: a compiled block's peak can pass its eager one's (te-4layer with FP8 delayed Linear layers: 3862 against 3133
MiB on an H200, benchmarks/results/fp8/20-traced-inline-asm-2026-12-02-h200/), and the question is which tensors the
compiled graph keeps that eager does not. That is a property of the graph, not of the card: it is read here on the
CPU, with the kernels in Triton's interpreter, the block made small. "Compiled" is ``torch.compile(fullgraph=True)``
with AOTAutograd's min-cut partition (Inductor's) and no code generation, so the saved set is the one Inductor would
get. Prints each side's count and bytes, the largest storages, and the (shape, dtype) held by one side only.
"""

from __future__ import annotations

import argparse
import collections
from dataclasses import replace

import torch

from blockfuse.models import PRESETS, TransformerBlock, convert


def _tensors(value, depth: int = 0):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)) and depth < 3:
        for item in value:
            yield from _tensors(item, depth + 1)
    elif isinstance(value, dict) and depth < 3:
        for item in value.values():
            yield from _tensors(item, depth + 1)


def held_storages(out: torch.Tensor, exclude: set[int]) -> dict[int, tuple]:
    """``{storage pointer: (bytes, shape, dtype, node)}`` of every tensor the graph behind ``out`` keeps: a C++
    node's ``_saved_*`` attributes, a Function's ``saved_tensors`` and the tensors on its ctx (lists and dicts
    searched three deep); storages in ``exclude`` (the parameters) left out."""
    seen, held, stack = set(), {}, [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        values = [getattr(node, name, None) for name in dir(node) if name.startswith("_saved_")]
        try:
            values.append(node.saved_tensors)
        except (AttributeError, RuntimeError):
            pass
        values.extend(getattr(node, "__dict__", {}).values())
        for t in _tensors(values):
            storage = t.untyped_storage()
            pointer = storage.data_ptr()
            if pointer and pointer not in exclude:
                held[pointer] = (storage.nbytes(), tuple(t.shape), str(t.dtype).replace("torch.", ""),
                                 type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("--linear", default="bf16", help="bf16, or fp8:RECIPE (blockfuse.fp8.convert)")
    parser.add_argument("--shape", default="2x64x256", help="batch x seq x d_model of the input")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    batch, seq, width = (int(v) for v in args.shape.split("x"))
    config = replace(PRESETS[args.preset].config, d_model=width, n_heads=args.heads, ffn_hidden=args.ffn)
    torch.manual_seed(0)
    block = convert(TransformerBlock(config, "eager").bfloat16(), "fused")
    if args.linear != "bf16":
        import blockfuse.fp8

        block = blockfuse.fp8.convert(block, recipe=args.linear.split(":", 1)[1])
    backend = aot_autograd(fw_compiler=lambda gm, _: gm, bw_compiler=lambda gm, _: gm,
                           partition_fn=min_cut_rematerialization_partition)
    x = torch.randn(batch, seq, width).bfloat16()
    parameters = {p.untyped_storage().data_ptr() for p in block.parameters()}
    kinds = {}
    print(f"{args.preset}, {args.linear} Linear layers, input {args.shape} bf16, torch {torch.__version__}")
    for name, run in (("eager", block), ("compiled", torch.compile(block, backend=backend, fullgraph=True))):
        run(x.clone().requires_grad_()).float().sum().backward()  # first: compiles, casts and caches
        out = run(x.clone().requires_grad_())
        held = held_storages(out, parameters).values()
        kinds[name] = collections.Counter((shape, dtype, nbytes) for nbytes, shape, dtype, _ in held)
        print(f"  {name:8s} {len(held):3d} storages, {sum(h[0] for h in held):10d} bytes held for the backward")
        for nbytes, shape, dtype, node in sorted(held, key=lambda h: -h[0])[:args.top]:
            print(f"      {nbytes:9d}  {str(shape):18s} {dtype:14s} {node}")
    for one, other in (("compiled", "eager"), ("eager", "compiled")):
        only = sorted((kinds[one] - kinds[other]).elements(), key=lambda k: -k[2])
        print(f"  held by {one} only: {sum(k[2] for k in only)} bytes: "
              + (", ".join(f"{shape} {dtype}" for shape, dtype, _ in only) or "nothing"))


if __name__ == "__main__":
    main()
