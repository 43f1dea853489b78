"""Fused ops: Triton kernels (forward and backward) registered as ``blockfuse::`` custom ops."""
