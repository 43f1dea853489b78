"""What cuBLASLt's bias epilogue costs at the blocks' GEMM shapes: ``torch.mm`` against ``torch.addmm``.

    PYTHONPATH=src python benchmarks/bias_epilogue.py [--out DIR]

Why: at [65536, 1152] x [1152, 4304] bf16 on an H200, ``addmm`` with a bias took 1.03 ms against
0.86 ms for ``mm`` (benchmarks/epilogue_variants.py): the bias epilogue steered cuBLASLt to a slower
kernel. If that holds at the blocks' other shapes, a bias is cheaper added where its consumer
already reads the GEMM's output (a norm, an activation kernel). Each row: median ms (``do_bench``,
L2 flushed) of ``mm``, ``addmm`` and ``mm`` followed by an in-place broadcast add of the bias.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from blockfuse.bench.timing import time_cuda

# (workload, GEMM, tokens, K, N): forward GEMMs of one block (x @ W.T, W (N, K)).
SHAPES = (
    ("siglip2", "qkv", 65536, 1152, 3456),
    ("siglip2", "o_proj", 65536, 1152, 1152),
    ("siglip2", "fc1", 65536, 1152, 4304),
    ("siglip2", "fc2", 65536, 4304, 1152),
    ("siglip2", "fc2 (16384-row block)", 16384, 4304, 1152),
    ("reordered", "qkv", 8192, 1024, 3072),
    ("reordered", "o_proj", 8192, 1024, 1024),
    ("reordered", "gate|up", 8192, 1024, 8192),
    ("reordered", "down", 8192, 4096, 1024),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16")
    for workload, gemm, m, k, n in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        times = {
            "mm": time_cuda(lambda: torch.mm(x, w.t()), warmup_ms=25, rep_ms=150).median,
            "addmm": time_cuda(lambda: torch.addmm(b, x, w.t()), warmup_ms=25, rep_ms=150).median,
            "mm + add_": time_cuda(lambda: torch.mm(x, w.t()).add_(b), warmup_ms=25, rep_ms=150).median,
        }
        row = {"workload": workload, "gemm": gemm, "shape": [m, k, n], **{f"{key}_ms": v for key, v in times.items()},
               "addmm_over_mm": times["addmm"] / times["mm"]}
        rows.append(row)
        print(f"{workload:10s} {gemm:24s} [{m}, {k}] x [{k}, {n}]  mm {times['mm']:.4f}  addmm {times['addmm']:.4f}  "
              f"mm+add_ {times['mm + add_']:.4f} ms  addmm/mm {row['addmm_over_mm']:.3f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "bias_epilogue.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
