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


def torch_before(major: int, minor: int) -> bool:
    """Whether this torch's release is older than ``major.minor`` (pre-releases and local builds by their numbers:
    "2.13.0a0+git..." is 2.13)."""
    release = torch.__version__.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in release[:2]) < (major, minor)


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


# NOTE: under torch.compile, an op called without autograd on an input of at most this many elements
# (decoding: one token a step) runs its reference, which Inductor generates and fuses with the ops
# around it; a separate kernel there is one more launch and splits Inductor's fusions, at a size where
# launches are the whole cost (64 Ki elements: 0.1 us of memory traffic at 3 TB/s). Measured (H100,
# torch 2.11, HF Llama 4 layers d 2048, static KV cache under transformers' compile, batch 1, ms a new
# token in two rounds): HF 4.13 / 4.71, patched with blockfuse's kernels 4.97 / 5.64, patched with
# this rule 4.15 / 4.91 (benchmarks/static_decode_rule.py's comparison, run as a patch of the ops'
# dispatch before the rule moved here). Training steps and large inputs keep the kernels.
COMPILED_INFERENCE_MAX_ELEMENTS = 1 << 16


def use_triton(tensor: torch.Tensor, draws_random: bool = False) -> bool:
    """The one dispatch rule of every op: True when an op on ``tensor`` launches its Triton kernels
    (CUDA, or CPU under the interpreter), False when it runs its pure-PyTorch reference (other
    devices, no Triton, float64, which the kernels do not take, and small inputs without autograd
    under torch.compile: see COMPILED_INFERENCE_MAX_ELEMENTS). ``draws_random``: the call draws a
    dropout mask, which must come from the kernels' seeded stream compiled or not (so the small-input
    rule does not apply)."""
    if tensor.dtype is torch.float64:
        return False
    if (not draws_random and torch.compiler.is_compiling() and not torch.is_grad_enabled()
            and tensor.numel() <= COMPILED_INFERENCE_MAX_ELEMENTS):
        return False
    if tensor.is_cuda:
        return _TRITON_AVAILABLE
    return _INTERPRETED and tensor.is_cpu
