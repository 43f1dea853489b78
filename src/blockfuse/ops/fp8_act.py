"""An FP8 linear layer with its activation, ``act(x @ weight.T + bias)``, whose activation kernels fold the
tensorwise amax of what they write, so that no FP8 cast around them reads its input twice.

In an MLP of tensorwise FP8 layers (``fc1 -> act -> fc2``) each cast needs the amax of a whole tensor
before it can write one FP8 value (dynamic scaling, as torchao's tensorwise recipe: the scale of this
call's own tensor). Written by ``fp8_linear`` alone, that is two passes over the tensor, an amax pass and
the cast. Here the tensors come from blockfuse's own activation kernels, which fold each program's amax
into one (1,) fp32 tensor with an atomic max while they write:

* forward: the activation's output, which the next layer casts (``fp8_linear(act, w2, x_amax=amax)``);
* backward: the pre-activation's gradient, which this layer casts to e5m2 (both layouts, for its input
  and weight gradients), and its column sums, the bias gradient (partial sums a program, added in a
  fixed order).

Each cast then reads its input once; the numbers are those of the two-pass path (the same activation
kernels' arithmetic, and a maximum is exact in any order), bit for bit in Triton's interpreter. Gated
activations (``swiglu``, ``geglu``, ``geglu_erf``) take the packed gate|up rows of the layer's output, as
``linear_act`` does.

NOTE: not the delayed scaling of the norms' tensorwise FP8 outputs (``ops/fp8.py``): those write FP8
directly with a scale from earlier calls' amaxes, another recipe's numbers; a ``Float8Linear``'s
tensorwise scale is its own tensor's amax.

Tiles: a program takes ROW_ITERS row tiles of (BLOCK_M, BLOCK_N) one after the other, as the tensorwise
amax pass of ``ops/fp8.py`` (``_fp8_tensor_amax_kernel``) does: the maxima and the column sums stay in
each thread's registers across them, and the reductions across the program's warps (and its atomic,
``fp8.fold_amax``) run once a program. A thread holds 8 columns of each row of a tile (one 16-byte bf16 vector:
``Tiles.columns_per_thread``), and the rows of a tile are set so that a thread holds at most
``Tiles.lanes_per_thread`` values of its inputs: the backward of a gated activation reads three tensors, so its tiles
are one row tall.

The file reads: kernels; launchers (ops ``blockfuse::fp8_act_fwd`` / ``fp8_act_bwd``, see ``ops/launch.py``)
and their references; the autograd Function; the public functional.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops import fp8
# NOTE: kernels call fp8's jit functions and constants by their own names, never as fp8.<name>: Inductor copies a
# user kernel's global functions into its code by name and left the module out (NameError when it compiled the
# delayed recipe's kernels; tests/ops/test_kernel_globals.py)
from blockfuse.ops.fp8 import E4M3_MAX, E5M2_MAX, _quantized, delayed_scale, delayed_scales, fold_amax, reciprocal, \
    scale_of, store_transposed_cast, to_e4m3
from blockfuse.ops.activation import ACTIVATIONS, CODES, activate, activate_grad, activate_ref, check_activation
from blockfuse.ops.linear_act import pre_halves
from blockfuse.ops.launch import Kernel, as_rows, cdiv, empty_if_none, empty_scalar, in_row_units, launcher_op, \
    next_power_of_2, sm_count, tracing, zero_stand_in
from blockfuse.ops.reduce import sum_partials
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import use_triton


@dataclass(frozen=True)
class Tiles:
    """The tiles of the activation kernels (``act_tile``) and of the delayed backward: :data:`TILES` for the compiled
    kernels (a GPU), :data:`INTERPRETED_TILES` for the interpreter's (``_tiles``)."""

    # Tiles (module docstring). NOTE: not yet timed on a GPU; the column block is the tensorwise amax pass's
    # (fp8.Tiles.tensor_amax_tile: up to 1024 columns, a warp for every 256), halved while more than an eighth of a
    # row's lanes would be masked; the interpreter pays per program and takes taller tiles.
    max_block_n: int
    lanes_per_thread: int  # input values a thread holds of one tile
    # _fp8_act_bwd_delayed_kernel's tile (BLOCK_M, BLOCK_N, num_warps): it holds two or three fp32 inputs and one or
    # two gradients a tile, then transposes them, where the cast kernel (fp8.TILES.tile, 64 x 128, 8 warps) holds
    # one. Half the columns and 4 warps: H200, both e5m2 layouts with the column sums, 246 us at SwiGLU
    # [16384, 2 x 4096] where fp8.TILES.tile took 324 (and the two tensorwise passes 335), GELU 142 at [16384, 4096]
    # (178), 85 at [8192, 4304] (103); the best of 17 tiles at all three (benchmarks/fp8_delayed_tiles.py;
    # fp8/14-delayed-2026-11-28-h200).
    bwd_delayed: tuple[int, int, int]
    min_block_n: int = 128
    columns_per_thread: int = 8
    # At most this many rows a program (its partial column sums: one row of fp32 per program's rows), and as
    # many programs as keep fp8.TILES.amax_programs_per_sm of them on each multiprocessor.
    max_rows_per_program: int = 64


TILES = Tiles(max_block_n=1024, lanes_per_thread=32, bwd_delayed=(64, 64, 4))
INTERPRETED_TILES = Tiles(max_block_n=256, lanes_per_thread=256, bwd_delayed=(128, 256, 4))


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _rows_of(i, M, BLOCK_M: tl.constexpr, ROW_ITERS: tl.constexpr):
    """Rows (int64) of this program's row tile ``i`` and their mask."""
    rows = (tl.program_id(0).to(tl.int64) * ROW_ITERS + i) * BLOCK_M + tl.arange(0, BLOCK_M)
    return rows, rows < M


@triton.jit
def _fp8_act_fwd_kernel(
    G,  # (M, N) the activation's input (gated: the gate half of each packed row)
    U,  # (M, N) gated: the up half of each packed row; else None
    Y,  # (M, N) output act(gate) * up (not GATED: act(gate)), in Y's dtype (HISTORY: e4m3 over Y_SCALE)
    AMAX,  # (1,) fp32 max |Y| (as written; HISTORY: of the fp32 values) of the whole output: zeroed before the
    #        call, atomic max
    HISTORY,  # delayed scaling: (H,) fp32 amaxes of earlier calls, Y's scale from them (ops/fp8.py); else None
    Y_SCALE,  # HISTORY: () fp32 Y's scale; else None
    stride_g, stride_u, stride_y,  # row strides (the last dimension is contiguous)
    M, N, history_len,
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROW_ITERS: tl.constexpr,
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    BLOCK_H: tl.constexpr,  # HISTORY: history_len rounded up to a power of two (else 1)
):
    N, stride_g, stride_u, stride_y = N * VEC, stride_g * VEC, stride_u * VEC, stride_y * VEC
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    peak = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if HISTORY is not None:
        scale = delayed_scale(HISTORY, history_len, BLOCK_H)
        inverse = reciprocal(scale)
        if (tl.program_id(0) == 0) & (tl.program_id(1) == 0):
            tl.store(Y_SCALE, scale)
    for i in range(ROW_ITERS):
        rows, row_mask = _rows_of(i, M, BLOCK_M, ROW_ITERS)
        mask = row_mask[:, None] & col_mask[None, :]
        g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        # NOTE: the arithmetic of ops/gated.py's forward kernel, in its order: the same values.
        y = activate(g, ACTIVATION)
        if GATED:
            y = y * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HISTORY is not None:  # e4m3 with the history's scale, as the norms' FP8 output (fp32 y quantized)
            tl.store(Y + rows[:, None] * stride_y + cols[None, :], to_e4m3(y, inverse, Y), mask=mask)
            peak = tl.maximum(peak, tl.where(mask, tl.abs(y), 0.0))
        else:
            written = y.to(Y.dtype.element_ty)
            tl.store(Y + rows[:, None] * stride_y + cols[None, :], written, mask=mask)
            # The amax of the values as written (the cast reads those), not of the fp32 ones.
            peak = tl.maximum(peak, tl.where(mask, tl.abs(written.to(tl.float32)), 0.0))
    fold_amax(AMAX, tl.max(tl.max(peak, axis=1), axis=0))


