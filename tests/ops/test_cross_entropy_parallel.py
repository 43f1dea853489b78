"""``linear_cross_entropy`` with the LM head sharded on the vocabulary (tensor parallelism): two processes, on
two GPUs over NCCL where there are two, else on the CPU over gloo (Triton's interpreter), against one process
with the whole weight. Every form runs in one pair of processes (the ``ours`` fixture: tests/multiprocess.py's
``run_each``)."""

from __future__ import annotations

import pytest
import torch

import blockfuse
from blockfuse.runtime import interpreter_enabled
from tests import multiprocess
from tests.helpers import relative_error

VOCAB = 203  # odd: the shards hold 102 and 101 classes
FORMS = {
    "plain": {},
    "everything": {"label_smoothing": 0.1, "softcap": 4.0, "z_loss": 1e-2, "bias": True},
    "sum": {"reduction": "sum"},
    "none": {"reduction": "none", "bias": True},
}


def _inputs(bias: bool):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 13, 24, generator=g)
    weight = torch.randn(VOCAB, 24, generator=g) * (2.0 / 24**0.5)
    b = torch.randn(VOCAB, generator=g) * 0.5 if bias else None
    target = torch.randint(0, VOCAB, (3, 13), generator=g)
    target[0, :5] = -100
    grad = torch.randn(3, 13, generator=g)
    return hidden, weight, b, target, grad


def _expected(form: dict):
    options = dict(form)
    hidden, weight, bias, target, grad = _inputs(options.pop("bias", False))
    leaves = [t.double().requires_grad_() for t in (hidden, weight, bias) if t is not None]
    loss = blockfuse.linear_cross_entropy_ref(leaves[0], leaves[1], target, leaves[2] if bias is not None else None,
                                              **options)
    grads = torch.autograd.grad(loss, leaves, grad.double() if loss.dim() else None)
    return [loss.detach()] + list(grads)


def _worker(rank: int, form: dict):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    device = multiprocess.device()
    mesh = init_device_mesh(device, (multiprocess.WORLD,))
    options = dict(form)
    hidden, weight, bias, target, grad = (None if t is None else t.to(device)
                                          for t in _inputs(options.pop("bias", False)))
    w = distribute_tensor(weight, mesh, [Shard(0)]).requires_grad_()
    b = None if bias is None else distribute_tensor(bias, mesh, [Shard(0)]).requires_grad_()
    h = distribute_tensor(hidden, mesh, [Replicate()]).requires_grad_()
    loss = blockfuse.linear_cross_entropy(h, w, target, b, chunk_size=16, **options)
    assert loss.placements == (Replicate(),)
    wanted = [t for t in (h, w, b) if t is not None]
    grads = torch.autograd.grad(loss, wanted, distribute_tensor(grad, mesh, [Replicate()]) if loss.dim() else None)
    full = [t.full_tensor().detach().cpu().numpy() for t in (loss, *grads)]  # collectives: every rank
    # A weight sharded on its width (or FSDP2's shard outside the head's forward) is refused by name.
    wrong = distribute_tensor(weight, mesh, [Shard(1)])
    try:
        blockfuse.linear_cross_entropy(h, wrong, target)
    except ValueError as error:
        assert "weight: a DTensor weight must be sharded on the vocabulary" in str(error), error
    else:
        raise AssertionError("a Shard(1) weight was accepted")
    return full


@pytest.fixture(scope="module")
def ours():
    """``ours(form)``: rank 0's results of that form, from the one run of every form."""
    result = multiprocess.run_each([(_worker, (form,)) for form in FORMS.values()])
    return lambda form: result(_worker, FORMS[form])[0]


@pytest.mark.skipif(not (multiprocess.on_gpus() or interpreter_enabled()), reason="the vocabulary-parallel loss runs "
                    "the Triton kernels: two GPUs, or on CPU TRITON_INTERPRET=1 set before Python starts")
@pytest.mark.parametrize("form", list(FORMS))
def test_vocab_parallel_matches_one_process(form, ours):
    got = [torch.from_numpy(a) for a in ours(form)]
    expected = _expected(FORMS[form])
    names = ["loss", "d hidden", "d weight", "d bias"]
    for name, a, b in zip(names, got, expected):
        assert relative_error(a, b) < 1e-5, f"{name}: {relative_error(a, b):.2e}"
