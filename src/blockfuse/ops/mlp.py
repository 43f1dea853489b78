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
the two launchers (ops ``blockfuse::gated_mlp_down_fwd`` and ``blockfuse::gated_mlp_down_bwd_``, in
place and opaque under torch.compile: the gated kernels and the down GEMM, see ``ops/launch.py``); the
two autograd Functions (the gate|up GEMMs, the rest); the public functional; the reference.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from blockfuse.ops.activation import column_sum
from blockfuse.ops.checks import check_like
from blockfuse.ops.gated import geglu_ref, launch_gated_backward, launch_gated_forward, swiglu_ref
from blockfuse.ops.launch import launcher_op, tracing
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
# Launchers: the gated kernels between the GEMMs, registered as ops without autograd
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
    if tracing():
        # Traced by torch.compile: one GEMM on the whole activation, Inductor plans the buffers (a GEMM
        # into each row block of y would be traced as scatter copies).
        return F.linear(hidden_of_rows(slice(0, tokens)), down_weight, down_bias)
    y2 = like.new_empty((tokens, down_weight.shape[0]))
    for rows in column_blocks(tokens, FORWARD_BLOCKS, FORWARD_MIN_ROWS):
        hidden = hidden_of_rows(rows)
        linear_into(hidden, down_weight, down_bias, y2[rows])
        del hidden
    return y2