@triton.jit
def _fp8_act_bwd_kernel(
    DY,  # (M, N) gradient of the output
    G,  # (M, N) the activation's input, as the forward read it (gated: the gate half)
    U,  # (M, N) gated: the up half; else None
    D,  # (M, N) or, gated, (M, 2 N) packed: the input's gradient (gate's columns, then up's)
    AMAX,  # (1,) fp32 max |D| (as written): zeroed before the call, atomic max
    COL_SUM,  # (programs along M, N or 2 N) fp32 D's column sums over each program's rows, or None
    stride_dy, stride_g, stride_u, stride_d,  # row strides (the last dimension is contiguous)
    M, N,
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,
    HAS_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROW_ITERS: tl.constexpr,
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
):
    N, stride_dy, stride_g = N * VEC, stride_dy * VEC, stride_g * VEC
    stride_u, stride_d = stride_u * VEC, stride_d * VEC
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    peak = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    sum_g = tl.zeros([BLOCK_N], dtype=tl.float32)
    sum_u = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in range(ROW_ITERS):
        rows, row_mask = _rows_of(i, M, BLOCK_M, ROW_ITERS)
        mask = row_mask[:, None] & col_mask[None, :]
        dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        d_rows = D + rows[:, None] * stride_d
        # NOTE: the arithmetic of ops/gated.py's backward kernel, in its order: the same values.
        dy_gate = dy
        if GATED:
            dy_gate = dy * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dg = (dy_gate * activate_grad(g, ACTIVATION)).to(D.dtype.element_ty)
        tl.store(d_rows + cols[None, :], dg, mask=mask)
        dg = tl.where(mask, dg.to(tl.float32), 0.0)
        peak = tl.maximum(peak, tl.abs(dg))
        if HAS_SUM:
            sum_g += tl.sum(dg, axis=0)
        if GATED:
            du = (dy * activate(g, ACTIVATION)).to(D.dtype.element_ty)
            tl.store(d_rows + N + cols[None, :], du, mask=mask)
            du = tl.where(mask, du.to(tl.float32), 0.0)
            peak = tl.maximum(peak, tl.abs(du))
            if HAS_SUM:
                sum_u += tl.sum(du, axis=0)
    fold_amax(AMAX, tl.max(tl.max(peak, axis=1), axis=0))
    if HAS_SUM:
        width = 2 * N if GATED else N
        partial = COL_SUM + tl.program_id(0).to(tl.int64) * width
        tl.store(partial + cols, sum_g, mask=col_mask)
        if GATED:
            tl.store(partial + N + cols, sum_u, mask=col_mask)


@triton.jit
def _fp8_act_cast_t_kernel(
    G,  # (M, N) the activation's input (gated: the gate half of each packed row)
    U,  # (M, N) gated: the up half of each packed row; else None
    AMAX,  # (1,) fp32 max |act| of the whole output, as the forward's kernel folded it
    YT,  # (N, MP) e4m3: act^T quantized with AMAX's scale, zero past column M
    YT_SCALE,  # () fp32 the scale
    stride_g, stride_u,  # row strides (the last dimension is contiguous)
    M, N, MP,
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,
    GIVEN_SCALE: tl.constexpr,  # AMAX is the forward's scale itself (delayed scaling: the forward wrote e4m3)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """The activation computed again from its input, as _fp8_act_fwd_kernel computes it (rounded to the input's
    dtype, as the forward wrote it), straight into its transposed tensorwise e4m3 cast, the weight gradient's operand
    of the next layer: one read of the pre-activation, where the activation made again and then cast would write and
    read the activation once more. The cast is _fp8_cast_kernel's transposed tensorwise one (ops/fp8.py; its NOTE:
    the scale loaded as a column of the one amax)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = activate(g, ACTIVATION)
    if GATED:
        y = y * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if not GIVEN_SCALE:  # the forward wrote y in the input's dtype, and the cast read that (else it quantized fp32 y)
        y = y.to(G.dtype.element_ty).to(tl.float32)
    store_transposed_cast(y, mask, rows, cols, col_mask, AMAX, YT, YT_SCALE, MP, pid_m, pid_n, GIVEN_SCALE)


@triton.jit
def _fp8_act_bwd_delayed_kernel(
    DY,  # (M, N) gradient of the activation's output
    G,  # (M, N) the activation's input (gated: the gate half)
    U,  # (M, N) gated: the up half; else None
    HISTORY,  # (H,) fp32 amaxes of the earlier calls of the gradient's cast (the layer before's grad history)
    AMAX,  # (1,) fp32 this call's amax of the gradient (zero before the call; atomic max), for the roll after
    Q,  # (M, W) e5m2: the input's gradient (W = 2 N gated: gate's columns, then up's), row-major; or None
    Q_SCALE,  # () fp32 its scale; or None
    QT,  # (W, MP) e5m2: the gradient transposed, zero past column M; or None
    QT_SCALE,  # () fp32 its scale; or None
    COL_SUM,  # (row tiles, W) fp32 the gradient's column sums over each program's rows, or None
    stride_dy, stride_g, stride_u,  # row strides (the last dimension is contiguous)
    M, N, MP, history_len,
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,
    HAS_Q: tl.constexpr,
    HAS_QT: tl.constexpr,
    HAS_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr,  # history_len rounded up to a power of two
):
    """The activation's backward written straight into the layer before's e5m2 gradient operands with a delayed
    scale (recipe "delayed"): both layouts, the column sums (its bias gradient) and the amax for the history, in
    one pass over dy and the pre-activation, where the plain backward writes the gradient in x's dtype and the
    layer's cast reads it back. The fp32 gradient is quantized as it is (the arithmetic of _fp8_act_bwd_kernel).
    Tiles of (BLOCK_M rows, BLOCK_N columns of the N), both halves of a gated gradient from each; rows M..MP load
    as zeros (the transposed padding)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy_gate = dy
    if GATED:
        dy_gate = dy * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dg = tl.where(mask, dy_gate * activate_grad(g, ACTIVATION), 0.0)
    peak = tl.max(tl.max(tl.abs(dg), axis=1), axis=0)
    if GATED:
        du = tl.where(mask, dy * activate(g, ACTIVATION), 0.0)
        peak = tl.maximum(peak, tl.max(tl.max(tl.abs(du), axis=1), axis=0))
    fold_amax(AMAX, peak)
    col_scale = delayed_scales(HISTORY, history_len, BLOCK_H, BLOCK_N, E5M2_MAX)  # (BLOCK_N,), one scale
    scale = tl.max(col_scale, axis=0)
    width = 2 * N if GATED else N
    if HAS_Q:
        inverse = reciprocal(scale)
        q_rows = Q + rows[:, None] * width
        tl.store(q_rows + cols[None, :], _quantized(dg, inverse, Q, True), mask=mask)
        if GATED:
            tl.store(q_rows + N + cols[None, :], _quantized(du, inverse, Q, True), mask=mask)
    if HAS_QT:
        t_mask = col_mask[:, None] & (rows < MP)[None, :]
        inverse_t = reciprocal(col_scale)[:, None]
        qt_cols = QT + rows[None, :]
        tl.store(qt_cols + cols[:, None].to(tl.int64) * MP, _quantized(tl.trans(dg), inverse_t, QT, True),
                 mask=t_mask)
        if GATED:
            tl.store(qt_cols + (N + cols[:, None]).to(tl.int64) * MP,
                     _quantized(tl.trans(du), inverse_t, QT, True), mask=t_mask)
    if HAS_SUM:
        partial = COL_SUM + pid_m.to(tl.int64) * width
        tl.store(partial + cols, tl.sum(dg, axis=0), mask=col_mask)
        if GATED:
            tl.store(partial + N + cols, tl.sum(du, axis=0), mask=col_mask)
    if (pid_m == 0) & (pid_n == 0):
        if HAS_Q:
            tl.store(Q_SCALE, scale)
        if HAS_QT:
            tl.store(QT_SCALE, scale)


# ----------------------------------------------------------------------------------------
# Launchers and their references
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_fp8_act_fwd_kernel)
_bwd_kernel = Kernel(_fp8_act_bwd_kernel)
_cast_t_kernel = Kernel(_fp8_act_cast_t_kernel)
_bwd_delayed_kernel = Kernel(_fp8_act_bwd_delayed_kernel)


def _tiles(device: torch.device) -> Tiles:
    """The table of the kernels that run on ``device``'s tensors: compiled (a GPU) or interpreted."""
    return TILES if device.type == "cuda" else INTERPRETED_TILES


