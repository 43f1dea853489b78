"""Gated MLP ``down(act(gate) * up)`` that keeps only its input and pre-activation for the backward.

``gated_mlp(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)`` runs one gate|up
GEMM (or two, for separate gate and up weights: ``up_weight=``), the SwiGLU / GeGLU kernel of
``ops/gated.py`` and the down GEMM. Autograd would keep
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

import math
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
# The forward makes the activation (the down GEMM's input) this many blocks of rows at a time, none
# under FORWARD_MIN_ROWS: only a block of tokens x hidden is alive beside the saved pre-activation.
FORWARD_BLOCKS = 4
FORWARD_MIN_ROWS = 1024


# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------


def linear_into(x2: Tensor, weight: Tensor, bias: Optional[Tensor], out: Tensor) -> Tensor:
    """``out = x2 @ weight.T + bias`` for a contiguous (rows, out features) ``out`` (a row block of a
    larger output): one cuBLAS call, the bias in its epilogue."""
    if bias is None:
        return torch.mm(x2, weight.t(), out=out)
    return torch.addmm(bias, x2, weight.t(), out=out)


def down_projection(hidden_of_rows, tokens: int, down_weight: Tensor, down_bias: Optional[Tensor],
                    like: Tensor) -> Tensor:
    """``hidden @ down_weight.T + down_bias`` as (tokens, d_out), with ``hidden_of_rows(rows)`` making
    the hidden activation of a slice of rows just before its GEMM.

    NOTE: a block of rows at a time (FORWARD_BLOCKS), so the whole tokens x hidden activation is never
    alive: in a training step it sits beside the saved pre-activation at the forward's peak (64 of the
    `standard` block's 321 MiB on an H200). Rows are independent, so the numbers are the same; each
    block's GEMM still fills the GPU (1024 rows or more)."""
    y2 = like.new_empty((tokens, down_weight.shape[0]))
    for rows in column_blocks(tokens, FORWARD_BLOCKS, FORWARD_MIN_ROWS):
        hidden = hidden_of_rows(rows)
        linear_into(hidden, down_weight, down_bias, y2[rows])
        del hidden
    return y2


def _gate_up_forward(x, gate_weight, gate_bias, up_weight, up_bias):
    """(gate_pre, up_pre). Packed weights (up_weight None): gate_pre = the (..., 2 hidden) output of the one
    gate|up GEMM, up_pre an empty tensor. Separate weights: the two GEMM outputs."""
    if up_weight is None:
        return F.linear(x, gate_weight, gate_bias), x.new_empty((0,))
    return F.linear(x, gate_weight, gate_bias), F.linear(x, up_weight, up_bias)


def _pre_views(gate_pre, up_pre, hidden_size):
    """(pre2 or None, gate2, up2): (tokens, 2 hidden) packed pre-activation and its (tokens, hidden)
    gate and up views, or the separate ones (pre2 None)."""
    if up_pre.numel() == 0 and gate_pre.shape[-1] == 2 * hidden_size:
        pre2 = gate_pre.view(-1, 2 * hidden_size)
        return pre2, pre2[:, :hidden_size], pre2[:, hidden_size:]
    return None, gate_pre.view(-1, hidden_size), up_pre.view(-1, hidden_size)


def _down_forward(gate_pre, up_pre, down_weight, down_bias, activation):
    """``down(act(gate) * up)`` from the pre-activations, (..., d_out)."""
    act = ACTIVATIONS[activation]
    pre2, gate2, up2 = _pre_views(gate_pre, up_pre, down_weight.shape[1])

    def hidden_of_rows(rows):  # (rows, hidden); packed: the kernel splits each row in place
        if pre2 is not None:
            return _gated_forward(pre2[rows], None, act)
        return _gated_forward(gate2[rows], up2[rows], act)

    tokens = math.prod(gate_pre.shape[:-1])
    y2 = down_projection(hidden_of_rows, tokens, down_weight, down_bias, gate_pre)
    return y2.view(*gate_pre.shape[:-1], down_weight.shape[0])


def _mlp_forward(x, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias, activation):
    """(y, gate_pre, up_pre): see :func:`_gate_up_forward`."""
    gate_pre, up_pre = _gate_up_forward(x, gate_weight, gate_bias, up_weight, up_bias)
    return _down_forward(gate_pre, up_pre, down_weight, down_bias, activation), gate_pre, up_pre


