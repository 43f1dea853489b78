"""The cached launch path must never reuse a kernel specialized for other arguments."""

from __future__ import annotations

import pytest
import torch

import blockfuse
from blockfuse.ops import launch
from tests.helpers import relative_error


def test_spec_separates_what_triton_specializes_on():
    spec = launch._spec
    assert spec(1) != spec(2)  # ints equal to 1 become constants
    assert spec(16) != spec(24)  # divisibility by 16
    assert spec(2**31) != spec(2**31 - 16)  # 32- vs 64-bit ints
    x = torch.arange(16, dtype=torch.float32)
    assert spec(x) != spec(x[1:])  # 16-byte alignment of pointers
    assert spec(x) != spec(x.half())
    assert spec(None) != spec(0)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_cached_launch_respects_alignment_and_strides(variant):
    """Run aligned inputs first (filling the cache), then misaligned views and odd strides:
    a reused aligned specialization would read the wrong elements or fault."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    base = torch.randn(64 * 1031 + 5, device="cuda", generator=gen).bfloat16()
    weight = torch.randn(1024, device="cuda", generator=gen).bfloat16()
    op = blockfuse.rms_norm if variant == "rms" else blockfuse.layer_norm
    ref = blockfuse.rms_norm_ref if variant == "rms" else blockfuse.layer_norm_ref
    views = [
        base[: 64 * 1024].view(64, 1024),  # aligned, contiguous
        base[1 : 1 + 64 * 1024].view(64, 1024),  # 2-byte offset: pointer not 16-byte aligned
        base[: 64 * 1031].view(64, 1031)[:, 3:1027],  # row stride 1031, misaligned start
        base[: 64 * 1024].view(64, 1024),  # aligned again: a cache hit
    ]
    for x in views:
        out = op(x, weight)
        expected = ref(x.double(), weight.double())
        assert relative_error(out, expected) < 1e-2

