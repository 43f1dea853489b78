"""Tests of ``blockfuse.nn.Float8Linear`` and ``blockfuse.fp8.convert``.

Float8Linear is a drop-in ``torch.nn.Linear``: the same parameters and state dict both ways, and outputs
and gradients within the FP8 bounds of ``tests/ops/test_fp8.py`` (where they are derived). ``convert``
swaps a model's Linear layers in place, keeping the Parameter objects (an optimizer made before keeps
working), and skips the layers ``_scaled_mm`` cannot take.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import blockfuse
from blockfuse.nn import Float8Linear
from blockfuse.ops import fp8 as fp8_ops
from tests.helpers import CastProbe, assert_compiles_like_eager, random_tensor, relative_error
from tests.ops.test_fp8 import FORWARD_BOUND, assert_within, forward_bound, skip_unless_compiled_rowwise_runs


def randomized_linear(in_features, out_features, bias=True, seed=0, dtype=torch.float32):
    linear = nn.Linear(in_features, out_features, bias=bias, dtype=dtype)
    with torch.no_grad():
        linear.weight.copy_(random_tensor(linear.weight.shape, dtype, seed=seed, scale=in_features**-0.5))
        if bias:
            linear.bias.copy_(random_tensor(linear.bias.shape, dtype, seed=seed + 1, scale=0.1))
    return linear


@pytest.mark.parametrize("recipe", fp8_ops.RECIPES)
def test_state_dict_both_ways(recipe, device):
    linear = randomized_linear(64, 48, seed=1).to(device)
    module = Float8Linear(64, 48, recipe=recipe, device=device)
    module.load_state_dict(linear.state_dict(), strict=True)
    assert list(module.state_dict()) == list(linear.state_dict()) == ["weight", "bias"]
    back = nn.Linear(64, 48, device=device)
    back.load_state_dict(module.state_dict(), strict=True)
    assert torch.equal(back.weight, linear.weight) and torch.equal(back.bias, linear.bias)
    no_bias = Float8Linear(64, 48, bias=False, recipe=recipe)
    assert list(no_bias.state_dict()) == ["weight"] and no_bias.bias is None
    assert isinstance(module, nn.Linear) and f"recipe={recipe!r}" in repr(module)


@pytest.mark.parametrize("recipe", fp8_ops.RECIPES)
def test_from_linear_shares_the_parameters_and_stays_within_fp8_error(recipe, device):
    linear = randomized_linear(96, 64, seed=2, dtype=torch.bfloat16).to(device)
    linear.eval()
    module = Float8Linear.from_linear(linear, recipe=recipe)
    assert module.weight is linear.weight and module.bias is linear.bias and not module.training
    assert module.weight.device == linear.weight.device  # nothing left on the meta device
    x = random_tensor((4, 33, 96), torch.bfloat16, seed=3).to(device)
    y = module(x)
    exact = F.linear(x.double(), linear.weight.double(), linear.bias.double())
    assert_within(y, exact, forward_bound(x, linear.weight, linear.bias, recipe, x.dtype), "output")
    assert relative_error(y, exact) < FORWARD_BOUND
    # An input already in FP8, with its scale.
    q, scale = blockfuse.fp8.quantize(x, recipe=recipe)
    assert torch.equal(module(q, scale), y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64, bias=False)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(x + self.down(F.gelu(self.up(x))))


def small_model(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(Block(), Block(), nn.Linear(64, 10))  # a head of 10 outputs: not a multiple of 16
    model[1].up = model[0].up  # a shared layer
    return model


def test_convert_swaps_the_linear_layers(caplog, device):
    model = small_model().to(device)
    reference = small_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    parameters = list(model.parameters())
    with caplog.at_level(logging.INFO, logger="blockfuse.nn.fp8"):
        converted = blockfuse.fp8.convert(model, recipe="rowwise")
    assert converted is model and list(model.parameters()) == parameters  # the same Parameter objects
    for block in model[:2]:
        assert type(block.up) is Float8Linear and type(block.down) is Float8Linear
        assert block.up.recipe == "rowwise"
    assert type(model[2]) is nn.Linear  # skipped: 10 outputs
    assert model[0].up is model[1].up  # still one layer
    assert "2 left in high precision" in caplog.text
    x = random_tensor((3, 17, 64), seed=4).to(device)
    y, expected = model(x), reference(x)
    assert 1e-4 < relative_error(y, expected) < FORWARD_BOUND  # FP8, within FP8's error
    # A training step through the converted model updates the parameters the optimizer holds.
    before = model[0].down.weight.detach().clone()
    y.square().mean().backward()
    optimizer.step()
    assert not torch.equal(model[0].down.weight, before)
    assert blockfuse.fp8.convert(model) is model  # Float8Linear layers are left as they are
    assert model[0].up.recipe == "rowwise"


def test_recompute_activation_reaches_the_layer_and_its_op(device, monkeypatch):
    """``convert(..., recompute_activation=True)`` sets it on each layer (shown in its repr); a tensorwise layer
    called with its activation passes it to ``fp8_linear_act``."""
    from blockfuse.nn import fp8 as nn_fp8

    model = blockfuse.fp8.convert(small_model().to(device), recipe="tensorwise", recompute_activation=True)
    up = model[0].up
    assert up.recompute_activation and "recompute_activation=True" in repr(up)
    assert not blockfuse.fp8.convert(small_model().to(device))[0].up.recompute_activation
    calls = []
    original = nn_fp8.fp8_linear_act
    monkeypatch.setattr(nn_fp8, "fp8_linear_act", lambda *a, **k: calls.append(k["recompute"]) or original(*a, **k))
    x = random_tensor((3, 5, 64), seed=6).to(device)
    up(x, activation="gelu_tanh")
    assert calls == [True]


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "delayed"])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw-foreach", "adamw-fused"])
def test_every_forward_casts_the_weights_the_optimizer_left(optimizer, recipe, device):
    """The weight casts kept between calls are dropped by every optimizer step. A fused optimizer
    (``AdamW(fused=True)``, Hugging Face Trainer's default) writes the weights in place without bumping their version
    counter, the key the cache had alone: each later step then ran on the first step's weights. Two micro-batches a
    step (the second reuses the first's casts), three steps; every cast handed out checked against a fresh one."""
    layers = nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.Linear(48, 16)).to(device)
    model = blockfuse.fp8.convert(layers, recipe=recipe)
    kind = {"sgd": (torch.optim.SGD, {"lr": 0.5}), "adamw-foreach": (torch.optim.AdamW, {"lr": 0.05, "foreach": True}),
            "adamw-fused": (torch.optim.AdamW, {"lr": 0.05, "fused": True})}[optimizer]
    step = kind[0](model.parameters(), **kind[1])
    probe = CastProbe()
    try:
        for i in range(3):
            for j in range(2):
                model(random_tensor((9, 32), torch.float32, device, seed=10 * i + j)).square().mean().backward()
            step.step()
            step.zero_grad()
    finally:
        probe.restore()
    assert probe.calls >= 3 * 2 * 2 and probe.stale == 0, (probe.calls, probe.stale)  # (and the backward's, tensorwise)


def test_convert_filter_and_a_bare_linear(device):
    model = small_model().to(device)
    blockfuse.fp8.convert(model, filter=lambda module, name: not name.endswith("down"))
    assert type(model[0].up) is Float8Linear and type(model[0].down) is nn.Linear
    linear = nn.Linear(32, 16).to(device)
    module = blockfuse.fp8.convert(linear)
    assert type(module) is Float8Linear and module.weight is linear.weight
    with pytest.raises(ValueError, match="recipe: expected one of"):
        blockfuse.fp8.convert(model, recipe="blockwise")
    with pytest.raises(TypeError, match="linear: expected a torch.nn.Linear"):
        Float8Linear.from_linear(nn.Conv1d(4, 4, 1))


@pytest.mark.parametrize("recipe", fp8_ops.RECIPES)
def test_torch_compile_fullgraph_forward_and_backward(recipe, device):
    """One graph for a Float8Linear's forward and backward, eager's outputs and gradients bit for bit."""
    skip_unless_compiled_rowwise_runs(recipe, device)
    module = Float8Linear.from_linear(randomized_linear(64, 48, seed=5), recipe=recipe).to(device)
    x = random_tensor((2, 19, 64), seed=6).to(device)
    grad_output = random_tensor((2, 19, 48), seed=7).to(device)

    def run(fn):
        module.zero_grad()
        leaf = x.clone().requires_grad_()
        out = fn(leaf)
        out.backward(grad_output)
        return [out.detach(), leaf.grad, module.weight.grad.clone(), module.bias.grad.clone()]

    # Bit for bit, but the bias gradient: eagerly it comes from the cast's pass over dy (fp32 partial sums);
    # traced at this size the backward takes the reference (runtime.use_triton's small-input rule), dy.sum(0).
    assert_compiles_like_eager(module, run, ["out", "dx", "dweight", "dbias"], backend="aot_eager",
                               rtol=[0, 0, 0, 1e-5], atol=[0, 0, 0, 1e-5], explain_args=[x])


@pytest.mark.slow
def test_torch_compile_inductor(device):
    """Inductor's generated code around the FP8 casts (the CPU backend cannot fill FP8 tensors: the
    transposed operands move as bytes) gives eager's values."""
    module = Float8Linear.from_linear(randomized_linear(64, 48, seed=8)).to(device)
    x = random_tensor((37, 64), seed=9).to(device)
    grad_output = random_tensor((37, 48), seed=10).to(device)

    def run(fn):
        module.zero_grad()
        leaf = x.clone().requires_grad_()
        out = fn(leaf)
        out.backward(grad_output)
        return [out.detach(), leaf.grad, module.weight.grad.clone(), module.bias.grad.clone()]

    assert_compiles_like_eager(module, run, ["out", "dx", "dweight", "dbias"], backend="inductor",
                               rtol=1e-5, atol=1e-5)


def test_import_blockfuse_fp8_as_a_module():
    """``import blockfuse.fp8`` works (a benchmark on the GPU failed on it when fp8 was only an attribute), and
    names the same objects as ``blockfuse.fp8`` reached as an attribute and ``blockfuse.nn.fp8``."""
    import importlib

    module = importlib.import_module("blockfuse.fp8")
    import blockfuse.nn.fp8

    assert blockfuse.fp8 is module and blockfuse.fp8_linear is blockfuse.nn.fp8.fp8_linear
    assert set(module.__all__) == set(blockfuse.nn.fp8.__all__)
    assert all(getattr(module, name) is getattr(blockfuse.nn.fp8, name) for name in module.__all__)


def test_the_layer_with_its_activation_and_a_known_amax(device):
    """``forward(x, activation=...)`` is ``fp8_linear_act`` on the layer's parameters, through the module (its hooks
    run); ``forward(y, x_amax=...)`` gives what the layer gives taking the amax itself; rowwise layers refuse both
    the activation and the amax."""
    torch.manual_seed(0)
    up = Float8Linear(32, 64, device=device)
    down = Float8Linear(32, 16, device=device)
    seen = []
    up.register_forward_hook(lambda module, args, kwargs, out: seen.append(kwargs.get("activation")),
                             with_kwargs=True)
    x = random_tensor((6, 32), torch.float32, seed=1).to(device)
    act, amax = up(x, activation="swiglu")
    expected, expected_amax = blockfuse.fp8.fp8_linear_act(x, up.weight, up.bias, "swiglu")
    assert seen == ["swiglu"] and torch.equal(act, expected) and torch.equal(amax, expected_amax)
    assert torch.equal(down(act, x_amax=amax), down(act))
    rowwise = Float8Linear(32, 64, recipe="rowwise", device=device)
    with pytest.raises(ValueError, match="activation: the layer with its activation takes"):
        rowwise(x, activation="swiglu")
    with pytest.raises(ValueError, match="x_amax: only for recipe 'tensorwise'"):
        rowwise(x, x_amax=amax)
