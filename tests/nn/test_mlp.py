"""Tests of ``blockfuse.nn.FusedMLP``: a drop-in for the eager two-GEMM MLP.

It loads the eager MLP's state dict (SigLIP / CLIP naming ``fc1``, ``fc2``; Llama naming
``gate_proj``, ``up_proj``, ``down_proj`` for gated activations), saves one the eager MLP loads back,
and gives the same outputs and gradients within the usual tolerance (at most about 2x PyTorch's
own error against float64). Without the Triton path (CPU, no interpreter) the same tests check
the module's plumbing over the reference.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import blockfuse
from blockfuse.nn import FusedMLP
from tests.helpers import assert_all_close_to_reference, grads, leaves, random_tensor

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class SiglipStyleMLP(nn.Module):
    def __init__(self, d, hidden, activation=None, bias=True):
        super().__init__()
        self.activation_fn = activation or nn.GELU(approximate="tanh")
        self.fc1 = nn.Linear(d, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, d, bias=bias)

    def forward(self, x):
        return self.fc2(self.activation_fn(self.fc1(x)))


class LlamaStyleMLP(nn.Module):
    def __init__(self, d, hidden, activation=None, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=bias)
        self.up_proj = nn.Linear(d, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d, bias=bias)
        self.act_fn = activation or nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def randomize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Weights of scale 1/sqrt(fan-in), biases around 0.3: never zeros, never the default init."""
    with torch.no_grad():
        for index, (name, parameter) in enumerate(module.named_parameters()):
            scale = parameter.shape[-1] ** -0.5 if parameter.dim() == 2 else 0.3
            parameter.copy_(random_tensor(parameter.shape, parameter.dtype, seed=seed + index, scale=scale))
    return module


def run_module(module, x, dy):
    """Output, dx and each parameter's gradient (in named_parameters order)."""
    (x_leaf,) = leaves(x)
    out = module(x_leaf)
    parameters = [parameter for _, parameter in module.named_parameters()]
    return [out.detach(), *grads(out, [x_leaf, *parameters], dy)]


def compare_with_eager(ours: FusedMLP, eager: nn.Module, dtype, device, shape=(3, 37)):
    d = ours.d_model
    x = random_tensor((*shape, d), dtype, device, seed=10)
    dy = random_tensor((*shape, ours.out_features), dtype, device, seed=11)
    ours_results = run_module(ours.to(device), x, dy)
    eager = eager.to(device=device, dtype=dtype)
    base = run_module(eager, x, dy)
    oracle = run_module(copy.deepcopy(eager).double(), x.double(), dy.double())
    if hasattr(eager, "gate_proj"):  # ours: fc1 = [gate; up], fc2 = down; eager: gate, up, down
        for results in (base, oracle):
            dx_out, (gate, up, down) = results[:2], results[2:]
            results[:] = [*dx_out, torch.cat([gate, up]), down]
    names = ["out", "dx"] + [f"d {name}" for name, _ in ours.named_parameters()]
    assert_all_close_to_reference(ours_results, base, oracle, names,
                                  rounded_through=torch.bfloat16 if dtype == torch.bfloat16 else None)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_from_eager_siglip_mlp_matches_it(dtype, bias, device):
    eager = randomize(SiglipStyleMLP(72, 40, bias=bias)).to(dtype)
    ours = FusedMLP.from_eager(eager)
    assert ours.activation == "gelu_tanh" and ours.fc1.weight.dtype == dtype
    compare_with_eager(ours, eager, dtype, device)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_from_eager_llama_mlp_matches_it(dtype, device):
    eager = randomize(LlamaStyleMLP(48, 36)).to(dtype)
    ours = FusedMLP.from_eager(eager)
    assert ours.activation == "swiglu" and tuple(ours.fc1.weight.shape) == (72, 48)
    compare_with_eager(ours, eager, dtype, device)


def test_relu_mlp_with_other_output_width(device):
    eager = randomize(SiglipStyleMLP(24, 40, activation=nn.ReLU()))
    eager.fc2 = randomize(nn.Linear(40, 17))
    ours = FusedMLP.from_eager(eager)
    assert (ours.activation, ours.out_features) == ("relu", 17)
    compare_with_eager(ours, eager, torch.float32, device, shape=(199,))


def test_state_dict_round_trip():
    """FusedMLP saves the eager keys; each loads the other's state dict (strict) and they agree."""
    eager = randomize(SiglipStyleMLP(24, 40, activation=nn.GELU()))
    ours = FusedMLP(24, 40, activation="gelu")
    ours.load_state_dict(eager.state_dict(), strict=True)
    assert list(ours.state_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    fresh = SiglipStyleMLP(24, 40, activation=nn.GELU())
    fresh.load_state_dict(ours.state_dict(), strict=True)
    for key, value in eager.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
    x = random_tensor((5, 24), seed=3)
    torch.testing.assert_close(ours(x), eager(x), rtol=1e-5, atol=1e-5)


def test_llama_keys_load_into_a_gated_mlp():
    """gate_proj + up_proj become fc1 (gate rows first) and down_proj fc2, also under a prefix."""
    eager = randomize(LlamaStyleMLP(16, 12, bias=True))
    outer = nn.Sequential(FusedMLP(16, 12, activation="swiglu"))
    outer.load_state_dict({f"0.{key}": value for key, value in eager.state_dict().items()}, strict=True)
    ours = outer[0]
    torch.testing.assert_close(ours.fc1.weight, torch.cat([eager.gate_proj.weight, eager.up_proj.weight]))
    torch.testing.assert_close(ours.fc1.bias, torch.cat([eager.gate_proj.bias, eager.up_proj.bias]))
    torch.testing.assert_close(ours.fc2.weight, eager.down_proj.weight)
    x = random_tensor((5, 16), seed=3)
    torch.testing.assert_close(ours(x), eager(x), rtol=1e-5, atol=1e-5)


def test_hugging_face_siglip_mlp():
    transformers = pytest.importorskip("transformers")
    from transformers.models.siglip.modeling_siglip import SiglipMLP

    config = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=48, hidden_act="gelu_pytorch_tanh")
    eager = randomize(SiglipMLP(config))
    ours = FusedMLP.from_eager(eager)
    assert ours.activation == "gelu_tanh"
    x = random_tensor((2, 7, 32), seed=3)
    torch.testing.assert_close(ours(x), eager(x), rtol=1e-5, atol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="activation: expected one of"):
        FusedMLP(8, 16, activation="gelu_fast")
    with pytest.raises(TypeError, match="mlp: expected a module with fc1 and fc2"):
        FusedMLP.from_eager(nn.Linear(4, 4))
    mlp = SiglipStyleMLP(8, 16, activation=nn.Tanh())
    with pytest.raises(ValueError, match="activation: cannot tell the activation"):
        FusedMLP.from_eager(mlp)
    assert FusedMLP.from_eager(mlp, activation="silu").activation == "silu"


def test_no_grad_forward_and_exports():
    assert blockfuse.nn.FusedMLP is FusedMLP and blockfuse.fused_mlp is not None
    eager = randomize(LlamaStyleMLP(16, 12))
    ours = FusedMLP.from_eager(eager)
    x = random_tensor((199, 16), seed=3)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), eager(x), rtol=1e-5, atol=1e-5)
