"""Tile sweep of the bias + dropout + residual kernels (forward and backward, p = 0.1, with bias, bf16).

Each row: kernel time (CUDA-graph replays, L2 flushed) and fraction of the copy bandwidth measured in the
same run (forward: reads x and residual, writes out; backward: reads dy, writes dx, the bias gradient's
partial sums aside). Run on the GPU:  PYTHONPATH=src python3 benchmarks/bias_dropout_add_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
from pathlib import Path

import _sweep
import torch

from blockfuse.bench.timing import copy_bandwidth, l2_flush
from blockfuse.ops import bias_dropout_add as bda
from blockfuse.ops.dropout import draw_seed

SHAPES = [(16384, 4096), (2048, 1024)]
TILES = [(4096, 1024), (1024, 256), (2048, 512), (2048, 256), (4096, 512), (8192, 1024)]
# (tile elements, elements per warp), given to the forward and the backward alike


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    flush = l2_flush()
    copy = copy_bandwidth()
    results = _sweep.header(copy["gbps"])
    p = 0.1
    for m, n in SHAPES:
        x, residual, dy = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        seed = draw_seed("cuda")
        for tile, per_warp in TILES:
            with _sweep.constants(bda, FWD_TILE_ELEMENTS=tile, FWD_ELEMENTS_PER_WARP=per_warp, BWD_TILE_ELEMENTS=tile,
                                  BWD_ELEMENTS_PER_WARP=per_warp):
                times = _sweep.forward_backward(lambda: bda._forward(x, bias, residual, seed, p),
                                                lambda: bda._backward(dy, seed, p, bias.dtype, True),
                                                flush, 3 * m * n * 2, 2 * m * n * 2, copy["gbps"])
            _sweep.add(results, {"shape": [m, n], "tile": tile, "per_warp": per_warp, **times})
    _sweep.write(args.out, "bias_dropout_add_tiles.json", results)


if __name__ == "__main__":
    main()
