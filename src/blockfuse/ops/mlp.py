"""Gated MLP ``down(act(gate) * up)`` that keeps only its input and pre-activation for the backward.

``gated_mlp(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)`` runs one gate|up
GEMM, the packed SwiGLU / GeGLU kernel of ``ops/gated.py`` and the down GEMM. Autograd would keep
the activation's output (the down GEMM's input, tokens x hidden) alive until the backward; here the
backward recomputes it from the saved pre-activation with one more pass of the gated kernel, and
frees it right after the down weight's gradient:

* saved: x (tokens x d) and the pre-activation (tokens x 2 hidden), as autograd keeps them anyway;
* not saved: the activation (tokens x hidden): at [8192 tokens, 8192 hidden] bf16, 128 MiB.

The GEMMs are cuBLAS calls (``torch.nn.functional.linear`` / ``torch.mm``); a later fused
GEMM + activation epilogue replaces the first GEMM and the gated kernel together. The file reads:
launchers (the GEMMs around the gated kernels), custom ops, public functional, reference.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from blockfuse.ops.checks import check_like
from blockfuse.ops.gated import _gated_backward, _gated_forward, geglu_ref, swiglu_ref
from blockfuse.runtime import use_triton

ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu_tanh", "geglu_erf": "gelu"}
# The backward recomputes the activation in this many blocks of hidden columns (none narrower than
# BACKWARD_MIN_COLUMNS) and makes the hidden gradient in as many blocks of rows (none under
# BACKWARD_MIN_ROWS): smaller GEMMs lose efficiency, so small inputs take one block.
BACKWARD_BLOCKS = 4
BACKWARD_MIN_ROWS = 1024
BACKWARD_MIN_COLUMNS = 512


# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------


def _mlp_forward(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation):
    """(y, pre) with pre = x @ gate_up_weight^T + gate_up_bias, (..., 2 hidden)."""
    pre = F.linear(x, gate_up_weight, gate_up_bias)  # (..., 2 hidden): gate then up
    hidden = _gated_forward(pre, None, ACTIVATIONS[activation])  # (..., hidden)
    return F.linear(hidden, down_weight, down_bias), pre


def _column_sum(t2: Tensor) -> Tensor:
    """Sum over rows of a (tokens, n) gradient as one GEMV (fp32 accumulation in cuBLAS).

    NOTE: ``t2.sum(0)`` on a bf16 (8192, 8192) gradient allocated 132 MiB of temporaries on an
    H200 (torch 2.11), the largest allocation at the block's peak; the GEMV allocates only n."""
    return torch.mv(t2.t(), t2.new_ones(t2.shape[0]))


