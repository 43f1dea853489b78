"""The MLP ``fc2(act(fc1(x)))`` that keeps only its input and pre-activation for the backward.

``fused_mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation)`` is the one MLP op, with any
activation of ``activation.ACTIVATIONS``, and three forms of the first weight:

* ungated (``gelu_tanh``, ``gelu``, ``silu``, ``relu``): fc1_weight (hidden, d), as SigLIP / CLIP / ViT;
* gated, packed (``swiglu``, ``geglu``, ``geglu_erf``): fc1_weight (2 hidden, d), the gate rows then the up rows;
* gated, separate (Hugging Face's gate_proj and up_proj, left as they are): fc1_weight is the gate weight
  (hidden, d) and ``up_weight=`` / ``up_bias=`` the up projection's.

``gated_mlp(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation)`` is the same op under the
gated names. It runs the first GEMM(s) (cuBLAS), the activation kernel of ``ops/gated.py`` and the down GEMM.
Autograd would keep the activation's output (the down GEMM's input, tokens x hidden) alive until the
backward; here the backward recomputes it from the saved pre-activation with one more pass of the
activation kernel, and frees it right after the down weight's gradient:

* saved: x (tokens x d) and the pre-activation (tokens x hidden, or 2 hidden), as autograd keeps them anyway;
* not saved: the activation (tokens x hidden): at [8192 tokens, 8192 hidden] bf16, 128 MiB.

The file reads: the launchers (ops ``blockfuse::fused_mlp_fwd``, the inference forward;
``blockfuse::gated_mlp_down_fwd`` and ``blockfuse::gated_mlp_down_bwd_``, in place and opaque under
torch.compile: the activation kernels and the down GEMM, see ``ops/launch.py``); the two autograd Functions
(the first GEMMs, the rest); the public functionals; the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from blockfuse.ops.activation import ACTIVATIONS, GATED, check_activation, column_sum
from blockfuse.ops.checks import check_like
from blockfuse.ops.gated import launch_gated_backward, launch_gated_forward
from blockfuse.ops.launch import launcher_op, tracing, unviewed
from blockfuse.ops.sharding import is_dtensor
from blockfuse.ops.linear_act import (
    _shape, activation_ref, check_bias, check_input, check_linear, check_path, linear_act_forward, wants_grad,
)
from blockfuse.runtime import use_triton


BLOCK_BYTES_RULE = 32 << 20  # (Blocks.min_block_bytes's rule)


@dataclass(frozen=True)
class Blocks:
    """How the MLP splits its tokens x hidden intermediates (smaller GEMMs lose efficiency, so small inputs
    take one block)."""

    forward: int = 4  # the forward makes the activation (the down GEMM's input) in this many blocks of rows,
    forward_min_rows: int = 1024  # none under this many rows: only a block is alive beside the pre-activation
    backward: int = 4  # the backward recomputes the activation in this many blocks of hidden columns and makes
    backward_min_rows: int = 1024  # the hidden gradient in as many blocks of rows, none under these sizes
    backward_min_columns: int = 512
    # NOTE: at most one block per min_block_bytes of the whole tokens x hidden activation (block_count). Each block
    # costs a step three launches and three GEMM calls (forward, recompute, hidden gradient), about 15-75 us of host
    # time each on the lent GPUs' hosts (benchmarks/results/op-path/host-backward-2026-12-07-h100/), while what it
    # saves is memory in proportion to the activation: a small layer's step is bound by its host (the `reordered`
    # block without CUDA graphs), a large one's by its GPU, where the blocks cost nothing. 32 MiB keeps four blocks
    # from 128 MiB (olmo2-1b, te-4layer, SigLIP-2: unchanged) and gives `reordered` / `standard` (64 MiB) two:
    # 16 MiB more at their peak, 6 launches and 6 GEMM calls fewer a step. 0: the counts above at any size.
    # Timed on an H200 (benchmarks/results/op-path/host-levers-2026-12-07-h200/, two calls, the two settings in
    # alternating rounds of one process; the MLP's CUDA tests passed first): `reordered`'s fused step without CUDA
    # graphs 1.065x and 1.079x the fixed counts' (5.238 -> 4.918, 5.511 -> 5.109 ms), fused + compile default within
    # the spread (0.99x), peak 265 -> 281 MiB (0.72x compile's 393); olmo2-1b (4 blocks either way) 6.881 / 6.889.
    min_block_bytes: int = BLOCK_BYTES_RULE


BLOCKS = Blocks()


def block_count(blocks: int, tokens: int, hidden: int, itemsize: int) -> int:
    """How many blocks a tokens x hidden activation of ``itemsize`` bytes an element is made in: ``blocks``
    (a count of :data:`BLOCKS`), but none under BLOCKS.min_block_bytes (at least one)."""
    if BLOCKS.min_block_bytes <= 0:
        return blocks
    return max(1, min(blocks, tokens * hidden * itemsize // BLOCKS.min_block_bytes))


# ----------------------------------------------------------------------------------------
# Launchers: the GEMMs and activation kernels, registered as ops without autograd
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

    NOTE: a block of rows at a time (BLOCKS.forward), so the whole tokens x hidden activation is never
    alive: in a training step it sits beside the saved pre-activation at the forward's peak (64 of the
    `standard` block's 321 MiB on an H200). Rows are independent, so the numbers are the same; each
    block's GEMM still fills the GPU (1024 rows or more)."""
    if tracing():
        # Traced by torch.compile: one GEMM on the whole activation, Inductor plans the buffers (a GEMM
        # into each row block of y would be traced as scatter copies).
        return F.linear(hidden_of_rows(slice(0, tokens)), down_weight, down_bias)
    y2 = like.new_empty((tokens, down_weight.shape[0]))
    blocks = block_count(BLOCKS.forward, tokens, down_weight.shape[1], like.element_size())
    for rows in column_blocks(tokens, blocks, BLOCKS.forward_min_rows):
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


