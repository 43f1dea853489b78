"""Linear layer and its activation, ``act(x @ weight.T + bias)``, keeping no activation for the backward.

* ``linear_act(x, weight, bias, activation)``: ``activation`` is one of ``activation.ACTIVATIONS``:
  ``gelu_tanh``, ``gelu`` (erf), ``silu``, ``relu``, or a gated form, ``swiglu`` (SiLU), ``geglu``
  (GELU tanh), ``geglu_erf``, where ``weight`` holds the gate rows then the up rows (2 hidden, K) and the
  output (..., hidden) is ``act(gate) * up``.

The GEMM is cuBLAS's (``F.linear``, the bias in cuBLASLt's epilogue) and the activation the elementwise
kernel of ``ops/gated.py``, computed from the pre-activation rounded to x's dtype, as PyTorch does. What
the op keeps for the backward: x and the pre-activation ``x @ W.T + b`` (in x's dtype; gated: all 2 hidden
columns), never the activation. The backward recomputes the activation's derivative from the
pre-activation and writes the pre-activation's gradient over the pre-activation itself (the buffer is
private to the op), so it allocates no second tokens x hidden buffer. The two-GEMM MLP on it is
``ops/mlp.py``'s ``fused_mlp``.

NOTE: Triton GEMMs with the activation in their epilogue (and the derivative in the backward GEMMs'
prologue / epilogue) measured slower than cuBLAS + this kernel on an H200; they live in
``benchmarks/triton_gemm_epilogue.py`` (``benchmarks/NOTES.md``, "Linear + activation").

The file reads: launchers (ops ``blockfuse::linear_act_fwd`` and ``linear_act_bwd``, see ``ops/launch.py``);
the autograd Function; the public functional and its checks (shared with ``ops/mlp.py``); the reference.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from blockfuse.ops.activation import ACTIVATIONS, activate_ref, check_activation, column_sum
from blockfuse.ops.checks import check_like
from blockfuse.ops.gated import launch_gated_backward, launch_gated_forward
from blockfuse.ops.launch import as_rows, empty_if_none, launcher_op, tracing, unviewed
from blockfuse.runtime import use_triton

# What ``path=`` accepts: the one path (cuBLAS GEMMs and the Triton activation kernel). The argument is kept
# for callers that pass it; the Triton GEMM paths ("triton", "triton_tma") moved to
# benchmarks/triton_gemm_epilogue.py.
PATHS = ("auto", "cublas")
# NOTE: a forward that keeps no pre-activation (nothing to backpropagate) with GELU-tanh or ReLU runs, on
# CUDA in fp16 / bf16, as one cuBLASLt GEMM with the bias and the activation in its epilogue
# (``torch._addmm_activation``: CUBLASLT_EPILOGUE_GELU_BIAS / RELU_BIAS), computed from the fp32
# accumulator and rounded once, with no tokens x N round trip through memory. A training forward keeps the
# GEMM + activation kernel: cuBLASLt's epilogue that also writes the pre-activation is not exposed by
# PyTorch. Not fp32: the epilogue's GELU was 20x as wrong as PyTorch's there (relative error 2e-6 against
# 1e-7 on an H200, a fast tanh). Measured in benchmarks/NOTES.md, "Linear + activation".
EPILOGUE_ACTIVATIONS = {"gelu_tanh": True, "relu": False}  # name -> torch._addmm_activation's use_gelu


# ----------------------------------------------------------------------------------------
# Launchers: plain Python that allocates and launches, registered as ops without autograd
# ----------------------------------------------------------------------------------------


def pre_halves(pre2: Tensor, gated: bool) -> tuple[Tensor, Optional[Tensor]]:
    """(gate, up) views of a (M, 2 n) gated pre-activation; (pre, None) otherwise."""
    if not gated:
        return pre2, None
    n = pre2.shape[1] // 2
    return pre2[:, :n], pre2[:, n:]


def uses_cublaslt_epilogue(x2: Tensor, weight: Tensor, activation: str, keep_pre: bool) -> bool:
    """Whether the forward of x2 (tokens, K) runs as one cuBLASLt GEMM with the activation in its epilogue
    (NOTE at EPILOGUE_ACTIVATIONS)."""
    return (not keep_pre and activation in EPILOGUE_ACTIVATIONS and x2.is_cuda
            and x2.dtype in (torch.float16, torch.bfloat16) and min(x2.shape[0], *weight.shape) > 1)


def linear_act_forward(x2: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str,
                       keep_pre: bool) -> tuple[Tensor, Optional[Tensor]]:
    """(y2, pre2) for x2 (tokens, K): y2 (tokens, n) and, when ``keep_pre``, the (tokens, rows of weight)
    pre-activation. For launchers (``ops/mlp.py``'s too)."""
    pointwise, gated = ACTIVATIONS[activation]
    if uses_cublaslt_epilogue(x2, weight, activation, keep_pre):
        # NOTE: on CUDA, _addmm_activation's GELU is the tanh form (cuBLASLt's epilogue, and
        # gelu(approximate="tanh") where PyTorch falls back to a separate kernel).
        bias_or_zeros = weight.new_zeros(weight.shape[0]) if bias is None else bias
        return torch._addmm_activation(bias_or_zeros, x2, weight.t(), use_gelu=EPILOGUE_ACTIVATIONS[activation]), None
    pre2 = F.linear(x2, weight, bias)  # (tokens, rows): bias in cuBLASLt's epilogue
    gate2, up2 = pre_halves(pre2, gated)
    y2 = x2.new_empty(gate2.shape)
    launch_gated_forward(gate2, up2, y2, pointwise)
    return y2, pre2 if keep_pre else None


@launcher_op("linear_act_fwd")
def _linear_act_fwd(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str,
                    keep_pre: bool) -> tuple[Tensor, Tensor]:
    """linear_act's forward: (y, the pre-activation, empty unless ``keep_pre``)."""
    y2, pre2 = linear_act_forward(x.reshape(-1, x.shape[-1]), weight, bias, activation, keep_pre)
    pre = None if pre2 is None else pre2.view(*x.shape[:-1], weight.shape[0])
    return unviewed(y2, *x.shape[:-1], y2.shape[1]), empty_if_none(pre, x)


def private(pre: Tensor) -> Tensor:
    """The pre-activation a backward overwrites with its gradient: ``pre`` itself eagerly.

    NOTE: traced by torch.compile, a copy: Inductor cannot overwrite a saved tensor anyway (it copies it
    before an op that mutates it), and writing into a graph input's views through user kernels is the
    pattern that ran into an illegal memory access in Inductor's scatter copies (torch 2.11, the gated
    MLP's row blocks); on a copy the kernels write an intermediate the compiler owns."""
    return pre.clone() if tracing() else pre


@launcher_op("linear_act_bwd", mutates_args=("pre",))
def _linear_act_bwd(dy: Tensor, x: Tensor, pre: Tensor, weight: Tensor, activation: str, needs_dx: bool,
                    needs_weight: bool, needs_bias: bool) -> tuple[Tensor, Tensor, Tensor]:
    """linear_act's backward: (dx, d weight, d bias), each empty unless asked for. ``pre`` is
    overwritten with its gradient."""
    pointwise, gated = ACTIVATIONS[activation]
    k, rows = x.shape[-1], weight.shape[0]
    pre2 = private(pre).view(-1, rows)  # (tokens, rows)
    gate2, up2 = pre_halves(pre2, gated)
    dy2 = as_rows(dy, gate2.shape[1]).to(pre.dtype)  # (tokens, n)
    dx = d_weight = d_bias = None
    if needs_dx or needs_weight or needs_bias:
        # NOTE: d_pre overwrites the pre-activation (private to this op): no second tokens x rows
        # buffer at the step's peak. The elementwise kernel reads each element before writing it.
        launch_gated_backward(dy2, gate2, up2, gate2, up2, pointwise)
        if needs_dx:
            dx = pre2.mm(weight).view(x.shape)
        if needs_weight:
            d_weight = pre2.t().mm(x.reshape(-1, k))
        if needs_bias:
            d_bias = column_sum(pre2)
    return empty_if_none(dx, x), empty_if_none(d_weight, weight), empty_if_none(d_bias, weight)


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------
#
# NOTE: the backward launcher overwrites the pre-activation with its gradient (it is private to the
# op: saved by the forward, read by nothing else); it declares it mutated, so under torch.compile
# the compiler orders it after every other reader. The Function bumps its version, so a second
# backward through the same graph (retain_graph=True) raises instead of reading the overwritten values.


class _LinearActFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        y, pre = _linear_act_fwd(x, weight, bias, activation, True)
        ctx.save_for_backward(x, pre, weight)  # x and the pre-activation: the activation is recomputed
        ctx.activation = activation
        return y

    @staticmethod
    def backward(ctx, dy):
        x, pre, weight = ctx.saved_tensors
        needs_dx, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        dx, d_weight, d_bias = _linear_act_bwd(dy, x, pre, weight, ctx.activation, needs_dx, needs_weight,
                                               needs_bias)
        torch.autograd.graph.increment_version(pre)
        return dx if needs_dx else None, d_weight if needs_weight else None, d_bias if needs_bias else None, None


# ----------------------------------------------------------------------------------------
# Public functional, and the checks ops/mlp.py shares
# ----------------------------------------------------------------------------------------


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def check_path(path: Optional[str]) -> None:
    """``path=``: None, "auto" or "cublas" (the one path; see PATHS)."""
    if path is not None and path not in PATHS:
        raise ValueError(f"path: expected one of {list(PATHS)} or None, got {path!r} (the Triton GEMM paths "
                         f"are a benchmark now: benchmarks/triton_gemm_epilogue.py)")


def check_linear(in_features: int, x: Tensor, weight: Tensor, bias: Optional[Tensor], gated: bool,
                 weight_name: str, bias_name: str, input_name: str = "x", activation: Optional[str] = None) -> int:
    """Checks one weight and its bias against an input of ``in_features`` features; dtype and device
    must be x's. ``gated``: the weight holds 2 * hidden rows (``activation`` names it in the error).
    Returns the output width (hidden, gated)."""
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        raise ValueError(f"{weight_name}: expected a 2-D tensor (out_features, in_features), got {_shape(weight)}")
    check_like(weight_name, weight, x, "x", shape=False)
    if weight.shape[1] != in_features:
        raise ValueError(f"{weight_name}: expected (out_features, {in_features}) for the {in_features} features "
                         f"of {input_name}, got {tuple(weight.shape)}")
    rows = weight.shape[0]
    if gated and rows % 2:
        raise ValueError(f"{weight_name}: the gated activation {activation!r} needs 2 * hidden rows (the gate rows "
                         f"then the up rows), got {rows}")
    check_bias(bias, rows, x, bias_name, f"{weight_name}'s {rows} rows")
    return rows // 2 if gated else rows


def check_bias(bias: Optional[Tensor], rows: int, x: Tensor, bias_name: str, what: str) -> None:
    """A bias of shape (rows,) like x, or None."""
    if bias is not None:
        if not isinstance(bias, Tensor) or tuple(bias.shape) != (rows,):
            raise ValueError(f"{bias_name}: expected shape ({rows},) for {what}, got {_shape(bias)}")
        check_like(bias_name, bias, x, "x", shape=False)


def check_input(x) -> None:
    if not isinstance(x, Tensor) or x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"x: expected a float16, bfloat16, float32 or float64 tensor, got "
                        f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x: expected at least one dimension (the features), got a scalar")


def wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear_act(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *,
               path: Optional[str] = None) -> Tensor:
    """``act(x @ weight.T + bias)``, keeping x and the pre-activation (not the activation) for the backward.

    x (..., K); weight (N, K), or for a gated activation (``swiglu``, ``geglu``, ``geglu_erf``)
    (2 H, K) with the gate rows first, output (..., H) ``act(gate) * up``; bias (N,) / (2 H,) or
    None. fp16, bf16 and fp32 run the kernels; fp64 and CPU tensors without ``TRITON_INTERPRET=1``
    take :func:`linear_act_ref`. ``path``: None, ``"auto"`` or ``"cublas"``, all the same one path (kept for
    callers that pass it; see the module notes).
    """
    check_input(x)
    _, gated = check_activation(activation)
    check_linear(x.shape[-1], x, weight, bias, gated, "weight", "bias", activation=activation)
    check_path(path)
    if not use_triton(x):
        return linear_act_ref(x, weight, bias, activation)
    if wants_grad(x, weight, bias):
        return _LinearActFunction.apply(x, weight, bias, activation)
    return _linear_act_fwd(x, weight, bias, activation, False)[0]  # no pre-activation written


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmarks' baseline
# ----------------------------------------------------------------------------------------


def activation_ref(pre: Tensor, activation: str) -> Tensor:
    """Pure-PyTorch act(pre) in fp32 (fp64 for fp64) of any activation of the table, gated ones on the
    packed (..., 2 hidden) pre-activation; returned in that compute dtype."""
    pointwise, gated = ACTIVATIONS[activation]
    pre = pre if pre.dtype == torch.float64 else pre.float()
    if gated:
        gate, up = pre.chunk(2, dim=-1)
        return activate_ref(gate, pointwise) * up
    return activate_ref(pre, pointwise)


def linear_act_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "gelu_tanh") -> Tensor:
    """Pure-PyTorch :func:`linear_act`: the GEMM in x's dtype, the activation on its result in fp32
    (fp64 for fp64)."""
    return activation_ref(F.linear(x, weight, bias), activation).to(x.dtype)
