"""Seeded dropout shared by every fused op.

The mask is never stored: a kernel draws a uniform 16-bit value ``u(seed, i)`` for the
element with flat index ``i`` in the contiguous logical tensor and keeps it when
``u >= round(p * 65536)``; the backward kernel draws the same bits again from the same seed.

``u(seed, i)``: one Philox call (Triton's, 10 rounds) at counter ``i // 8`` gives four 32-bit
values ``r0..r3``; lane ``i % 8`` takes the low half of ``r[lane % 4]`` for lanes 0-3 and the
high half for lanes 4-7. Kernels whose rows are a multiple of 8 long draw a whole tile that
way (:func:`dropout_keep_tile`, one Philox call per eight elements); :func:`dropout_keep`
draws any set of indices and gives the same bits.

NOTE: 16-bit draws resolve ``p`` to 1/65536 (p = 0.1 drops with probability 0.1000061); in
exchange one call serves eight elements. One Philox call per element (``tl.rand``) held a
dropout kernel to 0.31 of the H200's copy bandwidth, one per four to 0.77 with a bias add,
one per eight reaches 0.99 (benchmarks/NOTES.md, "Dropout").
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from blockfuse.ops.launch import cdiv

# Dropout codes, kernel constants: off; on; on for rows a multiple of 8 long (the fast draw).
OFF: tl.constexpr = tl.constexpr(0)
ANY_ROWS: tl.constexpr = tl.constexpr(1)
ROWS_OF_8: tl.constexpr = tl.constexpr(2)


def dropout_code(p: float, row_length: int) -> int:
    """The ``DROPOUT`` constant of a kernel: 0 without dropout, 2 when rows are a multiple of 8
    long (the fast tile draw), else 1."""
    if p == 0:
        return 0
    return 2 if row_length % 8 == 0 else 1


# NOTE: 2**31 - 1 keeps the seed a non-negative int32 value; Philox mixes it with the
# element index, so nothing is gained by a wider seed and nothing overflows.
_SEED_HIGH = 2**31 - 1


@triton.jit
def _threshold(p):
    """The 16-bit threshold of drop probability ``p`` (an fp32 scalar in [0, 1))."""
    return tl.cast(tl.cast(p, tl.float32) * 65536.0 + 0.5, tl.int32)


@triton.jit
def dropout_keep(seed, offsets, p):
    """True where the element with flat index ``offsets`` (int64, any shape) survives dropout
    with probability ``p``. One Philox call per element: prefer :func:`dropout_keep_tile`."""
    r0, r1, r2, r3 = tl.randint4x(seed, offsets >> 3)
    lane = offsets & 7
    quarter = lane & 3
    r = tl.where(quarter == 0, r0, tl.where(quarter == 1, r1, tl.where(quarter == 2, r2, r3)))
    u = tl.where(lane < 4, r & 0xFFFF, r >> 16).to(tl.int32)
    return u >= _threshold(p)


@triton.jit
def _halves(r):
    """(low, high) 16-bit halves of the uint32 ``r``, interleaved along the last dimension."""
    return tl.interleave((r & 0xFFFF).to(tl.int32), (r >> 16).to(tl.int32))


@triton.jit
def _group_starts(cols):
    """(BLOCK_N,) columns in aligned groups of 8 -> (BLOCK_N // 8,) the first column of each group."""
    c = cols
    for _ in tl.static_range(3):
        c, _odd = tl.split(tl.reshape(c, (c.shape[0] // 2, 2)))
    return c


@triton.jit
def dropout_keep_tile(seed, rows, cols, N, p, DROPOUT: tl.constexpr):
    """The keep-mask of the (rows, cols) tile of a row-major (M, N) tensor: bit for bit
    :func:`dropout_keep` of the tile's flat indices ``rows * N + cols``.

    ``rows``: (BLOCK_M,) int64 row indices; ``cols``: (BLOCK_N,) consecutive columns starting at
    a multiple of 8. ``DROPOUT``: a code from :func:`dropout_code`; with ``ROWS_OF_8`` one
    Philox call serves eight neighbouring elements, otherwise every element makes its own call.
    """
    if DROPOUT == ROWS_OF_8:
        groups = rows[:, None] * (N // 8) + (_group_starts(cols) // 8)[None, :]  # (BLOCK_M, BLOCK_N // 8)
        r0, r1, r2, r3 = tl.randint4x(seed, groups)
        # halves(r_j) = [lo_j, hi_j] per group; interleaving the four gives, per group,
        # lo0 lo1 lo2 lo3 hi0 hi1 hi2 hi3: lane 4h + j is half h of r_j.
        u = tl.interleave(tl.interleave(_halves(r0), _halves(r2)), tl.interleave(_halves(r1), _halves(r3)))
        return u >= _threshold(p)
    else:
        return dropout_keep(seed, rows[:, None] * N + cols[None, :], p)


@triton.jit
def dropout_tile(v, seed, rows, cols, N, p, scale, DROPOUT: tl.constexpr):
    """The (rows, cols) tile ``v`` after dropout: kept elements times ``scale``, the others 0 (the mask of
    :func:`dropout_keep_tile`); ``v`` as it is when ``DROPOUT`` is 0 (no dropout)."""
    if DROPOUT:
        keep = dropout_keep_tile(seed, rows, cols, N, p, DROPOUT)
        v = tl.where(keep, v * scale, 0.0)
    return v


@triton.jit
def _keep_mask_kernel(
    SEED,  # int64 [1]: the dropout seed
    MASK,  # bool as int8 [numel]: 1 where kept
    numel,
    p,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(SEED)
    keep = dropout_keep(seed, offsets, p)
    tl.store(MASK + offsets, keep.to(tl.int8), mask=offsets < numel)


def dropout_scale(p: float) -> float:
    """``1 / (1 - p)``: the factor kept elements are scaled by (1 without dropout)."""
    return 1.0 / (1.0 - p) if p > 0 else 1.0


def draw_seed(device: torch.device | str) -> torch.Tensor:
    """A fresh dropout seed: an int64 tensor of shape (1,) on ``device``."""
    return torch.randint(0, _SEED_HIGH, (1,), dtype=torch.int64, device=device)


def keep_mask(seed: torch.Tensor, numel: int, p: float) -> torch.Tensor:
    """The keep-mask (bool, shape ``(numel,)``) that the kernels draw for ``seed`` and ``p``.

    For tests and debugging: it runs the same Philox helper as the fused kernels.
    """
    mask = torch.empty(numel, dtype=torch.int8, device=seed.device)
    block = 1024
    _keep_mask_kernel[(cdiv(numel, block),)](seed, mask, numel, float(p), BLOCK=block)
    return mask.bool()