def _pre_views(gate_pre: Tensor, up_pre: Optional[Tensor], hidden_size: int,
               gated: bool) -> tuple[Tensor, Optional[Tensor]]:
    """(gate2, up2): (tokens, hidden) views of the gate and up pre-activations: the two halves of the
    packed (tokens, 2 hidden) one (up_pre None), or the separate ones; ungated: (the pre-activation, None)."""
    if not gated:
        return gate_pre, None
    if up_pre is None:
        return gate_pre[:, :hidden_size], gate_pre[:, hidden_size:]
    return gate_pre, up_pre


def _optional(t: Optional[Tensor], rows) -> Optional[Tensor]:
    return None if t is None else t[rows]


@launcher_op("fused_mlp_fwd")
def _fused_mlp_fwd(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], up_weight: Optional[Tensor],
                   up_bias: Optional[Tensor], fc2_weight: Tensor, fc2_bias: Optional[Tensor],
                   activation: str) -> Tensor:
    """The MLP's inference forward (nothing kept for a backward): ``fc2(act(fc1(x)))`` (..., d_out). fc1, the
    activation and fc2 run a block of rows at a time (:func:`down_projection`), so neither the whole
    pre-activation nor the whole activation is ever alive; ungated GELU-tanh / ReLU in fp16 / bf16 on CUDA
    run fc1 with the activation in cuBLASLt's epilogue (``ops/linear_act.py``)."""
    x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])

    def hidden_of_rows(rows):
        if up_weight is None:
            return linear_act_forward(x2[rows], fc1_weight, fc1_bias, activation, False)[0]
        gate2, up2 = F.linear(x2[rows], fc1_weight, fc1_bias), F.linear(x2[rows], up_weight, up_bias)
        hidden = gate2.new_empty(gate2.shape)
        launch_gated_forward(gate2, up2, hidden, ACTIVATIONS[activation].pointwise)
        return hidden

    y2 = down_projection(hidden_of_rows, x2.shape[0], fc2_weight, fc2_bias, x)
    return y2.view(*x.shape[:-1], fc2_weight.shape[0])


