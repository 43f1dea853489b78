"""Tests of the transformer blocks (``blockfuse.models``): the eager block against its equations, the
fused block against the eager one (forward and every gradient), state dicts, stacks, compile."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from blockfuse.models import (
    PRESETS, BlockConfig, TransformerBlock, TransformerStack, build_block, build_model, convert, named_gradients,
    width_overrides,
)
from blockfuse.models.eager import _attend, apply_rotary, rotary_tables
from tests.helpers import assert_all_close_to_reference, assert_close_to_reference, relative_error

TINY = {"d_model": 64, "n_heads": 4, "ffn_hidden": 96}

# Tiny versions of every knob: (preset, overrides).
VARIANTS = {
    "reordered": ("reordered", {}),
    "standard": ("standard", {}),
    "olmo2-gqa": ("olmo2-1b", {"n_kv_heads": 2}),
    "siglip2-head18": ("siglip2", {"head_dim": 18}),
    "rms-llama-geglu-nobias": ("standard", {"norm": "rms", "rms_cast_before_weight": True, "mlp": "geglu",
                                            "bias": False}),
    "causal-padded": ("reordered", {"n_kv_heads": 1}),
}


def _variant(key, shape=(2, 7, 64), dtype=torch.float32, impl="eager", seed=0, layers=None):
    name, overrides = VARIANTS[key]
    kwargs = {**TINY, **overrides}
    if layers is None:
        module, inputs = build_block(name, shape, dtype, impl=impl, seed=seed, **kwargs)
    else:
        module, inputs = build_model(name, shape, dtype, layers=layers, impl=impl, seed=seed, **kwargs)
    if key == "causal-padded":
        mask = torch.ones(shape[:2], dtype=torch.bool)
        mask[1, shape[1] - 2:] = False
        inputs = (*inputs, mask)
    with torch.no_grad():  # move the norms off identity so their placement and parameters matter
        generator = torch.Generator().manual_seed(seed + 1)
        for name_, parameter in sorted(module.state_dict(keep_vars=True).items()):
            if "norm" in name_:
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
    return module, inputs


def _by_hand(block: TransformerBlock, x: torch.Tensor, padding_mask=None) -> torch.Tensor:
    """The block's equations written out with functional ops from its state dict (fp64)."""
    cfg = block.config
    p = {name: t.double() for name, t in block.state_dict().items() if t.is_floating_point()}
    x = x.double()
    batch, seq, d = x.shape

    def norm(name, t):
        if cfg.norm == "layer":
            return F.layer_norm(t, t.shape[-1:], p[f"{name}.weight"], p.get(f"{name}.bias"), cfg.norm_eps)
        return t * torch.rsqrt(t.square().mean(-1, keepdim=True) + cfg.norm_eps) * p[f"{name}.weight"]

    def linear(name, t):
        return F.linear(t, p[f"{name}.weight"], p.get(f"{name}.bias"))

    positions = torch.arange(seq, dtype=torch.float64)
    head = cfg.head_size
    inv_freq = cfg.rope_theta ** (-torch.arange(0, head, 2, dtype=torch.float64) / head)
    rotation = torch.polar(torch.ones(seq, head // 2, dtype=torch.float64), positions[:, None] * inv_freq)

    def rope(t):  # (batch, heads, seq, head_dim), rotate-half pairs (i, i + half) as complex numbers
        z = torch.complex(t[..., : head // 2], t[..., head // 2:]) * rotation
        return torch.cat([z.real, z.imag], dim=-1)

    def attn(t):
        q, k, v = linear("attn.q_proj", t), linear("attn.k_proj", t), linear("attn.v_proj", t)
        if cfg.qk_norm:
            q, k = norm("attn.q_norm", q), norm("attn.k_norm", k)
        q, k, v = (u.view(batch, seq, -1, head).transpose(1, 2) for u in (q, k, v))
        if cfg.rope:
            q, k = rope(q), rope(k)
        group = cfg.n_heads // cfg.kv_heads
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(head)
        allowed = torch.ones(batch, 1, seq, seq, dtype=torch.bool)
        if cfg.causal:
            allowed = allowed & torch.ones(seq, seq, dtype=torch.bool).tril()
        if padding_mask is not None:
            allowed = allowed & padding_mask[:, None, None, :]
        out = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
        return linear("attn.o_proj", out.transpose(1, 2).reshape(batch, seq, -1))

    def ffn(t):
        if cfg.mlp == "swiglu":
            return linear("ffn.down_proj", F.silu(linear("ffn.gate_proj", t)) * linear("ffn.up_proj", t))
        if cfg.mlp == "geglu":
            gated = F.gelu(linear("ffn.gate_proj", t), approximate="tanh") * linear("ffn.up_proj", t)
            return linear("ffn.down_proj", gated)
        return linear("ffn.fc2", F.gelu(linear("ffn.fc1", t), approximate="tanh"))

    if cfg.placement == "pre":
        h = x + attn(norm("attn_norm", x))
        return h + ffn(norm("ffn_norm", h))
    h = x + norm("attn_norm", attn(x))
    return h + norm("ffn_norm", ffn(h))


@pytest.mark.parametrize("key", list(VARIANTS))
def test_eager_block_matches_its_equations(key):
    block, inputs = _variant(key)
    with torch.no_grad():
        out = block(*inputs)
    expected = _by_hand(block, *inputs)
    assert out.shape == inputs[0].shape
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-4)


def _step(module, inputs, dy):
    for parameter in module.parameters():  # a module stepped twice (eager, then compiled) starts clean
        parameter.grad = None
    x = inputs[0].detach().clone().requires_grad_()
    out = module(x, *inputs[1:])
    out.backward(dy)
    original = getattr(module, "_orig_mod", module)  # a compiled module's state dict names are prefixed
    return out.detach(), {"x": x.grad, **named_gradients(original)}


@pytest.mark.parametrize("key", list(VARIANTS))
def test_fused_block_matches_eager_fp32(key):
    """Reference path (no interpreter) or Triton kernels (TRITON_INTERPRET=1): same numbers in fp32."""
    eager, inputs = _variant(key)
    fused = convert(eager, "fused")
    dy = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(3))
    out_e, grads_e = _step(eager, inputs, dy)
    out_f, grads_f = _step(fused, inputs, dy)
    assert grads_e.keys() == grads_f.keys()
    torch.testing.assert_close(out_f, out_e, rtol=2e-5, atol=2e-5)
    for name in grads_e:
        torch.testing.assert_close(grads_f[name], grads_e[name], rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("key", ["reordered", "standard", "olmo2-gqa", "siglip2-head18"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_block_error_in_low_precision(key, dtype, device):
    """Fused in a low dtype is at most about 2x as wrong as eager in that dtype, both against fp64."""
    eager, inputs = _variant(key, shape=(2, 9, 64), dtype=dtype)
    eager, inputs = eager.to(device), tuple(t.to(device) for t in inputs)
    fused = convert(eager, "fused")
    oracle = convert(eager, "eager").double()
    dy = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(3)).to(device, dtype)
    as64 = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    out64, grads64 = _step(oracle, as64, dy.double())
    out_e, grads_e = _step(eager, inputs, dy)
    out_f, grads_f = _step(fused, inputs, dy)
    assert_close_to_reference(out_f, out_e, out64, name="output", rounded_through=torch.bfloat16)
    flat = {name: torch.cat([grads[key].flatten() for key in grads64]) for name, grads in
            (("fused", grads_f), ("eager", grads_e), ("fp64", grads64))}  # one key order for all
    assert_close_to_reference(flat["fused"], flat["eager"], flat["fp64"], name="all gradients",
                              rounded_through=torch.bfloat16)


@pytest.mark.parametrize("key", ["standard", "siglip2-head18", "reordered"])
def test_fused_stack_matches_eager_stack(key):
    """A fused pre-norm stack adds each block's MLP branch inside the next block's first norm."""
    eager, inputs = _variant(key, layers=3)
    fused = convert(eager, "fused")
    dy = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(4))
    out_e, grads_e = _step(eager, inputs, dy)
    out_f, grads_f = _step(fused, inputs, dy)
    torch.testing.assert_close(out_f, out_e, rtol=5e-5, atol=5e-5)
    for name in grads_e:
        torch.testing.assert_close(grads_f[name], grads_e[name], rtol=2e-4, atol=2e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("key, layers, recomputed", [("standard", 3, 6), ("siglip2-head18", 2, 4),
                                                    ("reordered", 2, 0)])
def test_pre_norm_outputs_are_recomputed_not_kept(key, layers, recomputed, monkeypatch):
    """A fused pre-norm block keeps neither norm's output for the backward (the QKV GEMM and the MLP
    would): each is recomputed once in the backward from the norm's input, with the same gradients
    (test_fused_stack_matches_eager_stack). Reordered blocks' norms feed the residual, not a GEMM."""
    from blockfuse.models import blocks, fused as fused_module, recompute as recompute_module

    eager, inputs = _variant(key, layers=layers)
    fused = convert(eager, "fused")
    calls = []
    original = fused_module._norm
    for module in (blocks, fused_module, recompute_module):  # where _norm is looked up: blocks, QK-norm, recomputation
        monkeypatch.setattr(module, "_norm", lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs))
    x = inputs[0].detach().clone().requires_grad_()
    out = fused(x, *inputs[1:])
    forward_calls = len(calls)
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(5)))
    assert len(calls) - forward_calls == recomputed
    with torch.no_grad():
        fused(x, *inputs[1:])  # nothing saved, nothing to recompute
    assert len(calls) == 2 * forward_calls + recomputed
    assert all(len(args) == 2 for args in calls[forward_calls:forward_calls + recomputed])  # norm(s): no residual


@pytest.mark.parametrize("layers", [1, 3])
def test_reordered_attention_projection_is_recomputed_not_kept(layers, monkeypatch):
    """A fused reordered block does not keep its attention output projection (the post-norm's input)
    for the backward: the backward rebuilds it once per block from the attention output, bit for bit,
    and nothing is recomputed without autograd."""
    from blockfuse.models import recompute as recompute_module

    recomputed = []

    class Recording(recompute_module._RecomputedOutput):
        def __init__(self, y, recompute):
            def counted():
                rebuilt = recompute()
                recomputed.append((index, rebuilt))
                return rebuilt

            index = len(kept)
            kept.append(y.detach().clone())
            super().__init__(y, counted)

    kept = []
    monkeypatch.setattr(recompute_module, "_RecomputedOutput", Recording)
    eager, inputs = _variant("reordered", layers=layers)
    fused = convert(eager, "fused")
    x = inputs[0].detach().clone().requires_grad_()
    out = fused(x, *inputs[1:])
    assert len(kept) == layers and not recomputed
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(5)))
    assert len(recomputed) == layers
    assert sorted(index for index, _ in recomputed) == list(range(layers))
    for index, rebuilt in recomputed:
        torch.testing.assert_close(rebuilt, kept[index], rtol=0, atol=0)
    with torch.no_grad():
        fused(x, *inputs[1:])
    assert len(kept) == layers  # no hook without autograd


