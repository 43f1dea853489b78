"""Tile sweep of the RoPE kernel at small and large shapes (q and k, bhsd, bf16), against torch.compile
of the reference. Run on the GPU:  PYTHONPATH=src python3 benchmarks/rotary_tiles.py [--out DIR]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton

from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import rotary as rotary_module

SHAPES = [(1, 128, 16, 16, 64), (1, 512, 32, 8, 128), (4, 2048, 32, 32, 128),
          (8, 4096, 32, 8, 128)]  # batch, seq, q heads, kv heads, dim
# (TILE_ELEMENTS, ELEMENTS_PER_WARP)
TILES = [(4096, 1024), (2048, 512), (1024, 256), (2048, 256), (1024, 128), (4096, 512)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    flush = l2_flush()
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": []}
    defaults = rotary_module.TILE_ELEMENTS, rotary_module.ELEMENTS_PER_WARP
    for b, s, hq, hk, d in SHAPES:
        q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16)
        angles = torch.randn(s, d // 2, device="cuda")
        cos, sin = angles.cos(), angles.sin()
        compiled = torch.compile(rotary_module.rotary_ref)
        t = time_cuda_graph(lambda: (flush(), compiled(q, k, cos, sin, layout="bhsd")), flush)
        row = {"shape": [b, s, hq, hk, d], "provider": "compile", "us": 1e3 * t.median}
        results["rows"].append(row)
        print(row, flush=True)
        for tile, per_warp in TILES:
            rotary_module.TILE_ELEMENTS, rotary_module.ELEMENTS_PER_WARP = tile, per_warp
            t = time_cuda_graph(lambda: (flush(), rotary_module.rotary(q, k, cos, sin, layout="bhsd")), flush)
            row = {"shape": [b, s, hq, hk, d], "provider": "blockfuse", "tile": tile, "per_warp": per_warp,
                   "us": 1e3 * t.median}
            results["rows"].append(row)
            print(row, flush=True)
        rotary_module.TILE_ELEMENTS, rotary_module.ELEMENTS_PER_WARP = defaults
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rotary_tiles.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
