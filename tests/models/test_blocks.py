"""Tests of the plain-PyTorch reference blocks (``blockfuse.models.blocks``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from blockfuse.models import BlockConfig, TransformerBlock, build_block
from blockfuse.models.blocks import apply_rotary, rotary_tables

TINY = {"d_model": 64, "n_heads": 4, "ffn_hidden": 96}


def _block_by_hand(block: TransformerBlock, x: torch.Tensor) -> torch.Tensor:
    """The block's equations written out with functional ops, from its parameters (fp64)."""
    cfg = block.config
    p = {name: t.double() for name, t in block.named_parameters()}
    x = x.double()
    batch, seq, d = x.shape

    def norm(name, t):
        return F.layer_norm(t, (d,), p[f"{name}.weight"], p.get(f"{name}.bias"), cfg.norm_eps)

    def linear(name, t):
        return F.linear(t, p[f"{name}.weight"], p.get(f"{name}.bias"))

    positions = torch.arange(seq, dtype=torch.float64)
    inv_freq = cfg.rope_theta ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = positions[:, None] * inv_freq[None, :]  # (seq, head_dim / 2)
    rotation = torch.polar(torch.ones_like(angles), angles)

    def rope(t):  # (batch, heads, seq, head_dim), rotate-half convention as complex pairs (i, i + half)
        half = cfg.head_dim // 2
        z = torch.complex(t[..., :half], t[..., half:]) * rotation
        return torch.cat([z.real, z.imag], dim=-1)

    def attn(t):
        def split(u):
            return u.view(batch, seq, cfg.n_heads, cfg.head_dim).transpose(1, 2)

        q, k, v = (split(linear(f"attn.{n}_proj", t)) for n in "qkv")
        scores = rope(q) @ rope(k).transpose(-1, -2) / cfg.head_dim**0.5
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        out = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        return linear("attn.o_proj", out.transpose(1, 2).reshape(batch, seq, d))

    def ffn(t):
        return linear("ffn.down_proj", F.silu(linear("ffn.gate_proj", t)) * linear("ffn.up_proj", t))

    if block.placement == "standard":
        h = x + attn(norm("attn_norm", x))
        return h + ffn(norm("ffn_norm", h))
    h = x + norm("attn_norm", attn(x))
    return h + norm("ffn_norm", ffn(h))


@pytest.mark.parametrize("name", ["standard", "reordered"])
def test_block_matches_its_equations(name):
    block, (x,) = build_block(name, (2, 7, 64), torch.float32, **TINY)
    with torch.no_grad():
        for parameter in block.parameters():  # move LayerNorm off identity so the placement matters
            parameter.add_(0.1 * torch.randn_like(parameter))
        out = block(x)
    expected = _block_by_hand(block, x)
    assert out.shape == x.shape
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-4)


def test_placements_differ():
    standard, (x,) = build_block("standard", (1, 5, 64), torch.float32, **TINY)
    reordered, _ = build_block("reordered", (1, 5, 64), torch.float32, **TINY)
    reordered.load_state_dict(standard.state_dict())
    assert not torch.allclose(standard(x), reordered(x))


def test_rotary_tables_stay_float32_in_a_low_precision_block():
    block, (x,) = build_block("reordered", (1, 5, 64), torch.bfloat16, **TINY)
    assert block.attn.q_proj.weight.dtype == torch.bfloat16
    assert block.attn.cos.dtype == torch.float32
    cos, _ = rotary_tables(16, block.config.max_seq_len, block.config.rope_theta)
    assert torch.equal(block.attn.cos, cos)
    assert block(x).dtype == torch.bfloat16


def test_rotary_matches_transformers():
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q = torch.randn(2, 3, 11, 16)
    k = torch.randn(2, 3, 11, 16)
    cos, sin = rotary_tables(16, 11, 10000.0)
    expected_q, expected_k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    torch.testing.assert_close(apply_rotary(q, cos, sin), expected_q)
    torch.testing.assert_close(apply_rotary(k, cos, sin), expected_k)


def test_build_block_is_seeded_and_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, (xa,) = build_block("standard", (1, 3, 64), torch.float32, seed=5, **TINY)
    after = torch.rand(1)
    b, (xb,) = build_block("standard", (1, 3, 64), torch.float32, seed=5, **TINY)
    assert torch.equal(before, after)
    assert torch.equal(xa, xb)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_long_sequence_grows_the_tables():
    block, (x,) = build_block("standard", (1, 5000, 64), torch.float32, **TINY)
    assert block.attn.cos.shape[0] >= 5000


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: build_block("nope"), "name: expected one of"),
        (lambda: build_block("standard", (2, 8, 32), **TINY), r"shape: expected \(batch, seq, 64\)"),
        (lambda: BlockConfig(d_model=60, n_heads=8), "d_model: expected a multiple of n_heads"),
        (lambda: BlockConfig(d_model=24, n_heads=8), "even head_dim"),
        (lambda: BlockConfig(norm="batch"), "norm: expected"),
        (lambda: TransformerBlock(BlockConfig(**TINY), "post"), "placement: expected"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_compiles_without_graph_breaks():
    block, (x,) = build_block("reordered", (1, 9, 64), torch.float32, **TINY)
    explanation = torch._dynamo.explain(block)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), block(x))
