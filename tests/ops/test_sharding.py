"""The ops on DTensors (ops/sharding.py): each placement a rule accepts runs locally, with no gather, and gives
the op's result on the whole tensor, forward and backward. Two processes (tests/multiprocess.py).

NOTE: every case runs in one pair of processes (the ``results`` fixture, tests/multiprocess.py's ``run_each``: each
test process starts them once), and each test reads its case's result.
"""

from __future__ import annotations

import pytest
import torch

from blockfuse.runtime import interpreter_enabled
from tests import multiprocess

pytestmark = pytest.mark.skipif(not (multiprocess.on_gpus() or interpreter_enabled()),
                                reason="the kernels: two GPUs, or on CPU TRITON_INTERPRET=1 set before Python starts")

NORMS = {
    "rms_norm": {},
    "layer_norm": {},
    "rms_norm_pre_residual": {"residual": True},
    "layer_norm_post_residual": {"residual": True, "residual_mode": "post"},
}


def _norm_inputs(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, 40, generator=g)
    residual = torch.randn(3, 6, 40, generator=g)
    weight = torch.randn(40, generator=g) * 0.5 + 1
    bias = torch.randn(40, generator=g) * 0.1
    grad = torch.randn(3, 6, 40, generator=g)
    return [t.to(device) for t in (x, residual, weight, bias, grad)]


def _norm(name, x, residual, weight, bias, options):
    import blockfuse

    if name.startswith("rms_norm"):
        return blockfuse.rms_norm(x, weight, residual=residual, **options)
    return blockfuse.layer_norm(x, weight, bias, residual=residual, **options)


def _norm_worker(rank, name, dim):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    device = multiprocess.device()
    mesh = init_device_mesh(device, (multiprocess.WORLD,))
    options = dict(NORMS[name])
    x, residual, weight, bias, grad = _norm_inputs(device)
    use_residual = options.pop("residual", False)

    def run(x, residual, weight, bias, grad):
        out = _norm(name, x, residual if use_residual else None, weight, bias, options)
        y = out[0] if isinstance(out, tuple) else out
        leaves = [x, weight] + ([bias] if not name.startswith("rms") else []) + ([residual] if use_residual else [])
        grads = torch.autograd.grad(y, leaves, grad)
        return y, grads

    expected_y, expected = run(*(t.clone().requires_grad_() for t in (x, residual, weight, bias)), grad)
    placement = Shard(dim)
    shard = [distribute_tensor(t, mesh, [placement]).requires_grad_() for t in (x, residual)]
    params = [distribute_tensor(t, mesh, [Replicate()]).requires_grad_() for t in (weight, bias)]
    y, grads = run(shard[0], shard[1], params[0], params[1], distribute_tensor(grad, mesh, [placement]))
    assert isinstance(y, DTensor) and y.placements == (placement,), y.placements
    local_shape = tuple(y.to_local().shape)  # the kernels ran on the local shard, not a gathered tensor
    full = [y.full_tensor()] + [g.full_tensor() for g in grads]
    errors = [float((a - b).abs().max()) for a, b in zip(full, [expected_y, *expected])]
    return {"errors": errors, "local_shape": local_shape}


@pytest.mark.parametrize("name", list(NORMS))
@pytest.mark.parametrize("dim", [0, 1])
def test_norms_on_dtensors_sharded_on_rows(name, dim, results):
    for rank, result in enumerate(results(_norm_worker, name, dim)):
        expected_local = [3, 6, 40]
        expected_local[dim] = [2, 1][rank] if dim == 0 else 3
        assert list(result["local_shape"]) == expected_local, result
        assert max(result["errors"]) < 1e-5, result


GATED = {"swiglu_separate": ("swiglu", False), "geglu_separate": ("geglu", False), "swiglu_packed": ("swiglu", True)}


