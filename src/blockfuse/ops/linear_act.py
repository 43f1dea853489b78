"""Linear layer with the activation in the GEMM's epilogue, and the two-GEMM MLP built on it.

* ``linear_act(x, weight, bias, activation)``: ``act(x @ weight.T + bias)``; ``activation`` is
  ``gelu_tanh``, ``gelu`` (erf), ``silu``, ``relu``, or a gated form, ``swiglu`` (SiLU),
  ``geglu`` (GELU tanh), ``geglu_erf``, where ``weight`` holds the gate rows then the up rows
  (2 hidden, K) and the output (..., hidden) is ``act(gate) * up``.
* ``fused_mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation)``:
  ``linear(linear_act(x, fc1_weight, fc1_bias, activation), fc2_weight, fc2_bias)``.

What each keeps for the backward: x and the pre-activation ``x @ W1.T + b1`` (in x's dtype; gated:
all 2 hidden columns), never the activation. The backward recomputes the activation's derivative
from the pre-activation and writes the pre-activation's gradient over the pre-activation itself
(the buffer is private to the op), so it allocates no second tokens x hidden buffer.

Three paths, picked by ``path`` (see ``PATH`` and the "auto" rule below it; the GPU benchmark
``benchmarks/linear_act.py`` compares them):

* ``"triton"``: Triton GEMMs (``tl.dot``: wgmma on sm_90, autotuned tiles) with the elementwise
  math in the GEMM itself: forward, bias + activation in the epilogue from the fp32 accumulator;
  ``linear_act`` backward, ``dx = d_pre @ W`` with ``d_pre = dy * act'(pre)`` computed on the fly
  while loading its tiles (prologue); ``fused_mlp`` backward, ``d_pre = (dy @ W2) * act'(pre)`` in
  the epilogue of the hidden-gradient GEMM, written in place. The weight gradients
  (``d_pre.T @ x``; fc2's ``dy.T @ act(pre)`` from the activation recomputed by an elementwise
  kernel) and bias gradients (a GEMV) are cuBLAS calls on materialized operands.
* ``"triton_tma"``: ``"triton"`` with the forward's tiles loaded through tensor-memory-accelerator
  descriptors (``tl.make_tensor_descriptor``) on sm_90+, where the layout allows it; it falls
  back to ``"triton"`` elsewhere and, with a warning, if the descriptors fail to compile.
* ``"cublas"``: cuBLAS GEMMs (``F.linear`` / ``torch.mm``, bias in cuBLASLt's epilogue) and small
  Triton elementwise kernels for the activation and its derivative. The activation is then
  computed from the pre-activation rounded to x's dtype, as PyTorch does.

The file reads: kernels (forward, elementwise, backward); launchers (ops ``blockfuse::linear_act_fwd``,
``linear_act_bwd``, ``fused_mlp_fwd``, ``fused_mlp_bwd``, see ``ops/launch.py``); one autograd Function
per op; public functionals; references.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops import gated as gated_ops
from blockfuse.ops.activation import column_sum, gelu, gelu_grad, launch_shape, program_tile, silu, silu_grad
from blockfuse.ops.checks import check_like
from blockfuse.ops.launch import Kernel, as_rows, cdiv, empty_if_none, launcher_op, next_power_of_2, tracing
from blockfuse.ops.mlp import column_blocks, down_projection, linear_into
from blockfuse.runtime import interpreter_enabled, use_triton

# activation -> (the elementwise activation, gated)
ACTIVATIONS = {
    "gelu_tanh": ("gelu_tanh", False),
    "gelu": ("gelu", False),
    "silu": ("silu", False),
    "relu": ("relu", False),
    "swiglu": ("silu", True),
    "geglu": ("gelu_tanh", True),
    "geglu_erf": ("gelu", True),
}
# Elementwise activations, as kernel constants.
_RELU: tl.constexpr = tl.constexpr(0)
_SILU: tl.constexpr = tl.constexpr(1)
_GELU_TANH: tl.constexpr = tl.constexpr(2)
_GELU_ERF: tl.constexpr = tl.constexpr(3)
_ACTIVATION_CODE = {"relu": 0, "silu": 1, "gelu_tanh": 2, "gelu": 3}

PATHS = ("auto", "triton", "triton_tma", "cublas")
# The path taken when the caller passes none (``path=None``). "auto" applies the rule below.
PATH = "auto"
# NOTE: the "auto" rule, until the GPU benchmark says otherwise. On CUDA (compute capability 8.0
# or newer), a GEMM whose rows (tokens) number at least AUTO_MIN_ROWS takes the Triton path: its
# fused epilogue saves a write and a read of tokens x hidden against cuBLAS + an elementwise
# kernel, which only pays once the GEMM is large enough for Triton's 64-128-row tiles to match
# cuBLAS; fewer rows (decoding, small batches) take cuBLAS, whose heuristics cover skinny shapes.
# ``linear_act``'s own backward takes AUTO_BACKWARD: its weight and bias gradients need d_pre
# materialized anyway, so the fused dx prologue only adds work (a second tokens x hidden input, and
# act' recomputed for every dx column block) unless the Triton GEMM beats cuBLAS. ``fused_mlp``'s
# backward follows the forward rule: there the Triton GEMM's epilogue replaces a whole
# tokens x hidden round trip (dh written and read again). AUTO_TMA: TMA loads in the forward on sm_90+.
# MEASURED (H200, torch 2.11, triton 3.6, bf16; benchmarks/linear_act.py and a profile of fused_mlp):
# the Triton GEMMs are not yet as fast as cuBLAS. At [65536, 1152] x [1152, 4304] the fused forward
# kernel took 1.82 ms and the d_pre kernel 1.73 ms against 0.86-0.95 ms for cuBLAS's GEMMs (plus
# 0.15-0.19 ms for the separate activation kernels); at [16384, 4096] x [4096, 14336] GELU the TMA
# forward took 3.44 ms against 3.09 ms for cuBLAS + activation. So "auto" takes cuBLAS on CUDA
# (AUTO_TRITON False) until the Triton tiles are tuned; the rule below applies once it is turned on.
AUTO_TRITON = False
AUTO_MIN_ROWS = 1024
AUTO_BACKWARD = "cublas"
AUTO_TMA = False
# NOTE: on the cuBLAS path, a forward that keeps no pre-activation (nothing to backpropagate) with
# GELU-tanh or ReLU runs as one cuBLASLt GEMM with the bias and the activation in its epilogue
# (``torch._addmm_activation``: CUBLASLT_EPILOGUE_GELU_BIAS / RELU_BIAS on CUDA), computed from the
# fp32 accumulator and rounded once, with no tokens x N round trip through memory. cuBLASLt has no
# epilogue that also writes the pre-activation through PyTorch, so a training forward keeps the
# GEMM + activation kernel. fp16 / bf16 only: the epilogue's GELU in fp32 was 20x as wrong as
# PyTorch's (relative error 2e-6 against 1e-7 on an H200, a fast tanh), far below a half-precision
# output's rounding but not an fp32 one's. MEASURED (H200, torch 2.11, bf16, no grad;
# benchmarks/linear_act.py): [16384, 4096] x [4096, 14336] GELU 2.90 ms against 2.81 ms for the GEMM
# alone (0.97x) and 3.08 ms for GEMM + activation kernel; [65536, 1152] x [1152, 4304] 1.12 against
# 0.90 and 1.31 ms. CUBLASLT_EPILOGUE False turns it off (for comparisons).
CUBLASLT_EPILOGUE = True
_EPILOGUE_ACTIVATIONS = {"gelu_tanh": True, "relu": False}  # name -> torch._addmm_activation's use_gelu
# fused_mlp's backward recomputes the activation (for fc2's weight gradient) in this many blocks of
# hidden columns, and on the cuBLAS path makes the hidden gradient in as many blocks of rows, so the
# step's peak holds a quarter of tokens x hidden (as ops/mlp.py does).
BACKWARD_BLOCKS = 4
BACKWARD_MIN_ROWS = 1024
BACKWARD_MIN_COLUMNS = 512


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _act(z, ACTIVATION: tl.constexpr):
    """act(z) for an fp32 tile."""
    if ACTIVATION == _RELU:
        return tl.maximum(z, 0.0)
    elif ACTIVATION == _SILU:
        return silu(z)
    else:
        return gelu(z, ACTIVATION == _GELU_TANH)


@triton.jit
def _act_grad(z, ACTIVATION: tl.constexpr):
    """act'(z) for an fp32 tile (relu: 0 at 0, as PyTorch)."""
    if ACTIVATION == _RELU:
        return tl.where(z > 0.0, 1.0, 0.0)
    elif ACTIVATION == _SILU:
        return silu_grad(z)
    else:
        return gelu_grad(z, ACTIVATION == _GELU_TANH)


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """acc + a @ b in fp32.

    NOTE: ``UPCAST`` is set only in Triton's interpreter for bf16 tiles: it keeps bf16 as uint16
    and its ``tl.dot`` multiplies those integers (Triton 3.9, ``interpreter.py``, ``create_dot``).
    The product of two bf16 values is exact in fp32, so the upcast computes what the GPU's MMA does.
    """
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision=INPUT_PRECISION)
    else:
        return tl.dot(a, b, acc, input_precision=INPUT_PRECISION)


