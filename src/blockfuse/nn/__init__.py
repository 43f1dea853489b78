"""Drop-in modules on the fused ops."""

from blockfuse.nn.mlp import FusedMLP
from blockfuse.nn.norm import LayerNorm, RMSNorm
from blockfuse.nn.rotary import RotaryEmbedding

__all__ = ["Float8Linear", "FusedMLP", "LayerNorm", "RMSNorm", "RotaryEmbedding"]


def __getattr__(name: str):
    """``Float8Linear`` (``blockfuse/nn/fp8.py``), imported on first use: ``import blockfuse`` stays as light
    as it was (PEP 562)."""
    if name == "Float8Linear":
        from blockfuse.nn.fp8 import Float8Linear

        return Float8Linear
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
