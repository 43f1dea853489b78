"""LayerNorm and RMSNorm, optionally fused with a residual add and seeded dropout, or a GELU.

Four forms share one pair of kernels:

* no residual:            ``y = norm(x)``
* ``residual_mode="pre"``:  ``s = residual + dropout(x)``; returns ``(norm(s), s)``
  (pre-norm blocks: Llama, SigLIP; ``s`` is the next residual stream)
* ``residual_mode="post"``: returns ``residual + dropout(norm(x))`` (OLMo-2 reordered blocks)
* ``layer_norm_gelu``:      ``y = gelu(layer_norm(x) * weight + bias)``; the backward recomputes
  the GELU's input from the saved x and statistics (nothing but those is kept)

Statistics are computed in fp32 and outputs are written in the input dtype. Every form also takes
``fp8="rowwise"`` / ``"tensorwise"`` (forward only): the normalized output written in e4m3 with its
scale by the same pass, ``(y_fp8, scale)`` returned in its place (ops/fp8.py: the recipes; the kernel
``_norm_fwd_fp8_kernel``, op ``blockfuse::norm_fwd_fp8``). The file reads top to bottom: kernels; the
launchers (ops ``blockfuse::norm_fwd``, ``blockfuse::norm_fwd_fp8`` and ``blockfuse::norm_bwd``, see
``ops/launch.py``); the one autograd Function; the public functionals; the references.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor
from triton.language.extra.cuda import gdc_launch_dependents

from blockfuse.ops.activation import (FAST_MUFU, GELU_CODES, check_gelu_approximation, gelu, gelu_grad,
                                      gelu_tanh_grad_f16x2)
from blockfuse.ops.activation import GELU_TANH as _GELU_TANH
from blockfuse.ops.checks import check_like
from blockfuse.ops.dropout import draw_seed, dropout_code, dropout_scale, dropout_tile
from blockfuse.ops import fp8 as _fp8
from blockfuse.ops.fp8 import (
    E4M3_MAX, FP8_AMAX, FP8_ROWWISE, FP8_TENSORWISE, Float8Scaling, _quantized, check_fp8_output, delayed_scale,
    delayed_scale_ref, fold_amax, quantize_output_ref, reciprocal, refuse_fp8_gradient, roll_amax_history, row_amax,
    scale_of, store_transposed_cast, to_e4m3,
)
from blockfuse.ops.launch import (
    Kernel, as_rows, cdiv, empty_if_none, empty_scalar, launcher_op, next_power_of_2, row_stride, in_row_units,
    sm_count, tracing, vector, zero_stand_in,
)
from blockfuse.ops.norm_tuning import NormTuning
from blockfuse.ops.reduce import sum_partials
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import interpreter_enabled, use_triton

# Residual forms, as kernel constants (0: no residual), and the same codes as launcher arguments.
_PRE: tl.constexpr = tl.constexpr(1)
_POST: tl.constexpr = tl.constexpr(2)
NONE, PRE, POST = 0, _PRE.value, _POST.value
# Activations applied after the affine: activation.GELU_CODES (0: none).

# The launch rules' tuning choices (tile widths, warps, pipeline depths, register caps, and the knobs A/B runs set),
# with the NOTEs that justify them: the table in ops/norm_tuning.py, in force as TUNING (set for a block with
# ``tuned``). "The NOTE above NAME" below: the NOTE above the field ``name`` there.
TUNING = NormTuning()

# The chunked forward's cache hints: the statistics' passes keep the row in L2 for the pass that writes, which
# reads it last.
CHUNK_FIRST_EVICT: tl.constexpr = tl.constexpr("evict_last")
CHUNK_LAST_EVICT: tl.constexpr = tl.constexpr("evict_first")
NO_HINT: tl.constexpr = tl.constexpr("")
# The tail below which a row's second piece has another layout than its head: 4 warps' worth of 16-byte vectors
# (4 * 32 * TAIL_VECTOR, at import; the NOTEs above TAIL_VECTOR and FWD_PIECES_FROM_LANES).
LAYOUT_TAIL_LANES: tl.constexpr = tl.constexpr(4 * 32 * TUNING.tail_vector)
# NOTE: the GELU form's backward takes the tanh-form derivative in packed fp16 where x is bf16
# (activation.gelu_tanh_grad_f16x2: two elements an instruction, one MUFU for two; the loop 35.2 -> 32.2 SASS
# instructions a useful element at 4096, 39.8 -> 37.8 at 4304). Measured on an H200 (torch 2.11, triton 3.6,
# benchmarks/results/launch-rules/31-gelu-f16x2-2026-12-05-h200/): the backward launcher (norm_tiles.py, processes
# on / off / on, fraction of a same-size copy) 0.80 -> 0.84-0.85 at [16384, 4096], 0.53 -> 0.55 at 4304, 0.43 ->
# 0.46 at 1152, 0.58 -> 0.59 at 5120, 0.35 -> 0.40 at [8192, 14336], 0.47 -> 0.46 at [8192, 11008] (left: one
# cell, -2%); the op's forward + backward (bench ops, CUDA graphs) 1.04x / 1.03x / 1.10x at [16384, 4096] /
# [16384, 4304] / [8192, 14336], its gradients' error against fp32 1.66e-3 -> 1.73e-3 (PyTorch eager in bf16:
# 2.4e-3; torch.compile 1.7e-3). fp16 and fp32 keep the fp32 derivative (their PyTorch forms are more exact).
# BLOCKFUSE_GELU_GRAD_F16X2=0 (read at import): the fp32 derivative everywhere, for A/B runs; off with
# BLOCKFUSE_FAST_MUFU=0 too (no inline PTX in the kernels: activation.FAST_MUFU).
GELU_GRAD_F16X2: tl.constexpr = tl.constexpr(os.environ.get("BLOCKFUSE_GELU_GRAD_F16X2", "1") != "0" and FAST_MUFU)
SM_REGISTERS = 65536  # 32-bit registers a multiprocessor (sm_80 - sm_90)


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _column_mask(offs, cols, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    """``cols < N`` for the columns ``cols`` (= chunk start + ``offs``). With EVEN_N (N a multiple
    of BLOCK_N) every column is real and the mask is ``offs < BLOCK_N``, which the compiler folds
    to a constant: no per-element predicates (at N = 4096 LayerNorm + GELU's backward then needs
    no spill and 9% fewer instructions)."""
    if EVEN_N:
        return offs < BLOCK_N
    else:
        return cols < N


@triton.jit
def _chunk_columns(c, offs, row_mask, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    """Chunk ``c`` of a row read in chunks: its columns, their mask, and the (rows, columns) tile's mask."""
    cols = c * BLOCK_N + offs
    col_mask = _column_mask(offs, cols, N, BLOCK_N, EVEN_N)
    return cols, col_mask, row_mask[:, None] & col_mask[None, :]


@triton.jit
def _load_norm_input(
    X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_DROPOUT: tl.constexpr, EVICT: tl.constexpr,
):
    """The fp32 tile that is normalized: ``x``, or ``residual + dropout(x)`` in pre mode. ``EVICT``: the loads'
    cache hint (a row read in chunks keeps its first reads in L2 for the passes after them)."""
    z = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                eviction_policy=EVICT).to(tl.float32)
    if MODE == _PRE:
        z = _residual_plus_dropout(z, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                                   HAS_DROPOUT, EVICT)
    return z


@triton.jit
def _residual_plus_dropout(v, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                           HAS_DROPOUT: tl.constexpr, EVICT: tl.constexpr):
    """``residual + dropout(v)`` in fp32 for the (rows, cols) tile ``v``: the pre mode's input, the post mode's
    output."""
    v = dropout_tile(v, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    return v + tl.load(RES + rows[:, None] * stride_res + cols[None, :], mask=mask, other=0.0,
                       eviction_policy=EVICT).to(tl.float32)


@triton.jit
def _norm_fwd_kernel(
    X,  # (M, N) rows to normalize (pre mode: the branch output added to the residual)
    RES,  # (M, N) residual stream, or None
    W,  # (N,) weight, or None
    B,  # (N,) bias, or None
    Y,  # (M, N) output
    S,  # (M, N) pre mode: residual + dropout(x), the next residual stream; else None
    MEAN,  # (M,) fp32 row means (LayerNorm with STATS), or None
    RSTD,  # (M,) fp32 reciprocal standard deviations (STATS), or None
    SEED,  # (1,) int64 dropout seed, or None
    stride_x, stride_res, stride_y, stride_s,  # row strides (the last dimension is contiguous)
    M, N, eps, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,  # 0, or _GELU_TANH / _GELU_ERF applied after the affine (no residual)
    STATS: tl.constexpr,  # write the statistics the backward reads (not for inference)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,  # N is a multiple of BLOCK_N, or TAIL (the first BLOCK_N are real): no column masks
    TAIL: tl.constexpr,  # (one chunk) the row goes on past BLOCK_N: BLOCK_T more columns, masked at N
    BLOCK_T: tl.constexpr,
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    STAGES: tl.constexpr,  # 0: a program a row block; else persistent programs (one row a block, one chunk), each
    #                        walking a strided set of rows with its loads STAGES - 1 rows ahead, the weight and bias
    #                        loaded once (the NOTE above FWD_PERSIST_STAGES: forward_stages)
    EARLY_RESIDUAL: tl.constexpr = False,  # (post mode, STAGES = 0, one chunk) the residual loaded with x, before
    #                                        the statistics (the NOTE above FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES)
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # the weight's and bias's loads' hint (the NOTE above FWD_WB_EVICT)
    THREADS: tl.constexpr = 0,  # TAIL: the program's threads, where the pieces' sums are reduced jointly
    #                             (joint_sums_threads; 0: piece by piece)
):
    N, stride_x, stride_res = N * VEC, stride_x * VEC, stride_res * VEC
    stride_y, stride_s = stride_y * VEC, stride_s * VEC
    # The body without an FP8 output (FP8 = 0: its branch is not compiled in).
    if STAGES == 0:
        _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, None, None, None, None, tl.program_id(0), stride_x,
                       stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, 0, IS_RMS, MODE, HAS_W,
                       HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N, NUM_CHUNKS,
                       EVEN_N, TAIL, BLOCK_T, 0, 1, EARLY_RESIDUAL=EARLY_RESIDUAL, WB_EVICT=WB_EVICT,
                       THREADS=THREADS)
    else:
        # (the weight and bias in registers across the rows: the NOTE above FWD_PERSIST_STAGES)
        wh, bh, wt, bt = _weight_and_bias_values(W, B, N, HAS_W, HAS_B, BLOCK_N, EVEN_N, TAIL, BLOCK_T, WB_EVICT)
        for block in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.num_programs(0), num_stages=STAGES):
            _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, None, None, None, None, block, stride_x,
                           stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, 0, IS_RMS, MODE,
                           HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N,
                           NUM_CHUNKS, EVEN_N, TAIL, BLOCK_T, 0, 1, wh, bh, wt, bt, True, THREADS=THREADS)


