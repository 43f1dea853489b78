"""Tile / warp sweep of the LayerNorm + GELU kernels (the norm kernels with ACTIVATION set).

Run on the GPU:  PYTHONPATH=src python3 benchmarks/layer_norm_gelu_tiles.py [--out DIR]
Times the launchers (no autograd) with CUDA-graph replays and the L2 flushed; prints the
fraction of copy bandwidth for each setting of the norm module's tuning constants, the plain
LayerNorm at the default setting beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton

from blockfuse.bench.timing import copy_bandwidth, l2_flush, time_cuda_graph
from blockfuse.ops import norm

FORWARD = [  # (FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP)
    (4096, 1024), (8192, 2048), (16384, 4096), (16384, 2048),
]
BACKWARD = [  # (BWD_TILE_ELEMENTS, BWD_ELEMENTS_PER_WARP, BWD_PROGRAMS_PER_SM)
    (4096, 512, 2), (4096, 1024, 1), (4096, 1024, 2), (4096, 1024, 3), (4096, 1024, 4),
    (8192, 1024, 1), (8192, 1024, 2), (8192, 2048, 2),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--shape", default="16384x4096")
    args = parser.parse_args()
    m, n = (int(v) for v in args.shape.split("x"))
    copy = copy_bandwidth()["gbps"]
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = 1 + 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    flush = l2_flush()
    gelu = norm._GELU_CODE["tanh"]
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "shape": [m, n], "copy_gbps": copy, "forward": [], "backward": []}
    moved_fwd = 2 * x.numel() * 2
    moved_bwd = 3 * x.numel() * 2
    defaults = (norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP, norm.BWD_TILE_ELEMENTS,
                norm.BWD_ELEMENTS_PER_WARP, norm.BWD_PROGRAMS_PER_SM)
    for activation in (gelu,):
        for tile, per_warp in FORWARD:
            norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP = tile, per_warp
            t = time_cuda_graph(lambda: (flush(), norm._norm_forward(x, w, b, None, None, 1e-5, "none", 0.0, False,
                                                                     False, activation)), flush)
            row = {"activation": activation, "tile": tile, "per_warp": per_warp, "ms": t.median,
                   "frac_copy": moved_fwd / t.median / 1e6 / copy}
            results["forward"].append(row)
            print("fwd", row, flush=True)
        norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP = defaults[:2]
        _, _, mean, rstd = norm._norm_forward(x, w, b, None, None, 1e-5, "none", 0.0, False, False, activation)
        for tile, per_warp, per_sm in BACKWARD:
            norm.BWD_TILE_ELEMENTS, norm.BWD_ELEMENTS_PER_WARP, norm.BWD_PROGRAMS_PER_SM = tile, per_warp, per_sm
            t = time_cuda_graph(lambda: (flush(), norm._norm_backward(dy, None, x, w, True, mean, rstd, None, "none",
                                                                      0.0, False, False, activation, b)), flush)
            row = {"activation": activation, "tile": tile, "per_warp": per_warp, "programs_per_sm": per_sm,
                   "ms": t.median, "frac_copy": moved_bwd / t.median / 1e6 / copy}
            results["backward"].append(row)
            print("bwd", row, flush=True)
        norm.BWD_TILE_ELEMENTS, norm.BWD_ELEMENTS_PER_WARP, norm.BWD_PROGRAMS_PER_SM = defaults[2:]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "layer_norm_gelu_tiles.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
