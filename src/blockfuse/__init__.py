"""blockfuse: fused Triton kernels for transformer blocks, and the tools that show why they are fast."""

from blockfuse.ops.norm import layer_norm, layer_norm_ref, rms_norm, rms_norm_ref
from blockfuse import nn  # noqa: E402  (nn imports the ops above)

__version__ = "0.1.0"

__all__ = ["layer_norm", "layer_norm_ref", "rms_norm", "rms_norm_ref", "nn", "__version__"]