@triton.jit
def _grouped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program.

    NOTE: consecutive programs cover GROUP_M row blocks column block by column block, rather than
    a whole row of column blocks: the programs in flight then share their A tiles (GROUP_M row
    blocks) and B tiles (a few column blocks) in L2, instead of streaming all of B per row block.
    """
    pid = tl.program_id(0)
    row_blocks = tl.cdiv(M, BLOCK_M)
    col_blocks = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * col_blocks
    first = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(row_blocks - first, GROUP_M)
    row_block = first + (pid % per_group) % rows_in_group
    col_block = (pid % per_group) // rows_in_group
    return row_block, col_block


@triton.jit
def _accumulate(
    A,  # (M, K) left operand, element (m, k) at m * stride_am + k * stride_ak
    B,  # (K, N) right operand, element (k, n) at k * stride_bk + n * stride_bn
    a_rows,  # (BLOCK_M,) rows of A, already inside [0, M)
    b_cols,  # (BLOCK_N,) columns of B, already inside [0, N)
    K, stride_am, stride_ak, stride_bk, stride_bn,
    second_offset,  # elements from B's column n to the second operand's column n (TWO only)
    TWO: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """(A[a_rows] @ B[:, b_cols], A[a_rows] @ B2[:, b_cols]) in fp32, B2 = B + second_offset (the up
    half of a gated weight); the second result is zeros unless TWO. Only K is masked."""
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = A + a_rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = B + ks[:, None] * stride_bk + b_cols[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = ks < K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)
        acc = _dot(a, b, acc, UPCAST, INPUT_PRECISION)
        if TWO:
            b2 = tl.load(b_ptrs + second_offset, mask=k_mask[:, None], other=0.0)
            acc2 = _dot(a, b2, acc2, UPCAST, INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc, acc2


@triton.jit
def _accumulate_tma(
    X,  # (M, K) input rows, last dimension contiguous, 16-byte aligned rows
    W,  # (N_W, K) weight, same conditions
    row_start, col_start, up_row,  # first row of the X tile and of the W tile; up_row: row offset of up in W
    M, N_W, K, stride_xm, stride_wn,
    TWO: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """``_accumulate`` of x @ W.T with the tiles loaded by TMA descriptors (out-of-range
    elements read as zeros, so nothing is masked)."""
    x_desc = tl.make_tensor_descriptor(X, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(W, shape=[N_W, K], strides=[stride_wn, 1], block_shape=[BLOCK_N, BLOCK_K])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = x_desc.load([row_start, k])
        b = w_desc.load([col_start, k])
        acc = _dot(a, tl.trans(b), acc, UPCAST, INPUT_PRECISION)
        if TWO:
            b2 = w_desc.load([up_row + col_start, k])
            acc2 = _dot(a, tl.trans(b2), acc2, UPCAST, INPUT_PRECISION)
    return acc, acc2


@triton.jit
def _linear_act_fwd_kernel(
    X,  # (M, K) input rows (any strides)
    W,  # (N, K) weight; gated: (2 N, K), the gate rows then the up rows
    B,  # (N,) bias, gated (2 N,); or None
    PRE,  # (M, N) pre-activation x @ W.T + b, gated (M, 2 N), written in x's dtype; or None
    Y,  # (M, N) output act(pre); gated act(gate) * up
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_pre, stride_y,
    up_offset,  # N * stride_wn: from a gate row of W to its up row
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, HAS_BIAS: tl.constexpr, STORE_PRE: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    row_block, col_block = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    if USE_TMA:
        n_w = 2 * N if GATED else N
        acc, acc_up = _accumulate_tma(X, W, row_block * BLOCK_M, col_block * BLOCK_N, N, M, n_w, K, stride_xm,
                                      stride_wn, GATED, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        # NOTE: rows and columns past the edge are read from row / column (i mod size) instead of
        # masked: every load but the K tail is then unmasked, and the extra results are not stored.
        acc, acc_up = _accumulate(X, W, rows % M, cols % N, K, stride_xm, stride_xk, stride_wk, stride_wn,
                                  up_offset, GATED, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)

    # Epilogue, on the fp32 accumulator: bias, pre-activation, activation.
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)
    if HAS_BIAS:
        acc += tl.load(B + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
        if GATED:
            acc_up += tl.load(B + N + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if STORE_PRE:
        pre_ptrs = PRE + rows64[:, None] * stride_pre + cols[None, :]
        tl.store(pre_ptrs, acc.to(PRE.dtype.element_ty), mask=mask)
        if GATED:
            tl.store(pre_ptrs + N, acc_up.to(PRE.dtype.element_ty), mask=mask)
    y = _act(acc, ACTIVATION)
    if GATED:
        y = y * acc_up
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _act_fwd_kernel(
    G,  # (M, N) pre-activation (gated: its gate half)
    U,  # (M, N) the up half of a gated pre-activation, or None
    Y,  # (M, N) output act(g), gated act(g) * u
    stride_g, stride_u, stride_y,  # row strides (the last dimension is contiguous)
    M, N,
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows, cols, mask = program_tile(M, N, BLOCK_M, BLOCK_N)
    z = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = _act(z, ACTIVATION)
    if GATED:
        y = y * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _act_bwd_kernel(
    DY,  # (M, N) gradient of the activation's output
    G,  # (M, N) pre-activation (gated: its gate half)
    U,  # (M, N) the up half of a gated pre-activation, or None
    DG,  # (M, N) gradient of G out; may be G itself (each element is read before it is written)
    DU,  # (M, N) gradient of U out, or None; may be U itself
    stride_dy, stride_g, stride_u, stride_dg, stride_du,  # row strides (last dimension contiguous)
    M, N,
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows, cols, mask = program_tile(M, N, BLOCK_M, BLOCK_N)
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    z = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if GATED:
        u = tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(DU + rows[:, None] * stride_du + cols[None, :], (dy * _act(z, ACTIVATION)).to(DU.dtype.element_ty),
                 mask=mask)
        dy = dy * u
    tl.store(DG + rows[:, None] * stride_dg + cols[None, :], (dy * _act_grad(z, ACTIVATION)).to(DG.dtype.element_ty),
             mask=mask)


@triton.jit
def _linear_act_dx_kernel(
    DY,  # (M, N) gradient of the output
    PRE,  # (M, N) pre-activation saved by the forward; gated (M, 2 N), gate then up
    W,  # (N, K) weight; gated (2 N, K)
    DX,  # (M, K) gradient of x, out
    M, N, K,
    stride_dy, stride_pre, stride_wn, stride_wk, stride_dx,
    up_offset,  # N * stride_wn: from a gate row of W to its up row
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """dx = d_pre @ W, d_pre = dy * act'(pre) (gated: [dy * up * act'(gate), dy * act(gate)])
    computed from dy and pre as each A tile is loaded: d_pre is never written. BLOCK_K: columns of
    dx per program; BLOCK_N: the reduction step over N."""
    row_block, col_block = _grouped_tile(M, K, BLOCK_M, BLOCK_K, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    ks = col_block * BLOCK_K + tl.arange(0, BLOCK_K)
    ns = tl.arange(0, BLOCK_N)
    rows64 = rows.to(tl.int64)
    row_mask = rows < M
    dy_ptrs = DY + rows64[:, None] * stride_dy + ns[None, :]
    pre_ptrs = PRE + rows64[:, None] * stride_pre + ns[None, :]
    w_ptrs = W + ns[:, None].to(tl.int64) * stride_wn + (ks % K)[None, :] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for step in range(0, tl.cdiv(N, BLOCK_N)):
        n_mask = ns < N - step * BLOCK_N
        mask = row_mask[:, None] & n_mask[None, :]
        # Masked rows and columns read dy = 0, so their d_pre is 0.
        dy = tl.load(dy_ptrs, mask=mask, other=0.0).to(tl.float32)
        z = tl.load(pre_ptrs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptrs, mask=n_mask[:, None], other=0.0)
        if GATED:
            u = tl.load(pre_ptrs + N, mask=mask, other=0.0).to(tl.float32)
            w_up = tl.load(w_ptrs + up_offset, mask=n_mask[:, None], other=0.0)
            d_up = (dy * _act(z, ACTIVATION)).to(W.dtype.element_ty)
            acc = _dot(d_up, w_up, acc, UPCAST, INPUT_PRECISION)
            dy = dy * u
        # NOTE: d_pre is rounded to the weight's dtype before the dot, as the materialized
        # gradient would be: both paths give the same dx.
        d_pre = (dy * _act_grad(z, ACTIVATION)).to(W.dtype.element_ty)
        acc = _dot(d_pre, w, acc, UPCAST, INPUT_PRECISION)
        dy_ptrs += BLOCK_N
        pre_ptrs += BLOCK_N
        w_ptrs += BLOCK_N * stride_wn
    mask = row_mask[:, None] & (ks < K)[None, :]
    tl.store(DX + rows64[:, None] * stride_dx + ks[None, :], acc.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _mlp_dpre_kernel(
    DY,  # (M, D) gradient of the MLP's output
    W2,  # (D, N) fc2 weight
    PRE,  # (M, N) fc1 pre-activation (gated (M, 2 N), gate then up); overwritten by its gradient
    M, N, D,
    stride_dy, stride_dyd, stride_w2d, stride_w2n, stride_pre,
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """d_pre = (dy @ W2) * act'(pre) (gated: [dh * up * act'(gate), dh * act(gate)]) in the GEMM's
    epilogue, written over pre: each element is read and written by one program only."""
    row_block, col_block = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    dh, _ = _accumulate(DY, W2, rows % M, cols % N, D, stride_dy, stride_dyd, stride_w2d, stride_w2n, 0, False,
                        UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    pre_ptrs = PRE + rows.to(tl.int64)[:, None] * stride_pre + cols[None, :]
    z = tl.load(pre_ptrs, mask=mask, other=0.0).to(tl.float32)
    if GATED:
        up_ptrs = pre_ptrs + N
        u = tl.load(up_ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(up_ptrs, (dh * _act(z, ACTIVATION)).to(PRE.dtype.element_ty), mask=mask)
        dh = dh * u
    tl.store(pre_ptrs, (dh * _act_grad(z, ACTIVATION)).to(PRE.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------
# Tile configurations
# ----------------------------------------------------------------------------------------


def _config(block_m, block_n, block_k, warps, stages, group_m=8):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group_m},
                         num_warps=warps, num_stages=stages)


# NOTE: candidates for Hopper's wgmma (128-row tiles over 8 warps = two warp groups, 64-deep K
# steps, 3-4 stages of shared memory), plus 64-row tiles for fewer rows. The pruning below drops the
# ones whose stages overflow shared memory or whose accumulators (two, gated) overflow registers.
FWD_CONFIGS = [
    _config(128, 256, 64, 8, 3), _config(128, 256, 64, 8, 4), _config(128, 128, 64, 8, 4),
    _config(128, 128, 64, 8, 3), _config(128, 128, 64, 4, 4), _config(64, 256, 64, 8, 4),
    _config(64, 128, 64, 4, 4), _config(128, 64, 64, 4, 4),
]
# dx: BLOCK_K is the dx column block (the output), BLOCK_N the reduction step over N.
DX_CONFIGS = [
    _config(128, 64, 128, 8, 3), _config(128, 64, 256, 8, 3), _config(128, 32, 128, 8, 4),
    _config(64, 64, 128, 4, 4), _config(64, 64, 256, 8, 3),
]
DPRE_CONFIGS = [
    _config(128, 256, 64, 8, 3), _config(128, 128, 64, 8, 4), _config(128, 128, 64, 4, 4),
    _config(64, 256, 64, 8, 4), _config(64, 128, 64, 4, 4),
]
# Where none of the above fits (fp32 with two accumulators, say): a small tile that always does.
FALLBACK_CONFIGS = {"fwd": _config(64, 64, 32, 4, 3), "dx": _config(64, 32, 64, 4, 3),
                    "dpre": _config(64, 64, 32, 4, 3)}
# In Triton's interpreter (CPU tests) the autotuner is bypassed: one tile, small enough that edge
# tiles and partial groups occur at the tests' sizes (72 -> 2 blocks), large enough that the
# interpreter runs few programs (its cost is per program and per op, not per element).
INTERPRETER_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 2}
# Shared memory of a block on H100 / H200 (227 KiB), and the fp32 accumulator registers a thread
# may hold: 128 (a 128 x 256 tile over 8 warps). NOTE: compiled by Triton 3.9 for sm_90 in bf16
# (on a CPU, ptxas from the wheel): 128 x 128 x 2 accumulators over 4 warps (256 a thread) spilled
# 1.2 KB of stack; at 128 a thread, 255 registers and at most 56 bytes of stack.
SHARED_MEMORY_BYTES = 227 * 1024
# From this many rows (a power-of-two bucket) on, only 128-row tiles are tried: 64-row tiles halve
# the reuse of each W tile, and skipping them saves autotuning compiles (not measured on a GPU yet).
LARGE_M = 8192
MAX_ACCUMULATORS_PER_THREAD = 128


def _shared_bytes(kind: str, gated: bool, block_m: int, block_n: int, block_k: int, stages: int, size: int) -> int:
    """Shared memory of a config's pipeline. NOTE: the formulas reproduce what Triton 3.9 allocated
    for sm_90 for every config listed here (dx: its A tiles, computed in registers, are staged one
    time fewer than the W tiles; up to 4 KiB more besides)."""
    w_tiles = 2 if gated else 1
    if kind == "fwd":
        return stages * (block_m * block_k + w_tiles * block_n * block_k) * size
    if kind == "dpre":
        return stages * (block_m * block_k + block_k * block_n) * size
    a_tiles = 3 if gated else 2  # dy, pre (gate) and up
    return ((stages - 1) * a_tiles * block_m * block_n + stages * w_tiles * block_n * block_k) * size + 4096


def _prune(kind):
    """An ``early_config_prune`` for the kernel ``kind``: drops configs that cannot fit."""

    def prune(configs, named_args, **kwargs):
        arguments = {**named_args, **kwargs}
        gated = bool(arguments.get("GATED", False))
        size = (arguments["X"] if kind == "fwd" else arguments["DY"]).element_size()
        m_bucket = int(arguments.get("M_BUCKET", 1 << 20))
        kept = []
        for config in configs:
            block_m, block_n, block_k = (config.kwargs[name] for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
            accumulators = block_m * (block_k if kind == "dx" else block_n) * (2 if gated and kind == "fwd" else 1)
            if (_shared_bytes(kind, gated, block_m, block_n, block_k, config.num_stages, size) > SHARED_MEMORY_BYTES
                    or accumulators > MAX_ACCUMULATORS_PER_THREAD * 32 * config.num_warps
                    or (m_bucket <= 64 and block_m > 64) or (m_bucket >= LARGE_M and block_m < 128)):
                continue
            kept.append(config)
        return kept or [FALLBACK_CONFIGS[kind]]

    return prune


def _tuned(kernel, configs, kind, key, restore=None):
    return triton.autotune(configs=configs, key=key, prune_configs_by={"early_config_prune": _prune(kind)},
                           restore_value=restore)(kernel)


_fwd_tuned = _tuned(_linear_act_fwd_kernel, FWD_CONFIGS, "fwd",
                    ["M_BUCKET", "N", "K", "GATED", "STORE_PRE", "USE_TMA"])
_dx_tuned = _tuned(_linear_act_dx_kernel, DX_CONFIGS, "dx", ["M_BUCKET", "N", "K", "GATED"])
# NOTE: the d_pre kernel writes over PRE: the autotuner restores it after each trial.
_dpre_tuned = _tuned(_mlp_dpre_kernel, DPRE_CONFIGS, "dpre", ["M_BUCKET", "N", "D", "GATED"], restore=["PRE"])
_act_fwd = Kernel(_act_fwd_kernel)
_act_bwd = Kernel(_act_bwd_kernel)
# The autotuned GEMMs as blockfuse launches them. NOTE: in Triton's interpreter the autotuners are
# bypassed: their kernels run alone, with INTERPRETER_CONFIG (see _launch_gemm).
_INTERPRETED = interpreter_enabled()
_fwd_gemm = Kernel(_fwd_tuned.fn if _INTERPRETED else _fwd_tuned)
_dx_gemm = Kernel(_dx_tuned.fn if _INTERPRETED else _dx_tuned)
_dpre_gemm = Kernel(_dpre_tuned.fn if _INTERPRETED else _dpre_tuned)


# ----------------------------------------------------------------------------------------
# Launchers: plain Python that allocates, tiles and launches, registered as ops without autograd
# ----------------------------------------------------------------------------------------


def _m_bucket(m: int) -> int:
    """The power of two >= m (at least 1): the autotuning key of the row count. A symbolic m (while
    torch.compile traces) is bucketed by doubling, with comparisons only."""
    if m.__class__ is int:
        return next_power_of_2(m)
    bucket = 1
    while bucket < m:
        bucket *= 2
    return bucket


def _dot_constants(dtype: torch.dtype) -> dict:
    """UPCAST and INPUT_PRECISION for tiles of ``dtype`` (fp32: tf32 only where PyTorch's own
    matmuls may use it, so the kernel is as accurate as torch.mm)."""
    highest = dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest"
    return {"UPCAST": _INTERPRETED and dtype == torch.bfloat16,
            "INPUT_PRECISION": "ieee" if highest else "tf32"}


def _launch_gemm(kernel: Kernel, grid, args: tuple, constants: dict) -> None:
    """Launch an autotuned GEMM ``kernel`` on ``grid`` (a function of the config's constants); in the
    interpreter, its kernel alone with one small tile."""
    if _INTERPRETED:
        kernel(grid(INTERPRETER_CONFIG), *args, **constants, **INTERPRETER_CONFIG)
    else:
        kernel(grid, *args, **constants)


def _forward_path(path: str, rows: int, device: torch.device) -> str:
    """The forward path of ``path`` for a GEMM of ``rows`` rows (see the rule at AUTO_MIN_ROWS)."""
    if path != "auto":
        return path
    if device.type != "cuda":
        return "triton"  # Triton's interpreter: the kernels are what is under test
    if not AUTO_TRITON or torch.cuda.get_device_capability(device)[0] < 8 or rows < AUTO_MIN_ROWS:
        return "cublas"
    return "triton_tma" if AUTO_TMA else "triton"


_TMA_FAILURE: Optional[str] = None  # why the TMA path was turned off in this process, if it was


def _traced(t: Tensor) -> bool:
    """True for the fake or functional tensors of tracing (torch.compile), which have no data."""
    return (torch._C._len_torch_dispatch_stack() > 0
            or (t.__class__ is not Tensor and not isinstance(t, torch.nn.Parameter)))


def _tma_usable(x2: Tensor, weight: Tensor) -> bool:
    """TMA descriptors need sm_90+, a contiguous last dimension and 16-byte aligned bases and rows.

    NOTE: while torch.compile traces a launcher (CUDA: Inductor takes in the launches), the forward
    takes the pointer path: the alignment of the bases is known only from real data pointers, and
    device-side descriptors need Triton's global scratch allocator set up around the launch, which
    blockfuse does (:func:`_ensure_tma_allocator`) but Inductor's launch of a user kernel does not
    promise on every torch version. Eager calls, and the interpreter's custom ops, still take TMA."""
    if _TMA_FAILURE is not None or not hasattr(tl, "make_tensor_descriptor") or _traced(x2):
        return False
    if x2.device.type == "cuda" and torch.cuda.get_device_capability(x2.device)[0] < 9:
        return False
    size = x2.element_size()
    return all(t.stride(1) == 1 and (t.stride(0) * size) % 16 == 0 and t.data_ptr() % 16 == 0
               for t in (x2, weight))


def _tma_scratch(size: int, alignment: int, stream) -> Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_tma_allocator() -> None:
    """Device-side descriptors need a global scratch allocator; install one unless the caller has.

    NOTE: Triton keeps the allocator in a ContextVar, so it is checked on every launch: a backward
    runs in autograd's own thread, which does not see one set in the main thread."""
    try:
        from triton.runtime._allocation import NullAllocator, _allocator

        if not isinstance(_allocator.get(), NullAllocator):
            return
    except (ImportError, AttributeError):  # a Triton that keeps it elsewhere: install ours
        pass
    triton.set_allocator(_tma_scratch)


def _launch_forward(x2: Tensor, weight: Tensor, bias: Optional[Tensor], pre2: Optional[Tensor], y2: Tensor,
                    activation: str, use_tma: bool) -> None:
    """y2 = act(x2 @ weight.T + bias), pre2 = the pre-activation (when not None), in one kernel."""
    global _TMA_FAILURE
    name, gated = ACTIVATIONS[activation]
    m, k = x2.shape
    n = y2.shape[1]
    args = (x2, weight, bias, pre2, y2, m, n, k, x2.stride(0), x2.stride(1), weight.stride(0), weight.stride(1),
            0 if pre2 is None else pre2.stride(0), y2.stride(0), n * weight.stride(0), _m_bucket(m))

    def constants(tma: bool) -> dict:
        return {"ACTIVATION": _ACTIVATION_CODE[name], "GATED": gated, "HAS_BIAS": bias is not None,
                "STORE_PRE": pre2 is not None, "USE_TMA": tma, **_dot_constants(x2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    if use_tma and _tma_usable(x2, weight):
        if x2.is_cuda:
            _ensure_tma_allocator()
        try:
            _launch_gemm(_fwd_gemm, grid, args, constants(True))
            return
        except Exception as error:  # noqa: BLE001  (any compile failure: the pointer path still works)
            _TMA_FAILURE = f"{type(error).__name__}: {str(error).strip()[:300]}"
            warnings.warn(f"linear_act: the TMA path failed and is turned off ({_TMA_FAILURE}); "
                          f"using pointer loads", RuntimeWarning, stacklevel=2)
    _launch_gemm(_fwd_gemm, grid, args, constants(False))


def _launch_act_forward(gate2: Tensor, up2: Optional[Tensor], y2: Tensor, name: str) -> None:
    m, n = gate2.shape
    if m == 0 or n == 0:
        return
    programs, block_m, block_n, num_warps = launch_shape(m, n, gated_ops.FWD_TILE_ELEMENTS,
                                                         gated_ops.FWD_ELEMENTS_PER_WARP)
    _act_fwd((programs,), gate2, up2, y2, gate2.stride(0), 0 if up2 is None else up2.stride(0), y2.stride(0), m, n,
             ACTIVATION=_ACTIVATION_CODE[name], GATED=up2 is not None, BLOCK_M=block_m, BLOCK_N=block_n,
             num_warps=num_warps)


def _launch_act_backward(dy2: Tensor, gate2: Tensor, up2: Optional[Tensor], d_gate2: Tensor, d_up2: Optional[Tensor],
                         name: str) -> None:
    """d_gate2 (and d_up2) from dy2 and the pre-activation; the outputs may be the inputs."""
    m, n = gate2.shape
    if m == 0 or n == 0:
        return
    programs, block_m, block_n, num_warps = launch_shape(m, n, gated_ops.BWD_TILE_ELEMENTS,
                                                         gated_ops.BWD_ELEMENTS_PER_WARP)
    _act_bwd((programs,), dy2, gate2, up2, d_gate2, d_up2, dy2.stride(0), gate2.stride(0),
             0 if up2 is None else up2.stride(0), d_gate2.stride(0), 0 if d_up2 is None else d_up2.stride(0), m, n,
             ACTIVATION=_ACTIVATION_CODE[name], GATED=up2 is not None, BLOCK_M=block_m, BLOCK_N=block_n,
             num_warps=num_warps)


def _halves(pre2: Tensor, n: int, gated: bool) -> tuple[Tensor, Optional[Tensor]]:
    """(gate, up) views of a (M, 2 n) gated pre-activation; (pre, None) otherwise."""
    return (pre2[:, :n], pre2[:, n:]) if gated else (pre2, None)


def _linear_act_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str, path: str,
                        keep_pre: bool, pre_out: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
    """(y, pre): y (..., n) and, when ``keep_pre``, the pre-activation (..., rows of weight), written
    into ``pre_out`` (a contiguous (tokens, rows) tensor) when given. For the launchers below."""
    name, gated = ACTIVATIONS[activation]
    k, rows = x.shape[-1], weight.shape[0]
    n = rows // 2 if gated else rows
    x2 = x.reshape(-1, k)  # (tokens, K)
    m = x2.shape[0]
    chosen = _forward_path(path, m, x.device)
    y = x.new_empty((*x.shape[:-1], n))
    if chosen == "cublas":
        if (CUBLASLT_EPILOGUE and not keep_pre and not gated and name in _EPILOGUE_ACTIVATIONS and x.is_cuda
                and x.dtype in (torch.float16, torch.bfloat16) and min(m, k, rows) > 1):
            # NOTE: on CUDA, _addmm_activation's GELU is the tanh form (cuBLASLt's epilogue, and
            # gelu(approximate="tanh") where PyTorch falls back to a separate kernel).
            bias_or_zeros = weight.new_zeros(rows) if bias is None else bias
            y2 = torch._addmm_activation(bias_or_zeros, x2, weight.t(), use_gelu=_EPILOGUE_ACTIVATIONS[name])
            return y2.view(*x.shape[:-1], n), None
        if pre_out is None:
            pre = F.linear(x, weight, bias)  # (..., rows): bias in cuBLASLt's epilogue
        else:
            pre = linear_into(x2, weight, bias, pre_out).view(*x.shape[:-1], rows)
        gate2, up2 = _halves(pre.view(-1, rows), n, gated)
        _launch_act_forward(gate2, up2, y.view(-1, n), name)
        return y, pre if keep_pre else None
    if keep_pre:
        pre = x.new_empty((*x.shape[:-1], rows)) if pre_out is None else pre_out.view(*x.shape[:-1], rows)
    else:
        pre = None
    if m == 0 or n == 0:
        return y, pre
    _launch_forward(x2, weight, bias, None if pre is None else pre.view(-1, rows), y.view(-1, n), activation,
                    use_tma=chosen == "triton_tma")
    return y, pre


@launcher_op("linear_act_fwd")
def _linear_act_fwd(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str, path: str,
                    keep_pre: bool) -> tuple[Tensor, Tensor]:
    """linear_act's forward: (y, the pre-activation, empty unless ``keep_pre``)."""
    y, pre = _linear_act_forward(x, weight, bias, activation, path, keep_pre)
    return y, empty_if_none(pre, x)


def _launch_dx(dy2: Tensor, pre2: Tensor, weight: Tensor, dx2: Tensor, activation: str) -> None:
    name, gated = ACTIVATIONS[activation]
    m, n = dy2.shape
    k = weight.shape[1]
    args = (dy2, pre2, weight, dx2, m, n, k, dy2.stride(0), pre2.stride(0), weight.stride(0), weight.stride(1),
            dx2.stride(0), n * weight.stride(0), _m_bucket(m))
    constants = {"ACTIVATION": _ACTIVATION_CODE[name], "GATED": gated, **_dot_constants(dy2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(k, meta["BLOCK_K"]),)

    _launch_gemm(_dx_gemm, grid, args, constants)


def _launch_dpre(dy2: Tensor, fc2_weight: Tensor, pre2: Tensor, activation: str) -> None:
    """pre2 <- d_pre = (dy2 @ fc2_weight) * act'(pre2), in place."""
    name, gated = ACTIVATIONS[activation]
    m, d = dy2.shape
    n = fc2_weight.shape[1]
    args = (dy2, fc2_weight, pre2, m, n, d, dy2.stride(0), dy2.stride(1), fc2_weight.stride(0), fc2_weight.stride(1),
            pre2.stride(0), _m_bucket(m))
    constants = {"ACTIVATION": _ACTIVATION_CODE[name], "GATED": gated, **_dot_constants(dy2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    _launch_gemm(_dpre_gemm, grid, args, constants)


def _backward_path(path: str, rows: int, device: torch.device, mlp: bool) -> str:
    """The backward's path: "triton" (a Triton GEMM for dx, or for fused_mlp's hidden gradient) or "cublas"."""
    if path == "auto":
        if device.type != "cuda":
            return "triton"
        path = _forward_path(path, rows, device) if mlp else AUTO_BACKWARD
    return "cublas" if path == "cublas" else "triton"


def _private(pre: Tensor) -> Tensor:
    """The pre-activation the backward overwrites with its gradient: ``pre`` itself eagerly.

    NOTE: traced by torch.compile, a copy: Inductor cannot overwrite a saved tensor anyway (it copies it
    before an op that mutates it), and writing into a graph input's views through user kernels is the
    pattern that ran into an illegal memory access in Inductor's scatter copies (torch 2.11, the gated
    MLP's row blocks); on a copy the kernels write an intermediate the compiler owns."""
    return pre.clone() if tracing() else pre


@launcher_op("linear_act_bwd", mutates_args=("pre",))
def _linear_act_bwd(dy: Tensor, x: Tensor, pre: Tensor, weight: Tensor, activation: str, path: str, needs_dx: bool,
                    needs_weight: bool, needs_bias: bool) -> tuple[Tensor, Tensor, Tensor]:
    """linear_act's backward: (dx, d weight, d bias), each empty unless asked for. ``pre`` is
    overwritten with its gradient whenever a weight or bias gradient is asked for (or dx on the
    cuBLAS path)."""
    name, gated = ACTIVATIONS[activation]
    k, rows = x.shape[-1], weight.shape[0]
    n = rows // 2 if gated else rows
    dy2 = as_rows(dy, n).to(pre.dtype)  # (tokens, n)
    pre2 = _private(pre).view(-1, rows)  # (tokens, rows)
    m = pre2.shape[0]
    fused_dx = needs_dx and _backward_path(path, m, x.device, mlp=False) == "triton"
    dx2 = d_weight = d_bias = None
    if fused_dx:  # first: the kernel reads the pre-activation that d_pre overwrites below
        dx2 = x.new_empty((m, k))
        if m and k:
            _launch_dx(dy2, pre2, weight, dx2, activation)
    if needs_weight or needs_bias or (needs_dx and not fused_dx):
        # NOTE: d_pre overwrites the pre-activation (private to this op): no second tokens x rows
        # buffer at the step's peak. The elementwise kernel reads each element before writing it.
        gate2, up2 = _halves(pre2, n, gated)
        _launch_act_backward(dy2, gate2, up2, gate2, up2, name)
        d_pre2 = pre2
        if needs_dx and not fused_dx:
            dx2 = d_pre2.mm(weight)
        if needs_weight:
            d_weight = d_pre2.t().mm(x.reshape(-1, k))
        if needs_bias:
            d_bias = column_sum(d_pre2)
    dx = None if dx2 is None else dx2.view(x.shape)
    return empty_if_none(dx, x), empty_if_none(d_weight, weight), empty_if_none(d_bias, weight)


@launcher_op("fused_mlp_fwd")
def _fused_mlp_fwd(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
                   fc2_bias: Optional[Tensor], activation: str, path: str, keep_pre: bool) -> tuple[Tensor, Tensor]:
    """fused_mlp's forward: (out, fc1's pre-activation, empty unless ``keep_pre``). The hidden
    activation is made a block of rows at a time and lives only until fc2 has read that block
    (ops.mlp.down_projection); fc1 runs per block too, writing each block's pre-activation into its
    rows of the one kept for the backward."""
    k, rows = x.shape[-1], fc1_weight.shape[0]
    x2 = x.reshape(math.prod(x.shape[:-1]), k)
    pre2 = x.new_empty((x2.shape[0], rows)) if keep_pre else None

    def hidden_of_rows(block):
        return _linear_act_forward(x2[block], fc1_weight, fc1_bias, activation, path, keep_pre,
                                   None if pre2 is None else pre2[block])[0]

    y2 = down_projection(hidden_of_rows, x2.shape[0], fc2_weight, fc2_bias, x)
    pre = x.new_empty((0,)) if pre2 is None else pre2.view(*x.shape[:-1], rows)
    return y2.view(*x.shape[:-1], fc2_weight.shape[0]), pre


@launcher_op("fused_mlp_bwd", mutates_args=("pre",))
def _fused_mlp_bwd(dy: Tensor, x: Tensor, pre: Tensor, fc1_weight: Tensor, fc2_weight: Tensor, activation: str,
                   path: str, needs_dx: bool, needs_fc1_weight: bool, needs_fc1_bias: bool, needs_fc2_weight: bool,
                   needs_fc2_bias: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """fused_mlp's backward: (dx, d fc1_weight, d fc1_bias, d fc2_weight, d fc2_bias), each empty
    unless asked for. ``pre`` is overwritten with its gradient."""
    name, gated = ACTIVATIONS[activation]
    d_out, n = fc2_weight.shape
    rows, k = fc1_weight.shape
    dy2 = as_rows(dy, d_out).to(pre.dtype)  # (tokens, d_out)
    pre2 = _private(pre).view(-1, rows)  # (tokens, rows)
    gate2, up2 = _halves(pre2, n, gated)
    m = pre2.shape[0]
    d_fc2_weight = d_fc2_bias = dx = d_fc1_weight = d_fc1_bias = None

    # NOTE: fc2's weight gradient needs the activation, which the forward did not keep: it is
    # recomputed from the pre-activation a block of hidden columns at a time (each block's columns
    # of the gradient are exact), so the step's peak holds a quarter of tokens x hidden.
    if needs_fc2_weight:
        d_fc2_weight = torch.empty_like(fc2_weight)  # (d_out, n)
        for cols in column_blocks(n, BACKWARD_BLOCKS, BACKWARD_MIN_COLUMNS):
            g2 = gate2[:, cols]
            hidden = pre2.new_empty((m, g2.shape[1]))
            _launch_act_forward(g2, None if up2 is None else up2[:, cols], hidden, name)
            torch.mm(dy2.t(), hidden, out=d_fc2_weight[:, cols])  # straight into the column block (ld = hidden)
            del hidden
    if needs_fc2_bias:
        d_fc2_bias = column_sum(dy2)
    if needs_dx or needs_fc1_weight or needs_fc1_bias:
        # pre2 <- d_pre, in place.
        if _backward_path(path, m, x.device, mlp=True) == "triton":
            if m and n:
                _launch_dpre(dy2, fc2_weight, pre2, activation)
        else:
            for block in column_blocks(m, BACKWARD_BLOCKS, BACKWARD_MIN_ROWS, align=1):
                d_hidden = dy2[block].mm(fc2_weight)  # (block rows, n)
                up_block = None if up2 is None else up2[block]
                _launch_act_backward(d_hidden, gate2[block], up_block, gate2[block], up_block, name)
                del d_hidden
        if needs_dx:
            dx = pre2.mm(fc1_weight).view(x.shape)
        if needs_fc1_weight:
            d_fc1_weight = pre2.t().mm(x.reshape(-1, k))
        if needs_fc1_bias:
            d_fc1_bias = column_sum(pre2)
    return (empty_if_none(dx, x), empty_if_none(d_fc1_weight, x), empty_if_none(d_fc1_bias, x),
            empty_if_none(d_fc2_weight, x), empty_if_none(d_fc2_bias, x))


# ----------------------------------------------------------------------------------------
# Autograd: one Function per op, eager and under torch.compile
# ----------------------------------------------------------------------------------------
#
# NOTE: the backward launchers overwrite the pre-activation with its gradient (it is private to the
# op: saved by the forward, read by nothing else); they declare it mutated, so under torch.compile
# the compiler orders them after every other reader. The Functions bump its version, so a second
# backward through the same graph (retain_graph=True) raises instead of reading the overwritten values.


class _LinearActFunction(torch.autograd.Function):
    """``config``: (activation, path)."""

    @staticmethod
    def forward(ctx, x, weight, bias, config):
        activation, path = config
        y, pre = _linear_act_fwd(x, weight, bias, activation, path, True)
        ctx.save_for_backward(x, pre, weight)  # x and the pre-activation: the activation is recomputed
        ctx.config = config
        return y

    @staticmethod
    def backward(ctx, dy):
        x, pre, weight = ctx.saved_tensors
        activation, path = ctx.config
        needs_dx, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        dx, d_weight, d_bias = _linear_act_bwd(dy, x, pre, weight, activation, path, needs_dx, needs_weight,
                                               needs_bias)
        torch.autograd.graph.increment_version(pre)
        return dx if needs_dx else None, d_weight if needs_weight else None, d_bias if needs_bias else None, None


class _FusedMLPFunction(torch.autograd.Function):
    """``config``: (activation, path)."""

    @staticmethod
    def forward(ctx, x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, config):
        activation, path = config
        out, pre = _fused_mlp_fwd(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, path, True)
        ctx.save_for_backward(x, pre, fc1_weight, fc2_weight)  # not the activation (fc2's input)
        ctx.config = config
        return out

    @staticmethod
    def backward(ctx, dy):
        x, pre, fc1_weight, fc2_weight = ctx.saved_tensors
        activation, path = ctx.config
        needs = ctx.needs_input_grad[:5]
        grads = _fused_mlp_bwd(dy, x, pre, fc1_weight, fc2_weight, activation, path, *needs)
        torch.autograd.graph.increment_version(pre)
        return (*(g if need else None for g, need in zip(grads, needs)), None)


# ----------------------------------------------------------------------------------------
# Public functionals
# ----------------------------------------------------------------------------------------


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def _check_path(path: Optional[str]) -> str:
    path = PATH if path is None else path
    if path not in PATHS:
        raise ValueError(f"path: expected one of {list(PATHS)} or None, got {path!r}")
    return path


def _check_linear(in_features: int, x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str],
                  weight_name: str, bias_name: str, input_name: str = "x") -> int:
    """Checks one weight and its bias against an input of ``in_features`` features (and the
    activation, if given); dtype and device must be x's. Returns the output width."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {list(ACTIVATIONS)}, got {activation!r}")
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        raise ValueError(f"{weight_name}: expected a 2-D tensor (out_features, in_features), got {_shape(weight)}")
    check_like(weight_name, weight, x, "x", shape=False)
    if weight.shape[1] != in_features:
        raise ValueError(f"{weight_name}: expected (out_features, {in_features}) for the {in_features} features "
                         f"of {input_name}, got {tuple(weight.shape)}")
    rows = weight.shape[0]
    gated = activation is not None and ACTIVATIONS[activation][1]
    if gated and rows % 2:
        raise ValueError(f"{weight_name}: the gated activation {activation!r} needs 2 * hidden rows (the gate rows "
                         f"then the up rows), got {rows}")
    if bias is not None:
        if not isinstance(bias, Tensor) or tuple(bias.shape) != (rows,):
            raise ValueError(f"{bias_name}: expected shape ({rows},) for {weight_name}'s {rows} rows, "
                             f"got {_shape(bias)}")
        check_like(bias_name, bias, x, "x", shape=False)
    return rows // 2 if gated else rows


def _check_input(x) -> None:
    if not isinstance(x, Tensor) or x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"x: expected a float16, bfloat16, float32 or float64 tensor, got "
                        f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x: expected at least one dimension (the features), got a scalar")


def _wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear_act(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *,
               path: Optional[str] = None) -> Tensor:
    """``act(x @ weight.T + bias)`` with the activation in the GEMM's epilogue.

    x (..., K); weight (N, K), or for a gated activation (``swiglu``, ``geglu``, ``geglu_erf``)
    (2 H, K) with the gate rows first, output (..., H) ``act(gate) * up``; bias (N,) / (2 H,) or
    None. fp16, bf16 and fp32 run the kernels; fp64 and CPU tensors without ``TRITON_INTERPRET=1``
    take :func:`linear_act_ref`. ``path``: ``"auto"``, ``"triton"``, ``"triton_tma"`` or
    ``"cublas"`` (default: the module's ``PATH``; see the module notes). The backward keeps x and
    the pre-activation, not the activation.
    """
    _check_input(x)
    _check_linear(x.shape[-1], x, weight, bias, activation, "weight", "bias")
    path = _check_path(path)
    if not use_triton(x):
        return linear_act_ref(x, weight, bias, activation)
    if _wants_grad(x, weight, bias):
        return _LinearActFunction.apply(x, weight, bias, (activation, path))
    return _linear_act_fwd(x, weight, bias, activation, path, False)[0]  # no pre-activation written


def fused_mlp(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
              fc2_bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *,
              path: Optional[str] = None) -> Tensor:
    """``linear(linear_act(x, fc1_weight, fc1_bias, activation), fc2_weight, fc2_bias)``.

    fc1_weight (hidden, d) or, gated, (2 hidden, d); fc2_weight (d_out, hidden). The backward
    keeps x and fc1's pre-activation only: the activation (fc2's input) is recomputed for fc2's
    weight gradient, and the pre-activation's gradient is written over the pre-activation.
    """
    _check_input(x)
    hidden = _check_linear(x.shape[-1], x, fc1_weight, fc1_bias, activation, "fc1_weight", "fc1_bias")
    _check_linear(hidden, x, fc2_weight, fc2_bias, None, "fc2_weight", "fc2_bias", "the hidden activation")
    path = _check_path(path)
    if not use_triton(x):
        return fused_mlp_ref(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation)
    if _wants_grad(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias):
        return _FusedMLPFunction.apply(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, (activation, path))
    return _fused_mlp_fwd(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, path, False)[0]


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmarks' baseline
# ----------------------------------------------------------------------------------------


def _act_ref(z: Tensor, name: str) -> Tensor:
    if name == "relu":
        return F.relu(z)
    if name == "silu":
        return F.silu(z)
    return F.gelu(z, approximate="tanh" if name == "gelu_tanh" else "none")


def linear_act_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "gelu_tanh") -> Tensor:
    """Pure-PyTorch :func:`linear_act`: the GEMM in x's dtype, the activation on its result in fp32
    (fp64 for fp64)."""
    name, gated = ACTIVATIONS[activation]
    pre = F.linear(x, weight, bias)
    pre = pre if pre.dtype == torch.float64 else pre.float()
    if gated:
        gate, up = pre.chunk(2, dim=-1)
        return (_act_ref(gate, name) * up).to(x.dtype)
    return _act_ref(pre, name).to(x.dtype)


def fused_mlp_ref(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
                  fc2_bias: Optional[Tensor] = None, activation: str = "gelu_tanh") -> Tensor:
    """Pure-PyTorch :func:`fused_mlp`."""
    return F.linear(linear_act_ref(x, fc1_weight, fc1_bias, activation), fc2_weight, fc2_bias)
