"""Drop-in modules on the fused ops."""

from blockfuse.nn.mlp import FusedMLP
from blockfuse.nn.norm import LayerNorm, RMSNorm
from blockfuse.nn.rotary import RotaryEmbedding

__all__ = ["FusedMLP", "LayerNorm", "RMSNorm", "RotaryEmbedding"]