def _mlp_backward(dy, x, pre, gate_up_weight, down_weight, activation, has_gate_up_bias, has_down_bias,
                  overwrite_pre=False):
    """(dx, d gate_up_weight, d gate_up_bias, d down_weight, d down_bias); biases None without them.

    ``overwrite_pre``: write the pre-activation's gradient over ``pre`` itself (the gated kernel
    reads each element before writing it), so the backward needs no second tokens x 2 hidden buffer.
    """
    d_out, d_in = dy.shape[-1], x.shape[-1]
    dy2 = dy.reshape(-1, d_out)
    x2 = x.reshape(-1, d_in)
    pre2 = pre.reshape(-1, pre.shape[-1])
    # NOTE: the activation is recomputed here rather than saved by the forward (one more read of
    # pre and write of hidden, against keeping tokens x hidden alive through the whole step), and a
    # block of hidden columns at a time: each block's down-weight gradient columns are exact (no
    # sum across blocks), and the step's peak holds a quarter of tokens x hidden.
    hidden_size = pre2.shape[-1] // 2
    d_down_weight = torch.empty_like(down_weight)  # (d_out, hidden)
    width = max(BACKWARD_MIN_COLUMNS, -(-hidden_size // BACKWARD_BLOCKS))
    for start in range(0, hidden_size, width):
        cols = slice(start, min(start + width, hidden_size))
        gate = pre2[:, cols]
        up = pre2[:, hidden_size + cols.start:hidden_size + cols.stop]
        hidden = _gated_forward(gate, up, ACTIVATIONS[activation])  # (tokens, block columns)
        d_down_weight[:, cols] = dy2.t().mm(hidden)
        del hidden
    d_down_bias = _column_sum(dy2) if has_down_bias else None
    # NOTE: the hidden gradient is made and consumed a block of rows at a time: each block's
    # (rows, hidden) GEMM output feeds the gated backward kernel at once, so the step's peak holds
    # a quarter of tokens x hidden instead of all of it (rows are independent: exact, same numbers).
    d_pre = pre2 if overwrite_pre else torch.empty_like(pre2)
    tokens = dy2.shape[0]
    step = max(BACKWARD_MIN_ROWS, -(-tokens // BACKWARD_BLOCKS))
    for start in range(0, tokens, step):
        rows = slice(start, min(start + step, tokens))
        d_hidden = dy2[rows].mm(down_weight)  # (rows, hidden)
        _gated_backward(d_hidden, pre2[rows], None, ACTIVATIONS[activation], True, False, out=d_pre[rows])
        del d_hidden
    d_gate_up_weight = d_pre.t().mm(x2)
    d_gate_up_bias = _column_sum(d_pre) if has_gate_up_bias else None
    dx = d_pre.mm(gate_up_weight).view(x.shape)
    return dx, d_gate_up_weight, d_gate_up_bias, d_down_weight, d_down_bias


# ----------------------------------------------------------------------------------------
# Autograd: an autograd.Function in eager mode, custom ops under torch.compile (as every op)
# ----------------------------------------------------------------------------------------


class _GatedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation):
        y, pre = _mlp_forward(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)
        ctx.save_for_backward(x, pre, gate_up_weight, down_weight)
        ctx.config = (activation, gate_up_bias is not None, down_bias is not None)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, pre, gate_up_weight, down_weight = ctx.saved_tensors
        activation, has_gate_up_bias, has_down_bias = ctx.config
        # NOTE: pre never leaves this Function, so its gradient overwrites it (no second tokens x
        # 2 hidden buffer at the step's peak). Its version is bumped: a second backward through
        # the same graph (retain_graph=True) raises autograd's "modified by an inplace operation"
        # error instead of reading the overwritten values.
        grads = _mlp_backward(dy, x, pre, gate_up_weight, down_weight, activation, has_gate_up_bias,
                              has_down_bias, overwrite_pre=True)
        torch.autograd.graph.increment_version(pre)
        return (*grads, None)


@torch.library.custom_op("blockfuse::gated_mlp", mutates_args=())
def _gated_mlp_op(x: Tensor, gate_up_weight: Tensor, gate_up_bias: Optional[Tensor], down_weight: Tensor,
                  down_bias: Optional[Tensor], activation: str) -> tuple[Tensor, Tensor]:
    return _mlp_forward(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)


@_gated_mlp_op.register_fake
def _(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation):
    return (x.new_empty((*x.shape[:-1], down_weight.shape[0])),
            x.new_empty((*x.shape[:-1], gate_up_weight.shape[0])))


# NOTE: the backward op overwrites pre with its gradient, as the eager Function does; it is declared
# as mutating pre so the compiler orders it after every other reader of pre (there are none: pre is
# the forward op's private second output).
@torch.library.custom_op("blockfuse::gated_mlp_backward", mutates_args=("pre",))
def _gated_mlp_backward_op(dy: Tensor, x: Tensor, pre: Tensor, gate_up_weight: Tensor, down_weight: Tensor,
                           activation: str, has_gate_up_bias: bool,
                           has_down_bias: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    dx, dwg, dbg, dwd, dbd = _mlp_backward(dy, x, pre, gate_up_weight, down_weight, activation, has_gate_up_bias,
                                           has_down_bias, overwrite_pre=True)
    # NOTE: a fresh empty tensor for each missing bias: two returns may not alias each other.
    return (dx, dwg, x.new_empty((0,)) if dbg is None else dbg, dwd,
            x.new_empty((0,)) if dbd is None else dbd)


@_gated_mlp_backward_op.register_fake
def _(dy, x, pre, gate_up_weight, down_weight, activation, has_gate_up_bias, has_down_bias):
    def bias(has, n):
        return x.new_empty((n,) if has else (0,))

    return (x.new_empty(x.shape), gate_up_weight.new_empty(gate_up_weight.shape),
            bias(has_gate_up_bias, gate_up_weight.shape[0]), down_weight.new_empty(down_weight.shape),
            bias(has_down_bias, down_weight.shape[0]))


def _mlp_setup(ctx, inputs, output):
    x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation = inputs
    ctx.save_for_backward(x, output[1], gate_up_weight, down_weight)
    ctx.config = (activation, gate_up_bias is not None, down_bias is not None)


def _mlp_backward_autograd(ctx, dy, dpre):
    x, pre, gate_up_weight, down_weight = ctx.saved_tensors
    activation, has_gate_up_bias, has_down_bias = ctx.config
    dx, dwg, dbg, dwd, dbd = _gated_mlp_backward_op(dy, x, pre, gate_up_weight, down_weight, activation,
                                                    has_gate_up_bias, has_down_bias)
    return dx, dwg, dbg if has_gate_up_bias else None, dwd, dbd if has_down_bias else None, None


_gated_mlp_op.register_autograd(_mlp_backward_autograd, setup_context=_mlp_setup)


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------


def _check_mlp_args(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if not isinstance(x, Tensor) or x.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise TypeError(f"x: expected a floating-point tensor, got "
                        f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x: expected at least one dimension (the features), got a scalar")
    for name, w in (("gate_up_weight", gate_up_weight), ("down_weight", down_weight)):
        if not isinstance(w, Tensor) or w.dim() != 2:
            raise ValueError(f"{name}: expected a 2-D tensor (out_features, in_features), got "
                             f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}")
        check_like(name, w, x, "x", shape=False)
    d, two_hidden = x.shape[-1], gate_up_weight.shape[0]
    if gate_up_weight.shape[1] != d:
        raise ValueError(f"gate_up_weight: expected (2 * hidden, {d}) for x's {d} features, "
                         f"got {tuple(gate_up_weight.shape)}")
    if two_hidden % 2 or down_weight.shape[1] != two_hidden // 2:
        raise ValueError(f"down_weight: expected (out_features, {two_hidden // 2}) for gate_up_weight's "
                         f"{two_hidden} rows (gate then up), got {tuple(down_weight.shape)}")
    for name, b, n in (("gate_up_bias", gate_up_bias, two_hidden), ("down_bias", down_bias, down_weight.shape[0])):
        if b is not None:
            if not isinstance(b, Tensor) or tuple(b.shape) != (n,):
                raise ValueError(f"{name}: expected shape ({n},), got "
                                 f"{tuple(b.shape) if isinstance(b, Tensor) else type(b).__name__}")
            check_like(name, b, x, "x", shape=False)


def gated_mlp(x: Tensor, gate_up_weight: Tensor, gate_up_bias: Optional[Tensor], down_weight: Tensor,
              down_bias: Optional[Tensor] = None, activation: str = "swiglu") -> Tensor:
    """``linear(act(gate) * up, down_weight, down_bias)`` with ``gate | up = linear(x, gate_up_weight,
    gate_up_bias)``; ``activation``: ``"swiglu"`` (SiLU), ``"geglu"`` (GELU tanh) or ``"geglu_erf"``.

    gate_up_weight (2 hidden, d): the gate rows then the up rows; down_weight (d_out, hidden).
    The backward recomputes the activation instead of keeping it (see the module notes).
    """
    _check_mlp_args(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)
    if not use_triton(x) or x.dtype == torch.float64:
        return gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)
    if torch.compiler.is_compiling():
        return _gated_mlp_op(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)[0]
    return _GatedMLPFunction.apply(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback
# ----------------------------------------------------------------------------------------


def gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias=None, activation="swiglu"):
    """Pure-PyTorch :func:`gated_mlp`: the GEMMs in x's dtype, the activation in fp32 (as the kernel)."""
    pre = F.linear(x, gate_up_weight, gate_up_bias)
    if activation == "swiglu":
        hidden = swiglu_ref(pre)
    else:
        hidden = geglu_ref(pre, approximate="tanh" if activation == "geglu" else "none")
    return F.linear(hidden, down_weight, down_bias)
