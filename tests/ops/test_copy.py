"""``contiguous_rows`` (``blockfuse/ops/copy.py``): a strided view's rows copied contiguous, with autograd."""

from __future__ import annotations

import pytest
import torch

from blockfuse.ops import copy as copy_ops
from blockfuse.ops.copy import contiguous_rows
from tests.helpers import assert_compiles_like_eager, random_tensor


def packed_qkv(batch, seq, heads, head_dim, dtype, device, seed=0):
    """(q, k, v) views of one packed (batch, seq, 3 * heads * head_dim) tensor, each (batch, seq, heads, head_dim)."""
    width = heads * head_dim
    qkv = random_tensor((batch, seq, 3 * width), dtype, seed=seed).to(device).requires_grad_()
    return qkv, [part.view(batch, seq, heads, head_dim) for part in qkv.split(width, dim=-1)]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", [(2, 37, 3, 24), (1, 5, 1, 1000), (3, 1, 2, 8)])
def test_copies_the_packed_views_rows(shape, dtype, device, monkeypatch):
    """v of a packed QKV output (rows strided, odd sizes, a row wider than one column block, a sequence of 1):
    the same values, contiguous, through blockfuse's kernel; its gradient is the incoming gradient, into v's
    columns of the packed tensor only."""
    calls = []
    monkeypatch.setattr(copy_ops, "_copy_rows", lambda x, original=copy_ops._copy_rows: calls.append(x) or original(x))
    qkv, (_, _, v) = packed_qkv(*shape, dtype, device, seed=3)
    out = contiguous_rows(v)
    assert calls and out.is_contiguous() and out.shape == v.shape and torch.equal(out, v)
    dy = random_tensor(out.shape, dtype, seed=4).to(device)
    out.backward(dy)
    width = shape[2] * shape[3]
    assert torch.equal(qkv.grad[..., 2 * width:], dy.reshape(*shape[:2], width))
    assert (qkv.grad[..., :2 * width] == 0).all()


@pytest.mark.usefixtures("requires_triton")
def test_views_that_are_not_rows_of_one_stride_fall_back(device, monkeypatch):
    """A contiguous tensor is returned as it is; a transposed view (no unit last stride) and a view whose leading
    dimensions do not step by whole rows take ``Tensor.contiguous``: the same values, no kernel. Every other row
    of a tensor is rows of one stride: the kernel."""
    calls = []
    original = copy_ops._copy_rows
    monkeypatch.setattr(copy_ops, "_copy_rows", lambda x: calls.append(x) or original(x))
    x = random_tensor((6, 8, 10), torch.float32, seed=5).to(device)
    assert contiguous_rows(x) is x
    for view in (x.transpose(1, 2), x.transpose(0, 1)[:, :, :4]):
        assert copy_ops._rows_of(view) is None
        out = contiguous_rows(view)
        assert torch.equal(out, view.contiguous()) and out.is_contiguous()
    assert not calls
    every_other = x[:, ::2, :]
    assert copy_ops._rows_of(every_other) == ((24, 10), 20)
    assert torch.equal(contiguous_rows(every_other), every_other.contiguous()) and len(calls) == 1


@pytest.mark.usefixtures("requires_triton")
def test_torch_compile_fullgraph(device):
    """One graph, eager's values and gradient (aot_eager runs the same kernel)."""
    qkv0, _ = packed_qkv(2, 9, 2, 16, torch.float32, device, seed=6)
    dy = random_tensor((2, 9, 2, 16), torch.float32, seed=7).to(device)

    def block(qkv):
        v = qkv.split(32, dim=-1)[2].view(2, 9, 2, 16)
        return contiguous_rows(v) * 2.0

    def run(fn):
        qkv = qkv0.detach().clone().requires_grad_()
        out = fn(qkv)
        out.backward(dy)
        return [out.detach(), qkv.grad]

    assert_compiles_like_eager(block, run, ["out", "dqkv"], backend="aot_eager", exact=True, rtol=0, atol=0,
                               explain_args=[qkv0.detach()])
