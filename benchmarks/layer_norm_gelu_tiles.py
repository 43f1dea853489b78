"""Tile / warp / pipeline sweep of the LayerNorm + GELU kernels (the norm kernels with ACTIVATION set),
and of the plain LayerNorm backward's pipeline depth.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/layer_norm_gelu_tiles.py [--out DIR] [--shape MxN]
Times the launchers (no autograd) with CUDA-graph replays and the L2 flushed; prints the fraction of
copy bandwidth for each setting of the norm module's tuning constants, with the registers and spills
of the backward kernel each setting compiled to.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton

from blockfuse.bench.timing import copy_bandwidth, l2_flush, time_cuda_graph
from blockfuse.ops import norm

FORWARD = [  # (FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP): the forward's tile, shared with the plain norms
    (4096, 1024), (8192, 2048), (4096, 512), (8192, 1024),
]
# (elements per warp, programs per SM, register cap, pipeline stages) of the backward at 4096-element
# tiles: 4 warps (32 elements a thread), 8 warps (16) or 16 warps (8). A register cap of 128 lets two
# 8-warp programs share a multiprocessor (2 x 256 threads x 128 registers fill its 64K); stages 0 is
# no pipelining (the kernel prefetched the next row block into registers by hand before 2026-11-26),
# k > 1 tl.range's k-stage asynchronous copies.
ACT_BACKWARD = [
    (1024, 2, None, 1), (1024, 2, None, 3), (1024, 2, None, 4), (512, 2, 128, 1), (512, 2, 128, 3),
    (512, 2, 128, 4), (512, 2, 120, 3), (256, 1, None, 3),
]
PLAIN_BACKWARD = [(512, 2, None, 1), (512, 2, None, 3), (512, 2, None, 4)]
_ACT_NAMES = ("ACT_BWD_ELEMENTS_PER_WARP", "ACT_BWD_PROGRAMS_PER_SM", "ACT_BWD_MAXNREG", "ACT_BWD_STAGES")
_PLAIN_NAMES = ("BWD_ELEMENTS_PER_WARP", "BWD_PROGRAMS_PER_SM", None, "BWD_STAGES")


def _set(names, values) -> None:
    for name, value in zip(names, values):
        if name is not None:
            setattr(norm, name, value)


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
    gelu = norm.GELU_CODES["tanh"]
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "shape": [m, n], "copy_gbps": copy, "forward": [], "backward": []}
    moved_fwd = 2 * x.numel() * 2
    moved_bwd = 3 * x.numel() * 2

    fwd_defaults = norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP
    for tile, per_warp in FORWARD:
        norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP = tile, per_warp
        t = time_cuda_graph(lambda: (flush(), norm._norm_fwd(x, w, b, None, None, 1e-5, norm.NONE, 0.0, False,
                                                             False, gelu, True)), flush)
        row = {"activation": gelu, "tile": tile, "per_warp": per_warp, "ms": t.median,
               "frac_copy": moved_fwd / t.median / 1e6 / copy}
        results["forward"].append(row)
        print("fwd", row, flush=True)
    norm.FWD_TILE_ELEMENTS, norm.FWD_ELEMENTS_PER_WARP = fwd_defaults

    for activation, settings, names in ((gelu, ACT_BACKWARD, _ACT_NAMES), (0, PLAIN_BACKWARD, _PLAIN_NAMES)):
        _, mean, rstd = norm._norm_fwd(x, w, b, None, None, 1e-5, norm.NONE, 0.0, False, False, activation, True)
        defaults = [None if name is None else getattr(norm, name) for name in names]
        for setting in settings:
            _set(names, setting)
            norm._bwd_kernel.reset()
            t = time_cuda_graph(lambda: (flush(), norm._norm_bwd(dy, None, x, w, b, True, mean, rstd, None, norm.NONE,
                                                                 0.0, False, False, activation)), flush)
            compiled = norm._bwd_kernel.compiled()
            per_warp, per_sm, maxnreg, stages = setting
            row = {"activation": activation, "tile": norm.BWD_TILE_ELEMENTS, "per_warp": per_warp,
                   "programs_per_sm": per_sm, "maxnreg": maxnreg, "stages": stages,
                   "registers": [getattr(k, "n_regs", None) for k in compiled],
                   "spills": [getattr(k, "n_spills", None) for k in compiled],
                   "ms": t.median, "frac_copy": moved_bwd / t.median / 1e6 / copy}
            results["backward"].append(row)
            print("bwd", row, flush=True)
        _set(names, defaults)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "layer_norm_gelu_tiles.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
