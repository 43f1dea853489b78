"""Bias + dropout + residual add, fused: ``out = residual + dropout(x + bias)``.

The dropout is the seeded, mask-free one of the norms (``blockfuse.ops.dropout``): the kernel
keeps element ``i`` (its flat index in the contiguous logical tensor) when the Philox draw for
``(seed, i)`` is at least ``p``, so ``keep_mask(seed, x.numel(), p)`` reproduces the mask, and the
backward draws it again from the seed instead of reading a stored mask.

Gradients: ``d residual = dy`` (the incoming gradient itself, no copy), ``dx = dy * keep / (1 - p)``,
``d bias = dx`` summed over every row. Math in fp32, outputs in the input dtype. The file reads top
to bottom: kernels; the two launchers (ops ``blockfuse::bias_dropout_add_fwd`` and
``blockfuse::bias_dropout_add_bwd``, see ``ops/launch.py``); the one autograd Function; the public
functional; the reference.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.checks import check_like
from blockfuse.ops.dropout import draw_seed, dropout_code, dropout_scale, dropout_tile
from blockfuse.ops.launch import (
    Kernel, as_rows, cdiv, launcher_op, next_power_of_2, row_stride, in_row_units, sm_count, vector,
)
from blockfuse.ops.reduce import sum_partials
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import use_triton


@dataclass(frozen=True)
class Tiles:
    """The launch rule's tuning: elements per program tile and per warp of each kernel (``_tile``), the narrowest
    column block, and the backward's programs per multiprocessor."""

    # NOTE: elementwise and memory-bound: each program moves one tile (a few KB per tensor, enough to
    # hide memory latency). The forward takes 2048 elements and a warp for every 256 of them: on an
    # H200 (benchmarks/NOTES.md, "Dropout") that moved 0.98 of the copy bandwidth at
    # [16384, 4096] against 0.94 for 4096 / 1024, and was the fastest at [2048, 1024] too (5.2 against
    # 5.8 us). The backward, which also sums the bias gradient's partials in registers, was fastest at
    # 4096 / 1024 (0.77 of copy against 0.60-0.75). The column block is halved (down to min_block_n)
    # while more than 1/8 of a row's lanes would be masked off, e.g. 4304 wide -> 9 blocks of 512
    # rather than 2 of 4096.
    forward: int = 2048
    forward_per_warp: int = 256
    backward: int = 4096
    backward_per_warp: int = 1024
    min_block_n: int = 256
    # Backward programs per multiprocessor when d bias is reduced (each keeps a partial sum).
    backward_programs_per_sm: int = 4