def _gated_worker(rank, name, dim):
    import blockfuse
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    device = multiprocess.device()
    mesh = init_device_mesh(device, (multiprocess.WORLD,))
    function, packed = GATED[name]
    g = torch.Generator().manual_seed(1)
    gate, up, grad = (torch.randn(4, 5, 24, generator=g).to(device) for _ in range(3))
    if packed:
        gate = torch.cat([gate, up], dim=-1)  # [gate | up]

    def run(gate, up, grad):
        y = getattr(blockfuse, function)(gate, None if packed else up)
        leaves = [gate] if packed else [gate, up]
        return y, torch.autograd.grad(y, leaves, grad)

    expected_y, expected = run(gate.clone().requires_grad_(), up.clone().requires_grad_(), grad)
    placement = Shard(dim)
    gate_d, up_d = (distribute_tensor(t, mesh, [placement]).requires_grad_() for t in (gate, up))
    y, grads = run(gate_d, up_d, distribute_tensor(grad, mesh, [placement]))
    assert isinstance(y, DTensor) and y.placements == (placement,), y.placements
    full = [y.full_tensor()] + [t.full_tensor() for t in grads]
    return {"errors": [float((a - b).abs().max()) for a, b in zip(full, [expected_y, *expected])],
            "local_shape": tuple(y.to_local().shape)}


@pytest.mark.parametrize("name,dim", [(name, dim) for name in GATED for dim in (0, 2) if not (GATED[name][1] and dim)])
def test_gated_on_dtensors(name, dim, results):
    for rank, result in enumerate(results(_gated_worker, name, dim)):
        expected_local = [4, 5, 24]
        expected_local[dim] //= 2
        assert list(result["local_shape"]) == expected_local, result
        assert max(result["errors"]) < 1e-5, result


def _refusal_worker(rank):
    import blockfuse
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    x = distribute_tensor(torch.randn(4, 6, 40, device=multiprocess.device()), mesh, [Shard(2)])
    messages = []
    for call in (lambda: blockfuse.rms_norm(x, None), lambda: blockfuse.swiglu(x)):
        try:
            call()
            messages.append(None)
        except Exception as error:  # DTensor wraps the rule's ValueError: look through the chain
            text = []
            while error is not None:
                text.append(str(error))
                error = error.__cause__ or error.__context__
            messages.append(" | ".join(text))
    return messages


def test_a_placement_that_would_need_a_gather_is_refused_by_name(results):
    """A norm's input sharded on the normalized dimension, a packed [gate | up] on its last: a clear error
    naming the placement, never a silent gather."""
    for messages in results(_refusal_worker):
        norm, packed = messages
        assert norm is not None and "x: blockfuse's norm on a DTensor" in norm and "got Shard(2)" in norm, norm
        assert packed is not None and "packed gated activation" in packed, packed


def _bias_dropout_add_worker(rank, dim):
    import blockfuse
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    device = multiprocess.device()
    mesh = init_device_mesh(device, (multiprocess.WORLD,))
    g = torch.Generator().manual_seed(2)
    x, residual, grad = (torch.randn(4, 6, 32, generator=g).to(device) for _ in range(3))
    bias = torch.randn(32, generator=g).to(device)

    def run(x, bias, residual, grad):
        out = blockfuse.bias_dropout_add(x, bias, residual, 0.0, True)
        return out, torch.autograd.grad(out, [x, bias, residual], grad)

    expected_out, expected = run(*(t.clone().requires_grad_() for t in (x, bias, residual)), grad)
    placement = Shard(dim)
    bias_placement = Shard(0) if dim == 2 else Replicate()
    x_d, r_d = (distribute_tensor(t, mesh, [placement]).requires_grad_() for t in (x, residual))
    b_d = distribute_tensor(bias, mesh, [bias_placement]).requires_grad_()
    out, grads = run(x_d, b_d, r_d, distribute_tensor(grad, mesh, [placement]))
    assert out.placements == (placement,), out.placements
    full = [out.full_tensor()] + [t.full_tensor() for t in grads]
    try:
        blockfuse.bias_dropout_add(x_d, b_d, r_d, 0.1, True)
        refused = False
    except ValueError as error:
        refused = "p: dropout on a DTensor" in str(error)
    return {"errors": [float((a - b).abs().max()) for a, b in zip(full, [expected_out, *expected])],
            "dropout_refused": refused}


