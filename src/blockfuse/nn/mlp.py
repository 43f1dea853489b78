"""FusedMLP: the two-GEMM MLP ``fc2(act(fc1(x)))`` on ``blockfuse.fused_mlp``, the one MLP module.

Parameters and state-dict keys are those of the eager MLPs of SigLIP / CLIP / ViT:
``fc1.weight`` (hidden, d_model), ``fc1.bias``, ``fc2.weight`` (out_features, hidden), ``fc2.bias``.
With a gated activation (``swiglu``, ``geglu``, ``geglu_erf``) fc1 holds 2 hidden rows, the gate
rows then the up rows; a Llama-style state dict (``gate_proj``, ``up_proj``, ``down_proj``) loads
too, its gate and up weights concatenated into ``fc1`` (the module saves under the fc1/fc2 names).

The backward keeps x and fc1's pre-activation only (see ``ops/mlp.py``): for a GELU MLP at
d 1152, hidden 4304, that is one tokens x hidden tensor where eager PyTorch keeps two (fc1's output
and the activation).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from blockfuse.ops.activation import ACTIVATIONS, check_activation
from blockfuse.ops.mlp import fused_mlp

# Llama-style names -> ours, for gated MLPs.
LLAMA_NAMES = {"gate_proj": "fc1", "up_proj": "fc1", "down_proj": "fc2"}
# Eager activation modules -> activation names (Hugging Face's by class name, without importing it).
_ACTIVATION_CLASSES = {
    "GELUTanh": "gelu_tanh", "PytorchGELUTanh": "gelu_tanh", "NewGELUActivation": "gelu_tanh",
    "GELUActivation": "gelu", "SiLUActivation": "silu", "SiLU": "silu", "ReLU": "relu",
}
# A gated MLP's pointwise activation -> the gated activation's name ("silu" -> "swiglu").
_GATED_FORMS = {activation.pointwise: name for name, activation in ACTIVATIONS.items() if activation.gated}


class FusedMLP(nn.Module):
    """``fc2(act(fc1(x)))``, the activation recomputed in the backward rather than kept.

    ``activation``: ``gelu_tanh`` (default), ``gelu``, ``silu``, ``relu``, or gated ``swiglu`` /
    ``geglu`` / ``geglu_erf`` (fc1 then has ``2 * hidden`` rows). ``out_features`` defaults to
    ``d_model``. ``path``: ``blockfuse.fused_mlp``'s (one path; kept for callers that pass it).
    """

    def __init__(self, d_model: int, hidden: int, activation: str = "gelu_tanh", bias: bool = True,
                 out_features: Optional[int] = None, path: Optional[str] = None, device=None, dtype=None):
        super().__init__()
        gated = check_activation(activation).gated
        self.d_model, self.hidden = d_model, hidden
        self.activation = activation
        self.out_features = d_model if out_features is None else out_features
        self.path = path
        factory = {"device": device, "dtype": dtype}
        self.fc1 = nn.Linear(d_model, 2 * hidden if gated else hidden, bias=bias, **factory)
        self.fc2 = nn.Linear(hidden, self.out_features, bias=bias, **factory)
        if gated:
            self.register_load_state_dict_pre_hook(_join_llama_state)

    def forward(self, x: Tensor) -> Tensor:
        return fused_mlp(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, self.activation,
                         path=self.path)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, hidden={self.hidden}, out_features={self.out_features}, "
                f"activation={self.activation!r}")

    @classmethod
    def from_eager(cls, mlp: nn.Module, activation: Optional[str] = None, path: Optional[str] = None) -> FusedMLP:
        """A FusedMLP with the weights (same dtype and device) of an eager MLP: one with ``fc1`` /
        ``fc2`` Linear children (SigLIP, CLIP), or a gated one with ``gate_proj`` / ``up_proj`` /
        ``down_proj`` (Llama). ``activation`` defaults to the one its ``activation_fn`` / ``act_fn``
        / ``act`` attribute names (``nn.GELU``, ``nn.SiLU``, ``nn.ReLU`` or Hugging Face's classes);
        a gated MLP's SiLU becomes ``swiglu``, its GELU ``geglu`` / ``geglu_erf``."""
        gated = all(isinstance(getattr(mlp, name, None), nn.Linear) for name in LLAMA_NAMES)
        if not gated and not all(isinstance(getattr(mlp, name, None), nn.Linear) for name in ("fc1", "fc2")):
            raise TypeError(f"mlp: expected a module with fc1 and fc2 Linear children, or gate_proj, up_proj and "
                            f"down_proj, got {type(mlp).__name__}")
        if activation is None:
            activation = _activation_of(mlp)
            activation = _GATED_FORMS[activation] if gated else activation
        first, second = (mlp.gate_proj, mlp.down_proj) if gated else (mlp.fc1, mlp.fc2)
        module = cls(first.in_features, second.in_features, activation, bias=first.bias is not None,
                     out_features=second.out_features, path=path, device=first.weight.device,
                     dtype=first.weight.dtype)
        module.load_state_dict(mlp.state_dict(), strict=True)
        return module


def _activation_of(mlp: nn.Module) -> str:
    """The activation name of an eager MLP's activation attribute."""
    for attribute in ("activation_fn", "act_fn", "act", "activation"):
        act = getattr(mlp, attribute, None)
        if act is None:
            continue
        if isinstance(act, nn.GELU):
            return "gelu_tanh" if act.approximate == "tanh" else "gelu"
        name = _ACTIVATION_CLASSES.get(type(act).__name__)
        if name is not None:
            return name
        raise ValueError(f"activation: cannot tell the activation of {type(mlp).__name__}.{attribute} "
                         f"({type(act).__name__}); pass activation= one of {list(ACTIVATIONS)}")
    raise ValueError(f"activation: {type(mlp).__name__} has no activation_fn / act_fn / act attribute; "
                     f"pass activation= one of {list(ACTIVATIONS)}")


def _join_llama_state(module, state_dict, prefix, *args) -> None:
    """Load hook: ``gate_proj`` + ``up_proj`` -> ``fc1`` (gate rows first), ``down_proj`` -> ``fc2``."""
    for suffix in ("weight", "bias"):
        gate, up = f"{prefix}gate_proj.{suffix}", f"{prefix}up_proj.{suffix}"
        if gate in state_dict and up in state_dict:
            state_dict[f"{prefix}fc1.{suffix}"] = torch.cat([state_dict.pop(gate), state_dict.pop(up)])
        down = f"{prefix}down_proj.{suffix}"
        if down in state_dict:
            state_dict[f"{prefix}fc2.{suffix}"] = state_dict.pop(down)
