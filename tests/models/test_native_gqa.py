"""Grouped-query heads handed to SDPA as they are (``enable_gqa``) in the fused block, not repeated first
(models/eager.py ``_attend(native_gqa=True)``, ``sdpa_takes_grouped_heads``; models/fused.py ``NATIVE_GQA``)."""

from __future__ import annotations

import pytest
import torch

from blockfuse.models import build_model, convert
from blockfuse.models import eager as eager_module
from blockfuse.models import fused as fused_module

TINY = {"d_model": 64, "n_heads": 4, "ffn_hidden": 96}


def _stack(kv_heads: int, dtype=torch.float32, device="cpu"):
    eager, inputs = build_model("olmo2-1b", (2, 9, 64), dtype, device, layers=2, seed=3, n_kv_heads=kv_heads, **TINY)
    return convert(eager, "fused"), inputs[0]


def _step(model, x, dy):
    model.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    saved = []

    def pack(t):
        saved.append((t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    out.backward(dy)
    return out.detach(), x.grad, [p.grad.clone() for p in model.parameters()], sum(n for _, n in set(saved))


def _both_ways(model, x, monkeypatch):
    """``(repeated, native)``: :func:`_step` with the heads repeated first, then handed to SDPA as they are."""
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(5)).to(x)
    runs = []
    for native in (False, True):
        monkeypatch.setattr(fused_module, "NATIVE_GQA", native)
        runs.append(_step(model, x, dy))
    return tuple(runs)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_heads_as_they_are_match_repeated_heads(kv_heads, monkeypatch):
    """Forced on the CPU (whose SDPA takes ``enable_gqa``): the same output and gradients as with the heads repeated,
    and the forward keeps k and v at kv_heads (less than the repeated copies it kept)."""
    monkeypatch.setattr(eager_module, "sdpa_takes_grouped_heads", lambda q, masked: not masked)
    repeated, native = _both_ways(*_stack(kv_heads), monkeypatch)
    torch.testing.assert_close(native[0], repeated[0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(native[1], repeated[1], rtol=1e-5, atol=1e-6)
    for a, b in zip(native[2], repeated[2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert native[3] < repeated[3]


def test_where_sdpa_takes_grouped_heads():
    """16-bit CUDA tensors without a mask, at head sizes flash attention takes, only: fp32, masked calls and other head
    sizes would leave SDPA its math path, and the CPU keeps the repeated heads (as the eager block does everywhere)."""
    q = torch.zeros(1, 4, 8, 16, dtype=torch.bfloat16)
    assert not eager_module.sdpa_takes_grouped_heads(q, False)

    class CudaLike:  # the rule reads is_cuda, dtype and the head size: checked on a CPU-only machine too
        is_cuda, dtype = True, torch.bfloat16

        def __init__(self, head_dim):
            self.shape = (1, 4, 8, head_dim)

    for head_dim, takes in ((64, True), (72, True), (80, True), (256, True), (100, False), (264, False)):
        assert eager_module.sdpa_takes_grouped_heads(CudaLike(head_dim), False) == takes, head_dim
    assert not eager_module.sdpa_takes_grouped_heads(CudaLike(128), True)
    if torch.cuda.is_available():
        assert eager_module.sdpa_takes_grouped_heads(q.cuda(), False)
        assert not eager_module.sdpa_takes_grouped_heads(q.cuda(), True)
        assert not eager_module.sdpa_takes_grouped_heads(q.cuda().float(), False)
        for head_dim, takes in ((64, True), (72, True), (256, True), (100, False), (512, False)):
            wide = torch.zeros(1, 4, 8, head_dim, dtype=torch.bfloat16, device="cuda")
            assert eager_module.sdpa_takes_grouped_heads(wide, False) == takes, head_dim


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_heads_on_cuda_match_repeated_heads(kv_heads, monkeypatch):
    """On a GPU, bf16: the fused kernels' own grouped-query path against the repeated heads, within bf16's rounding,
    and the saved k and v at kv_heads."""
    repeated, native = _both_ways(*_stack(kv_heads, torch.bfloat16, "cuda"), monkeypatch)
    torch.testing.assert_close(native[0], repeated[0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(native[1], repeated[1], rtol=2e-2, atol=2e-2)
    assert native[3] < repeated[3]
