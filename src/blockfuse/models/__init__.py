"""Reference transformer blocks and models (plain PyTorch), the workloads of the benchmarks."""

from blockfuse.models.blocks import REFERENCE_BLOCKS, BlockConfig, TransformerBlock, build_block

__all__ = ["REFERENCE_BLOCKS", "BlockConfig", "TransformerBlock", "build_block"]
