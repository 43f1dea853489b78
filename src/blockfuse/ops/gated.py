"""Gated activations of a feed-forward block: SwiGLU and GeGLU, forward and backward.

* ``swiglu(gate, up)``: ``silu(gate) * up``
* ``geglu(gate, up, approximate)``: ``gelu(gate) * up`` (``approximate="tanh"`` or ``"none"``)

Its two elementwise kernels are the one pair every activation pass runs (``act(gate) * up``, or
``act(gate)`` alone for a pointwise activation): the MLP ops (``ops/mlp.py``, ``ops/linear_act.py``)
call them between their GEMMs through :func:`launch_gated_forward` / :func:`launch_gated_backward`.

With ``up=None``, ``gate`` is one packed tensor ``[..., 2 * hidden]``, the output of one
fused gate|up GEMM (gate first, then up); the kernels read its two halves in place and its
gradient comes back packed the same way. The backward recomputes the activation from the
saved inputs (gate and up, never the output). Math in fp32, outputs in the input dtype.
``fp8="rowwise"`` / ``"tensorwise"`` (forward only) writes the output in e4m3 with its scale in the
same pass and returns ``(y_fp8, scale)``, the down projection's input for ``fp8_linear`` (ops/fp8.py:
the recipes). The file reads top to bottom: kernels; the launchers (ops ``blockfuse::gated_fwd``,
``blockfuse::gated_fwd_fp8`` and ``blockfuse::gated_bwd``, see ``ops/launch.py``); the one autograd
Function; the public functionals; the references.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.activation import (CODES, activate, activate_grad, check_gelu_approximation, launch_shape,
                                      program_tile, tile_grid)
from blockfuse.ops import fp8_history
from blockfuse.ops.checks import check_like
from blockfuse.ops.fp8 import (
    AMAX_FLOOR, E4M3_MAX, FP8_MAX, FP8_ROWWISE, FP8_TENSORWISE, Float8Scaling, check_fp8_output, delayed_scale,
    delayed_scale_ref, fold_amax, quantize_output_ref, reciprocal, refuse_fp8_gradient, roll_amax_history, row_amax,
    scale_of, to_e4m3,
)
from blockfuse.ops.launch import Kernel, as_rows, cdiv, empty_scalar, in_row_units, launcher_op, next_power_of_2
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import use_triton



@dataclass(frozen=True)
class Tiles:
    """Elements per program tile and per warp of the elementwise kernels (activation.launch_shape).

    NOTE: the forward takes small tiles (1024 elements, 8 a thread): more programs in flight cut [2048, 1024]
    from 5.9 to 5.3 us and cost nothing at [16384, 4096] (the copy time) on an H200. The backward (three
    inputs, two outputs, more live registers) was best at 4096 and 16 a thread. Both run at the copy
    bandwidth at the large shapes (benchmarks/NOTES.md, "Gated activations and the MLP")."""

    forward: int = 1024
    forward_per_warp: int = 256
    backward: int = 4096
    backward_per_warp: int = 512


TILES = Tiles()
# The forward with an FP8 output. NOTE: not yet swept on a GPU. Tensorwise takes the forward's elementwise
# tiles, but of 8192 elements: each program folds its amax into one address with an atomic, and 1024-element
# tiles would make 64 Ki of them at [16384, 4096] (the forward's tile sizes from 1024 to 8192 ran within 1% of
# each other). Rowwise needs whole rows in a program for the row's amax: rows up to FP8_ROW_LANES lanes (the
# next power of two) are held in registers, FP8_ROW_TILE_ELEMENTS lanes a program (narrow rows packed several
# to a program); wider rows go in chunks (activation.launch_shape's column block) twice: once for the amax,
# once to write (the second read mostly from L2). The interpreter pays per program: larger tiles there.
FP8_TILE_ELEMENTS = {"compiled": 8192, "interpreted": 8192}
FP8_ROW_LANES = {"compiled": 8192, "interpreted": 4096}
FP8_ROW_TILE_ELEMENTS = {"compiled": 4096, "interpreted": 16384}


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _gated_fwd_kernel(
    G,  # (M, N) gate (packed form: the first half of each packed row); not GATED: the activation's input
    U,  # (M, N) up (packed form: the second half of each packed row); not GATED: None
    Y,  # (M, N) output act(gate) * up; not GATED: act(gate)
    stride_g, stride_u, stride_y,  # row strides (the last dimension is contiguous)
    M, N,
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    GRID_2D: tl.constexpr = False,  # activation.tile_grid
):
    N, stride_g, stride_u, stride_y = N * VEC, stride_g * VEC, stride_u * VEC, stride_y * VEC
    rows, cols, mask = program_tile(M, N, BLOCK_M, BLOCK_N, GRID_2D)
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = activate(g, ACTIVATION)
    if GATED:
        # NOTE: act(g) * u in fp32 and one rounding of the product; PyTorch's composition rounds
        # act(g) to the input dtype first, so this is slightly more accurate than eager.
        y = y * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gated_value(G, U, rows, cols, mask, stride_g, stride_u, ACTIVATION: tl.constexpr):
    """act(gate) * up in fp32 for the tile (rows, cols)."""
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    return activate(g, ACTIVATION) * u


@triton.jit
def _gated_fwd_fp8_kernel(
    G,  # (M, N) gate (packed form: the first half of each packed row)
    U,  # (M, N) up (packed form: the second half of each packed row)
    Q,  # (M, N) e4m3 output (row-major): act(gate) * up times the reciprocal of its scale
    Q_SCALE,  # rowwise: (M,) fp32 scale of each row; tensorwise: () fp32 scale of the call
    HISTORY,  # tensorwise: (H,) fp32 amaxes of earlier calls, newest first; rowwise: None
    AMAX,  # tensorwise: (1,) fp32 this call's amax (zero before the call; atomic max); rowwise: None
    stride_g, stride_u,  # row strides (the last dimension is contiguous)
    M, N, history_len,
    ACTIVATION: tl.constexpr,  # activation.CODES
    FP8: tl.constexpr,  # fp8.FP8_ROWWISE or fp8.FP8_TENSORWISE
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,  # rowwise: column chunks of BLOCK_N a row takes (1: the row in registers)
    BLOCK_H: tl.constexpr,  # tensorwise: H rounded up to a power of two
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
):
    N, stride_g, stride_u = N * VEC, stride_g * VEC, stride_u * VEC
    if FP8 == FP8_TENSORWISE:
        # Elementwise tiles (program_tile); the scale from the history (delayed scaling, ops/fp8.py).
        rows, cols, mask = program_tile(M, N, BLOCK_M, BLOCK_N)
        scale = delayed_scale(HISTORY, history_len, BLOCK_H)
        y = _gated_value(G, U, rows, cols, mask, stride_g, stride_u, ACTIVATION)
        tl.store(Q + rows[:, None] * N + cols[None, :], to_e4m3(y, reciprocal(scale), Q), mask=mask)
        if tl.program_id(0) == 0:
            tl.store(Q_SCALE, scale)
        fold_amax(AMAX, tl.max(row_amax(y, mask), axis=0))
    else:
        # Whole rows: the row's amax before its first FP8 store.
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        offs = tl.arange(0, BLOCK_N)
        if NUM_CHUNKS == 1:
            mask = row_mask[:, None] & (offs < N)[None, :]
            y = _gated_value(G, U, rows, offs, mask, stride_g, stride_u, ACTIVATION)
            row_scale = scale_of(row_amax(y, mask), E4M3_MAX)
            tl.store(Q + rows[:, None] * N + offs[None, :], to_e4m3(y, reciprocal(row_scale)[:, None], Q), mask=mask)
        else:
            amax = tl.zeros([BLOCK_M], dtype=tl.float32)
            for c in range(NUM_CHUNKS):
                cols = c * BLOCK_N + offs
                mask = row_mask[:, None] & (cols < N)[None, :]
                amax = tl.maximum(amax, row_amax(_gated_value(G, U, rows, cols, mask, stride_g, stride_u, ACTIVATION),
                                                 mask))
            row_scale = scale_of(amax, E4M3_MAX)
            inverse = reciprocal(row_scale)[:, None]
            for c in range(NUM_CHUNKS):
                cols = c * BLOCK_N + offs
                mask = row_mask[:, None] & (cols < N)[None, :]
                y = _gated_value(G, U, rows, cols, mask, stride_g, stride_u, ACTIVATION)
                tl.store(Q + rows[:, None] * N + cols[None, :], to_e4m3(y, inverse, Q), mask=mask)
        tl.store(Q_SCALE + rows, row_scale, mask=row_mask)


@triton.jit
def _gated_bwd_kernel(
    DY,  # (M, N) gradient of the output
    G,  # (M, N) gate, as saved by the forward (not GATED: the activation's input)
    U,  # (M, N) up, as saved by the forward (read only for the gate's gradient); not GATED: None
    DG,  # (M, N) gradient of gate (packed form: the first half of the packed gradient), or None; may be G
    DU,  # (M, N) gradient of up (packed form: the second half), or None (also with DU_IN_DG); may be U
    stride_dy, stride_g, stride_u, stride_dg, stride_du,  # row strides (last dimension contiguous)
    M, N,
    du_offset,  # DU_IN_DG: the column of DG's rows where the up gradient starts
    ACTIVATION: tl.constexpr,  # activation.CODES
    GATED: tl.constexpr,  # False: d gate = dy * act'(gate), and no up (HAS_DU False)
    HAS_DG: tl.constexpr,
    HAS_DU: tl.constexpr,
    DU_IN_DG: tl.constexpr,  # the up gradient goes into DG's rows at du_offset (one packed output)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,  # N, du_offset and the row strides come in units of VEC (launch.row_units)
    GRID_2D: tl.constexpr = False,  # activation.tile_grid
):
    N, du_offset, stride_dy, stride_g = N * VEC, du_offset * VEC, stride_dy * VEC, stride_g * VEC
    stride_u, stride_dg, stride_du = stride_u * VEC, stride_dg * VEC, stride_du * VEC
    rows, cols, mask = program_tile(M, N, BLOCK_M, BLOCK_N, GRID_2D)
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    # NOTE: the activation is recomputed here from gate rather than saved by the forward:
    # a few flops against one tensor less to write, keep and read.
    # Each element is read before it is written, so an output may be its own input (DG = G, DU = U).
    if HAS_DG:
        dy_gate = dy
        if GATED:
            dy_gate = dy * tl.load(U + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dg = dy_gate * activate_grad(g, ACTIVATION)
        tl.store(DG + rows[:, None] * stride_dg + cols[None, :], dg.to(DG.dtype.element_ty), mask=mask)
    if HAS_DU:
        du = dy * activate(g, ACTIVATION)
        if DU_IN_DG:
            tl.store(DG + rows[:, None] * stride_dg + du_offset + cols[None, :], du.to(DG.dtype.element_ty),
                     mask=mask)
        else:
            tl.store(DU + rows[:, None] * stride_du + cols[None, :], du.to(DU.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------
# Launchers: plain Python that allocates, tiles and launches, registered as ops without autograd
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_gated_fwd_kernel)
_fwd_fp8_kernel = Kernel(_gated_fwd_fp8_kernel)
_bwd_kernel = Kernel(_gated_bwd_kernel)


def _halves(gate: Tensor, up: Optional[Tensor]) -> tuple[Tensor, Tensor, int]:
    """(gate rows, up rows, hidden): two (M, hidden) views; the packed form is split in place."""
    if up is None:
        hidden = gate.shape[-1] // 2
        packed = as_rows(gate, 2 * hidden)
        return packed[:, :hidden], packed[:, hidden:], hidden
    hidden = gate.shape[-1]
    return as_rows(gate, hidden), as_rows(up, hidden), hidden


def launch_gated_forward(g2: Tensor, u2: Optional[Tensor], y2: Tensor, activation: str) -> None:
    """y2 = act(g2) * u2 (u2 None: act(g2)) for (M, hidden) row views with a contiguous last dimension (two
    halves of a packed tensor, say); ``activation`` a pointwise one (a key of ``activation.CODES``). For
    launchers: the MLP ops' launchers call it on blocks of rows / columns."""
    m, hidden = g2.shape
    if m == 0 or hidden == 0:
        return
    block_m, block_n, num_warps = launch_shape(m, hidden, TILES.forward, TILES.forward_per_warp)
    grid, grid_2d = tile_grid(m, hidden, block_m, block_n)
    vec, n_units, strides = in_row_units(hidden, g2.stride(0), 0 if u2 is None else u2.stride(0), y2.stride(0))
    _fwd_kernel(
        grid,
        g2, u2, y2, *strides, m, n_units,
        ACTIVATION=CODES[activation], GATED=u2 is not None, BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec,
        GRID_2D=grid_2d, num_warps=num_warps,
    )