TILES = Tiles()


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
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
):
    N, stride_x, stride_res, stride_out = N * VEC, stride_x * VEC, stride_res * VEC, stride_out * VEC
    # NOTE: float scalars cast to fp32 (Inductor may pass them to a user kernel as fp64), so the
    # dropout comparison is the one keep_mask makes.
    p = tl.cast(p, tl.float32)
    scale = tl.cast(scale, tl.float32)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    z = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        z += tl.load(BIAS + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if HAS_DROPOUT:  # NOTE: SEED is None without dropout
        z = dropout_tile(z, tl.load(SEED), rows, cols, N, p, scale, HAS_DROPOUT)
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
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
):
    N, stride_dy, stride_dx = N * VEC, stride_dy * VEC, stride_dx * VEC
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
    # NOTE: float scalars cast to fp32: Inductor may pass them to a user kernel as fp64.
    p = tl.cast(p, tl.float32)
    scale = tl.cast(scale, tl.float32)
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
        dx = dropout_tile(dx, seed, rows, cols, N, p, scale, HAS_DROPOUT)
        if WRITE_DX:
            tl.store(DX + rows[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        if HAS_BIAS:
            acc += dx
    if HAS_BIAS:
        tl.store(PARTIAL + pid.to(tl.int64) * N + cols, tl.sum(acc, axis=0), mask=col_mask)


# ----------------------------------------------------------------------------------------
# Launchers (ops blockfuse::bias_dropout_add_fwd and blockfuse::bias_dropout_add_bwd, see ops/launch.py)
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_bias_dropout_add_fwd_kernel)
_bwd_kernel = Kernel(_bias_dropout_add_bwd_kernel)


@functools.lru_cache(maxsize=None)
def _tile(n: int, tile_elements: int, elements_per_warp: int, min_block_n: int) -> tuple[int, int, int]:
    """Block shape and warps: (BLOCK_M, BLOCK_N, num_warps). The launchers pass TILES' values, so the cache
    follows a table swapped in (a sweep's, a test's)."""
    block_n = min(next_power_of_2(n), tile_elements)
    while block_n > min_block_n and cdiv(n, block_n) * block_n - n > n // 8:
        block_n //= 2
    block_m = max(1, tile_elements // block_n)
    num_warps = min(16, max(1, (block_m * block_n) // elements_per_warp))
    return block_m, block_n, num_warps


def _backward_programs(dy: Tensor, row_blocks: int, col_blocks: int, tiles: Tiles) -> int:
    if dy.is_cuda:
        return max(1, min(row_blocks, sm_count(dy.device) * tiles.backward_programs_per_sm // col_blocks))
    return min(row_blocks, 4)  # the interpreter: a few programs, so that partials are summed


@launcher_op("bias_dropout_add_fwd")
def _forward(x: Tensor, bias: Optional[Tensor], residual: Tensor, seed: Optional[Tensor], p: float) -> Tensor:
    """``residual + dropout(x + bias)`` in x's dtype, contiguous. ``seed`` is read only when p > 0."""
    n = int(x.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    x2, res2, out2 = as_rows(x, n), as_rows(residual, n), out.view(-1, n)  # (M, N)
    m = x2.shape[0]
    has_dropout = p > 0
    tiles = TILES
    block_m, block_n, num_warps = _tile(n, tiles.forward, tiles.forward_per_warp, tiles.min_block_n)
    vec, n_units, strides = in_row_units(n, x2.stride(0), res2.stride(0), out2.stride(0))
    _fwd_kernel(
        (cdiv(m, block_m), cdiv(n, block_n)),
        x2, vector(bias), res2, out2, seed if has_dropout else None,
        *strides,
        m, n_units, p, dropout_scale(p),
        HAS_BIAS=bias is not None, HAS_DROPOUT=dropout_code(p, n),
        BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec,
        num_warps=num_warps,
    )
    return out


@launcher_op("bias_dropout_add_bwd")
def _backward(
    dy: Tensor, seed: Optional[Tensor], p: float, bias_dtype: Optional[torch.dtype], need_dx: bool
) -> tuple[Tensor, Tensor]:
    """Returns (dx, d bias). dx is written only when it is asked for and differs from dy (p > 0),
    else it is empty; d bias (in ``bias_dtype``) is empty when ``bias_dtype`` is None."""
    n = int(dy.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    has_dropout = p > 0
    write_dx = need_dx and has_dropout
    has_bias = bias_dtype is not None
    dx = torch.empty_like(dy, memory_format=torch.contiguous_format) if write_dx else dy.new_empty((0,))
    dbias = dy.new_empty((n,) if has_bias else (0,), dtype=bias_dtype if has_bias else dy.dtype)
    if not (write_dx or has_bias):
        return dx, dbias
    if dy.numel() == 0:
        return dx, dbias.zero_()
    dy2 = as_rows(dy, n)  # (M, N)
    m = dy2.shape[0]
    dx2 = dx.view(-1, n) if write_dx else None
    tiles = TILES
    block_m, block_n, num_warps = _tile(n, tiles.backward, tiles.backward_per_warp, tiles.min_block_n)
    row_blocks, col_blocks = cdiv(m, block_m), cdiv(n, block_n)
    g = _backward_programs(dy, row_blocks, col_blocks, tiles) if has_bias else row_blocks
    partial = torch.empty((g, n), dtype=torch.float32, device=dy.device) if has_bias else None
    vec, n_units, strides = in_row_units(n, dy2.stride(0), row_stride(dx2))
    _bwd_kernel(
        (g, col_blocks),
        dy2, seed if has_dropout else None, dx2, partial,
        *strides,
        m, n_units, p, dropout_scale(p),
        HAS_DROPOUT=dropout_code(p, n), WRITE_DX=write_dx, HAS_BIAS=has_bias,
        BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec,
        num_warps=num_warps,
    )
    if has_bias:
        sum_partials(partial.view(1, g, n), dbias, None)
    return dx, dbias


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


class _BiasDropoutAddFunction(torch.autograd.Function):
    """``residual + dropout(x + bias)``; ``p`` is the drop probability (0: no dropout, no seed)."""

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
        need_dx, need_dbias, need_dresidual = ctx.needs_input_grad[:3]
        # The residual's gradient, and x's without dropout, is dy itself (no copy, no kernel).
        write_dx = need_dx and p > 0
        bias_dtype = bias_dtype if need_dbias else None
        dx = dy if need_dx else None
        dbias = None
        if write_dx or bias_dtype is not None:
            dx_written, dbias = _backward(dy, seed, p, bias_dtype, need_dx)
            if write_dx:
                dx = dx_written
            if bias_dtype is None:
                dbias = None
        return dx, dbias, dy if need_dresidual else None, None, None


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
    if not use_triton(x, draws_random=training and p > 0):
        return bias_dropout_add_ref(x, bias, residual, p, training)
    p = float(p) if training else 0.0
    if p > 0 and is_dtensor(x):
        raise ValueError("p: dropout on a DTensor is not supported yet (each rank's shard would draw the same "
                         "mask); pass p=0 or training=False")
    seed = draw_seed(x.device) if p > 0 else None
    if torch.is_grad_enabled() and (x.requires_grad or residual.requires_grad
                                    or (bias is not None and bias.requires_grad)):
        return _BiasDropoutAddFunction.apply(x, bias, residual, seed, p)
    return _forward(x, bias, residual, seed, p)


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
