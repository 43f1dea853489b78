"""The fixed-order column sum of per-program partials, shared by every op that reduces a weight or
bias gradient over rows (the norms, bias-dropout-add).

NOTE: such ops keep one fp32 partial sum per program and sum the partials here in a fixed order
instead of accumulating with float atomics, so their gradients are bitwise reproducible.
"""

from __future__ import annotations

from typing import Optional

import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.launch import Kernel, cdiv, next_power_of_2


@triton.jit
def _sum_partials_kernel(
    PARTIAL,  # (P, G, N) fp32 partial sums; P = 1 (first only) or 2 (first, second)
    FIRST,  # (N,) sum over G of PARTIAL[0], or None
    SECOND,  # (N,) sum over G of PARTIAL[1], or None
    G, N,
    HAS_FIRST: tl.constexpr,
    HAS_SECOND: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
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


_kernel = Kernel(_sum_partials_kernel)


def sum_partials(partial: Tensor, first: Optional[Tensor], second: Optional[Tensor]) -> None:
    """Writes ``partial[0].sum(0)`` into ``first`` and ``partial[1].sum(0)`` into ``second`` (either
    may be None), in the dtype of each, for ``partial`` of shape (P, G, N) in fp32."""
    g, n = partial.shape[1], partial.shape[2]
    # NOTE: narrow column blocks so the reduction has enough programs to fill the GPU (wide ones in
    # Triton's interpreter, which pays for every program).
    block_n = min(next_power_of_2(n), 32 if partial.is_cuda else 1024)
    _kernel((cdiv(n, block_n),), partial, first, second, g, n,
            HAS_FIRST=first is not None, HAS_SECOND=second is not None, BLOCK_G=64, BLOCK_N=block_n, num_warps=4)
