"""Where each op runs: Triton on CUDA, Triton in the interpreter on CPU, or the reference.

The rule is the same for every op:

* CUDA tensors                        -> the Triton kernels;
* CPU tensors with ``TRITON_INTERPRET=1`` -> the same kernels in Triton's interpreter;
* any other tensor, and float64 tensors -> the pure-PyTorch reference.

:func:`use_triton` is that rule, the one place an op decides where it runs.
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


# NOTE: decided once, at import: Triton itself reads TRITON_INTERPRET when a kernel is defined,
# so a kernel of this process is either compiled or interpreted for its whole life.
_INTERPRETED = _TRITON_AVAILABLE and interpreter_enabled()


def use_triton(tensor: torch.Tensor) -> bool:
    """The one dispatch rule of every op: True when an op on ``tensor`` launches its Triton kernels
    (CUDA, or CPU under the interpreter), False when it runs its pure-PyTorch reference (other
    devices, no Triton, and float64, which the kernels do not take)."""
    if tensor.dtype is torch.float64:
        return False
    if tensor.is_cuda:
        return _TRITON_AVAILABLE
    return _INTERPRETED and tensor.is_cpu
