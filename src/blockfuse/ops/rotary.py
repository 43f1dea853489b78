"""Rotary position embedding (RoPE) of q and k in one kernel, forward and backward.

For each token at position ``p`` and each rotated pair ``(x1, x2)`` of a head with angle
``theta = p * inv_freq[j]``::

    y1 = x1 * cos(theta) - x2 * sin(theta)
    y2 = x2 * cos(theta) + x1 * sin(theta)

Two conventions pick the pairs: rotate-half (Llama, OLMo, GPT-NeoX; ``interleaved=False``)
pairs element ``j`` with ``j + rotary_dim / 2``; interleaved (Meta, GPT-J; ``interleaved=True``)
pairs ``2j`` with ``2j + 1``. With a partial rotary (``rotary_dim < head_dim``) the last
``head_dim - rotary_dim`` elements of each head pass through unchanged. The backward is the
rotation by the negative angle (the same kernel with the sign of sin flipped); cos and sin
are constant buffers and get no gradient.

Math in fp32, outputs in the input dtype. The file reads top to bottom: kernels; the launchers
(ops ``blockfuse::rotary_fwd``, ``blockfuse::rotary_fwd_`` in place, ``blockfuse::rotary_bwd`` and
``blockfuse::rotary_bwd_fp8_delayed``, the packed backward into a delayed FP8 layer's gradient operands; see
``ops/launch.py``); the one autograd Function; the public functional; the reference.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from typing import Optional, Sequence

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops import fp8, fp8_history
from blockfuse.ops.checks import check_like
from blockfuse.ops.copy import copy_rows, launch_copy_rows
# (kernels call fp8's jit functions and constants by their own names: ops/fp8_act.py's NOTE on Inductor)
from blockfuse.ops.fp8 import E5M2_MAX, _quantized, delayed_scales, fold_amax, reciprocal
from blockfuse.ops.launch import MAX_GRID_YZ, Kernel, cdiv, empty_if_none, launcher_op, next_power_of_2, sm_count, \
    tracing, zero_stand_in
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import use_triton

LAYOUTS = ("bshd", "bhsd")

# NOTE: about 1024 elements a program tile (tokens x heads x head_dim) and 256 a warp: each
# program moves a few KB per loop step, enough to hide memory latency, with small register tiles
# so that many programs fit on a multiprocessor. On an H200 (benchmarks/rotary_tiles.py) this
# was 2% faster than 4096 / 1024 at [4, 2048, 32, 128] and [8, 4096, 32 (8 kv), 128], and 3% at
# [1, 128, 16, 64].
@dataclass(frozen=True)
class Tiles:
    """The launch rules' tuning: the padded kernel's (``_tile``; benchmarks/rotary_tiles.py sweeps it), the flat
    kernel's (``_flat_tile``) and the FP8 backward's (``_bwd_fp8_tile``). ``TILES`` is the table in force;
    benchmarks/rotary_head_dims.py sets a field as ``--setting LABEL:TILES.field=V``."""

    tile_elements: int = 1024  # elements (tokens x heads x head_dim) a program tile
    elements_per_warp: int = 256
    max_warps: int = 8
    # NOTE: the padded kernel's grid puts the batch on an axis of its own (axis 2, the token tiles of one batch row
    # on axis 0) where a batch row holds a whole token tile and the batch fits the axis: b and s then come from
    # program ids, not from dividing a flat token index by the runtime seq length before the first load (sm_90: the
    # first load at SASS instruction 44-50, not 62-70). On an H100, forward + backward 1.000-1.027x the flat token
    # grid at head_dim 64 / 128 / 256 x heads 32/32, 32/8, 16/4 x seq 1024 / 4096 ([4, seq] bf16; benchmarks/
    # results/launch-rules/49-rope-batch-axis-2026-12-07-h100/).
    batch_axis: bool = True
    # NOTE: the flat kernel's tile: flat_tile (token, pair) elements a program, flat_elements_per_warp a warp; at
    # least flat_min_tile (shorter sequences take _rotary_kernel). Heads split over the grid until it has
    # flat_programs_per_sm programs a multiprocessor (a full residency of 4-warp programs: each holds one head's loads
    # in flight at a time, so the multiprocessor's bytes in flight come from its programs' count) and until a program
    # rotates at most flat_heads_per_program heads of q and k together: a program's heads run one after the other,
    # load, rotate, store, so a long walk leaves its multiprocessor waiting on one head's loads at a time. Measured on
    # an H200 with 4 splits (benchmarks/results/launch-rules/8-flat-rope/, head_dim 72, [4, 4096]): 5 heads a program
    # (16/4) 0.91 of copy forward, 10 (32/8) 0.81, 16 (32/32) 0.77. At most 2 heads (4 until 2026-12-07), forward +
    # backward over the launcher with 4, [4, seq 1024 / 4096] x heads {32/32, 32/8, 16/4}: H100 1.008-1.053 /
    # 1.031-1.061 at head_dim 72, 1.001-1.024 / 1.015-1.028 at 80, taking 72 with 32/32 heads from 0.95 / 0.97x
    # torch.compile to 1.00 / 1.03x; H200 0.999-1.031 / 1.020-1.037 at 72, 0.995-1.026 / 0.991-1.034 at 80
    # (launch-rules/45-rope-settings-2026-12-07-h100/, 44-*-h200/). 8 heads lost up to 6% (H200, seq 4096).
    flat_tile: int = 1024
    flat_elements_per_warp: int = 256
    flat_min_tile: int = 128
    flat_programs_per_sm: int = 16
    flat_heads_per_program: int = 2
    # NOTE: the packed backward into FP8 operands (_rotary_bwd_fp8_kernel) takes a tile of BLOCK_M tokens x one head,
    # about bwd_fp8_elements elements (both halves), on a warp for every 2048 of them: at head_dim 128 that is 64
    # tokens on 4 warps, the two 64 x 64 halves of ops/fp8_act.py's delayed activation backward (BWD_DELAYED_TILE,
    # the best of 17 tiles for the same writes: both e5m2 layouts and the column sums). At most bwd_fp8_max_tokens
    # tokens, at least 16 (the transposed layout's rows take BLOCK_M bytes a store).
    bwd_fp8_elements: int = 8192
    bwd_fp8_max_tokens: int = 128


TILES = Tiles()

# NOTE: the pair axis of a tile is one power-of-two block of next_power_of_2(rotary_dim / 2) pairs (and
# the pass-through part one of next_power_of_2(head_dim - rotary_dim) elements), masked past the pairs:
# 44%, 37% and 25% of its lanes idle at head_dim 72, 80 and 96 (36, 40 and 48 pairs in 64 lanes). Tried
# and measured slower (issue 22): the pairs in power-of-two chunks with at most 1/8 of the lanes masked
# (36 -> 5 x 8, 48 -> 3 x 16; the pass-through part likewise; one head block a program). On an H200
# (torch 2.11, triton 3.6; [4, 4096] x heads {32/32, 32/8, 16/4} bf16 "bhsd", per-token tables,
# benchmarks/rotary_head_dims.py, two runs), forward+backward against torch.compile, both with the hints:
# chunked 0.33-0.39x at head_dim 72 (forward 0.26-0.29 of copy), 0.26-0.33x at 80, 0.99-1.09x at 96; the
# padded block 0.98-1.10x at 72 (forward 0.77-0.79 of copy), 1.02-1.10x at 80, 1.06-1.15x at 96. What
# held head_dim 72 back first was its 2-byte loads (the alignment NOTE below); then the masked lanes: the flat
# kernel (_rotary_flat_kernel, no pair axis to pad) took these head dims to 1.08-1.32x (forward 0.87-1.01 of
# copy; benchmarks/results/launch-rules/8-flat-rope/). The padded block stays for power-of-two pair counts,
# interleaved pairs, a pass-through part and short rows.
# NOTE: the grid: a program loops over the heads of its token block (q and k in the same programs once
# tokens alone fill the GPU). Two other grids measured no faster and went (benchmarks/NOTES.md, "Rotary
# grid"): one head block a program, and "bhsd" tiles spanning a head's consecutive tokens.


# NOTE: the packed form (rotary_packed, the fused attention's) copies v out of the QKV output in the rotation's
# launch (its forward) and v's gradient into the packed gradient in the rotation back (its backward): the
# kernels copy a third tensor's heads beside the second's (HAS_COPY), one launch each way where copy_rows made a
# second (a launch costs a GPU's host 15-75 us in a backward: benchmarks/NOTES.md, "The op path and host time").
# False: copy_rows as before (an A/B knob for benchmarks/mlp_blocks_ab.py --knob rotary-v-copy and the tests).
# Timed (benchmarks/results/op-path/rotary-packed-2026-12-07-h100/, host-levers-2026-12-07-h200/): the padded kernel
# (power-of-two pair counts: head_dim 64, 128, 256) with the copy 1.016-1.050x the two launches' kernel time on an
# H100, the `reordered` step without CUDA graphs 0.99x / 1.02x on an H200 (its host's drift: 2.6%), its CUDA tests
# passing. FLAT_COPY_IN_LAUNCH: the flat kernel's copy (head_dim 40, 48, 72, 80, 96...), which copies each v row
# whole (16-byte runs). None (the default): by the rule below; True / False: always / never (the A/B knob). The rule:
# the copy joins the launch when a head's row is a whole number of 32-byte sectors. Timed on an H100 (kernel time
# against the copy apart, bf16; benchmarks/results/op-path/rotary-packed-2026-12-07-h100/2-row-copy/, 3-sector-rule/,
# GQA 32/8 at seq 4096 and the A/B's own shapes): rows of whole sectors tie or win (48: 1.00x, 80: 1.00-1.05x,
# 96: 1.00-1.28x, 112: 0.99-1.01x), rows half a sector past one lose 4-8% every time (40, 72, 88, 104, 120:
# 0.92-0.96x); the rule was written from 72, 80 and 96 and predicted the other six. (Why is a guess, untested:
# rows that end mid-sector share sectors with the next, where copy_rows moves a token's kv heads as one aligned
# run.) Off the rule, copy_rows' launch costs the host 15-75 us and the kernels 4-8% less time.
PACKED_COPY_IN_LAUNCH = True
FLAT_COPY_IN_LAUNCH: bool | None = None
FLAT_COPY_SECTOR = 32  # bytes

# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------
#
# NOTE: the rotary dim R and head dim D are compile-time constants (a model has one or two):
# the compiler then knows the alignment of the second half (x[R/2:]) and drops the masks
# of full tiles, so every load and store is vectorized.
# NOTE: Triton knows of an int argument only whether it is a multiple of 16. At head_dim 72 the
# token stride is 72 (or 72 x heads), so every load and store of q and k was a 2-byte one (sm_90
# SASS: LDG.E.U16, against LDG.E.64 at head_dim 80). The launcher passes ALIGN, the largest power
# of two (up to 16 bytes' worth) that divides every token and head stride, and the kernel asserts it
# on the token and head offsets (TABLE_ALIGN likewise for the cos / sin rows); 1 (no hint) where
# Triton knows already, so power-of-two head dims compile to the code they had without hints (sm_90
# SASS identical at head_dim 64, 128, 256, both conventions, forward and backward; triton 3.9). On an
# H200 (torch 2.11, triton 3.6, [4, 4096] bf16 "bhsd", per-token tables, benchmarks/rotary_head_dims.py)
# head_dim 72 went from 0.58-0.65 to 0.77-0.79 of copy forward and from 0.70 / 0.82 / 0.86x to
# 0.98 / 1.10 / 1.04x torch.compile forward+backward (heads 32/32, 32/8, 16/4); 80 and 96 (strides
# multiples of 16: no hint) unchanged.


@triton.jit
def _rotate_heads(
    X, Y, cos, sin, b, s, token_mask, first_block, block_step,
    H, stride_xb, stride_xs, stride_xh, stride_xd, stride_yb, stride_ys, stride_yh, stride_yd,
    R: tl.constexpr, D: tl.constexpr, INTERLEAVED: tl.constexpr, COPY_PASS: tl.constexpr, ALIGN: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_PASS: tl.constexpr,
    ROTATE: tl.constexpr = True,
):
    """Rotates the H heads of one tensor for a tile of tokens, BLOCK_H heads a step (``ROTATE=False``: copies
    them as they are, the packed forward's v).

    ``cos``, ``sin``: (BLOCK_T, 1, BLOCK_P) fp32, already loaded for these tokens; ``b``,
    ``s``: (BLOCK_T,) int64 batch and sequence index of each token (``b`` an int64 scalar on the batch axis).
    """
    half = R // 2
    p = tl.arange(0, BLOCK_P)
    x_token = b * stride_xb + s * stride_xs  # (BLOCK_T,)
    y_token = b * stride_yb + s * stride_ys
    if ALIGN > 1:
        x_token = tl.multiple_of(x_token, ALIGN)
        y_token = tl.multiple_of(y_token, ALIGN)
    x_token = x_token[:, None]  # (BLOCK_T, 1)
    y_token = y_token[:, None]
    # the heads of this program: head blocks first_block, first_block + block_step, ...
    for h0 in range(first_block * BLOCK_H, H, block_step * BLOCK_H):
        h = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        th_mask = token_mask[:, None] & (h < H)[None, :]  # (BLOCK_T, BLOCK_H)
        x_h = h * stride_xh
        y_h = h * stride_yh
        if ALIGN > 1:
            x_h = tl.multiple_of(x_h, ALIGN)
            y_h = tl.multiple_of(y_h, ALIGN)
        x_head = (x_token + x_h[None, :])[:, :, None]  # (BLOCK_T, BLOCK_H, 1)
        y_head = (y_token + y_h[None, :])[:, :, None]
        if INTERLEAVED:
            # NOTE: one contiguous load of the rotary part, split into even / odd elements
            # in registers, rather than two stride-2 loads that cannot be vectorized.
            c = tl.arange(0, 2 * BLOCK_P)
            mask = th_mask[:, :, None] & (c < R)[None, None, :]
            x = tl.load(X + x_head + c[None, None, :] * stride_xd, mask=mask, other=0.0)
            if ROTATE:
                x1, x2 = tl.split(tl.reshape(x.to(tl.float32), (BLOCK_T, BLOCK_H, BLOCK_P, 2)))
                y1 = x1 * cos - x2 * sin
                y2 = x2 * cos + x1 * sin
                y = tl.reshape(tl.join(y1, y2), (BLOCK_T, BLOCK_H, 2 * BLOCK_P))
            else:
                y = x
            tl.store(Y + y_head + c[None, None, :] * stride_yd, y.to(Y.dtype.element_ty), mask=mask)
        else:
            mask = th_mask[:, :, None] & (p < half)[None, None, :]
            first = p[None, None, :]
            second = (p + half)[None, None, :]
            x1 = tl.load(X + x_head + first * stride_xd, mask=mask, other=0.0)
            x2 = tl.load(X + x_head + second * stride_xd, mask=mask, other=0.0)
            if ROTATE:
                y1 = x1.to(tl.float32) * cos - x2.to(tl.float32) * sin
                y2 = x2.to(tl.float32) * cos + x1.to(tl.float32) * sin
            else:
                y1, y2 = x1, x2
            tl.store(Y + y_head + first * stride_yd, y1.to(Y.dtype.element_ty), mask=mask)
            tl.store(Y + y_head + second * stride_yd, y2.to(Y.dtype.element_ty), mask=mask)
        if COPY_PASS:
            c = R + tl.arange(0, BLOCK_PASS)
            mask = th_mask[:, :, None] & (c < D)[None, None, :]
            rest = tl.load(X + x_head + c[None, None, :] * stride_xd, mask=mask, other=0.0)
            tl.store(Y + y_head + c[None, None, :] * stride_yd, rest.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(
    X1,  # (B, S, H1, D) first tensor to rotate (q, or dq_out in the backward), any strides
    Y1,  # (B, S, H1, D) its output; may be X1 itself (in place)
    X2,  # (B, S, H2, D) second tensor (k / dk_out); X1 when H2 == 0 (never touched)
    Y2,  # (B, S, H2, D) its output
    X3,  # (B, S, H3, D) a tensor copied as it is (v / dv), with X2's strides, or None (HAS_COPY)
    Y3,  # (B, S, H3, D) its copy, with Y2's strides, or None
    COS,  # (B or 1, rows, *) or (rows, *) cosine table: the half table is read through strides
    SIN,  # same shape as COS: sine table
    POS,  # (B or 1, S) or (S,) int positions, or None (position = seq_offset + s)
    stride_x1b, stride_x1s, stride_x1h, stride_x1d,  # strides in (batch, seq, head, dim) order
    stride_y1b, stride_y1s, stride_y1h, stride_y1d,
    stride_x2b, stride_x2s, stride_x2h, stride_x2d,
    stride_y2b, stride_y2s, stride_y2h, stride_y2d,
    stride_cos_b, stride_cos_r, stride_cos_c,  # batch (0: shared), row, column of the half table
    stride_sin_b, stride_sin_r, stride_sin_c,
    stride_pos_b, stride_pos_s,
    num_tokens, S, H1, H2, H3, seq_offset, table_rows, splits1,  # splits1: programs (axis 1) that rotate X1
    R: tl.constexpr,  # rotary dim (even)
    D: tl.constexpr,  # head dim
    INTERLEAVED: tl.constexpr,
    BACKWARD: tl.constexpr,
    HAS_POS: tl.constexpr,
    COPY_PASS: tl.constexpr,
    QK_TOGETHER: tl.constexpr,  # one program rotates its heads of both tensors (else: separate programs)
    HAS_COPY: tl.constexpr,  # X3 is copied to Y3 by the programs of X2
    WIDE_TOKENS: tl.constexpr,  # token indices need int64 (2**31 - BLOCK_T tokens or more)
    BATCH_AXIS: tl.constexpr,  # the grid's axis 2 is the batch, axis 0 a batch row's token tiles (else all tokens)
    ALIGN: tl.constexpr,  # a power of two dividing every batch, seq and head stride of X1, Y1, X2, Y2 (1: no hint)
    TABLE_ALIGN: tl.constexpr,  # the same for the batch and row strides of COS and SIN
    BLOCK_T: tl.constexpr,
    BLOCK_H1: tl.constexpr,
    BLOCK_H2: tl.constexpr,
    BLOCK_P: tl.constexpr,  # next_power_of_2(R / 2): the pairs, padded
    BLOCK_PASS: tl.constexpr,  # next_power_of_2(D - R): the pass-through part, padded
):
    # NOTE: one program owns a tile of tokens and walks every head of both tensors, so the
    # cos / sin rows of its tokens are read once and reused for all q and k heads.
    # NOTE: token indices, batch and position are divided in int32 when they fit (a 64-bit
    # division is a long software routine on the GPU, ahead of every load of a short input)
    # and widened to int64 for the address arithmetic.
    # NOTE: with the batch on an axis of its own (BATCH_AXIS) the program ids give b and s, and the first
    # load's address waits on no division (Tiles.batch_axis's NOTE).
    tile = tl.program_id(0)
    if WIDE_TOKENS:
        tile = tile.to(tl.int64)
    tokens = tile * BLOCK_T + tl.arange(0, BLOCK_T)  # (with BATCH_AXIS: within batch row b)
    if BATCH_AXIS:
        token_mask = tokens < S
        b = tl.program_id(2).to(tl.int64)
        s = tokens.to(tl.int64)
    else:
        token_mask = tokens < num_tokens
        b = (tokens // S).to(tl.int64)
        s = (tokens % S).to(tl.int64)
    if HAS_POS:
        row = tl.load(POS + b * stride_pos_b + s * stride_pos_s, mask=token_mask, other=0).to(tl.int64)
    else:
        row = s + seq_offset
    # NOTE: positions from position_ids are not checked on the host (that needs a device
    # sync); one outside the table reads nothing and makes its token's rotated part NaN.
    in_table = (row >= 0) & (row < table_rows)
    p = tl.arange(0, BLOCK_P)
    table_mask = (token_mask & in_table)[:, None] & (p < R // 2)[None, :]
    cos_token = b * stride_cos_b + row * stride_cos_r  # (BLOCK_T,)
    if TABLE_ALIGN > 1:
        cos_token = tl.multiple_of(cos_token, TABLE_ALIGN)
    cos = tl.load(COS + cos_token[:, None] + p[None, :] * stride_cos_c, mask=table_mask, other=0.0).to(tl.float32)
    sin_token = b * stride_sin_b + row * stride_sin_r
    if TABLE_ALIGN > 1:
        sin_token = tl.multiple_of(sin_token, TABLE_ALIGN)
    sin = tl.load(SIN + sin_token[:, None] + p[None, :] * stride_sin_c, mask=table_mask, other=0.0).to(tl.float32)
    cos = tl.where(in_table[:, None], cos, float("nan"))
    sin = tl.where(in_table[:, None], sin, float("nan"))
    if BACKWARD:
        sin = -sin  # the transpose of a rotation is the rotation by the negative angle
    cos = cos[:, None, :]
    sin = sin[:, None, :]
    # NOTE: short inputs put q and k in different programs (the first splits1 programs of
    # axis 1 take q), so a program's loads are one latency deep rather than two in a row
    # (128 tokens: 3.4 -> 2.9 us on an H200, benchmarks/rotary_tiles.py); long ones keep both in
    # one program, which reads the cos / sin rows once and balances GQA's unequal q and k (8 of 32
    # heads: 0.87 of copy in separate programs against 0.91-0.94 in one, in separate runs).
    split = tl.program_id(1)
    if split < splits1:
        _rotate_heads(X1, Y1, cos, sin, b, s, token_mask, split, splits1, H1,
                      stride_x1b, stride_x1s, stride_x1h, stride_x1d, stride_y1b, stride_y1s, stride_y1h, stride_y1d,
                      R, D, INTERLEAVED, COPY_PASS, ALIGN, BLOCK_T, BLOCK_H1, BLOCK_P, BLOCK_PASS)
        if QK_TOGETHER:
            _rotate_heads(X2, Y2, cos, sin, b, s, token_mask, split, splits1, H2,
                          stride_x2b, stride_x2s, stride_x2h, stride_x2d, stride_y2b, stride_y2s, stride_y2h,
                          stride_y2d, R, D, INTERLEAVED, COPY_PASS, ALIGN, BLOCK_T, BLOCK_H2, BLOCK_P, BLOCK_PASS)
            if HAS_COPY:
                _rotate_heads(X3, Y3, cos, sin, b, s, token_mask, split, splits1, H3,
                              stride_x2b, stride_x2s, stride_x2h, stride_x2d, stride_y2b, stride_y2s, stride_y2h,
                              stride_y2d, R, D, INTERLEAVED, COPY_PASS, ALIGN, BLOCK_T, BLOCK_H2, BLOCK_P, BLOCK_PASS,
                              ROTATE=False)
    else:
        _rotate_heads(X2, Y2, cos, sin, b, s, token_mask, split - splits1, tl.num_programs(1) - splits1, H2,
                      stride_x2b, stride_x2s, stride_x2h, stride_x2d, stride_y2b, stride_y2s, stride_y2h, stride_y2d,
                      R, D, INTERLEAVED, COPY_PASS, ALIGN, BLOCK_T, BLOCK_H2, BLOCK_P, BLOCK_PASS)
        if HAS_COPY:
            _rotate_heads(X3, Y3, cos, sin, b, s, token_mask, split - splits1, tl.num_programs(1) - splits1, H3,
                          stride_x2b, stride_x2s, stride_x2h, stride_x2d, stride_y2b, stride_y2s, stride_y2h,
                          stride_y2d, R, D, INTERLEAVED, COPY_PASS, ALIGN, BLOCK_T, BLOCK_H2, BLOCK_P, BLOCK_PASS,
                          ROTATE=False)


@triton.jit
def _rotate_pairs_flat(
    X, Y, cos, sin, b, s, mask, pair, first, step, H, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys,
    stride_yh, HALF: tl.constexpr, ALIGN: tl.constexpr, WIDE: tl.constexpr,
):
    """Rotates heads ``first``, ``first + step``, ... of one tensor for this program's (token, pair) run:
    ``s`` and ``pair`` (BLOCK_G,) are each element's sequence index and pair, ``cos`` / ``sin`` their fp32
    angles. The head's row of a token must be contiguous (unit stride along head_dim)."""
    x_s = s * stride_xs
    y_s = s * stride_ys
    if WIDE:
        x_s = s.to(tl.int64) * stride_xs
        y_s = s.to(tl.int64) * stride_ys
    if ALIGN > 1:
        x_s = tl.multiple_of(x_s, ALIGN)
        y_s = tl.multiple_of(y_s, ALIGN)
    x_first = x_s + pair
    y_first = y_s + pair
    for h in range(first, H, step):
        x_head = b * stride_xb + tl.cast(h, tl.int64) * stride_xh
        y_head = b * stride_yb + tl.cast(h, tl.int64) * stride_yh
        if ALIGN > 1:
            x_head = tl.multiple_of(x_head, ALIGN)
            y_head = tl.multiple_of(y_head, ALIGN)
        x1 = tl.load(X + x_head + x_first, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(X + x_head + (x_first + HALF), mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + y_head + y_first, (x1 * cos - x2 * sin).to(Y.dtype.element_ty), mask=mask)
        tl.store(Y + y_head + (y_first + HALF), (x2 * cos + x1 * sin).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _copy_heads_flat(
    X, Y, b, first_element, S, first, step, H, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh,
    D: tl.constexpr, ALIGN: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr,
):
    """Copies heads ``first``, ``first + step``, ... of one tensor for BLOCK consecutive (token, column) elements of
    a batch row from ``first_element`` (the tokens of the flat kernel's (token, pair) run, each row whole: runs of
    gcd(D, 16) contiguous elements where the pairs' runs are half as long: 16-byte accesses at head_dim 72, which
    the pairs' 8-byte ones had made 0.88-0.93x the separate copy's step in kernel time on an H100)."""
    # NOTE: the offsets are written out as in _rotate_pairs_flat: a jit helper returning both functions' offsets
    # lost their multiple_of hints in Triton 3.6's sm_90 build (the rotation at head_dim 72: 54 -> 146 registers,
    # 432 -> 880 instructions; 2026-12-07).
    e = first_element + tl.arange(0, BLOCK)
    s = e // D
    column = e % D
    mask = s < S
    x_s = s * stride_xs
    y_s = s * stride_ys
    if WIDE:
        x_s = s.to(tl.int64) * stride_xs
        y_s = s.to(tl.int64) * stride_ys
    if ALIGN > 1:
        x_s = tl.multiple_of(x_s, ALIGN)
        y_s = tl.multiple_of(y_s, ALIGN)
    for h in range(first, H, step):
        x_head = b * stride_xb + tl.cast(h, tl.int64) * stride_xh
        y_head = b * stride_yb + tl.cast(h, tl.int64) * stride_yh
        if ALIGN > 1:
            x_head = tl.multiple_of(x_head, ALIGN)
            y_head = tl.multiple_of(y_head, ALIGN)
        tl.store(Y + y_head + y_s + column, tl.load(X + x_head + x_s + column, mask=mask), mask=mask)


@triton.jit
def _rotary_flat_kernel(
    X1, Y1, X2, Y2, X3, Y3, COS, SIN, POS,  # as _rotary_kernel's; every head_dim and table column stride is 1
    stride_x1b, stride_x1s, stride_x1h, stride_y1b, stride_y1s, stride_y1h,
    stride_x2b, stride_x2s, stride_x2h, stride_y2b, stride_y2s, stride_y2h,
    stride_cos_b, stride_cos_r, stride_sin_b, stride_sin_r, stride_pos_b, stride_pos_s,
    S, H1, H2, H3, seq_offset, table_rows,
    HALF: tl.constexpr,  # pairs a head: rotary_dim / 2
    BACKWARD: tl.constexpr,
    HAS_POS: tl.constexpr,
    HAS_COPY: tl.constexpr,  # X3 (X2's strides) copied to Y3 (Y2's)
    WIDE: tl.constexpr,  # sequence offsets need int64
    ALIGN: tl.constexpr,
    TABLE_ALIGN: tl.constexpr,
    BLOCK_G: tl.constexpr,
):
    # NOTE: rotate-half at a pair count that is not a power of two (head_dim 72: 36 pairs) without padded
    # lanes: a program's tile is BLOCK_G consecutive (token, pair) elements of one batch row, flattened, so
    # every lane holds a pair (the power-of-two pair axis of _rotary_kernel leaves 44% of its lanes idle at
    # 36 pairs). Its angles are loaded once and reused for every head it rotates (axis 2 of the grid splits
    # the heads, so that short sequences still fill the GPU). The token and pair of an element are a division
    # by the constant HALF; runs of gcd(HALF, 16) pairs are contiguous, so loads and stores stay vectorized.
    b = tl.program_id(1).to(tl.int64)
    g = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    s = g // HALF
    pair = g % HALF
    mask = s < S
    if HAS_POS:
        # int64, as loaded: a position past int32 must fall outside the table, not wrap into it
        row = tl.load(POS + b * stride_pos_b + s * stride_pos_s, mask=mask, other=0).to(tl.int64)
    else:
        row = s + seq_offset
    in_table = (row >= 0) & (row < table_rows)
    table_mask = mask & in_table
    split = tl.program_id(2)
    splits = tl.num_programs(2)
    if HAS_COPY:  # (a split that only copies reads no angles)
        table_mask = table_mask & (tl.zeros_like(s) + split < tl.maximum(H1, H2))  # (a tensor: the interpreter)
    cos_row = b * stride_cos_b + row * stride_cos_r
    sin_row = b * stride_sin_b + row * stride_sin_r
    if TABLE_ALIGN > 1:
        cos_row = tl.multiple_of(cos_row, TABLE_ALIGN)
        sin_row = tl.multiple_of(sin_row, TABLE_ALIGN)
    cos = tl.load(COS + cos_row + pair, mask=table_mask, other=0.0).to(tl.float32)
    sin = tl.load(SIN + sin_row + pair, mask=table_mask, other=0.0).to(tl.float32)
    cos = tl.where(in_table, cos, float("nan"))
    sin = tl.where(in_table, sin, float("nan"))
    if BACKWARD:
        sin = -sin
    _rotate_pairs_flat(X1, Y1, cos, sin, b, s, mask, pair, split, splits, H1, stride_x1b, stride_x1s, stride_x1h,
                       stride_y1b, stride_y1s, stride_y1h, HALF, ALIGN, WIDE)
    _rotate_pairs_flat(X2, Y2, cos, sin, b, s, mask, pair, split, splits, H2, stride_x2b, stride_x2s, stride_x2h,
                       stride_y2b, stride_y2s, stride_y2h, HALF, ALIGN, WIDE)
    if HAS_COPY:
        # X3's heads continue X2's over the splits (head H2 + j goes to split (H2 + j) % splits), so that a split
        # left without a head of X2 takes one of X3 (the rule counts them together: _flat_tile's heads2)
        first3 = ((split - H2) % splits + splits) % splits
        _copy_heads_flat(X3, Y3, b, tl.program_id(0) * (2 * BLOCK_G), S, first3, splits, H3, stride_x2b, stride_x2s,
                         stride_x2h, stride_y2b, stride_y2s, stride_y2h, 2 * HALF, ALIGN, WIDE, 2 * BLOCK_G)


@triton.jit
def _rotary_bwd_fp8_kernel(
    DQ,  # (B, S, H1, D) gradient of rotated q, any batch / seq / head strides, the last dimension contiguous
    DK,  # (B, S, H2, D) gradient of rotated k, the same
    DV,  # (B, S, H2, D) gradient of v, the same
    COS,  # (rows, *) cosine half table, read through strides (positions 0..S-1)
    SIN,  # (rows, *) sine half table
    HISTORY,  # (H,) fp32 amaxes of the earlier calls of the QKV layer's gradient cast
    AMAX,  # (1,) fp32 this call's amax of the gradient (zero before the call; atomic max), for the roll after
    Q,  # (M, N) e5m2: the packed QKV gradient (N = (H1 + 2 H2) D: q's heads, k's, v's), row-major; or None
    Q_SCALE,  # () fp32 its scale; or None
    QT,  # (N, MP) e5m2: the gradient transposed, zero past column M; or None
    QT_SCALE,  # () fp32 its scale; or None
    COL_SUM,  # (row tiles, N) fp32 the gradient's column sums over each program's rows; or None
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_cos_r, stride_cos_c, stride_sin_r, stride_sin_c,
    M, S, H1, H2, MP, history_len,
    D: tl.constexpr,  # head dim (even; rotated whole)
    HAS_Q: tl.constexpr,
    HAS_QT: tl.constexpr,
    HAS_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # tokens a program
    BLOCK_P: tl.constexpr,  # next_power_of_2(D / 2): a half head, padded
    BLOCK_H: tl.constexpr,  # history_len rounded up to a power of two
):
    """The packed RoPE backward written straight into the QKV layer's e5m2 gradient operands with a delayed
    scale (recipe "delayed"): each program takes BLOCK_M tokens of one head (q's, k's or v's) as its two halves,
    rotates q's and k's by the negative angle (v's pass), and writes both layouts, the column sums (the layer's
    bias gradient) and the amax for the history, where the plain backward writes the gradient in x's dtype and
    the layer's cast reads it back. The fp32 gradient is quantized as it is. Rows M..MP load as zeros (the
    transposed padding)."""
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    b = rows // S
    s = rows % S
    half = D // 2
    p = tl.arange(0, BLOCK_P)
    col_mask = p < half
    mask = row_mask[:, None] & col_mask[None, :]
    rotated = head < H1 + H2
    if head < H1:
        source = DQ + b * stride_qb + s * stride_qs + head * stride_qh
    elif rotated:
        source = DK + b * stride_kb + s * stride_ks + (head - H1) * stride_kh
    else:
        source = DV + b * stride_vb + s * stride_vs + (head - H1 - H2) * stride_vh
    x1 = tl.load(source[:, None] + p[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(source[:, None] + half + p[None, :], mask=mask, other=0.0).to(tl.float32)
    if rotated:
        # the transpose of a rotation is the rotation by the negative angle (_rotary_kernel's BACKWARD)
        cos = tl.load(COS + s[:, None] * stride_cos_r + p[None, :] * stride_cos_c, mask=mask, other=0.0)
        sin = tl.load(SIN + s[:, None] * stride_sin_r + p[None, :] * stride_sin_c, mask=mask, other=0.0)
        cos, sin = cos.to(tl.float32), sin.to(tl.float32)
        g1 = x1 * cos + x2 * sin
        g2 = x2 * cos - x1 * sin
    else:
        g1 = x1
        g2 = x2
    fold_amax(AMAX, tl.maximum(tl.max(tl.max(tl.abs(g1), axis=1), axis=0),
                               tl.max(tl.max(tl.abs(g2), axis=1), axis=0)))
    col_scale = delayed_scales(HISTORY, history_len, BLOCK_H, BLOCK_P, E5M2_MAX)  # (BLOCK_P,), one scale
    scale = tl.max(col_scale, axis=0)
    n = (H1 + 2 * H2) * D
    cols = head * D + p  # the first half's columns of the packed gradient; the second half's: + half
    if HAS_Q:
        inverse = reciprocal(scale)
        q_rows = Q + rows[:, None] * n + cols[None, :]
        tl.store(q_rows, _quantized(g1, inverse, Q, True), mask=mask)
        tl.store(q_rows + half, _quantized(g2, inverse, Q, True), mask=mask)
    if HAS_QT:
        t_mask = col_mask[:, None] & (rows < MP)[None, :]
        inverse_t = reciprocal(col_scale)[:, None]
        qt_cols = QT + cols[:, None].to(tl.int64) * MP + rows[None, :]
        tl.store(qt_cols, _quantized(tl.trans(g1), inverse_t, QT, True), mask=t_mask)
        tl.store(qt_cols + half * MP, _quantized(tl.trans(g2), inverse_t, QT, True), mask=t_mask)
    if HAS_SUM:
        partial = COL_SUM + pid_m.to(tl.int64) * n + cols
        tl.store(partial, tl.sum(g1, axis=0), mask=col_mask)
        tl.store(partial + half, tl.sum(g2, axis=0), mask=col_mask)
    if (pid_m == 0) & (head == 0):
        if HAS_Q:
            tl.store(Q_SCALE, scale)
        if HAS_QT:
            tl.store(QT_SCALE, scale)


# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------

_kernel = Kernel(_rotary_kernel)
_bwd_fp8_kernel = Kernel(_rotary_bwd_fp8_kernel)
_flat_kernel = Kernel(_rotary_flat_kernel)

def _bwd_fp8_tile(head_size: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_P, num_warps) of :func:`_rotary_bwd_fp8` at ``head_size`` (the NOTE above
    ``Tiles.bwd_fp8_elements``)."""
    tiles = TILES
    block_p = next_power_of_2(head_size // 2)
    block_m = max(16, min(tiles.bwd_fp8_max_tokens, tiles.bwd_fp8_elements // (2 * block_p)))
    return block_m, block_p, max(2, min(8, 2 * block_m * block_p // 2048))


def _flat_tile(seq, half: int, heads1: int, heads2: int, batch, min_programs: int) -> Optional[tuple[int, int, int]]:
    """(BLOCK_G, head splits, warps) of the flat kernel for a batch row of ``seq`` tokens x ``half`` pairs and
    ``heads1`` + ``heads2`` heads (q and k), or None where it does not apply: a pair count that is a power of
    two (the pair axis of _rotary_kernel pads nothing there), pairs not in runs of at least 4 (2-byte
    accesses), or fewer than ``TILES.flat_min_tile`` (token, pair) elements a batch row. Comparisons only on ``seq``
    and ``batch`` (symbolic under torch.compile: range guards, no recompile per length); plain ints (eager calls)
    take the cached rule, keyed on the flat_* settings too (a sweep or a test may replace TILES)."""
    tiles = TILES
    args = (seq, half, heads1, heads2, batch, min_programs, tiles.flat_tile, tiles.flat_elements_per_warp,
            tiles.flat_min_tile, tiles.flat_programs_per_sm, tiles.flat_heads_per_program)
    if seq.__class__ is int and batch.__class__ is int:
        return _cached_flat_tile_rule(*args)
    return _flat_tile_rule(*args)


def _flat_pairs(half: int) -> bool:
    """The flat kernel takes ``half`` pairs a head (at long enough rows): not a power of two, in runs of 4 or more."""
    return half & (half - 1) != 0 and half % 4 == 0


def _flat_tile_rule(seq, half, heads1, heads2, batch, min_programs, tile, per_warp, min_tile, programs_per_sm,
                    heads_per_program) -> Optional[tuple[int, int, int]]:
    """:func:`_flat_tile` with its settings as arguments."""
    if not _flat_pairs(half) or seq * half < min_tile:
        return None
    block_g = tile
    while block_g > min_tile and block_g // 2 >= seq * half:
        block_g //= 2
    blocks = cdiv(seq * half, block_g) * batch
    splits = 1
    while splits < max(heads1, heads2) and (blocks * splits < programs_per_sm * min_programs or cdiv(
            heads1, splits) + cdiv(heads2, splits) > heads_per_program):
        splits *= 2
    warps = max(1, min(8, block_g // per_warp))
    return block_g, splits, warps


_cached_flat_tile_rule = functools.lru_cache(maxsize=4096)(_flat_tile_rule)  # the rule on plain ints (eager calls)


def _launch_flat(pairs, copies, strides, cos, sin, position_ids, pos_strides, seq_offset, table_rows, cos_strides,
                 sin_strides, sizes, half, backward, align, table_align, tile) -> None:
    """_rotary_flat_kernel over ``pairs`` and ``copies`` (see :func:`_launch`): ``strides`` their (batch, seq, head,
    dim) strides, x1, y1, x2, y2."""
    (b, s, h1, h2, h3), (block_g, splits, warps) = sizes, tile
    x1, y1 = pairs[0]
    x2, y2 = pairs[1] if len(pairs) > 1 else pairs[0]
    x3, y3 = copies if copies is not None else (None, None)
    seq_strides = [abs(t[1]) for t in strides] + [abs(cos_strides[1]), abs(sin_strides[1])]
    wide = bool((s + seq_offset + 1) * (max(seq_strides) + 1) >= 2**31)
    _flat_kernel(
        (cdiv(s * half, block_g), b, splits),
        x1, y1, x2, y2, x3, y3, cos, sin, position_ids,
        *strides[0][:3], *strides[1][:3], *strides[2][:3], *strides[3][:3],
        cos_strides[0], cos_strides[1], sin_strides[0], sin_strides[1], *pos_strides,
        s, h1, h2, h3, seq_offset, table_rows,
        HALF=half, BACKWARD=backward, HAS_POS=position_ids is not None, HAS_COPY=copies is not None, WIDE=wide,
        ALIGN=align, TABLE_ALIGN=table_align, BLOCK_G=block_g, num_warps=warps,
    )


def _logical(t: Tensor, layout: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Sizes and strides of ``t`` in (batch, seq, heads, head_dim) order."""
    if layout == "bshd":
        return tuple(t.shape), tuple(t.stride())
    b, h, s, d = t.shape
    sb, sh, ss, sd = t.stride()
    return (b, s, h, d), (sb, ss, sh, sd)


def _new_in_layout(like: Tensor, layout_of_like: str, layout: str) -> Tensor:
    """An empty tensor contiguous in ``layout`` with the logical sizes of ``like``."""
    b, s, h, d = _logical(like, layout_of_like)[0]
    shape = (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def _table_strides(table: Tensor, rotary_dim: int, interleaved: bool) -> tuple[int, int, int]:
    """(batch, row, column) strides that read the half table (rows x rotary_dim / 2) out of
    ``table``: a half table as is; a duplicated full table through its first half
    (rotate-half: ``cat(half, half)``) or its even columns (interleaved:
    ``repeat_interleave(half, 2)``)."""
    full = table.shape[-1] == rotary_dim
    column = table.stride(-1) * (2 if full and interleaved else 1)
    if table.dim() == 2:
        return 0, table.stride(0), column
    batch = table.stride(0) if table.shape[0] > 1 else 0
    return batch, table.stride(1), column


def _power_of_2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _tile(num_tokens: int, heads1: int, heads2: int, rotary_dim: int, pass_dim: int, min_programs: int,
          tiles: Optional[Tiles] = None):
    """(BLOCK_T, BLOCK_H1, BLOCK_H2, BLOCK_P, BLOCK_PASS, splits1, splits2, qk_together, num_warps).

    splits1 / splits2: programs along the grid's second axis that rotate the first / second tensor
    (qk_together: both in the same programs, splits2 then 0). ``tiles``: the module's TILES when None (the
    launcher passes it, so that the cached rule follows a sweep that sets it)."""
    tiles = TILES if tiles is None else tiles
    tile_elements, per_warp = tiles.tile_elements, tiles.elements_per_warp
    block_p = next_power_of_2(rotary_dim // 2)
    block_pass = next_power_of_2(pass_dim) if pass_dim else 1
    width = 2 * block_p + (block_pass if pass_dim else 0)
    heads_cap = _power_of_2_below(max(1, tile_elements // width))  # block shapes are powers of 2
    block_h1 = min(next_power_of_2(heads1), heads_cap)
    block_h2 = min(next_power_of_2(max(heads2, 1)), heads_cap)
    # NOTE: few heads (or narrow heads) -> several tokens a program, so a program still
    # moves about tile_elements a step.
    block_t = _power_of_2_below(max(1, tile_elements // (max(block_h1, block_h2) * width)))
    # min(block_t, next_power_of_2(num_tokens)) in comparisons only: under torch.compile the token
    # count may be symbolic, and a comparison is a range guard (no recompile per sequence length).
    while block_t > 1 and block_t // 2 >= num_tokens:
        block_t //= 2
    # NOTE: small inputs (decoding, short sequences): fewer tokens a program, then the heads
    # split over a second grid dimension, until there are programs for every multiprocessor;
    # one program a few tokens wide left most of an H200 idle (2.4x slower than Inductor at
    # 128 tokens x 32 heads).
    head_splits = 1
    while cdiv(num_tokens, block_t) < min_programs and block_t > 1:
        block_t //= 2
    while cdiv(num_tokens, block_t) * head_splits < min_programs and max(block_h1, block_h2) > 1:
        block_h1, block_h2 = max(1, block_h1 // 2), max(1, block_h2 // 2)
        head_splits *= 2
    token_blocks = cdiv(num_tokens, block_t)
    filled = bool(token_blocks >= min_programs)  # a Python bool also for a symbolic token count
    qk_together = heads2 == 0 or filled
    splits1 = head_splits
    splits2 = 0 if qk_together else head_splits
    elements = block_t * max(block_h1, block_h2) * width
    num_warps = _power_of_2_below(min(tiles.max_warps, max(1, elements // per_warp)))
    return block_t, block_h1, block_h2, block_p, block_pass, splits1, splits2, qk_together, num_warps


_cached_tile = functools.lru_cache(maxsize=4096)(_tile)  # the tile rule on plain ints (eager calls)


def _alignment(itemsize: int, sizes_and_strides) -> int:
    """The largest power of two, at most 16 bytes' worth of elements, dividing every stride of
    ``sizes_and_strides`` ((size, stride) pairs) whose size is not 1 (an index that is always 0); 1, no
    hint, where every one is a multiple of 16 (Triton specializes on that itself).

    Symbolic strides (torch.compile with dynamic shapes) count for what is known of them without a
    guard: a contiguous (batch, heads, seq, 72) tensor's head stride ``72 * s0`` is a multiple of 8."""
    strides = [stride for size, stride in sizes_and_strides if not _is_one(size)]
    cap = max(1, 16 // itemsize)
    if all(stride.__class__ is int for stride in strides):
        known = math.gcd(*strides)  # 0: no stride (every index 0)
        return 1 if known % 16 == 0 else min(known & -known, cap)
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    def divides(n):
        return all(statically_known_true(stride % n == 0) for stride in strides)

    if divides(16):
        return 1
    align = cap
    while align > 1 and not divides(align):
        align //= 2
    return align


def _alignments(itemsize: int, sizes: tuple, strides: tuple, table_itemsize: int, table_sizes: tuple,
                table_strides: tuple) -> tuple[int, int]:
    """(ALIGN, TABLE_ALIGN) of a launch. ``sizes``: (batch, seq, heads1, heads2); ``strides``: the (batch,
    seq, head, dim) strides of X1, Y1, X2, Y2; ``table_sizes``: (batch or 1, rows); ``table_strides``: the
    (batch, row, column) strides of COS and SIN (see :func:`_table_strides`)."""
    b, s, h1, h2 = sizes
    heads = (h1, h1, h2, h2)
    align = _alignment(itemsize, [pair for tensor_strides, h in zip(strides, heads)
                                  for pair in zip((b, s, h), tensor_strides[:3])])
    table_align = _alignment(table_itemsize, [pair for table in table_strides
                                              for pair in zip(table_sizes, table[:2])])
    return align, table_align


_cached_alignments = functools.lru_cache(maxsize=4096)(_alignments)  # (plain ints: eager calls)


def _is_one(size) -> bool:
    """``size == 1``, without a guard for a symbolic size (Dynamo specializes sizes 0 and 1)."""
    if size.__class__ is int:
        return size == 1
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return statically_known_true(size == 1)


def _min_programs(device: torch.device) -> int:
    """Programs a launch should have at least: one per multiprocessor on a GPU."""
    return sm_count(device) if device.type == "cuda" else 1


def _launch(pairs, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, in_layout, out_layout,
            backward, copy_pass, copies=None):
    """Rotates each ``(x, y)`` of ``pairs`` (one or two; x read in ``in_layout``, y written in
    ``out_layout``; y may be x) by the angles of ``cos`` / ``sin`` in one launch. ``copies``: an ``(x, y)`` whose
    heads the same launch copies as they are (the packed QKV's v), with the second pair's strides (and the kernel
    reads them with those); a launch of its own saved (15-75 us of a GPU's host in a backward, benchmarks/NOTES.md,
    "The op path and host time")."""
    (b, s, h1, d), x1_strides = _logical(pairs[0][0], in_layout)
    y1_strides = _logical(pairs[0][1], out_layout)[1]
    if len(pairs) > 1:
        h2 = _logical(pairs[1][0], in_layout)[0][2]
        x2, y2 = pairs[1]
        x2_strides, y2_strides = _logical(x2, in_layout)[1], _logical(y2, out_layout)[1]
    else:  # a second tensor that the kernel never touches (H2 = 0)
        h2, (x2, y2) = 0, pairs[0]
        x2_strides = y2_strides = (0, 0, 0, 0)
    h3 = 0
    if copies is not None:
        if len(pairs) < 2 or copies[0].stride() != x2.stride() or copies[1].stride() != y2.stride():
            raise ValueError("rotary: a copied pair needs the strides of the second rotated pair")
        h3 = _logical(copies[0], in_layout)[0][2]
    # NOTE: under torch.compile the sizes may be symbolic. The heads, head_dim and rotary dim pick the
    # tile and the kernel's constants: they are specialized (a model has one or two of each); the token
    # count stays symbolic (the tile depends on it through comparisons only: range guards).
    h1, h2, h3, d, rotary_dim = int(h1), int(h2), int(h3), int(d), int(rotary_dim)
    num_tokens = b * s
    if num_tokens == 0:
        return
    pass_dim = d - rotary_dim if copy_pass else 0
    min_programs = _min_programs(pairs[0][0].device)
    tile = _cached_tile if num_tokens.__class__ is int else _tile  # a symbolic token count: no cache
    block_t, block_h1, block_h2, block_p, block_pass, splits1, splits2, qk_together, num_warps = tile(
        num_tokens, h1, h2, rotary_dim, pass_dim, min_programs, TILES)
    if position_ids is None:
        pos_strides = (0, 0)
    elif position_ids.dim() == 1:
        pos_strides = (0, position_ids.stride(0))
    else:
        pos_strides = (position_ids.stride(0) if position_ids.shape[0] > 1 else 0, position_ids.stride(1))
    table_rows = cos.shape[0] if cos.dim() == 2 else cos.shape[1]
    cos_strides = _table_strides(cos, rotary_dim, interleaved)
    sin_strides = _table_strides(sin, rotary_dim, interleaved)
    key = (pairs[0][0].dtype.itemsize, (b, s, h1, h2), (x1_strides, y1_strides, x2_strides, y2_strides),
           cos.dtype.itemsize, (cos.shape[0] if cos.dim() == 3 else 1, table_rows), (cos_strides, sin_strides))
    try:
        align, table_align = _cached_alignments(*key)
    except TypeError:  # symbolic sizes or strides (unhashable): no cache
        align, table_align = _alignments(*key)
    strides = (x1_strides, y1_strides, x2_strides, y2_strides)
    flat = None
    if not interleaved and pass_dim == 0 and cos_strides[2] == 1 and sin_strides[2] == 1 and all(
            t[3] == 1 for t in strides[:2 * len(pairs)]):
        # (a program's heads: those it copies too)
        flat = _flat_tile(s, rotary_dim // 2, h1, h2 + h3, b, min_programs)
    x3, y3 = (None, None) if copies is None else copies
    if flat is not None:
        _launch_flat(pairs, copies, strides, cos, sin, position_ids, pos_strides, seq_offset, table_rows,
                     cos_strides, sin_strides, (b, s, h1, h2, h3), rotary_dim // 2, backward, align, table_align,
                     flat)
        return
    # the batch on axis 2 where a batch row holds a whole token tile (a comparison: a range guard under
    # torch.compile) and the batch fits the axis (TILES.batch_axis's NOTE)
    batch_axis = bool(TILES.batch_axis and s >= block_t and b <= MAX_GRID_YZ)
    _kernel(
        (cdiv(s, block_t), splits1 + splits2, b) if batch_axis else (cdiv(num_tokens, block_t), splits1 + splits2),
        pairs[0][0], pairs[0][1], x2, y2, x3, y3, cos, sin, position_ids,
        *x1_strides, *y1_strides, *x2_strides, *y2_strides,
        *cos_strides, *sin_strides,
        *pos_strides,
        num_tokens, s, h1, h2, h3, seq_offset, table_rows, splits1,
        R=rotary_dim, D=d, INTERLEAVED=interleaved, BACKWARD=backward, HAS_POS=position_ids is not None,
        COPY_PASS=pass_dim > 0, QK_TOGETHER=qk_together, HAS_COPY=copies is not None,
        WIDE_TOKENS=bool((s if batch_axis else num_tokens) + block_t >= 2**31), BATCH_AXIS=batch_axis,
        ALIGN=align, TABLE_ALIGN=table_align,
        BLOCK_T=block_t, BLOCK_H1=block_h1, BLOCK_H2=block_h2,
        BLOCK_P=block_p,
        BLOCK_PASS=block_pass, num_warps=num_warps,
    )


def _local(t: Tensor) -> Tensor:
    """A DTensor's local tensor; any other tensor itself."""
    return t.to_local() if is_dtensor(t) else t


def _dense_strides(t: Tensor) -> tuple[int, ...]:
    """The strides of ``t`` when its elements fill a block of memory with no gaps or overlaps in some
    order of its dimensions (a contiguous tensor, or a transposed view of one), else ().

    The dimensions (but those of size 1) are taken in the order of their strides by looking for the one
    whose stride is the size of the block so far: comparisons only, which Dynamo traces (and guards)
    on symbolic strides, where it refuses ``sorted(..., key=t.stride)``."""
    strides = t.stride()
    left = [i for i in range(t.dim()) if t.shape[i] != 1]
    expected = 1
    while left:
        for i in left:
            if strides[i] == expected:
                break
        else:
            return ()
        expected *= t.shape[i]
        left.remove(i)
    return tuple(strides)


def _grad_buffer(grad_out: Tensor, out_layout: str, layout: str, strides: Sequence[int]) -> Tensor:
    """An input gradient's buffer, with the logical sizes of ``grad_out`` (in ``out_layout``) laid out
    in ``layout``: with the input's ``strides`` where it was dense (see :func:`_dense_strides`), else
    contiguous.

    NOTE: Hugging Face's q and k are transposed views of the projections' outputs (batch, heads, seq,
    head_dim over (batch, seq, heads, head_dim) memory). A gradient contiguous in "bhsd" turned every
    transpose-back into a copy: 0.56 ms of a 26.6 ms Llama training step on an H200
    (benchmarks/profile_hf_llama.py); in the input's own layout it goes back as a view."""
    if len(strides) == 0:
        return _new_in_layout(grad_out, out_layout, layout)
    b, s, h, d = _logical(grad_out, out_layout)[0]
    shape = (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    return torch.empty_strided(shape, tuple(strides), dtype=grad_out.dtype, device=grad_out.device)


@launcher_op("rotary_fwd")
def _rotary_fwd(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids: Optional[Tensor], seq_offset: int,
    rotary_dim: int, interleaved: bool, layout: str, out_layout: str,
) -> tuple[Tensor, Tensor]:
    """RoPE of q and k (in ``layout``): (q_out, k_out), new tensors contiguous in ``out_layout``."""
    q_out = _new_in_layout(q, layout, out_layout)
    k_out = _new_in_layout(k, layout, out_layout)
    _launch([(q, q_out), (k, k_out)], cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout,
            out_layout, backward=False, copy_pass=True)
    return q_out, k_out


@launcher_op("rotary_packed_fwd")
def _rotary_packed_fwd(qkv: Tensor, cos: Tensor, sin: Tensor, heads: int, kv_heads: int, head_size: int,
                       rotary_dim: int) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`rotary_packed`'s forward: (q, k, v) of the packed ``qkv``, new (batch, seq, heads, head_size)
    tensors, q and k rotated (rotate-half, positions 0..seq-1), v copied, in one launch."""
    q, k, v = _qkv_views(qkv, heads, kv_heads, head_size)
    q_out, k_out, v_out = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    _launch([(q, q_out), (k, k_out)], cos, sin, None, 0, rotary_dim, False, "bshd", "bshd", backward=False,
            copy_pass=True, copies=(v, v_out))
    return q_out, k_out, v_out


@launcher_op("rotary_fwd_", mutates_args=("q", "k"))
def _rotary_fwd_(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids: Optional[Tensor], seq_offset: int,
    rotary_dim: int, interleaved: bool, layout: str,
) -> None:
    """RoPE of q and k in their own storage (the pass-through part is not touched)."""
    _launch([(q, q), (k, k)], cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout, layout,
            backward=False, copy_pass=False)


@launcher_op("rotary_bwd")
def _rotary_bwd(
    dq_out: Optional[Tensor], dk_out: Optional[Tensor], cos: Tensor, sin: Tensor, position_ids: Optional[Tensor],
    seq_offset: int, rotary_dim: int, interleaved: bool, layout: str, out_layout: str,
    q_strides: Sequence[int], k_strides: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """(dq, dk) from the output grads (in ``out_layout``): laid out with ``q_strides`` / ``k_strides``
    where given (the inputs' strides, see :func:`_grad_buffer`), else contiguous in ``layout``. A missing
    output grad (None) gives an empty tensor."""
    dq = None if dq_out is None else _grad_buffer(dq_out, out_layout, layout, q_strides)
    dk = None if dk_out is None else _grad_buffer(dk_out, out_layout, layout, k_strides)
    pairs = [(g, d) for g, d in ((dq_out, dq), (dk_out, dk)) if g is not None]
    if pairs:
        _launch(pairs, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, out_layout, layout,
                backward=True, copy_pass=True)
    return empty_if_none(dq, cos), empty_if_none(dk, cos)


@launcher_op("rotary_bwd_fp8_delayed", mutates_args=("history", "amax"))
def _rotary_bwd_fp8(dq_out: Tensor, dk_out: Tensor, dv: Tensor, cos: Tensor, sin: Tensor, history: Tensor,
                    amax: Tensor, rows: bool, transposed: bool, pad: int, sum_dtype: Optional[torch.dtype]
                    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(q, q_scale, qt, qt_scale, col_sum)``: the packed QKV gradient of :func:`rotary_packed` (dq_out and dk_out
    rotated back, dv as is; each (batch, seq, heads, head_dim), the last dimension contiguous; the whole head
    rotated, rotate-half, positions 0..seq-1 of the 2-D half tables) in e5m2 with the delayed scale of
    ``history``: :func:`blockfuse.ops.fp8._fp8_quantize_delayed`'s outputs for it, without it in x's dtype.
    ``rows`` the (M, N) layout, ``transposed`` the (N, MP) one, ``sum_dtype`` the column sums (the QKV layer's
    bias gradient); the gradient's amax folded into ``amax`` and rolled into the history after."""
    b, s, h1, d = dq_out.shape
    h2 = dk_out.shape[2]
    m, n = b * s, (h1 + 2 * h2) * d
    mp = fp8.round_up(m, pad)
    q, q_scale, qt, qt_scale = fp8.tensorwise_outputs(dq_out, m, n, mp, torch.float8_e5m2, rows, transposed)
    block_m, block_p, num_warps = _bwd_fp8_tile(d)
    grid = (max(1, cdiv(mp if transposed else m, block_m)), h1 + 2 * h2)
    col_sum, partial = fp8.column_partials(dq_out, grid[0], n, sum_dtype)
    _, cos_row, cos_column = _table_strides(cos, d, False)
    _, sin_row, sin_column = _table_strides(sin, d, False)
    h = int(history.shape[0])
    fp8_history.settle(history)
    _bwd_fp8_kernel(grid, dq_out, dk_out, dv, cos, sin, history, amax, q, q_scale, qt, qt_scale, partial,
                    *(stride for t in (dq_out, dk_out, dv) for stride in t.stride()[:3]),
                    cos_row, cos_column, sin_row, sin_column, m, s, h1, h2, mp, h,
                    D=d, HAS_Q=rows, HAS_QT=transposed, HAS_SUM=partial is not None, BLOCK_M=block_m,
                    BLOCK_P=block_p, BLOCK_H=next_power_of_2(h), num_warps=num_warps)
    fp8.finish_delayed_cast(partial, col_sum, n, history, amax)
    return (empty_if_none(q, dq_out), empty_if_none(q_scale, dq_out), empty_if_none(qt, dq_out),
            empty_if_none(qt_scale, dq_out), empty_if_none(col_sum, dq_out))


def rotary_bwd_fp8_ref(dq_out: Tensor, dk_out: Tensor, dv: Tensor, cos: Tensor, sin: Tensor, history: Tensor,
                       amax: Tensor, rows: bool, transposed: bool, pad: int, sum_dtype: Optional[torch.dtype] = None):
    """Pure-PyTorch :func:`_rotary_bwd_fp8`: the same outputs (the fp32 gradient quantized as it is) and the same
    update of ``history`` and ``amax``."""
    b, s, h1, d = dq_out.shape
    half = d // 2
    c, n = (t[:s, :half].float()[None, :, None, :] for t in (cos, sin))

    def rotated_back(g):
        g1, g2 = g.float().split(half, dim=-1)
        return torch.cat((g1 * c + g2 * n, g2 * c - g1 * n), dim=-1)

    grad = torch.cat((rotated_back(dq_out), rotated_back(dk_out), dv.float()), dim=2).reshape(b * s, -1)
    return fp8._quantize_delayed_ref(grad, torch.float8_e5m2, rows, transposed, pad, history, amax, sum_dtype)


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


class _RotaryFunction(torch.autograd.Function):
    """Both forms. ``config``: (seq_offset, rotary_dim, interleaved, layout, out_layout, inplace); in
    place, q and k are rotated in their own storage and returned (marked dirty), and out_layout is layout.
    cos / sin get no gradient."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, position_ids, config, v=None):
        """``v``: also returned, copied contiguous (:func:`rotary_copying_v`); its gradient passes through."""
        seq_offset, rotary_dim, interleaved, layout, out_layout, inplace = config
        if inplace:
            _rotary_fwd_(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout)
            ctx.mark_dirty(q, k)
            q_out, k_out = q, k
        else:
            q_out, k_out = _rotary_fwd(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout,
                                       out_layout)
        ctx.save_for_backward(cos, sin, position_ids)
        ctx.config = config
        # NOTE: a DTensor's own strides are those of the whole tensor: the backward lays out each rank's
        # local gradient like its local input.
        ctx.strides = (_dense_strides(_local(q)), _dense_strides(_local(k)))
        ctx.set_materialize_grads(False)
        if v is not None:
            return q_out, k_out, copy_rows(v)
        return q_out, k_out

    @staticmethod
    def backward(ctx, dq_out, dk_out, dv=None):
        cos, sin, position_ids = ctx.saved_tensors
        seq_offset, rotary_dim, interleaved, layout, out_layout, _ = ctx.config
        dq_out = dq_out if ctx.needs_input_grad[0] else None
        dk_out = dk_out if ctx.needs_input_grad[1] else None
        dq, dk = _rotary_bwd(dq_out, dk_out, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout,
                             out_layout, *ctx.strides)
        return None if dq_out is None else dq, None if dk_out is None else dk, None, None, None, None, dv


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_rotary_args(q, k, cos, sin, interleaved, position_ids, seq_offset, layout, out_layout, inplace,
                       rotary_dim):
    """Checks every argument; returns (rotary_dim, out_layout)."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
        if t.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"{name}: expected a float32, float16 or bfloat16 tensor (float64 runs the "
                            f"reference), got {t.dtype}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected 4 dimensions ({layout if layout in LAYOUTS else 'bshd'}: "
                             f"batch, seq, heads, head_dim in that order), got shape {tuple(t.shape)}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected 'bshd' or 'bhsd', got {layout!r}")
    if out_layout is None:
        out_layout = layout
    if out_layout not in LAYOUTS:
        raise ValueError(f"out_layout: expected 'bshd', 'bhsd' or None (the input layout), got {out_layout!r}")
    if not isinstance(interleaved, bool):
        raise TypeError(f"interleaved: expected a bool, got {type(interleaved).__name__}")
    if not isinstance(inplace, bool):
        raise TypeError(f"inplace: expected a bool, got {type(inplace).__name__}")
    check_like("k", k, q, "q", shape=False)
    (b, s, hq, d), (kb, ks, hk, kd) = _logical(q, layout)[0], _logical(k, layout)[0]
    if (kb, ks) != (b, s):
        raise ValueError(f"k: expected batch {b} and seq {s} like q (layout {layout!r}), got batch {kb} and "
                         f"seq {ks}")
    if kd != d:
        raise ValueError(f"k: expected head_dim {d} like q, got {kd}")
    if hq == 0 or hk == 0 or hq % hk != 0:
        raise ValueError(f"k: the number of q heads ({hq}) must be a positive multiple of the number of k "
                         f"heads ({hk}) (grouped-query attention)")
    if inplace:
        if out_layout != layout:
            raise ValueError(f"out_layout: inplace=True writes q and k in their own storage, so out_layout must "
                             f"equal layout ({layout!r}), got {out_layout!r}")
        if q is k:
            raise ValueError("k: inplace=True needs q and k to be different tensors (k is q)")
        for name, t in (("q", q), ("k", k)):
            if any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape)):
                raise ValueError(f"{name}: inplace=True cannot write an expanded tensor (a stride of 0 makes "
                                 f"several elements share memory), got strides {tuple(t.stride())}")

    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name}: expected a floating-point table, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name}: expected a tensor on {q.device} like q, got {t.device}")
    if cos.dim() not in (2, 3):
        raise ValueError(f"cos: expected a table (max_seq, width) or HF's per-token table (batch, seq, width), "
                         f"got shape {tuple(cos.shape)}")
    if sin.shape != cos.shape:
        raise ValueError(f"sin: expected shape {tuple(cos.shape)} like cos, got {tuple(sin.shape)}")
    width = cos.shape[-1]
    if rotary_dim is None:
        # 3-D tables are Hugging Face's (duplicated, full width); a 2-D table is a half table
        # unless it is too wide to be one.
        rotary_dim = width if (cos.dim() == 3 or 2 * width > d) else 2 * width
    elif not isinstance(rotary_dim, int) or isinstance(rotary_dim, bool):
        raise TypeError(f"rotary_dim: expected an int or None, got {type(rotary_dim).__name__}")
    elif width not in (rotary_dim, rotary_dim // 2) or rotary_dim % 2:
        raise ValueError(f"rotary_dim: a table of width {width} is neither the half ({rotary_dim // 2}) nor the "
                         f"full ({rotary_dim}) table of rotary_dim={rotary_dim}")
    if rotary_dim % 2 or rotary_dim <= 0:
        raise ValueError(f"cos: the rotary dim must be even and positive (pairs of elements), got {rotary_dim} "
                         f"from a table of width {width}")
    if rotary_dim > d:
        raise ValueError(f"cos: the rotary dim {rotary_dim} (table width {width}) exceeds head_dim {d} of q and k")

    if not isinstance(seq_offset, (int, torch.SymInt)) or isinstance(seq_offset, bool):
        raise TypeError(f"seq_offset: expected an int, got {type(seq_offset).__name__}")
    if seq_offset < 0:
        raise ValueError(f"seq_offset: expected a non-negative int, got {int(seq_offset)}")
    if cos.dim() == 3:
        if cos.shape[0] not in (1, b) or cos.shape[1] != s:
            raise ValueError(f"cos: a per-token table must have shape ({b} or 1, {s}, width) for q of batch {b} "
                             f"and seq {s}, got {tuple(cos.shape)}")
        if position_ids is not None or seq_offset != 0:
            raise ValueError("position_ids: cos / sin of shape (batch, seq, width) are already gathered by "
                             "position; position_ids and seq_offset apply to 2-D tables (max_seq, width) only")
    if position_ids is not None:
        if not isinstance(position_ids, Tensor):
            raise TypeError(f"position_ids: expected a Tensor, got {type(position_ids).__name__}")
        if position_ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"position_ids: expected an int32 or int64 tensor, got {position_ids.dtype}")
        if position_ids.device != q.device:
            raise ValueError(f"position_ids: expected a tensor on {q.device} like q, got {position_ids.device}")
        shape = tuple(position_ids.shape)
        if not (shape == (s,) or (len(shape) == 2 and shape[0] in (1, b) and shape[1] == s)):
            raise ValueError(f"position_ids: expected shape ({b}, {s}), (1, {s}) or ({s},), got {shape}")
        if seq_offset != 0:
            raise ValueError("position_ids: give either position_ids or a seq_offset, not both "
                             f"(seq_offset={int(seq_offset)})")
    elif cos.dim() == 2 and seq_offset + s > cos.shape[0]:
        offset = int(seq_offset)  # a plain int for the message (seq_offset may be symbolic under torch.compile)
        raise ValueError(f"cos: positions up to seq_offset + seq = {offset} + {s} need a table of at least "
                         f"{offset + s} rows, got {cos.shape[0]}")
    return rotary_dim, out_layout


def rotary(
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    interleaved: bool = False,
    position_ids: Optional[Tensor] = None,
    seq_offset: int = 0,
    layout: str = "bshd",
    out_layout: Optional[str] = None,
    inplace: bool = False,
    rotary_dim: Optional[int] = None,
) -> tuple[Tensor, Tensor]:
    """Rotary position embedding of q and k in one kernel launch (and one for the backward).

    q: (batch, seq, q_heads, head_dim) for ``layout="bshd"`` or (batch, q_heads, seq, head_dim)
    for ``"bhsd"``, any strides (e.g. slices of a fused qkv projection); k likewise with
    k_heads dividing q_heads (grouped-query attention).

    cos, sin: one of
      * a half table (max_seq, rotary_dim / 2), row = position;
      * Hugging Face's duplicated full table (max_seq, rotary_dim): ``cat(half, half)`` for
        rotate-half, ``repeat_interleave(half, 2)`` for interleaved;
      * Hugging Face's per-token table (batch or 1, seq, rotary_dim), what
        ``LlamaRotaryEmbedding(x, position_ids)`` returns: already gathered by position.
    A 2-D table of width at most head_dim / 2 is read as a half table; pass ``rotary_dim`` for
    a full table of a partial rotary that narrow (or slice its half: ``cos[:, :r // 2]``,
    interleaved ``cos[:, ::2]``). ``rotary_dim < head_dim`` rotates the first rotary_dim
    elements of each head and passes the rest through.

    Positions (2-D tables only): ``position_ids`` (batch or 1, seq) / (seq,) int32/int64, or
    ``seq_offset + s`` (decoding with a KV cache), not both. ``seq_offset + seq`` is checked
    against the table length; the values of ``position_ids`` are not checked on the host
    (that would need a device sync): on the Triton path a position outside the table makes
    that token's rotated elements NaN (the reference raises an indexing error).

    Returns (q_out, k_out) contiguous in ``out_layout`` (default: ``layout``) with that
    layout's logical shape, so ``out_layout="bhsd"`` feeds ``scaled_dot_product_attention``
    without a transpose copy. ``inplace=True`` rotates q and k in their own storage
    (``out_layout`` must equal ``layout``) and returns them; autograd supports it (a leaf
    that requires grad cannot be modified in place, as in PyTorch).

    Math in fp32 (the input read once, the output written once in the input dtype). cos and
    sin are constant buffers: no gradient flows to them, even if they require grad.
    """
    rotary_dim, out_layout = _check_rotary_args(q, k, cos, sin, interleaved, position_ids, seq_offset, layout,
                                                out_layout, inplace, rotary_dim)
    if not use_triton(q):
        return rotary_ref(q, k, cos, sin, interleaved=interleaved, position_ids=position_ids,
                          seq_offset=seq_offset, layout=layout, out_layout=out_layout, inplace=inplace,
                          rotary_dim=rotary_dim)
    if cos.requires_grad or sin.requires_grad:  # constant buffers: no gradient (and no autograd edge)
        cos, sin = cos.detach(), sin.detach()
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        if inplace and (q._base is not None or k._base is not None or torch.compiler.is_compiling()):
            # NOTE: the functional form plus copies into q and k (exact, at the cost of one more read and
            # write of q and k) where the Function cannot mark them dirty: autograd cannot let one Function
            # modify two views in place (q and k sliced from one qkv tensor; Dynamo traces ``._base``, not
            # ``._is_view()``); and under torch.compile (torch 2.13) Dynamo traces ctx.mark_dirty but
            # AOTAutograd gets the gradient wrong, silently, when the dirty tensor is an input of the
            # compiled graph (the mutation is applied hidden from autograd: the input keeps its old
            # history; see pytorch/pytorch#133491).
            q_out, k_out = _RotaryFunction.apply(q, k, cos, sin, position_ids,
                                                 (seq_offset, rotary_dim, interleaved, layout, layout, False))
            return q.copy_(q_out), k.copy_(k_out)
        return _RotaryFunction.apply(q, k, cos, sin, position_ids,
                                     (seq_offset, rotary_dim, interleaved, layout, out_layout, inplace))
    if inplace:
        _rotary_fwd_(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout)
        # The kernel wrote behind autograd's back (eagerly the launcher is not called through the
        # dispatcher): bump the version counters so that a graph which saved q or k for its backward
        # notices the change (inference tensors have none: it skips them).
        torch.autograd.graph.increment_version((q, k))
        return q, k
    return _rotary_fwd(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout, out_layout)


def rotary_copying_v(q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor, *,
                     layout: str = "bshd") -> tuple[Tensor, Tensor, Tensor]:
    """``(*rotary(q, k, cos, sin, layout=layout), v.contiguous())`` with v's copy made inside the rotary op's
    autograd Function (its gradient passed through), by :func:`blockfuse.ops.copy.copy_rows`: the fused
    attention's v out of the packed QKV output, without an autograd node of its own (``ops/copy.py`` says why).
    Tensors that take the reference path, DTensors, or a v without a gradient to carry: the plain calls."""
    if (not use_triton(q) or is_dtensor(q) or is_dtensor(v) or not torch.is_grad_enabled()
            or not (q.requires_grad and k.requires_grad and v.requires_grad)):
        return (*rotary(q, k, cos, sin, layout=layout), v.contiguous() if is_dtensor(v) else copy_rows(v))
    rotary_dim, out_layout = _check_rotary_args(q, k, cos, sin, False, None, 0, layout, None, False, None)
    if cos.requires_grad or sin.requires_grad:
        cos, sin = cos.detach(), sin.detach()
    return _RotaryFunction.apply(q, k, cos, sin, None, (0, rotary_dim, False, layout, out_layout, False), v)


def _qkv_views(qkv: Tensor, heads: int, kv_heads: int, head_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v of a packed (batch, seq, (heads + 2 kv_heads) head_size) tensor as (batch, seq, heads, head_size)
    views (no copies)."""
    b, s, _ = qkv.shape
    q_width, kv_width = heads * head_size, kv_heads * head_size
    q, k, v = qkv.split((q_width, kv_width, kv_width), dim=-1)
    return (q.view(b, s, heads, head_size), k.view(b, s, kv_heads, head_size), v.view(b, s, kv_heads, head_size))


class _PackedRotaryFunction(torch.autograd.Function):
    """:func:`rotary_packed`: RoPE of q and k and v's copy out of one packed QKV tensor, whose gradient the
    backward writes whole. ``config``: (heads, kv_heads, head_size, rotary_dim)."""

    @staticmethod
    def copy_in_launch(head_size: int, rotary_dim: int, itemsize: int) -> bool:
        """v (and its gradient) copied in the rotation's launch: PACKED_COPY_IN_LAUNCH, in the flat kernel by
        FLAT_COPY_IN_LAUNCH or, when that is None, for rows of whole 32-byte sectors (the NOTE there)."""
        if not PACKED_COPY_IN_LAUNCH:
            return False
        if rotary_dim < head_size or not _flat_pairs(rotary_dim // 2):  # (the padded kernel)
            return True
        if FLAT_COPY_IN_LAUNCH is None:
            return head_size * itemsize % FLAT_COPY_SECTOR == 0
        return FLAT_COPY_IN_LAUNCH

    @staticmethod
    def forward(ctx, qkv, cos, sin, config, heads_first=False, producer=None):
        heads, kv_heads, head_size, rotary_dim = config
        # (the backward's choice too)
        ctx.copy_in_launch = _PackedRotaryFunction.copy_in_launch(head_size, rotary_dim, qkv.element_size())
        if ctx.copy_in_launch:
            outputs = _rotary_packed_fwd(qkv, cos, sin, heads, kv_heads, head_size, rotary_dim)
        else:
            q, k, v = _qkv_views(qkv, heads, kv_heads, head_size)
            outputs = (*_rotary_fwd(q, k, cos, sin, None, 0, rotary_dim, False, "bshd", "bshd"), copy_rows(v))
        ctx.save_for_backward(cos, sin)
        ctx.config, ctx.heads_first = config, heads_first
        # (the delayed FP8 layer whose output qkv is, when it hands qkv's gradient to nothing else: see backward)
        ctx.producer = producer
        ctx.set_materialize_grads(False)
        if heads_first:  # (detached: a custom Function's output that is a view may not be written in place)
            return tuple(t.transpose(1, 2).detach() for t in outputs)
        return outputs

    @staticmethod
    def backward(ctx, dq_out, dk_out, dv):
        cos, sin = ctx.saved_tensors
        heads, kv_heads, head_size, rotary_dim = ctx.config
        producer, ctx.producer = ctx.producer, None
        if ctx.heads_first:
            dq_out, dk_out, dv = (None if g is None else g.transpose(1, 2) for g in (dq_out, dk_out, dv))
        like = next(g for g in (dq_out, dk_out, dv) if g is not None)
        b, s = like.shape[:2]
        if producer is not None and all(g is not None and g.stride(-1) == 1 for g in (dq_out, dk_out, dv)):
            # The layer before is delayed and qkv is its output alone: its gradient operands in e5m2 (both
            # layouts, with the bias gradient's column sums) written here in the rotation's pass, handed to its
            # backward on its node, which takes them instead of casting a gradient in x's dtype; autograd gets a
            # zero-stride stand-in (as ops/fp8_act.py's _ActDelayedFunction does for the MLP's up projection).
            fp8.hand_to_producer(producer, lambda *state: _rotary_bwd_fp8(dq_out, dk_out, dv, cos, sin, *state))
            return zero_stand_in(like, (b, s, (heads + 2 * kv_heads) * head_size)), None, None, None, None, None
        zeros = [None if g is not None else like.new_zeros((b, s, h, head_size))
                 for g, h in ((dq_out, heads), (dk_out, kv_heads), (dv, kv_heads))]
        dq_out, dk_out, dv = (g if z is None else z for g, z in zip((dq_out, dk_out, dv), zeros))
        if torch.compiler.is_compiling() or tracing():  # (Dynamo reads the first: it cannot trace the second)
            # NOTE: traced, a kernel writing into views of a buffer becomes scatter copies (ops/launch.py):
            # the rotations as new tensors, then one concatenation, which Inductor plans.
            dq, dk = _rotary_bwd(dq_out, dk_out, cos, sin, None, 0, rotary_dim, False, "bshd", "bshd", (), ())
            return torch.cat((dq.reshape(b, s, -1), dk.reshape(b, s, -1), dv.reshape(b, s, -1)), dim=-1), None, \
                None, None, None, None
        # Eagerly the rotations and v's gradient go straight into their columns of the packed gradient: no
        # concatenation (autograd's for q, k and v split from one tensor), no rotated dq / dk in between.
        dqkv = like.new_empty((b, s, (heads + 2 * kv_heads) * head_size))
        dq, dk, dv_in = _qkv_views(dqkv, heads, kv_heads, head_size)
        together = ctx.copy_in_launch and dv.stride() == dk_out.stride()  # (v's gradient laid out as k's)
        _launch([(dq_out, dq), (dk_out, dk)], cos, sin, None, 0, rotary_dim, False, "bshd", "bshd",
                backward=True, copy_pass=True, copies=(dv, dv_in) if together else None)
        if together:
            return dqkv, None, None, None, None, None
        if dv.is_contiguous():  # attention's gradient in v's layout (cuDNN, flash): whole rows
            width = kv_heads * head_size
            launch_copy_rows(dv.view(b * s, width), dqkv.view(b * s, -1)[:, (heads + kv_heads) * head_size:])
        else:
            dv_in.copy_(dv)
        return dqkv, None, None, None, None, None


def rotary_packed(qkv: Tensor, heads: int, kv_heads: int, head_size: int, cos: Tensor,
                  sin: Tensor, *, heads_first: bool = False, sole_consumer: bool = False
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """``(q, k, v)`` of the packed QKV projection output ``qkv`` (batch, seq, (heads + 2 kv_heads) head_size),
    each (batch, seq, heads, head_size) and contiguous: q and k rotated (:func:`rotary`, rotate-half, positions
    0..seq-1 of the half tables ``cos`` / ``sin``), v copied out (:func:`rotary_copying_v`).

    The backward writes qkv's gradient whole: the rotations of dq and dk and v's gradient straight into their
    columns, where the split views' gradients would be rotated into new tensors and then concatenated by
    autograd (a pass over the whole gradient and an autograd node a layer; traced by torch.compile, the
    concatenation stays, for Inductor to plan). Tensors that take the reference path, DTensors, or calls
    without a gradient to carry: the plain calls on the split views.

    ``heads_first``: each returned as (batch, heads, seq, head_size), the same memory transposed (what attention
    takes), by the op's Function itself: no transpose nodes of autograd's after it (three a layer).

    ``sole_consumer``: nothing else takes qkv's gradient (a fused block's QKV projection). Eagerly, when qkv is the
    output of a ``"delayed"`` FP8 layer and the whole head is rotated by 2-D tables, the backward then writes that
    layer's e5m2 gradient operands itself (:func:`_rotary_bwd_fp8`: both layouts, the column sums and the amax in
    the rotation's pass) and hands them to it, where the layer's own cast would read the gradient back."""
    q, k, v = _qkv_views(qkv, heads, kv_heads, head_size)
    if not use_triton(qkv) or is_dtensor(qkv) or not torch.is_grad_enabled() or not qkv.requires_grad:
        outputs = rotary_copying_v(q, k, v, cos, sin, layout="bshd")
        return tuple(t.transpose(1, 2) for t in outputs) if heads_first else outputs
    rotary_dim, _ = _check_rotary_args(q, k, cos, sin, False, None, 0, "bshd", None, False, None)
    if cos.requires_grad or sin.requires_grad:
        cos, sin = cos.detach(), sin.detach()
    producer = None
    if sole_consumer and rotary_dim == head_size and cos.dim() == 2 and sin.dim() == 2 and not (
            torch.compiler.is_compiling() or tracing()):
        producer = fp8.delayed_producer(qkv)
    return _PackedRotaryFunction.apply(qkv, cos, sin, (heads, kv_heads, head_size, rotary_dim), bool(heads_first),
                                       producer)


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _half_table(table, rotary_dim, interleaved, position_ids, seq_offset, seq, compute):
    """The table as (batch or 1, seq, rotary_dim / 2) in ``compute`` dtype, gathered by position."""
    table = table.detach()
    if table.dim() == 2:
        if position_ids is None:
            position_ids = torch.arange(seq_offset, seq_offset + seq, device=table.device)
        table = table[position_ids.long()]
        if table.dim() == 2:
            table = table.unsqueeze(0)
    if table.shape[-1] == rotary_dim:
        table = table[..., 0::2] if interleaved else table[..., : rotary_dim // 2]
    return table.to(compute)


def rotary_ref(q, k, cos, sin, *, interleaved=False, position_ids=None, seq_offset=0, layout="bshd",
               out_layout=None, inplace=False, rotary_dim=None):
    """Pure-PyTorch :func:`rotary`: fp32 math (fp64 for fp64 inputs), outputs in q's dtype,
    contiguous in ``out_layout``. No gradient flows to cos and sin."""
    rotary_dim, out_layout = _check_rotary_args(q, k, cos, sin, interleaved, position_ids, seq_offset, layout,
                                                out_layout, inplace, rotary_dim)
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    seq = _logical(q, layout)[0][1]
    c = _half_table(cos, rotary_dim, interleaved, position_ids, seq_offset, seq, compute)[:, :, None, :]
    s = _half_table(sin, rotary_dim, interleaved, position_ids, seq_offset, seq, compute)[:, :, None, :]

    def rotate(x):
        x_bshd = (x if layout == "bshd" else x.transpose(1, 2)).to(compute)  # (batch, seq, heads, head_dim)
        rot, rest = x_bshd[..., :rotary_dim], x_bshd[..., rotary_dim:]
        if interleaved:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
        else:
            x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2:]
        y1 = x1 * c - x2 * s
        y2 = x2 * c + x1 * s
        y = torch.stack((y1, y2), dim=-1).flatten(-2) if interleaved else torch.cat((y1, y2), dim=-1)
        y = torch.cat((y, rest), dim=-1).to(x.dtype)
        return y.contiguous() if out_layout == "bshd" else y.transpose(1, 2).contiguous()

    q_out, k_out = rotate(q), rotate(k)
    if inplace:
        return q.copy_(q_out), k.copy_(k_out)
    return q_out, k_out
