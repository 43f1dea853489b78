"""Tile and grid sweep of the RoPE kernel, forward and backward, at the benchmark's shapes (q and k, bf16,
Hugging Face's duplicated bf16 cos / sin tables, as ``blockfuse bench ops --op rotary`` runs them), in the
"bhsd" layout the benchmark uses and in "bshd".

Variants: tile elements / elements per warp (``TILE_ELEMENTS``, ``ELEMENTS_PER_WARP``) and the grid shape
(``SPLIT_HEADS``: one head block a program; ``TOKENS_FIRST``: bhsd tiles spanning a head's consecutive
tokens). Each row: kernel time (CUDA-graph replays, L2 flushed) and fraction of the copy bandwidth measured
in the same run. Run on the GPU:  PYTHONPATH=src python3 benchmarks/rotary_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import _sweep
import torch

from blockfuse.bench.rotary import rotary_bytes, tables
from blockfuse.bench.timing import copy_bandwidth, l2_flush
from blockfuse.ops import rotary as rotary_module

SHAPES = [(4, 2048, 32, 32, 128), (8, 4096, 32, 8, 128), (1, 128, 16, 16, 64)]  # batch, seq, q heads, kv heads, dim
TILES = [(1024, 256), (2048, 256), (2048, 512), (4096, 512)]  # (TILE_ELEMENTS, ELEMENTS_PER_WARP)
GRIDS = [(False, False), (True, False), (False, True), (True, True)]  # (SPLIT_HEADS, TOKENS_FIRST)
LAYOUTS = ["bhsd", "bshd"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="the default tile only, every grid")
    args = parser.parse_args()
    flush = l2_flush()
    copy = copy_bandwidth()
    results = _sweep.header(copy["gbps"])
    tiles = [(rotary_module.TILE_ELEMENTS, rotary_module.ELEMENTS_PER_WARP)] if args.quick else TILES
    for (b, s, hq, hk, d), layout in itertools.product(SHAPES, LAYOUTS):
        shape = (b, s, hq, hk, d)
        sizes = (lambda h: (b, h, s, d)) if layout == "bhsd" else (lambda h: (b, s, h, d))
        q = torch.randn(sizes(hq), device="cuda", dtype=torch.bfloat16)
        k = torch.randn(sizes(hk), device="cuda", dtype=torch.bfloat16)
        dq, dk = torch.randn_like(q), torch.randn_like(k)
        cos, sin = tables(s, d, torch.bfloat16, q.device)
        args_of = (cos, sin, None, 0, d, False, layout, layout)
        for (tile, per_warp), (split, tokens_first) in itertools.product(tiles, GRIDS):
            if tokens_first and layout != "bhsd":
                continue
            with _sweep.constants(rotary_module, TILE_ELEMENTS=tile, ELEMENTS_PER_WARP=per_warp, SPLIT_HEADS=split,
                                  TOKENS_FIRST=tokens_first):
                times = _sweep.forward_backward(lambda: rotary_module._rotary_fwd(q, k, *args_of),
                                                lambda: rotary_module._rotary_bwd(dq, dk, *args_of, (), ()),
                                                flush, *rotary_bytes(shape, 2), copy["gbps"])
            _sweep.add(results, {"shape": list(shape), "layout": layout, "tile": tile, "per_warp": per_warp,
                                 "split_heads": split, "tokens_first": tokens_first, **times})
    _sweep.write(args.out, "rotary_tiles.json", results)


if __name__ == "__main__":
    main()