def column_blocks(n: int, blocks: int, min_width: int, align: int = 64) -> list[slice]:
    """About ``blocks`` slices covering ``range(n)``, none narrower than ``min_width`` (but the last),
    each width a multiple of ``align`` elements.

    NOTE: aligned, a block's (tokens, width) buffer has rows on 16-byte boundaries. Unaligned (4304
    hidden columns in 4 blocks of 1076), cuBLAS left its Hopper kernels for an sm_80 one and each
    block's weight-gradient GEMM took 0.83 ms instead of about a quarter of the full GEMM's 0.87 ms
    (H200, bf16, 65536 tokens)."""
    width = max(min_width, -(-n // blocks))
    width = -(-width // align) * align
    return [slice(start, min(start + width, n)) for start in range(0, n, width)]


def _column_sum(t2: Tensor) -> Tensor:
    """Sum over rows of a (tokens, n) gradient as one GEMV (fp32 accumulation in cuBLAS).

    NOTE: ``t2.sum(0)`` on a bf16 (8192, 8192) gradient allocated 132 MiB of temporaries on an
    H200 (torch 2.11), the largest allocation at the block's peak; the GEMV allocates only n."""
    return torch.mv(t2.t(), t2.new_ones(t2.shape[0]))


def _down_backward(dy, gate_pre, up_pre, down_weight, activation, has_down_bias, overwrite=False):
    """The backward of :func:`_down_forward`: (d_gate_pre, d_up_pre, d down_weight, d down_bias). The
    pre-activations' gradients come in the pre-activations' form (packed: d_up_pre None);
    ``overwrite``: written over the pre-activations themselves (the gated kernel reads each element
    before writing it), so the backward needs no second tokens x 2 hidden buffer."""
    act = ACTIVATIONS[activation]
    dy2 = dy.reshape(-1, dy.shape[-1])
    hidden_size = down_weight.shape[1]
    pre2, gate2, up2 = _pre_views(gate_pre, up_pre, hidden_size)
    tokens = gate2.shape[0]

    # NOTE: the activation is recomputed here rather than saved by the forward (one more read of
    # the pre-activation and write of hidden, against keeping tokens x hidden alive through the
    # whole step), and a block of hidden columns at a time: each block's down-weight gradient
    # columns are exact (no sum across blocks), and the step's peak holds a quarter of tokens x hidden.
    d_down_weight = torch.empty_like(down_weight)  # (d_out, hidden)
    for cols in column_blocks(hidden_size, BACKWARD_BLOCKS, BACKWARD_MIN_COLUMNS):
        hidden = _gated_forward(gate2[:, cols], up2[:, cols], act)  # (tokens, block columns)
        torch.mm(dy2.t(), hidden, out=d_down_weight[:, cols])  # straight into the column block (ld = hidden)
        del hidden
    d_down_bias = _column_sum(dy2) if has_down_bias else None

    # NOTE: the hidden gradient is made and consumed a block of rows at a time: each block's
    # (rows, hidden) GEMM output feeds the gated backward kernel at once, so the peak holds a
    # quarter of tokens x hidden instead of all of it (rows are independent: exact, same numbers).
    if overwrite:
        d_gate_pre, d_up_pre, d_gate2, d_up2 = gate_pre, None if pre2 is not None else up_pre, gate2, up2
    elif pre2 is not None:
        d_gate_pre, d_up_pre = torch.empty_like(gate_pre), None
        d_pre2 = d_gate_pre.view(-1, 2 * hidden_size)
        d_gate2, d_up2 = d_pre2[:, :hidden_size], d_pre2[:, hidden_size:]
    else:
        d_gate_pre, d_up_pre = torch.empty_like(gate_pre), torch.empty_like(up_pre)
        d_gate2, d_up2 = d_gate_pre.view(-1, hidden_size), d_up_pre.view(-1, hidden_size)
    step = max(BACKWARD_MIN_ROWS, -(-tokens // BACKWARD_BLOCKS))
    for start in range(0, tokens, step):
        rows = slice(start, min(start + step, tokens))
        d_hidden = dy2[rows].mm(down_weight)  # (rows, hidden)
        _gated_backward(d_hidden, gate2[rows], up2[rows], act, True, True, out=(d_gate2[rows], d_up2[rows]))
        del d_hidden
    return d_gate_pre, d_up_pre, d_down_weight, d_down_bias


def _gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, has_gate_bias, has_up_bias):
    """The backward of :func:`_gate_up_forward`: (dx, d gate_weight, d gate_bias, d up_weight, d up_bias),
    a bias gradient None without that bias, the up ones None for packed weights."""
    x2 = x.reshape(-1, x.shape[-1])
    d_gate2 = d_gate_pre.view(-1, d_gate_pre.shape[-1])
    d_gate_weight = d_gate2.t().mm(x2)
    d_gate_bias = _column_sum(d_gate2) if has_gate_bias else None
    if up_weight is None:
        return d_gate2.mm(gate_weight).view(x.shape), d_gate_weight, d_gate_bias, None, None
    d_up2 = d_up_pre.view(-1, d_up_pre.shape[-1])
    d_up_weight = d_up2.t().mm(x2)
    d_up_bias = _column_sum(d_up2) if has_up_bias else None
    dx = torch.addmm(d_gate2.mm(gate_weight), d_up2, up_weight)
    return dx.view(x.shape), d_gate_weight, d_gate_bias, d_up_weight, d_up_bias


def _mlp_backward(dy, x, gate_pre, up_pre, gate_weight, up_weight, down_weight, activation, has_biases,
                  overwrite=False):
    """(dx, d gate_weight, d gate_bias, d up_weight, d up_bias, d down_weight, d down_bias); a bias
    gradient is None without that bias (``has_biases``: gate, up, down), the up ones None for packed
    weights. ``overwrite``: see :func:`_down_backward`."""
    has_gate_bias, has_up_bias, has_down_bias = has_biases
    d_gate_pre, d_up_pre, d_down_weight, d_down_bias = _down_backward(
        dy, gate_pre, up_pre, down_weight, activation, has_down_bias, overwrite)
    return (*_gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, has_gate_bias, has_up_bias),
            d_down_weight, d_down_bias)


# ----------------------------------------------------------------------------------------
# Autograd: an autograd.Function in eager mode, custom ops under torch.compile (as every op)
# ----------------------------------------------------------------------------------------


# NOTE: eager calls record the MLP as two autograd nodes, the gate|up GEMM(s) and the rest (activation
# and down GEMM): the engine frees the down part's incoming gradient dy (tokens x d) when that node
# returns, before the gate|up node allocates its weight gradient and dx, where the MLP's backward
# peaks (olmo2-1b's block: 673 -> 641 MiB on an H200). The pre-activations never leave the MLP, so
# the down node writes their gradient over them and hands that storage on as the gradient.


class _GateUpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate_weight, gate_bias, up_weight, up_bias):
        gate_pre, up_pre = _gate_up_forward(x, gate_weight, gate_bias, up_weight, up_bias)
        ctx.save_for_backward(x, gate_weight, up_weight)
        ctx.has_biases = (gate_bias is not None, up_bias is not None)
        ctx.set_materialize_grads(False)
        return gate_pre, up_pre

    @staticmethod
    @once_differentiable
    def backward(ctx, d_gate_pre, d_up_pre):
        x, gate_weight, up_weight = ctx.saved_tensors
        dx, dwg, dbg, dwu, dbu = _gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, *ctx.has_biases)
        return dx, dwg, dbg, dwu, dbu


class _DownFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate_pre, up_pre, down_weight, down_bias, activation):
        y = _down_forward(gate_pre, up_pre, down_weight, down_bias, activation)
        ctx.save_for_backward(gate_pre, up_pre, down_weight)
        ctx.config = (activation, down_bias is not None)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        gate_pre, up_pre, down_weight = ctx.saved_tensors
        activation, has_down_bias = ctx.config
        d_gate_pre, d_up_pre, dwd, dbd = _down_backward(dy, gate_pre, up_pre, down_weight, activation, has_down_bias,
                                                        overwrite=True)
        # NOTE: their versions are bumped: a second backward through the same graph
        # (retain_graph=True) raises autograd's "modified by an inplace operation" error instead of
        # reading the overwritten values. Handed on detached (the same storage, no graph).
        torch.autograd.graph.increment_version(gate_pre)
        torch.autograd.graph.increment_version(up_pre)
        return d_gate_pre.detach(), None if d_up_pre is None else d_up_pre.detach(), dwd, dbd, None


