"""Tests of the modules ``blockfuse.nn.LayerNorm`` and ``blockfuse.nn.RMSNorm``.

They are drop-in replacements: they load the state dict of ``torch.nn.LayerNorm`` /
``torch.nn.RMSNorm`` of the same size (strict) and then give the same outputs and grads, within
the usual tolerance (at most about 2x PyTorch's own error against float64).
"""

from __future__ import annotations

import copy

import pytest
import torch

import blockfuse
from tests.helpers import (
    assert_all_close_to_reference,
    grads,
    interpreter_truncates,
    leaves,
    random_tensor,
    relative_error,
)

WIDTH = 760
SHAPE = (3, 5, WIDTH)  # (batch, seq, hidden)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

LAYER_NORM_CONFIGS = {
    "affine": {},
    "nobias": {"bias": False},
    "noaffine": {"elementwise_affine": False},
}
RMS_NORM_CONFIGS = {
    "affine": {},
    "noaffine": {"elementwise_affine": False},
}


def randomize_parameters(module: torch.nn.Module, seed: int = 0) -> None:
    """Weights around 1 and biases around 0, far from their constant initial values."""
    with torch.no_grad():
        for index, (name, parameter) in enumerate(module.named_parameters()):
            offset = 1.0 if name == "weight" else 0.0
            values = random_tensor(parameter.shape, parameter.dtype, seed=seed + index, scale=0.5, offset=offset)
            parameter.copy_(values)


def run_module(module, x, grad_output):
    """Output and grads (x first, then the parameters in order) of ``module(x)``."""
    (x_leaf,) = leaves(x)
    out = module(x_leaf)
    inputs = [x_leaf, *module.parameters()]
    return [out.detach(), *grads(out, inputs, grad_output)]


def compare_with_torch(ours, theirs, dtype, device, offset):
    x = random_tensor(SHAPE, dtype, device, seed=10, scale=2.0, offset=offset)
    grad_output = random_tensor(SHAPE, dtype, device, seed=11)
    oracle_module = copy.deepcopy(theirs).double()
    names = ["y", "dx"] + [f"d{name}" for name, _ in theirs.named_parameters()]
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    assert_all_close_to_reference(
        run_module(ours, x, grad_output),
        run_module(theirs, x, grad_output),
        run_module(oracle_module, x.double(), grad_output.double()),
        names,
    )


def load_from_torch(ours, theirs):
    randomize_parameters(theirs)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert a.dtype == b.dtype and torch.equal(a, b), name


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("config", list(LAYER_NORM_CONFIGS))
def test_layer_norm_loads_torch_state_dict_and_matches_it(config, dtype, device):
    kwargs = dict(LAYER_NORM_CONFIGS[config], eps=1e-5, device=device, dtype=dtype)
    theirs = torch.nn.LayerNorm(WIDTH, **kwargs)
    ours = blockfuse.nn.LayerNorm(WIDTH, **kwargs)
    load_from_torch(ours, theirs)
    compare_with_torch(ours, theirs, dtype, device, offset=0.5)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("cast_before_weight", [False, True], ids=["multiply-fp32", "cast-first"])
@pytest.mark.parametrize("config", list(RMS_NORM_CONFIGS))
def test_rms_norm_loads_torch_state_dict_and_matches_it(config, cast_before_weight, dtype, device):
    kwargs = dict(RMS_NORM_CONFIGS[config], eps=1e-6, device=device, dtype=dtype)
    theirs = torch.nn.RMSNorm(WIDTH, **kwargs)
    ours = blockfuse.nn.RMSNorm(WIDTH, cast_before_weight=cast_before_weight, **kwargs)
    load_from_torch(ours, theirs)
    compare_with_torch(ours, theirs, dtype, device, offset=0.0)


class ZeroCentredRMSNorm(torch.nn.Module):
    """Gemma's RMSNorm: weights stored around 0, the row multiplied by (1 + weight) in fp32, one cast after."""

    def __init__(self, width, eps, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.zeros(width, device=device, dtype=dtype))

    def forward(self, x):
        x32 = x.float()
        out = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight.float())
        return out.type_as(x)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_rms_norm_weight_offset_matches_zero_centred_norm(dtype, device):
    """weight_offset=1.0: Gemma's norm (state dict: the stored weight), outputs and grads, the weight's included."""
    theirs = ZeroCentredRMSNorm(WIDTH, 1e-6, device=device, dtype=dtype)
    with torch.no_grad():
        theirs.weight.copy_(random_tensor((WIDTH,), dtype, device, seed=4, scale=0.5))
    ours = blockfuse.nn.RMSNorm(WIDTH, eps=1e-6, weight_offset=1.0, device=device, dtype=dtype)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert "weight_offset=1.0" in repr(ours)
    compare_with_torch(ours, theirs, dtype, device, offset=0.0)
    # an offset of 0 is the plain module: the stored weight multiplies
    plain = blockfuse.nn.RMSNorm(WIDTH, eps=1e-6, device=device, dtype=dtype)
    plain.load_state_dict(theirs.state_dict())
    x = random_tensor(SHAPE, dtype, device, seed=10)
    with torch.no_grad():
        assert relative_error(plain(x), ours(x)) > 0.1


