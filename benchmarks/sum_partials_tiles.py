"""Launch settings of the column sum of per-program partials (``ops/reduce.py``), the one-launch reduction after
every op that sums a bias or weight gradient over rows (te-4layer's delayed-FP8 step makes 24 a step, 5-9 us
each on an H200: ``results/fp8/29-*/first/``).

Run on the GPU:  PYTHONPATH=src python3 benchmarks/sum_partials_tiles.py [--out FILE.json]

For each (G partial rows, N columns) the kernel is timed in CUDA-graph replays of ``REPS`` launches back to back
(the partials stay in L2, as in a step, where the op that wrote them ran just before), at each (BLOCK_N, BLOCK_G,
num_warps) of ``TILES`` and at the shipped one (``reduce.sum_tile``, "shipped"); every variant's sums are checked
against a float64 sum of the same partials.
"""

from __future__ import annotations

import argparse
import json
import warnings

import torch

from blockfuse.bench.timing import time_cuda_graph
from blockfuse.ops import reduce
from blockfuse.ops.launch import cdiv

TILES = [(32, 64, 4), (16, 64, 4), (16, 128, 4), (16, 256, 4), (16, 256, 8), (32, 128, 4), (32, 256, 8),
         (64, 256, 8), (8, 256, 4), (8, 128, 2), (16, 128, 2)]
SHAPES = [(g, n) for g in (64, 128, 256, 264) for n in (1152, 2048, 4096, 6144, 8192, 14336)]
REPS = 20


def launch(partial, first, block_n, block_g, warps):
    g, n = partial.shape[1], partial.shape[2]
    reduce._kernel((cdiv(n, block_n),), partial, first, None, None, None, g, n, 0, HAS_FIRST=True,
                   HAS_SECOND=False, HAS_ROLL=False, BLOCK_G=block_g, BLOCK_N=block_n, BLOCK_H=1, num_warps=warps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="The CUDA Graph is empty")  # the baseline graph: nothing in it
    rows = []
    for g, n in SHAPES:
        partial = torch.randn((1, g, n), device="cuda", dtype=torch.float32)
        expected = partial[0].double().sum(0)
        first = torch.empty((n,), device="cuda", dtype=torch.float32)
        shipped = reduce.sum_tile(n, True)
        cells = {}
        for tile in [*TILES, shipped]:
            name = "shipped" if tile is shipped else "x".join(map(str, tile))
            launch(partial, first, *tile)
            error = ((first.double() - expected).abs().max() / expected.abs().max()).item()
            timing = time_cuda_graph(lambda t=tile: [launch(partial, first, *t) for _ in range(REPS)], lambda: None)
            cells[name] = {"tile": list(tile), "us": timing.median * 1e3 / REPS, "max_rel_err": error}
        best = min(cells, key=lambda k: cells[k]["us"])
        rows.append({"g": g, "n": n, "cells": cells, "best": best})
        print(f"G {g:4d} N {n:6d}: old 32x64x4 {cells['32x64x4']['us']:6.2f} us, shipped "
              f"{'x'.join(map(str, shipped))} {cells['shipped']['us']:6.2f} us, "
              f"best {best} {cells[best]['us']:6.2f} us (err {cells['shipped']['max_rel_err']:.1e})", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": REPS,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