def _gated_mlp_eager(x, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias, activation):
    gate_pre, up_pre = _GateUpFunction.apply(x, gate_weight, gate_bias, up_weight, up_bias)
    return _DownFunction.apply(gate_pre, up_pre, down_weight, down_bias, activation)


@torch.library.custom_op("blockfuse::gated_mlp", mutates_args=())
def _gated_mlp_op(x: Tensor, gate_weight: Tensor, gate_bias: Optional[Tensor], up_weight: Optional[Tensor],
                  up_bias: Optional[Tensor], down_weight: Tensor, down_bias: Optional[Tensor],
                  activation: str) -> tuple[Tensor, Tensor, Tensor]:
    return _mlp_forward(x, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias, activation)


@_gated_mlp_op.register_fake
def _(x, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias, activation):
    tokens = x.shape[:-1]
    up = x.new_empty((0,)) if up_weight is None else x.new_empty((*tokens, up_weight.shape[0]))
    return x.new_empty((*tokens, down_weight.shape[0])), x.new_empty((*tokens, gate_weight.shape[0])), up


# NOTE: the backward op overwrites the pre-activations with their gradients, as the eager Function
# does; it is declared as mutating them so the compiler orders it after every other reader (there
# are none: they are the forward op's private outputs).
@torch.library.custom_op("blockfuse::gated_mlp_backward", mutates_args=("gate_pre", "up_pre"))
def _gated_mlp_backward_op(dy: Tensor, x: Tensor, gate_pre: Tensor, up_pre: Tensor, gate_weight: Tensor,
                           up_weight: Optional[Tensor], down_weight: Tensor, activation: str, has_gate_bias: bool,
                           has_up_bias: bool,
                           has_down_bias: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    grads = _mlp_backward(dy, x, gate_pre, up_pre, gate_weight, up_weight, down_weight, activation,
                          (has_gate_bias, has_up_bias, has_down_bias), overwrite=True)
    # NOTE: a fresh empty tensor for each missing gradient: two returns may not alias each other.
    return tuple(x.new_empty((0,)) if g is None else g for g in grads)


@_gated_mlp_backward_op.register_fake
def _(dy, x, gate_pre, up_pre, gate_weight, up_weight, down_weight, activation, has_gate_bias, has_up_bias,
      has_down_bias):
    def like(weight, present=True, bias=False):
        if weight is None or not present:
            return x.new_empty((0,))
        return weight.new_empty((weight.shape[0],) if bias else weight.shape)

    return (x.new_empty(x.shape), like(gate_weight), like(gate_weight, has_gate_bias, True), like(up_weight),
            like(up_weight, has_up_bias, True), like(down_weight), like(down_weight, has_down_bias, True))


def _mlp_setup(ctx, inputs, output):
    x, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias, activation = inputs
    ctx.save_for_backward(x, output[1], output[2], gate_weight, up_weight, down_weight)
    ctx.config = (activation, (gate_bias is not None, up_bias is not None, down_bias is not None))


def _mlp_backward_autograd(ctx, dy, d_gate_pre, d_up_pre):
    x, gate_pre, up_pre, gate_weight, up_weight, down_weight = ctx.saved_tensors
    activation, has_biases = ctx.config
    dx, dwg, dbg, dwu, dbu, dwd, dbd = _gated_mlp_backward_op(dy, x, gate_pre, up_pre, gate_weight, up_weight,
                                                              down_weight, activation, *has_biases)
    has_gate_bias, has_up_bias, has_down_bias = has_biases
    return (dx, dwg, dbg if has_gate_bias else None, None if up_weight is None else dwu,
            dbu if has_up_bias else None, dwd, dbd if has_down_bias else None, None)


_gated_mlp_op.register_autograd(_mlp_backward_autograd, setup_context=_mlp_setup)


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------


def _check_mlp_args(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation, up_weight, up_bias):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if not isinstance(x, Tensor) or x.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise TypeError(f"x: expected a floating-point tensor, got "
                        f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x: expected at least one dimension (the features), got a scalar")
    weights = [("gate_up_weight", gate_up_weight), ("down_weight", down_weight)]
    if up_weight is not None:
        weights.append(("up_weight", up_weight))
    elif up_bias is not None:
        raise ValueError("up_bias: given without up_weight (packed weights take one gate_up_bias)")
    for name, w in weights:
        if not isinstance(w, Tensor) or w.dim() != 2:
            raise ValueError(f"{name}: expected a 2-D tensor (out_features, in_features), got "
                             f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}")
        check_like(name, w, x, "x", shape=False)
    d, rows = x.shape[-1], gate_up_weight.shape[0]
    if gate_up_weight.shape[1] != d:
        expected = "(hidden" if up_weight is not None else "(2 * hidden"
        raise ValueError(f"gate_up_weight: expected {expected}, {d}) for x's {d} features, "
                         f"got {tuple(gate_up_weight.shape)}")
    if up_weight is not None:
        hidden = rows
        if tuple(up_weight.shape) != tuple(gate_up_weight.shape):
            raise ValueError(f"up_weight: expected shape {tuple(gate_up_weight.shape)} like the gate weight "
                             f"(gate_up_weight), got {tuple(up_weight.shape)}")
    else:
        hidden = rows // 2
        if rows % 2:
            raise ValueError(f"gate_up_weight: packed weights have 2 * hidden rows (gate then up), got {rows}")
    if down_weight.shape[1] != hidden:
        raise ValueError(f"down_weight: expected (out_features, {hidden}) for the hidden size {hidden}, "
                         f"got {tuple(down_weight.shape)}")
    for name, b, n in (("gate_up_bias", gate_up_bias, rows), ("up_bias", up_bias, rows),
                       ("down_bias", down_bias, down_weight.shape[0])):
        if b is not None:
            if not isinstance(b, Tensor) or tuple(b.shape) != (n,):
                raise ValueError(f"{name}: expected shape ({n},), got "
                                 f"{tuple(b.shape) if isinstance(b, Tensor) else type(b).__name__}")
            check_like(name, b, x, "x", shape=False)


def gated_mlp(x: Tensor, gate_up_weight: Tensor, gate_up_bias: Optional[Tensor], down_weight: Tensor,
              down_bias: Optional[Tensor] = None, activation: str = "swiglu", *,
              up_weight: Optional[Tensor] = None, up_bias: Optional[Tensor] = None) -> Tensor:
    """``linear(act(gate) * up, down_weight, down_bias)``; ``activation``: ``"swiglu"`` (SiLU),
    ``"geglu"`` (GELU tanh) or ``"geglu_erf"``.

    Packed weights (one gate|up GEMM): gate_up_weight (2 hidden, d), the gate rows then the up rows,
    and gate_up_bias (2 hidden,). Separate weights (Hugging Face's gate_proj and up_proj, left as
    they are): gate_up_weight is the gate weight (hidden, d), gate_up_bias its bias, and
    ``up_weight`` (hidden, d) / ``up_bias`` the up projection's. down_weight (d_out, hidden).
    The backward recomputes the activation instead of keeping it (see the module notes).
    """
    _check_mlp_args(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation, up_weight, up_bias)
    if not use_triton(x) or x.dtype == torch.float64:
        return gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation,
                             up_weight=up_weight, up_bias=up_bias)
    args = (x, gate_up_weight, gate_up_bias, up_weight, up_bias, down_weight, down_bias, activation)
    if torch.compiler.is_compiling():
        return _gated_mlp_op(*args)[0]
    return _gated_mlp_eager(*args)


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback
# ----------------------------------------------------------------------------------------


def gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias=None, activation="swiglu", *,
                  up_weight=None, up_bias=None):
    """Pure-PyTorch :func:`gated_mlp`: the GEMMs in x's dtype, the activation in fp32 (as the kernel)."""
    gate = F.linear(x, gate_up_weight, gate_up_bias)
    up = None if up_weight is None else F.linear(x, up_weight, up_bias)
    if activation == "swiglu":
        hidden = swiglu_ref(gate, up)
    else:
        hidden = geglu_ref(gate, up, approximate="tanh" if activation == "geglu" else "none")
    return F.linear(hidden, down_weight, down_bias)
