"""Gated activations of a feed-forward block: SwiGLU and GeGLU, forward and backward.

* ``swiglu(gate, up)``: ``silu(gate) * up``
* ``geglu(gate, up, approximate)``: ``gelu(gate) * up`` (``approximate="tanh"`` or ``"none"``)

With ``up=None``, ``gate`` is one packed tensor ``[..., 2 * hidden]``, the output of one
fused gate|up GEMM (gate first, then up); the kernels read its two halves in place and its
gradient comes back packed the same way. The backward recomputes the activation from the
saved inputs (gate and up, never the output). Math in fp32, outputs in the input dtype.
The file reads top to bottom: kernels, launchers, custom ops, public functionals, references.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from blockfuse.ops.activation import check_gelu_approximation, gelu, gelu_grad, silu, silu_grad
from blockfuse.ops.checks import check_like
from blockfuse.ops.launch import Kernel, as_rows, cdiv, next_power_of_2
from blockfuse.runtime import use_triton

# Activations, as kernel constants.
_SILU: tl.constexpr = tl.constexpr(0)
_GELU_TANH: tl.constexpr = tl.constexpr(1)
_GELU_ERF: tl.constexpr = tl.constexpr(2)
_ACTIVATION_CODE = {"silu": 0, "gelu_tanh": 1, "gelu": 2}

# NOTE: elements per program tile and per warp. The forward takes small tiles (1024 elements,
# 8 a thread): more programs in flight cut [2048, 1024] from 5.9 to 5.3 us and cost nothing at
# [16384, 4096] (95 us either way, the copy time) on an H200 (benchmarks/gated_tiles.py). The
# backward (three inputs, two outputs, more live registers) was best at 4096 and 16 a thread.
# Tiles from 1024 to 8192 elements are within 1% of each other at [16384, 4096] and [8192, 14336],
# where both kernels run at the copy bandwidth. Cache hints for data read once (evict-first loads,
# ``.cs`` stores) made both 7-12% slower there
# (benchmarks/results/2026-11-26-nvidia-h200-issue3-final/sweeps/gated_tiles.json).
FWD_TILE_ELEMENTS = 1024
BWD_TILE_ELEMENTS = 4096
FWD_ELEMENTS_PER_WARP = 256
BWD_ELEMENTS_PER_WARP = 512
# Widest column block, and the narrowest one tried to avoid wasted (masked) columns.
MAX_BLOCK_N = 4096
MIN_BLOCK_N = 128


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _activate(g, ACTIVATION: tl.constexpr):
    """act(g) for an fp32 tile."""
    if ACTIVATION == _SILU:
        return silu(g)
    else:
        return gelu(g, ACTIVATION == _GELU_TANH)


@triton.jit
def _activate_grad(g, ACTIVATION: tl.constexpr):
    """act'(g) for an fp32 tile."""
    if ACTIVATION == _SILU:
        return silu_grad(g)
    else:
        return gelu_grad(g, ACTIVATION == _GELU_TANH)