def act_tile(m: int, n: int, inputs: int, device: torch.device) -> tuple[int, int, int, int]:
    """``(BLOCK_M, BLOCK_N, ROW_ITERS, num_warps)`` of a pass over (m, n) that reads ``inputs`` tensors
    (module docstring): the rule, from the width, the rows and the card's multiprocessors. Comparisons only
    on m and n, which may be symbolic sizes while torch.compile traces."""
    tiles = _tiles(device)
    block_n = tiles.max_block_n
    while block_n > 1 and block_n // 2 >= n:
        block_n //= 2
    while block_n > tiles.min_block_n and (cdiv(n, block_n) * block_n - n) * 8 > n:
        block_n //= 2
    num_warps = max(1, min(8, block_n // (32 * tiles.columns_per_thread)))
    lanes_per_row = max(1, block_n // (32 * num_warps))  # a thread's columns of one row
    block_m = 1
    while (block_m * 2 * lanes_per_row * inputs <= tiles.lanes_per_thread and block_m < m
           and block_m * 2 <= tiles.max_rows_per_program):
        block_m *= 2
    max_iters = max(1, tiles.max_rows_per_program // block_m)
    if device.type != "cuda":
        return block_m, block_n, min(2, max_iters), num_warps  # the loop and its masked last tiles run in the tests
    wanted = cdiv(m, block_m) * cdiv(n, block_n) // (fp8.TILES.amax_programs_per_sm * sm_count(device))
    iters = 1
    while iters * 2 <= max_iters and iters * 2 <= wanted:
        iters *= 2
    return block_m, block_n, iters, num_warps


@launcher_op("fp8_act_fwd")
def _act_forward(pre: Tensor, activation: str) -> tuple[Tensor, Tensor]:
    """``(y, amax)``: y = act(gate) * up ((M, hidden); packed ``pre`` (M, 2 hidden) of a gated activation)
    or act(pre), in pre's dtype, and max |y| as (1,) fp32. ``pre``: 2-D, its last dimension contiguous."""
    gated = ACTIVATIONS[activation].gated
    g2, u2 = pre_halves(pre, gated)
    hidden = g2.shape[1]
    m = pre.shape[0]
    y = pre.new_empty((m, hidden))
    amax = torch.zeros((1,), dtype=torch.float32, device=pre.device)
    if m == 0 or hidden == 0:
        return y, amax
    block_m, block_n, iters, num_warps = act_tile(m, hidden, 2 if gated else 1, pre.device)
    vec, n_units, strides = in_row_units(hidden, pre.stride(0), pre.stride(0), y.stride(0))
    _fwd_kernel((cdiv(m, block_m * iters), cdiv(hidden, block_n)), g2, u2, y, amax, None, None, *strides, m, n_units,
                0, ACTIVATION=CODES[ACTIVATIONS[activation].pointwise], GATED=gated, BLOCK_M=block_m,
                BLOCK_N=block_n, ROW_ITERS=iters, VEC=vec, BLOCK_H=1, num_warps=num_warps)
    return y, amax


@launcher_op("fp8_act_fwd_delayed", mutates_args=("history", "amax"))
def _act_forward_delayed(pre: Tensor, activation: str, history: Tensor, amax: Tensor) -> tuple[Tensor, Tensor]:
    """``(q, scale)``: y = act(gate) * up (or act(pre)) written in e4m3 with the delayed scale of ``history``
    (the next layer's x history: ``max(history) / 448``, 1.0 while empty; ops/fp8.py), the 0-d scale; y's amax
    (of its fp32 values) is folded into ``amax`` (zero before) and rolled into the history after."""
    gated = ACTIVATIONS[activation].gated
    g2, u2 = pre_halves(pre, gated)
    hidden = g2.shape[1]
    m = pre.shape[0]
    q = pre.new_empty((m, hidden), dtype=torch.float8_e4m3fn)
    scale = empty_scalar(pre)
    fp8.fp8_history.settle(history)
    if m == 0 or hidden == 0:
        scale.copy_(fp8.delayed_scale_ref(history))
    else:
        h = int(history.shape[0])
        block_m, block_n, iters, num_warps = act_tile(m, hidden, 2 if gated else 1, pre.device)
        vec, n_units, strides = in_row_units(hidden, pre.stride(0), pre.stride(0), q.stride(0))
        _fwd_kernel((cdiv(m, block_m * iters), cdiv(hidden, block_n)), g2, u2, q, amax, history, scale, *strides, m,
                    n_units, h, ACTIVATION=CODES[ACTIVATIONS[activation].pointwise], GATED=gated, BLOCK_M=block_m,
                    BLOCK_N=block_n, ROW_ITERS=iters, VEC=vec, BLOCK_H=next_power_of_2(h), num_warps=num_warps)
    fp8.roll_amax_history(history, amax)
    return q, scale


def _launch_backward(dy: Tensor, pre: Tensor, dpre: Tensor, activation: str,
                     sum_dtype: Optional[torch.dtype]) -> tuple[Tensor, Tensor]:
    """Writes the gradient of ``pre`` into ``dpre`` (pre's shape and strides; may be ``pre`` itself: each program
    reads its elements before writing them); returns ``(amax, col_sum)`` (see :func:`_act_backward`)."""
    gated = ACTIVATIONS[activation].gated
    g2, u2 = pre_halves(pre, gated)
    hidden = g2.shape[1]
    m = pre.shape[0]
    amax = torch.zeros((1,), dtype=torch.float32, device=pre.device)
    col_sum = None if sum_dtype is None else pre.new_empty((pre.shape[1],), dtype=sum_dtype)
    if m == 0 or hidden == 0:
        if col_sum is not None:
            col_sum.zero_()
        return amax, empty_if_none(col_sum, pre)
    block_m, block_n, iters, num_warps = act_tile(m, hidden, 3 if gated else 2, pre.device)
    programs = cdiv(m, block_m * iters)
    partial = None if col_sum is None else pre.new_empty((1, programs, pre.shape[1]), dtype=torch.float32)
    vec, n_units, strides = in_row_units(hidden, dy.stride(0), pre.stride(0), pre.stride(0), dpre.stride(0))
    _bwd_kernel((programs, cdiv(hidden, block_n)), dy, g2, u2, dpre, amax, partial, *strides, m, n_units,
                ACTIVATION=CODES[ACTIVATIONS[activation].pointwise], GATED=gated, HAS_SUM=partial is not None,
                BLOCK_M=block_m, BLOCK_N=block_n, ROW_ITERS=iters, VEC=vec, num_warps=num_warps)
    if partial is not None:
        sum_partials(partial, col_sum, None)
    return amax, empty_if_none(col_sum, pre)


@launcher_op("fp8_act_bwd")
def _act_backward(dy: Tensor, pre: Tensor, activation: str,
                  sum_dtype: Optional[torch.dtype]) -> tuple[Tensor, Tensor, Tensor]:
    """``(dpre, amax, col_sum)``: the gradient of ``pre`` (its shape and dtype; gated: packed) for ``dy``
    (M, hidden), max |dpre| as (1,) fp32, and (``sum_dtype`` given) dpre summed over its rows in fp32, written
    in ``sum_dtype`` (the layer's bias gradient; empty otherwise). 2-D tensors, last dimensions contiguous."""
    dpre = torch.empty_like(pre, memory_format=torch.contiguous_format)
    return (dpre, *_launch_backward(dy, pre, dpre, activation, sum_dtype))


@launcher_op("fp8_act_bwd_", mutates_args=("pre",))
def _act_backward_(dy: Tensor, pre: Tensor, activation: str,
                   sum_dtype: Optional[torch.dtype]) -> tuple[Tensor, Tensor]:
    """:func:`_act_backward` with the gradient written over ``pre`` (contiguous): returns ``(amax, col_sum)``."""
    return _launch_backward(dy, pre, pre, activation, sum_dtype)


@launcher_op("fp8_act_bwd_delayed", mutates_args=("history", "amax"))
def _act_backward_delayed(dy: Tensor, pre: Tensor, activation: str, history: Tensor, amax: Tensor, rows: bool,
                          transposed: bool, pad: int, sum_dtype: Optional[torch.dtype] = None
                          ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(q, q_scale, qt, qt_scale, col_sum)``: pre's gradient through the activation (``dy`` the output's, (M,
    hidden)) in e5m2 with the delayed scale of ``history`` (:func:`blockfuse.ops.fp8._fp8_quantize_delayed`'s
    outputs for it, without it in x's dtype): ``rows`` the (M, width) layout, ``transposed`` the (width, MP) one,
    ``sum_dtype`` the column sums (the layer before's bias gradient); the gradient's amax folded into ``amax`` and
    rolled into the history after. Empty where not asked for."""
    gated = ACTIVATIONS[activation].gated
    g2, u2 = pre_halves(pre, gated)
    m, hidden = g2.shape
    width = pre.shape[1]
    mp = fp8.round_up(m, pad)
    q, q_scale, qt, qt_scale = fp8.tensorwise_outputs(pre, m, width, mp, torch.float8_e5m2, rows, transposed)
    block_m, block_n, num_warps = _tiles(pre.device).bwd_delayed
    grid = (max(1, cdiv(mp if transposed else m, block_m)), max(1, cdiv(hidden, block_n)))
    col_sum, partial = fp8.column_partials(pre, grid[0], width, sum_dtype)
    h = int(history.shape[0])
    dy2 = as_rows(dy, hidden)
    fp8.fp8_history.settle(history)
    _bwd_delayed_kernel(grid, dy2, g2, u2, history, amax, q, q_scale, qt, qt_scale, partial, dy2.stride(0),
                        g2.stride(0), pre.stride(0), m, hidden, mp, h,
                        ACTIVATION=CODES[ACTIVATIONS[activation].pointwise], GATED=gated, HAS_Q=rows,
                        HAS_QT=transposed, HAS_SUM=partial is not None, BLOCK_M=block_m, BLOCK_N=block_n,
                        BLOCK_H=next_power_of_2(h), num_warps=num_warps)
    fp8.finish_delayed_cast(partial, col_sum, width, history, amax)
    return (empty_if_none(q, pre), empty_if_none(q_scale, pre), empty_if_none(qt, pre), empty_if_none(qt_scale, pre),
            empty_if_none(col_sum, pre))


def act_backward_delayed_ref(dy: Tensor, pre: Tensor, activation: str, history: Tensor, amax: Tensor, rows: bool,
                             transposed: bool, pad: int, sum_dtype: Optional[torch.dtype] = None):
    """Pure-PyTorch :func:`_act_backward_delayed`: the same outputs (the fp32 gradient quantized as it is) and the
    same update of ``history`` and ``amax``."""
    pointwise, gated = ACTIVATIONS[activation]
    g, u = pre_halves(pre.float(), gated)
    dyf = dy.reshape(g.shape).float()
    if gated:
        grad = torch.cat((dyf * u * _activate_grad_ref(g, pointwise), dyf * activate_ref(g, pointwise)), dim=1)
    else:
        grad = dyf * _activate_grad_ref(g, pointwise)
    return fp8._quantize_delayed_ref(grad, torch.float8_e5m2, rows, transposed, pad, history, amax, sum_dtype)


def act_transposed_cast(pre: Tensor, activation: str, amax: Tensor, kernels: bool,
                        given_scale: bool = False) -> tuple[Tensor, Tensor]:
    """``(yt, scale)``: y = act(pre) (as :func:`act_forward` writes it) transposed and quantized to e4m3 with the
    tensorwise scale of ``amax`` (y's amax, as the forward folded it), ``(hidden, MP)`` with MP = M rounded up to
    fp8.GEMM_MULTIPLE, zero past column M: what ``fp8._quantize_2d(y, e4m3, False, False, True, GEMM_MULTIPLE, None,
    amax)`` gives, without y. ``kernels``: the kernel (an op, :func:`_act_transposed_cast`), else the reference.
    ``given_scale``: ``amax`` is the 0-d scale the forward's e4m3 output had (delayed scaling), which quantized y
    in fp32: y^T quantized the same way."""
    if not kernels:
        if given_scale:
            yt = fp8._transposed_ref(fp8._cast_ref(_act_value_ref(pre, activation).float(), amax,
                                                   torch.float8_e4m3fn), fp8.GEMM_MULTIPLE)
            return yt, amax.clone()
        y = act_forward_ref(pre, activation)[0]
        return fp8._quantize_2d_ref(y, torch.float8_e4m3fn, False, False, True, fp8.GEMM_MULTIPLE, amax)[2:]
    return _act_transposed_cast(pre, amax, activation, given_scale)


@launcher_op("fp8_act_cast_t")
def _act_transposed_cast(pre: Tensor, amax: Tensor, activation: str, given_scale: bool) -> tuple[Tensor, Tensor]:
    """:func:`act_transposed_cast` by the kernel (an op: a traced backward records it, :func:`cast_again_quantized`)."""
    gated = ACTIVATIONS[activation].gated
    g2, u2 = pre_halves(pre, gated)
    m, hidden = g2.shape
    mp = fp8.round_up(m, fp8.GEMM_MULTIPLE)
    yt = pre.new_empty((hidden, mp), dtype=torch.float8_e4m3fn)
    scale = empty_scalar(pre)
    block_m, block_n, num_warps = fp8._tiles(pre.device).tile
    _cast_t_kernel((max(1, cdiv(mp, block_m)), max(1, cdiv(hidden, block_n))), g2, u2, amax, yt, scale,
                   g2.stride(0), pre.stride(0), m, hidden, mp, ACTIVATION=CODES[ACTIVATIONS[activation].pointwise],
                   GATED=gated, GIVEN_SCALE=given_scale, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps)
    return yt, scale


def _act_value_ref(pre: Tensor, activation: str) -> Tensor:
    """act(gate) * up (or act(pre)) in fp32 (fp64 for fp64), for a (M, 2 hidden) or (M, n) ``pre``."""
    pointwise, gated = ACTIVATIONS[activation]
    compute = torch.float64 if pre.dtype == torch.float64 else torch.float32
    g, u = pre_halves(pre.to(compute), gated)
    y = activate_ref(g, pointwise)
    return y * u if gated else y


def _amax_ref(t: Tensor) -> Tensor:
    return fp8._amax(t).float().reshape(1)


def act_forward_ref(pre: Tensor, activation: str) -> tuple[Tensor, Tensor]:
    """Pure-PyTorch :func:`_act_forward`."""
    y = _act_value_ref(pre, activation).to(pre.dtype)
    return y, _amax_ref(y)


def act_forward_delayed_ref(pre: Tensor, activation: str, history: Tensor, amax: Tensor) -> tuple[Tensor, Tensor]:
    """Pure-PyTorch :func:`_act_forward_delayed`, the same update of ``history`` and ``amax``."""
    y = _act_value_ref(pre, activation).float()
    scale = fp8.delayed_scale_ref(history)
    q = fp8._cast_ref(y, scale, torch.float8_e4m3fn)
    newest = torch.maximum(amax.reshape(()), fp8._amax(y))
    history.copy_(torch.cat((newest.reshape(1), history[:-1])))
    amax.zero_()
    return q, scale


def _activate_grad_ref(z: Tensor, pointwise: str) -> Tensor:
    """act'(z) of a pointwise activation, written out (no autograd: a backward traced by torch.compile may
    run it)."""
    if pointwise == "relu":
        return (z > 0).to(z.dtype)
    if pointwise == "silu":
        s = torch.sigmoid(z)
        return s * (1 + z * (1 - s))
    if pointwise == "gelu":
        return 0.5 * (1 + torch.erf(z * 0.7071067811865476)) + z * torch.exp(-0.5 * z * z) * 0.3989422804014327
    inner = 0.7978845608028654 * (z + 0.044715 * z * z * z)  # gelu_tanh: sqrt(2 / pi) (z + 0.044715 z^3)
    t = torch.tanh(inner)
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * z * z)


def act_backward_ref(dy: Tensor, pre: Tensor, activation: str,
                     sum_dtype: Optional[torch.dtype]) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """Pure-PyTorch :func:`_act_backward` (the column sum None without ``sum_dtype``)."""
    pointwise, gated = ACTIVATIONS[activation]
    compute = torch.float64 if pre.dtype == torch.float64 else torch.float32
    g, u = pre_halves(pre.to(compute), gated)
    dyf = dy.reshape(g.shape).to(compute)
    if gated:
        grad = torch.cat((dyf * u * _activate_grad_ref(g, pointwise), dyf * activate_ref(g, pointwise)), dim=1)
    else:
        grad = dyf * _activate_grad_ref(g, pointwise)
    dpre = grad.to(pre.dtype)
    col_sum = None if sum_dtype is None else dpre.sum(0, dtype=torch.float32).to(sum_dtype)
    return dpre, _amax_ref(dpre), col_sum


def act_forward(pre: Tensor, activation: str, kernels: bool) -> tuple[Tensor, Tensor]:
    """:func:`_act_forward` with ``kernels`` (``runtime.use_triton`` of the call), else its reference."""
    return _act_forward(pre, activation) if kernels else act_forward_ref(pre, activation)


def act_backward(dy: Tensor, pre: Tensor, activation: str, sum_dtype: Optional[torch.dtype],
                 kernels: bool, in_place: bool = False) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """:func:`_act_backward` with ``kernels``, else its reference (the column sum None without ``sum_dtype``).
    ``in_place``: the gradient may be written over ``pre`` (then returned as dpre), where the kernels run eagerly.
    NOTE: the forward's choice: a backward runs without grad mode, where torch.compile's small-input rule
    (``runtime.use_triton``) would send it to the reference, another rounding than the forward's kernels."""
    if not kernels:
        return act_backward_ref(dy, pre, activation, sum_dtype)
    dy = as_rows(dy, dy.shape[-1])
    if in_place and pre.is_contiguous() and not torch.compiler.is_compiling() and not tracing() \
            and not is_dtensor(pre):
        # NOTE: eagerly only. Traced, Inductor would copy the saved pre-activation before the op overwrote it
        # (ops/mlp.py's _down_backward says what that cost there): a fresh gradient is as good.
        amax, col_sum = _act_backward_(dy, pre, activation, sum_dtype)
        dpre = pre
    else:
        dpre, amax, col_sum = _act_backward(dy, pre, activation, sum_dtype)
    return dpre, amax, None if sum_dtype is None else col_sum


# ----------------------------------------------------------------------------------------
# Autograd: one Function for the layer and its activation
# ----------------------------------------------------------------------------------------


def _foreign_saved_tensor_hooks() -> bool:
    """True under saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``) other than blockfuse's own
    (``models/recompute.py``'s, which keep every tensor they do not recompute as it is): activation checkpointing
    or offloading, which expect every tensor a backward needs to pass through them, so none is kept on a ctx."""
    top = fp8._top_saved_tensor_hooks()
    return top is not None and not getattr(top[0], "keeps_other_tensors", False)


class _Fp8LinearActFunction(torch.autograd.Function):
    """act(x2 @ weight.T + bias) with a tensorwise FP8 GEMM; returns ``(y, amax)``, amax not differentiable.
    Keeps x^T in e4m3 (fp8.py), the weight (its forward cast cached on it) and the pre-activation (x's dtype),
    never the activation.

    Eagerly (kernels, no tracing, no DTensor, no saved-tensor hooks but blockfuse's own: activation checkpointing
    must see it) the pre-activation is kept on ``ctx``, not saved: the backward
    writes its gradient over it and drops it once cast, before the GEMMs. Autograd frees saved tensors only
    when the node returns, and two live (M, 2 hidden) buffers through the GEMMs (the saved pre-activation and
    a fresh gradient) made te-4layer's FP8 step peak 352 MiB (9%) above the two-node path's on an H200
    (benchmarks/results/fp8/5-act-amax-2026-11-28-h200/). One backward per forward then: a second through the
    same graph (``retain_graph=True``) raises. Traced, the pre-activation is saved (Inductor plans the buffers).

    ``recompute`` (config): the pre-activation is not kept at all; the backward runs the forward GEMM again from
    x's e4m3 operand, kept instead (1 byte a token x in_features, against 2 a token x out_features: in te-4layer's
    gate|up layer 32 against 256 MiB a layer), for one more FP8 GEMM the size of the forward's."""

    @staticmethod
    def forward(ctx, x2, weight, bias, activation, config, x_amax, x_cast, give_pre=False, *recast):
        # (give_pre, traced: pre is returned too, not differentiable, for the next layer's Recast: cast_again;
        # x_cast: a function (eager), or with ``recast`` a Recast's (fn, statics) and its tensors: traced)
        out_dtype, x_grad, weight_grad, cache, kernels, recompute, keep_hp = config
        pre, saved = fp8._forward(x2, None, weight, bias, False, out_dtype, x_grad, weight_grad, cache, x_amax,
                                  keep_x=recompute, keep_hp=keep_hp)
        if recast:  # nothing of x kept but its amax: the backward has x^T's cast made again (Recast)
            saved = (None, *saved[1:])
        elif x_cast is not None:  # nothing of x kept: the backward has x^T's cast made again (fp8_linear's x_cast)
            saved = (None, None, *saved[2:])
        ctx.x_cast = x_cast
        ctx.weight_entry = fp8.weight_cache_entry(weight, cache)
        y, amax = act_forward(pre, activation, kernels)
        ctx.on_ctx = (not recompute and kernels and not torch.compiler.is_compiling() and not tracing()
                      and not is_dtensor(pre) and not _foreign_saved_tensor_hooks())
        ctx.pre = pre if ctx.on_ctx else None
        ctx.save_for_backward(*saved, weight, *((bias,) if recompute else () if ctx.on_ctx else (pre,)), *recast)
        ctx.recast = len(recast)
        ctx.activation, ctx.config = activation, config
        ctx.x_dtype, ctx.weight_dtype = x2.dtype, weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        extra = (pre,) if give_pre and not ctx.on_ctx and not recompute else ()
        ctx.mark_non_differentiable(amax, *extra)
        return (y, amax, *extra)

    @staticmethod
    def backward(ctx, dy, *_):
        out_dtype, x_grad, weight_grad, cache, kernels, recompute, _ = ctx.config
        saved = ctx.saved_tensors
        saved, recast = (saved[:-ctx.recast], saved[-ctx.recast:]) if ctx.recast else (saved, ())
        if recompute:
            xt_q, xt_s, wt_q, wt_s, x_q, x_s, weight, bias = saved
            pre = fp8._forward_again(x_q, x_s, weight, bias, out_dtype, cache, xt_q, xt_s)
            del x_q, bias
        elif ctx.on_ctx:
            (xt_q, xt_s, wt_q, wt_s, weight), pre = saved, ctx.pre
            if pre is None:
                raise RuntimeError("fp8_linear_act: backward through the same graph a second time (retain_graph=True) "
                                   "is not supported: the first backward wrote its gradient over the pre-activation")
            ctx.pre = None
        else:
            xt_q, xt_s, wt_q, wt_s, weight, pre = saved
        if recast:
            fn, statics = ctx.x_cast
            xt_q, xt_s = fn(*recast, xt_s, *statics)
        elif ctx.x_cast is not None:
            xt_q, xt_s = ctx.x_cast()
            ctx.x_cast = None
        xt_q, xt_s = fp8._x_operand(xt_q, xt_s)  # (x kept in high precision: cast now, before the GEMMs)
        sum_dtype = ctx.bias_dtype if ctx.needs_input_grad[2] else None
        # (a recomputed pre-activation is this backward's own: written over too)
        dpre, amax, db = act_backward(dy, pre, ctx.activation, sum_dtype, kernels,
                                      in_place=ctx.on_ctx or recompute)
        del pre
        # NOTE: e5m2 both ways (range over precision), as fp8_linear's tensorwise gradients; one pass over
        # dpre, its amax folded by the kernel that wrote it.
        dq, ds, dtq, dts = fp8._quantize_2d(dpre, torch.float8_e5m2, False, x_grad, weight_grad,
                                            fp8.GEMM_MULTIPLE, None, amax)
        del dpre  # eagerly its memory (the pre-activation's) goes back before the GEMMs
        dx = None
        if x_grad:  # the weight's transpose, made now where the forward left it (fp8._weight_operands)
            wt_q, wt_s = fp8._dgrad_operands(weight, False, cache, wt_q, wt_s, ctx.weight_entry)
            dx = fp8._scaled_matmul(dq, ds, wt_q, wt_s, ctx.x_dtype, None, False, False)
            del wt_q
        dw = fp8._scaled_matmul(dtq, dts, xt_q, xt_s, ctx.weight_dtype, None, False, False) if weight_grad else None
        return dx, dw, db, None, None, None, None, None, *(None,) * ctx.recast


def cast_again(y: Tensor, amax: Tensor, pre: Optional[Tensor] = None, activation: Optional[str] = None):
    """For ``(y, amax)`` of :func:`fp8_linear_act` recorded eagerly, whose node keeps its pre-activation on ``ctx``:
    a function that makes y^T's tensorwise e4m3 cast and its scale again from that pre-activation in one pass
    (:func:`act_transposed_cast`: what the next layer's weight gradient takes, the values of y's own cast), for as
    long as that node's backward has not run. None for any other tensor, or a node that saved its pre-activation
    instead (traced, or under foreign saved-tensor hooks) or keeps none (``recompute``). The fused MLP passes it to
    its down projection (``fp8_linear(x_cast=...)``), which then keeps nothing of y. While anything traces: with
    ``pre`` and ``activation`` (the pre-activation the layer's node saves, from :func:`fp8_linear_act`'s
    ``pre_out``), the same cast as a :class:`blockfuse.ops.fp8.Recast` from it, else None."""
    if torch.compiler.is_compiling() or tracing():
        if pre is None or activation is None:
            return None
        return fp8.Recast(_act_transposed_cast, (activation, False), (pre,))
    base = y._base if y._base is not None else y
    node = base.grad_fn
    if not isinstance(node, _Fp8LinearActFunction._backward_cls) or getattr(node, "pre", None) is None:
        return None
    activation, kernels = node.activation, node.config[4]

    def cast() -> tuple[Tensor, Tensor]:
        pre = node.pre
        if pre is None:
            raise RuntimeError("fp8_linear_act: its output's cast is asked for after the layer's backward, which wrote "
                               "its gradient over the pre-activation")
        return act_transposed_cast(pre, activation, amax, kernels)

    return cast


class _ActDelayedFunction(torch.autograd.Function):
    """act(pre) written in e4m3 with a delayed scale, for a ``"delayed"`` FP8 layer after it (the fused MLP's down
    projection): returns ``(proxy, q, scale)``, ``proxy`` a zero-stride stand-in of act's shape and pre's dtype that
    takes act's gradient (``fp8_linear_quantized``'s proxy), q and scale not differentiable. Keeps pre (the
    activation's backward reads it; the next layer's weight gradient casts act^T again from it:
    :func:`cast_again_quantized`) and writes pre's gradient over it where it can (eagerly)."""

    @staticmethod
    def forward(ctx, pre, activation, history, amax, kernels, producer=None):
        # (pre (M, width), or a contiguous (..., width) viewed as that here, its outputs (..., hidden): no view nodes
        # around the Function, as fp8._Fp8LinearFunction's NOTE says)
        shape = pre.shape
        if pre.dim() != 2:
            pre = pre.view(-1, shape[-1])
        if kernels:
            q, scale = _act_forward_delayed(pre, activation, history, amax)
        else:
            q, scale = act_forward_delayed_ref(pre, activation, history, amax)
        if len(shape) != 2:
            q = q.view(*shape[:-1], q.shape[-1]).detach()
        ctx.save_for_backward(pre)
        ctx.activation, ctx.kernels, ctx.shape = activation, kernels, shape
        # (the delayed layer whose output pre is, when it hands pre's gradient to nothing else: see backward)
        ctx.producer = producer
        ctx.mark_non_differentiable(q, scale)
        # NOTE: without this autograd hands backward a zero-filled e4m3 tensor of q's shape (a fill kernel over
        # the whole of q each step, H200 profile of fp8/14): q and scale take no gradient.
        ctx.set_materialize_grads(False)
        return zero_stand_in(pre, q.shape), q, scale

    @staticmethod
    def backward(ctx, dproxy, dq, dscale):
        (pre,) = ctx.saved_tensors
        producer, ctx.producer = ctx.producer, None
        if dproxy is None:
            return None, None, None, None, None, None
        if dproxy.dim() != 2:
            dproxy = dproxy.reshape(-1, dproxy.shape[-1])
        if producer is not None:
            # The layer before is delayed and pre is its output alone: its gradient operands in e5m2 (both layouts,
            # with the bias gradient's column sums) written here from dy and pre in one pass, handed to its backward
            # on its node, which takes them instead of casting a gradient in x's dtype; autograd gets a zero-stride
            # stand-in (ops/fp8.py's _Fp8LinearFunction.backward).
            backward = _act_backward_delayed if ctx.kernels else act_backward_delayed_ref
            fp8.hand_to_producer(producer, lambda *state: backward(dproxy, pre, ctx.activation, *state))
            return zero_stand_in(pre, ctx.shape), None, None, None, None, None
        dpre, _, _ = act_backward(dproxy, pre, ctx.activation, None, ctx.kernels, in_place=True)
        return dpre.view(ctx.shape), None, None, None, None, None


def act_fp8_delayed(pre: Tensor, activation: str, fp8_scaling: "fp8.Float8Scaling", *,
                    sole_consumer: bool = False) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """``(q, scale, proxy)``: act(pre) (gated: act(gate) * up of the packed rows) in e4m3 with the delayed scale of
    ``fp8_scaling`` (the next layer's x history, updated in place: :class:`blockfuse.ops.fp8.Float8Scaling`), the
    0-d scale, and in a training step the proxy that takes act's gradient (None without autograd): what a
    ``Float8Linear(recipe="delayed")`` takes as ``layer(q, scale, proxy, x_cast=cast_again_quantized(proxy,
    scale))``. ``pre``: (..., width), its last dimension contiguous.

    ``sole_consumer``: nothing else takes pre's gradient (the fused MLP's pre-activation). Eagerly, when pre is the
    output of a delayed layer, the backward then writes that layer's e5m2 gradient operands itself, in one pass
    with their column sums, and hands them to it (the layer's own cast would read a gradient in x's dtype)."""
    check_activation(activation)
    fp8.check_fp8_output("tensorwise", fp8_scaling, pre)
    lead = pre.shape[:-1]
    kernels = use_triton(pre)
    if torch.is_grad_enabled() and pre.requires_grad:
        eager = not (torch.compiler.is_compiling() or tracing())
        producer = fp8.delayed_producer(pre) if sole_consumer and eager else None
        if pre.is_contiguous():  # (viewed inside the Function, whose outputs have pre's leading dimensions)
            proxy, q, scale = _ActDelayedFunction.apply(pre, activation, *fp8_scaling, kernels, producer)
            return q, scale, proxy
        proxy, q, scale = _ActDelayedFunction.apply(pre.reshape(-1, pre.shape[-1]), activation, *fp8_scaling,
                                                    kernels, producer)
        return q.view(*lead, q.shape[-1]), scale, proxy.view(*lead, q.shape[-1])
    pre2 = pre.reshape(-1, pre.shape[-1])
    forward = _act_forward_delayed if kernels else act_forward_delayed_ref
    q, scale = forward(pre2, activation, *fp8_scaling)
    return q.view(*lead, q.shape[-1]), scale, None


class _Fp8LinearActDelayedFunction(torch.autograd.Function):
    """A ``"delayed"`` FP8 layer and :func:`act_fp8_delayed` after it as one node, for traced calls (the fused MLP's
    up projection and activation under torch.compile): the activation's backward writes the layer's e5m2 gradient
    operands (both layouts, with the bias gradient's column sums) in one pass, and the layer's GEMMs take them.
    Eagerly two nodes do the same, the activation's handing its casts to the layer's node
    (:class:`_ActDelayedFunction`), which a traced graph does not have; traced as two nodes, the activation's
    backward would write pre's gradient in x's dtype and the layer cast it again (a write and a read of
    tokens x width more: 1.9 against 1.2 ms of e5m2 casts a te-4layer step, ``fp8/21-traced-pdl-*``).

    Inputs: :class:`blockfuse.ops.fp8._Fp8LinearFunction`'s, then ``activation``, the next layer's x ``history``
    and ``amax`` (its delayed scaling, updated in place) and ``kernels``. Returns ``(proxy, q, scale, pre)``:
    :func:`act_fp8_delayed`'s, and the pre-activation (not differentiable; a :class:`blockfuse.ops.fp8.Recast`'s
    tensor for the next layer's weight gradient: the same node the graph keeps here)."""

    @staticmethod
    def forward(ctx, x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling, activation, history, amax,
                kernels, *recast):
        pre, saved = fp8._linear_forward(ctx, x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling,
                                         recast)
        forward = _act_forward_delayed if kernels else act_forward_delayed_ref
        q, scale = forward(pre, activation, history, amax)
        ctx.save_for_backward(*saved, pre)
        ctx.activation, ctx.kernels = activation, kernels
        ctx.mark_non_differentiable(q, scale, pre)
        ctx.set_materialize_grads(False)  # (q, scale and pre take no gradient: see _ActDelayedFunction)
        return pre.new_zeros(()).expand(q.shape), q, scale, pre

    @staticmethod
    def backward(ctx, dproxy, dq, dscale, dpre):
        *saved, pre = ctx.saved_tensors
        grads_after = (None,) * (4 + ctx.recast)  # activation, history, amax, kernels, *recast
        if dproxy is None:
            return (None,) * 9 + grads_after
        _, _, x_grad, weight_grad, _, _ = ctx.config
        bias_grad = ctx.needs_input_grad[3]
        state = ctx.grad_scaling
        backward = _act_backward_delayed if ctx.kernels else act_backward_delayed_ref
        dy_q, dy_s, dyt_q, dyt_s, db = backward(dproxy, pre, ctx.activation, state.history, state.amax, x_grad,
                                                weight_grad, fp8.GEMM_MULTIPLE, ctx.bias_dtype if bias_grad else None)
        del pre
        precast = (dy_q if x_grad else None, dy_s if x_grad else None, dyt_q if weight_grad else None,
                   dyt_s if weight_grad else None, db if bias_grad else None)
        return (*fp8._linear_backward(ctx, None, saved, bias_grad, precast)[:9], *grads_after)


def linear_act_fp8_delayed(layer, x: Tensor, x_scale: Optional[Tensor], x_proxy: Optional[Tensor], x_cast,
                           activation: str, fp8_scaling: "fp8.Float8Scaling"):
    """``layer(x[, x_scale, x_proxy], x_cast=x_cast)`` (a ``Float8Linear`` with recipe "delayed"; ``x`` in high
    precision, or a norm's e4m3 output with its 0-d scale and proxy) and :func:`act_fp8_delayed` of its output
    with ``fp8_scaling`` (the next layer's x state) as one node (:class:`_Fp8LinearActDelayedFunction`):
    ``(q, scale, proxy, pre)``, ``pre`` the layer's output, for the next layer's
    :func:`cast_again_quantized`. The fused MLP's traced training path; None where it does not apply (no gradient
    to take, sizes without FP8 GEMMs, or no kernels): the caller then runs the two as they are."""
    weight, bias = layer.weight, layer.bias
    k, n = weight.shape[1], weight.shape[0]
    if not (use_triton(x) and fp8.fp8_supported(k, n) and torch.is_grad_enabled()):
        return None
    takes_grad = (x.requires_grad if x_proxy is None else x_proxy.requires_grad) or weight.requires_grad
    if not takes_grad or x.shape[-1] != k:
        return None
    check_activation(activation)
    x_state, grad_state = layer.fp8_scaling()
    fp8.check_fp8_output("tensorwise", fp8_scaling, x)
    fp8.check_fp8_output("tensorwise", grad_state, x)
    then = (_Fp8LinearActDelayedFunction, (activation, *fp8_scaling, True))
    if x_scale is not None:  # (as fp8_linear_quantized: an e4m3 x of the norm before, its own scale)
        fp8._check_fp8_linear_args(x, weight, bias, x_scale, "tensorwise")
        outputs = fp8._fp8_linear(x, weight, bias, x_scale, False, layer.weight_cache, x_proxy, x_cast=x_cast,
                                  scaling=(None, grad_state), then=then)
    else:  # (as fp8_linear with recipe "delayed")
        fp8._check_delayed_args(x, None, None, x_cast, (x_state, grad_state))
        fp8._check_fp8_linear_args(x, weight, bias, None, "tensorwise")
        outputs = fp8._fp8_linear(x, weight, bias, None, False, layer.weight_cache, None, x_cast=x_cast,
                                  scaling=(x_state, grad_state), then=then)
    proxy, q, scale, pre = outputs
    lead = x.shape[:-1]
    return q.view(*lead, q.shape[-1]), scale, proxy.view(*lead, q.shape[-1]), pre.view(*lead, n)


def cast_again_quantized(proxy: Tensor, scale: Tensor, pre: Optional[Tensor] = None,
                         activation: Optional[str] = None):
    """For ``(q, scale, proxy)`` of :func:`act_fp8_delayed` recorded eagerly: a function making act^T's e4m3 cast
    with that scale again from the pre-activation the node keeps, in one pass (:func:`act_transposed_cast`), the
    forward's values transposed, for the next layer's weight gradient (``x_cast=``), which then keeps nothing of
    q. None for any other tensor. While anything traces (no node to read): with ``pre`` and ``activation`` (the
    call's), the same cast as a :class:`blockfuse.ops.fp8.Recast` from them, else None."""
    if torch.compiler.is_compiling() or tracing():
        if pre is None or activation is None:
            return None
        return fp8.Recast(_act_transposed_cast, (activation, True), (pre.reshape(-1, pre.shape[-1]),))
    node = proxy.grad_fn
    if node is not None and not isinstance(node, _ActDelayedFunction._backward_cls) and node.next_functions:
        node = node.next_functions[0][0]  # (through the view act_fp8_delayed returns)
    if not isinstance(node, _ActDelayedFunction._backward_cls):
        return None
    activation, kernels = node.activation, node.kernels

    def cast() -> tuple[Tensor, Tensor]:
        (pre,) = node.saved_tensors
        return act_transposed_cast(pre, activation, scale, kernels, given_scale=True)

    return cast


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------


def fp8_linear_act(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "swiglu", *,
                   weight_cache: bool = True, x_amax: Optional[Tensor] = None, recompute: bool = False,
                   x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]] = None,
                   pre_out: Optional[list] = None) -> tuple[Tensor, Tensor]:
    """``(y, amax)``: ``y = act(x @ weight.T + bias)`` with the GEMMs in tensorwise FP8 (``fp8_linear``'s:
    x and the weight in e4m3, the gradient in e5m2) and ``amax = max |y|`` as a (1,) fp32 tensor, for the
    next tensorwise FP8 layer: ``fp8_linear(y, w2, x_amax=amax)`` casts y in one pass. Differentiable in
    x, weight and bias (not through amax).

    ``activation``: one of ``gelu_tanh``, ``gelu``, ``silu``, ``relu`` or a gated form (``swiglu``, ``geglu``,
    ``geglu_erf``: ``weight`` holds the gate rows then the up rows, (2 hidden, in_features), and y is
    ``act(gate) * up``, (..., hidden)). ``x``: (..., in_features) float32, float16 or bfloat16; y has its
    dtype. In the backward the activation kernel folds the amax of the pre-activation's gradient and sums
    its columns (the bias gradient), so its e5m2 cast reads it once (module docstring). A layer whose sizes
    are not multiples of 16 (:func:`blockfuse.ops.fp8.fp8_supported`) runs ``F.linear`` in x's dtype.
    ``x_amax``: x's amax, known already (:func:`blockfuse.ops.fp8.fp8_linear`'s, the norm before the layer's).
    ``recompute``: keep x's e4m3 cast instead of the pre-activation and run the forward GEMM again in the
    backward (memory for time: the pre-activation is the largest tensor the layer keeps; same values).
    ``x_cast`` (with ``x_amax``): a function making x^T's e4m3 cast again for the weight gradient, as
    :func:`blockfuse.ops.fp8.fp8_linear` takes it (eager calls without ``recompute``; ignored otherwise), or its
    traced form, a :class:`blockfuse.ops.fp8.Recast` (without ``recompute``).
    ``pre_out`` (a list; blocks): while anything traces, a training call that saves its pre-activation appends it,
    (M, n), for the next layer's :func:`cast_again` (eagerly that reads it from the layer's node).
    """
    if isinstance(x, Tensor) and x.dtype == torch.float8_e4m3fn:
        raise TypeError("x: expected a float32, float16 or bfloat16 tensor (fp8_linear_act quantizes x itself), "
                        "got torch.float8_e4m3fn")
    fp8._check_fp8_linear_args(x, weight, bias, None, "tensorwise")
    fp8._check_x_amax(x_amax, x, False)
    pointwise, gated = check_activation(activation)
    k, n = x.shape[-1], weight.shape[0]
    if gated and n % 2:
        raise ValueError(f"weight: a gated activation ({activation!r}) takes the gate rows then the up rows, an even "
                         f"number of them; got {n}")
    lead = x.shape[:-1]
    if not fp8.fp8_supported(k, n):
        y, amax = act_forward_ref_autograd(F.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype)),
                                           activation)
        return y, amax
    x2 = x.reshape(-1, k)
    grad = torch.is_grad_enabled()
    x_grad = grad and x.requires_grad
    weight_grad = grad and weight.requires_grad
    if not isinstance(recompute, bool):
        raise TypeError(f"recompute: expected a bool, got {type(recompute).__name__}")
    fp8._check_x_cast(x_cast, x_amax)
    recast = ()
    if isinstance(x_cast, fp8.Recast):  # (the tensors go to the Function as inputs, its backward calls fn)
        x_cast, recast = x_cast.unpack() if weight_grad and not recompute and x_amax is not None else (None, ())
    elif not weight_grad or recompute or torch.compiler.is_compiling() or tracing():
        x_cast = None
    keep_hp = weight_grad and (x_cast is not None or fp8._kept_for_free(x2))
    config = (x.dtype, x_grad, weight_grad, weight_cache, use_triton(x), recompute, keep_hp)
    if x_grad or weight_grad or (grad and bias is not None and bias.requires_grad):
        give_pre = pre_out is not None and (torch.compiler.is_compiling() or tracing())
        y, amax, *pre = _Fp8LinearActFunction.apply(x2, weight, bias, activation, config, x_amax, x_cast, give_pre,
                                                    *recast)
        if pre_out is not None:
            pre_out.extend(pre)
    else:
        pre, _ = fp8._forward(x2, None, weight, bias, False, x.dtype, False, False, weight_cache, x_amax)
        y, amax = act_forward(pre, activation, config[4])
    return y.view(*lead, y.shape[-1]), amax


def act_forward_ref_autograd(pre: Tensor, activation: str) -> tuple[Tensor, Tensor]:
    """``(act(pre), amax)`` in plain differentiable PyTorch (a layer without FP8 GEMMs)."""
    y = _act_value_ref(pre, activation).to(pre.dtype)
    return y, _amax_ref(y.detach())


def fp8_linear_act_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                       activation: str = "swiglu") -> tuple[Tensor, Tensor]:
    """Pure-PyTorch :func:`fp8_linear_act` (forward): ``fp8_linear_ref``'s GEMM, then the activation in fp32,
    rounded to x's dtype, and its amax."""
    check_activation(activation)
    pre = fp8.fp8_linear_ref(x, weight, bias, recipe="tensorwise")
    y, amax = act_forward_ref(pre.reshape(-1, pre.shape[-1]), activation)
    return y.view(*pre.shape[:-1], y.shape[-1]), amax