@pytest.mark.parametrize("key", ["standard", "siglip2-head18"])
def test_recomputed_norm_outputs_leak_nothing(key, monkeypatch):
    """The saved-tensor hooks make no reference cycle: what they keep dies with the forward's graph.
    (They once returned the tensors they left alone as they were; attention saves its own output,
    and node -> hook's tensor -> grad_fn -> node leaked every training forward's graph.)"""
    import gc
    import weakref

    from blockfuse.models import recompute as recompute_module

    kept = []

    class Recording(recompute_module._RecomputedOutput):
        def __init__(self, y, recompute):
            super().__init__(y, recompute)
            pack = self.pack_hook

            def recording(t):
                packed = pack(t)
                if isinstance(packed, torch.Tensor):
                    kept.append(weakref.ref(packed))
                return packed

            self.pack_hook = recording

    monkeypatch.setattr(recompute_module, "_RecomputedOutput", Recording)
    eager, inputs = _variant(key, layers=2)
    fused = convert(eager, "fused")
    x = inputs[0].detach().clone().requires_grad_()
    out = fused(x, *inputs[1:])
    assert kept and any(r() is not None for r in kept)  # the graph holds them while it lives
    del out
    gc.collect()
    assert all(r() is None for r in kept)


@pytest.mark.parametrize("key", ["siglip2-head18", "standard"])
def test_fused_stack_frees_each_branch_once_added(key, monkeypatch):
    """In a fused pre-norm stack's training forward, when a block's MLP runs, the previous block's MLP
    output and this block's attention output are already freed: the norms added them into the
    residual stream, which is what they keep. (The loop and the block's frame once held both
    through the MLP, where the stack's forward peaks: 288 MiB of the siglip2 encoder's peak.)"""
    import weakref

    from blockfuse.models.fused import FusedAttention, FusedFeedForward

    outputs, alive_at_mlp = [], []
    attention_forward, ffn_forward = FusedAttention.forward, FusedFeedForward.forward

    def recording_attention(self, *args, **kwargs):
        out = attention_forward(self, *args, **kwargs)
        outputs.append(("attention", weakref.ref(out)))
        return out

    def recording_ffn(self, *args, **kwargs):
        alive_at_mlp.append([kind for kind, ref in outputs if ref() is not None])
        out = ffn_forward(self, *args, **kwargs)
        outputs.append(("mlp", weakref.ref(out)))
        return out

    monkeypatch.setattr(FusedAttention, "forward", recording_attention)
    monkeypatch.setattr(FusedFeedForward, "forward", recording_ffn)
    eager, inputs = _variant(key, layers=3)
    fused = convert(eager, "fused")
    x = inputs[0].detach().clone().requires_grad_()
    out = fused(x, *inputs[1:])
    assert len(alive_at_mlp) == 3
    assert alive_at_mlp == [[], [], []], alive_at_mlp
    out.sum().backward()


