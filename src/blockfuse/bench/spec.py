"""The declaration of one op benchmark: shapes, inputs, providers, a byte count (a FLOP count too if GEMM-bound).

Every op declares itself the same way (see ``blockfuse/bench/norm.py``) and one runner
(``blockfuse/bench/runner.py``) times all of them.

A provider is a factory: called with no argument, it imports what it needs and returns
a callable that takes the op's inputs as keyword arguments and returns the output
tensor, or a tuple of output tensors in the order of ``OpBenchmark.outputs``. A factory
that raises (a missing package, an op not written yet) is reported as that provider's
error; a provider that does not support an op is simply not declared for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

Shape = tuple[int, ...]
Factory = Callable[[], Callable[..., object]]

# The modes a benchmark is timed in.
#   fwd:    inference forward, under torch.no_grad();
#   bwd:    backward only: each timed backward follows an untimed forward (see runner.py);
#   fwdbwd: forward + backward.
MODES = ("fwd", "bwd", "fwdbwd")

# Column order of every table; the default providers on CUDA and on the CPU.
# cce: Apple's Cut Cross-Entropy (``cut_cross_entropy``), a peer of the fused linear cross-entropy only.
PROVIDERS = ("eager", "reference", "compile", "liger", "cce", "blockfuse")
CUDA_PROVIDERS = ("eager", "compile", "liger", "cce", "blockfuse")
CPU_PROVIDERS = ("eager", "reference", "blockfuse")


@dataclass(frozen=True)
class Probe:
    """How the runner sees a provider's random choices (its dropout mask), for an op that makes some.

    The runner calls the provider on ``inputs(the real inputs)`` and then on the real inputs, each
    call right after ``torch.manual_seed`` of the same seed and in the same grad mode, so both draw
    the same random numbers; ``reference_kwargs(the probe call's outputs)`` gives the keyword
    arguments (e.g. ``dropout_mask=``) with which the reference makes the same choices, and the
    provider's errors are measured against that reference.
    """

    inputs: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
    reference_kwargs: Callable[[tuple[torch.Tensor, ...]], dict[str, object]]


@dataclass(frozen=True)
class OpBenchmark:
    name: str
    # (shape, dtype, device) -> {input name: tensor}, in the order the providers take them.
    make_inputs: Callable[[Shape, torch.dtype, torch.device], dict[str, torch.Tensor]]
    # Names of the outputs, in the order the providers return them.
    outputs: tuple[str, ...]
    # Factory of the pure-PyTorch reference; run on float32 copies of the inputs it is
    # the oracle of the relative errors.
    reference: Factory
    # Provider name -> factory.
    providers: dict[str, Factory]
    # (shape, bytes per element) -> (forward bytes, backward bytes); fwdbwd is their sum.
    bytes_moved: Callable[[Shape, int], tuple[int, int]]
    # Shapes timed on CUDA, and on the CPU (where only the reference path is fast enough).
    shapes: tuple[Shape, ...]
    cpu_shapes: tuple[Shape, ...]
    # The input whose gradient's relative error is the headline one (the others are kept too).
    grad_of: str = "x"
    # False: only run when named with --op.
    default: bool = True
    # For ops with random choices (dropout): how to check each provider against the reference
    # with its own choices. None: the op is deterministic.
    probe: Probe | None = None
    # For a GEMM-bound op: shape -> (forward FLOPs, backward FLOPs) of its GEMMs (2 per multiply-add); fwdbwd
    # is their sum. Its records then carry TFLOP/s and, on CUDA, the fraction of a large GEMM's TFLOP/s
    # measured in the same run. None: a memory-bound op, measured by its bytes.
    flops: Callable[[Shape], tuple[int, int]] | None = None


def compiled(reference: Factory) -> Factory:
    """The ``compile`` provider: ``torch.compile`` of the reference, default mode."""

    def factory():
        return torch.compile(reference())

    return factory


def mode_bytes(bench: OpBenchmark, shape: Shape, itemsize: int, mode: str) -> int:
    forward, backward = bench.bytes_moved(shape, itemsize)
    return {"fwd": forward, "bwd": backward, "fwdbwd": forward + backward}[mode]


def mode_flops(bench: OpBenchmark, shape: Shape, mode: str) -> int | None:
    """The FLOPs of ``mode`` for an op that declares them, else None."""
    if bench.flops is None:
        return None
    forward, backward = bench.flops(shape)
    return {"fwd": forward, "bwd": backward, "fwdbwd": forward + backward}[mode]
