"""blockfuse: fused Triton kernels for transformer blocks, and the tools that show why they are fast."""

from blockfuse.ops.bias_dropout_add import bias_dropout_add, bias_dropout_add_ref
from blockfuse.ops.cross_entropy import linear_cross_entropy, linear_cross_entropy_ref
from blockfuse.ops.gated import geglu, geglu_ref, swiglu, swiglu_ref
from blockfuse.ops.linear_act import fused_mlp, fused_mlp_ref, linear_act, linear_act_ref
from blockfuse.ops.mlp import gated_mlp, gated_mlp_ref
from blockfuse.ops.norm import (
    layer_norm, layer_norm_gelu, layer_norm_gelu_ref, layer_norm_ref, rms_norm, rms_norm_ref,
)
from blockfuse.ops.rotary import rotary, rotary_ref
from blockfuse import nn  # noqa: E402  (nn imports the ops above)
from blockfuse.patching import patch, unpatch  # noqa: E402  (patches Hugging Face models with nn and the ops)
from blockfuse import analyze  # noqa: E402  (a callable module: blockfuse.analyze(module, *inputs))

__version__ = "0.1.0"

__all__ = [
    "bias_dropout_add", "bias_dropout_add_ref", "linear_cross_entropy", "linear_cross_entropy_ref",
    "geglu", "geglu_ref", "swiglu", "swiglu_ref", "gated_mlp", "gated_mlp_ref",
    "linear_act", "linear_act_ref", "fused_mlp", "fused_mlp_ref",
    "layer_norm", "layer_norm_ref", "layer_norm_gelu", "layer_norm_gelu_ref", "rms_norm", "rms_norm_ref",
    "rotary", "rotary_ref",
    "patch", "unpatch",
    "analyze", "nn", "__version__",
]
