"""``copy_rows`` (``blockfuse/ops/copy.py``): a strided view's rows copied contiguous; and its one caller,
``rotary_copying_v`` (``blockfuse/ops/rotary.py``), which copies the fused attention's v inside the rotary op's
autograd Function."""

from __future__ import annotations

import pytest
import torch

import blockfuse
from blockfuse.ops import copy as copy_ops
from blockfuse.ops.copy import copy_rows
from blockfuse.ops.rotary import rotary_copying_v
from tests.helpers import assert_compiles_like_eager, random_tensor


def packed_qkv(batch, seq, heads, head_dim, dtype, device, seed=0):
    """(qkv, [q, k, v]): views of one packed (batch, seq, 3 * heads * head_dim) tensor, each (batch, seq, heads,
    head_dim), the way the fused attention splits its QKV GEMM's output."""
    width = heads * head_dim
    qkv = random_tensor((batch, seq, 3 * width), dtype, seed=seed).to(device).requires_grad_()
    return qkv, [part.view(batch, seq, heads, head_dim) for part in qkv.split(width, dim=-1)]


def counting_copies(monkeypatch):
    calls = []
    original = copy_ops._copy_rows
    monkeypatch.setattr(copy_ops, "_copy_rows", lambda x: calls.append(x) or original(x))
    return calls


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", [(2, 37, 3, 24), (1, 5, 1, 1000), (3, 1, 2, 8)])
def test_copies_the_packed_views_rows(shape, dtype, device, monkeypatch):
    """v of a packed QKV output (rows strided, odd sizes, a row wider than one column block, a sequence of 1):
    the same values, contiguous, through blockfuse's kernel."""
    calls = counting_copies(monkeypatch)
    _, (_, _, v) = packed_qkv(*shape, dtype, device, seed=3)
    out = copy_rows(v.detach())
    assert calls and out.is_contiguous() and out.shape == v.shape and torch.equal(out, v)


@pytest.mark.usefixtures("requires_triton")
def test_views_that_are_not_rows_of_one_stride_fall_back(device, monkeypatch):
    """A contiguous tensor is returned as it is; a transposed view (no unit last stride) and a view whose leading
    dimensions do not step by whole rows take ``Tensor.contiguous``: the same values, no kernel. Every other row
    of a tensor is rows of one stride: the kernel."""
    calls = counting_copies(monkeypatch)
    x = random_tensor((6, 8, 10), torch.float32, seed=5).to(device)
    assert copy_rows(x) is x
    for view in (x.transpose(1, 2), x.transpose(0, 1)[:, :, :4]):
        assert copy_ops._rows_of(view) is None
        out = copy_rows(view)
        assert torch.equal(out, view.contiguous()) and out.is_contiguous()
    assert not calls
    every_other = x[:, ::2, :]
    assert copy_ops._rows_of(every_other) == ((24, 10), 20)
    assert torch.equal(copy_rows(every_other), every_other.contiguous()) and len(calls) == 1


def rotated_and_copied(fn, qkv0, shape, cos, sin, dy):
    qkv = qkv0.detach().clone().requires_grad_()
    q, k, v = (part.view(shape) for part in qkv.split(shape[2] * shape[3], dim=-1))
    outs = fn(q, k, v, cos, sin)
    torch.autograd.backward(outs, dy)
    return [o.detach() for o in outs] + [qkv.grad]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_rotary_copying_v_is_rotary_and_a_copy(dtype, device, monkeypatch):
    """Values and gradients equal to ``rotary`` of q and k plus ``v.contiguous()`` (bit for bit: the same kernels),
    v copied by blockfuse's kernel inside the rotary Function (one autograd node for the three), v's gradient
    the incoming one, into v's columns of the packed tensor."""
    shape = (2, 9, 3, 16)
    qkv0, _ = packed_qkv(*shape, dtype, device, seed=8)
    cos, sin = (random_tensor((12, 8), torch.float32, seed=s).to(device) for s in (9, 10))
    dy = [random_tensor(shape, dtype, seed=s).to(device) for s in (11, 12, 13)]
    calls = counting_copies(monkeypatch)
    fused = rotated_and_copied(lambda q, k, v, c, s: rotary_copying_v(q, k, v, c, s), qkv0, shape, cos, sin, dy)
    assert len(calls) == 1
    plain = rotated_and_copied(lambda q, k, v, c, s: (*blockfuse.rotary(q, k, c, s), v.contiguous()), qkv0, shape,
                               cos, sin, dy)
    for name, mine, theirs in zip(("q", "k", "v", "dqkv"), fused, plain):
        assert torch.equal(mine, theirs), name
    assert fused[2].is_contiguous()
    qkv = qkv0.detach().clone().requires_grad_()
    q, k, v = (part.view(shape) for part in qkv.split(48, dim=-1))
    outs = rotary_copying_v(q, k, v, cos, sin)
    assert outs[0].grad_fn is outs[2].grad_fn  # one node


