"""Transformer blocks and models that run as plain PyTorch or on blockfuse ops, and the SPEC presets."""

from blockfuse.models.blocks import IMPLS, TransformerBlock, TransformerStack, convert, named_gradients
from blockfuse.models.build import build_block, build_model, width_overrides
from blockfuse.models.config import PRESETS, BlockConfig, Preset, preset

# The names ``blockfuse analyze`` accepts (every preset).
REFERENCE_BLOCKS = PRESETS

__all__ = [
    "IMPLS", "PRESETS", "REFERENCE_BLOCKS", "BlockConfig", "Preset", "TransformerBlock", "TransformerStack",
    "build_block", "build_model", "convert", "named_gradients", "preset", "width_overrides",
]
