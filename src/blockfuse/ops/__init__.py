"""Fused ops: Triton kernels (forward and backward) launched through ``blockfuse::`` launcher ops and one
autograd Function each (``ops/launch.py``)."""
