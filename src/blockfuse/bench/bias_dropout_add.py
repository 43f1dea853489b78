"""Benchmark of the fused bias + dropout + residual add: ``out = residual + dropout(x + bias, p)``.

Byte counts: ``n`` is the number of elements of x (rows x hidden), ``hidden`` its last dimension,
``b`` bytes per element. Forward: read x, residual, bias; write out. Backward: read dout; write dx
and dbias (the residual's gradient is dout itself: no traffic; the mask is drawn again from the
seed, not read). The bias terms are below 0.1% of the traffic at these shapes, but counted.

Every provider draws its own dropout mask (eager from torch's CUDA generator, compile from
Inductor's, blockfuse from its seed), so each is checked against the reference computed with its
own mask: the declared probe calls the provider on x = 1, bias = 0, residual = 0, whose output is
``keep / (1 - p)`` (see ``spec.Probe``). Liger-Kernel has no such op.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blockfuse.bench.spec import OpBenchmark, Probe, Shape, compiled

P = 0.1
SHAPES: tuple[Shape, ...] = ((16384, 4096), (2048, 1024))  # (rows, hidden)
CPU_SHAPES: tuple[Shape, ...] = ((64, 256), (8, 1024))


def _inputs(shape, dtype, device):
    return {
        "x": torch.randn(shape, dtype=dtype, device=device),  # (..., hidden)
        "bias": 0.1 * torch.randn(shape[-1], dtype=dtype, device=device),  # (hidden,)
        "residual": torch.randn(shape, dtype=dtype, device=device),  # (..., hidden)
    }


def _bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (3 * n + hidden) * b  # read x, residual, bias; write out
    backward = (2 * n + hidden) * b  # read dout; write dx, dbias (dresidual is dout itself)
    return forward, backward


def _eager():
    return lambda x, bias, residual: residual + F.dropout(x + bias, P)


def _reference():
    from blockfuse.ops.bias_dropout_add import bias_dropout_add_ref

    return lambda x, bias, residual, dropout_mask=None: bias_dropout_add_ref(
        x, bias, residual, P, dropout_mask=dropout_mask
    )


def _blockfuse():
    from blockfuse.ops.bias_dropout_add import bias_dropout_add

    return lambda x, bias, residual: bias_dropout_add(x, bias, residual, P)


def _probe_inputs(inputs):
    # out = 0 + dropout(1 + 0) = keep / (1 - p): nonzero exactly where the element is kept.
    return {
        "x": torch.ones_like(inputs["x"]),
        "bias": torch.zeros_like(inputs["bias"]),
        "residual": torch.zeros_like(inputs["residual"]),
    }


def _mask_of(outputs):
    (out,) = outputs
    return {"dropout_mask": out != 0}


BENCHMARKS = (
    # out = residual + dropout(x + bias, p=0.1)
    OpBenchmark(
        name="bias_dropout_add",
        make_inputs=_inputs,
        outputs=("out",),
        reference=_reference,
        providers={
            "eager": _eager,
            "reference": _reference,
            "compile": compiled(_reference),
            "blockfuse": _blockfuse,
        },
        bytes_moved=_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        probe=Probe(inputs=_probe_inputs, reference_kwargs=_mask_of),
    ),
)
