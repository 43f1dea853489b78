"""Tile / warp sweep of the SwiGLU and GeGLU kernels (forward and backward), with torch.compile's and
Liger's SwiGLU forward timed beside them.

Run on the GPU:  PYTHONPATH=src:<liger> python3 benchmarks/gated_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import _sweep
import torch

from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import gated

SHAPES = [(2048, 1024), (16384, 4096), (8192, 14336)]
TILES = [(4096, 1024, 512), (1024, 256, 256), (2048, 512, 256), (8192, 1024, 512)]
# (tile elements, forward elements per warp, backward elements per warp)
ACTIVATIONS = ["silu", "gelu_tanh"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    flush = l2_flush()
    results = _sweep.header()
    try:
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    except ImportError:
        LigerSiLUMulFunction = None
    for m, n in SHAPES:
        g, u = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        dy = torch.randn_like(g)
        compiled = torch.compile(gated.swiglu_ref)
        peers = {"compile": lambda: compiled(g, u)}
        if LigerSiLUMulFunction is not None:
            peers["liger"] = lambda: LigerSiLUMulFunction.apply(g, u)
        for name, fn in peers.items():
            t = time_cuda_graph(lambda fn=fn: (flush(), fn()), flush)
            _sweep.add(results, {"shape": [m, n], "provider": name, "mode": "fwd", "us": 1e3 * t.median})
        for (tile, fwd_per_warp, bwd_per_warp), act in itertools.product(TILES, ACTIVATIONS):
            with _sweep.constants(gated, FWD_TILE_ELEMENTS=tile, BWD_TILE_ELEMENTS=tile,
                                  FWD_ELEMENTS_PER_WARP=fwd_per_warp, BWD_ELEMENTS_PER_WARP=bwd_per_warp):
                t = time_cuda_graph(lambda: (flush(), gated._gated_forward(g, u, act)), flush)
                tb = time_cuda_graph(lambda: (flush(), gated._gated_backward(dy, g, u, act, True, True)), flush)
            _sweep.add(results, {"shape": [m, n], "provider": "blockfuse", "activation": act, "tile": tile,
                                 "fwd_per_warp": fwd_per_warp, "bwd_per_warp": bwd_per_warp,
                                 "fwd_us": 1e3 * t.median, "bwd_us": 1e3 * tb.median})
    _sweep.write(args.out, "gated_tiles.json", results)


if __name__ == "__main__":
    main()
