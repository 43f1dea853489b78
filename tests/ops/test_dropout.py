"""Tests of the shared dropout helper (``blockfuse.ops.dropout``): the tile draw and the per-element
draw give the same mask bits, the keep rate is 1 - p, and the seed decides the mask."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from blockfuse.ops.dropout import draw_seed, dropout_code, dropout_keep_tile, keep_mask


@triton.jit
def _tile_mask_kernel(
    SEED,  # (1,) int64 dropout seed
    MASK,  # (M, N) int8 output: 1 where kept
    M, N, p,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DROPOUT: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    keep = dropout_keep_tile(tl.load(SEED), rows, cols, N, p, DROPOUT)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(MASK + rows[:, None] * N + cols[None, :], keep.to(tl.int8), mask=mask)


def _tile_mask(seed, m, n, p, block_m, block_n):
    out = torch.full((m, n), -1, dtype=torch.int8, device=seed.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _tile_mask_kernel[grid](seed, out, m, n, p, BLOCK_M=block_m, BLOCK_N=block_n,
                             DROPOUT=dropout_code(p, n))
    return out


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("m, n", [(5, 16), (3, 7), (7, 104), (1, 8), (33, 12), (2, 136)])
@pytest.mark.parametrize("block_m, block_n", [(4, 8), (2, 64)])
def test_tile_draw_matches_per_element_draw(m, n, block_m, block_n, device):
    seed = draw_seed(device)
    tile = _tile_mask(seed, m, n, 0.3, block_m, block_n)
    assert (tile >= 0).all(), "some elements were not written"
    assert torch.equal(tile.bool(), keep_mask(seed, m * n, 0.3).view(m, n))


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_rate(p, device):
    keep = keep_mask(draw_seed(device), 1 << 18, p).float()
    # 4 sigma of a binomial of 2**18 draws (p is resolved to 1/65536: 1e-5, far below)
    assert abs(keep.mean().item() - (1 - p)) < 4 * (p * (1 - p) / keep.numel()) ** 0.5
    # eight neighbours share one Philox call: each of the eight lanes must keep at the same rate
    lanes = keep.view(-1, 8).mean(0)
    assert (lanes - (1 - p)).abs().max().item() < 4.5 * (p * (1 - p) / (keep.numel() / 8)) ** 0.5


@pytest.mark.usefixtures("requires_triton")
def test_seed_decides_the_mask(device):
    torch.manual_seed(0)
    a = keep_mask(draw_seed(device), 4096, 0.5)
    torch.manual_seed(0)
    b = keep_mask(draw_seed(device), 4096, 0.5)
    c = keep_mask(draw_seed(device), 4096, 0.5)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