def launch_gated_backward(dy2: Tensor, g2: Tensor, u2: Optional[Tensor], dg2: Optional[Tensor],
                          du2: Optional[Tensor], activation: str, packed_out: Optional[Tensor] = None) -> None:
    """dg2 = dy2 * u2 * act'(g2) and du2 = dy2 * act(g2) (either may be None) for (M, hidden) row
    views; u2 None (a pointwise activation): dg2 = dy2 * act'(g2), and du2 None. An output may be its own
    input (``dg2`` = ``g2``, ``du2`` = ``u2``): each element is read before it is written. ``packed_out``: a
    (M, 2 hidden) tensor that takes both (dg2 and du2 None): one whole output, so that under torch.compile
    no kernel writes into views. For launchers, as :func:`launch_gated_forward`."""
    m, hidden = g2.shape
    if packed_out is not None:
        dg2 = packed_out
    if m == 0 or hidden == 0 or (dg2 is None and du2 is None):
        return
    block_m, block_n, num_warps = launch_shape(m, hidden, TILES.backward, TILES.backward_per_warp)
    grid, grid_2d = tile_grid(m, hidden, block_m, block_n)
    vec, n_units, strides = in_row_units(hidden, dy2.stride(0), g2.stride(0), 0 if u2 is None else u2.stride(0),
                                         0 if dg2 is None else dg2.stride(0), 0 if du2 is None else du2.stride(0))
    _bwd_kernel(
        grid,
        dy2, g2, u2, dg2, du2, *strides,
        m, n_units, n_units if packed_out is not None else 0,  # (du_offset: hidden, in units)
        ACTIVATION=CODES[activation], GATED=u2 is not None, HAS_DG=dg2 is not None,
        HAS_DU=du2 is not None or packed_out is not None, DU_IN_DG=packed_out is not None,
        BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec, GRID_2D=grid_2d, num_warps=num_warps,
    )


