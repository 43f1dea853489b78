"""A fused block with QK-norm and RoPE keeps no rotated q and k for attention's backward: they are made again there
from the QK-norms' inputs (models/saved_hooks.py, ``_RecomputedTensors``; models/fused.py, ``RECOMPUTE_ROTATED_QK``)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from blockfuse.models import build_model, convert
from blockfuse.models import fused as fused_module

TINY = {"d_model": 64, "n_heads": 4, "ffn_hidden": 96}
# (preset, overrides): QK-norm + RoPE in both placements, RMS and LayerNorm QK-norms, grouped-query heads
CASES = {
    "olmo2": ("olmo2-1b", {}),
    "olmo2-gqa": ("olmo2-1b", {"n_kv_heads": 2}),
    "olmo2-layer-norm": ("olmo2-1b", {"norm": "layer", "bias": True}),
    "pre-norm-qk": ("olmo2-1b", {"placement": "pre"}),
}


def _stack(case: str, layers: int = 2, dtype=torch.float32):
    name, overrides = CASES[case]
    eager, inputs = build_model(name, (2, 9, 64), dtype, layers=layers, seed=3, **{**TINY, **overrides})
    with torch.no_grad():  # norms off identity, so that a wrong recomputation would show
        generator = torch.Generator().manual_seed(11)
        for key, parameter in sorted(eager.state_dict(keep_vars=True).items()):
            if "norm" in key:
                parameter.add_(0.2 * torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
    return convert(eager, "fused"), inputs[0]


def _step(model, x, dy, recording=None):
    """(output, x's gradient, the parameters' gradients) of one forward + backward; ``recording``: a list that
    receives (storage pointer, bytes) of every tensor the forward's ops keep, seen from outside every other hook."""
    model.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    if recording is None:
        out = model(x)
    else:
        def pack(t):
            recording.append((t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x)
    out.backward(dy)
    return out.detach(), x.grad, [p.grad.clone() for p in model.parameters()]


def _counting_rotations(monkeypatch):
    calls = []
    original = fused_module.FusedAttention._normed_rotated

    def counted(self, *args):
        calls.append(torch.is_grad_enabled())
        return original(self, *args)

    monkeypatch.setattr(fused_module.FusedAttention, "_normed_rotated", counted)
    return calls


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("case", list(CASES))
def test_rotated_qk_recomputed_bit_for_bit(case, monkeypatch):
    """The same output and gradients, bit for bit, whether attention keeps the rotated q and k or the backward makes
    them again; made again once a layer in the backward (without gradients), never without autograd."""
    model, x = _stack(case)
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    calls = _counting_rotations(monkeypatch)
    monkeypatch.setattr(fused_module, "RECOMPUTE_ROTATED_QK", False)
    kept = _step(model, x, dy)
    assert calls == [True, True]  # the two layers' forwards
    monkeypatch.setattr(fused_module, "RECOMPUTE_ROTATED_QK", True)
    calls.clear()
    made_again = _step(model, x, dy)
    assert calls == [True, True, False, False]  # and once more a layer, in the backward, without gradients
    assert torch.equal(made_again[0], kept[0]) and torch.equal(made_again[1], kept[1])
    assert all(torch.equal(a, b) for a, b in zip(made_again[2], kept[2]))
    calls.clear()
    with torch.no_grad():
        model(x)
    assert calls == [False, False]  # nothing saved, nothing made again


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("case, kept_heads", [("olmo2", "q and k"), ("olmo2-gqa", "q")])
def test_rotated_qk_are_not_kept(case, kept_heads, monkeypatch):
    """Seen from outside the block, the forward keeps one (tokens, q_width + kv_width) tensor less a layer (q's only
    with grouped-query heads, whose rotated k attention never kept: it keeps the repeated heads)."""
    model, x = _stack(case)
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    kept_bytes = {}
    for on in (False, True):
        monkeypatch.setattr(fused_module, "RECOMPUTE_ROTATED_QK", on)
        recording = []
        _step(model, x, dy, recording)
        kept_bytes[on] = sum(size for _, size in set(recording))
    cfg = model.blocks[0].config
    tokens, itemsize = x.shape[0] * x.shape[1], x.element_size()
    width = cfg.n_heads * cfg.head_size + (cfg.kv_heads * cfg.head_size if kept_heads == "q and k" else 0)
    assert kept_bytes[False] - kept_bytes[True] == len(model.blocks) * tokens * width * itemsize


@pytest.mark.usefixtures("requires_triton")
def test_rotated_qk_hooks_leak_nothing(monkeypatch):
    """What the hooks keep dies with the graph: no reference cycle through them."""
    from blockfuse.models import saved_hooks as recompute_module

    kept = []

    class Recording(recompute_module._RecomputedTensors):
        def __init__(self, ys, recompute):
            super().__init__(ys, recompute)
            pack = self.pack_hook

            def recording(t):
                packed = pack(t)
                if isinstance(packed, recompute_module._Outer) and isinstance(packed.packed, torch.Tensor):
                    kept.append(weakref.ref(packed.packed))
                return packed

            self.pack_hook = recording

    monkeypatch.setattr(recompute_module, "_RecomputedTensors", Recording)
    model, x = _stack("olmo2")
    out = model(x.detach().clone().requires_grad_())
    assert kept and any(r() is not None for r in kept)  # the graph holds them while it lives
    del out
    gc.collect()
    assert all(r() is None for r in kept)


@pytest.mark.usefixtures("requires_triton")
def test_a_second_backward_makes_the_rotated_qk_again(monkeypatch):
    """Attention's backward run twice through one graph (retain_graph; the block's MLP does not allow it, its
    backward writes over what it kept) makes the rotated q and k again each time, with the same gradients."""
    model, x = _stack("olmo2", layers=1)
    attention = model.blocks[0].attn
    calls = _counting_rotations(monkeypatch)
    x = x.detach().clone().requires_grad_()
    out = attention.attend(x)
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    out.backward(dy, retain_graph=True)
    first = x.grad.clone()
    x.grad = None
    out.backward(dy)
    assert torch.equal(x.grad, first)
    assert calls == [True, False, False]  # the forward, then once in each backward


@pytest.mark.usefixtures("requires_triton")
def test_rotated_qk_under_activation_checkpointing(monkeypatch):
    """Inside torch.utils.checkpoint (whose own saved-tensor hooks then take every other tensor) the gradients are
    those of the plain step."""
    from torch.utils.checkpoint import checkpoint

    model, x = _stack("pre-norm-qk")
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    plain = _step(model, x, dy)
    model.zero_grad(set_to_none=True)
    xc = x.detach().clone().requires_grad_()
    out = checkpoint(model, xc, use_reentrant=False)
    out.backward(dy)
    assert torch.equal(out.detach(), plain[0]) and torch.equal(xc.grad, plain[1])
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), plain[2]))