@pytest.mark.usefixtures("requires_triton")
def test_rotary_copying_v_compiles_fullgraph(device):
    """One graph, eager's values and gradients (aot_eager runs the same kernels)."""
    shape = (2, 9, 2, 16)
    qkv0, _ = packed_qkv(*shape, torch.float32, device, seed=6)
    cos, sin = (random_tensor((12, 8), torch.float32, seed=s).to(device) for s in (14, 15))
    dy = [random_tensor(shape, torch.float32, seed=s).to(device) for s in (16, 17, 18)]

    def block(qkv):
        q, k, v = (part.view(shape) for part in qkv.split(32, dim=-1))
        q, k, v = rotary_copying_v(q, k, v, cos, sin)
        return q * 2.0, k, v * 3.0

    def run(fn):
        qkv = qkv0.detach().clone().requires_grad_()
        outs = fn(qkv)
        torch.autograd.backward(outs, dy)
        return [o.detach() for o in outs] + [qkv.grad]

    assert_compiles_like_eager(block, run, ["q", "k", "v", "dqkv"], backend="aot_eager", exact=True, rtol=0, atol=0,
                               explain_args=[qkv0.detach()])


@pytest.mark.gpu
@pytest.mark.parametrize("fn", ["copy_rows", "rotary_copying_v"])
def test_v_of_a_computed_qkv_compiles_with_inductor_on_cuda(fn):
    """The fused attention's path as Inductor compiles it on a GPU: v a view of a GEMM's output (a buffer Inductor
    computes, not a graph input), copied by ``copy_rows`` or inside the rotary Function. Eager's values and
    gradients. (Traced, the kernel's path took ``as_strided`` of that view and read the wrong memory on an H200:
    the compiled blocks' outputs were 0.08-0.80 off.)"""
    shape = (2, 64, 4, 32)
    width = shape[2] * shape[3]
    x0 = random_tensor((shape[0], shape[1], 96), torch.float32, seed=20).cuda()
    w = random_tensor((96, 3 * width), torch.float32, seed=21).cuda()
    cos, sin = (random_tensor((shape[1], shape[3] // 2), torch.float32, seed=s).cuda() for s in (22, 23))
    dy = [random_tensor(shape, torch.float32, seed=s).cuda() for s in (24, 25, 26)]

    def block(x):
        q, k, v = (part.view(shape) for part in (x @ w).split(width, dim=-1))
        if fn == "copy_rows":  # no autograd of its own: v's copy detached
            return q * 2.0, k * 1.0, copy_rows(v.detach()) * 3.0
        q, k, v = rotary_copying_v(q, k, v, cos, sin)
        return q * 2.0, k, v * 3.0

    def run(compiled):
        x = x0.clone().requires_grad_()
        outs = compiled(x)
        torch.autograd.backward(*zip(*[(o, g) for o, g in zip(outs, dy) if o.requires_grad]))
        return [o.detach() for o in outs] + [x.grad]

    assert_compiles_like_eager(block, run, ["q", "k", "v", "dx"], backend="inductor", rtol=1e-4, atol=1e-4)