@launcher_op("gated_mlp_down_fwd")
def _down_forward(gate_pre: Tensor, up_pre: Optional[Tensor], down_weight: Tensor, down_bias: Optional[Tensor],
                  activation: str) -> Tensor:
    """``down(act(gate) * up)`` (tokens, d_out) from the contiguous (tokens, ...) pre-activations:
    packed (tokens, 2 hidden) with ``up_pre`` None, or separate (tokens, hidden) ones; ungated
    ``down(act(pre))`` from (tokens, hidden). ``activation``: a name of ``activation.ACTIVATIONS``."""
    pointwise, gated = ACTIVATIONS[activation]
    hidden_size = down_weight.shape[1]
    gate2, up2 = _pre_views(gate_pre, up_pre, hidden_size, gated)

    def hidden_of_rows(rows):  # (rows, hidden); packed: the kernel reads each row's two halves in place
        g2 = gate2[rows]
        h = g2.new_empty((g2.shape[0], hidden_size))
        launch_gated_forward(g2, _optional(up2, rows), h, pointwise)
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
    pointwise, gated = ACTIVATIONS[activation]
    hidden_size = down_weight.shape[1]
    gate2, up2 = _pre_views(gate_pre, up_pre, hidden_size, gated)
    tokens = gate2.shape[0]

    # NOTE: the activation is recomputed here rather than saved by the forward (one more read of
    # the pre-activation and write of hidden, against keeping tokens x hidden alive through the
    # whole step), and a block of hidden columns at a time: each block's down-weight gradient
    # columns are exact (no sum across blocks), and the step's peak holds a quarter of tokens x hidden.
    d_down_weight = torch.empty_like(down_weight)  # (d_out, hidden)
    blocks = block_count(BLOCKS.backward, tokens, hidden_size, gate2.element_size())
    for cols in column_blocks(hidden_size, blocks, BLOCKS.backward_min_columns):
        g2 = gate2[:, cols]
        hidden = g2.new_empty((tokens, g2.shape[1]))  # (tokens, block columns)
        launch_gated_forward(g2, None if up2 is None else up2[:, cols], hidden, pointwise)
        torch.mm(dy.t(), hidden, out=d_down_weight[:, cols])  # straight into the column block (ld = hidden)
        del hidden
    d_down_bias = column_sum(dy) if has_down_bias else dy.new_empty((0,))

    # NOTE: the hidden gradient is made and consumed a block of rows at a time: each block's
    # (rows, hidden) GEMM output feeds the gated backward kernel at once, so the peak holds a
    # quarter of tokens x hidden instead of all of it (rows are independent: exact, same numbers).
    for rows in column_blocks(tokens, blocks, BLOCKS.backward_min_rows, align=1):
        d_hidden = dy[rows].mm(down_weight)  # (rows, hidden)
        up_rows = _optional(up2, rows)
        launch_gated_backward(d_hidden, gate2[rows], up_rows, gate2[rows], up_rows, pointwise)
        del d_hidden
    return d_down_weight, d_down_bias


# ----------------------------------------------------------------------------------------
# Autograd: two Functions (two autograd nodes), eager and under torch.compile
# ----------------------------------------------------------------------------------------


# NOTE: the MLP is two autograd nodes, the first GEMM(s) (gate|up, or fc1) and the rest (activation and down GEMM):
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