def test_padding_mask_hides_padded_keys():
    block, (x, mask) = _variant("causal-padded")
    fused = convert(block, "fused")
    changed = x.clone()
    changed[1, -2:] += 5.0  # the padded tokens of sequence 1
    for module in (block, fused):
        with torch.no_grad():
            a, b = module(x, mask), module(changed, mask)
        torch.testing.assert_close(a[:, :-2], b[:, :-2])  # valid tokens never see padded keys
        assert not torch.allclose(a[1, -2:], b[1, -2:])


# Materialized attention (config.attention="eager", transformers' eager attention) against SDPA:
# causal, causal + GQA, a SigLIP-style encoder (key-padding mask), causal + padding with one kv head.
@pytest.mark.parametrize("key", ["reordered", "olmo2-gqa", "siglip2-head18", "causal-padded"])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
def test_materialized_attention_matches_sdpa(key, dtype, tolerance):
    sdpa, inputs = _variant(key, shape=(3, 9, 64), dtype=dtype, layers=2)
    materialized = convert(sdpa, "eager", attention="eager")
    assert all(block.attn.config.attention == "eager" for block in materialized.blocks)
    dy = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(3), dtype=dtype)
    out_s, grads_s = _step(sdpa, inputs, dy)
    out_m, grads_m = _step(materialized, inputs, dy)
    assert grads_s.keys() == grads_m.keys()
    torch.testing.assert_close(out_m, out_s, rtol=tolerance, atol=tolerance)
    for name in grads_s:
        torch.testing.assert_close(grads_m[name], grads_s[name], rtol=5 * tolerance, atol=5 * tolerance,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_materialized_attention_rows_with_no_key_are_zero_as_in_sdpa(dtype):
    """Left padding under a causal mask leaves rows with no key to attend, and sequence 2 has no valid
    token at all: SDPA returns zero there, and so does the materialized attention, with every gradient
    finite (a -inf mask would make them NaN) and as close to the fp64 result as SDPA's. Scores reach
    -100 and below, where an added fp16 minimum is -inf; the mask is written instead."""
    generator = torch.Generator().manual_seed(0)
    q = 8 * torch.randn(3, 4, 6, 8, generator=generator, dtype=torch.float64)  # (batch, heads, seq, head_dim)
    k = 8 * torch.randn(3, 2, 6, 8, generator=generator, dtype=torch.float64)  # two kv heads (GQA)
    v = torch.randn(3, 2, 6, 8, generator=generator, dtype=torch.float64)
    dy = torch.randn(3, 4, 6, 8, generator=generator, dtype=torch.float64)
    padding_mask = torch.ones(3, 6, dtype=torch.bool)
    padding_mask[1, :2] = False
    padding_mask[2] = False

    def run(attention, dtype):
        leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        out = _attend(*leaves, padding_mask, True, attention)
        return [out.detach(), *torch.autograd.grad(out, leaves, dy.to(dtype))]

    oracle, sdpa, eager = run("sdpa", torch.float64), run("sdpa", dtype), run("eager", dtype)
    # NOTE: in bf16 / fp16 the materialized scores and probabilities are rounded to the input dtype,
    # as transformers rounds them (SDPA's CPU kernel keeps them in fp32): up to 2.3x SDPA's error here.
    factor = 2.0 if dtype in (torch.float32, torch.float64) else 3.0
    assert_all_close_to_reference(eager, sdpa, oracle, ["out", "dq", "dk", "dv"], factor=factor)
    no_key = torch.zeros(3, 1, 6, 1, dtype=torch.bool)  # (batch, heads, seq, head_dim), broadcast
    no_key[1, :, :2] = no_key[2] = True
    out = eager[0]
    assert not out.masked_select(no_key).any() and out.masked_select(~no_key).any()


def test_materialized_attention_converts_to_fused_and_back():
    """The fused block runs SDPA whatever the config says; converting back restores the choice."""
    sdpa, inputs = _variant("siglip2-head18")
    materialized = convert(sdpa, "eager", attention="eager")
    fused = convert(materialized, "fused")
    assert fused.config.attention == "eager"
    with torch.no_grad():
        torch.testing.assert_close(fused(*inputs), sdpa(*inputs), rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(materialized(*inputs), sdpa(*inputs), rtol=2e-5, atol=2e-5)
    assert convert(fused, "eager").attn.config.attention == "eager"
    assert convert(materialized, "eager", attention="sdpa").attn.config.attention == "sdpa"


def test_materialized_attention_compiles_without_graph_breaks():
    module, inputs = _variant("causal-padded")
    module = convert(module, "eager", attention="eager")
    explanation = torch._dynamo.explain(module)(*inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons


def test_state_dicts_are_the_eager_layout_both_ways():
    eager, _ = _variant("olmo2-gqa")
    fused = convert(eager, "fused")
    assert fused.state_dict().keys() == eager.state_dict().keys()
    for name, tensor in eager.state_dict().items():
        assert torch.equal(fused.state_dict()[name], tensor), name
    # fused weights are the concatenation of the eager ones
    cfg = eager.config
    torch.testing.assert_close(fused.attn.qkv_proj.weight, torch.cat(
        [eager.attn.q_proj.weight, eager.attn.k_proj.weight, eager.attn.v_proj.weight]), rtol=0, atol=0)
    assert fused.attn.qkv_proj.weight.shape == (cfg.q_width + 2 * cfg.kv_width, cfg.d_model)
    # round trip, and a plain load_state_dict across impls, strict
    back = convert(fused, "eager")
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), eager.state_dict().values()))
    other = TransformerBlock(cfg, "fused")
    assert other.load_state_dict(eager.state_dict(), strict=True).missing_keys == []