def test_rms_norm_weight_offset_checks():
    with pytest.raises(ValueError, match="weight_offset: expected a finite number, got inf"):
        blockfuse.nn.RMSNorm(8, weight_offset=float("inf"))
    with pytest.raises(ValueError, match="weight_offset: expected a finite number, got '1'"):
        blockfuse.nn.RMSNorm(8, weight_offset="1")
    with pytest.raises(ValueError, match="weight_offset: an offset of the weight needs a weight"):
        blockfuse.nn.RMSNorm(8, weight_offset=1.0, elementwise_affine=False)


def rms_norm_formula(x, weight, eps, cast_before_weight):
    x32 = x.float()
    xhat = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    if cast_before_weight:
        return weight * xhat.to(x.dtype)
    return (xhat * weight.float()).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_rms_norm_reproduces_torch_rounding(dtype, device):
    """``torch.nn.RMSNorm`` rounds in one of the two conventions, or (its fused CUDA kernel)
    in neither bit for bit. Whichever: the module is at most as far from torch's output as
    torch's own output is from the fp64 result, in the convention closest to torch's."""
    if interpreter_truncates(dtype, device):
        pytest.skip("Triton's interpreter rounds fp32 -> bf16 toward zero, torch to nearest")
    theirs = torch.nn.RMSNorm(WIDTH, eps=1e-6, device=device, dtype=dtype)
    randomize_parameters(theirs)
    x = random_tensor((64, WIDTH), dtype, device, seed=3)
    with torch.no_grad():
        expected = theirs(x)
        weight = theirs.weight
        exact = rms_norm_formula(x.double(), weight.double(), 1e-6, False)
        mismatches = {flag: (expected != rms_norm_formula(x, weight, 1e-6, flag)).float().mean().item()
                      for flag in (True, False)}
    convention = min(mismatches, key=mismatches.get)
    ours = blockfuse.nn.RMSNorm(WIDTH, eps=1e-6, cast_before_weight=convention, device=device, dtype=dtype)
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        out = ours(x)
    assert relative_error(out, expected) <= 2 * relative_error(expected, exact), (
        f"cast_before_weight={convention} (closest to torch {torch.__version__}: mismatches {mismatches})"
    )
    assert (out != expected).float().mean().item() <= mismatches[convention] + 0.01


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_fresh_module_equals_torch_fresh_module(norm, device):
    """Same parameters, same initial values, same dtype and device as the torch module; and torch
    loads our state dict back (strict)."""
    if norm == "layer":
        ours = blockfuse.nn.LayerNorm((WIDTH,), device=device, dtype=torch.bfloat16)
        theirs = torch.nn.LayerNorm((WIDTH,), device=device, dtype=torch.bfloat16)
    else:
        ours = blockfuse.nn.RMSNorm((WIDTH,), device=device, dtype=torch.bfloat16)
        theirs = torch.nn.RMSNorm((WIDTH,), device=device, dtype=torch.bfloat16)
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert list(ours_state) == list(theirs_state)
    for name in theirs_state:
        a, b = ours_state[name], theirs_state[name]
        assert a.dtype == b.dtype == torch.bfloat16 and a.device == b.device and torch.equal(a, b), name
    randomize_parameters(ours)
    theirs.load_state_dict(ours.state_dict(), strict=True)


def make_module(norm, **kwargs):
    if norm == "layer":
        return blockfuse.nn.LayerNorm(WIDTH, **kwargs)
    return blockfuse.nn.RMSNorm(WIDTH, **kwargs)


def call_functional(module, norm, x, **kwargs):
    """The functional with the module's parameters (and the default eps of both)."""
    if norm == "layer":
        return blockfuse.layer_norm(x, module.weight, module.bias, 1e-5, **kwargs)
    return blockfuse.rms_norm(x, module.weight, 1e-6, **kwargs)


def assert_same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert torch.equal(u, v)


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_module_forwards_residual_and_dropout_to_the_functional(mode, norm, device):
    """``forward(x, residual)`` calls the functional with the module's ``residual_mode`` and
    ``dropout_p``, and ``training=self.training``: dropout in train mode (same seed -> same result
    as the functional), none in eval mode."""
    module = make_module(norm, residual_mode=mode, dropout_p=0.5, device=device)
    randomize_parameters(module)
    x = random_tensor(SHAPE, torch.float32, device, seed=1, scale=2.0, offset=0.5)
    residual = random_tensor(SHAPE, torch.float32, device, seed=2)

    with torch.no_grad():
        module.train()
        torch.manual_seed(5)
        trained = module(x, residual)
        torch.manual_seed(5)
        expected = call_functional(module, norm, x, residual=residual, residual_mode=mode, dropout_p=0.5)
        assert_same(trained, expected)
        if mode == "pre":
            assert isinstance(trained, tuple) and len(trained) == 2
        else:
            assert isinstance(trained, torch.Tensor)

        module.eval()
        evaluated = module(x, residual)
        assert_same(evaluated, call_functional(module, norm, x, residual=residual, residual_mode=mode))
        first = trained[0] if mode == "pre" else trained
        second = evaluated[0] if mode == "pre" else evaluated
        assert not torch.equal(first, second), "dropout_p=0.5 in train mode changed nothing"

        # Without a residual: the plain norm.
        module_plain = make_module(norm, device=device)
        module_plain.load_state_dict(module.state_dict())
        assert_same(module_plain(x), call_functional(module, norm, x))
