"""The column sum of per-program partials (``ops/reduce.py``) at the launch settings a GPU takes, run here in Triton's
interpreter (which otherwise takes one wide tile a call), against a float64 sum of the same partials: odd counts of
rows and columns, partial row tiles and column tiles, one row."""

from __future__ import annotations

import pytest
import torch

from blockfuse.ops import reduce
from blockfuse.ops.launch import cdiv
from tests.helpers import random_tensor


@pytest.mark.parametrize("g, n", [(1, 7), (5, 100), (64, 1152), (65, 2048), (264, 6144), (300, 33), (129, 4304)])
def test_the_gpu_tile_sums_every_partial_row(g, n):
    block_n, block_g, num_warps = reduce.sum_tile(n, gpu=True)
    partial = random_tensor((2, g, n), torch.float32, seed=g + n)
    first, second = partial.new_empty(n), partial.new_empty(n, dtype=torch.bfloat16)
    if not reduce._kernel._interpreted:
        pytest.skip("needs Triton's interpreter (TRITON_INTERPRET=1) for these settings on CPU tensors")
    reduce._kernel((cdiv(n, block_n),), partial, first, second, None, None, g, n, 0, HAS_FIRST=True,
                   HAS_SECOND=True, HAS_ROLL=False, BLOCK_G=block_g, BLOCK_N=block_n, BLOCK_H=1, num_warps=num_warps)
    want = partial.double().sum(1)
    torch.testing.assert_close(first.double(), want[0], rtol=1e-5, atol=1e-5 * want[0].abs().max().item())
    torch.testing.assert_close(second.double(), want[1], rtol=8e-3, atol=8e-3 * want[1].abs().max().item())
