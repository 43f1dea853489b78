"""Ways to run ``gelu_tanh(x @ W.T + b)`` through cuBLAS(Lt), against the GEMM alone.

    PYTHONPATH=src python benchmarks/epilogue_variants.py [--out DIR]

Why: at [65536, 1152] x [1152, 4304] bf16 the cuBLASLt GELU epilogue (``torch._addmm_activation``)
ran at 0.80x of the bare GEMM on an H200, against 0.97x at [16384, 4096] x [4096, 14336]. This
times variants that change what cuBLASLt's heuristic sees (weight layout, row chunks, ReLU
instead of GELU, no bias) so the slow case can be told apart from the epilogue's own cost.

Each row: median ms (``do_bench``, L2 flushed), the ratio GEMM-alone / variant, and the output's
relative error against fp32 math on the same bf16 inputs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from blockfuse.bench.timing import time_cuda

SHAPES = ((65536, 1152, 4304), (16384, 4096, 14336))
CHUNKS = (4096, 8192, 16384)


def _variants(x, w, w_kn, b):
    rows = x.shape[0]

    def chunked(step):
        out = x.new_empty(rows, w.shape[0])

        def run():
            for start in range(0, rows, step):
                torch._addmm_activation(b, x[start:start + step], w.t(), use_gelu=True, out=out[start:start + step])
            return out

        return run

    variants = {
        "mm (no bias)": lambda: torch.mm(x, w.t()),
        "addmm (bias)": lambda: torch.addmm(b, x, w.t()),
        "addmm (bias), weight [K, N]": lambda: torch.addmm(b, x, w_kn),
        "addmm + gelu_tanh (two kernels)": lambda: F.gelu(torch.addmm(b, x, w.t()), approximate="tanh"),
        "epilogue gelu: weight [N, K] (now)": lambda: torch._addmm_activation(b, x, w.t(), use_gelu=True),
        "epilogue gelu: weight [K, N]": lambda: torch._addmm_activation(b, x, w_kn, use_gelu=True),
        "epilogue relu: weight [N, K]": lambda: torch._addmm_activation(b, x, w.t(), use_gelu=False),
        "epilogue gelu, zero bias": lambda: torch._addmm_activation(torch.zeros_like(b), x, w.t(), use_gelu=True),
    }
    for step in CHUNKS:
        if step < rows:
            variants[f"epilogue gelu in {step}-row chunks"] = chunked(step)
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows_out = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for m, k, n in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16) * 0.1
        w_kn = w.t().contiguous()
        reference = F.gelu(torch.addmm(b.float(), x.float(), w.float().t()), approximate="tanh")
        base = None
        for name, fn in _variants(x, w, w_kn, b).items():
            ms = time_cuda(fn, warmup_ms=25, rep_ms=200).median
            out = fn().float()
            gelu = "gelu" in name
            error = float((out - reference).norm() / reference.norm()) if gelu else float("nan")
            base = ms if base is None else base
            rows_out.append({"shape": [m, k, n], "variant": name, "ms": ms, "gemm_over_this": base / ms,
                             "rel_error": error})
            print(f"[{m}, {k}] x [{k}, {n}]  {name:40s} {ms:8.4f} ms  GEMM/this {base / ms:5.3f}  err {error:.2e}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "epilogue_variants.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows_out}, indent=1))


if __name__ == "__main__":
    main()
