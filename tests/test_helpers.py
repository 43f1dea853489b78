"""tests/helpers.py's patch of Triton's interpreter: fp32 -> bf16 rounded to nearest even, as a GPU rounds it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import INTERPRETER_ROUNDS_BF16


def _fp32_cases() -> torch.Tensor:
    """Random values over many binades, every kind of tie, carries out of the mantissa and the special values."""
    g = torch.Generator().manual_seed(0)
    random = torch.randn(4096, generator=g) * torch.exp2(torch.randint(-130, 120, (4096,), generator=g).float())
    bits = torch.randint(0, 1 << 16, (1024,), generator=g, dtype=torch.int32) << 16  # exactly representable
    ties = (bits | 0x8000).view(torch.float32)  # half an ulp: an even or an odd mantissa below
    carries = (torch.tensor([0x3F7FFFFF, 0x3F7F8000, 0x7F7FFFFF, 0x007FFFFF, 0x00008000], dtype=torch.int32)
               .view(torch.float32))  # a carry into the exponent, to infinity, out of the denormals
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1e-45, -1e-45, 1.0, -3.0])
    return torch.cat([random, ties, -ties, carries, -carries, special])


@pytest.mark.usefixtures("requires_triton")
def test_interpreted_bf16_conversion_is_torchs(device):
    """A kernel's ``.to(tl.bfloat16)`` and its store of fp32 into a bf16 tensor give torch's bits (round to nearest
    even), NaN stays NaN; on a GPU the same test checks the hardware's conversion."""
    import triton
    import triton.language as tl

    @triton.jit
    def convert(X, Y, Z, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offsets, mask=offsets < n)
        tl.store(Y + offsets, x.to(tl.bfloat16), mask=offsets < n)  # a cast, then a store of bf16
        tl.store(Z + offsets, x, mask=offsets < n)  # fp32 stored into a bf16 tensor

    assert INTERPRETER_ROUNDS_BF16
    x = torch.cat([_fp32_cases(), torch.tensor([float("nan"), -float("nan")])]).to(device)
    y, z = torch.empty_like(x, dtype=torch.bfloat16), torch.empty_like(x, dtype=torch.bfloat16)
    convert[(triton.cdiv(x.numel(), 256),)](x, y, z, x.numel(), BLOCK=256)
    nan = x.isnan()  # (some of the ties' bit patterns too: any quiet NaN will do, torch writes 0x7FFF / 0xFFFF)
    assert 4 <= int(nan.sum()) < 100
    expected = x[~nan].bfloat16().view(torch.int16)
    for name, got in (("cast", y), ("store", z)):
        differ = got[~nan].view(torch.int16) != expected
        assert not differ.any(), (name, int(differ.sum()), x[~nan][differ][:4].tolist())
        assert got[nan].isnan().all(), name