@triton.jit
def _weight_and_bias_values(W, B, N, HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK_N: tl.constexpr,
                            EVEN_N: tl.constexpr, TAIL: tl.constexpr, BLOCK_T: tl.constexpr, EVICT: tl.constexpr):
    """The weight and bias of a row's head columns and of its tail, (1, BLOCK_N) and (1, BLOCK_T) fp32 (the body's
    WB_VALUES); 0.0 for what the norm has not (NOTE: a jit function returning None fails in triton 3.6)."""
    offs = tl.arange(0, BLOCK_N)
    head_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
    cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
    wh, bh, wt, bt = 0.0, 0.0, 0.0, 0.0
    if HAS_W:
        wh = tl.load(W + offs, mask=head_mask, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
        if TAIL:
            wt = tl.load(W + cols_t, mask=cols_t < N, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
    if HAS_B:
        bh = tl.load(B + offs, mask=head_mask, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
        if TAIL:
            bt = tl.load(B + cols_t, mask=cols_t < N, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
    return wh, bh, wt, bt


@triton.jit
def _norm_fwd_fp8_kernel(
    X,  # (M, N) rows to normalize (pre mode: the branch output added to the residual)
    RES,  # (M, N) residual stream, or None
    W,  # (N,) weight, or None
    B,  # (N,) bias, or None
    Y,  # (M, N) post mode: residual + dropout(norm(x)) in x's dtype, the next residual stream; else None
    S,  # (M, N) pre mode: residual + dropout(x), the next residual stream; else None
    Q,  # (M, N) e4m3 output (row-major): the normalized output times the reciprocal of its scale; FP8_AMAX: the
    #     normalized output in x's dtype
    Q_SCALE,  # rowwise: (M,) fp32 scale of each row; tensorwise: () fp32 scale of the call; FP8_AMAX: None
    HISTORY,  # tensorwise: (H,) fp32 amaxes of earlier calls, newest first; else None
    AMAX,  # tensorwise, FP8_AMAX: (1,) fp32 this call's amax (zero before the call; atomic max); rowwise: None
    SEED,  # (1,) int64 dropout seed, or None
    MEAN,  # (M,) fp32 row means (LayerNorm with STATS), or None
    RSTD,  # (M,) fp32 reciprocal standard deviations (STATS), or None
    stride_x, stride_res, stride_y, stride_s,  # row strides (the last dimension is contiguous)
    M, N, eps, dropout_p, dropout_scale,
    history_len,  # H (tensorwise)
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STATS: tl.constexpr,  # write the statistics a backward reads (a block's training step)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,
    TAIL: tl.constexpr,
    BLOCK_T: tl.constexpr,
    FP8: tl.constexpr,  # fp8.FP8_ROWWISE, fp8.FP8_TENSORWISE or fp8.FP8_AMAX
    BLOCK_H: tl.constexpr,  # tensorwise: H rounded up to a power of two
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    PDL: tl.constexpr,  # tensorwise: the history's roll may be placed from now (a programmatic dependent launch)
    THREADS: tl.constexpr = 0,  # as in _norm_fwd_kernel: the plain output's arithmetic, so its scale is the same
):
    if PDL:
        gdc_launch_dependents()  # (the roll waits for this kernel's end before it reads: fp8.roll_amax_history)
    N, stride_x, stride_res = N * VEC, stride_x * VEC, stride_res * VEC
    stride_y, stride_s = stride_y * VEC, stride_s * VEC
    # The body with an FP8 output (constexprs as in _norm_fwd_kernel).
    _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, Q, Q_SCALE, HISTORY, AMAX, tl.program_id(0), stride_x,
                   stride_res, stride_y,
                   stride_s, M, N, eps, dropout_p, dropout_scale, history_len, IS_RMS, MODE, HAS_W, HAS_B,
                   HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N, NUM_CHUNKS, EVEN_N, TAIL,
                   BLOCK_T, FP8, BLOCK_H, THREADS=THREADS)


@triton.jit
def _norm_fwd_body(
    X, RES, W, B, Y, S, MEAN, RSTD, SEED, Q, Q_SCALE, HISTORY, AMAX,  # as in the two kernels above
    block,  # the row block: rows block * BLOCK_M ... + BLOCK_M - 1
    stride_x, stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, history_len,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, STATS: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr, EVEN_N: tl.constexpr, TAIL: tl.constexpr,
    BLOCK_T: tl.constexpr,
    FP8: tl.constexpr,  # 0: y in Y (x's dtype); else e4m3 in Q with its scale (fp8.FP8_ROWWISE / FP8_TENSORWISE)
    BLOCK_H: tl.constexpr,
    WH=None, BH=None, WT=None, BT=None,  # WB_VALUES: the weight and bias of the head's columns and of the tail's
    WB_VALUES: tl.constexpr = False,  # (FP8 = 0, one chunk) W and B given as values, loaded once a program
    EARLY_RESIDUAL: tl.constexpr = False,  # (the plain kernel's)
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # (the plain kernel's)
    THREADS: tl.constexpr = 0,  # (the plain kernel's)
):
    """The norms' forward, one program's BLOCK_M rows. NOTE: one body, two kernels: the kernel without an FP8
    output keeps its signature (benchmarks/kernel_stats.py and the host-path benchmark launch it by name), and
    with FP8 = 0 the FP8 branch below is not compiled in."""
    rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    offs = tl.arange(0, BLOCK_N)
    # NOTE: float scalars cast to fp32: Inductor may pass them to a user kernel as fp64.
    eps = tl.cast(eps, tl.float32)
    dropout_p = tl.cast(dropout_p, tl.float32)
    dropout_scale = tl.cast(dropout_scale, tl.float32)

    # Statistics. With one chunk the row stays in registers for the output pass: BLOCK_N columns, plus
    # BLOCK_T more (the tail, masked at N) when TAIL.
    r, r_t = None, None  # (EARLY_RESIDUAL: the residual, loaded with x)
    if NUM_CHUNKS == 1:
        mask = row_mask[:, None] & _column_mask(offs, offs, N, BLOCK_N, EVEN_N)[None, :]
        z = _load_norm_input(X, RES, rows, offs, mask, stride_x, stride_res, seed, N, dropout_p,
                             dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
        if TAIL:
            cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
            mask_t = row_mask[:, None] & (cols_t < N)[None, :]
            z_t = _load_norm_input(X, RES, rows, cols_t, mask_t, stride_x, stride_res, seed, N, dropout_p,
                                   dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
        if EARLY_RESIDUAL and MODE == _POST:
            r = tl.load(RES + rows[:, None] * stride_res + offs[None, :], mask=mask, other=0.0).to(tl.float32)
            if TAIL:
                r_t = tl.load(RES + rows[:, None] * stride_res + cols_t[None, :], mask=mask_t, other=0.0
                              ).to(tl.float32)
        if TAIL and BLOCK_M == 1 and (FP8 != 0 or BLOCK_T < LAYOUT_TAIL_LANES or THREADS > 0):
            mean, var = _row_statistics_of_pieces(z, z_t, mask, mask_t, N, IS_RMS, BLOCK_M, BLOCK_N, BLOCK_T, THREADS,
                                                  128 // X.dtype.element_ty.primitive_bitwidth)
        elif IS_RMS:
            mean = tl.zeros([BLOCK_M], dtype=tl.float32)
            sq = tl.sum(z * z, axis=1)
            if TAIL:
                sq += tl.sum(z_t * z_t, axis=1)
            var = sq / N
        else:
            total = tl.sum(z, axis=1)
            if TAIL:
                total += tl.sum(z_t, axis=1)
            mean = total / N
            if EVEN_N:
                # NOTE: no select an element: the head has no masked columns, and a row past M loads as zeros,
                # so its mean and its deviations are 0 already (sm_90: one FSEL an element less).
                diff = z - mean[:, None]
            else:
                diff = tl.where(mask, z - mean[:, None], 0.0)
            if TAIL:
                # NOTE: a row this wide sums 32+ elements a thread in sequence: with a large mean (300 + randn,
                # 20000 wide) the mean came out several fp32 ulps off, 3x PyTorch's error in y (H200). The
                # deviations' own mean corrects it (and the variance: sum d^2 / N - shift^2). Each piece's two
                # sums in one reduction (_row_sums): a row of two pieces reduces 4 times, not 6 (the forward of
                # these rows is one row a program: its reductions are its latency).
                diff_t = tl.where(mask_t, z_t - mean[:, None], 0.0)
                sq, shift = _row_sums(diff * diff, diff)
                sq_t, shift_t = _row_sums(diff_t * diff_t, diff_t)
                shift = (shift + shift_t) / N
                mean += shift
                sq += sq_t
                sq -= shift * shift * N
            elif X.dtype.element_ty == tl.float32:
                # NOTE: fp32 rows correct their mean by the deviations' mean too (as rows in pieces do above): rows of
                # 300 + randn had y 2-3x PyTorch's error in 1-3 seeds of 20 at 760-4096 lanes (the fuzz, 2026-12-04/05;
                # the sum of 300s is rounded at 0.03 and more), at most 1.00x with it. 16-bit rows skip it: their
                # inputs' own rounding there (bf16: 2.0 at 300) dwarfs the sum's, and it would cost their kernels a
                # sum a row (their sm_90 code stays as it was: benchmarks/sass_digest.py).
                sq, shift = _row_sums(diff * diff, diff)
                shift = shift / N
                mean += shift
                sq -= shift * shift * N
            else:
                sq = tl.sum(diff * diff, axis=1)
            var = sq / N
    else:
        # NOTE: one read of the row for its statistics. LayerNorm's: each lane keeps a running mean and sum of
        # squared deviations of its columns (Welford's update), and two reductions merge the lanes (Chan's
        # formula): stable for rows with a large mean, where a sum and a sum of squares cancel, and two
        # reductions a row as a row held in registers has, where a mean and deviations per chunk had two a
        # chunk. The reads keep the row in L2 for the pass that writes (CHUNK_FIRST_EVICT).
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)  # RMSNorm: squares; LayerNorm: the running means
        m2 = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cols, _, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
            z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                 dropout_scale, MODE, HAS_DROPOUT, CHUNK_FIRST_EVICT)
            if IS_RMS:
                acc += z * z
            else:
                # A lane's columns so far are c + 1 wherever it holds one of the row's (every chunk before
                # is whole); a lane past N in the last chunk keeps what it had.
                delta = z - acc
                step = delta * (1.0 / tl.cast(c + 1, tl.float32))
                if EVEN_N:
                    acc += step
                    m2 += delta * (z - acc)
                else:
                    acc += tl.where(mask, step, 0.0)
                    m2 += tl.where(mask, delta * (z - acc), 0.0)
        if IS_RMS:
            mean = tl.zeros([BLOCK_M], dtype=tl.float32)
            var = tl.sum(acc, axis=1) / N
        else:
            last = (NUM_CHUNKS - 1) * BLOCK_N + offs < N
            lane_count = tl.where(last, NUM_CHUNKS, NUM_CHUNKS - 1).to(tl.float32)
            lane_count = tl.broadcast_to(lane_count[None, :], (BLOCK_M, BLOCK_N))
            # Chan's formula for the lanes as groups: the row's mean from theirs, then the sum of squared
            # deviations as the lanes' own plus each lane's count times its mean's squared deviation. The
            # deviations' own mean corrects the row's, as for a row in two pieces (300 + randn, 20000 wide: y's
            # error 2.6x PyTorch's without it, H200).
            mean = tl.sum(acc * lane_count, axis=1) / N
            spread = acc - mean[:, None]
            sq, shift = _row_sums(m2 + lane_count * spread * spread, lane_count * spread)
            shift = shift / N
            mean += shift
            var = sq / N - shift * shift
    rstd = 1.0 / tl.sqrt(var + eps)
    if STATS:
        if not IS_RMS:
            tl.store(MEAN + rows, mean, mask=row_mask)
        tl.store(RSTD + rows, rstd, mask=row_mask)

    # Normalize, affine, activation or residual; write.
    if FP8 == 0:
        w_head, b_head, w_tail, b_tail = W, B, W, B
        if WB_VALUES:
            w_head, b_head, w_tail, b_tail = WH, BH, WT, BT
        for c in range(NUM_CHUNKS):
            cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
            if NUM_CHUNKS > 1:
                z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                     dropout_scale, MODE, HAS_DROPOUT, CHUNK_LAST_EVICT)
            _norm_fwd_write(z, w_head, b_head, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N,
                            stride_res, stride_y, stride_s, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
                            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, WB_VALUES, r, EARLY_RESIDUAL, WB_EVICT)
        if TAIL:
            _norm_fwd_write(z_t, w_tail, b_tail, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd, seed, N,
                            stride_res, stride_y, stride_s, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
                            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, WB_VALUES, r_t, EARLY_RESIDUAL, WB_EVICT)
    else:
        # The FP8 output: y in e4m3 over its scale (Q, Q_SCALE), and the residual stream in x's dtype (s in
        # pre mode, y in post mode). The scale: rowwise, the row's amax, from y in fp32 before any FP8 store;
        # tensorwise, from the history (delayed scaling, ops/fp8.py), this call's amax folded into AMAX.
        if FP8 == FP8_TENSORWISE:
            scale = delayed_scale(HISTORY, history_len, BLOCK_H)
        elif FP8 == FP8_AMAX:
            scale = 1.0  # (no scale: the output goes out in x's dtype, its amax folded)
        else:
            if NUM_CHUNKS > 1:
                # NOTE: a row wider than the registers (past FWD_MAX_LANES: rare) takes one more pass, for its
                # amax before anything is written: x read a third time (mostly from L2), y computed twice.
                amax = tl.zeros([BLOCK_M], dtype=tl.float32)
                for c in range(NUM_CHUNKS):
                    cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                    z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                         dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
                    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res,
                                        dropout_p, dropout_scale, X.dtype.element_ty, MODE, HAS_W, HAS_B,
                                        HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, True)
                    amax = tl.maximum(amax, row_amax(y, mask))
                row_scale = scale_of(amax, E4M3_MAX)
                scale = row_scale[:, None]
        if FP8 == FP8_ROWWISE and NUM_CHUNKS == 1:
            # The row is in registers (z, and z_t for a tail): y of all of it, then its amax, then the stores.
            col_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
            mask = row_mask[:, None] & col_mask[None, :]
            y = _norm_fwd_write_stream(z, W, B, RES, Y, S, rows, offs, col_mask, mask, mean, rstd, seed, N,
                                       stride_res, stride_y, stride_s, dropout_p, dropout_scale, X.dtype.element_ty,
                                       MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION)
            amax = _rows_amax(y, mask, row_mask, EVEN_N)
            if TAIL:
                y_t = _norm_fwd_write_stream(z_t, W, B, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd,
                                             seed, N, stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                             X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                             ACTIVATION)
                amax = tl.maximum(amax, row_amax(y_t, mask_t))
            row_scale = scale_of(amax, E4M3_MAX)
            inverse = reciprocal(row_scale)[:, None]
            tl.store(Q + rows[:, None] * N + offs[None, :], to_e4m3(y, inverse, Q), mask=mask)
            if TAIL:
                tl.store(Q + rows[:, None] * N + cols_t[None, :], to_e4m3(y_t, inverse, Q), mask=mask_t)
        else:
            # The scale is known (tensorwise, or a wide row's extra pass): each piece is written as it comes.
            inverse = reciprocal(scale)
            amax = tl.zeros([BLOCK_M], dtype=tl.float32)  # tensorwise: each row's, over every piece
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                if NUM_CHUNKS > 1:
                    z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                         dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
                y = _norm_fwd_write_stream(z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N,
                                           stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                           X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                           ACTIVATION)
                if FP8 == FP8_AMAX:
                    written = y.to(Q.dtype.element_ty)
                    tl.store(Q + rows[:, None] * N + cols[None, :], written, mask=mask)
                    amax = tl.maximum(amax, _rows_amax(written.to(tl.float32), mask, row_mask, EVEN_N))
                else:
                    tl.store(Q + rows[:, None] * N + cols[None, :], to_e4m3(y, inverse, Q), mask=mask)
                if FP8 == FP8_TENSORWISE:
                    amax = tl.maximum(amax, _rows_amax(y, mask, row_mask, EVEN_N))
            if TAIL:  # tensorwise or FP8_AMAX only (a rowwise tail is in the branch above)
                y_t = _norm_fwd_write_stream(z_t, W, B, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd,
                                             seed, N, stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                             X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                             ACTIVATION)
                if FP8 == FP8_AMAX:
                    written_t = y_t.to(Q.dtype.element_ty)
                    tl.store(Q + rows[:, None] * N + cols_t[None, :], written_t, mask=mask_t)
                    amax = tl.maximum(amax, row_amax(written_t.to(tl.float32), mask_t))
                else:
                    tl.store(Q + rows[:, None] * N + cols_t[None, :], to_e4m3(y_t, inverse, Q), mask=mask_t)
                    amax = tl.maximum(amax, row_amax(y_t, mask_t))
        if FP8 == FP8_ROWWISE:
            tl.store(Q_SCALE + rows, row_scale, mask=row_mask)
        else:
            if FP8 == FP8_TENSORWISE:
                if tl.program_id(0) == 0:
                    tl.store(Q_SCALE, scale)
            # NOTE: one atomic a program at most (its rows' amax, masked rows excluded; fp8.fold_amax); the roll
            # into the history is a second, one-program launch (fp8.roll_amax_history), after every program has
            # folded its amax.
            fold_amax(AMAX, tl.max(amax, axis=0))


@triton.jit
def _rows_amax(y, mask, row_mask, EVEN_N: tl.constexpr):
    """:func:`row_amax` of a tile whose columns are all in the row (EVEN_N): the rows past M masked once a row,
    not once an element (sm_90: one FSEL an element less; such a row's |y| is finite, then dropped)."""
    if EVEN_N:
        return tl.where(row_mask, tl.max(tl.abs(y), axis=1), 0.0)
    return row_amax(y, mask)


@triton.jit
def _row_statistics_of_pieces(z, z_t, mask, mask_t, N, IS_RMS: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr = 0, BLOCK_T: tl.constexpr = 0, THREADS: tl.constexpr = 0,
                              UNIT: tl.constexpr = 0):
    """(mean, var) of one row (BLOCK_M = 1) held as a head ``z`` and a tail ``z_t``: each piece's sums reduced to
    scalars before they are added, the results (BLOCK_M,) vectors made from the scalars. NOTE: (FP8 forward only)
    the head's and the tail's row sums otherwise carry their pieces' layouts, and adding them made the compiler
    move the head to the tail's layout; the FP8 output's amax then read y in that layout too, computed a second
    time beside the store's (sm_90, a row of 4096 + 256 lanes: 212-226 registers a thread, against 80-96 this way
    and the plain kernel's 80). THREADS > 0: each sum of the two pieces reduced across the program once, from the
    pieces' partial sums a thread (_thread_partials; the NOTE above JOINT_SUMS)."""
    if IS_RMS:
        mean = 0.0
        if THREADS > 0:
            var = tl.sum(_thread_partials(z * z, BLOCK_N, THREADS, UNIT)
                         + _thread_partials(z_t * z_t, BLOCK_T, THREADS, UNIT), axis=0) / N
        else:
            var = (tl.sum(tl.sum(z * z, axis=1), axis=0) + tl.sum(tl.sum(z_t * z_t, axis=1), axis=0)) / N
    else:
        if THREADS > 0:
            mean = tl.sum(_thread_partials(z, BLOCK_N, THREADS, UNIT) + _thread_partials(z_t, BLOCK_T, THREADS, UNIT),
                          axis=0) / N
        else:
            mean = (tl.sum(tl.sum(z, axis=1), axis=0) + tl.sum(tl.sum(z_t, axis=1), axis=0)) / N
        diff = tl.where(mask, z - mean, 0.0)
        diff_t = tl.where(mask_t, z_t - mean, 0.0)
        # the deviations' mean corrects the mean (see the NOTE in _norm_fwd_body), with each piece's two sums in
        # one reduction and the same arithmetic as there: the FP8 output's scale is that of the plain output
        if THREADS > 0:
            sq = _thread_partials(diff * diff, BLOCK_N, THREADS, UNIT) + _thread_partials(diff_t * diff_t, BLOCK_T,
                                                                                          THREADS, UNIT)
            shift = _thread_partials(diff, BLOCK_N, THREADS, UNIT) + _thread_partials(diff_t, BLOCK_T, THREADS, UNIT)
            sq, shift = _row_sums(sq[None, :], shift[None, :])
            shift = tl.sum(shift, axis=0) / N
            sq = tl.sum(sq, axis=0)
        else:
            sq, shift = _row_sums(diff * diff, diff)
            sq_t, shift_t = _row_sums(diff_t * diff_t, diff_t)
            shift = (tl.sum(shift, axis=0) + tl.sum(shift_t, axis=0)) / N
            sq = tl.sum(sq, axis=0) + tl.sum(sq_t, axis=0)
        sq -= shift * shift * N
        var = sq / N
        mean += shift
    return tl.zeros([BLOCK_M], dtype=tl.float32) + mean, tl.zeros([BLOCK_M], dtype=tl.float32) + var


@triton.jit
def _column_vector(P, rows, cols, mask):
    """A per-column vector (the weight or bias) at ``cols``, in fp32, loaded in the shape of the rows' tile
    (BLOCK_M, BLOCK_N): each row's copy comes from L1.

    NOTE: loaded as a (BLOCK_N,) or (1, BLOCK_N) vector the compiler gives it a layout of its own (fewer elements
    a thread), and then moves it, or the whole tile computed from it, through shared memory into the other
    layout: a convert_layout of up to BLOCK_M * BLOCK_N fp32 with its barriers in every program (the LayerNorm +
    FP8 forward at 4096 wide, sm_90: 13 barriers against 5 this way; at 1152, two rows a program, two whole-tile
    moves, one of them before the FP8 store)."""
    return tl.load(P + (rows[:, None] * 0 + cols[None, :]), mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _norm_fwd_value(
    z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p, dropout_scale,
    OUT_DTYPE: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, TILE_VECTORS: tl.constexpr,
    WB_VALUES: tl.constexpr = False,  # W and B are the weight and bias values at cols, (1, BLOCK) fp32, not pointers
    r=None, R_GIVEN: tl.constexpr = False,  # post mode: ``r`` is the residual at (rows, cols), fp32, loaded already
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # the weight's and bias's loads' cache hint
):
    """The forward's output ``y`` in fp32 for the columns ``cols`` of the rows ``rows`` (``z``: their fp32
    normalized input); ``OUT_DTYPE``, the output's dtype, is what CAST_BEFORE_WEIGHT rounds to. TILE_VECTORS: the
    weight and bias loaded in the tile's shape (:func:`_column_vector`; the FP8 forward, whose layouts they
    otherwise moved; the plain forward's vectors already share its layout there, and loaded in the tile's shape
    they cost it registers: 80 -> 96 post-residual at 4096, sm_90)."""
    y = (z - mean[:, None]) * rstd[:, None]
    if HAS_W:
        if WB_VALUES:
            w = W
        elif TILE_VECTORS:
            w = _column_vector(W, rows, cols, mask)
        else:
            w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=WB_EVICT).to(tl.float32)[None, :]
        if CAST_BEFORE_WEIGHT:
            y = y.to(OUT_DTYPE).to(tl.float32)
        y = y * w
    if HAS_B:
        if WB_VALUES:
            y += B
        elif TILE_VECTORS:
            y += _column_vector(B, rows, cols, mask)
        else:
            y += tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=WB_EVICT).to(tl.float32)[None, :]
    if ACTIVATION != 0:
        y = gelu(y, ACTIVATION == _GELU_TANH)
    if MODE == _POST:
        if R_GIVEN:
            y = dropout_tile(y, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT) + r
        else:
            y = _residual_plus_dropout(y, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                                       HAS_DROPOUT, NO_HINT)
    return y


@triton.jit
def _norm_fwd_write(
    z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, stride_y, stride_s,
    dropout_p, dropout_scale, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr,
    WB_VALUES: tl.constexpr = False, r=None, R_GIVEN: tl.constexpr = False, WB_EVICT: tl.constexpr = tl.constexpr(""),
):
    """Writes the forward's outputs for the columns ``cols`` of the rows ``rows`` (``z``: their fp32
    normalized input): ``s`` in pre mode, and ``y``. WB_VALUES, ``r`` and R_GIVEN: as in :func:`_norm_fwd_value`."""
    if MODE == _PRE:
        tl.store(S + rows[:, None] * stride_s + cols[None, :], z.to(S.dtype.element_ty), mask=mask)
    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p,
                        dropout_scale, Y.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                        ACTIVATION, False, WB_VALUES, r, R_GIVEN, WB_EVICT)
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _norm_fwd_write_stream(
    z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, stride_y, stride_s,
    dropout_p, dropout_scale, OUT_DTYPE: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr,
):
    """The FP8 forward's outputs in x's dtype for the columns ``cols`` (the residual stream: ``s`` in pre
    mode, ``y`` in post mode); returns ``y`` in fp32, for the FP8 output."""
    if MODE == _PRE:
        tl.store(S + rows[:, None] * stride_s + cols[None, :], z.to(S.dtype.element_ty), mask=mask)
    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p,
                        dropout_scale, OUT_DTYPE, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                        True)
    if MODE == _POST:
        tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    return y


