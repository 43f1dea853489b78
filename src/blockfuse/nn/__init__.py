"""Drop-in modules on the fused ops."""

from blockfuse.nn.norm import LayerNorm, RMSNorm

__all__ = ["LayerNorm", "RMSNorm"]