@launcher_op("gated_fwd")
def _gated_forward(gate: Tensor, up: Optional[Tensor], activation: str) -> Tensor:
    """act(gate) * up; with up None, gate is packed [..., 2 * hidden]. ``activation``: "silu",
    "gelu_tanh" or "gelu"."""
    g2, u2, hidden = _halves(gate, up)
    y = gate.new_empty((*gate.shape[:-1], hidden))
    launch_gated_forward(g2, u2, y.view(g2.shape[0], hidden), activation)
    return y


def fp8_tile(m: int, n: int, rowwise: bool, compiled: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, NUM_CHUNKS, num_warps) of the FP8 forward over (m, n) (see FP8_ROW_LANES); tensorwise:
    activation.launch_shape's tiles (NUM_CHUNKS 1)."""
    mode = "compiled" if compiled else "interpreted"
    if not rowwise:
        block_m, block_n, num_warps = launch_shape(m, n, FP8_TILE_ELEMENTS[mode], TILES.forward_per_warp)
        return block_m, block_n, 1, num_warps
    block_n = next_power_of_2(n)
    if block_n > FP8_ROW_LANES[mode]:
        _, block_n, _ = launch_shape(1, n, 1, TILES.forward_per_warp)  # the column block: waste <= 1/8
    num_chunks = cdiv(n, block_n)
    block_m = max(1, FP8_ROW_TILE_ELEMENTS[mode] // block_n) if num_chunks == 1 else 1
    while block_m > 1 and block_m // 2 >= m:
        block_m //= 2
    num_warps = min(16, max(1, block_m * block_n // TILES.forward_per_warp))
    return block_m, block_n, num_chunks, num_warps


@launcher_op("gated_fwd_fp8", mutates_args=("history", "amax"))
def _gated_forward_fp8(gate: Tensor, up: Optional[Tensor], activation: str, history: Optional[Tensor],
                       amax: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """``(y_fp8, scale)``: act(gate) * up (up None: gate packed) in e4m3, and its fp32 scale: rowwise
    (``history`` None) ``(*gate.shape[:-1], 1)``, each row's amax over 448; tensorwise 0-d, from ``history``
    (delayed scaling, ops/fp8.py), this call's amax then rolled into ``history`` (``amax``: its zeroed scratch)."""
    g2, u2, hidden = _halves(gate, up)
    m = g2.shape[0]
    rowwise = history is None
    if not rowwise:
        fp8_history.settle(history)
    q = torch.empty((*gate.shape[:-1], hidden), dtype=torch.float8_e4m3fn, device=gate.device)
    scale = gate.new_empty((*gate.shape[:-1], 1), dtype=torch.float32) if rowwise else empty_scalar(gate)
    if m == 0 or hidden == 0:
        if rowwise:  # rows of no elements: the floor's scale
            scale.copy_(torch.full_like(scale, AMAX_FLOOR) / FP8_MAX[torch.float8_e4m3fn])
        else:
            scale.copy_(delayed_scale_ref(history))
            roll_amax_history(history, amax)  # an empty call records an amax of 0, as the reference
        return q, scale
    block_m, block_n, num_chunks, num_warps = fp8_tile(m, hidden, rowwise, gate.is_cuda)
    programs = cdiv(m, block_m) * (1 if rowwise else cdiv(hidden, block_n))
    h = 0 if rowwise else int(history.shape[0])
    vec, n_units, strides = in_row_units(hidden, g2.stride(0), u2.stride(0))  # (q's rows: hidden)
    _fwd_fp8_kernel(
        (programs,),
        g2, u2, q.view(m, hidden), scale, history, amax, *strides, m, n_units, h,
        ACTIVATION=CODES[activation], FP8=FP8_ROWWISE.value if rowwise else FP8_TENSORWISE.value,
        BLOCK_M=block_m, BLOCK_N=block_n, NUM_CHUNKS=num_chunks, BLOCK_H=next_power_of_2(h), VEC=vec,
        num_warps=num_warps,
    )
    if not rowwise:
        roll_amax_history(history, amax)
    return q, scale


@launcher_op("gated_bwd")
def _gated_backward(
    dy: Tensor, gate: Tensor, up: Optional[Tensor], activation: str, gate_grad: bool, up_grad: bool,
) -> tuple[Tensor, Tensor]:
    """(dgate, dup). Packed form (up None): (the packed gradient [..., 2 * hidden], empty), both
    halves always written. Separate form: each is empty unless asked for.

    NOTE: each output is written whole (through a view of all of it, never a slice): traced by
    torch.compile, a kernel writing into slices of a buffer becomes scatter copies."""
    g2, u2, hidden = _halves(gate, up)
    m = g2.shape[0]
    if up is None:
        dpacked = gate.new_empty(gate.shape)
        launch_gated_backward(as_rows(dy, hidden), g2, u2, None, None, activation,
                              packed_out=dpacked.view(m, 2 * hidden))
        return dpacked, gate.new_empty((0,))
    dgate = gate.new_empty(gate.shape if gate_grad else (0,))
    dup = up.new_empty(up.shape if up_grad else (0,))
    launch_gated_backward(as_rows(dy, hidden), g2, u2, dgate.view(m, hidden) if gate_grad else None,
                          dup.view(m, hidden) if up_grad else None, activation)
    return dgate, dup


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


class _GatedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up, activation):
        ctx.save_for_backward(gate, up)  # the inputs only: the activation is recomputed
        ctx.activation = activation
        return _gated_forward(gate, up, activation)

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        packed = up is None
        # NOTE: on DTensors both gradients are made: the sharding rule's placements cannot depend on which
        # one is asked for (ops/sharding.py).
        both = is_dtensor(gate)
        gate_grad = packed or both or ctx.needs_input_grad[0]
        up_grad = not packed and (both or ctx.needs_input_grad[1])
        dgate, dup = _gated_backward(dy, gate, up, ctx.activation, gate_grad, up_grad)
        return dgate if ctx.needs_input_grad[0] else None, dup if ctx.needs_input_grad[1] else None, None


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


def _check_fp8(fp8, fp8_scaling, gate, up) -> None:
    """The FP8 output option's arguments (ops/fp8.py); forward only, so no gradient may be asked for."""
    if check_fp8_output(fp8, fp8_scaling, gate):
        refuse_fp8_gradient(gate, up)
        if is_dtensor(gate):
            raise ValueError("fp8: an FP8 output of a DTensor is not supported yet; pass fp8=None")


def _run_gated(gate, up, activation, fp8=None, fp8_scaling=None):
    if fp8 is not None:  # forward only (checked by the functionals): the launcher, no autograd
        history, amax = (None, None) if fp8 == "rowwise" else fp8_scaling
        return _gated_forward_fp8(gate, up, activation, history, amax)
    if torch.is_grad_enabled() and (gate.requires_grad or (up is not None and up.requires_grad)):
        return _GatedFunction.apply(gate, up, activation)
    return _gated_forward(gate, up, activation)  # nothing to backpropagate


def swiglu(gate: Tensor, up: Optional[Tensor] = None, *, fp8: Optional[str] = None,
           fp8_scaling: Optional[Float8Scaling] = None):
    """``silu(gate) * up``, fused, forward and backward.

    With ``up=None``, ``gate`` is packed ``[..., 2 * hidden]`` (gate then up, as one fused
    gate|up projection writes it); its gradient comes back packed the same way.

    ``fp8="rowwise"`` or ``"tensorwise"`` (forward only): returns ``(y_fp8, scale)``, the output in
    float8_e4m3fn with its fp32 scale written by the same pass, for
    ``blockfuse.fp8_linear(y_fp8, w_down, x_scale=scale, recipe=<the same>)``: rowwise scales
    ``(*y.shape[:-1], 1)`` (each row's amax / 448); tensorwise a 0-d scale, delayed scaling from
    ``fp8_scaling`` (a :class:`blockfuse.ops.fp8.Float8Scaling` kept across calls). ``blockfuse.ops.fp8``'s
    docstring has the recipe, and why the option is forward only.
    """
    _check_gated_args(gate, up)
    _check_fp8(fp8, fp8_scaling, gate, up)
    if not use_triton(gate):
        return swiglu_ref(gate, up, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_gated(gate, up, "silu", fp8, fp8_scaling)


def geglu(gate: Tensor, up: Optional[Tensor] = None, approximate: str = "tanh", *, fp8: Optional[str] = None,
          fp8_scaling: Optional[Float8Scaling] = None):
    """``gelu(gate, approximate) * up``, fused, forward and backward.

    ``approximate`` is ``torch.nn.functional.gelu``'s: ``"tanh"`` (GeGLU as usually trained,
    and SigLIP's MLP) or ``"none"`` (the exact erf form). ``up=None`` and ``fp8``: as :func:`swiglu`.
    """
    tanh = check_gelu_approximation(approximate)
    _check_gated_args(gate, up)
    _check_fp8(fp8, fp8_scaling, gate, up)
    if not use_triton(gate):
        return geglu_ref(gate, up, approximate, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_gated(gate, up, "gelu_tanh" if tanh else "gelu", fp8, fp8_scaling)


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _split_compute(gate, up):
    """(gate, up) in the compute dtype (fp32; fp64 for fp64 inputs), the packed form split."""
    if up is None:
        gate, up = gate.chunk(2, dim=-1)
    compute = torch.float64 if gate.dtype == torch.float64 else torch.float32
    return gate.to(compute), up.to(compute)


def _output(y, dtype, fp8, fp8_scaling):
    """The output as the op returns it: in ``dtype``, or ``(y_fp8, scale)`` quantized from the fp32 ``y``."""
    return y.to(dtype) if fp8 is None else quantize_output_ref(y, fp8, fp8_scaling)


def swiglu_ref(gate, up=None, *, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`swiglu`: fp32 math (fp64 for fp64 inputs), output in gate's dtype (``fp8``:
    :func:`blockfuse.ops.fp8.quantize_output_ref` of the fp32 output)."""
    g, u = _split_compute(gate, up)
    return _output(F.silu(g) * u, gate.dtype, fp8, fp8_scaling)


def geglu_ref(gate, up=None, approximate="tanh", *, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`geglu`: fp32 math (fp64 for fp64 inputs), output in gate's dtype (``fp8``: as
    :func:`swiglu_ref`)."""
    check_gelu_approximation(approximate)
    g, u = _split_compute(gate, up)
    return _output(F.gelu(g, approximate=approximate) * u, gate.dtype, fp8, fp8_scaling)
