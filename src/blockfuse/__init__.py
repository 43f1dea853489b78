"""blockfuse: fused Triton kernels for transformer blocks, and the tools that show why they are fast.

The package's public face: the ops, ``blockfuse.nn``, ``blockfuse.patch`` / ``unpatch``, and
``blockfuse.analyze(module, *inputs)``. ``import blockfuse`` loads the ops, ``nn`` and ``patching``; the compile
analysis (``blockfuse.analyze``) loads on first use (``__getattr__`` below), the benchmarks and the
command line only when imported (tests/test_layers.py)."""

from blockfuse.ops.bias_dropout_add import bias_dropout_add, bias_dropout_add_ref
from blockfuse.ops.cross_entropy import linear_cross_entropy, linear_cross_entropy_ref
from blockfuse.ops.gated import geglu, geglu_ref, swiglu, swiglu_ref
from blockfuse.ops.linear_act import linear_act, linear_act_ref
from blockfuse.ops.mlp import fused_mlp, fused_mlp_ref, gated_mlp, gated_mlp_ref
from blockfuse.ops.norm import (
    layer_norm, layer_norm_gelu, layer_norm_gelu_ref, layer_norm_ref, rms_norm, rms_norm_ref,
)
from blockfuse.ops.rotary import rotary, rotary_ref
from blockfuse.ops import copy as _copy  # noqa: F401,E402  (registers blockfuse::copy_rows, the fused blocks' v copy)
from blockfuse import nn  # noqa: E402  (nn imports the ops above)
from blockfuse.patching import patch, unpatch  # noqa: E402  (patches Hugging Face models with nn and the ops)

__version__ = "0.1.0"

__all__ = [
    "bias_dropout_add", "bias_dropout_add_ref", "linear_cross_entropy", "linear_cross_entropy_ref",
    "geglu", "geglu_ref", "swiglu", "swiglu_ref", "gated_mlp", "gated_mlp_ref",
    "linear_act", "linear_act_ref", "fused_mlp", "fused_mlp_ref",
    "layer_norm", "layer_norm_ref", "layer_norm_gelu", "layer_norm_gelu_ref", "rms_norm", "rms_norm_ref",
    "rotary", "rotary_ref",
    "patch", "unpatch",
    "analyze", "nn", "fp8", "fp8_linear", "__version__",
]


def __getattr__(name: str):
    """``blockfuse.analyze``, imported on first use (PEP 562). Importing the subpackage makes it an
    attribute of this module, so this runs once. Likewise the FP8 layers: ``blockfuse.fp8`` (the public names
    of ``blockfuse.nn.fp8``: ``convert``, ``Float8Linear``, ``quantize``) and ``blockfuse.fp8_linear``."""
    if name == "analyze":
        import blockfuse.analyze

        return blockfuse.analyze
    if name in ("fp8", "fp8_linear"):
        import blockfuse.fp8

        globals()["fp8_linear"] = blockfuse.fp8.fp8_linear
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"analyze", "fp8", "fp8_linear"})
