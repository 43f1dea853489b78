"""Benchmarks of the GEMM-bound activation ops: ``linear_act`` (one GEMM with its activation), ``fused_mlp`` (the
ungated MLP: fc1, GELU, fc2, as SigLIP / ViT) and ``gated_mlp`` (gate|up GEMM, SwiGLU, down GEMM, as Llama).

Shapes are (tokens, d, hidden): ``x`` (tokens, d); weights scaled by 1 / sqrt(fan-in) (unit-variance outputs);
biases for ``linear_act`` and ``fused_mlp``, none for ``gated_mlp`` (Llama's). Being GEMM-bound, each op declares
its FLOPs (2 per multiply-add; the backward's two GEMMs per forward GEMM), and its records carry TFLOP/s and, on
CUDA, the fraction of a large GEMM's TFLOP/s measured in the same run; bytes (inputs and outputs once) are in the
JSON only. Providers: ``eager`` (``F.linear`` and the activation in the input dtype), ``compile`` (of the
reference), ``reference`` (the ops' ``_ref``: the activation in fp32), ``blockfuse``. blockfuse runs cuBLAS for
the GEMMs and its activation kernel between them, and keeps the pre-activation instead of the activation for the
backward (the MLPs: the activation recomputed), so its gain is memory and the passes around the GEMMs, not the
GEMMs. Named with ``--op`` only (not in a default run).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blockfuse.bench.spec import OpBenchmark, Shape, compiled

# (tokens, d, hidden): SigLIP-2 so400m's MLP (1152 -> 4304), a 4k-wide GELU MLP, Llama-3 8B's (4096 -> 14336).
UNGATED_SHAPES: tuple[Shape, ...] = ((16384, 1152, 4304), (8192, 4096, 16384))
GATED_SHAPES: tuple[Shape, ...] = ((8192, 4096, 14336), (16384, 2048, 8192))
CPU_SHAPES: tuple[Shape, ...] = ((37, 24, 40), (8, 64, 72))


def _weight(rows: int, fan_in: int, dtype, device) -> torch.Tensor:
    return torch.randn(rows, fan_in, device=device, dtype=dtype) * (1.0 / math.sqrt(fan_in))


def _linear_act_inputs(shape, dtype, device):
    tokens, d, hidden = shape
    return {"x": torch.randn(tokens, d, dtype=dtype, device=device), "weight": _weight(hidden, d, dtype, device),
            "bias": torch.randn(hidden, dtype=dtype, device=device) * 0.1}


def _fused_mlp_inputs(shape, dtype, device):
    tokens, d, hidden = shape
    return {**_linear_act_inputs(shape, dtype, device), "fc2_weight": _weight(d, hidden, dtype, device),
            "fc2_bias": torch.randn(d, dtype=dtype, device=device) * 0.1}


def _gated_mlp_inputs(shape, dtype, device):
    tokens, d, hidden = shape
    return {"x": torch.randn(tokens, d, dtype=dtype, device=device),
            "gate_up_weight": _weight(2 * hidden, d, dtype, device), "down_weight": _weight(d, hidden, dtype, device)}


def _bytes(gemms: int):
    """(shape, bytes per element) -> (forward, backward) bytes of inputs and outputs read and written once."""

    def count(shape, b):
        tokens, d, hidden = shape
        weights = gemms * d * hidden * b
        forward = tokens * d * b + weights + tokens * (hidden if gemms == 1 else d) * b
        return forward, 2 * forward
    return count


def _flops(gemm_widths: float):
    """(shape) -> (forward, backward) FLOPs of GEMMs totalling ``gemm_widths`` x tokens x d x hidden."""

    def count(shape):
        tokens, d, hidden = shape
        forward = int(2 * gemm_widths * tokens * d * hidden)
        return forward, 2 * forward
    return count


def _declare(name, make_inputs, reference, eager, blockfuse, shapes, grad_of, gemm_widths, gemms):
    return OpBenchmark(
        name=name, make_inputs=make_inputs, outputs=("out",), reference=reference,
        providers={"eager": eager, "reference": reference, "compile": compiled(reference), "blockfuse": blockfuse},
        bytes_moved=_bytes(gemms), shapes=shapes, cpu_shapes=CPU_SHAPES, grad_of=grad_of, default=False,
        flops=_flops(gemm_widths),
    )


def _op(name: str, activation: str):
    """A provider factory: ``blockfuse.<name>`` (or its ``_ref``) with the activation, over the declared inputs."""

    def factory():
        import blockfuse

        op = getattr(blockfuse, name)
        if name.startswith("linear_act"):
            return lambda x, weight, bias: op(x, weight, bias, activation)
        if name.startswith("fused_mlp"):
            return lambda x, weight, bias, fc2_weight, fc2_bias: op(x, weight, bias, fc2_weight, fc2_bias, activation)
        return lambda x, gate_up_weight, down_weight: op(x, gate_up_weight, None, down_weight, None, activation)
    return factory


def _eager_linear_gelu():
    return lambda x, weight, bias: F.gelu(F.linear(x, weight, bias), approximate="tanh")


def _eager_gelu_mlp():
    return lambda x, weight, bias, fc2_weight, fc2_bias: F.linear(
        F.gelu(F.linear(x, weight, bias), approximate="tanh"), fc2_weight, fc2_bias)


def _eager_swiglu_mlp():
    def mlp(x, gate_up_weight, down_weight):
        gate, up = F.linear(x, gate_up_weight).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, down_weight)
    return mlp


BENCHMARKS = (
    # out = gelu_tanh(x @ weight.T + bias)
    _declare("linear_act", _linear_act_inputs, _op("linear_act_ref", "gelu_tanh"), _eager_linear_gelu,
             _op("linear_act", "gelu_tanh"), UNGATED_SHAPES, "x", 1, 1),
    # out = fc2(gelu_tanh(fc1(x)))
    _declare("fused_mlp", _fused_mlp_inputs, _op("fused_mlp_ref", "gelu_tanh"), _eager_gelu_mlp,
             _op("fused_mlp", "gelu_tanh"), UNGATED_SHAPES, "x", 2, 2),
    # out = down(silu(gate) * up), gate|up packed
    _declare("gated_mlp", _gated_mlp_inputs, _op("gated_mlp_ref", "swiglu"), _eager_swiglu_mlp,
             _op("gated_mlp", "swiglu"), GATED_SHAPES, "x", 3, 3),
)
