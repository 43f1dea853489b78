"""FP8 linear layers, importable as ``import blockfuse.fp8`` or reached as ``blockfuse.fp8``: the public names of
``blockfuse.nn.fp8`` (``convert``, ``Float8Linear``, ``Float8Scaling``, ``fp8_linear``, ``quantize``, ...)."""

from blockfuse.nn.fp8 import *  # noqa: F401,F403 (this module is that one's public face)
from blockfuse.nn.fp8 import __all__  # noqa: F401