def column_blocks(n: int, blocks: int, min_width: int, align: int = 64) -> list[slice]:
    """About ``blocks`` slices covering ``range(n)``, none narrower than ``min_width`` (but the last),
    each width a multiple of ``align`` elements.

    NOTE: aligned, a block's (tokens, width) buffer has rows on 16-byte boundaries. Unaligned (4304
    hidden columns in 4 blocks of 1076), cuBLAS left its Hopper kernels for an sm_80 one and each
    block's weight-gradient GEMM took 0.83 ms instead of about a quarter of the full GEMM's 0.87 ms
    (H200, bf16, 65536 tokens). The slices are built from the block count (no ``range(0, n, width)``),
    so that a symbolic ``n`` under torch.compile guards on the count of blocks, not on its value."""
    if tracing():
        return [slice(0, n)]  # traced by torch.compile: whole buffers, Inductor plans their lifetimes
    width = max(min_width, -(-n // blocks))
    width = -(-width // align) * align
    count = -(-n // width)
    return [slice(i * width, n if i == count - 1 else (i + 1) * width) for i in range(count)]


def _pre_views(gate_pre: Tensor, up_pre: Optional[Tensor], hidden_size: int) -> tuple[Tensor, Tensor]:
    """(gate2, up2): (tokens, hidden) views of the gate and up pre-activations: the two halves of the
    packed (tokens, 2 hidden) one (up_pre None), or the separate ones."""
    if up_pre is None:
        return gate_pre[:, :hidden_size], gate_pre[:, hidden_size:]
    return gate_pre, up_pre


@launcher_op("gated_mlp_down_fwd")
def _down_forward(gate_pre: Tensor, up_pre: Optional[Tensor], down_weight: Tensor, down_bias: Optional[Tensor],
                  activation: str) -> Tensor:
    """``down(act(gate) * up)`` (tokens, d_out) from the contiguous (tokens, ...) pre-activations:
    packed (tokens, 2 hidden) with ``up_pre`` None, or separate (tokens, hidden) ones. ``activation``:
    the gated kernel's ("silu", "gelu_tanh", "gelu")."""
    hidden_size = down_weight.shape[1]
    gate2, up2 = _pre_views(gate_pre, up_pre, hidden_size)

    def hidden_of_rows(rows):  # (rows, hidden); packed: the kernel reads each row's two halves in place
        g2 = gate2[rows]
        h = g2.new_empty((g2.shape[0], hidden_size))
        launch_gated_forward(g2, up2[rows], h, activation)
        return h

    return down_projection(hidden_of_rows, gate2.shape[0], down_weight, down_bias, gate_pre)


def _down_backward_fake(dy: Tensor, gate_pre: Tensor, up_pre: Optional[Tensor], down_weight: Tensor,
                        activation: str, has_down_bias: bool) -> tuple[Tensor, Tensor]:
    return torch.empty_like(down_weight), dy.new_empty((down_weight.shape[0] if has_down_bias else 0,))


@launcher_op("gated_mlp_down_bwd_", mutates_args=("gate_pre", "up_pre"), fake=_down_backward_fake)
def _down_backward(dy: Tensor, gate_pre: Tensor, up_pre: Optional[Tensor], down_weight: Tensor, activation: str,
                   has_down_bias: bool) -> tuple[Tensor, Tensor]:
    """The backward of :func:`_down_forward` for dy (tokens, d_out): returns (d down_weight, d down_bias
    (empty without a bias)) and writes the pre-activations' gradients over the pre-activations
    themselves (the gated kernel reads each element before writing it): no second tokens x 2 hidden
    buffer.

    NOTE: an opaque op under torch.compile too (``launcher_op(fake=...)``), so that it runs as it is
    there: its blocks, and the gradient written over the saved pre-activation. Traced (a
    ``triton_op``), Inductor would copy the saved pre-activation before overwriting it, and the
    blocks' writes into row and column views became scatter copies that ran into an illegal memory
    access at full size (torch 2.11); a traced version on whole, fresh buffers instead made the
    compiled reordered block's step peak at 441 MiB (H200), and an opaque one into a fresh gradient
    buffer at 409, against 297 in place (benchmarks/memory_block.py)."""
    hidden_size = down_weight.shape[1]
    gate2, up2 = _pre_views(gate_pre, up_pre, hidden_size)
    tokens = gate2.shape[0]

    # NOTE: the activation is recomputed here rather than saved by the forward (one more read of
    # the pre-activation and write of hidden, against keeping tokens x hidden alive through the
    # whole step), and a block of hidden columns at a time: each block's down-weight gradient
    # columns are exact (no sum across blocks), and the step's peak holds a quarter of tokens x hidden.
    d_down_weight = torch.empty_like(down_weight)  # (d_out, hidden)
    for cols in column_blocks(hidden_size, BACKWARD_BLOCKS, BACKWARD_MIN_COLUMNS):
        g2 = gate2[:, cols]
        hidden = g2.new_empty((tokens, g2.shape[1]))  # (tokens, block columns)
        launch_gated_forward(g2, up2[:, cols], hidden, activation)
        torch.mm(dy.t(), hidden, out=d_down_weight[:, cols])  # straight into the column block (ld = hidden)
        del hidden
    d_down_bias = column_sum(dy) if has_down_bias else dy.new_empty((0,))

    # NOTE: the hidden gradient is made and consumed a block of rows at a time: each block's
    # (rows, hidden) GEMM output feeds the gated backward kernel at once, so the peak holds a
    # quarter of tokens x hidden instead of all of it (rows are independent: exact, same numbers).
    for rows in column_blocks(tokens, BACKWARD_BLOCKS, BACKWARD_MIN_ROWS, align=1):
        d_hidden = dy[rows].mm(down_weight)  # (rows, hidden)
        launch_gated_backward(d_hidden, gate2[rows], up2[rows], gate2[rows], up2[rows], activation)
        del d_hidden
    return d_down_weight, d_down_bias


# ----------------------------------------------------------------------------------------
# Autograd: two Functions (two autograd nodes), eager and under torch.compile
# ----------------------------------------------------------------------------------------


# NOTE: the MLP is two autograd nodes, the gate|up GEMM(s) and the rest (activation and down GEMM):
# eagerly the engine frees the down part's incoming gradient dy (tokens x d) when that node returns,
# before the gate|up node allocates its weight gradient and dx, where the MLP's backward peaks
# (olmo2-1b's block: 673 -> 641 MiB on an H200). The pre-activations never leave the MLP, so the
# down node writes their gradient over them and hands that storage on as the gradient; its launcher
# declares them mutated, so under torch.compile the compiler orders it after their other readers.


def _rows(x: Tensor) -> Tensor:
    """x (..., d) as (tokens, d)."""
    return x if x.dim() == 2 else x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, has_gate_bias, has_up_bias):
    """The backward of the gate|up GEMM(s), from the (tokens, ...) gradients of their outputs: (dx,
    d gate_weight, d gate_bias, d up_weight, d up_bias), a bias gradient None without that bias, the
    up ones None for packed weights."""
    x2 = _rows(x)
    d_gate_weight = d_gate_pre.t().mm(x2)
    d_gate_bias = column_sum(d_gate_pre) if has_gate_bias else None
    if up_weight is None:
        return d_gate_pre.mm(gate_weight).view(x.shape), d_gate_weight, d_gate_bias, None, None
    d_up_weight = d_up_pre.t().mm(x2)
    d_up_bias = column_sum(d_up_pre) if has_up_bias else None
    dx = torch.addmm(d_gate_pre.mm(gate_weight), d_up_pre, up_weight)
    return dx.view(x.shape), d_gate_weight, d_gate_bias, d_up_weight, d_up_bias


class _GateUpFunction(torch.autograd.Function):
    """The gate|up GEMM (packed weights: up_weight None, and the up output an empty tensor) or the
    two GEMMs (separate weights), with (tokens, ...) outputs.

    NOTE: the pre-activations are 2-D GEMM outputs, not views of them in x's leading shape: the down
    node bumps their versions (see _DownFunction), and under torch.compile Dynamo runs this Function's
    outputs as views of a multi-output node, which autograd refuses to see modified in place."""

    @staticmethod
    def forward(ctx, x, gate_weight, gate_bias, up_weight, up_bias):
        x2 = _rows(x)
        gate_pre = F.linear(x2, gate_weight, gate_bias)
        up_pre = x.new_empty((0,)) if up_weight is None else F.linear(x2, up_weight, up_bias)
        ctx.save_for_backward(x, gate_weight, up_weight)
        ctx.has_biases = (gate_bias is not None, up_bias is not None)
        ctx.set_materialize_grads(False)
        return gate_pre, up_pre

    @staticmethod
    def backward(ctx, d_gate_pre, d_up_pre):
        x, gate_weight, up_weight = ctx.saved_tensors
        return _gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, *ctx.has_biases)


class _DownFunction(torch.autograd.Function):
    """act(gate) * up and the down GEMM. ``config``: (the gated kernel's activation, packed)."""

    @staticmethod
    def forward(ctx, gate_pre, up_pre, down_weight, down_bias, config):
        activation, packed = config
        y = _down_forward(gate_pre, None if packed else up_pre, down_weight, down_bias, activation)
        ctx.save_for_backward(gate_pre, up_pre, down_weight)
        ctx.config = config
        ctx.has_down_bias = down_bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        gate_pre, up_pre, down_weight = ctx.saved_tensors
        activation, packed = ctx.config
        d_down_weight, d_down_bias = _down_backward(dy, gate_pre, None if packed else up_pre, down_weight, activation,
                                                    ctx.has_down_bias)
        # NOTE: gate_pre and up_pre now hold their gradients. Eagerly their versions are bumped: a
        # second backward through the same graph (retain_graph=True) raises autograd's "modified by an
        # inplace operation" error instead of reading the overwritten values (compiled, the op's declared
        # mutation orders it). Handed on detached (the same storage, no graph).
        if not torch.compiler.is_compiling():
            torch.autograd.graph.increment_version(gate_pre)
            torch.autograd.graph.increment_version(up_pre)
        return (gate_pre.detach(), None if packed else up_pre.detach(), d_down_weight,
                d_down_bias if ctx.has_down_bias else None, None)


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
    if not use_triton(x):
        return gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation,
                             up_weight=up_weight, up_bias=up_bias)
    act = ACTIVATIONS[activation]
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (
            x, gate_up_weight, gate_up_bias, up_weight, up_bias, down_weight, down_bias)):
        gate_pre, up_pre = _GateUpFunction.apply(x, gate_up_weight, gate_up_bias, up_weight, up_bias)
        y2 = _DownFunction.apply(gate_pre, up_pre, down_weight, down_bias, (act, up_weight is None))
    else:  # nothing to backpropagate: the GEMM(s) and the launcher, no autograd nodes
        x2 = _rows(x)
        gate_pre = F.linear(x2, gate_up_weight, gate_up_bias)
        up_pre = None if up_weight is None else F.linear(x2, up_weight, up_bias)
        y2 = _down_forward(gate_pre, up_pre, down_weight, down_bias, act)
    return y2 if x.dim() == 2 else y2.view(*x.shape[:-1], down_weight.shape[0])


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
