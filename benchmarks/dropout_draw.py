"""What the seeded dropout draw costs: one fused ``residual + dropout(x)`` kernel, timed with
different ways of drawing the keep-mask, against the same kernel without dropout.

    python benchmarks/dropout_draw.py [--rows 16384] [--hidden 4096] [--out DIR]

Variants (all draw from Triton's Philox, one call giving four 32-bit values):
  none         no dropout (the memory-bound floor)
  per-element  one Philox call per element (``dropout_keep``)
  tile         one call per four neighbours, 32-bit uniforms (the draw before the 16-bit one)
  tile-7       the same with 7 Philox rounds instead of 10
  tile-16bit   one call per eight neighbours, 16-bit uniforms (``dropout_keep_tile``, what the
               kernels use; p resolved to 1/65536)
Also times the backward of ``blockfuse.bias_dropout_add`` (dx, and dx + d bias) with and without
dropout. CUDA-graph timing with the L2 flushed, ms and fraction of copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

from blockfuse.bench import timing
from blockfuse.ops.dropout import ROWS_OF_8, draw_seed, dropout_keep, dropout_keep_tile


@triton.jit
def _keep_four_per_call(seed, rows, col_start, N, p, BLOCK_N: tl.constexpr, ROUNDS: tl.constexpr):
    """One Philox call per four neighbours, 32-bit uniforms (N % 4 == 0)."""
    groups = (rows[:, None] * N + col_start) // 4 + tl.arange(0, BLOCK_N // 4)[None, :]
    r0, r1, r2, r3 = tl.randint4x(seed, groups, ROUNDS)
    u = tl.interleave(tl.interleave(tl.uint_to_uniform_float(r0), tl.uint_to_uniform_float(r2)),
                      tl.interleave(tl.uint_to_uniform_float(r1), tl.uint_to_uniform_float(r3)))
    return u >= p


@triton.jit
def _residual_dropout_kernel(
    X, RES, OUT, SEED, BIAS,  # (M, N) each, the (1,) int64 seed, the (N,) bias
    M, N, p, scale,
    VARIANT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_start = tl.program_id(1) * BLOCK_N
    cols = col_start + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offsets = rows[:, None] * N + cols[None, :]
    z = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        z += tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if VARIANT != 0:
        seed = tl.load(SEED)
        if VARIANT == 1:
            keep = dropout_keep(seed, offsets, p)
        elif VARIANT == 2:
            keep = _keep_four_per_call(seed, rows, col_start, N, p, BLOCK_N, 10)
        elif VARIANT == 3:
            keep = _keep_four_per_call(seed, rows, col_start, N, p, BLOCK_N, 7)
        else:
            keep = dropout_keep_tile(seed, rows, cols, N, p, ROWS_OF_8)
        z = tl.where(keep, z * scale, 0.0)
    z += tl.load(RES + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(OUT + offsets, z.to(OUT.dtype.element_ty), mask=mask)


VARIANTS = {"none": 0, "per-element": 1, "tile": 2, "tile-7": 3, "tile-16bit": 4}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    m, n, p = args.rows, args.hidden, 0.1
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    res, out = torch.randn_like(x), torch.empty_like(x)
    seed = draw_seed("cuda")
    flush = timing.l2_flush()
    copy = timing.copy_bandwidth()["gbps"]
    results = {"shape": [m, n], "dtype": "bf16", "p": p, "copy_gbps": copy,
               "card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    fwd_bytes = 3 * x.numel() * 2
    bias = 0.1 * torch.randn(n, device="cuda", dtype=torch.bfloat16)
    for block_m, block_n, warps, has_bias in ((1, 4096, 4, False), (1, 4096, 4, True), (4, 1024, 4, True),
                                              (8, 512, 4, True)):
        for name, code in VARIANTS.items():
            def body():
                flush()
                _residual_dropout_kernel[(triton.cdiv(m, block_m), triton.cdiv(n, block_n))](
                    x, res, out, seed, bias, m, n, p, 1 / (1 - p), VARIANT=code, HAS_BIAS=has_bias,
                    BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
            t = timing.time_cuda_graph(body, flush)
            key = f"fwd {name} {block_m}x{block_n} w{warps}{' bias' if has_bias else ''}"
            results[key] = {"ms": t.median, "frac_copy": fwd_bytes / t.median / 1e6 / copy}
            print(f"{key:<36} {t.median:.4f} ms  {results[key]['frac_copy']:.2f} of copy", flush=True)

    from blockfuse.ops import bias_dropout_add as bda

    for label, call in (("launcher", lambda: bda._forward(x, bias, res, seed, p)),
                        ("public, no grad", lambda: bda.bias_dropout_add(x, bias, res, p))):
        with torch.no_grad():
            t = timing.time_cuda_graph(lambda: (flush(), call()), flush)
        results[f"fwd bias_dropout_add {label}"] = {"ms": t.median, "frac_copy": fwd_bytes / t.median / 1e6 / copy}
        print(f"fwd bias_dropout_add {label:<16} {t.median:.4f} ms  {fwd_bytes / t.median / 1e6 / copy:.2f} of copy")

    dy = torch.randn_like(x)
    for label, p_, bias_dtype in (("dx p=0.1", 0.1, None), ("dx+dbias p=0.1", 0.1, torch.bfloat16),
                                  ("dbias p=0", 0.0, torch.bfloat16)):
        t = timing.time_cuda_graph(lambda: (flush(), bda._backward(dy, seed, p_, bias_dtype, True)), flush)
        moved = (2 if p_ > 0 else 1) * x.numel() * 2
        results[f"bwd {label}"] = {"ms": t.median, "frac_copy": moved / t.median / 1e6 / copy}
        print(f"bwd {label:<32} {t.median:.4f} ms  {results[f'bwd {label}']['frac_copy']:.2f} of copy", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "dropout_draw.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
