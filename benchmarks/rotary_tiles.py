"""Tile sweep of the RoPE kernel, forward and backward, at the benchmark's shapes (q and k, bf16,
Hugging Face's duplicated bf16 cos / sin tables, as ``blockfuse bench ops --op rotary`` runs them), in the
"bhsd" layout the benchmark uses and in "bshd".

Variants: tile elements / elements per warp (``rotary.TILES``; the grid shapes it once compared are in
benchmarks/NOTES.md, "Rotary grid"). Each row: kernel time (CUDA-graph replays, L2 flushed) and fraction of the copy bandwidth measured
in the same run. Run on the GPU:  PYTHONPATH=src python3 benchmarks/rotary_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from pathlib import Path

import _sweep
import torch

from blockfuse.bench.rotary import rotary_bytes, tables
from blockfuse.bench.timing import copy_bandwidth, l2_flush
from blockfuse.ops import rotary as rotary_module

SHAPES = [(4, 2048, 32, 32, 128), (8, 4096, 32, 8, 128), (1, 128, 16, 16, 64)]  # batch, seq, q heads, kv heads, dim
TILES = [(1024, 256), (2048, 256), (2048, 512), (4096, 512)]  # (tile_elements, elements_per_warp)
LAYOUTS = ["bhsd", "bshd"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="the default tile only")
    args = parser.parse_args()
    flush = l2_flush()
    copy = copy_bandwidth()
    results = _sweep.header(copy["gbps"])
    default = rotary_module.TILES
    tiles = [(default.tile_elements, default.elements_per_warp)] if args.quick else TILES
    for (b, s, hq, hk, d), layout in itertools.product(SHAPES, LAYOUTS):
        shape = (b, s, hq, hk, d)
        sizes = (lambda h: (b, h, s, d)) if layout == "bhsd" else (lambda h: (b, s, h, d))
        q = torch.randn(sizes(hq), device="cuda", dtype=torch.bfloat16)
        k = torch.randn(sizes(hk), device="cuda", dtype=torch.bfloat16)
        dq, dk = torch.randn_like(q), torch.randn_like(k)
        cos, sin = tables(s, d, torch.bfloat16, q.device)
        args_of = (cos, sin, None, 0, d, False, layout, layout)
        for tile, per_warp in tiles:
            variant = dataclasses.replace(default, tile_elements=tile, elements_per_warp=per_warp)
            with _sweep.constants(rotary_module, TILES=variant):
                times = _sweep.forward_backward(lambda: rotary_module._rotary_fwd(q, k, *args_of),
                                                lambda: rotary_module._rotary_bwd(dq, dk, *args_of, (), ()),
                                                flush, *rotary_bytes(shape, 2), copy["gbps"])
            _sweep.add(results, {"shape": list(shape), "layout": layout, "tile": tile, "per_warp": per_warp, **times})
    _sweep.write(args.out, "rotary_tiles.json", results)


if __name__ == "__main__":
    main()
