"""Benchmarks of the gated activations: SwiGLU and GeGLU, separate and packed inputs.

Shapes are (rows, hidden): gate, up and the output are [rows, hidden]; the packed input of
``swiglu_packed`` is [rows, 2 * hidden] (gate then up). Byte counts: each input read once,
each output written once; ``n`` is rows x hidden, ``b`` bytes per element. Forward reads
gate and up and writes out (3n); backward reads dy, gate and up and writes dgate and dup
(5n). The packed form moves the same bytes (its two halves are gate and up).

Liger-Kernel conventions: ``LigerSiLUMulFunction.apply(a, b)`` (``gate_multiplier`` and
``down_multiplier`` left at 1.0) is ``silu(a) * b``; ``LigerGELUMulFunction.apply(a, b)``
is ``gelu(a, approximate="tanh") * b`` (Liger has no erf form, so every ``geglu`` provider
here uses the tanh form); ``LigerFusedGateUpSiLUMulFunction.apply(y, in_place)`` takes the
packed [..., 2 * hidden] tensor and returns the packed gradient (``in_place=False``, its
default: a fresh gradient buffer, as ours). Liger's forwards round the activation to the
input dtype before the multiply, as PyTorch's composition does. Its separate-input
backwards write dgate and dup into the saved gate and up (the leaf tensors themselves): a
timed loop then runs on the previous step's gradients as inputs, which changes the values
but not the work.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blockfuse.bench.spec import OpBenchmark, Shape, compiled

SHAPES: tuple[Shape, ...] = ((16384, 4096), (8192, 14336), (2048, 1024))  # (rows, hidden)
CPU_SHAPES: tuple[Shape, ...] = ((64, 256), (8, 1024))
GELU_APPROXIMATION = "tanh"  # Liger-Kernel's only form


# ---------------------------------------------------------------- inputs


def _separate_inputs(shape, dtype, device):
    return {
        "gate": torch.randn(shape, dtype=dtype, device=device),  # (rows, hidden)
        "up": torch.randn(shape, dtype=dtype, device=device),  # (rows, hidden)
    }


def _packed_inputs(shape, dtype, device):
    *rows, hidden = shape
    return {"gate_up": torch.randn((*rows, 2 * hidden), dtype=dtype, device=device)}  # (rows, 2 * hidden)


# ---------------------------------------------------------------- byte counts


def _gated_bytes(shape, b):
    n = math.prod(shape)
    forward = 3 * n * b  # read gate, up; write out
    backward = 5 * n * b  # read dout, gate, up; write dgate, dup
    return forward, backward


# ---------------------------------------------------------------- providers


def _eager_swiglu():
    return lambda gate, up: F.silu(gate) * up


def _eager_geglu():
    return lambda gate, up: F.gelu(gate, approximate=GELU_APPROXIMATION) * up


def _eager_swiglu_packed():
    def swiglu_packed(gate_up):
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    return swiglu_packed


def _reference_swiglu():
    from blockfuse.ops.gated import swiglu_ref

    return lambda gate, up: swiglu_ref(gate, up)


def _reference_geglu():
    from blockfuse.ops.gated import geglu_ref

    return lambda gate, up: geglu_ref(gate, up, GELU_APPROXIMATION)


def _reference_swiglu_packed():
    from blockfuse.ops.gated import swiglu_ref

    return lambda gate_up: swiglu_ref(gate_up)


def _blockfuse_swiglu():
    from blockfuse.ops.gated import swiglu

    return lambda gate, up: swiglu(gate, up)


def _blockfuse_geglu():
    from blockfuse.ops.gated import geglu

    return lambda gate, up: geglu(gate, up, GELU_APPROXIMATION)


def _blockfuse_swiglu_packed():
    from blockfuse.ops.gated import swiglu

    return lambda gate_up: swiglu(gate_up)


def _liger_swiglu():
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    # apply(a, b, gate_multiplier=1.0, down_multiplier=1.0) -> silu(a) * b
    return lambda gate, up: LigerSiLUMulFunction.apply(gate, up)


def _liger_geglu():
    from liger_kernel.ops.geglu import LigerGELUMulFunction

    # apply(a, b) -> gelu(a, approximate="tanh") * b
    return lambda gate, up: LigerGELUMulFunction.apply(gate, up)


def _liger_swiglu_packed():
    from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction

    # apply(y, in_place) with y = [gate | up] on the last dimension
    return lambda gate_up: LigerFusedGateUpSiLUMulFunction.apply(gate_up, False)


# ---------------------------------------------------------------- declarations


def _declare(name, make_inputs, reference, eager, blockfuse, liger, grad_of, default=True):
    return OpBenchmark(
        name=name,
        make_inputs=make_inputs,
        outputs=("out",),
        reference=reference,
        providers={
            "eager": eager,
            "reference": reference,
            "compile": compiled(reference),
            "liger": liger,
            "blockfuse": blockfuse,
        },
        bytes_moved=_gated_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        grad_of=grad_of,
        default=default,
    )


BENCHMARKS = (
    # out = silu(gate) * up
    _declare("swiglu", _separate_inputs, _reference_swiglu, _eager_swiglu, _blockfuse_swiglu, _liger_swiglu, "gate"),
    # out = gelu(gate, approximate="tanh") * up
    _declare("geglu", _separate_inputs, _reference_geglu, _eager_geglu, _blockfuse_geglu, _liger_geglu, "gate"),
    # gate, up = gate_up.chunk(2, -1); out = silu(gate) * up (the output of one fused gate|up GEMM)
    _declare(
        "swiglu_packed",
        _packed_inputs,
        _reference_swiglu_packed,
        _eager_swiglu_packed,
        _blockfuse_swiglu_packed,
        _liger_swiglu_packed,
        "gate_up",
    ),
)
