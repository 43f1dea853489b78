"""Where each op runs: Triton on CUDA, Triton in the interpreter on CPU, or the reference.

The rule is the same for every op:

* CUDA tensors                        -> the Triton kernels;
* CPU tensors with ``TRITON_INTERPRET=1`` -> the same kernels in Triton's interpreter;
* any other tensor                    -> the pure-PyTorch reference.
"""

from __future__ import annotations

import importlib.util
import os

import torch


def interpreter_enabled() -> bool:
    """True when ``TRITON_INTERPRET`` asks Triton to run kernels on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


_TRITON_AVAILABLE = importlib.util.find_spec("triton") is not None


def triton_available() -> bool:
    return _TRITON_AVAILABLE


def implementation(device: torch.device | str) -> str:
    """Which implementation an op uses for tensors on ``device``.

    Returns ``"triton"``, ``"triton-interpreter"`` or ``"reference"``.
    """
    device_type = torch.device(device).type
    if not triton_available():
        return "reference"
    if device_type == "cuda":
        return "triton"
    if device_type == "cpu" and interpreter_enabled():
        return "triton-interpreter"
    return "reference"


def use_triton(tensor: torch.Tensor) -> bool:
    """True when an op on ``tensor`` should launch its Triton kernels."""
    return implementation(tensor.device) != "reference"
