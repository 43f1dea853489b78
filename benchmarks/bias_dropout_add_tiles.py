"""Tile sweep of the bias + dropout + residual kernels (forward and backward, p = 0.1, with bias, bf16).

Each row: kernel time (CUDA-graph replays, L2 flushed) and fraction of the copy bandwidth measured in the
same run (forward: reads x and residual, writes out; backward: reads dy, writes dx, the bias gradient's
partial sums aside). Run on the GPU:  PYTHONPATH=src python3 benchmarks/bias_dropout_add_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton

from blockfuse.bench.timing import copy_bandwidth, l2_flush, time_cuda_graph
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
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "copy_gbps": copy["gbps"], "rows": []}
    defaults = (bda.FWD_TILE_ELEMENTS, bda.FWD_ELEMENTS_PER_WARP, bda.BWD_TILE_ELEMENTS,
                bda.BWD_ELEMENTS_PER_WARP)
    p = 0.1
    for m, n in SHAPES:
        x, residual, dy = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        seed = draw_seed("cuda")
        fwd_bytes, bwd_bytes = 3 * m * n * 2, 2 * m * n * 2
        for tile, per_warp in TILES:
            bda.FWD_TILE_ELEMENTS, bda.FWD_ELEMENTS_PER_WARP = bda.BWD_TILE_ELEMENTS, bda.BWD_ELEMENTS_PER_WARP = (
                tile, per_warp)
            tf = time_cuda_graph(lambda: (flush(), bda._forward(x, bias, residual, seed, p)), flush)
            tb = time_cuda_graph(lambda: (flush(), bda._backward(dy, seed, p, bias.dtype, True)), flush)
            row = {"shape": [m, n], "tile": tile, "per_warp": per_warp, "fwd_us": 1e3 * tf.median,
                   "bwd_us": 1e3 * tb.median, "fwd_of_copy": fwd_bytes / (tf.median * 1e6) / copy["gbps"],
                   "bwd_of_copy": bwd_bytes / (tb.median * 1e6) / copy["gbps"]}
            results["rows"].append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        (bda.FWD_TILE_ELEMENTS, bda.FWD_ELEMENTS_PER_WARP, bda.BWD_TILE_ELEMENTS,
         bda.BWD_ELEMENTS_PER_WARP) = defaults
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bias_dropout_add_tiles.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