@triton.jit
def _program_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Rows (int64), columns and mask of this program's tile; programs walk a row block's
    column blocks first, so neighbouring programs read neighbouring memory."""
    pid = tl.program_id(0)
    col_blocks = tl.cdiv(N, BLOCK_N)
    row_block = pid // col_blocks
    col_block = pid - row_block * col_blocks
    rows = tl.cast(row_block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    return rows, cols, mask


@triton.jit
def _gated_fwd_kernel(
    G,  # (M, N) gate (packed form: the first half of each packed row)
    U,  # (M, N) up (packed form: the second half of each packed row)
    Y,  # (M, N) output act(gate) * up
    stride_g, stride_u, stride_y,  # row strides (the last dimension is contiguous)
    M, N,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows, cols, mask = _program_tile(M, N, BLOCK_M, BLOCK_N)
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    # NOTE: act(g) * u in fp32 and one rounding of the product; PyTorch's composition rounds
    # act(g) to the input dtype first, so this is slightly more accurate than eager.
    y = _activate(g, ACTIVATION) * u
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gated_bwd_kernel(
    DY,  # (M, N) gradient of the output
    G,  # (M, N) gate, as saved by the forward
    U,  # (M, N) up, as saved by the forward (read only for the gate's gradient)
    DG,  # (M, N) gradient of gate (packed form: the first half of the packed gradient), or None
    DU,  # (M, N) gradient of up (packed form: the second half), or None
    stride_dy, stride_g, stride_u, stride_dg, stride_du,  # row strides (last dimension contiguous)
    M, N,
    ACTIVATION: tl.constexpr,
    HAS_DG: tl.constexpr,
    HAS_DU: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows, cols, mask = _program_tile(M, N, BLOCK_M, BLOCK_N)
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    # NOTE: the activation is recomputed here from gate rather than saved by the forward:
    # a few flops against one tensor less to write, keep and read.
    if HAS_DG:
        u = tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dg = dy * u * _activate_grad(g, ACTIVATION)
        tl.store(DG + rows[:, None] * stride_dg + cols[None, :], dg.to(DG.dtype.element_ty), mask=mask)
    if HAS_DU:
        du = dy * _activate(g, ACTIVATION)
        tl.store(DU + rows[:, None] * stride_du + cols[None, :], du.to(DU.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_gated_fwd_kernel)
_bwd_kernel = Kernel(_gated_bwd_kernel)


def _halves(gate: Tensor, up: Optional[Tensor]) -> tuple[Tensor, Tensor, int]:
    """(gate rows, up rows, hidden): two (M, hidden) views; the packed form is split in place."""
    if up is None:
        hidden = gate.shape[-1] // 2
        packed = as_rows(gate, 2 * hidden)
        return packed[:, :hidden], packed[:, hidden:], hidden
    hidden = gate.shape[-1]
    return as_rows(gate, hidden), as_rows(up, hidden), hidden


def _block_n(n: int) -> int:
    """The column block: the widest power of two up to MAX_BLOCK_N that wastes at most an
    eighth of the columns in masked lanes (14336 -> 2048, 4304 -> 512, 760 -> 256)."""
    widest = min(next_power_of_2(n), MAX_BLOCK_N)
    best, best_waste = widest, None
    block = widest
    while block >= min(MIN_BLOCK_N, widest):
        waste = cdiv(n, block) * block - n
        if 8 * waste <= n:
            return block
        if best_waste is None or waste < best_waste:
            best, best_waste = block, waste
        block //= 2
    return best


def _launch_shape(m: int, n: int, tile_elements: int, elements_per_warp: int) -> tuple[int, int, int, int]:
    """(programs, BLOCK_M, BLOCK_N, num_warps) of a (m, n) elementwise pass."""
    block_n = _block_n(n)
    # NOTE: narrow rows are packed several to a program so that each program moves a few KB.
    block_m = min(max(1, tile_elements // block_n), next_power_of_2(m))
    num_warps = min(16, max(1, (block_m * block_n) // elements_per_warp))
    programs = cdiv(m, block_m) * cdiv(n, block_n)
    return programs, block_m, block_n, num_warps


def _gated_forward(gate: Tensor, up: Optional[Tensor], activation: str) -> Tensor:
    """act(gate) * up; with up None, gate is packed [..., 2 * hidden]."""
    g2, u2, hidden = _halves(gate, up)
    y = torch.empty((*gate.shape[:-1], hidden), dtype=gate.dtype, device=gate.device)
    m = g2.shape[0]
    if m == 0 or hidden == 0:
        return y
    y2 = y.view(-1, hidden)
    programs, block_m, block_n, num_warps = _launch_shape(m, hidden, FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP)
    _fwd_kernel(
        (programs,),
        g2, u2, y2, g2.stride(0), u2.stride(0), y2.stride(0), m, hidden,
        ACTIVATION=_ACTIVATION_CODE[activation], BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
    )
    return y


def _gated_backward(
    dy: Tensor, gate: Tensor, up: Optional[Tensor], activation: str, gate_grad: bool, up_grad: bool,
    out=None,
) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """(dgate, dup). Packed form (up None): (the packed gradient [..., 2 * hidden], None),
    both halves always written, into the tensor ``out`` if given. Separate form: each is None
    unless asked for, written into the pair of (rows, hidden) views ``out`` if given. An output
    may be its own input (``out=gate``, ``out=(gate, up)``): each element is read before it is
    written."""
    g2, u2, hidden = _halves(gate, up)
    m = g2.shape[0]
    if up is None:
        dpacked = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if out is None else out
        d2 = dpacked.view(-1, 2 * hidden)
        dg2, du2 = d2[:, :hidden], d2[:, hidden:]
        result = (dpacked, None)
    else:
        if out is not None:
            dgate, dup = (out[0] if gate_grad else None), (out[1] if up_grad else None)
        else:
            dgate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if gate_grad else None
            dup = torch.empty(up.shape, dtype=up.dtype, device=up.device) if up_grad else None
        dg2 = None if dgate is None else dgate.view(-1, hidden)
        du2 = None if dup is None else dup.view(-1, hidden)
        result = (dgate, dup)
    if m == 0 or hidden == 0 or (dg2 is None and du2 is None):
        return result
    dy2 = as_rows(dy, hidden)
    programs, block_m, block_n, num_warps = _launch_shape(m, hidden, BWD_TILE_ELEMENTS, BWD_ELEMENTS_PER_WARP)
    _bwd_kernel(
        (programs,),
        dy2, g2, u2, dg2, du2,
        dy2.stride(0), g2.stride(0), u2.stride(0),
        0 if dg2 is None else dg2.stride(0), 0 if du2 is None else du2.stride(0),
        m, hidden,
        ACTIVATION=_ACTIVATION_CODE[activation], HAS_DG=dg2 is not None, HAS_DU=du2 is not None,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
    )
    return result


# ----------------------------------------------------------------------------------------
# Autograd: an autograd.Function in eager mode, custom ops under torch.compile
# ----------------------------------------------------------------------------------------
#
# NOTE: both run the same launchers. Eager calls go through a plain autograd.Function for
# its lower host overhead (see ops/norm.py); under torch.compile the custom ops keep the
# kernels opaque to Dynamo (no graph break) and Inductor calls them from its generated code.


class _GatedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up, activation):
        y = _gated_forward(gate, up, activation)
        ctx.save_for_backward(gate, up)  # the inputs only: the activation is recomputed
        ctx.activation = activation
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        dgate, dup = _gated_backward(dy, gate, up, ctx.activation, ctx.needs_input_grad[0],
                                     up is not None and ctx.needs_input_grad[1])
        return dgate, dup, None


@torch.library.custom_op("blockfuse::gated_activation", mutates_args=())
def _gated_op(gate: Tensor, up: Optional[Tensor], activation: str) -> Tensor:
    return _gated_forward(gate, up, activation)


@torch.library.custom_op("blockfuse::gated_activation_backward", mutates_args=())
def _gated_backward_op(
    dy: Tensor, gate: Tensor, up: Optional[Tensor], activation: str, gate_grad: bool, up_grad: bool
) -> tuple[Tensor, Tensor]:
    dgate, dup = _gated_backward(dy, gate, up, activation, gate_grad, up_grad)
    return (gate.new_empty((0,)) if dgate is None else dgate,
            gate.new_empty((0,)) if dup is None else dup)


@_gated_op.register_fake
def _(gate, up, activation):
    hidden = gate.shape[-1] // 2 if up is None else gate.shape[-1]
    return gate.new_empty((*gate.shape[:-1], hidden))


@_gated_backward_op.register_fake
def _(dy, gate, up, activation, gate_grad, up_grad):
    if up is None:
        return gate.new_empty(gate.shape), gate.new_empty((0,))
    return (gate.new_empty(gate.shape if gate_grad else (0,)),
            up.new_empty(up.shape if up_grad else (0,)))


def _gated_setup(ctx, inputs, output):
    gate, up, activation = inputs
    ctx.save_for_backward(gate, up)
    ctx.activation = activation


def _gated_backward_autograd(ctx, dy):
    gate, up = ctx.saved_tensors
    gate_grad = bool(ctx.needs_input_grad[0])
    up_grad = up is not None and bool(ctx.needs_input_grad[1])
    dgate, dup = _gated_backward_op(dy, gate, up, ctx.activation, gate_grad or up is None, up_grad)
    return (dgate if (gate_grad or up is None) else None), (dup if up_grad else None), None


_gated_op.register_autograd(_gated_backward_autograd, setup_context=_gated_setup)


# ----------------------------------------------------------------------------------------
# Public functionals
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_gated_args(gate, up):
    if not isinstance(gate, Tensor):
        raise TypeError(f"gate: expected a Tensor, got {type(gate).__name__}")
    if gate.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"gate: expected a float32, float16 or bfloat16 tensor (float64 runs the "
                        f"reference), got {gate.dtype}")
    if gate.dim() == 0:
        raise ValueError("gate: expected at least one dimension (the hidden one), got a scalar")
    if up is None:
        if gate.shape[-1] % 2 != 0:
            raise ValueError(f"gate: with up=None, gate is packed [..., 2 * hidden] (gate then up) and "
                             f"its last dimension must be even, got {gate.shape[-1]}")
        return
    check_like("up", up, gate, "gate")


def _run_gated(gate, up, activation):
    if torch.compiler.is_compiling():
        return _gated_op(gate, up, activation)
    return _GatedFunction.apply(gate, up, activation)


def swiglu(gate: Tensor, up: Optional[Tensor] = None) -> Tensor:
    """``silu(gate) * up``, fused, forward and backward.

    With ``up=None``, ``gate`` is packed ``[..., 2 * hidden]`` (gate then up, as one fused
    gate|up projection writes it); its gradient comes back packed the same way.
    """
    _check_gated_args(gate, up)
    if not use_triton(gate) or gate.dtype == torch.float64:
        return swiglu_ref(gate, up)
    return _run_gated(gate, up, "silu")


def geglu(gate: Tensor, up: Optional[Tensor] = None, approximate: str = "tanh") -> Tensor:
    """``gelu(gate, approximate) * up``, fused, forward and backward.

    ``approximate`` is ``torch.nn.functional.gelu``'s: ``"tanh"`` (GeGLU as usually trained,
    and SigLIP's MLP) or ``"none"`` (the exact erf form). ``up=None``: as :func:`swiglu`.
    """
    tanh = check_gelu_approximation(approximate)
    _check_gated_args(gate, up)
    if not use_triton(gate) or gate.dtype == torch.float64:
        return geglu_ref(gate, up, approximate)
    return _run_gated(gate, up, "gelu_tanh" if tanh else "gelu")


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _split_compute(gate, up):
    """(gate, up) in the compute dtype (fp32; fp64 for fp64 inputs), the packed form split."""
    if up is None:
        gate, up = gate.chunk(2, dim=-1)
    compute = torch.float64 if gate.dtype == torch.float64 else torch.float32
    return gate.to(compute), up.to(compute)


def swiglu_ref(gate, up=None):
    """Pure-PyTorch :func:`swiglu`: fp32 math (fp64 for fp64 inputs), output in gate's dtype."""
    g, u = _split_compute(gate, up)
    return (F.silu(g) * u).to(gate.dtype)


def geglu_ref(gate, up=None, approximate="tanh"):
    """Pure-PyTorch :func:`geglu`: fp32 math (fp64 for fp64 inputs), output in gate's dtype."""
    check_gelu_approximation(approximate)
    g, u = _split_compute(gate, up)
    return (F.gelu(g, approximate=approximate) * u).to(gate.dtype)