@pytest.mark.parametrize("dim", [0, 2])
def test_bias_dropout_add_on_dtensors(dim, results):
    for result in results(_bias_dropout_add_worker, dim):
        assert max(result["errors"]) < 1e-5, result
        assert result["dropout_refused"], result


ROTARY = {
    "heads": (2, "bshd", False, False),
    "heads_to_bhsd": (2, "bhsd", False, False),
    "batch_per_token_tables": (0, "bshd", True, False),
    "heads_in_place": (2, "bshd", False, True),
}


def _rotary_worker(rank, name):
    import blockfuse
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from blockfuse.models.eager import rotary_half_tables

    device = multiprocess.device()
    mesh = init_device_mesh(device, (multiprocess.WORLD,))
    dim, out_layout, per_token, inplace = ROTARY[name]
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 6, 4, 16, generator=g).to(device), torch.randn(2, 6, 2, 16, generator=g).to(device)  # GQA
    cos, sin = (t.to(device) for t in rotary_half_tables(16, 6, 10000.0))
    if per_token:  # Hugging Face's (batch, seq, head_dim) tables
        cos, sin = (torch.cat([t, t], dim=-1).expand(2, 6, 16).contiguous() for t in (cos, sin))
    grads_out = [torch.randn(2, 6, 4, 16, generator=g).to(device), torch.randn(2, 6, 2, 16, generator=g).to(device)]
    if out_layout == "bhsd":
        grads_out = [t.transpose(1, 2).contiguous() for t in grads_out]

    def run(q, k, cos, sin, grads_out):
        q_in, k_in = (q * 1, k * 1) if inplace else (q, k)  # in place: rotate a copy, q and k stay leaves
        q_out, k_out = blockfuse.rotary(q_in, k_in, cos, sin, out_layout=None if inplace else out_layout,
                                        inplace=inplace)
        return [q_out, k_out], torch.autograd.grad([q_out, k_out], [q, k], grads_out)

    expected_out, expected = run(q.clone().requires_grad_(), k.clone().requires_grad_(), cos, sin, grads_out)
    placement = Shard(dim)
    table = Shard(0) if per_token else Replicate()
    q_d, k_d = (distribute_tensor(t, mesh, [placement]).requires_grad_() for t in (q, k))
    cos_d, sin_d = (distribute_tensor(t, mesh, [table]) for t in (cos, sin))
    out_placement = Shard(1) if (out_layout == "bhsd" and dim == 2) else placement
    outs, grads = run(q_d, k_d, cos_d, sin_d, [distribute_tensor(t, mesh, [out_placement]) for t in grads_out])
    assert outs[0].placements == (out_placement,), outs[0].placements
    full = [t.full_tensor() for t in (*outs, *grads)]
    return [float((a - b).abs().max()) for a, b in zip(full, [*expected_out, *expected])]


@pytest.mark.parametrize("name", list(ROTARY))
def test_rotary_on_dtensors(name, results):
    for errors in results(_rotary_worker, name):
        assert max(errors) < 1e-5, errors


# ---------------------------------------------------------------------------------------------
# Every case in one pair of processes
# ---------------------------------------------------------------------------------------------

CASES = (
    [(_norm_worker, (name, dim)) for name in NORMS for dim in (0, 1)]
    + [(_gated_worker, (name, dim)) for name in GATED for dim in (0, 2) if not (GATED[name][1] and dim)]
    + [(_refusal_worker, ())]
    + [(_bias_dropout_add_worker, (dim,)) for dim in (0, 2)]
    + [(_rotary_worker, (name,)) for name in ROTARY]
)


@pytest.fixture(scope="module")
def results():
    """``results(worker, *args)``: the case's results by rank, from the one run of every case."""
    return multiprocess.run_each(CASES)
