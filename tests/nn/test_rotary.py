"""Tests of the module ``blockfuse.nn.rotary.RotaryEmbedding``.

Its tables are Hugging Face's (``LlamaRotaryEmbedding``) bit for bit, its forward is the fused
functional on them, it grows its tables on a longer sequence with a shape check that
torch.compile never breaks on, and it keeps them in fp32 out of the state dict.
"""

from __future__ import annotations

import pytest
import torch

from blockfuse.nn.rotary import RotaryEmbedding, rotary_tables
from blockfuse.ops.rotary import rotary
from tests.helpers import (
    assert_all_close_to_reference, assert_compiles_like_eager, grads, leaves, make_generator, random_tensor,
)


def hf_embedding(head_dim, theta, max_positions=64, partial_rotary_factor=None):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim,
                                      max_position_embeddings=max_positions, rope_theta=theta)
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("theta", [10000.0, 5e5])
@pytest.mark.parametrize("head_dim", [72, 128])
def test_tables_equal_hugging_face(head_dim, theta):
    """The half tables equal the first half of HF's cos / sin (which are ``cat(half, half)``)."""
    module = RotaryEmbedding(head_dim, theta=theta, max_seq_len=64)
    theirs = hf_embedding(head_dim, theta)
    cos, sin = theirs(torch.ones(1, dtype=torch.float32), torch.arange(64)[None])
    assert module.cos.dtype == torch.float32 and module.cos.shape == (64, head_dim // 2)
    torch.testing.assert_close(module.cos, cos[0, :, : head_dim // 2], rtol=0, atol=2e-7)
    torch.testing.assert_close(module.sin, sin[0, :, : head_dim // 2], rtol=0, atol=2e-7)
    torch.testing.assert_close(cos[0, :, head_dim // 2:], cos[0, :, : head_dim // 2], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_module_matches_hugging_face(layout, dtype, device):
    """Module(q, k, position_ids) == HF's apply_rotary_pos_emb with LlamaRotaryEmbedding's cos /
    sin (theta 5e5, as OLMo-2), forward and backward, within 2x of HF's own error."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    batch, seq, heads, kv_heads, head_dim = 3, 7, 6, 2, 72
    theirs = hf_embedding(head_dim, 5e5).to(device)
    ours = RotaryEmbedding(head_dim, theta=5e5, max_seq_len=64, layout=layout, device=device)
    q = random_tensor((batch, heads, seq, head_dim), dtype, device, seed=1, scale=2.0)
    k = random_tensor((batch, kv_heads, seq, head_dim), dtype, device, seed=2, scale=2.0)
    position_ids = torch.randint(0, 64, (batch, seq), generator=make_generator(3)).to(device)
    cos, sin = theirs(q, position_ids)
    grad_outputs = [random_tensor(t.shape, dtype, device, seed=5 + i) for i, t in enumerate((q, k))]

    def to_layout(t):  # (b, h, s, d) -> the module's layout
        return t if layout == "bhsd" else t.transpose(1, 2)

    def run(fn, dtype_):
        lq, lk = leaves(q, k, dtype=dtype_)
        outs = fn(lq, lk)
        return [o.detach() for o in outs] + grads(outs, [lq, lk], grad_outputs)

    mine = run(lambda a, b: ours(to_layout(a), to_layout(b), position_ids, out_layout="bhsd"), dtype)
    hf = run(lambda a, b: apply_rotary_pos_emb(a, b, cos, sin), dtype)
    oracle = run(lambda a, b: apply_rotary_pos_emb(a, b, cos.double(), sin.double()), torch.float64)
    assert_all_close_to_reference(mine, hf, oracle, ["q_out", "k_out", "dq", "dk"])


def test_forward_is_the_functional_on_the_tables(device):
    """Every forward argument reaches the functional: positions, offset, layouts, partial rotary,
    interleaved, in place."""
    module = RotaryEmbedding(72, theta=100.0, max_seq_len=32, rotary_dim=40, interleaved=True, device=device)
    q = random_tensor((2, 5, 4, 72), torch.float32, device, seed=1)
    k = random_tensor((2, 5, 2, 72), torch.float32, device, seed=2)
    ids = torch.tensor([[4, 0, 0, 31, 2], [1, 2, 3, 4, 5]], device=device)
    cos, sin = module.cos, module.sin
    assert cos.shape == (32, 20)
    for kwargs in ({}, {"position_ids": ids}, {"seq_offset": 9, "out_layout": "bhsd"}):
        ours = module(q, k, **kwargs)
        expected = rotary(q, k, cos, sin, interleaved=True, rotary_dim=40, **kwargs)
        assert all(torch.equal(a, b) for a, b in zip(ours, expected)), kwargs
    bhsd = module(q.transpose(1, 2), k.transpose(1, 2), layout="bhsd")
    assert torch.equal(bhsd[0], module(q, k)[0].transpose(1, 2))
    q2, k2 = q.clone(), k.clone()
    out = module(q2, k2, seq_offset=3, inplace=True)
    assert out[0] is q2 and torch.equal(q2, module(q, k, seq_offset=3)[0])
    assert torch.equal(q2[..., 40:], q[..., 40:])


def test_tables_grow_for_longer_sequences(device):
    """A sequence beyond max_seq_len (or seq_offset + seq beyond it) grows the tables to the same
    values a module built that long has; no state-dict entries; the tables stay fp32 after the
    module is cast to bf16."""
    module = RotaryEmbedding(64, max_seq_len=8, device=device)
    assert dict(module.state_dict()) == {}
    q = random_tensor((1, 12, 2, 64), torch.float32, device, seed=1)
    out = module(q, q)
    assert module.cos.shape[0] >= 12
    long = RotaryEmbedding(64, max_seq_len=64, device=device)
    assert torch.equal(module.cos, long.cos[: module.cos.shape[0]])
    assert torch.equal(out[0], long(q, q)[0])
    length = module.cos.shape[0]
    module(q[:, :4], q[:, :4], seq_offset=length - 2)
    assert module.cos.shape[0] >= length + 2
    assert torch.equal(module(q, q, seq_offset=3)[0], long(q, q, seq_offset=3)[0])

    module.to(torch.bfloat16)
    assert module.cos.dtype == torch.bfloat16  # Module.to casts floating buffers...
    out_bf16 = module(q.bfloat16(), q.bfloat16())
    assert module.cos.dtype == torch.float32  # ...and the next call rebuilds them in fp32
    assert torch.equal(out_bf16[0], long(q.bfloat16(), q.bfloat16())[0])
    module.extend_to(200)
    assert module.cos.shape[0] >= 200 and torch.equal(module.cos[:64], long.cos)


def test_module_bad_arguments():
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(64, rotary_dim=33)
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(64, rotary_dim=96)
    with pytest.raises(ValueError, match="head_dim"):
        RotaryEmbedding(0)
    with pytest.raises(ValueError, match="theta"):
        RotaryEmbedding(64, theta=0.0)
    with pytest.raises(ValueError, match="max_seq_len"):
        RotaryEmbedding(64, max_seq_len=0)
    with pytest.raises(ValueError, match="layout"):
        RotaryEmbedding(64, layout="sbhd")
    module = RotaryEmbedding(8)
    q = random_tensor((1, 3, 2, 8), torch.float32)
    with pytest.raises(ValueError, match="head_dim"):
        module(q, q[..., :6])
    with pytest.raises(ValueError, match="layout"):
        module(q, q, layout="sbhd")


def test_rotary_tables_function():
    cos, sin = rotary_tables(5, 8, 10000.0)
    assert cos.shape == (5, 4) and cos.dtype == torch.float32
    torch.testing.assert_close(cos**2 + sin**2, torch.ones(5, 4))
    assert torch.equal(cos[0], torch.ones(4)) and torch.equal(sin[0], torch.zeros(4))


class Attention(torch.nn.Module):
    """A projection and RoPE into SDPA's layout, as a model would use the module."""

    def __init__(self, device):
        super().__init__()
        self.proj = torch.nn.Linear(16, 3 * 2 * 8, device=device)
        self.rope = RotaryEmbedding(8, max_seq_len=4, device=device)

    def forward(self, x, seq_offset: int = 0):
        qkv = self.proj(x).unflatten(-1, (3, 2, 8))
        q, k = self.rope(qkv[:, :, 0], qkv[:, :, 1], seq_offset=seq_offset, out_layout="bhsd")
        return (q @ k.transpose(-1, -2)).softmax(-1) @ qkv[:, :, 2].transpose(1, 2)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_module_compiles_fullgraph(backend, device):
    """One graph and no break for a fixed shape, the same forward and backward as eager; a longer
    sequence (the tables grow inside the compiled forward) compiles again, also without a break."""
    model = Attention(device)
    x = random_tensor((2, 6, 16), torch.float32, device, seed=1)
    model(x)  # grows the tables from 4 to 8 rows, eagerly
    # (Inductor's C++ compile of a second graph costs ~8 s on 2 CPU cores: the longer sequence on aot_eager only)
    sequences = [x] if backend == "inductor" else [x, random_tensor((2, 11, 16), torch.float32, device, seed=2)]

    def run(fn):
        results = []
        for inputs in sequences:  # compiled: the first call compiles, the longer one grows the tables inside
            model.zero_grad()
            out = fn(inputs)
            out.sum().backward()
            results += [out.detach(), model.proj.weight.grad.clone()]
        return results

    names = [f"seq {inputs.shape[1]}: {name}" for inputs in sequences for name in ("out", "dproj.weight")]
    assert_compiles_like_eager(model, run, names, backend=backend, rtol=1e-5, atol=1e-5, explain_args=(x,))
    if backend == "aot_eager":
        assert model.rope.cos.shape[0] >= 11


@pytest.mark.gpu
def test_tables_on_another_device_are_cached():
    """A module left on the CPU and called with CUDA tensors copies its tables to the GPU once."""
    module = RotaryEmbedding(64, max_seq_len=16)
    q = random_tensor((1, 8, 2, 64), torch.bfloat16, "cuda", seed=1)
    first = module(q, q)
    cached = module._other_devices[q.device]
    second = module(q, q)
    assert module._other_devices[q.device] is cached and cached[0].is_cuda
    assert torch.equal(first[0], second[0])
    expected = rotary(q, q, module.cos.cuda(), module.sin.cuda())
    assert torch.equal(first[0], expected[0])