def _gate_up_fake(x2: Tensor, gate_weight: Tensor, gate_bias: Optional[Tensor], up_weight: Optional[Tensor],
                  up_bias: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    up_shape = (0,) if up_weight is None else (x2.shape[0], up_weight.shape[0])
    return x2.new_empty((x2.shape[0], gate_weight.shape[0])), x2.new_empty(up_shape)


@launcher_op("mlp_gate_up_fwd", fake=_gate_up_fake)
def _gate_up_forward(x2: Tensor, gate_weight: Tensor, gate_bias: Optional[Tensor], up_weight: Optional[Tensor],
                     up_bias: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """The gate|up GEMM(s) of (tokens, d) x: (gate_pre, up_pre), up_pre an empty tensor for packed weights.

    NOTE: an opaque op under torch.compile so that the pre-activations, which the down node's backward
    overwrites with their gradients, keep the dense (tokens, n) layout the fake gives them. As an ``addmm``
    Inductor pads the row stride of a saved output wider than 1024 elements to 128 bytes (4304 -> 4352:
    comprehensive padding), and then, to hand the mutating backward op its copy, reused the padded buffer
    for a dense one and copied it into itself (torch 2.11 and 2.13): rows overlapped, and every gradient
    above the MLP was garbage (SigLIP-2's 4304-wide MLP, relative error 0.8-3.9; tests/ops/test_mlp.py
    reproduces it on the CPU with padding switched on)."""
    gate_pre = F.linear(x2, gate_weight, gate_bias)
    up_pre = x2.new_empty((0,)) if up_weight is None else F.linear(x2, up_weight, up_bias)
    return gate_pre, up_pre


class _GateUpFunction(torch.autograd.Function):
    """The gate|up GEMM (packed weights: up_weight None, and the up output an empty tensor) or the
    two GEMMs (separate weights), with (tokens, ...) outputs.

    NOTE: the pre-activations are 2-D GEMM outputs, not views of them in x's leading shape: the down
    node bumps their versions (see _DownFunction), and under torch.compile Dynamo runs this Function's
    outputs as views of a multi-output node, which autograd refuses to see modified in place."""

    @staticmethod
    def forward(ctx, x, gate_weight, gate_bias, up_weight, up_bias):
        x2 = _rows(x)
        if is_dtensor(x2) or is_dtensor(gate_weight):
            # DTensors (a tensor-parallel plan's sharded weights) run DTensor's own linear: no sharding rule
            # for the op
            gate_pre, up_pre = _gate_up_forward.body(x2, gate_weight, gate_bias, up_weight, up_bias)
        else:
            gate_pre, up_pre = _gate_up_forward(x2, gate_weight, gate_bias, up_weight, up_bias)
        ctx.save_for_backward(x, gate_weight, up_weight)
        ctx.has_biases = (gate_bias is not None, up_bias is not None)
        ctx.set_materialize_grads(False)
        return gate_pre, up_pre

    @staticmethod
    def backward(ctx, d_gate_pre, d_up_pre):
        x, gate_weight, up_weight = ctx.saved_tensors
        return _gate_up_backward(d_gate_pre, d_up_pre, x, gate_weight, up_weight, *ctx.has_biases)


class _DownFunction(torch.autograd.Function):
    """act(gate) * up (ungated: act(pre)) and the down GEMM. ``config``: (the activation's name, packed: no
    separate up pre-activation, up_pre an empty tensor)."""

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


def _check_mlp_args(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, up_weight, up_bias, names,
                    allowed) -> None:
    """The arguments of the MLP, named as the caller's functional names them (``names``: first weight, its
    bias, second weight, its bias); ``activation`` one of ``allowed``."""
    check_input(x)
    _, gated = check_activation(activation, allowed)
    weight_name, bias_name, down_name, down_bias_name = names
    if up_weight is None and up_bias is not None:
        raise ValueError(f"up_bias: given without up_weight (packed weights take one {bias_name})")
    if up_weight is not None and not gated:
        raise ValueError(f"up_weight: separate up weights need a gated activation, got {activation!r}")
    hidden = check_linear(x.shape[-1], x, fc1_weight, fc1_bias, gated and up_weight is None, weight_name, bias_name,
                          activation=activation)
    if up_weight is not None:
        if not isinstance(up_weight, Tensor) or tuple(up_weight.shape) != tuple(fc1_weight.shape):
            raise ValueError(f"up_weight: expected shape {tuple(fc1_weight.shape)} like the gate weight "
                             f"({weight_name}), got {_shape(up_weight)}")
        check_like("up_weight", up_weight, x, "x", shape=False)
        check_bias(up_bias, hidden, x, "up_bias", f"up_weight's {hidden} rows")
    check_linear(hidden, x, fc2_weight, fc2_bias, False, down_name, down_bias_name, "the hidden activation")


def fused_mlp(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
              fc2_bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *, up_weight: Optional[Tensor] = None,
              up_bias: Optional[Tensor] = None, path: Optional[str] = None) -> Tensor:
    """``linear(act(linear(x, fc1_weight, fc1_bias)), fc2_weight, fc2_bias)``, the one MLP op.

    ``activation``: ``gelu_tanh`` (default), ``gelu``, ``silu``, ``relu``, or gated ``swiglu`` / ``geglu`` /
    ``geglu_erf``. fc1_weight (hidden, d); gated, packed (2 hidden, d), the gate rows then the up rows; gated
    with ``up_weight`` (hidden, d) / ``up_bias``: fc1_weight and fc1_bias are the gate projection's.
    fc2_weight (d_out, hidden). The backward keeps x and fc1's pre-activation only: the activation (fc2's
    input) is recomputed for fc2's weight gradient, and the pre-activation's gradient is written over the
    pre-activation (see the module notes). ``path``: as :func:`blockfuse.linear_act`'s (one path).
    """
    _check_mlp_args(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, up_weight, up_bias,
                    ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"), ACTIVATIONS)
    check_path(path)
    return _run_mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, up_weight, up_bias)


def gated_mlp(x: Tensor, gate_up_weight: Tensor, gate_up_bias: Optional[Tensor], down_weight: Tensor,
              down_bias: Optional[Tensor] = None, activation: str = "swiglu", *,
              up_weight: Optional[Tensor] = None, up_bias: Optional[Tensor] = None) -> Tensor:
    """``linear(act(gate) * up, down_weight, down_bias)``: :func:`fused_mlp` under the gated names, with
    ``activation`` ``"swiglu"`` (SiLU, the default), ``"geglu"`` (GELU tanh) or ``"geglu_erf"``.

    Packed weights (one gate|up GEMM): gate_up_weight (2 hidden, d), the gate rows then the up rows,
    and gate_up_bias (2 hidden,). Separate weights (Hugging Face's gate_proj and up_proj, left as
    they are): gate_up_weight is the gate weight (hidden, d), gate_up_bias its bias, and
    ``up_weight`` (hidden, d) / ``up_bias`` the up projection's. down_weight (d_out, hidden).
    """
    _check_mlp_args(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation, up_weight, up_bias,
                    ("gate_up_weight", "gate_up_bias", "down_weight", "down_bias"), GATED)
    return _run_mlp(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation, up_weight, up_bias)


def _run_mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, up_weight, up_bias) -> Tensor:
    if not use_triton(x):
        return fused_mlp_ref(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation, up_weight=up_weight,
                             up_bias=up_bias)
    if not wants_grad(x, fc1_weight, fc1_bias, up_weight, up_bias, fc2_weight, fc2_bias):
        # nothing to backpropagate: the launcher, no autograd nodes
        return _fused_mlp_fwd(x, fc1_weight, fc1_bias, up_weight, up_bias, fc2_weight, fc2_bias, activation)
    gate_pre, up_pre = _GateUpFunction.apply(x, fc1_weight, fc1_bias, up_weight, up_bias)
    y2 = _DownFunction.apply(gate_pre, up_pre, fc2_weight, fc2_bias, (activation, up_weight is None))
    return y2 if x.dim() == 2 else unviewed(y2, *x.shape[:-1], fc2_weight.shape[0])


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmarks' baseline
# ----------------------------------------------------------------------------------------


def fused_mlp_ref(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
                  fc2_bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *,
                  up_weight: Optional[Tensor] = None, up_bias: Optional[Tensor] = None) -> Tensor:
    """Pure-PyTorch :func:`fused_mlp`: the GEMMs in x's dtype, the activation in fp32 (fp64 for fp64), as the
    kernel computes it, rounded to x's dtype."""
    pre = F.linear(x, fc1_weight, fc1_bias)
    if up_weight is not None:
        pre = torch.cat([pre, F.linear(x, up_weight, up_bias)], dim=-1)
    return F.linear(activation_ref(pre, activation).to(x.dtype), fc2_weight, fc2_bias)


def gated_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias=None, activation="swiglu", *,
                  up_weight=None, up_bias=None):
    """Pure-PyTorch :func:`gated_mlp` (:func:`fused_mlp_ref` under the gated names)."""
    return fused_mlp_ref(x, gate_up_weight, gate_up_bias, down_weight, down_bias, activation, up_weight=up_weight,
                         up_bias=up_bias)
