"""The fixed-order column sum of per-program partials, shared by every op that reduces a weight or
bias gradient over rows (the norms, bias-dropout-add, the FP8 casts of a gradient), and where the cast was a
delayed-scaling one, its history's roll in the same launch.

NOTE: such ops keep one fp32 partial sum per program and sum the partials here in a fixed order
instead of accumulating with float atomics, so their gradients are bitwise reproducible.
"""

from __future__ import annotations

from typing import Optional

import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.fp8_history import roll_program
from blockfuse.ops.launch import Kernel, cdiv, next_power_of_2


@triton.jit
def _sum_columns(PARTIAL, FIRST, SECOND, G, N, HAS_FIRST: tl.constexpr, HAS_SECOND: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc_first = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    acc_second = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        mask = (g < G)[:, None] & col_mask[None, :]
        if HAS_FIRST:
            acc_first += tl.load(PARTIAL + g[:, None] * N + cols[None, :], mask=mask, other=0.0)
        if HAS_SECOND:
            acc_second += tl.load(PARTIAL + (G + g)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    if HAS_FIRST:
        tl.store(FIRST + cols, tl.sum(acc_first, axis=0).to(FIRST.dtype.element_ty), mask=col_mask)
    if HAS_SECOND:
        tl.store(SECOND + cols, tl.sum(acc_second, axis=0).to(SECOND.dtype.element_ty), mask=col_mask)


@triton.jit
def _sum_partials_kernel(
    PARTIAL,  # (P, G, N) fp32 partial sums; P = 1 (first only) or 2 (first, second)
    FIRST,  # (N,) sum over G of PARTIAL[0], or None
    SECOND,  # (N,) sum over G of PARTIAL[1], or None
    HISTORY,  # (history_len,) fp32 amax history rolled by the last program (HAS_ROLL), or None
    AMAX,  # (1,) fp32 its recorded amax, zeroed there
    G, N, history_len,
    HAS_FIRST: tl.constexpr,
    HAS_SECOND: tl.constexpr,
    HAS_ROLL: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    # One program a BLOCK_N columns; with HAS_ROLL one more, last, rolls the history (ops/fp8_history.py).
    if HAS_ROLL:
        if tl.program_id(0) == tl.num_programs(0) - 1:
            roll_program(HISTORY, AMAX, history_len, BLOCK_H)
        else:
            _sum_columns(PARTIAL, FIRST, SECOND, G, N, HAS_FIRST, HAS_SECOND, BLOCK_G, BLOCK_N)
    else:
        _sum_columns(PARTIAL, FIRST, SECOND, G, N, HAS_FIRST, HAS_SECOND, BLOCK_G, BLOCK_N)


_kernel = Kernel(_sum_partials_kernel)


def sum_partials(partial: Tensor, first: Optional[Tensor], second: Optional[Tensor],
                 roll: Optional[tuple[Tensor, Tensor]] = None) -> None:
    """Writes ``partial[0].sum(0)`` into ``first`` and ``partial[1].sum(0)`` into ``second`` (either
    may be None), in the dtype of each, for ``partial`` of shape (P, G, N) in fp32. ``roll``: a delayed-scaling
    ``(history, amax)`` whose cast wrote the partials, rolled by one more program of the same launch
    (:func:`blockfuse.ops.fp8.roll_amax_history`'s effect, without a launch of its own)."""
    g, n = partial.shape[1], partial.shape[2]
    block_n, block_g, num_warps = sum_tile(n, partial.is_cuda)
    history, amax = (None, None) if roll is None else roll
    h = 0 if history is None else int(history.shape[0])
    _kernel((cdiv(n, block_n) + (roll is not None),), partial, first, second, history, amax, g, n, h,
            HAS_FIRST=first is not None, HAS_SECOND=second is not None, HAS_ROLL=roll is not None, BLOCK_G=block_g,
            BLOCK_N=block_n, BLOCK_H=next_power_of_2(h), num_warps=num_warps)


def sum_tile(n: int, gpu: bool) -> tuple[int, int, int]:
    """``(BLOCK_N, BLOCK_G, num_warps)`` of the sum of partials of ``n`` columns: on a GPU, 16 columns a program (64
    bytes of each partial row) looping over the partial rows 64 at a time on 4 warps; in Triton's interpreter, which
    pays for every program, one wide program a 1024 columns.

    NOTE: on a GPU the sum is latency, not bandwidth: a few MB, in L2 behind the op that wrote them, 2-4 us a
    launch. Measured (H200, ``benchmarks/sum_partials_tiles.py``, benchmarks/results/fp8/31-*) against 11 other
    settings at 24 cells of 64-264 partial rows x 1152-14336 columns: the fastest, or within 8% of it, at every
    cell; 0.54-1.03x (0.76x on average) the time of the 32-column tile it replaced. A tile holding every partial row
    (up to 256 rows of 8-32 columns, as many programs as multiprocessors) took 0.66-1.05x. Neither the row count nor
    the width moved the best tile, so the rule reads neither."""
    if not gpu:
        return min(next_power_of_2(n), 1024), 64, 4
    return 16, 64, 4
