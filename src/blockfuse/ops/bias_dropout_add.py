"""Bias + dropout + residual add, fused: ``out = residual + dropout(x + bias)``.

The dropout is the seeded, mask-free one of the norms (``blockfuse.ops.dropout``): the kernel
keeps element ``i`` (its flat index in the contiguous logical tensor) when the Philox draw for
``(seed, i)`` is at least ``p``, so ``keep_mask(seed, x.numel(), p)`` reproduces the mask, and the
backward draws it again from the seed instead of reading a stored mask.

Gradients: ``d residual = dy`` (the incoming gradient itself, no copy), ``dx = dy * keep / (1 - p)``,
``d bias = dx`` summed over every row. Math in fp32, outputs in the input dtype. The file reads top
to bottom: kernels, launchers, custom ops, public functional, reference.
"""

from __future__ import annotations

import numbers
from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.checks import check_like
from blockfuse.ops.dropout import draw_seed, dropout_code, dropout_keep_tile, dropout_scale
from blockfuse.ops.launch import (
    Kernel, as_rows, cdiv, empty_if_none, next_power_of_2, none_if_empty, sm_count,
)
from blockfuse.ops.reduce import sum_partials
from blockfuse.runtime import use_triton

# NOTE: elementwise and memory-bound: each program moves one tile (a few KB per tensor, enough to
# hide memory latency). The forward takes 2048 elements and a warp for every 256 of them: on an
# H200 (benchmarks/bias_dropout_add_tiles.py) that moved 0.98 of the copy bandwidth at
# [16384, 4096] against 0.94 for 4096 / 1024, and was the fastest at [2048, 1024] too (5.2 against
# 5.8 us). The backward, which also sums the bias gradient's partials in registers, was fastest at
# 4096 / 1024 (0.77 of copy against 0.60-0.75). The column block is halved (down to MIN_BLOCK_N)
# while more than 1/8 of a row's lanes would be masked off, e.g. 4304 wide -> 9 blocks of 512
# rather than 2 of 4096.
FWD_TILE_ELEMENTS = 2048
FWD_ELEMENTS_PER_WARP = 256
BWD_TILE_ELEMENTS = 4096
BWD_ELEMENTS_PER_WARP = 1024
MIN_BLOCK_N = 256
# Backward programs per multiprocessor when d bias is reduced (each keeps a partial sum).
BWD_PROGRAMS_PER_SM = 4


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _bias_dropout_add_fwd_kernel(
    X,  # (M, N) the branch output x, as rows (last dimension contiguous)
    BIAS,  # (N,) bias (contiguous), or None
    RES,  # (M, N) residual
    OUT,  # (M, N) output: residual + dropout(x + bias)
    SEED,  # (1,) int64 dropout seed, or None
    stride_x, stride_res, stride_out,  # row strides
    M, N, p, scale,  # scale = 1 / (1 - p)
    HAS_BIAS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    z = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        z += tl.load(BIAS + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if HAS_DROPOUT:
        # NOTE: p and scale cast to fp32 (Inductor may pass float scalars as fp64), so the
        # comparison is the one keep_mask makes.
        keep = dropout_keep_tile(tl.load(SEED), rows, cols, N, tl.cast(p, tl.float32), HAS_DROPOUT)
        z = tl.where(keep, z * tl.cast(scale, tl.float32), 0.0)
    z += tl.load(RES + rows[:, None] * stride_res + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(OUT + rows[:, None] * stride_out + cols[None, :], z.to(OUT.dtype.element_ty), mask=mask)


@triton.jit
def _bias_dropout_add_bwd_kernel(
    DY,  # (M, N) gradient of the output (rows, last dimension contiguous)
    SEED,  # (1,) int64 dropout seed, or None
    DX,  # (M, N) gradient of x = dy * keep / (1 - p), or None (not needed, or dy itself)
    PARTIAL,  # (G, N) fp32 per-program partial sums of d bias, or None
    stride_dy, stride_dx,  # row strides
    M, N, p, scale,  # scale = 1 / (1 - p)
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    WRITE_DX: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # NOTE: with a bias, each of the G programs of a column block walks a strided set of row
    # blocks and keeps its own fp32 partial d bias; a second kernel sums the G partials in a
    # fixed order. No float atomics, so d bias is bitwise reproducible. Without a bias, G is the
    # number of row blocks and each program does one.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    p32 = tl.cast(p, tl.float32)
    scale32 = tl.cast(scale, tl.float32)
    num_blocks = tl.cdiv(M, BLOCK_M)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    # NOTE: the next row block's dy is loaded before this one is processed, so a persistent
    # program's loads overlap its stores (software pipelining by hand, as in the norm backward).
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < M)[:, None] & col_mask[None, :]
    dy_next = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0)
    for block in range(pid, num_blocks, num_programs):
        rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        mask = (rows < M)[:, None] & col_mask[None, :]
        dx = dy_next.to(tl.float32)
        if HAS_BIAS:
            next_rows = rows + num_programs * BLOCK_M
            next_mask = (next_rows < M)[:, None] & col_mask[None, :]
            dy_next = tl.load(DY + next_rows[:, None] * stride_dy + cols[None, :], mask=next_mask, other=0.0)
        if HAS_DROPOUT:
            keep = dropout_keep_tile(seed, rows, cols, N, p32, HAS_DROPOUT)
            dx = tl.where(keep, dx * scale32, 0.0)
        if WRITE_DX:
            tl.store(DX + rows[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        if HAS_BIAS:
            acc += dx
    if HAS_BIAS:
        tl.store(PARTIAL + pid.to(tl.int64) * N + cols, tl.sum(acc, axis=0), mask=col_mask)


# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_bias_dropout_add_fwd_kernel)
_bwd_kernel = Kernel(_bias_dropout_add_bwd_kernel)


def _tile(n: int, tile_elements: int, elements_per_warp: int) -> tuple[int, int, int]:
    """Block shape and warps: (BLOCK_M, BLOCK_N, num_warps)."""
    block_n = min(next_power_of_2(n), tile_elements)
    while block_n > MIN_BLOCK_N and cdiv(n, block_n) * block_n - n > n // 8:
        block_n //= 2
    block_m = max(1, tile_elements // block_n)
    num_warps = min(16, max(1, (block_m * block_n) // elements_per_warp))
    return block_m, block_n, num_warps



def _forward(x: Tensor, bias: Optional[Tensor], residual: Tensor, seed: Optional[Tensor], p: float) -> Tensor:
    """``residual + dropout(x + bias)`` in x's dtype, contiguous."""
    n = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x2, res2, out2 = as_rows(x, n), as_rows(residual, n), out.view(-1, n)  # (M, N)
    m = x2.shape[0]
    has_dropout = p > 0
    block_m, block_n, num_warps = _tile(n, FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP)
    _fwd_kernel(
        (cdiv(m, block_m), cdiv(n, block_n)),
        x2, None if bias is None else bias.contiguous(), res2, out2, seed if has_dropout else None,
        x2.stride(0), res2.stride(0), out2.stride(0),
        m, n, p, dropout_scale(p),
        HAS_BIAS=bias is not None, HAS_DROPOUT=dropout_code(p, n),
        BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return out


def _backward_programs(dy: Tensor, row_blocks: int, col_blocks: int) -> int:
    if dy.is_cuda:
        return max(1, min(row_blocks, sm_count(dy.device) * BWD_PROGRAMS_PER_SM // col_blocks))
    return min(row_blocks, 4)  # the interpreter: a few programs, so that partials are summed


def _backward(
    dy: Tensor, seed: Optional[Tensor], p: float, bias_dtype: Optional[torch.dtype], need_dx: bool
) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """Returns (dx, d bias). dx is None unless it is asked for and differs from dy (p > 0); d bias
    (in ``bias_dtype``) is None when ``bias_dtype`` is None."""
    n = dy.shape[-1]
    has_dropout = p > 0
    write_dx = need_dx and has_dropout
    has_bias = bias_dtype is not None
    dx = torch.empty(dy.shape, dtype=dy.dtype, device=dy.device) if write_dx else None
    dbias = torch.empty((n,), dtype=bias_dtype, device=dy.device) if has_bias else None
    if not (write_dx or has_bias):
        return dx, dbias
    if dy.numel() == 0:
        return dx, None if dbias is None else dbias.zero_()
    dy2 = as_rows(dy, n)  # (M, N)
    m = dy2.shape[0]
    dx2 = None if dx is None else dx.view(-1, n)
    block_m, block_n, num_warps = _tile(n, BWD_TILE_ELEMENTS, BWD_ELEMENTS_PER_WARP)
    row_blocks, col_blocks = cdiv(m, block_m), cdiv(n, block_n)
    g = _backward_programs(dy, row_blocks, col_blocks) if has_bias else row_blocks
    partial = torch.empty((g, n), dtype=torch.float32, device=dy.device) if has_bias else None
    _bwd_kernel(
        (g, col_blocks),
        dy2, seed if has_dropout else None, dx2, partial,
        dy2.stride(0), 0 if dx2 is None else dx2.stride(0),
        m, n, p, dropout_scale(p),
        HAS_DROPOUT=dropout_code(p, n), WRITE_DX=write_dx, HAS_BIAS=has_bias,
        BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=num_warps,
    )
    if has_bias:
        sum_partials(partial.view(1, g, n), dbias, None)
    return dx, dbias


def _input_grads(dy, seed, p, bias_dtype, needs_input_grad, backward):
    """(dx, d bias, d residual) for the inputs that need one; ``backward`` is :func:`_backward`
    or its custom op. The residual's gradient, and x's without dropout, is dy itself."""
    need_dx, need_dbias, need_dresidual = needs_input_grad[:3]
    dx = dbias = None
    bias_dtype = bias_dtype if need_dbias else None
    if (need_dx and p > 0) or bias_dtype is not None:
        dx, dbias = backward(dy, seed, p, bias_dtype, need_dx)
    if need_dx and p == 0:
        dx = dy
    return dx, dbias, dy if need_dresidual else None


# ----------------------------------------------------------------------------------------
# Autograd: an autograd.Function in eager mode, custom ops under torch.compile
# ----------------------------------------------------------------------------------------
#
# NOTE: both run the same launchers. Eager calls go through a plain autograd.Function (a custom
# op with autograd costs about twice its host time per call, see norm.py); under torch.compile
# the custom ops keep the kernels opaque to Dynamo (no graph break).


class _BiasDropoutAddFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias, residual, seed, p):
        out = _forward(x, bias, residual, seed, p)
        ctx.save_for_backward(seed)
        ctx.config = (p, None if bias is None else bias.dtype)
        return out

    @staticmethod
    def backward(ctx, dy):
        (seed,) = ctx.saved_tensors
        p, bias_dtype = ctx.config
        dx, dbias, dresidual = _input_grads(dy, seed, p, bias_dtype, ctx.needs_input_grad, _backward)
        return dx, dbias, dresidual, None, None




@torch.library.custom_op("blockfuse::bias_dropout_add", mutates_args=())
def _bias_dropout_add_op(
    x: Tensor, bias: Optional[Tensor], residual: Tensor, seed: Optional[Tensor], p: float
) -> Tensor:
    return _forward(x, bias, residual, seed, p)


@torch.library.custom_op("blockfuse::bias_dropout_add_backward", mutates_args=())
def _bias_dropout_add_backward_op(
    dy: Tensor, seed: Optional[Tensor], p: float, bias_dtype: Optional[torch.dtype], need_dx: bool
) -> tuple[Tensor, Tensor]:
    dx, dbias = _backward(dy, seed, p, bias_dtype, need_dx)
    return empty_if_none(dx, dy), empty_if_none(dbias, dy)


@_bias_dropout_add_op.register_fake
def _(x, bias, residual, seed, p):
    return x.new_empty(x.shape)


@_bias_dropout_add_backward_op.register_fake
def _(dy, seed, p, bias_dtype, need_dx):
    dx = dy.new_empty(dy.shape if (need_dx and p > 0) else (0,))
    dbias = dy.new_empty((dy.shape[-1],) if bias_dtype is not None else (0,), dtype=bias_dtype or dy.dtype)
    return dx, dbias


def _backward_through_op(dy, seed, p, bias_dtype, need_dx):
    dx, dbias = _bias_dropout_add_backward_op(dy, seed, p, bias_dtype, need_dx)
    return none_if_empty(dx), none_if_empty(dbias)


def _setup_context(ctx, inputs, output):
    _x, bias, _residual, seed, p = inputs
    ctx.save_for_backward(seed)
    ctx.config = (p, None if bias is None else bias.dtype)


def _op_backward(ctx, dy):
    (seed,) = ctx.saved_tensors
    p, bias_dtype = ctx.config
    dx, dbias, dresidual = _input_grads(dy, seed, p, bias_dtype, ctx.needs_input_grad, _backward_through_op)
    return dx, dbias, dresidual, None, None


_bias_dropout_add_op.register_autograd(_op_backward, setup_context=_setup_context)


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_bias_dropout_add_args(x, bias, residual, p, training):
    if not isinstance(x, Tensor):
        raise TypeError(f"x: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES and x.dtype != torch.float64:
        raise TypeError(f"x: expected a float32, float16 or bfloat16 tensor (float64 runs the "
                        f"reference), got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x: expected at least one dimension (the hidden one), got a scalar")
    check_like("residual", residual, x, "x")
    if bias is not None:
        if not isinstance(bias, Tensor) or not bias.is_floating_point():
            raise TypeError(f"bias: expected a floating-point tensor or None, got "
                            f"{bias.dtype if isinstance(bias, Tensor) else type(bias).__name__}")
        n = x.shape[-1]
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias: expected shape ({n},) to match the last dimension of x, got {tuple(bias.shape)}")
        if bias.device != x.device:
            raise ValueError(f"bias: expected a tensor on {x.device} like x, got {bias.device}")
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p < 1.0:
        raise ValueError(f"p: expected a dropout probability in [0, 1), got {p!r}")
    if not isinstance(training, bool):
        raise TypeError(f"training: expected a bool, got {type(training).__name__}")


def bias_dropout_add(
    x: Tensor, bias: Optional[Tensor], residual: Tensor, p: float, training: bool = True
) -> Tensor:
    """``residual + dropout(x + bias, p)``, fused, with the seeded dropout of the norms.

    ``x`` and ``residual``: same shape (any leading dimensions), dtype and device; ``bias``: shape
    ``(hidden,)`` (x's last dimension) or None. No dropout (and no seed drawn) when ``p == 0`` or
    ``training=False``. The mask is never stored: the backward draws it again from the seed.
    """
    _check_bias_dropout_add_args(x, bias, residual, p, training)
    if not use_triton(x) or x.dtype == torch.float64:
        return bias_dropout_add_ref(x, bias, residual, p, training)
    p = float(p) if training else 0.0
    seed = draw_seed(x.device) if p > 0 else None
    if torch.compiler.is_compiling():
        return _bias_dropout_add_op(x, bias, residual, seed, p)
    return _BiasDropoutAddFunction.apply(x, bias, residual, seed, p)


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def bias_dropout_add_ref(
    x: Tensor,
    bias: Optional[Tensor],
    residual: Tensor,
    p: float,
    training: bool = True,
    dropout_mask: Optional[Tensor] = None,
) -> Tensor:
    """Pure-PyTorch :func:`bias_dropout_add`: fp32 math (fp64 for fp64 inputs), output in x's dtype.

    ``dropout_mask`` (bool, True = keep; x's shape, or flat as ``keep_mask`` returns it) replaces
    the random mask, which is otherwise ``torch.rand_like(x + bias) >= p``.
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    z = x.to(compute)
    if bias is not None:
        z = z + bias.to(compute)
    if training and p > 0:
        keep = dropout_mask.reshape(z.shape) if dropout_mask is not None else torch.rand_like(z) >= p
        z = torch.where(keep, z * (1.0 / (1.0 - p)), torch.zeros_like(z))
    return (residual.to(compute) + z).to(x.dtype)