@triton.jit
def _norm_bwd_math(
    z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr,
):
    """One fp32 tile of the backward: (xhat, xhat as the weight saw it, d(affine output) (dy
    after dropout, or times the activation's derivative), w * that). ``b`` is read only with
    an activation.

    NOTE: xhat is not masked: on masked lanes it is -mean * rstd (z loaded as 0; 0 on rows past M, whose
    statistics load as 0), but dy loads as 0 there, so every product with it (the row sums, dz's terms, the
    weight and bias gradients) is 0 and masked stores drop the rest. One select an element less."""
    xhat = (z - mean[:, None]) * rstd[:, None]
    if MODE == _POST:
        dy = dropout_tile(dy, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    if ACTIVATION != 0:
        # NOTE: the activation's input is recomputed from x and the statistics (as the
        # forward computed it, in fp32) instead of being saved: one tensor less to write in
        # the forward and to read here.
        h = xhat
        if HAS_W:
            h = h * w[None, :]
        if HAS_B:
            h = h + b[None, :]
        if ACTIVATION == _GELU_TANH and GELU_GRAD_F16X2 and OUT_DTYPE == tl.bfloat16:
            dy = dy * gelu_tanh_grad_f16x2(h)
        else:
            dy = dy * gelu_grad(h, ACTIVATION == _GELU_TANH)
    if HAS_W:
        wdy = dy * w[None, :]
    else:
        wdy = dy
    if CAST_BEFORE_WEIGHT:
        xhat_w = xhat.to(OUT_DTYPE).to(tl.float32)
    else:
        xhat_w = xhat
    return xhat, xhat_w, dy, wdy


@triton.jit
def _load_weight_and_bias(W, B, cols, col_mask, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACTIVATION: tl.constexpr,
                          EVICTION: tl.constexpr):
    """fp32 ``(w, b)`` of the columns ``cols``: w zeros without a weight; b the bias that the backward needs to
    recompute an activation's input, else ``w`` as a placeholder that is never read (so the path without an
    activation is unchanged)."""
    w = tl.zeros(cols.shape, dtype=tl.float32)
    if HAS_W:
        w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    b = w
    if ACTIVATION != 0:
        if HAS_B:
            b = tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    return w, b


@triton.jit
def _norm_bwd_chunk(
    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr,
):
    """Loads one chunk of a wide row (z, dy, w, and b with an activation) and returns
    ``_norm_bwd_math`` of it."""
    z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w, b = _load_weight_and_bias(W, B, cols, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    return _norm_bwd_math(z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale,
                          MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)


# NOTE: Triton's interpreter sums a tile with ``np.sum`` over the reduced axis. Over a row of a 2-D tile that is
# numpy's pairwise summation (errors of a few ulps, like the GPU's per-thread partial sums merged as a tree), but
# over the row axis of the joined (rows, N, 2) tile below it is a strided reduction, which numpy adds element after
# element: a sum of squares of 1024 bf16 values came out 14 ulps off (1.6e-6) where ``tl.sum`` of the 2-D tile was
# off by 0.6. The CPU tests and the fuzz then saw norms whose statistics and weight gradients were 5-20x less exact
# than PyTorch's at widths with a tail piece (5120, 8193, 11008: the 2026-12-05 fuzz, benchmarks/results/fuzz/), an
# error of the interpreter, not of the kernel. So the interpreter sums the two tiles one by one.
if interpreter_enabled():

    @triton.jit
    def _row_sums(a, b):
        """Both rows' sums of two tiles (the interpreter's form: the NOTE above)."""
        return tl.sum(a, axis=1), tl.sum(b, axis=1)

else:

    @triton.jit
    def _row_sums(a, b):
        """Both rows' sums of two tiles in one reduction: the tiles joined on a new minor axis and summed over the
        row, so the warps exchange their partial sums once, where two ``tl.sum`` calls exchange twice (LayerNorm's
        backward, sm_90: 4 -> 2 barriers a row block in the loop; benchmarks/results/launch-rules/6-paired-sums).

        NOTE: not ``tl.reduce((a, b), combine_fn=...)``, which reduces once on the GPU too (3 barriers) but runs
        its combine function element by element in Triton's interpreter: 25x slower there, the CPU tests' time."""
        return tl.split(tl.sum(tl.join(a, b), axis=1))


@triton.jit
def _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS: tl.constexpr, TWO_FMA: tl.constexpr):
    """d(normalized input) = (wdy - xhat * c1 - c2) * rstd from the row means c1 = mean(xhat * w * dy) and
    c2 = mean(w * dy). TWO_FMA: as ``wdy * rstd + (xhat * (-c1 * rstd) + (-c2 * rstd))`` on per-row constants,
    two multiply-adds an element once the compiler contracts them, where the form above takes three
    instructions; but ptxas keeps more of the tile live for it (the launcher's NOTE above BWD_TWO_FMA_MAX_WARPS)."""
    if TWO_FMA:
        c1r = -c1 * rstd
        if IS_RMS:
            return wdy * rstd[:, None] + xhat * c1r[:, None]
        c2r = -c2 * rstd
        return wdy * rstd[:, None] + (xhat * c1r[:, None] + c2r[:, None])
    if IS_RMS:
        return (wdy - xhat * c1[:, None]) * rstd[:, None]
    return (wdy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]


@triton.jit
def _store_input_grad(
    DX, DRES, DS, rows, cols, mask, dz, seed, N, stride_dx, stride_dres, stride_ds, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_DS: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):
    """Writes d(input): dz, plus the residual gradient in pre mode (and its dropout)."""
    if MODE == _PRE:
        if HAS_DS:
            dz += tl.load(DS + rows[:, None] * stride_ds + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_DROPOUT:
            tl.store(DRES + rows[:, None] * stride_dres + cols[None, :], dz.to(DRES.dtype.element_ty), mask=mask)
        dz = dropout_tile(dz, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    tl.store(DX + rows[:, None] * stride_dx + cols[None, :], dz.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS: tl.constexpr):
    """(mean, rstd) of ``rows`` as the forward saved them; RMSNorm's mean zeros (it saves none)."""
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    if IS_RMS:
        mean = tl.zeros([rows.shape[0]], dtype=tl.float32)
    else:
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
    return mean, rstd


# NOTE: a bf16 row held across its sums as loaded and widened to fp32 twice, once for the sums and once for the
# gradients (the NOTE above BWD_HOLD_PIECES: where that pays). The two widenings are written as different
# instructions (shifts, then byte permutes: the same values) so that neither LLVM nor ptxas merges them into one fp32
# copy kept across the sums, which is what spills. The interpreter widens with ``.to`` (it cannot run PTX).
if interpreter_enabled():

    @triton.jit
    def _widen_bf16(x):
        """bf16 -> fp32."""
        return x.to(tl.float32)

    @triton.jit
    def _widen_bf16_again(x):
        """bf16 -> fp32 (the second widening of a held row)."""
        return x.to(tl.float32)

else:

    @triton.jit
    def _widen_bf16(x):
        """bf16 -> fp32 by shifts (two elements an instance: the low one shifted up, the high one masked)."""
        wide = tl.inline_asm_elementwise("{ shl.b32 $0, $2, 16; and.b32 $1, $2, 0xffff0000; }", "=r,=r,r",
                                         [x.to(tl.int16, bitcast=True)], dtype=tl.int32, is_pure=True, pack=2)
        return wide.to(tl.float32, bitcast=True)

    @triton.jit
    def _widen_bf16_again(x):
        """bf16 -> fp32 by byte permutes: the same values as _widen_bf16, by other instructions."""
        wide = tl.inline_asm_elementwise(
            "{ .reg .b32 zr; mov.b32 zr, 0; prmt.b32 $0, $2, zr, 0x1044; prmt.b32 $1, $2, zr, 0x3244; }",
            "=r,=r,r", [x.to(tl.int16, bitcast=True)], dtype=tl.int32, is_pure=True, pack=2)
        return wide.to(tl.float32, bitcast=True)


@triton.jit
def _widen(x, HOLD: tl.constexpr):
    """A loaded tile in fp32: the first of a held row's two widenings (HOLD), else a plain conversion."""
    if HOLD:
        return _widen_bf16(x)
    return x.to(tl.float32)


@triton.jit
def _round_held_gradient(dh, w, HAS_W: tl.constexpr):
    """HOLD == 2 (the GELU form): d(affine output) rounded to bf16 to be held across the row sums (as PyTorch's GELU
    backward hands it to the norm's), and (its bf16 bits, its widened value, w times that)."""
    dh_h = dh.to(tl.bfloat16)
    dh = _widen_bf16(dh_h)
    wdh = dh
    if HAS_W:
        wdh = dh * w[None, :]
    return dh_h, dh, wdh


@triton.jit
def _held_gradient_math(z_h, dh_h, w, mean, rstd, HAS_W: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr,
                        OUT_DTYPE: tl.constexpr):
    """HOLD == 2 after the row sums: (xhat, xhat as the weight saw it, d(affine output), w times that) from the held
    bf16 z and d(affine output), widened again; the activation's derivative is not computed again."""
    xhat = (_widen_bf16_again(z_h) - mean[:, None]) * rstd[:, None]
    dh = _widen_bf16_again(dh_h)
    wdh = dh
    if HAS_W:
        wdh = dh * w[None, :]
    xhat_w = xhat
    if CAST_BEFORE_WEIGHT:
        xhat_w = xhat.to(OUT_DTYPE).to(tl.float32)
    return xhat, xhat_w, dh, wdh


@triton.jit
def _norm_bwd_rows(
    z, dy, w, b, dw_acc, db_acc, DY, Z, W, B, DS, MEAN, RSTD, DX, DRES, seed, rows, offs, col_mask, M, N,
    stride_dy, stride_z, stride_ds, stride_dx, stride_dres, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, TWO_FMA: tl.constexpr,
    RELOAD: tl.constexpr, HOLD: tl.constexpr = 0, ACC: tl.constexpr = True,
):
    """The backward of one block of whole rows (z and dy as loaded): writes dx (and the residual's
    gradient) and returns the weight and bias gradient accumulators with this block added (not with ACC False:
    the weight kernel makes them, WEIGHT_KERNEL). RELOAD: w and b
    are loaded here (``w``, ``b`` unused), and z, dy, w and b loaded again after the row sums, so that only
    the accumulators stay live across them (the launcher's rule: _bwd_reload); with HOLD (bf16 z and dy) the
    row is not loaded again but held as loaded, in bf16, and widened again (the NOTE above _widen_bf16)."""
    row_mask = rows < M
    mask = row_mask[:, None] & col_mask[None, :]
    mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
    if RELOAD:
        w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "evict_last")
    dy_held = dy  # (as loaded: the math below names its result dy)
    xhat, xhat_w, dy, wdy = _norm_bwd_math(
        _widen(z, HOLD), _widen(dy, HOLD), w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p, dropout_scale,
        MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, DX.dtype.element_ty)
    if IS_RMS:
        c1 = tl.sum(xhat * wdy, axis=1) / N
        c2 = c1
    else:
        c1, c2 = _row_sums(xhat * wdy, wdy)
        c1, c2 = c1 / N, c2 / N
    if RELOAD:
        if HOLD:
            z = _widen_bf16_again(z)
            dy = _widen_bf16_again(dy_held)
        else:
            # NOTE: the row read again (from L2: the first read went through it moments ago) rather than held
            # across the row sums: other cache hints than the first loads', so that the compiler keeps both.
            z = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0,
                        eviction_policy="evict_first")
            dy = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0,
                         eviction_policy="evict_first")
        w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z.to(tl.float32), dy.to(tl.float32), w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p,
            dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, DX.dtype.element_ty)
    dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
    _store_input_grad(DX, DRES, DS, rows, offs, mask, dz, seed, N, stride_dx, stride_dres,
                      stride_ds, dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
    if HAS_W and ACC:
        dw_acc += dy * xhat_w
    if HAS_B and ACC:
        db_acc += dy
    return dw_acc, db_acc


@triton.jit
def _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols, col_mask, dw_acc, db_acc,
                        HAS_W: tl.constexpr, HAS_B: tl.constexpr, DIRECT: tl.constexpr):
    """A program's weight / bias gradients of the columns ``cols``: written as they are (DIRECT: the one
    program saw every row) or as this program's partial sums (row ``pid`` of PARTIAL)."""
    if DIRECT:
        if HAS_W:
            tl.store(DW + cols, tl.sum(dw_acc, axis=0).to(DW.dtype.element_ty), mask=col_mask)
        if HAS_B:
            tl.store(DB + cols, tl.sum(db_acc, axis=0).to(DB.dtype.element_ty), mask=col_mask)
    else:
        if HAS_W:
            tl.store(PARTIAL + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
        if HAS_B:
            tl.store(PARTIAL + (num_programs + pid) * N + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def _piece_row_sums(xhat, wdy, IS_RMS: tl.constexpr):
    """A piece's two row sums of the backward, each reduced to a scalar (``s2`` is ``s1`` for RMSNorm)."""
    if IS_RMS:
        s1 = tl.sum(tl.sum(xhat * wdy, axis=1), axis=0)
        s2 = s1
    else:
        s1, s2 = _row_sums(xhat * wdy, wdy)
        s1, s2 = tl.sum(s1, axis=0), tl.sum(s2, axis=0)
    return s1, s2


@triton.jit
def _thread_partials(t, PIECE: tl.constexpr, THREADS: tl.constexpr, UNIT: tl.constexpr):
    """A (1, PIECE) tile of one row summed to (THREADS,): each thread's own elements added, nothing exchanged. The
    load's layout gives thread j the UNIT-element vectors at j * UNIT + k * THREADS * UNIT (fewer a vector where the
    piece is narrower: PIECE // THREADS); the reshape names that order, so it moves no value (sm_90 builds: no
    shuffle, no shared memory). Any other order would still add the same elements, only through shared memory."""
    V: tl.constexpr = UNIT if PIECE >= THREADS * UNIT else PIECE // THREADS
    return tl.sum(tl.sum(tl.reshape(t, [PIECE // (THREADS * V), THREADS, V]), axis=2), axis=0)


@triton.jit
def _joint_row_sums(xhat, wdy, xhat_t, wdy_t, xhat_u, wdy_u, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                    BLOCK_U: tl.constexpr, THREADS: tl.constexpr, UNIT: tl.constexpr, IS_RMS: tl.constexpr):
    """The backward's two row sums of a row in pieces (``s2`` is ``s1`` for RMSNorm) in one reduction across the
    program: each piece summed within its threads first (_thread_partials), the pieces' partials added, then one
    exchange between the threads for the row (the NOTE above JOINT_SUMS)."""
    p1 = _thread_partials(xhat * wdy, BLOCK_N, THREADS, UNIT) + _thread_partials(xhat_t * wdy_t, BLOCK_T, THREADS, UNIT)
    if BLOCK_U > 1:
        p1 += _thread_partials(xhat_u * wdy_u, BLOCK_U, THREADS, UNIT)
    if IS_RMS:
        s1 = tl.sum(p1, axis=0)
        s2 = s1
    else:
        p2 = _thread_partials(wdy, BLOCK_N, THREADS, UNIT) + _thread_partials(wdy_t, BLOCK_T, THREADS, UNIT)
        if BLOCK_U > 1:
            p2 += _thread_partials(wdy_u, BLOCK_U, THREADS, UNIT)
        s1, s2 = _row_sums(p1[None, :], p2[None, :])
        s1, s2 = tl.sum(s1, axis=0), tl.sum(s2, axis=0)
    return s1, s2


@triton.jit
def _add_to_accumulators(dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u,
                         xhat_w_u, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_U: tl.constexpr):
    """The weight / bias gradients' accumulators of a row's pieces (the third one's only with HAS_U) with the row
    added, in this order (_norm_bwd_pieces places the call: EARLY_ACC)."""
    if HAS_W:
        dw_acc += dy * xhat_w
        dw_acc_t += dy_t * xhat_w_t
        if HAS_U:
            dw_acc_u += dy_u * xhat_w_u
    if HAS_B:
        db_acc += dy
        db_acc_t += dy_t
        if HAS_U:
            db_acc_u += dy_u
    return dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u


@triton.jit
def _norm_bwd_pieces(
    DY, DS, Z, W, B, MEAN, RSTD, DX, DRES, PARTIAL, DW, DB, seed, pid, num_programs, num_blocks, M, N,
    stride_dy, stride_ds, stride_z, stride_dx, stride_dres, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_U: tl.constexpr, STAGES: tl.constexpr, DIRECT: tl.constexpr,
    TWO_FMA: tl.constexpr, RELOAD: tl.constexpr, EARLY_ACC: tl.constexpr, HOLD: tl.constexpr = 0,
    THREADS: tl.constexpr = 0,
):
    """The backward of rows held in pieces (the launcher's rule: backward_rule), one row a block: the head's
    BLOCK_N columns (all in the row), the tail's BLOCK_T (masked at N) and, where BLOCK_U > 1, a third piece of
    BLOCK_U after them (masked at N; the tail then inside the row: 13312 = 8192 + 4096 + 1024), each with its own
    weight / bias gradient accumulators. The row sums reduce each piece to a scalar before they are added (as the
    forward's _row_statistics_of_pieces: a piece of another layout than the head's is never moved into it). RELOAD:
    the weight (and bias) loaded again each row rather than held (_bwd_reload); EARLY_ACC: the accumulators take the
    row before its sums are reduced rather than after its stores (_early_acc)."""
    tl.static_assert(BLOCK_M == 1, "a row in pieces is one row a block")
    OUT_DTYPE: tl.constexpr = DX.dtype.element_ty
    offs = tl.arange(0, BLOCK_N)
    cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
    cols_u = BLOCK_N + BLOCK_T + tl.arange(0, BLOCK_U)
    col_mask = offs < BLOCK_N  # (all true: the head is inside the row)
    if BLOCK_U > 1:
        col_mask_t = cols_t < BLOCK_N + BLOCK_T  # (all true: a third piece follows)
    else:
        col_mask_t = cols_t < N
    col_mask_u = cols_u < N
    w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    w_t, b_t = _load_weight_and_bias(W, B, cols_t, col_mask_t, HAS_W, HAS_B, ACTIVATION, "")
    w_u, b_u = _load_weight_and_bias(W, B, cols_u, col_mask_u, HAS_W, HAS_B, ACTIVATION, "")
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    dw_acc_t = tl.zeros([BLOCK_M, BLOCK_T], dtype=tl.float32)
    db_acc_t = tl.zeros([BLOCK_M, BLOCK_T], dtype=tl.float32)
    dw_acc_u = tl.zeros([BLOCK_M, BLOCK_U], dtype=tl.float32)
    db_acc_u = tl.zeros([BLOCK_M, BLOCK_U], dtype=tl.float32)
    for block in tl.range(pid, num_blocks, num_programs, num_stages=STAGES):
        rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        mask_t = row_mask[:, None] & col_mask_t[None, :]
        mask_u = row_mask[:, None] & col_mask_u[None, :]
        z_h = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0)
        dy_h = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0)
        z_t_h = tl.load(Z + rows[:, None] * stride_z + cols_t[None, :], mask=mask_t, other=0.0)
        dy_t_h = tl.load(DY + rows[:, None] * stride_dy + cols_t[None, :], mask=mask_t, other=0.0)
        z, dy, z_t, dy_t = _widen(z_h, HOLD), _widen(dy_h, HOLD), _widen(z_t_h, HOLD), _widen(dy_t_h, HOLD)
        if BLOCK_U > 1:
            z_u_h = tl.load(Z + rows[:, None] * stride_z + cols_u[None, :], mask=mask_u, other=0.0)
            dy_u_h = tl.load(DY + rows[:, None] * stride_dy + cols_u[None, :], mask=mask_u, other=0.0)
            z_u, dy_u = _widen(z_u_h, HOLD), _widen(dy_u_h, HOLD)
        mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
        if RELOAD:
            w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "evict_last")
            w_t, b_t = _load_weight_and_bias(W, B, cols_t, col_mask_t, HAS_W, HAS_B, ACTIVATION, "evict_last")
            w_u, b_u = _load_weight_and_bias(W, B, cols_u, col_mask_u, HAS_W, HAS_B, ACTIVATION, "evict_last")
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z, dy, w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        xhat_t, xhat_w_t, dy_t, wdy_t = _norm_bwd_math(
            z_t, dy_t, w_t, b_t, mean, rstd, mask_t, seed, rows, cols_t, N, dropout_p, dropout_scale, MODE, HAS_W,
            HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        if BLOCK_U > 1:
            xhat_u, xhat_w_u, dy_u, wdy_u = _norm_bwd_math(
                z_u, dy_u, w_u, b_u, mean, rstd, mask_u, seed, rows, cols_u, N, dropout_p, dropout_scale, MODE,
                HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        else:
            # (names for _add_to_accumulators and _joint_row_sums, which leave them unread)
            dy_u, xhat_w_u, xhat_u, wdy_u = dw_acc_u, dw_acc_u, dw_acc_u, dw_acc_u
        if HOLD == 2:
            dh_h, dy, wdy = _round_held_gradient(dy, w, HAS_W)
            dh_t_h, dy_t, wdy_t = _round_held_gradient(dy_t, w_t, HAS_W)
            if BLOCK_U > 1:
                dh_u_h, dy_u, wdy_u = _round_held_gradient(dy_u, w_u, HAS_W)
        if EARLY_ACC:
            dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u = _add_to_accumulators(
                dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u, xhat_w_u,
                HAS_W, HAS_B, BLOCK_U > 1)
        if THREADS > 0:
            s1, s2 = _joint_row_sums(xhat, wdy, xhat_t, wdy_t, xhat_u, wdy_u, BLOCK_N, BLOCK_T, BLOCK_U, THREADS,
                                     128 // Z.dtype.element_ty.primitive_bitwidth, IS_RMS)
        else:
            s1, s2 = _piece_row_sums(xhat, wdy, IS_RMS)
            s1_t, s2_t = _piece_row_sums(xhat_t, wdy_t, IS_RMS)
            s1 += s1_t
            s2 += s2_t
            if BLOCK_U > 1:
                s1_u, s2_u = _piece_row_sums(xhat_u, wdy_u, IS_RMS)
                s1 += s1_u
                s2 += s2_u
        c1 = tl.zeros([BLOCK_M], dtype=tl.float32) + s1 / N
        c2 = tl.zeros([BLOCK_M], dtype=tl.float32) + s2 / N
        if HOLD == 2:
            # z and the rounded d(affine output) held, widened again (the NOTE above ACT_BWD_HOLD)
            xhat, xhat_w, dy, wdy = _held_gradient_math(z_h, dh_h, w, mean, rstd, HAS_W, CAST_BEFORE_WEIGHT, OUT_DTYPE)
            xhat_t, xhat_w_t, dy_t, wdy_t = _held_gradient_math(z_t_h, dh_t_h, w_t, mean, rstd, HAS_W,
                                                                CAST_BEFORE_WEIGHT, OUT_DTYPE)
            if BLOCK_U > 1:
                xhat_u, xhat_w_u, dy_u, wdy_u = _held_gradient_math(z_u_h, dh_u_h, w_u, mean, rstd, HAS_W,
                                                                    CAST_BEFORE_WEIGHT, OUT_DTYPE)
        elif HOLD:
            # the held bf16 row widened again (the NOTE above _widen_bf16): its fp32 tiles not kept across the sums
            xhat, xhat_w, dy, wdy = _norm_bwd_math(
                _widen_bf16_again(z_h), _widen_bf16_again(dy_h), w, b, mean, rstd, mask, seed, rows, offs, N,
                dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
            xhat_t, xhat_w_t, dy_t, wdy_t = _norm_bwd_math(
                _widen_bf16_again(z_t_h), _widen_bf16_again(dy_t_h), w_t, b_t, mean, rstd, mask_t, seed, rows, cols_t,
                N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                OUT_DTYPE)
            if BLOCK_U > 1:
                xhat_u, xhat_w_u, dy_u, wdy_u = _norm_bwd_math(
                    _widen_bf16_again(z_u_h), _widen_bf16_again(dy_u_h), w_u, b_u, mean, rstd, mask_u, seed, rows,
                    cols_u, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                    ACTIVATION, OUT_DTYPE)
        dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
        _store_input_grad(DX, DRES, DS, rows, offs, mask, dz, seed, N, stride_dx, stride_dres, stride_ds, dropout_p,
                          dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        dz_t = _input_grad(xhat_t, wdy_t, c1, c2, rstd, IS_RMS, TWO_FMA)
        _store_input_grad(DX, DRES, DS, rows, cols_t, mask_t, dz_t, seed, N, stride_dx, stride_dres, stride_ds,
                          dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        if BLOCK_U > 1:
            dz_u = _input_grad(xhat_u, wdy_u, c1, c2, rstd, IS_RMS, TWO_FMA)
            _store_input_grad(DX, DRES, DS, rows, cols_u, mask_u, dz_u, seed, N, stride_dx, stride_dres, stride_ds,
                              dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        if not EARLY_ACC:
            dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u = _add_to_accumulators(
                dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u, xhat_w_u,
                HAS_W, HAS_B, BLOCK_U > 1)
    _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, offs, col_mask, dw_acc, db_acc, HAS_W, HAS_B, DIRECT)
    _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols_t, col_mask_t, dw_acc_t, db_acc_t, HAS_W, HAS_B,
                        DIRECT)
    if BLOCK_U > 1:
        _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols_u, col_mask_u, dw_acc_u, db_acc_u, HAS_W,
                            HAS_B, DIRECT)


@triton.jit
def _norm_bwd_kernel(
    DY,  # (M, N) gradient of the output y (post mode: of residual + dropout(norm(x)))
    DS,  # (M, N) pre mode: gradient of the residual-stream output s, or None
    Z,  # (M, N) the normalized input saved by the forward: x, or s in pre mode
    W,  # (N,) weight, or None
    B,  # (N,) bias with an activation (to recompute its input), else None
    MEAN,  # (M,) fp32 row means (LayerNorm only)
    RSTD,  # (M,) fp32 reciprocal standard deviations
    SEED,  # (1,) int64 dropout seed, or None
    DX,  # (M, N) gradient of x
    DRES,  # (M, N) pre mode with dropout: gradient of the residual (before dropout); else None
    PARTIAL,  # (2, G, N) fp32: per-program partial sums of dweight [0] and dbias [1], or None (DIRECT)
    DW,  # (N,) DIRECT: the weight gradient, written by the one program; else None
    DB,  # (N,) DIRECT: the bias gradient; else None
    stride_dy, stride_ds, stride_z, stride_dx, stride_dres,
    M, N, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,  # as in the forward: 0, _GELU_TANH or _GELU_ERF
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,  # N is a multiple of BLOCK_N: no column masks
    TAIL: tl.constexpr,  # one row a block (BLOCK_M = 1) in two pieces: BLOCK_N lanes, then BLOCK_T (backward_rule)
    BLOCK_T: tl.constexpr,
    BLOCK_U: tl.constexpr,  # TAIL: a third piece of BLOCK_U lanes after the tail where > 1 (backward_rule)
    STAGES: tl.constexpr,  # software-pipeline depth of the row-block loop (tl.range num_stages)
    DIRECT: tl.constexpr,  # one program (rows in one tile): writes DW / DB itself, no partials to sum
    TWO_FMA: tl.constexpr,  # dz's form (_input_grad; the launcher's rule: _two_fma)
    RELOAD: tl.constexpr,  # read each row twice, not hold it across its sums (the launcher's rule: _bwd_reload)
    EARLY_ACC: tl.constexpr,  # TAIL: the weight / bias gradients added before the row sums (the rule: _early_acc)
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    WEIGHT_KERNEL: tl.constexpr = False,  # (chunks, or one tile) the weight / bias gradients left to
    # _norm_bwd_weight_kernel (weight_kernel_rule; not in pieces)
    HOLD: tl.constexpr = 0,  # bf16 rows (_bwd_hold): 1 held as loaded across the row sums, widened again (pieces,
    # or RELOAD's one tile instead of its second read); 2 (the GELU form's pieces) z and the rounded gradient held
    THREADS: tl.constexpr = 0,  # TAIL: the program's threads, where the pieces' row sums are reduced jointly
    # (joint_sums_threads; 0: piece by piece)
):
    N, stride_dy, stride_ds, stride_z = N * VEC, stride_dy * VEC, stride_ds * VEC, stride_z * VEC
    stride_dx, stride_dres = stride_dx * VEC, stride_dres * VEC
    # NOTE: each of the G programs walks a strided set of row blocks and keeps its own
    # partial weight / bias gradient; a second kernel sums the G partials in a fixed
    # order. No float atomics, so dweight and dbias are bitwise reproducible.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    offs = tl.arange(0, BLOCK_N)
    num_blocks = tl.cdiv(M, BLOCK_M)
    dropout_p = tl.cast(dropout_p, tl.float32)  # fp32 even when Inductor passes fp64
    dropout_scale = tl.cast(dropout_scale, tl.float32)

    if TAIL:
        _norm_bwd_pieces(
            DY, DS, Z, W, B, MEAN, RSTD, DX, DRES, PARTIAL, DW, DB, seed, pid, num_programs, num_blocks, M, N,
            stride_dy, stride_ds, stride_z, stride_dx, stride_dres, dropout_p, dropout_scale, IS_RMS, MODE, HAS_W,
            HAS_B, HAS_DS, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, BLOCK_M, BLOCK_N, BLOCK_T, BLOCK_U, STAGES,
            DIRECT, TWO_FMA, RELOAD, EARLY_ACC, HOLD, THREADS)
    elif NUM_CHUNKS == 1:
        col_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
        w = tl.zeros([BLOCK_N], dtype=tl.float32)
        b = w
        if not RELOAD:
            w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
        dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        # NOTE: Triton's pipeliner issues the loads of z and dy STAGES - 1 row blocks ahead as
        # asynchronous copies into shared memory (a persistent program has no other source of
        # overlap between its loads and its reductions).
        for block in tl.range(pid, num_blocks, num_programs, num_stages=STAGES):
            rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
            mask = (rows < M)[:, None] & col_mask[None, :]
            z = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0)
            dy = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0)
            dw_acc, db_acc = _norm_bwd_rows(
                z, dy, w, b, dw_acc, db_acc, DY, Z, W, B, DS, MEAN, RSTD, DX, DRES, seed, rows, offs, col_mask, M,
                N, stride_dy, stride_z, stride_ds, stride_dx, stride_dres, dropout_p, dropout_scale, IS_RMS, MODE,
                HAS_W, HAS_B, HAS_DS, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, TWO_FMA, RELOAD, HOLD,
                not WEIGHT_KERNEL)
        if not WEIGHT_KERNEL:
            _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, offs, col_mask, dw_acc, db_acc, HAS_W, HAS_B,
                                DIRECT)
    else:
        # Wide rows, one row at a time: one pass for the two row sums, one for the
        # gradients. The partial weight gradient lives in PARTIAL (this program's row).
        for block in range(pid, num_blocks, num_programs):
            rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
            row_mask = rows < M
            mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
            c1_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            c2_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                xhat, xhat_w, dy, wdy = _norm_bwd_chunk(
                    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N,
                    dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                    DX.dtype.element_ty)
                c1_acc += xhat * wdy
                c2_acc += wdy
            c1, c2 = _row_sums(c1_acc, c2_acc)
            c1, c2 = c1 / N, c2 / N
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                xhat, xhat_w, dy, wdy = _norm_bwd_chunk(
                    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N,
                    dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                    DX.dtype.element_ty)
                dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
                _store_input_grad(DX, DRES, DS, rows, cols, mask, dz, seed, N, stride_dx, stride_dres,
                                  stride_ds, dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
                if HAS_W and not WEIGHT_KERNEL:
                    partial_w = PARTIAL + pid * N + cols
                    pw = tl.load(partial_w, mask=col_mask, other=0.0)
                    tl.store(partial_w, pw + tl.sum(dy * xhat_w, axis=0), mask=col_mask)
                if HAS_B and not WEIGHT_KERNEL:
                    partial_b = PARTIAL + (num_programs + pid) * N + cols
                    pb = tl.load(partial_b, mask=col_mask, other=0.0)
                    tl.store(partial_b, pb + tl.sum(dy, axis=0), mask=col_mask)


@triton.jit
def _norm_bwd_weight_kernel(
    DY,  # (M, N) gradient of the output y, as _norm_bwd_kernel reads it
    Z,  # (M, N) the normalized input saved by the forward
    W,  # (N,) weight, or None
    B,  # (N,) bias with an activation (to recompute its input), else None
    MEAN,  # (M,) fp32 row means (LayerNorm only)
    RSTD,  # (M,) fp32 reciprocal standard deviations
    SEED,  # (1,) int64 dropout seed (post mode), or None
    PARTIAL,  # (2, G, N) fp32: row g of [0] / [1] the weight / bias gradient of row group g, every row written
    stride_dy, stride_z, M, N, rows_per_group, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
    STAGES: tl.constexpr, VEC: tl.constexpr,
):
    """The weight and bias gradients of rows too wide for a program to hold their accumulators (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): program (c, g) walks the rows of group g (``rows_per_group`` of them, a multiple
    of BLOCK_R) down its BLOCK_C columns, BLOCK_R rows at a time, with the backward's own per-element math
    (_norm_bwd_math: dropout, the activation's derivative, the cast before the weight), and writes its sums to row g
    of PARTIAL[0] and PARTIAL[1] (summed by reduce.sum_partials)."""
    N, stride_dy, stride_z = N * VEC, stride_dy * VEC, stride_z * VEC
    dropout_p = tl.cast(dropout_p, tl.float32)  # fp32 even when Inductor passes fp64
    dropout_scale = tl.cast(dropout_scale, tl.float32)
    c = tl.program_id(0)
    g = tl.program_id(1)
    groups = tl.num_programs(1)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    cols = c * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols < N
    w, b = _load_weight_and_bias(W, B, cols, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    dw_acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    first = tl.cast(g, tl.int64) * rows_per_group
    last = tl.minimum(first + rows_per_group, M)
    for start in tl.range(first, last, BLOCK_R, num_stages=STAGES):
        rows = start + tl.arange(0, BLOCK_R)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, Z.dtype.element_ty)
        if HAS_W:
            dw_acc += dy * xhat_w
        if HAS_B:
            db_acc += dy
    if HAS_W:
        tl.store(PARTIAL + g * N + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
    if HAS_B:
        tl.store(PARTIAL + (groups + g) * N + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def _norm_cast_t_kernel(
    Z,  # (M, N) the normalized input as the norm's backward reads it (x, or pre mode's stream s)
    MEAN,  # (M,) fp32 LayerNorm's means, or None (RMSNorm)
    RSTD,  # (M,) fp32
    W,  # (N,) or None
    B,  # (N,) or None
    AMAX,  # (1,) fp32 max |y| of the output as the forward wrote it; GIVEN_SCALE: () fp32 the scale itself
    YT,  # (N, MP) e4m3: y^T quantized with AMAX's scale, zero past column M
    YT_SCALE,  # () fp32 the scale
    stride_z, M, N, MP,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr,
    GIVEN_SCALE: tl.constexpr,  # AMAX is the forward's scale (delayed scaling: the forward's e4m3 output's)
    ROUND: tl.constexpr,  # y rounded to Z's dtype first, as a forward writing y in x's dtype had it (else fp32 y,
    #                       as a forward writing e4m3 quantized it)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """The norm's output made again from its input and the forward's statistics, as _norm_fwd_value makes it and
    rounded to the input's dtype as the forward wrote it, straight into its transposed tensorwise e4m3 cast (the
    weight gradient's operand of the FP8 projection it feeds): one read of the input, where the norm made again
    and then cast would write and read the output once more (ops/fp8.py's _fp8_cast_kernel does the cast the same
    way, its NOTE: the scale loaded as a column of the one amax)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if MEAN is None:
        mean = tl.zeros([BLOCK_M], dtype=tl.float32)
    else:
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    # (no residual, seed or dropout; OUT_DTYPE z's, MODE none, HAS_DROPOUT no, ACTIVATION none, TILE_VECTORS no)
    y = _norm_fwd_value(z, W, B, None, rows, cols, col_mask, mask, mean, rstd, 0, N, 0, 0.0, 1.0,
                        Z.dtype.element_ty, 0, HAS_W, HAS_B, False, CAST_BEFORE_WEIGHT, 0, False)
    if ROUND:
        y = y.to(Z.dtype.element_ty).to(tl.float32)
    store_transposed_cast(y, mask, rows, cols, col_mask, AMAX, YT, YT_SCALE, MP, pid_m, pid_n, GIVEN_SCALE)


# ----------------------------------------------------------------------------------------
# Launchers: plain Python that allocates, tiles and launches, registered as ops without autograd
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_norm_fwd_kernel)
_fwd_fp8_kernel = Kernel(_norm_fwd_fp8_kernel)
_bwd_kernel = Kernel(_norm_bwd_kernel)
_bwd_weight_kernel = Kernel(_norm_bwd_weight_kernel)
_cast_t_kernel = Kernel(_norm_cast_t_kernel)


@contextlib.contextmanager
def tuned(**changes):
    """TUNING with ``changes`` within the block (knobs by field or upper-case name: ``tuned(JOINT_SUMS=True)``;
    NormTuning.replace), restored after it; the rules' caches cleared on entry and exit (a cached rule reads the table,
    not only its arguments). Yields the table in force."""
    global TUNING
    saved = TUNING
    TUNING = saved.replace(**changes)
    _clear_rule_caches()
    try:
        yield TUNING
    finally:
        TUNING = saved
        _clear_rule_caches()


def _clear_rule_caches() -> None:
    """Empties this module's functools caches (the launch rules': _tile, _three_pieces, _bwd_stages_rule, ...)."""
    for value in list(globals().values()):
        if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == __name__:
            value.cache_clear()


class Tile(NamedTuple):
    """How a launch covers a row of N: BLOCK_M rows of BLOCK_N columns a program, plus BLOCK_T more (the
    tail) when ``tail`` and BLOCK_U more after it where ``block_u`` > 1 (the backward's third piece), or NUM_CHUNKS
    chunks of BLOCK_N read again for each pass; ``num_warps``."""

    block_m: int
    block_n: int
    num_chunks: int
    num_warps: int
    tail: bool
    block_t: int
    block_u: int = 1

    def constexprs(self, n: int, tail: bool = True) -> dict:
        """The kernels' tile constexprs (``tail=False``: without TAIL / BLOCK_T, for a kernel that has no tail).
        Cached (a dict a call costs the host path); callers unpack it, never change it."""
        return _tile_constexprs(self, n, tail)

    @property
    def lanes(self) -> int:
        """Lanes a row of the tile: BLOCK_N, plus BLOCK_T with a tail (and BLOCK_U with a third piece)."""
        return self.block_n + (self.block_t + (self.block_u if self.block_u > 1 else 0) if self.tail else 0)


@functools.lru_cache(maxsize=None)
def _tile_constexprs(tile: Tile, n: int, tail: bool) -> dict:
    shape = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, NUM_CHUNKS=tile.num_chunks,
                 EVEN_N=tile.tail or n % tile.block_n == 0)
    if not tail:
        return shape
    return dict(shape, TAIL=tile.tail, BLOCK_T=tile.block_t)


def row_pieces(n: int) -> tuple[int, int]:
    """A row of ``n`` held in registers as power-of-two tiles: ``(n, 0)`` for a power of two, else the
    largest power of two below ``n`` and a power-of-two tail for the rest, where the two waste fewer
    lanes than one tile of ``next_power_of_2(n)`` (4304: 4096 + 256 lanes, not 8192; 1152: 1024 + 128;
    11008: 8192 + 4096; 3 * 2^k: no waste), else ``(next_power_of_2(n), 0)``."""
    whole = next_power_of_2(n)
    head = whole // 2
    if whole == n or head == 0:
        return whole, 0
    tail = max(TUNING.min_tail, next_power_of_2(n - head))
    return (head, tail) if head + tail < whole else (whole, 0)


@functools.lru_cache(maxsize=None)
def _tile(n: int, target_elements: int, elements_per_warp: int, max_lanes: int, tail_from: float,
          min_warps: int = 4, vector_tail: int = 0) -> Tile:
    """The launch rule of both kernels, from the row width alone (see TUNING's NOTEs, ops/norm_tuning.py):

    * a row of at most ``max_lanes`` lanes stays in registers: one power-of-two tile, or two pieces
      (:func:`row_pieces`) when the tile would pass ``tail_from`` lanes or the tail has at least ``vector_tail``
      lanes (nonzero: the forward's FWD_VECTOR_TAIL_LANES); narrow rows are packed several to a
      program (``target_elements`` lanes a program: one row of 1024 bf16 alone is too little work to hide
      memory latency);
    * wider rows go in chunks (the width in CHUNK_CHOICES that pads least), read again for each pass,
      CHUNK_TILE_ELEMENTS lanes a program (several rows: a persistent backward program alone on its
      multiprocessor must keep enough bytes in flight);
    * warps: one per ``elements_per_warp`` lanes, a power of two within ``min_warps``-16.

    (Rows in pieces one row a program, at any tail: :func:`_one_row_pieces`, which the rules try first.)"""
    tuning = TUNING
    whole = next_power_of_2(n)
    head, tail = row_pieces(n)
    if whole <= tail_from and not (vector_tail and tail >= vector_tail):
        head, tail = whole, 0
    lanes = head + tail
    if lanes <= max_lanes:
        block_m = max(1, target_elements // lanes)
        block_m = 1 << (block_m.bit_length() - 1)  # a power of two (tl.arange)
        tile_lanes, block_n, num_chunks = block_m * lanes, head, 1
    else:
        block_n = _chunk_width(n, tuning.chunk_choices)
        block_m, tail, num_chunks = tuning.chunk_tile_elements // block_n, 0, cdiv(n, block_n)
        tile_lanes = block_m * block_n
    num_warps = min(16, max(min_warps, next_power_of_2(cdiv(tile_lanes, elements_per_warp))))
    if tail >= 4 * 32 * tuning.tail_vector:
        num_warps = min(num_warps, tail // (32 * tuning.tail_vector))  # (the NOTE above TAIL_VECTOR)
    return Tile(block_m, block_n, num_chunks, num_warps, tail > 0, max(tail, 1))


def rows_for_count(tile: Tile, m: int, sms: int, elements_per_warp: Optional[int] = None) -> Tile:
    """``tile`` (the width's, from :func:`_tile`) with fewer rows a program when ``m`` rows of it would make fewer
    than ``FWD_MIN_PROGRAMS_PER_SM`` programs for each of ``sms`` multiprocessors (the NOTE above); its warps from
    ``elements_per_warp`` (FWD_ELEMENTS_PER_WARP in force where None)."""
    tuning = TUNING
    wanted = sms * (tuning.fwd_min_programs_per_sm or 0)
    if tile.block_m == 1 or m >= tile.block_m * wanted or tile.num_chunks != 1:
        return tile
    per_warp = tuning.fwd_elements_per_warp if elements_per_warp is None else elements_per_warp
    return _fewer_rows(tile, 1 << (max(1, m // wanted).bit_length() - 1), per_warp)


@functools.lru_cache(maxsize=None)
def _fewer_rows(tile: Tile, block_m: int, elements_per_warp: int) -> Tile:
    lanes = tile.block_n + (tile.block_t if tile.tail else 0)
    warps = min(tile.num_warps, max(4, next_power_of_2(cdiv(block_m * lanes, elements_per_warp))))
    return tile._replace(block_m=block_m, num_warps=warps)


def forward_rule(n: int, is_rms: bool = False, residual: bool = False, pre: bool = False, scalar: bool = False
                 ) -> Tile:
    """The plain forward's tile for rows of ``n`` (the one-row pieces of :func:`_one_row_pieces` from
    FWD_PIECES_FROM_LANES; one row in chunks past FWD_MAX_LANES, RMSNorm's from FWD_RMS_CHUNKS_FROM_LANES
    (:func:`_forward_chunks`); else :func:`_tile`, with the forward's knobs read from TUNING at each call so that a
    benchmark's knob takes effect; LayerNorm without a ``residual`` takes fewer warps for a wide tail, the NOTE
    above FWD_TAIL_PIECE_LANES_PER_WARP), before the row count's rule (:func:`rows_for_count`). ``pre`` and
    ``scalar``: the pre-residual form, and 16-bit rows of one-element accesses (:func:`scalar_rows`): such a
    LayerNorm row in a padded tile past 8192 lanes goes in chunks (the NOTE above FWD_SCALAR_PRE_CHUNK_LANES), and
    RMSNorm's plain chunks take fewer warps from 12289 lanes (the NOTE above FWD_SCALAR_RMS_CHUNKS_FROM_LANES)."""
    tuning = TUNING
    if n > tuning.fwd_max_lanes or (is_rms and tuning.fwd_rms_chunks_from_lanes
                                    and n >= tuning.fwd_rms_chunks_from_lanes):
        if (scalar and is_rms and not residual and not tuning.fwd_chunk_lanes
                and tuning.fwd_scalar_rms_chunks_from_lanes
                and tuning.fwd_scalar_rms_chunks_from_lanes <= n <= tuning.fwd_max_lanes):
            # (the NOTE above FWD_SCALAR_RMS_CHUNKS_FROM_LANES)
            return _forward_chunks(n, (tuning.fwd_scalar_rms_chunk_lanes,), tuning.fwd_scalar_rms_chunk_warps)
        choices = (tuning.fwd_chunk_lanes,) if tuning.fwd_chunk_lanes else tuning.chunk_choices
        return _forward_chunks(n, choices, tuning.fwd_chunk_warps)
    pieces = _one_row_pieces(n, tuning.fwd_pieces_from_lanes, tuning.tail_from_lanes,
                             tuning.fwd_piece_lanes_per_warp, tuning.fwd_piece_min_warps)
    if pieces is not None:
        return pieces
    tile = _tile(n, tuning.fwd_tile_elements, tuning.fwd_elements_per_warp, tuning.fwd_max_lanes,
                 tuning.tail_from_lanes, tuning.fwd_min_warps, tuning.fwd_vector_tail_lanes)
    if (scalar and pre and not is_rms and tuning.fwd_scalar_pre_chunk_lanes and tile.num_chunks == 1
            and not tile.tail and tile.block_m == 1 and tile.block_n > 8192):
        return _forward_chunks(n, (tuning.fwd_scalar_pre_chunk_lanes,), tuning.fwd_scalar_pre_chunk_warps)
    if (tile.tail and tuning.fwd_tail_piece_lanes_per_warp and not is_rms and not residual and tile.block_m == 1
            and tile.block_t >= tuning.fwd_vector_tail_lanes):
        # (the NOTE above FWD_TAIL_PIECE_LANES_PER_WARP)
        warps = max(tuning.fwd_min_warps, next_power_of_2(cdiv(tile.lanes, tuning.fwd_tail_piece_lanes_per_warp)))
        tile = tile._replace(num_warps=min(tile.num_warps, warps))
    return tile


@functools.lru_cache(maxsize=None)
def _forward_chunks(n: int, choices: tuple, warps: int) -> Tile:
    """One row a program of ``warps`` warps in chunks of the width in ``choices`` that pads ``n`` least (the NOTE
    above FWD_RMS_CHUNKS_FROM_LANES)."""
    block_n = _chunk_width(n, choices)
    return Tile(1, block_n, cdiv(n, block_n), warps, False, 1)


def _chunk_width(n: int, choices: tuple) -> int:
    """The chunk width in ``choices`` that pads a row of ``n`` least (the wider one on a tie): both rules' chunks."""
    return min(choices, key=lambda c: (cdiv(n, c) * c, -c))


def _forward_tile(tile: Tile, m, device: torch.device) -> Tile:
    """The forward launch's tile: ``tile`` with :func:`rows_for_count` on CUDA for a plain int row count."""
    if m.__class__ is not int or device.type != "cuda":
        return tile
    return rows_for_count(tile, m, sm_count(device))


def backward_rule(n: int, activation: int = 0, pre: bool = False, element_size: int = 2, is_rms: bool = False,
                  scalar: bool = False, bf16: bool = True) -> Tile:
    """The backward's tile for rows of ``n`` (``activation``: the GELU form's warps; ``pre``: the pre-residual form's
    width limit; ``element_size``: of z and dy; ``is_rms``: RMSNorm's wide tails, BWD_WIDE_PIECES_RMS_MAX_TAIL): the
    three pieces of :func:`_three_pieces` past BWD_WIDE_PIECES_MAX_LANES where three stages of them fit (in the
    pre-residual form only where z and dy are ``bf16``: BWD_THREE_PIECES_PRE; within
    BWD_THREE_PIECES_SMEM_BYTES where they are ``bf16``, held across the row sums, else BWD_SMEM_BYTES: the NOTE above
    BWD_THREE_PIECES_SMEM_BYTES), the two pieces of :func:`_one_row_pieces` where they apply, else one padded tile
    (:func:`_tile`, no tail); ``scalar``: 16-bit rows of one-element accesses, the NOTE above BWD_SCALAR_WARPS. The
    knobs read from TUNING at each call, so that a benchmark's knob takes effect."""
    tuning = TUNING
    row_chunks = _scalar_row_chunks(n, activation, scalar)
    if row_chunks:
        whole_row = (is_rms and not pre) or (not tuning.bwd_scalar_whole_row_rms_only
                                             and (not (is_rms and pre) or tuning.bwd_scalar_whole_row_rms_pre))
        if whole_row and tuning.bwd_scalar_whole_row_warps and next_power_of_2(n) <= tuning.bwd_max_lanes:
            return Tile(1, next_power_of_2(n), 1, tuning.bwd_scalar_whole_row_warps, False, 1)
        if not (is_rms and tuning.bwd_scalar_rms_keeps_pieces):
            return _scalar_chunk_tile(n)
    wide = tuning.bwd_pieces_max_lanes < n <= tuning.bwd_wide_pieces_max_lanes and tuning.bwd_pieces_from_lanes
    piece_warps = tuning.bwd_scalar_warps if scalar and not activation and tuning.bwd_scalar_warps else 1
    tile_warps = 1
    if (scalar and not activation and tuning.bwd_scalar_tile_warps
            and next_power_of_2(n) >= tuning.bwd_scalar_tile_warps_from_lanes):
        tile_warps = tuning.bwd_scalar_tile_warps
    if (tuning.bwd_wide_pieces_max_lanes < n <= tuning.bwd_three_pieces_max_lanes and tuning.bwd_pieces_from_lanes
            and not activation and (not pre or (tuning.bwd_three_pieces_pre and bf16))):
        pieces = _fitting_three_pieces(n, element_size, bf16)
        if pieces is not None:
            return pieces
    if activation:
        pieces = _one_row_pieces(n, tuning.act_bwd_pieces_from_lanes, tuning.act_bwd_pieces_max_lanes,
                                 tuning.act_bwd_piece_lanes_per_warp, tuning.act_bwd_piece_min_warps,
                                 tuning.act_bwd_piece_max_warps,
                                 max_tail=n if tuning.act_bwd_pieces_any_tail else LAYOUT_TAIL_LANES.value)
        if pieces is None and wide and tuning.act_bwd_wide_pieces and tuning.act_bwd_pieces_from_lanes:
            pieces = _wide_pieces(n, 0, n)  # (past the 17 lanes a thread, spilling)
        # (the NOTE above ACT_BWD_THREE_PIECES)
        if (tuning.act_bwd_three_pieces and tuning.act_bwd_pieces_from_lanes and bf16
                and tuning.bwd_pieces_max_lanes < n <= tuning.bwd_three_pieces_max_lanes):
            three = _fitting_three_pieces(n, element_size, bf16)
            if three is not None and three.lanes < (pieces.lanes if pieces is not None else next_power_of_2(n)):
                pieces = three
    elif wide:
        pieces = _wide_pieces(n, tuning.bwd_piece_tail_bytes // element_size,
                              tuning.bwd_wide_pieces_rms_max_tail + 1 if is_rms else tuning.bwd_wide_pieces_max_lanes)
    else:
        pieces = _one_row_pieces(n, tuning.bwd_pieces_from_lanes, tuning.bwd_pieces_max_lanes,
                                 tuning.bwd_piece_lanes_per_warp // piece_warps, tuning.bwd_piece_min_warps, 16,
                                 tuning.bwd_piece_tail_bytes // element_size, tuning.bwd_pieces_max_tail)
    if pieces is not None:
        return pieces
    if row_chunks:  # (RMSNorm's pre-residual form where the rule has no pieces)
        return _scalar_chunk_tile(n)
    max_lanes = tuning.bwd_max_lanes_pre if pre else tuning.bwd_max_lanes
    if pre and scalar and tuning.bwd_scalar_max_lanes_pre:
        max_lanes = min(max_lanes, tuning.bwd_scalar_max_lanes_pre)
    per_warp = tuning.act_bwd_elements_per_warp if activation else tuning.bwd_elements_per_warp // tile_warps
    tile = _tile(n, tuning.bwd_tile_elements, per_warp, max_lanes, float("inf"))
    if tile.num_chunks > 1 and not activation and tuning.bwd_chunk_warps:
        return _chunk_tile(tile)
    return tile


def scalar_rows(vec: int, t: Tensor) -> bool:
    """Whether the rows of ``t``, passed in units of ``vec`` elements, are 16-bit rows of one-element accesses (the
    rules' ``scalar``: the NOTE above BWD_SCALAR_WARPS)."""
    return vec == 1 and t.element_size() == 2


def _scalar_chunk_tile(n: int) -> Tile:
    """Scalar rows of ``n`` in one-row chunks of BWD_SCALAR_CHUNK_LANES lanes (the NOTE above
    BWD_SCALAR_ROW_CHUNKS_FROM_LANES)."""
    tuning = TUNING
    lanes = tuning.bwd_scalar_chunk_lanes
    return Tile(1, lanes, cdiv(n, lanes), tuning.bwd_chunk_warps, False, 1, 1)


def _scalar_row_chunks(n: int, activation: int, scalar: bool) -> bool:
    """Whether the backward takes scalar rows of ``n`` in the one-row chunks or whole rows of the NOTEs above
    BWD_SCALAR_ROW_CHUNKS_FROM_LANES and BWD_SCALAR_WHOLE_ROW_WARPS; the GELU form with BWD_SCALAR_ROW_CHUNKS_ACT, where
    its own tile is not pieces with a tail of at most ACT_BWD_SCALAR_PIECES_MAX_TAIL lanes, up to the whole row's
    BWD_MAX_LANES."""
    tuning = TUNING
    if not (scalar and tuning.bwd_scalar_row_chunks_from_lanes and n >= tuning.bwd_scalar_row_chunks_from_lanes):
        return False
    if not activation:
        return True
    # (not timed past the whole row)
    if not tuning.bwd_scalar_row_chunks_act or next_power_of_2(n) > tuning.bwd_max_lanes:
        return False
    own = backward_rule(n, activation)  # (the GELU form's tiles are the same for scalar rows)
    return not (own.tail and own.block_t <= tuning.act_bwd_scalar_pieces_max_tail)


def _chunk_tile(tile: Tile) -> Tile:
    """The plain forms' backward tile for rows in chunks (the NOTE above BWD_CHUNK_WARPS): BWD_CHUNK_WARPS warps,
    and one row a block where the chunk is BWD_CHUNK_ONE_ROW_LANES lanes or wider."""
    tuning = TUNING
    block_m = 1 if tile.block_n >= tuning.bwd_chunk_one_row_lanes else tile.block_m
    return tile._replace(block_m=block_m, num_warps=tuning.bwd_chunk_warps)


def _wide_pieces(n: int, tail_per_thread: int, max_tail: int) -> Optional[Tile]:
    """The backward's two pieces past BWD_PIECES_MAX_LANES (the NOTE above BWD_WIDE_PIECES_MAX_LANES): at most
    BWD_WIDE_PIECES_MAX_LANES lanes on BWD_WIDE_PIECE_WARPS warps, the tail as :func:`_one_row_pieces` takes it."""
    tuning = TUNING
    warps, lanes = tuning.bwd_wide_piece_warps, tuning.bwd_wide_pieces_max_lanes
    return _one_row_pieces(n, 1, lanes, cdiv(lanes, warps), warps, warps, tail_per_thread, max_tail)


def _fitting_three_pieces(n: int, element_size: int, bf16: bool) -> Optional[Tile]:
    """:func:`_three_pieces` of rows of ``n`` where BWD_THREE_PIECES_MIN_STAGES stages of their z and dy fit the stage
    budget: BWD_THREE_PIECES_SMEM_BYTES where they are ``bf16`` (held; the NOTE above it), else BWD_SMEM_BYTES."""
    tuning = TUNING
    pieces = _three_pieces(n, tuning.bwd_piece_tail_bytes // element_size)
    budget = tuning.bwd_three_pieces_smem_bytes if bf16 and tuning.bwd_hold_pieces else tuning.bwd_smem_bytes
    if pieces is None or tuning.bwd_three_pieces_min_stages * 2 * pieces.lanes * element_size > budget:
        return None
    return pieces


@functools.lru_cache(maxsize=None)
def _three_pieces(n: int, tail_per_thread: int) -> Optional[Tile]:
    """The backward's three pieces past BWD_WIDE_PIECES_MAX_LANES (the NOTE above BWD_THREE_PIECES_MAX_LANES): the
    largest power of two below ``n``, the largest one in the rest, and a power-of-two tail for what is left, of at
    least ``tail_per_thread`` elements a thread (masked past ``n``: 12800 = 8192 + 4096 + 1024 lanes), on
    BWD_WIDE_PIECE_WARPS warps; None where the row has no third piece (12288 = 8192 + 4096: two) or the three would
    take as many lanes as one padded tile."""
    tuning = TUNING
    whole = next_power_of_2(n)
    head = whole // 2
    mid = next_power_of_2(n - head + 1) // 2
    rest = n - head - mid
    if rest <= 0:  # (a power of two, or two pieces exactly)
        return None
    warps = tuning.bwd_wide_piece_warps
    tail = max(tuning.min_tail, next_power_of_2(rest), tail_per_thread * 32 * warps)
    if head + mid + tail >= whole:
        return None
    return Tile(1, head, 1, warps, True, mid, tail)


@functools.lru_cache(maxsize=None)
def _one_row_pieces(n: int, from_lanes: int, max_lanes: int, lanes_per_warp: int, min_warps: int,
                    max_warps: int = 16, tail_per_thread: int = 0, max_tail: int = LAYOUT_TAIL_LANES.value
                    ) -> Optional[Tile]:
    """Rows of ``n`` in two pieces (:func:`row_pieces`), one row a program (a block of the backward's), one warp per
    ``lanes_per_warp`` lanes (a power of two within ``min_warps``-``max_warps``), where ``n`` is at least
    ``from_lanes`` (0: never), the row has a tail of fewer than ``max_tail`` lanes (LAYOUT_TAIL_LANES unless a rule
    says otherwise) and at least ``tail_per_thread`` elements a thread, and the two pieces take at most ``max_lanes``
    lanes; else None. The
    forwards' and the backward's rules (the NOTEs above FWD_PIECES_FROM_LANES and BWD_PIECES_FROM_LANES)."""
    head, tail = row_pieces(n)
    if not from_lanes or n < from_lanes or not 0 < tail < max_tail or head + tail > max_lanes:
        return None
    warps = min(max_warps, max(min_warps, next_power_of_2(cdiv(head + tail, lanes_per_warp))))
    if tail < tail_per_thread * 32 * warps:
        return None
    return Tile(1, head, 1, warps, True, tail)


def _two_fma(tile: Tile, activation: int) -> bool:
    """dz's form in the backward (see the NOTE above BWD_TWO_FMA_MAX_WARPS): two multiply-adds where a thread
    may hold more than 128 registers (at most BWD_TWO_FMA_MAX_WARPS warps, no register cap)."""
    return not activation and tile.num_warps <= TUNING.bwd_two_fma_max_warps


def _bwd_reload(tile: Tile) -> bool:
    """Whether the backward reads each row twice (see the NOTE above BWD_RELOAD_FROM_LANES): every form, in a tile
    of BWD_RELOAD_FROM_LANES lanes or more; in three pieces, whether it reads the weight (and bias) again each row
    (always: the NOTE above BWD_THREE_PIECES_MAX_LANES)."""
    tuning = TUNING
    if tuning.bwd_reload is not None:
        return tuning.bwd_reload
    if tile.num_warps > 16:
        return False  # (BWD_SCALAR_WHOLE_ROW_WARPS: a 16384-lane row on 32 warps holds 16 lanes a thread)
    if tile.tail and tile.block_u > 1:
        return True  # (three pieces: the weight read again each row, the NOTE above BWD_THREE_PIECES_MAX_LANES)
    return tile.num_chunks == 1 and tile.block_m * tile.block_n >= tuning.bwd_reload_from_lanes


def _bwd_hold(tile: Tile, n: int, z_dtype: torch.dtype, dy_dtype: torch.dtype, activation: int, mode: int) -> int:
    """Whether the backward holds its bf16 row as loaded across the row sums and widens it again, the NOTE above
    BWD_HOLD_PIECES: the plain forms' wide pieces (past BWD_PIECES_MAX_LANES: 16 warps under the register cap) of
    BWD_HOLD_PIECES_LANES_PER_THREAD lanes a thread or more instead of their fp32 tiles; the padded 16384-lane tile
    of LayerNorm / RMSNorm (not pre mode) where it pads nothing, instead of its second read (1 in both). With an
    activation, ACT_BWD_HOLD in pieces (1 or 2: its NOTE)."""
    tuning = TUNING
    if tile.num_chunks != 1 or z_dtype != torch.bfloat16 or dy_dtype != torch.bfloat16:
        return 0
    if activation:
        threads = 32 * tile.num_warps
        held = tile.tail and tile.block_m * tile.lanes > tuning.act_bwd_hold_lanes_per_thread * threads
        return tuning.act_bwd_hold if held else 0
    if tile.tail:
        return int(tuning.bwd_hold_pieces and n > tuning.bwd_pieces_max_lanes
                   and tile.block_m * tile.lanes >= tuning.bwd_hold_pieces_lanes_per_thread * 32 * tile.num_warps)
    return int(tuning.bwd_hold and mode != PRE and _bwd_reload(tile) and tile.block_m * tile.block_n == n)


def _early_acc(tile: Tile, mode: int, stages: int) -> bool:
    """Whether the backward in pieces adds a row to the weight / bias gradients' accumulators before its row sums
    rather than after its stores (the NOTE above BWD_EARLY_ACC)."""
    tuning = TUNING
    if tuning.bwd_early_acc is not None:
        return tuning.bwd_early_acc
    return (tile.tail and tile.block_u == 1 and tile.lanes > tuning.bwd_pieces_max_lanes and mode != PRE and stages > 1)


def _stages(stages: int, row_blocks: int, programs: int) -> int:
    """The backward's pipeline depth: none unless each program walks at least ``stages`` row blocks
    (a short walk only pays the pipeline's prologue: [2048, 1024] ran 7% slower with 3 stages)."""
    return stages if row_blocks >= stages * programs else 1


def _bwd_stages(tile: Tile, n: int, element_size: int, per_sm: int, streams: int = 2) -> int:
    """The plain backward's pipeline depth for rows of ``n`` in ``tile`` (one tile a row block), ``per_sm``
    programs a multiprocessor, ``streams`` tensors read a row block (z and dy; and ds in pre mode, which the
    pipeliner stages too): enough row blocks in flight for BWD_BYTES_IN_FLIGHT real bytes a multiprocessor, within
    BWD_MAX_STAGES and BWD_SMEM_BYTES (see the NOTE above BWD_BYTES_IN_FLIGHT); 1 (no pipeline) for row blocks
    past BWD_PIPELINE_MAX_LANES lanes.

    NOTE: counted with two streams in pre mode too, the rule gave the pre-residual LayerNorm backward at
    [8192, 1152] 5 stages (72 KiB of buffers a program): 0.78 -> 0.67 of copy in the sweep
    (benchmarks/results/sweep/2026-11-27-h200/); with its three it keeps 3 stages there and at 4096."""
    tuning = TUNING
    if tuning.bwd_stages is not None:
        return tuning.bwd_stages
    return _bwd_stages_rule(tile, n, element_size, per_sm, streams)


def _bwd_depth(tile: Tile, n: int, element_size: int, per_sm: int, streams: int, activation: int) -> int:
    """The backward launcher's pipeline depth for every form: the GELU form's fixed ACT_BWD_STAGES (none past
    BWD_PIPELINE_MAX_LANES lanes), the others' :func:`_bwd_stages` (``per_sm``: the form's programs a multiprocessor
    for narrow tiles)."""
    tuning = TUNING
    if activation:
        if tile.block_m * tile.lanes <= tuning.act_bwd_pipeline_max_lanes:
            return tuning.act_bwd_stages
        # (the NOTE above BWD_PIPELINE_MAX_LANES: the GELU form's wide pieces with a tail of 8 bytes a thread or more)
        wide_pipelined = (tile.tail and tile.lanes <= tuning.bwd_pipeline_max_lanes
                          and tile.block_t * element_size >= tuning.act_bwd_pipeline_tail_bytes * 32 * tile.num_warps
                          and tuning.act_bwd_stages * streams * tile.lanes * element_size <= tuning.bwd_smem_bytes)
        return tuning.act_bwd_stages if wide_pipelined else 1
    return _bwd_stages(tile, n, element_size, _programs_per_sm(tile.block_n, per_sm), streams)


@functools.lru_cache(maxsize=None)
def _bwd_stages_rule(tile: Tile, n: int, element_size: int, per_sm: int, streams: int) -> int:
    tuning = TUNING
    if tile.block_m * tile.lanes > tuning.bwd_pipeline_max_lanes:
        return 1  # (the NOTE above BWD_PIPELINE_MAX_LANES)
    real = streams * tile.block_m * n * element_size
    padded = streams * tile.block_m * tile.lanes * element_size
    stages = 1 + cdiv(tuning.bwd_bytes_in_flight, per_sm * real)
    budget = tuning.bwd_three_pieces_smem_bytes if tile.block_u > 1 else tuning.bwd_smem_bytes  # (the NOTE above it)
    fit = budget // (per_sm * padded)
    if tile.block_m * tile.lanes > tuning.bwd_pipeline_full_lanes and (fit < 2 or element_size > 2):
        return 1  # (the NOTE above BWD_PIPELINE_MAX_LANES: the wide pieces pipelined in 16-bit dtypes only)
    return max(2, min(stages, tuning.bwd_max_stages, fit))


def _act_bwd_maxnreg(tile: Tile) -> int:
    """The GELU form's one-tile backward's register cap: ACT_BWD_MAXNREG, or what a multiprocessor's registers give
    each thread of a wider block (32 warps: 64; Triton tells ptxas no block size, and a cap past it fails to launch)."""
    return min(TUNING.act_bwd_maxnreg, SM_REGISTERS // (32 * tile.num_warps))


def joint_sums_threads(tile: Tile, scalar: bool = False, forward: bool = False, fp8: bool = False) -> int:
    """A row in pieces' THREADS (both passes' kernels; ``forward``: also FWD_JOINT_SUMS; ``fp8``, the FP8 forward:
    also FP8_FWD_JOINT_SUMS): the program's threads where every piece spans them (the NOTE above JOINT_SUMS), else 0
    (the row's sums reduced piece by piece): never for rows of one-element accesses."""
    tuning = TUNING
    wanted = tuning.joint_sums and (tuning.fwd_joint_sums or not forward) and (tuning.fp8_fwd_joint_sums or not fp8)
    if not (wanted and tile.tail and tile.block_m == 1 and not scalar):
        return 0
    threads = 32 * tile.num_warps
    return threads if min(tile.block_n, tile.block_t, tile.block_u if tile.block_u > 1 else threads) >= threads else 0


def _act_programs_per_sm(tile: Tile) -> int:
    """The GELU form's backward programs a multiprocessor: as many of the tile's as fit its registers under the
    ACT_BWD_MAXNREG cap (65536 a multiprocessor on sm_80-sm_90: 16 warps at 128 a thread), or ACT_BWD_WARPS_PER_SM
    warps where set (the NOTE above ACT_BWD_PIECES_FROM_LANES)."""
    tuning = TUNING
    warps = tuning.act_bwd_warps_per_sm or SM_REGISTERS // (32 * tuning.act_bwd_maxnreg)
    return max(1, warps // tile.num_warps)


def _programs_per_sm(block_n: int, per_sm: int) -> int:
    """The backward's programs a multiprocessor: ``per_sm`` for tiles up to 4096 lanes, one for wider ones
    (the comment above FWD_TILE_ELEMENTS)."""
    return per_sm if block_n <= 4096 else 1


def _num_programs(x: Tensor, row_blocks: int, block_n: int, per_sm: int) -> int:
    if x.is_cuda:
        return max(1, min(row_blocks, sm_count(x.device) * _programs_per_sm(block_n, per_sm)))
    return max(1, min(row_blocks, 4))


def _statistics(x: Tensor, is_rms: bool, stats: bool) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """The forwards' ``(mean, rstd)`` buffers, fp32: mean for LayerNorm with ``stats``, rstd with ``stats``, else
    None. NOTE: shaped like x's rows (its leading dimensions), so that a DTensor x sharded on any of them shards
    its statistics the same way (ops/sharding.py); the kernels index them by flat row."""
    if not stats:
        return None, None
    mean = None if is_rms else x.new_empty(x.shape[:-1], dtype=torch.float32)
    return mean, x.new_empty(x.shape[:-1], dtype=torch.float32)


@launcher_op("norm_fwd")
def _norm_fwd(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, mode: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, activation: int, stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """LayerNorm / RMSNorm forward in every form: returns ``(y, s, mean, rstd)``, an empty tensor for each
    one the form has not: ``s`` (pre mode's residual stream) in pre mode only, ``mean`` for LayerNorm with
    ``stats`` only, ``rstd`` with ``stats`` only (the statistics the backward reads; inference needs
    none). ``mode``: NONE, PRE or POST; ``activation``: 0 or a GELU code, applied after the affine
    (without a residual only). NOTE: always four outputs, so that a DTensor rule can give each one its
    placement (ops/sharding.py)."""
    if activation and mode != NONE:
        raise ValueError("residual_mode: an activation after the norm is fused only without a residual")
    n = int(x.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    m = x2.shape[0]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    s = torch.empty_like(y) if mode == PRE else None
    mean, rstd = _statistics(x, is_rms, stats)
    outputs = (y, empty_if_none(s, x), empty_if_none(mean, x), empty_if_none(rstd, x))
    if m == 0:
        return outputs
    y2 = y.view(-1, n)
    s2 = None if s is None else s.view(-1, n)
    vec, n_units, strides = in_row_units(n, x2.stride(0), row_stride(res2), y2.stride(0), row_stride(s2))
    scalar = scalar_rows(vec, x2)
    tile = _forward_tile(forward_rule(n, is_rms, mode != NONE, mode == PRE, scalar), m, x2.device)
    programs, stages = cdiv(m, tile.block_m), 0
    if n > TUNING.fwd_persist_from_lanes and tile.block_m == 1:  # (a narrow row's launch pays no more host time for it)
        programs, stages = _forward_programs(x2, programs, tile, mode, activation, scalar)
    _fwd_kernel(
        (programs,),
        x2, res2, weight, bias, y2, s2, mean, rstd, seed if dropout_p > 0 else None,
        *strides,
        m, n_units, eps, dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=weight is not None, HAS_B=bias is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        STATS=stats, **tile.constexprs(n), VEC=vec, STAGES=stages,
        EARLY_RESIDUAL=early_residual(tile, n, mode, stages), WB_EVICT=forward_weight_hint(activation),
        THREADS=joint_sums_threads(tile, scalar, forward=True), num_warps=tile.num_warps,
        maxnreg=_fwd_maxnreg(tile, stages, mode, x.element_size(), scalar),
    )
    return outputs


def early_residual(tile: Tile, n: int, mode: int = POST, stages: int = 0) -> bool:
    """Whether the forward of rows of ``n`` in ``mode`` on ``tile`` loads its residual with x (the NOTE above
    FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES): the post-residual form, one chunk, a program a row block (``stages`` 0)."""
    tuning = TUNING
    if mode != POST or stages or not tuning.fwd_early_residual_max_whole_lanes or tile.num_chunks != 1:
        return False
    return tile.tail or n % tile.block_n != 0 or tile.block_n <= tuning.fwd_early_residual_max_whole_lanes


def forward_weight_hint(activation: int) -> str:
    """The forward's weight and bias loads' cache hint (the NOTEs above FWD_WB_EVICT and ACT_FWD_WB_EVICT)."""
    tuning = TUNING
    return tuning.act_fwd_wb_evict if activation else tuning.fwd_wb_evict


def forward_stages(tile: Tile, n: int, mode: int = NONE, activation: int = 0, element_size: int = 2,
                   scalar: bool = False) -> int:
    """The forward's pipeline depth for rows of ``n`` in ``tile``, ``mode`` (0: a program a row block; the NOTE above
    FWD_PERSIST_STAGES), before the row count's part (:func:`_forward_programs`); ``scalar``: 16-bit rows of
    one-element accesses, whose pieces take none (the NOTE above FWD_PERSIST_SCALAR_PIECES)."""
    tuning = TUNING
    if (not tuning.fwd_persist_stages or tile.num_chunks != 1 or tile.block_m != 1
            or tile.lanes <= tuning.fwd_persist_from_lanes or tile.num_warps < tuning.fwd_wide_warps or element_size > 2
            or (scalar and tile.tail and not tuning.fwd_persist_scalar_pieces)):
        return 0
    if not (mode == POST or (mode == NONE and not activation and not tile.tail and tile.lanes > n)):
        return 0
    streams = 2 if mode == POST else 1  # the rows the pipeline stages: x (and the residual)
    if (tuning.fwd_persist_stages - 1) * streams * tile.lanes * element_size > tuning.fwd_persist_smem_bytes:
        return 0
    return tuning.fwd_persist_stages


def _forward_programs(x: Tensor, row_blocks: int, tile: Tile, mode: int, activation: int, scalar: bool = False
                      ) -> tuple[int, int]:
    """``(programs, stages)`` of the forward's launch: a program a row block, or persistent programs
    (:func:`forward_stages`; ``scalar``: its rows' access width) where each walks at least its stages' rows."""
    stages = forward_stages(tile, int(x.shape[-1]), mode, activation, x.element_size(), scalar)
    if not stages:
        return row_blocks, 0
    programs = _num_programs(x, row_blocks, 0, TUNING.fwd_persist_per_sm)
    if row_blocks < stages * programs:
        return row_blocks, 0
    return programs, stages


def _fwd_maxnreg(tile: Tile, stages: int = 0, mode: int = NONE, element_size: int = 2, scalar: bool = False
                 ) -> Optional[int]:
    """The forward's register cap for ``tile`` (the NOTE above FWD_WIDE_MAXNREG; persistent programs, ``stages``:
    what FWD_PERSIST_PER_SM of them leave a thread; the one-row programs of ``mode`` NONE in 16-bit rows
    (``element_size``) of vector accesses (not ``scalar``): the NOTE above FWD_ROW_WARPS_PER_SM)."""
    tuning = TUNING
    if stages:
        threads = 32 * tile.num_warps * tuning.fwd_persist_per_sm
        return SM_REGISTERS // threads if threads >= 512 else None
    if tile.num_warps >= tuning.fwd_wide_warps:
        return tuning.fwd_wide_maxnreg
    if (tuning.fwd_row_warps_per_sm and mode == NONE and element_size <= 2 and not scalar and tile.block_m == 1
            and tile.num_chunks == 1 and tile.lanes > tuning.fwd_persist_from_lanes):
        programs = cdiv(tuning.fwd_row_warps_per_sm, tile.num_warps)
        return SM_REGISTERS // (32 * tile.num_warps * programs) // 8 * 8
    return None


def fp8_forward_rows(n: int, is_rms: bool = False, residual: bool = False, pre: bool = False,
                     scalar: bool = False) -> Tile:
    """The FP8 forward's rows and pieces for rows of ``n``, before its warps (:func:`fp8_forward_tile`): from
    FP8_FWD_PIECES_FROM_LANES (the NOTEs above it and FP8_FWD_PLAIN_ROWS) the plain forward's tile for the form
    given (:func:`forward_rule`, its warps too), but where that is a row in chunks below FWD_MAX_LANES (RMSNorm's)
    the plain LayerNorm forward's: a chunked row takes one more pass for its rowwise scale. Narrower rows, and every
    row with FP8_FWD_PLAIN_ROWS off: the one-row pieces from FP8_FWD_PIECES_FROM_LANES, else the forward's width
    tile."""
    tuning = TUNING
    if tuning.fp8_fwd_plain_rows and tuning.fp8_fwd_pieces_from_lanes and n >= tuning.fp8_fwd_pieces_from_lanes:
        tile = forward_rule(n, is_rms, residual, pre, scalar)
        if tile.num_chunks > 1 and n <= tuning.fwd_max_lanes:
            tile = forward_rule(n, False, residual, pre, scalar)
        return tile
    return (_one_row_pieces(n, tuning.fp8_fwd_pieces_from_lanes, tuning.tail_from_lanes,
                            tuning.fwd_piece_lanes_per_warp, tuning.fwd_piece_min_warps)
            or _tile(n, tuning.fwd_tile_elements, tuning.fwd_elements_per_warp, tuning.fwd_max_lanes,
                     tuning.tail_from_lanes))


def fp8_forward_tile(n: int, m=None, device: Optional[torch.device] = None, residual: bool = False,
                     is_rms: bool = False, pre: bool = False, scalar: bool = False) -> Tile:
    """The tile of the forward with an FP8 output for rows of ``n`` (``m`` of them on ``device``, when given: the
    forward's row-count rule), ``residual`` for the pre- and post-residual forms (``pre``: the pre-residual one),
    ``is_rms`` and ``scalar`` as :func:`forward_rule`'s: the forward's rows, with warps by the rule above
    (benchmarks/norm_fp8.py compiles and times it)."""
    tuning = TUNING
    tile = fp8_forward_rows(n, is_rms, residual, pre, scalar)
    if device is not None:
        tile = _forward_tile(tile, m, device)
    warps = tile.num_warps
    if tile.num_chunks == 1 and (not tile.tail or tuning.fp8_fwd_tail_warps):
        warps = next_power_of_2(cdiv(tile.block_m * tile.lanes, tuning.fp8_fwd_lanes_per_warp))
        if residual:
            warps = max(warps, tile.block_m * tuning.fp8_fwd_residual_warps_per_row)
        warps = min(16, warps)
    return tile._replace(num_warps=max(warps, tuning.fp8_fwd_min_warps))


@launcher_op("norm_fwd_fp8", mutates_args=("history", "amax"))
def _norm_fwd_fp8(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, residual_form: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, activation: int,
    history: Optional[Tensor], amax: Optional[Tensor], stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The norms' forward with an FP8 output: returns ``(y_fp8, scale, s, y, mean, rstd)``.
    ``y_fp8``: the output in e4m3, shaped like x; ``scale``: fp32, rowwise (``history`` None) one a row,
    ``(*x.shape[:-1], 1)``, tensorwise 0-d from ``history`` (delayed scaling: ops/fp8.py), this call's amax
    then rolled into ``history`` (``amax``: its zeroed (1,) scratch). ``s`` in pre mode and ``y`` (the output
    in x's dtype) in post mode, the residual stream; else empty. ``mean`` (LayerNorm) and ``rstd`` with ``stats``
    only (a training step's backward reads them: models/fused.py's FP8 projections), else empty.
    ``residual_form``: NONE, PRE or POST (NOTE: not named ``mode``, which a mutating op's arguments cannot be:
    torch's auto_functionalized passes them as keywords to a function of its own with a ``mode`` parameter).
    Arguments otherwise as :func:`_norm_fwd`."""
    mode = residual_form
    if activation and mode != NONE:
        raise ValueError("residual_mode: an activation after the norm is fused only without a residual")
    n = int(x.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    m = x2.shape[0]
    rowwise = history is None
    if not rowwise:
        _fp8.fp8_history.settle(history)
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scale = x.new_empty((*x.shape[:-1], 1), dtype=torch.float32) if rowwise else empty_scalar(x)
    s = torch.empty_like(x, memory_format=torch.contiguous_format) if mode == PRE else None
    y = torch.empty_like(x, memory_format=torch.contiguous_format) if mode == POST else None
    mean, rstd = _statistics(x, is_rms, stats)
    outputs = (q, scale, empty_if_none(s, x), empty_if_none(y, x), empty_if_none(mean, x), empty_if_none(rstd, x))
    if m == 0:
        if not rowwise:
            scale.copy_(delayed_scale_ref(history))
            roll_amax_history(history, amax)  # an empty call records an amax of 0, as the reference
        return outputs
    _launch_fwd_fp8(x2, res2, weight, bias, y, s, q, scale, history, amax, seed, mean, rstd, eps, mode, dropout_p,
                    is_rms, cast_before_weight, activation, stats,
                    FP8_ROWWISE.value if rowwise else FP8_TENSORWISE.value)
    if not rowwise:
        roll_amax_history(history, amax)
    return outputs


def _launch_fwd_fp8(x2, res2, weight, bias, y, s, q, scale, history, amax, seed, mean, rstd, eps, mode, dropout_p,
                    is_rms, cast_before_weight, activation, stats, code) -> None:
    """Launches the forward with an FP8 output code (``_norm_fwd_fp8_kernel``) over the (M, n) rows ``x2``."""
    m, n = x2.shape[0], int(x2.shape[1])  # a symbolic width is specialized: the tiles depend on it
    h = 0 if history is None else int(history.shape[0])
    s2 = None if s is None else s.view(-1, n)
    y2 = None if y is None else y.view(-1, n)
    vec, n_units, strides = in_row_units(n, x2.stride(0), row_stride(res2), row_stride(y2), row_stride(s2))
    scalar = scalar_rows(vec, x2)
    tile = fp8_forward_tile(n, m, x2.device, residual=mode != NONE, is_rms=is_rms, pre=mode == PRE, scalar=scalar)
    _fwd_fp8_kernel(
        (cdiv(m, tile.block_m),),
        x2, res2, weight, bias, y2, s2, q.view(-1, n), scale, history, amax, seed if dropout_p > 0 else None,
        mean, rstd, *strides,
        m, n_units, eps, dropout_p, dropout_scale(dropout_p), h,
        IS_RMS=is_rms, MODE=mode, HAS_W=weight is not None, HAS_B=bias is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        STATS=stats, **tile.constexprs(n), FP8=code, BLOCK_H=next_power_of_2(h), VEC=vec,
        PDL=code == FP8_TENSORWISE.value and _fp8.roll_pdl(x2),
        THREADS=joint_sums_threads(tile, scalar, forward=True, fp8=True), num_warps=tile.num_warps,
        maxnreg=TUNING.fp8_fwd_maxnreg,
    )


@launcher_op("norm_fwd_amax")
def _norm_fwd_amax(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, residual_form: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The norms' forward for a tensorwise FP8 projection (no residual, or pre mode): ``(y, amax, s, mean, rstd)``,
    ``y`` the normalized output in x's dtype and ``amax`` max |y| (as written) as (1,) fp32, folded by the kernel
    that writes y (the projection's cast then reads y once: fp8_linear's ``x_amax``); ``s``, ``mean``, ``rstd`` as
    :func:`_norm_fwd`'s. The FP8 forward's kernel and tiles (FP8 code ``fp8.FP8_AMAX``)."""
    mode = residual_form
    if mode == POST:
        raise ValueError("residual_mode: the output with its amax is the normalized output, before a residual; "
                         "post mode's output is the residual stream")
    n = int(x.shape[-1])
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    amax = torch.zeros((1,), dtype=torch.float32, device=x.device)
    s = torch.empty_like(y) if mode == PRE else None
    mean, rstd = _statistics(x, is_rms, stats)
    if x2.shape[0] > 0:
        _launch_fwd_fp8(x2, res2, weight, bias, None, s, y, None, None, amax, seed, mean, rstd, eps, mode, dropout_p,
                        is_rms, cast_before_weight, 0, stats, FP8_AMAX.value)
    return y, amax, empty_if_none(s, x), empty_if_none(mean, x), empty_if_none(rstd, x)


@launcher_op("norm_bwd")
def _norm_bwd(
    dy: Tensor, ds: Optional[Tensor], z: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], has_bias: bool,
    mean: Optional[Tensor], rstd: Tensor, seed: Optional[Tensor], mode: int, dropout_p: float, is_rms: bool,
    cast_before_weight: bool, activation: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The norms' backward: returns ``(dx, dres, dweight, dbias)``, an empty tensor for each one the form
    has not: ``dres``, the residual's gradient where it differs from dx, in pre mode with dropout only;
    dweight / dbias with a weight / bias only. ``z`` is the normalized input the forward saved (x, or s
    in pre mode); ``bias`` is read to recompute an activation's input, and gives dbias its dtype."""
    tuning = TUNING
    n = int(z.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    dy2, ds2, z2 = as_rows(dy, n), as_rows(ds, n), as_rows(z, n)
    weight, bias = vector(weight), vector(bias)
    m = z2.shape[0]
    has_w = weight is not None
    has_dropout = dropout_p > 0
    param_dtype = weight.dtype if has_w else z.dtype
    dx = torch.empty_like(z, memory_format=torch.contiguous_format)
    dres = dw = db = None
    if mode == PRE and has_dropout:
        dres = torch.empty_like(dx)
    if has_w:
        dw = z.new_empty((n,), dtype=param_dtype)
    if has_bias:
        # NOTE: in the bias's own dtype: with no weight, x's dtype had rounded an fp32 bias's gradient to bf16 (relative
        # error 3e-3 where the sums are exact in fp32; found by a fuzz of unlisted shapes, 2026-12-04)
        db = z.new_empty((n,), dtype=bias.dtype if bias is not None else param_dtype)
    outputs = (dx, empty_if_none(dres, z), empty_if_none(dw, z), empty_if_none(db, z))
    if m == 0:
        for grad in (dw, db):
            if grad is not None:
                grad.zero_()
        return outputs
    vec, n_units, strides = in_row_units(n, dy2.stride(0), row_stride(ds2), z2.stride(0), n, n)
    scalar = scalar_rows(vec, z)
    bf16 = z.dtype == torch.bfloat16 and dy.dtype == torch.bfloat16
    tile = backward_rule(n, activation, mode == PRE, z.element_size(), is_rms, scalar, bf16)
    block_m, block_n, num_chunks = tile.block_m, tile.block_n, tile.num_chunks
    row_blocks = cdiv(m, block_m)
    # NOTE: a small input (all its rows in a few tiles) is done by one program, which writes the
    # weight and bias gradients itself: one launch instead of two, where the launches are the cost.
    weight_kernel = (has_w or has_bias) and weight_kernel_rule(tile, n, scalar, activation, is_rms, mode == PRE)
    direct = num_chunks == 1 and m * n <= tuning.direct_max_elements and not weight_kernel
    per_sm = _act_programs_per_sm(tile) if activation else tuning.bwd_programs_per_sm
    g = 1 if direct else _num_programs(z, row_blocks, block_n, per_sm)
    stages = _stages(_bwd_depth(tile, n, z.element_size(), per_sm, 3 if ds is not None else 2, activation),
                     row_blocks, g)
    partial = None
    if (has_w or has_bias) and not direct and not weight_kernel:
        # Wide rows accumulate into PARTIAL in place, so there it must start at zero.
        alloc = torch.zeros if num_chunks > 1 else torch.empty
        partial = alloc((2, g, n), dtype=torch.float32, device=z.device)
    _bwd_kernel(
        (g,),
        dy2, ds2, z2, weight, bias if activation else None, mean, rstd, seed if has_dropout else None,
        dx.view(-1, n), None if dres is None else dres.view(-1, n), partial,
        dw if direct else None, db if direct else None,
        *strides,
        m, n_units, dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=has_w, HAS_B=has_bias, HAS_DS=ds is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        **tile.constexprs(n), BLOCK_U=tile.block_u,
        STAGES=stages, DIRECT=direct, TWO_FMA=_two_fma(tile, activation),
        RELOAD=_bwd_reload(tile), EARLY_ACC=_early_acc(tile, mode, stages), VEC=vec,
        WEIGHT_KERNEL=weight_kernel, HOLD=_bwd_hold(tile, n, z2.dtype, dy2.dtype, activation, mode),
        THREADS=joint_sums_threads(tile, scalar), num_warps=tile.num_warps,
        maxnreg=_act_bwd_maxnreg(tile) if activation and num_chunks == 1 else None,
    )
    if weight_kernel:
        partial = _launch_bwd_weight(dy2, z2, weight, bias if activation else None, mean, rstd,
                                     seed if has_dropout else None, strides, m, n, vec, n_units, has_w, has_bias,
                                     dropout_p, is_rms, mode, cast_before_weight, activation)
    if partial is not None:
        sum_partials(partial, dw, db)
    return outputs


def weight_kernel_rule(tile: Tile, n: int, scalar: bool = False, activation: int = 0, is_rms: bool = False,
                       pre: bool = False) -> bool:
    """Whether rows of ``n`` in ``tile`` take their weight / bias gradients from the weight kernel (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): rows in chunks from BWD_WEIGHT_KERNEL_FROM_LANES lanes, scalar rows in one-row
    chunks, and scalar rows in one whole row but plain RMSNorm's (``scalar``, ``activation``, ``is_rms``, ``pre``: as
    :func:`backward_rule`'s; the NOTE above BWD_SCALAR_WHOLE_ROW_RMS_ONLY)."""
    tuning = TUNING
    if tile.num_chunks == 1:
        knob = (tuning.bwd_scalar_whole_row_weight_kernel_rms if is_rms and not pre
                else tuning.bwd_scalar_whole_row_weight_kernel)
        return bool(knob and not tile.tail and tile.block_m == 1 and _scalar_row_chunks(n, activation, scalar))
    return 0 < tuning.bwd_weight_kernel_from_lanes <= n or _scalar_row_chunks(n, activation, scalar)


def weight_grid(m: int, n: int, sms: int) -> tuple[int, int, int]:
    """``(column blocks, row groups, rows a group)`` of the weight kernel (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): the columns in BWD_WEIGHT_COLUMNS, and as many row groups (each a multiple of
    BWD_WEIGHT_ROWS rows) as make BWD_WEIGHT_PROGRAMS_PER_SM programs a multiprocessor of ``sms``, no more than the
    rows allow."""
    tuning = TUNING
    blocks = cdiv(n, tuning.bwd_weight_columns)
    groups = max(1, min(cdiv(m, tuning.bwd_weight_rows), cdiv(tuning.bwd_weight_programs_per_sm * sms, blocks)))
    rows_per_group = cdiv(cdiv(m, groups), tuning.bwd_weight_rows) * tuning.bwd_weight_rows
    return blocks, cdiv(m, rows_per_group), rows_per_group


def _launch_bwd_weight(dy2, z2, weight, bias, mean, rstd, seed, strides, m, n, vec, n_units, has_w, has_bias,
                       dropout_p, is_rms, mode, cast_before_weight, activation) -> Tensor:
    """The weight kernel's launch (:func:`_norm_bwd_weight_kernel`); returns its partial sums (2, G, n)."""
    tuning = TUNING
    blocks, groups, rows_per_group = weight_grid(m, n, sm_count(z2.device) if z2.is_cuda else 1)
    partial = torch.empty((2, groups, n), dtype=torch.float32, device=z2.device)
    _bwd_weight_kernel(
        (blocks, groups),
        dy2, z2, weight, bias, mean, rstd, seed, partial, strides[0], strides[2], m, n_units, rows_per_group,
        dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=has_w, HAS_B=has_bias, HAS_DROPOUT=dropout_code(dropout_p, n),
        CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation, BLOCK_R=tuning.bwd_weight_rows,
        BLOCK_C=tuning.bwd_weight_columns, STAGES=tuning.bwd_weight_stages, VEC=vec, num_warps=tuning.bwd_weight_warps,
    )
    return partial


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


class _NormFunction(torch.autograd.Function):
    """Every norm form. ``config``: (eps, mode, dropout_p, is_rms, cast_before_weight, activation).
    Returns (y, s); ``s`` is None unless the mode is PRE."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config):
        y, s, mean, rstd = _norm_fwd(x, weight, bias, residual, seed, *config, True)
        return y, _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)

    @staticmethod
    def backward(ctx, dy, ds):
        return _norm_backward(ctx, dy, ds)


class _NormFp8Function(torch.autograd.Function):
    """A norm whose normalized output feeds one FP8 projection in a training step (models/fused.py): the forward
    writes it in e4m3 with each row's scale and the statistics, and nothing in x's dtype but the residual stream.
    Returns ``(out, s, q, scale)``: ``out`` stands for the normalized output in autograd, ``y`` itself in post
    mode (the residual stream, which the projection reads), else a tensor of its shape with no storage of its own
    (zero strides), which :func:`blockfuse.ops.fp8.fp8_linear_quantized` takes beside ``q``: the projection's
    input gradient comes back here as its gradient. ``s``: pre mode's residual stream, else None; ``q`` and
    ``scale`` take no gradient. Then, while traced (else None), the row statistics ``mean`` (None for RMSNorm) and
    ``rstd``, no gradient either: with ``s`` (else x) what :func:`_norm_transposed_cast` makes y^T's cast again
    from (:func:`norm_for_fp8_projection`'s ``recast``)."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config, history=None, amax=None):
        eps, mode, dropout_p, is_rms, cast_before_weight, activation = config
        # (history, amax: tensorwise with delayed scaling from this state, updated in place; None: rowwise)
        q, scale, s, y, mean, rstd = _norm_fwd_fp8(x, weight, bias, residual, seed, eps, mode, dropout_p, is_rms,
                                                   cast_before_weight, activation, history, amax, True)
        s = _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)
        # (a launcher's absent output may be a shared empty tensor: not returned; eagerly none is returned, no Recast)
        traced = torch.compiler.is_compiling() or tracing()
        mean, rstd = (None if is_rms else mean, rstd) if traced else (None, None)
        ctx.mark_non_differentiable(q, scale, *(t for t in (mean, rstd) if t is not None))
        out = y if mode == POST else zero_stand_in(x, x.shape)
        return out, s, q, scale, mean, rstd

    @staticmethod
    def backward(ctx, dy, ds, dq, dscale, dmean, drstd):
        return (*_norm_backward(ctx, dy, ds), None, None)


class _NormAmaxFunction(torch.autograd.Function):
    """A norm whose normalized output feeds one tensorwise FP8 projection in a training step (models/fused.py):
    ``(y, s, amax, mean, rstd)``, the output in x's dtype, pre mode's residual stream (else None) and y's amax,
    folded by the kernel (:func:`_norm_fwd_amax`), which takes no gradient; then, while traced (else None), the
    row statistics as :class:`_NormFp8Function` returns them (:func:`norm_for_tensorwise_projection`'s
    ``recast``). The backward is :class:`_NormFunction`'s."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config):
        eps, mode, dropout_p, is_rms, cast_before_weight, _ = config
        y, amax, s, mean, rstd = _norm_fwd_amax(x, weight, bias, residual, seed, eps, mode, dropout_p, is_rms,
                                                cast_before_weight, True)
        s = _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)
        traced = torch.compiler.is_compiling() or tracing()
        mean, rstd = (None if is_rms else mean, rstd) if traced else (None, None)
        ctx.mark_non_differentiable(amax, *(t for t in (mean, rstd) if t is not None))
        return y, s, amax, mean, rstd

    @staticmethod
    def backward(ctx, dy, ds, damax, dmean, drstd):
        return _norm_backward(ctx, dy, ds)


def _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd) -> Optional[Tensor]:
    """What both Functions' backward reads; returns ``s`` (None unless the mode is PRE)."""
    _, mode, _, is_rms, _, activation = config
    s = s if mode == PRE else None
    mean = None if is_rms else mean
    # Pre mode normalizes s = residual + dropout(x): keep s (an output the block keeps anyway as
    # its residual stream) rather than x and residual. An activation's backward also reads the bias, and the
    # bias gradient is made in the bias's dtype (a parameter: kept at no cost).
    ctx.save_for_backward(x if s is None else s, weight, bias, mean, rstd, seed)
    ctx.config = config
    ctx.has_bias = bias is not None
    ctx.set_materialize_grads(False)
    return s


def _norm_backward(ctx, dy, ds):
    z, weight, bias, mean, rstd, seed = ctx.saved_tensors
    _, mode, dropout_p, is_rms, cast_before_weight, activation = ctx.config
    if dy is None:
        dy = torch.zeros_like(z)
    grads = _norm_bwd(dy, ds if mode == PRE else None, z, weight, bias, ctx.has_bias, mean, rstd, seed, mode,
                      dropout_p, is_rms, cast_before_weight, activation)
    dx, dres, dw, db = grads
    if mode == POST:
        dresidual = dy  # the add passes the gradient straight through
    elif mode == PRE:
        dresidual = dres if dropout_p > 0 else dx
    else:
        dresidual = None
    db = db if ctx.has_bias else None
    dw = None if weight is None else dw
    return dx, dw, db, dresidual, None, None


def norm_for_fp8_projection(x, weight, bias, eps, residual, residual_mode, dropout_p, training, is_rms,
                            cast_before_weight=False, fp8_scaling: Optional[Float8Scaling] = None,
                            recast: Optional[list] = None):
    """The norm (LayerNorm, or RMSNorm with ``is_rms``; residual forms as :func:`layer_norm`'s) whose output one
    rowwise FP8 projection reads: ``((q, scale, proxy), stream)``. ``q`` (e4m3, x's shape) and ``scale`` (fp32,
    ``(*x.shape[:-1], 1)``) are the normalized output and its rows' scales, written by the one pass; ``stream``
    the residual stream (pre mode's ``s``, post mode's output), None without a residual. ``proxy``: None without
    autograd; in a training step what :func:`blockfuse.ops.fp8.fp8_linear_quantized` takes for the input's
    gradient (see :class:`_NormFp8Function`). For blocks (models/fused.py); needs the Triton path.
    ``fp8_scaling``: tensorwise instead, the one 0-d scale from this delayed-scaling state (the projection's,
    a ``Float8Linear(recipe="delayed")``'s x history; updated in place). ``recast``: a list, to which a traced
    training call with ``fp8_scaling`` (no residual, or pre mode) appends the projection's ``x_cast``, a
    :class:`blockfuse.ops.fp8.Recast` making y^T's cast again from the norm's input and statistics (eagerly
    :func:`cast_again_quantized` reads them from the norm's node)."""
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    if fp8_scaling is not None:
        check_fp8_output("tensorwise", fp8_scaling, x)
    history, amax = (None, None) if fp8_scaling is None else fp8_scaling
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    config = (float(eps), mode, p, is_rms, cast_before_weight, 0)
    if _needs_grad(x, weight, bias, residual):
        out, s, q, scale, mean, rstd = _NormFp8Function.apply(x, weight, bias, residual, seed, config, history,
                                                               amax)
        if torch.compiler.is_compiling():
            # NOTE: Dynamo traces the Function without its mark_non_differentiable (torch 2.11-2.13): q came back
            # requiring grad and the projection refused it; it takes no gradient either way.
            q, scale = q.detach(), scale.detach()
        if recast is not None and fp8_scaling is not None and mode != POST and (
                torch.compiler.is_compiling() or tracing()):
            recast.append(_fp8.Recast(_norm_transposed_cast, (cast_before_weight, True),
                                      (x if s is None else s, mean, rstd, weight, bias)))
        return (q, scale, out), (out if mode == POST else s)
    q, scale, s, y, _, _ = _norm_fwd_fp8(x, weight, bias, residual, seed, *config, history, amax, False)
    return (q, scale, None), (s if mode == PRE else y if mode == POST else None)


def norm_for_tensorwise_projection(x, weight, bias, eps, residual, residual_mode, dropout_p, training, is_rms,
                                   cast_before_weight=False, recast: Optional[list] = None):
    """The norm (LayerNorm, or RMSNorm with ``is_rms``; no residual, or pre mode) whose output one tensorwise FP8
    projection reads: ``((y, amax), stream)``. ``y`` is the normalized output in x's dtype, as the plain norm
    writes it, and ``amax`` (1,) fp32 its max |y|, folded by the kernel that writes y: the projection takes it as
    ``x_amax`` and its cast reads y once. ``stream``: pre mode's residual stream, else None. For blocks
    (models/fused.py); needs the Triton path. ``recast``: a list, to which a traced training call appends the
    projection's ``x_cast``, a :class:`blockfuse.ops.fp8.Recast` making y^T's cast with amax's scale again from the
    norm's input and statistics (eagerly :func:`cast_again` reads them from the norm's node)."""
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    config = (float(eps), mode, p, is_rms, cast_before_weight, 0)
    if _needs_grad(x, weight, bias, residual):
        y, s, amax, mean, rstd = _NormAmaxFunction.apply(x, weight, bias, residual, seed, config)
        if recast is not None and mode != POST and (torch.compiler.is_compiling() or tracing()):
            recast.append(_fp8.Recast(_norm_transposed_cast, (cast_before_weight, False),
                                      (x if s is None else s, mean, rstd, weight, bias)))
        return (y, amax), s
    y, amax, s, _, _ = _norm_fwd_amax(x, weight, bias, residual, seed, *config[:5], False)
    return (y, amax), (s if mode == PRE else None)


@launcher_op("norm_cast_t")
def _norm_transposed_cast(z: Tensor, mean: Optional[Tensor], rstd: Tensor, weight: Optional[Tensor],
                          bias: Optional[Tensor], amax: Tensor, cast_before_weight: bool,
                          given_scale: bool) -> tuple[Tensor, Tensor]:
    """``(yt, scale)``: the norm's output of ``z`` with the forward's statistics, transposed and quantized to e4m3
    with the tensorwise scale of ``amax``, ``(N, MP)``, MP = the rows rounded up to fp8.GEMM_MULTIPLE, zero past
    them (:func:`_norm_cast_t_kernel`). ``given_scale``: ``amax`` is the 0-d scale of the forward's own e4m3 output
    (delayed scaling), which quantized y in fp32, so y is not rounded to z's dtype first."""
    n = int(z.shape[-1])
    z2 = as_rows(z, n)
    m = z2.shape[0]
    mp = _fp8.round_up(m, _fp8.GEMM_MULTIPLE)
    yt = z.new_empty((n, mp), dtype=torch.float8_e4m3fn)
    scale = empty_scalar(z)
    block_m, block_n, num_warps = _fp8._tiles(z.device).tile
    _cast_t_kernel((max(1, cdiv(mp, block_m)), max(1, cdiv(n, block_n))), z2, mean, rstd, vector(weight),
                   vector(bias), amax, yt, scale, z2.stride(0), m, n, mp, HAS_W=weight is not None,
                   HAS_B=bias is not None, CAST_BEFORE_WEIGHT=cast_before_weight, GIVEN_SCALE=given_scale,
                   ROUND=not given_scale, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps)
    return yt, scale


def cast_again(y: Tensor, amax: Tensor, bias: Optional[Tensor]):
    """For ``(y, amax)`` of :func:`norm_for_tensorwise_projection` recorded eagerly (``bias``: the norm's bias, or
    None): a function that makes y^T's tensorwise e4m3 cast and its scale again from what the norm's node keeps for
    its backward (its input, or pre mode's stream, rounded to x's dtype as the backward reads it, with the
    forward's statistics), in one pass (:func:`_norm_cast_t_kernel`), for as long as that node's backward has not
    run; None for any other tensor, or while anything traces. The fused block passes it to the projection the
    norm feeds (``x_cast=``), which then keeps nothing of y. Without a residual the values are y's own; in pre mode
    (y normalized the fp32 sum) those of the kept stream with the forward's statistics, as the norm's backward
    reads them (the block's recompute of y, models/recompute.py, takes that stream's own statistics: within a
    rounding of these)."""
    if torch.compiler.is_compiling() or tracing() or not use_triton(y):
        return None
    node = y.grad_fn
    if not isinstance(node, _NormAmaxFunction._backward_cls):
        return None
    return _cast_from_node(node, bias, amax, False)


def cast_again_quantized(proxy: Tensor, scale: Tensor, bias: Optional[Tensor]):
    """:func:`cast_again` for a norm that wrote its output in e4m3 with a tensorwise (delayed) ``scale``
    (:func:`norm_for_fp8_projection` with ``fp8_scaling``, recorded eagerly, no residual or pre mode; ``proxy``
    its stand-in): a function making y^T's e4m3 cast with that scale again from what the norm's node keeps for
    its backward, in one pass, for the projection's weight gradient (``x_cast=``), which then keeps nothing of
    the norm's output. y is quantized in fp32 as the forward quantized it: without a residual the forward's
    bytes transposed; in pre mode those of the kept stream with the forward's statistics (see
    :func:`cast_again`). None for any other tensor, or while anything traces."""
    if torch.compiler.is_compiling() or tracing() or not use_triton(proxy):
        return None
    node = proxy.grad_fn
    if not isinstance(node, _NormFp8Function._backward_cls) or scale.dim() != 0 or node.config[1] == POST:
        return None
    return _cast_from_node(node, bias, scale, True)


def _cast_from_node(node, bias: Optional[Tensor], amax: Tensor, given_scale: bool):
    """The function :func:`cast_again` and :func:`cast_again_quantized` return: y^T's cast made again
    (:func:`_norm_transposed_cast`) from what the norm's autograd ``node`` keeps for its backward."""
    cast_before_weight = node.config[4]
    bias = None if bias is None else bias.detach()

    def cast() -> tuple[Tensor, Tensor]:
        z, weight, _, mean, rstd, _ = node.saved_tensors
        return _norm_transposed_cast(z, mean, rstd, weight, bias, amax, cast_before_weight, given_scale)

    return cast


def _call_form(x, residual, residual_mode, dropout_p, training) -> tuple[float, int, Optional[Tensor]]:
    """(dropout probability, residual mode code, dropout seed or None) of one call."""
    p = float(dropout_p) if training else 0.0
    if p > 0 and is_dtensor(x):
        raise ValueError("dropout_p: dropout on a DTensor is not supported yet (each rank's shard would draw the "
                         "same mask); pass dropout_p=0 or training=False")
    mode = NONE if residual is None else (PRE if residual_mode == "pre" else POST)
    return p, mode, draw_seed(x.device) if p > 0 else None


def _needs_grad(*tensors: Optional[Tensor]) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _run_norm(x, weight, bias, residual, residual_mode, dropout_p, training, eps, is_rms, cast_before_weight,
              activation=0, fp8=None, fp8_scaling=None):
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    if fp8 is not None:
        # Forward only (checked by the functionals): the launcher, no autograd.
        history, amax = (None, None) if fp8 == "rowwise" else fp8_scaling
        q, scale, s, y, _, _ = _norm_fwd_fp8(x, weight, bias, residual, seed, float(eps), mode, p, is_rms,
                                             cast_before_weight, activation, history, amax, False)
        if mode == NONE:
            return q, scale
        return (q, scale), (s if mode == PRE else y)
    config = (float(eps), mode, p, is_rms, cast_before_weight, activation)
    if _needs_grad(x, weight, bias, residual):
        y, s = _NormFunction.apply(x, weight, bias, residual, seed, config)
        return (y, s) if mode == PRE else y
    outputs = _norm_fwd(x, weight, bias, residual, seed, *config, False)
    return (outputs[0], outputs[1]) if mode == PRE else outputs[0]  # (y, s) or y


# ----------------------------------------------------------------------------------------
# Public functionals
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p):
    if not isinstance(x, Tensor):
        raise TypeError(f"x: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"x: expected a float32, float16 or bfloat16 tensor (float64 runs the "
                        f"reference), got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x: expected at least one dimension (the normalized one), got a scalar")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _check_parameter(name, p, x)
    # NOTE: comparisons only (no math.isinf): under torch.compile a float module attribute may be a
    # symbolic float, which Dynamo compares and guards but cannot pass to math functions (a graph
    # break on torch 2.11).
    if not isinstance(eps, (int, float)) or not eps > 0 or eps == float("inf"):
        raise ValueError(f"eps: expected a positive finite number, got {eps!r}")
    if residual_mode != "pre" and residual_mode != "post":
        raise ValueError(f"residual_mode: expected 'pre' or 'post', got {residual_mode!r}")
    if not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p: expected a probability in [0, 1), got {dropout_p!r}")
    if residual is not None:
        check_like("residual", residual, x, "x")
    elif dropout_p > 0:
        raise ValueError("dropout_p: dropout is applied to the branch added to a residual; "
                         "pass residual= or set dropout_p=0")


def _narrow_pre(x: Tensor, residual: Optional[Tensor], residual_mode: str) -> bool:
    """Pre mode on rows narrower than PRE_MIN_LANES in a 16-bit dtype (the NOTE above PRE_MIN_LANES)."""
    return (residual is not None and residual_mode == "pre" and x.shape[-1] < TUNING.pre_min_lanes
            and x.element_size() < 4)


def _check_parameter(name, p, x):
    if not isinstance(p, Tensor) or not p.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got "
                        f"{p.dtype if isinstance(p, Tensor) else type(p).__name__}")
    if p.dim() != 1 or p.shape[0] != x.shape[-1]:
        raise ValueError(f"{name}: expected shape ({x.shape[-1]},) to match the last dimension of x, "
                         f"got {tuple(p.shape)}")
    if p.device != x.device:
        raise ValueError(f"{name}: expected a tensor on {x.device} like x, got {p.device}")


def _check_fp8(fp8, fp8_scaling, x, *params) -> None:
    """The FP8 output option's arguments (ops/fp8.py); forward only, so no gradient may be asked for."""
    if check_fp8_output(fp8, fp8_scaling, x):
        refuse_fp8_gradient(x, *params)
        if is_dtensor(x):
            raise ValueError("fp8: an FP8 output of a DTensor is not supported yet; pass fp8=None")


def layer_norm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
    *,
    residual: Optional[Tensor] = None,
    residual_mode: str = "pre",
    dropout_p: float = 0.0,
    training: bool = True,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """LayerNorm over the last dimension, optionally fused with a residual add and dropout.

    Returns ``y`` without a residual, ``(norm(s), s)`` with ``s = residual + dropout(x)`` in
    ``"pre"`` mode, and ``residual + dropout(norm(x))`` in ``"post"`` mode.

    ``fp8="rowwise"`` or ``"tensorwise"`` (forward only): the normalized output is written in
    float8_e4m3fn with its fp32 scale in the same pass, and ``(y_fp8, scale)`` comes back in place of the
    GEMM's input: ``(y_fp8, scale)`` without a residual, ``((y_fp8, scale), s)`` in pre mode, and in post
    mode ``((y_fp8, scale), y)`` with ``y`` the output in x's dtype too (the next residual stream).
    ``blockfuse.fp8_linear(y_fp8, w, x_scale=scale, recipe=<the same>)`` takes them as they are. Rowwise
    scales are ``(*x.shape[:-1], 1)``, each row's amax / 448; tensorwise is delayed scaling from
    ``fp8_scaling`` (a :class:`blockfuse.ops.fp8.Float8Scaling` kept across calls), a 0-d scale.
    ``blockfuse.ops.fp8``'s docstring has the recipe, and why the option is forward only.
    """
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    _check_fp8(fp8, fp8_scaling, x, weight, bias, residual)
    if not use_triton(x, draws_random=training and dropout_p > 0) or _narrow_pre(x, residual, residual_mode):
        return layer_norm_ref(x, weight, bias, eps, residual=residual, residual_mode=residual_mode,
                              dropout_p=dropout_p, training=training, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, bias, residual, residual_mode, dropout_p, training, eps, False, False,
                     fp8=fp8, fp8_scaling=fp8_scaling)


def rms_norm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    eps: float = 1e-6,
    *,
    residual: Optional[Tensor] = None,
    residual_mode: str = "pre",
    dropout_p: float = 0.0,
    training: bool = True,
    cast_before_weight: bool = False,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """RMSNorm over the last dimension, optionally fused with a residual add and dropout.

    ``cast_before_weight=False`` multiplies by the weight in fp32 and casts once (OLMo-2, and
    ``torch.nn.functional.rms_norm``); ``True`` casts the normalized row to x's dtype first,
    then multiplies (Hugging Face Llama). Returns as :func:`layer_norm` does, ``fp8`` included.
    """
    _check_norm_args(x, weight, None, eps, residual, residual_mode, dropout_p)
    _check_fp8(fp8, fp8_scaling, x, weight, residual)
    if not use_triton(x, draws_random=training and dropout_p > 0) or _narrow_pre(x, residual, residual_mode):
        return rms_norm_ref(x, weight, eps, residual=residual, residual_mode=residual_mode,
                            dropout_p=dropout_p, training=training, cast_before_weight=cast_before_weight,
                            fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, None, residual, residual_mode, dropout_p, training, eps, True,
                     bool(cast_before_weight), fp8=fp8, fp8_scaling=fp8_scaling)


def layer_norm_gelu(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
    approximate: str = "tanh",
    *,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """``gelu(layer_norm(x) * weight + bias)`` over the last dimension in one pass, and a fused
    backward. ``approximate`` is GELU's form as in ``torch.nn.functional.gelu``: ``"tanh"`` or
    ``"none"`` (erf). The output is in x's dtype; statistics and GELU are computed in fp32, except the tanh
    form's derivative in the backward of bf16 ``x`` on a GPU: packed fp16 (its error stays under what PyTorch's bf16
    GELU makes; ``BLOCKFUSE_GELU_GRAD_F16X2=0`` at import for fp32, the NOTE above ``GELU_GRAD_F16X2``).
    ``fp8``: ``(y_fp8, scale)`` instead (forward only), as :func:`layer_norm` without a residual."""
    _check_norm_args(x, weight, bias, eps, None, "pre", 0.0)
    tanh = check_gelu_approximation(approximate)
    _check_fp8(fp8, fp8_scaling, x, weight, bias)
    if not use_triton(x):
        return layer_norm_gelu_ref(x, weight, bias, eps, approximate, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, bias, None, "pre", 0.0, False, eps, False, False,
                     GELU_CODES["tanh" if tanh else "none"], fp8=fp8, fp8_scaling=fp8_scaling)


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8=None,
                    fp8_scaling=None):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    p = float(dropout_p) if training else 0.0

    def output(y):  # the normalized output as the op returns it: in x's dtype, or (y_fp8, scale) from fp32
        return y.to(x.dtype) if fp8 is None else quantize_output_ref(y, fp8, fp8_scaling)

    def dropout(t):
        if p == 0.0:
            return t
        keep = dropout_mask if dropout_mask is not None else torch.rand_like(t) >= p
        return torch.where(keep, t / (1.0 - p), torch.zeros_like(t))

    z = x.to(compute)
    if residual is None:
        return output(normalize(z, compute))
    if residual_mode == "pre":
        s = residual.to(compute) + dropout(z)
        return output(normalize(s, compute)), s.to(x.dtype)
    y = residual.to(compute) + dropout(normalize(z, compute))
    return y.to(x.dtype) if fp8 is None else (output(y), y.to(x.dtype))


def layer_norm_ref(x, weight=None, bias=None, eps=1e-5, *, residual=None, residual_mode="pre",
                   dropout_p=0.0, training=True, dropout_mask=None, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`layer_norm`: fp32 math (fp64 for fp64 inputs), output in x's dtype (with ``fp8``:
    quantized from the fp32 output, :func:`blockfuse.ops.fp8.quantize_output_ref`).

    ``dropout_mask`` (bool, like the dropped tensor, True = keep) replaces the random mask.
    """

    def normalize(z, compute):
        w = weight.to(compute) if weight is not None else None
        b = bias.to(compute) if bias is not None else None
        return F.layer_norm(z, (z.shape[-1],), w, b, eps)

    return _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8, fp8_scaling)


def rms_norm_ref(x, weight=None, eps=1e-6, *, residual=None, residual_mode="pre", dropout_p=0.0,
                 training=True, cast_before_weight=False, dropout_mask=None, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`rms_norm`: fp32 math (fp64 for fp64 inputs), output in x's dtype (``fp8``: as
    :func:`layer_norm_ref`)."""

    def normalize(z, compute):
        y = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)
        if weight is None:
            return y
        if cast_before_weight:
            y = y.to(x.dtype).to(compute)
        return y * weight.to(compute)

    return _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8, fp8_scaling)


def layer_norm_gelu_ref(x, weight=None, bias=None, eps=1e-5, approximate="tanh", *, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`layer_norm_gelu`: fp32 math (fp64 for fp64 inputs), output in x's dtype (``fp8``: as
    :func:`layer_norm_ref`)."""
    check_gelu_approximation(approximate)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = weight.to(compute) if weight is not None else None
    b = bias.to(compute) if bias is not None else None
    y = F.gelu(F.layer_norm(x.to(compute), (x.shape[-1],), w, b, eps), approximate=approximate)
    return y.to(x.dtype) if fp8 is None else quantize_output_ref(y, fp8, fp8_scaling)