def test_convert_keeps_device_dtype_and_mode():
    eager, _ = _variant("reordered", dtype=torch.bfloat16)
    eager.eval()
    fused = convert(eager, "fused")
    assert fused.impl == "fused" and not fused.training
    assert fused.attn.qkv_proj.weight.dtype == torch.bfloat16
    assert fused.attn.cos.dtype == torch.float32  # rotary tables stay fp32


def test_dropout_is_seeded_and_off_in_eval():
    eager, (x,) = _variant("standard")
    eager = TransformerBlock(replace(eager.config, dropout=0.3), "eager")
    fused = convert(eager, "fused")
    with torch.no_grad():
        fused.eval()
        eager.eval()
        torch.testing.assert_close(fused(x), eager(x), rtol=2e-5, atol=2e-5)
        fused.train()
        torch.manual_seed(7)
        first = fused(x)
        torch.manual_seed(7)
        again = fused(x)
        different = fused(x)
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    assert not torch.allclose(first, different)
    assert not torch.allclose(first, eager(x))


@pytest.mark.parametrize("impl", ["eager", "fused"])
@pytest.mark.parametrize("key", ["standard", "causal-padded", "olmo2-gqa"])
def test_compiles_without_graph_breaks(impl, key):
    module, inputs = _variant(key, impl=impl)
    explanation = torch._dynamo.explain(module)(*inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
    x = inputs[0].detach().clone().requires_grad_()
    out = compiled(x, *inputs[1:])
    torch.testing.assert_close(out, module(*inputs), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_fused_stack_compiles_with_inductor():
    module, inputs = _variant("standard", impl="fused", layers=2)
    compiled = torch.compile(module, fullgraph=True)
    x = inputs[0].detach().clone().requires_grad_()
    expected = module(x)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


def test_rotary_matches_transformers():
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 16)
    cos, sin = rotary_tables(16, 11, 10000.0)
    expected_q, expected_k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    torch.testing.assert_close(apply_rotary(q, cos, sin), expected_q)
    torch.testing.assert_close(apply_rotary(k, cos, sin), expected_k)


def test_long_sequence_grows_the_tables():
    for impl in ("eager", "fused"):
        block, (x,) = build_block("standard", (1, 5000, 64), torch.float32, impl=impl, **TINY)
        assert block.attn.cos.shape[0] >= 5000
    for impl in ("eager", "fused"):
        block, _ = build_block("standard", (1, 8, 64), torch.float32, impl=impl, max_seq_len=16, **TINY)
        assert block.attn.cos.shape[0] == 16
        block(torch.randn(1, 40, 64))  # a longer sequence grows the tables on the fly
        assert block.attn.cos.shape[0] >= 40


def test_build_is_seeded_and_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, (xa,) = build_block("standard", (1, 3, 64), torch.float32, seed=5, **TINY)
    after = torch.rand(1)
    b, (xb,) = build_block("standard", (1, 3, 64), torch.float32, seed=5, impl="fused", **TINY)
    assert torch.equal(before, after)
    assert torch.equal(xa, xb)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_presets_are_the_spec_workloads():
    olmo, siglip = PRESETS["olmo2-1b"].config, PRESETS["siglip2"].config
    assert (olmo.d_model, olmo.n_heads, olmo.ffn_hidden, olmo.norm, olmo.norm_eps, olmo.bias, olmo.rope_theta,
            olmo.qk_norm, olmo.placement) == (2048, 16, 8192, "rms", 1e-6, False, 500000.0, True, "reordered")
    assert (siglip.d_model, siglip.head_size, siglip.ffn_hidden, siglip.mlp, siglip.causal, siglip.rope) == (
        1152, 72, 4304, "gelu_tanh", False, False)
    assert PRESETS["siglip2"].padding_mask and PRESETS["siglip2"].layers == 4
    assert PRESETS["te-4layer"].shape == (8, 2048, 2048) and PRESETS["te-4layer"].layers == 4
    assert PRESETS["standard"].config.placement == "pre" and PRESETS["reordered"].config.placement == "reordered"
    _, (x, mask) = build_block("siglip2", (3, 10, 1152), torch.float32)
    assert mask.dtype == torch.bool and mask.shape == (3, 10) and mask[0].all()


def test_width_overrides_keep_head_size_and_ratio():
    overrides = width_overrides("olmo2-1b", 256)
    config = replace(PRESETS["olmo2-1b"].config, **overrides)
    assert config.head_size == 128 and config.n_heads == 2 and config.ffn_hidden == 1024
    assert width_overrides("reordered", 1024) == {}


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: build_block("nope"), ValueError, "name: expected one of"),
        (lambda: build_block("standard", (2, 8, 32), **TINY), ValueError, r"shape: expected \(batch, seq, 64\)"),
        (lambda: BlockConfig(d_model=60, n_heads=8), ValueError, "d_model: expected a multiple of n_heads"),
        (lambda: BlockConfig(d_model=24, n_heads=8), ValueError, "even head_dim"),
        (lambda: BlockConfig(norm="batch"), ValueError, "norm: expected"),
        (lambda: BlockConfig(placement="post"), ValueError, "placement: expected"),
        (lambda: BlockConfig(mlp="relu"), ValueError, "mlp: expected"),
        (lambda: BlockConfig(n_kv_heads=3), ValueError, "n_kv_heads: expected a positive divisor"),
        (lambda: BlockConfig(dropout=1.0), ValueError, "dropout: expected"),
        (lambda: BlockConfig(attention="flash"), ValueError, r"attention: expected one of \('sdpa', 'eager'\)"),
        (lambda: convert(TransformerBlock(BlockConfig(**TINY)), "eager", attention="math"), ValueError,
         "attention: expected one of"),
        (lambda: TransformerBlock(BlockConfig(**TINY), "triton"), ValueError, "impl: expected"),
        (lambda: TransformerStack(BlockConfig(**TINY), 0), ValueError, "layers: expected"),
        (lambda: convert(torch.nn.Linear(2, 2), "fused"), TypeError, "module: expected a TransformerBlock"),
        (lambda: TransformerBlock(BlockConfig(**TINY))(torch.randn(1, 3, 64), torch.ones(1, 3)), TypeError,
         "padding_mask: expected a bool tensor"),
        (lambda: TransformerBlock(BlockConfig(**TINY))(torch.randn(1, 3, 64), torch.ones(1, 4, dtype=torch.bool)),
         ValueError, r"padding_mask: expected shape \(batch, seq\)"),
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("name", ["reordered", "olmo2-1b", "siglip2"])
def test_fused_block_compiles_under_inductor_padding(name, device):
    """Inductor pads row strides wider than its threshold to 128 bytes (comprehensive padding: on a GPU past
    1024 elements, here on the CPU switched on at 16). A fused block compiled with Inductor over padded
    intermediates (SigLIP-2's 269-wide MLP here, 4304 at full size) gives the eager fused block's output and
    gradients: padded, the MLP's in-place backward once read garbage (ops/mlp.py, ``_gate_up_forward``)."""
    import torch._inductor.config as inductor_config

    if device != "cpu":
        pytest.skip("the GPU's threshold needs full-size widths: test_fused_block_on_cuda_is_as_accurate_as_eager")
    shape = (2, 24, 72)
    eager, inputs = build_block(name, shape, torch.float32, device, **width_overrides(name, shape[-1]))
    fused = convert(eager, "fused")
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(5))
    expected_out, expected = _step(fused, inputs, dy)
    torch._dynamo.reset()
    try:
        with inductor_config.patch(comprehensive_padding=True, disable_padding_cpu=False, padding_stride_threshold=16):
            out, grads = _step(torch.compile(fused, fullgraph=True), inputs, dy)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(out, expected_out, rtol=1e-5, atol=1e-5)
    for key, grad in expected.items():  # absolute floor: k_proj's bias gradient is zero but for rounding
        torch.testing.assert_close(grads[key], grad, rtol=1e-4, atol=1e-4 * grad.abs().max().item() + 1e-6,
                                   msg=lambda m, key=key: f"{key}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["reordered", "standard", "olmo2-1b", "siglip2"])
def test_fused_block_on_cuda_is_as_accurate_as_eager(name):
    """A quarter-width block of each preset in bf16 on the GPU: fused errors at most 1.5x eager's."""
    shape = (2, 256, PRESETS[name].config.d_model // 4)
    eager, inputs = build_block(name, shape, torch.bfloat16, "cuda", **width_overrides(name, shape[-1]))
    fused = convert(eager, "fused")
    oracle = convert(eager, "eager").float()
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    as32 = tuple(t.float() if t.is_floating_point() else t for t in inputs)
    out32, grads32 = _step(oracle, as32, dy.float())
    errors = {}
    for label, module in (("eager", eager), ("fused", fused), ("fused+compile", torch.compile(fused, fullgraph=True))):
        out, grads = _step(module, inputs, dy)
        errors[label] = (relative_error(out, out32),
                         relative_error(torch.cat([grads[key].flatten() for key in grads32]),
                                        torch.cat([g.flatten() for g in grads32.values()])))
    for label in ("fused", "fused+compile"):
        for i, what in enumerate(("output", "gradients")):
            assert errors[label][i] <= 1.5 * errors["eager"][i] + 1e-3, (label, what, errors)
