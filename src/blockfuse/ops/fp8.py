"""FP8: quantize a tensor with its scale, and the FP8 linear layer on ``torch._scaled_mm``.

* ``quantize(x, dtype, recipe=...)`` -> ``(x_fp8, scale)`` with ``x ~= x_fp8.float() * scale``:
  ``scale = amax / fp8_max`` in fp32 (448 for e4m3, 57344 for e5m2), amax floored at 1e-12 so an
  all-zero tensor gets a finite scale; values are clamped to the FP8 range, then rounded (to nearest
  even). ``"tensorwise"``: one amax, a 0-d scale; ``"rowwise"``: the amax of each row (the last
  dimension), scales of shape ``(*x.shape[:-1], 1)``.
* ``fp8_linear(x, weight, bias, x_scale=..., recipe=...)``: ``x @ weight.T + bias`` with both GEMM
  operands in FP8, forward and backward, as torchao's float8 training does it:

  ==========  ==================================  ======================================
  GEMM        tensorwise                          rowwise
  ==========  ==================================  ======================================
  forward     x e4m3 @ W e4m3                     x e4m3 by rows of K, W e4m3 by rows of K
  dgrad       dy e5m2 @ W e4m3 (W's cast)         dy e4m3 by rows, W e4m3 by columns (N)
  wgrad       dy^T e5m2 @ x e4m3 (x's cast)       dy e4m3 and x e4m3 by columns (M)
  ==========  ==================================  ======================================

  Rowwise scales run along the contraction dimension of each GEMM, so each operand is cast once
  per GEMM; the gradients stay e4m3 there, as in torchao's rowwise recipe. The bias gradient (dy's
  column sums) comes from the pass that reads dy for its amax (tensorwise), not from a third read. x
  may come in already quantized (``x_scale`` given): a norm's FP8 output feeds the GEMM without a
  cast pass; or with its tensorwise amax known (``x_amax``, from the kernel that wrote x: ``ops/fp8_act.py``),
  which leaves the cast one pass.
* FP8 outputs of other ops ("quantize as you write"): the norms (``rms_norm``, ``layer_norm`` in every
  form, ``layer_norm_gelu``) and the gated activations (``swiglu``, ``geglu``) take ``fp8="rowwise"``
  or ``"tensorwise"`` and write their output in e4m3 with its fp32 scale in the same pass, returning
  ``(y_fp8, scale)`` where they returned ``y``: what ``fp8_linear(y_fp8, weight, x_scale=scale,
  recipe=<the same recipe>)`` takes as it is. This module holds what they share: the kernels' helpers
  (:func:`to_e4m3`, :func:`delayed_scale`, the history's roll), the state :class:`Float8Scaling`, the
  argument checks and the reference (:func:`quantize_output_ref`).

  - ``"rowwise"``: ``scale = max(amax of the row, 1e-12) / 448``, the amax taken in the kernel from the
    fp32 output it is about to write (a program holds whole rows); scales ``(*y.shape[:-1], 1)``.
  - ``"tensorwise"``, delayed scaling: one scale for the whole output cannot wait for the output's own
    amax without a second pass, so it comes from earlier calls (TransformerEngine's recipe).
    ``fp8_scaling.history`` (H,) holds the amaxes of the last H calls, newest first. A call uses
    ``scale = max(history) / 448`` (1.0 while the history is all zeros, before the first call has been
    recorded: TransformerEngine's initial scale), writes ``clamp(y / scale, -448, 448)`` in e4m3 (values
    past the history's range saturate), and each program folds the amax of its tile into
    ``fp8_scaling.amax`` (1,) with one atomic max; a one-program kernel then rolls it into the history
    (``history = [amax, *history[:-1]]``) and zeroes ``amax`` for the next call. The scale returned is
    0-d. The state lives on the device and is updated in place, so CUDA graphs and ``torch.compile``
    replay it; keep one :class:`Float8Scaling` per call site (its history is one tensor's, over calls).
  - Forward only (inference): with ``fp8`` set, an op whose inputs or parameters require grad (in grad
    mode) raises. An FP8 tensor cannot carry a gradient through autograd: the engine casts the gradient
    flowing into a tensor to that tensor's dtype, FP8 without a scale. The design for training (not built):
    the op's Function returns, beside the non-differentiable ``(y_fp8, scale)``, a differentiable
    zero-stride "carrier" tensor of y's shape and dtype (no memory); ``fp8_linear`` takes it as one more
    input and returns its input gradient (``dy @ W``, in bf16) as the carrier's gradient, which autograd
    sums over the carrier's consumers (Q, K and V, say) and hands to the op's existing backward as ``dy``.
    The weight gradient needs y in FP8 by columns: tensorwise, the same bytes transposed; rowwise, scales
    by columns, re-quantized from the FP8 values as ``fp8_linear`` already does for an FP8 input. (The
    other way, in nn/fp8.py's note: one Function for a norm and the projections reading it.)

Every GEMM here is ``a @ b.T`` for two row-major FP8 operands ``a`` (rows, K) and ``b`` (cols, K):
``b.T`` is then the column-major second operand ``_scaled_mm`` wants on sm90, and K, the
contraction, is the dimension a rowwise scale runs along. The transposed operands of the weight
gradient (``dy^T`` and ``x^T``) are written transposed by the quantize kernel itself, their M
padded with zeros to a multiple of 16 (``_scaled_mm`` wants every dimension but the first
operand's rows a multiple of 16; zero columns add nothing to the product).

The file reads top to bottom: kernels (and the helpers other ops' kernels call); the launcher (op
``blockfuse::fp8_quantize``) and the delayed-scaling state; the weight cast cache; the GEMM; the one
autograd Function; the public functionals; the references.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait
from torch import Tensor
from torch.optim.optimizer import register_optimizer_step_post_hook

from blockfuse.ops.launch import (
    Kernel, cdiv, empty_if_none, empty_scalar, launcher_op, next_power_of_2, programmatic_launch, sm_count, tracing,
    unviewed,
)
from blockfuse.ops import fp8_history
from blockfuse.ops.fp8_history import roll_program
from blockfuse.ops.reduce import sum_partials
from blockfuse.runtime import interpreter_enabled, torch_before, use_triton

# The largest finite value of each FP8 format.
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# NOTE: torchao's floor: an amax below it (an all-zero tensor or row) still gives a finite, nonzero
# scale, and its values quantize to zero.
AMAX_FLOOR = 1e-12
RECIPES = ("tensorwise", "rowwise")
# fp8_linear's recipes: "delayed" is tensorwise with x's and the output gradient's scales from amax histories
# (TransformerEngine's default; a cast is one pass over its input), the weight's from its own amax.
LINEAR_RECIPES = (*RECIPES, "delayed")
# The FP8 output option of another op's kernel (the norms', the gated activations'): its ``FP8`` constexpr
# (0: no FP8 output). E4M3_MAX as a literal for those kernels (a kernel reads constexpr globals only).
FP8_ROWWISE: tl.constexpr = tl.constexpr(1)
FP8_TENSORWISE: tl.constexpr = tl.constexpr(2)
FP8_OUTPUT_CODES = {"rowwise": FP8_ROWWISE.value, "tensorwise": FP8_TENSORWISE.value}
# Not an FP8 output: the output in its own dtype with its tensorwise amax folded by the kernel that writes it, for
# a tensorwise FP8 layer whose cast then reads it once (fp8_linear's x_amax; ops/norm.py's norms).
FP8_AMAX: tl.constexpr = tl.constexpr(3)
E4M3_MAX: tl.constexpr = tl.constexpr(448.0)
E5M2_MAX: tl.constexpr = tl.constexpr(57344.0)
# Amaxes a delayed-scaling history keeps by default (torchao's default length).
HISTORY_LEN = 16
# _scaled_mm on CUDA wants K and N multiples of 16, and the first operand's K too (its rows are free).
GEMM_MULTIPLE = 16

@dataclass(frozen=True)
class Tiles:
    """The launch tiles of the cast, amax, rowwise and byte-transpose kernels: :data:`TILES` for the compiled kernels
    (a GPU), :data:`INTERPRETED_TILES` for the interpreter's (``_tiles``)."""

    # Tiles. NOTE: not yet swept on a GPU; starting points sized like the other elementwise passes
    # (gated.py): the tile kernels (amax, cast) take 64 x 128 elements a program (16 KiB of bf16 read; the
    # cast's transposed tile, 32 KiB in fp32, goes through shared memory); the rowwise kernel takes whole
    # rows up to 8192 elements (two passes over chunks past that, the second from L2). The interpreter
    # pays per program, so it takes larger tiles.
    tile: tuple[int, int, int]  # (BLOCK_M, BLOCK_N, num_warps)
    # The one-pass delayed cast with the column sums (a gradient's cast, its layer's bias gradient): each program
    # reduces its tile across its rows, and that reduction, not the bytes, set the pace at tile (H200, both layouts:
    # 148 us at [16384, 4096] where the cast without sums took 81 and a copy of the same bytes 64). Its cost falls
    # with fewer warps (a cheaper cross-warp step) and taller tiles (fewer partial rows a column): 128 x 64, 2 warps
    # (the same cast 90 us; 51 at [16384, 2048] against the two-pass tensorwise 78; 20 at [8192, 1152]), the best
    # of 17 tiles at all three shapes (benchmarks/fp8_delayed_tiles.py; fp8/14-delayed-2026-11-28-h200).
    sum_tile: tuple[int, int, int]
    # The amax pass's row tiles a program (without row maxima, which need each tile's rows reduced): as many as
    # keep amax_programs_per_sm programs a multiprocessor, at most amax_max_row_iters (the interpreter, which
    # counts no multiprocessors: 2, so the tests run the loop and its masked last tiles).
    amax_max_row_iters: int
    # The tensorwise amax pass (_fp8_tensor_amax_kernel): rows a tile, and its widest column block (a warp for every
    # 256 columns, 8 a thread); the column block halves while more than 1/8 of the row's lanes would be masked.
    tensor_amax_tile: tuple[int, int]
    row_tile_elements: int
    row_chunk: int
    amax_programs_per_sm: int = 8
    tensor_amax_min_block_n: int = 256
    # The byte transpose's square tile: 64 x 64 bytes, 4 warps (32 bytes a thread), 4 KiB of shared memory. H200: the
    # 16 weight transposes of te-4layer's FP8 step in 0.084 ms
    # (benchmarks/results/fp8/10-untimed-kernels-2026-11-28-h200/).
    transpose_tile: tuple[int, int] = (64, 4)  # (BLOCK, num_warps)


TILES = Tiles(tile=(64, 128, 8), sum_tile=(128, 64, 2), amax_max_row_iters=8, tensor_amax_tile=(8, 1024),
              row_tile_elements=8192, row_chunk=8192)
INTERPRETED_TILES = Tiles(tile=(128, 256, 4), sum_tile=(128, 256, 4), amax_max_row_iters=2,
                          tensor_amax_tile=(32, 256), row_tile_elements=32768, row_chunk=4096)


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------

if interpreter_enabled():

    @triton.jit
    def _to_fp8(v, Y, E5M2: tl.constexpr):
        """``clamp(v, -FP8_MAX, FP8_MAX)`` (fp32) rounded to nearest even and cast to Y's element type.

        NOTE: Triton's interpreter (3.9, ``_convert_float``) neither saturates nor rounds a downcast as the
        GPU does: it adds the cut-off bit to the mantissa without carrying into the exponent (31.0 -> 16.0 in
        e4m3) and without ties to even. So here the value is clamped, then rounded to the FP8 grid in fp32:
        the mantissa bits past FP8's dropped with round-to-nearest-even (the carry propagates through the bit
        pattern), and below FP8's smallest normal (subnormals, a fixed spacing) by adding and removing a
        constant; the cast of an exactly representable value is then exact."""
        if E5M2:
            v = tl.minimum(tl.maximum(v, -57344.0), 57344.0)
        else:
            v = tl.minimum(tl.maximum(v, -448.0), 448.0)
        if E5M2:
            DROP: tl.constexpr = 21  # 23 - 2 mantissa bits
            MIN_NORMAL: tl.constexpr = 6.103515625e-05  # 2 ** -14
            MAGIC: tl.constexpr = 192.0  # 1.5 * 2 ** 7: v + MAGIC rounds v to the subnormal spacing 2 ** -16
        else:
            DROP: tl.constexpr = 20  # 23 - 3 mantissa bits
            MIN_NORMAL: tl.constexpr = 0.015625  # 2 ** -6
            MAGIC: tl.constexpr = 24576.0  # 1.5 * 2 ** 14: rounds to the subnormal spacing 2 ** -9
        bits = v.to(tl.int32, bitcast=True)
        lsb = (bits >> DROP) & 1
        normal = ((bits + ((1 << (DROP - 1)) - 1) + lsb) & -(1 << DROP)).to(tl.float32, bitcast=True)
        small = (tl.abs(v) + MAGIC) - MAGIC
        small = tl.where(bits < 0, -small, small)
        return tl.where(tl.abs(v) < MIN_NORMAL, small, normal).to(Y.dtype.element_ty)

else:

    @triton.jit
    def _to_fp8(v, Y, E5M2: tl.constexpr):
        """``clamp(v, -FP8_MAX, FP8_MAX)`` (fp32) cast to Y's element type, rounded to nearest even.

        NOTE: no clamp is written: sm_89+ converts with ``cvt.rn.satfinite`` (Triton 3.6-3.9; a test compiles it
        for sm_90 and reads the PTX), which saturates a finite value past the range to +-FP8_MAX, as the
        clamp did, and keeps NaN a NaN (the clamp's max / min had turned it into -FP8_MAX). Two FMNMX an
        element less: the norms' FP8 forward is bound by its instruction issue (sm_90 SASS, LayerNorm at
        4096: 26 instructions an element; benchmarks/norm_fp8.py --registers)."""
        return v.to(Y.dtype.element_ty)


@triton.jit
def _quantized(x, inverse, Y, E5M2: tl.constexpr):
    """``clamp(x * inverse, -FP8_MAX, FP8_MAX)`` in Y's FP8 type, ``inverse`` = :func:`reciprocal` of the scale
    (one a row, a column or the tensor, taken once a program).

    NOTE: a product with the reciprocal, not an IEEE division of every element (``div_rn``: about ten
    instructions on sm_90): with a division a cast that writes both layouts of a training GEMM's operand
    ran at about half the copy's bandwidth (H200: 4.7 ms of a 24 ms FP8 training step in the cast kernel).
    The references multiply by the same fp32 reciprocal, so the kernels still equal them bit for bit; the
    product differs from the quotient by at most one fp32 ulp (an FP8 rounding only within an ulp of a tie),
    as in the norms' FP8 outputs (:func:`to_e4m3`) and torchao's casts."""
    return _to_fp8(x * inverse, Y, E5M2)


@triton.jit
def scale_of(amax, FP8_MAX: tl.constexpr):
    """``max(amax, 1e-12) / FP8_MAX`` in fp32, rounded as IEEE division (PyTorch's on the CPU, or by a tensor)."""
    return tl.math.div_rn(tl.maximum(amax, 1e-12), FP8_MAX)


# Helpers of the FP8 output option of other ops' kernels (module docstring).


@triton.jit
def reciprocal(scale):
    """``1 / scale`` in fp32, rounded as PyTorch's division."""
    return tl.math.div_rn(1.0, scale)


@triton.jit
def store_transposed_cast(y, mask, rows, cols, col_mask, AMAX, YT, YT_SCALE, MP, pid_m, pid_n,
                          GIVEN_SCALE: tl.constexpr):
    """The end of the kernels that make an op's output again straight into its transposed tensorwise e4m3 cast, a
    weight gradient's operand (ops/norm.py's ``_norm_cast_t_kernel``, ops/fp8_act.py's ``_fp8_act_cast_t_kernel``):
    the fp32 tile ``y`` of ``rows`` x ``cols``, zero outside ``mask`` (rows M..MP: the padding's zeros), quantized
    with the scale of the one amax in AMAX (GIVEN_SCALE: AMAX holds the scale itself, a delayed cast's), loaded as a
    column as _fp8_cast_kernel loads it (its NOTE), and stored transposed into YT (N, MP); the program (0, 0) also
    stores the scale in YT_SCALE."""
    y = tl.where(mask, y, 0.0)
    if GIVEN_SCALE:
        col_scale = tl.load(AMAX + cols * 0)
    else:
        col_scale = scale_of(tl.load(AMAX + cols * 0), E4M3_MAX)
    qt = _quantized(tl.trans(y), reciprocal(col_scale)[:, None], YT, False)  # (BLOCK_N, BLOCK_M)
    tl.store(YT + cols[:, None].to(tl.int64) * MP + rows[None, :], qt, mask=col_mask[:, None] & (rows < MP)[None, :])
    if (pid_m == 0) & (pid_n == 0):
        if GIVEN_SCALE:
            tl.store(YT_SCALE, tl.load(AMAX))
        else:
            tl.store(YT_SCALE, scale_of(tl.load(AMAX), E4M3_MAX))


@triton.jit
def to_e4m3(y, inv_scale, Q):
    """``clamp(y * inv_scale, -448, 448)`` in e4m3 (Q's element type), for fp32 ``y`` and ``inv_scale``
    = :func:`reciprocal` of its scale (a scalar, or one a row broadcast as (BLOCK_M, 1)).

    NOTE: a product with the reciprocal (one division a row or a call), not a division of each element
    as :func:`_quantized` does: an IEEE division is about ten instructions on sm_90, and these kernels
    run at the memory's speed only with few instructions an element. The product differs from the
    quotient by at most one fp32 ulp, so it changes an FP8 rounding only within an ulp of a tie."""
    return _to_fp8(y * inv_scale, Q, False)


@triton.jit
def row_amax(y, mask):
    """``max |y|`` of each row of a (BLOCK_M, BLOCK_N) fp32 tile over its masked-in elements (0 for none)."""
    return tl.max(tl.where(mask, tl.abs(y), 0.0), axis=1)


@triton.jit
def fold_amax(AMAX, value):
    """Folds a program's ``value`` into the call's amax, the (1,) fp32 ``AMAX``, with an atomic max, skipped
    where AMAX already holds at least as much.

    NOTE: the norms' tensorwise forward runs a program a row or two (16384 at [16384, 4096]), each with one
    atomic on the one address, and the atomics on an address serialize in L2: tensorwise ran ~3 us behind
    rowwise in every norm form (H200). The amax passes and ops/fp8_act.py's kernels take it too (a thousand
    programs or two at the issue's shapes). AMAX only grows during a call, so a plain load that finds it no smaller
    leaves nothing for the atomic to do; a stale load only sends an atomic that changes nothing. A NaN value
    still goes in (``not value <= AMAX``), as it did."""
    if not value <= tl.load(AMAX):
        tl.atomic_max(AMAX, value, sem="relaxed")


@triton.jit
def delayed_scale(HISTORY, history_len, BLOCK_H: tl.constexpr):
    """The tensorwise scale of a call (delayed scaling): ``max(HISTORY[:history_len]) / 448`` as
    :func:`scale_of` rounds it, or 1.0 while the history holds no amax (all zeros)."""
    offs = tl.arange(0, BLOCK_H)
    amax = tl.max(tl.load(HISTORY + offs, mask=offs < history_len, other=0.0), axis=0)
    return tl.where(amax > 0.0, scale_of(amax, E4M3_MAX), 1.0)


@triton.jit
def delayed_scales(HISTORY, history_len, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, FP8_MAX: tl.constexpr):
    """:func:`delayed_scale` for any FP8 maximum, as a (BLOCK_N,) vector of that one scale: each of its elements
    reduces its own load of the history (see _fp8_cast_kernel's NOTE on a scalar scale and a transposed tile)."""
    offs = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_N)
    history = tl.load(HISTORY + offs[None, :] + cols[:, None] * 0, mask=(offs < history_len)[None, :], other=0.0)
    amax = tl.max(history, axis=1)  # (BLOCK_N,), all equal
    return tl.where(amax > 0.0, scale_of(amax, FP8_MAX), 1.0)


@triton.jit
def _fp8_roll_kernel(
    HISTORY,  # (H,) fp32 amaxes of the last H calls, newest first
    AMAX,  # (1,) fp32 the amax the call just made recorded (atomic max); zeroed for the next call
    history_len,
    BLOCK_H: tl.constexpr,
    PDL: tl.constexpr,  # launched with programmatic dependent launch: wait for the producer's end first
):
    # One program: HISTORY = [AMAX, *HISTORY[:-1]], AMAX = 0.
    if PDL:
        gdc_wait()  # the producer's programs all done and their atomics visible
    roll_program(HISTORY, AMAX, history_len, BLOCK_H)


@triton.jit
def _fp8_rowwise_kernel(
    X,  # (M, N) input, any strides
    Y,  # (M, N) FP8 output, row-major: each row over its scale
    Y_SCALE,  # (M,) fp32 scale of each row: max(amax of the row, 1e-12) / FP8_MAX
    stride_m, stride_n, M, N,
    FP8_MAX: tl.constexpr,
    E5M2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS: tl.constexpr,  # column chunks of BLOCK_N a row takes (1: the whole row in one load)
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_N)
    x_rows = X + rows[:, None].to(tl.int64) * stride_m
    y_rows = Y + rows[:, None].to(tl.int64) * N
    if CHUNKS == 1:
        mask = row_mask[:, None] & (cols < N)[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_n, mask=mask, other=0.0).to(tl.float32)
        scale = scale_of(tl.max(tl.abs(x), axis=1), FP8_MAX)
        tl.store(y_rows + cols[None, :], _quantized(x, reciprocal(scale)[:, None], Y, E5M2), mask=mask)
    else:
        amax = tl.zeros([BLOCK_M], dtype=tl.float32)
        for chunk in range(CHUNKS):
            c = chunk * BLOCK_N + cols
            mask = row_mask[:, None] & (c < N)[None, :]
            x = tl.load(x_rows + c[None, :] * stride_n, mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
        scale = scale_of(amax, FP8_MAX)
        inverse = reciprocal(scale)[:, None]
        for chunk in range(CHUNKS):
            c = chunk * BLOCK_N + cols
            mask = row_mask[:, None] & (c < N)[None, :]
            x = tl.load(x_rows + c[None, :] * stride_n, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_rows + c[None, :], _quantized(x, inverse, Y, E5M2), mask=mask)
    tl.store(Y_SCALE + rows, scale, mask=row_mask)


@triton.jit
def _load_input(X, X_SCALE, rows, cols, row_mask, col_mask, stride_m, stride_n):
    """The fp32 (rows, cols) tile of the input: X's values, times each row's scale for an FP8 X with X_SCALE
    (an input another op quantized, cast again along its columns: no fp32 copy of it in memory)."""
    x = tl.load(X + rows[:, None].to(tl.int64) * stride_m + cols[None, :] * stride_n,
                mask=row_mask[:, None] & col_mask[None, :], other=0.0).to(tl.float32)
    if X_SCALE is not None:
        x = x * tl.load(X_SCALE + rows, mask=row_mask, other=0.0)[:, None]
    return x


@triton.jit
def _fp8_amax_kernel(  # the rowwise casts' amax pass (tensorwise: _fp8_tensor_amax_kernel)
    X,  # (M, N) input, any strides
    X_SCALE,  # (M,) fp32 scale of each row of an FP8 X (x = X * X_SCALE), or None
    ROW_AMAX,  # (M,) fp32 max |x| of each row (zero-initialized), or None
    COL_AMAX,  # (N,) fp32 max |x| of each column (zero-initialized), or None
    COL_SUM,  # (cdiv(M, BLOCK_M * ROW_ITERS), N) fp32 sum of x's columns over each program's rows, or None
    stride_m, stride_n, M, N,
    HAS_ROW: tl.constexpr,
    HAS_COL: tl.constexpr,
    HAS_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROW_ITERS: tl.constexpr,  # row tiles a program takes, one after the other (1 with HAS_ROW)
):
    # NOTE: each program reduces its rows, then folds its partial maxima in with one atomic max each
    # (the tiny reduction, done by the memory system; no second kernel). A max is exact in any order,
    # so the result is reproducible bit for bit; relaxed ordering, as nothing reads them before the kernel ends.
    # A program takes ROW_ITERS row tiles and keeps elementwise maxima (and sums) across them in registers, so
    # the reductions across the tile's warps (shared memory and barriers) run once per program, not once per
    # tile: with the column sums, one a tile made this pass twice as slow (H200, te-4layer's layers).
    first = tl.program_id(0) * (BLOCK_M * ROW_ITERS)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    a = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for i in range(ROW_ITERS):
        rows = first + i * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        x = _load_input(X, X_SCALE, rows, cols, row_mask, col_mask, stride_m, stride_n)
        a_tile = tl.abs(x)
        a = tl.maximum(a, a_tile)
        if HAS_SUM:
            total += x
        if HAS_ROW:  # (ROW_ITERS is 1 then: the rows' maxima once)
            tl.atomic_max(ROW_AMAX + rows, tl.max(a_tile, axis=1), mask=row_mask, sem="relaxed")
    if HAS_COL:
        tl.atomic_max(COL_AMAX + cols, tl.max(a, axis=0), mask=col_mask, sem="relaxed")
    if HAS_SUM:
        # NOTE: the bias gradient of an FP8 layer (x is its output gradient) from the pass that reads x for
        # its amax anyway: partial sums a program, added in a fixed order by ops/reduce.py (reproducible).
        tl.store(COL_SUM + tl.program_id(0).to(tl.int64) * N + cols, tl.sum(total, axis=0), mask=col_mask)


@triton.jit
def _fp8_tensor_amax_kernel(
    X,  # (M, N) input, any strides
    X_SCALE,  # (M,) fp32 scale of each row of an FP8 X (x = X * X_SCALE), or None
    TENSOR_AMAX,  # (1,) fp32 max |x| of the whole tensor (zero-initialized)
    COL_SUM,  # (cdiv(M, BLOCK_M * ROW_ITERS), N) fp32 sum of x's columns over each program's rows, or None
    stride_m, stride_n, M, N,
    HAS_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROW_ITERS: tl.constexpr,
):
    """The amax pass of a tensorwise cast (and a layer's bias gradient): tiles a few rows tall and up to 1024
    columns wide. NOTE: with the default layout a thread then holds the tile's rows of its 8 columns, so each
    tile's column maxima and sums are taken in the thread's registers, with no exchange between warps; one
    exchange a program remains, for the tensor's maximum. The square tiles of _fp8_amax_kernel reduced their
    column sums across warps (H200: +0.4 ms over te-4layer's step for the 0.82 ms of sums they replaced)."""
    first = tl.program_id(0) * (BLOCK_M * ROW_ITERS)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    col_max = tl.zeros([BLOCK_N], dtype=tl.float32)
    col_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in range(ROW_ITERS):
        rows = first + i * BLOCK_M + tl.arange(0, BLOCK_M)
        x = _load_input(X, X_SCALE, rows, cols, rows < M, col_mask, stride_m, stride_n)
        col_max = tl.maximum(col_max, tl.max(tl.abs(x), axis=0))
        if HAS_SUM:
            col_sum += tl.sum(x, axis=0)
    fold_amax(TENSOR_AMAX, tl.max(col_max, axis=0))
    if HAS_SUM:
        tl.store(COL_SUM + tl.program_id(0).to(tl.int64) * N + cols, col_sum, mask=col_mask)


@triton.jit
def _known_scale_outputs(x, scale, Y, Y_SCALE, YT_SCALE, COL_SUM, rows, cols, row_mask, col_mask, N,
                         E5M2: tl.constexpr, HAS_Y: tl.constexpr, HAS_YT: tl.constexpr, HAS_SUM: tl.constexpr):
    """_fp8_cast_kernel's row-major tile, the scales and the column sums when the tensorwise scale is known before
    the pass (delayed, or given): Y's tile quantized with ``scale``, each program's column sums of its tile (rows
    past M were loaded as zeros), and the scales from program (0, 0). (Y^T's tile is the caller's, as for every
    recipe.)"""
    pid_m = tl.program_id(0)
    if HAS_Y:
        q = _quantized(x, reciprocal(scale), Y, E5M2)
        tl.store(Y + rows[:, None].to(tl.int64) * N + cols[None, :], q, mask=row_mask[:, None] & col_mask[None, :])
    if HAS_SUM:
        tl.store(COL_SUM + pid_m.to(tl.int64) * N + cols, tl.sum(x, axis=0), mask=col_mask)
    if (pid_m == 0) & (tl.program_id(1) == 0):
        if HAS_Y:
            tl.store(Y_SCALE, scale)
        if HAS_YT:
            tl.store(YT_SCALE, scale)


@triton.jit
def _fp8_cast_kernel(
    X,  # (M, N) input, any strides
    X_SCALE,  # (M,) fp32 scale of each row of an FP8 X (x = X * X_SCALE), or None
    AMAX,  # tensorwise: (1,) amax of the tensor; rowwise: (M,) amax of each row (Y's scales)
    COL_AMAX,  # rowwise: (N,) amax of each column (YT's scales); tensorwise: None
    RESET,  # tensorwise: (1,) fp32 the other slot of the stream's amax scratch, zeroed here; or None (AmaxSlots)
    Y,  # (M, N) FP8 output, row-major; or None
    Y_SCALE,  # tensorwise: () fp32 scale; rowwise: (M,) scale of each row; or None
    YT,  # (N, MP) FP8 output, row-major: X transposed, its columns M..MP zero; or None
    YT_SCALE,  # tensorwise: () fp32 scale; rowwise: (N,) scale of each of X's columns; or None
    HISTORY,  # delayed (tensorwise): (H,) fp32 amaxes of earlier calls, the scale's source; AMAX then takes this
    #           call's amax (atomic max) for the history's roll after; else None
    COL_SUM,  # delayed: (grid rows, N) fp32 each program's column sums of its tile (HAS_SUM); else None
    stride_m, stride_n, M, N, MP, history_len,
    FP8_MAX: tl.constexpr,
    E5M2: tl.constexpr,
    ROWWISE: tl.constexpr,
    HAS_Y: tl.constexpr,
    HAS_YT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr,  # delayed: history_len rounded up to a power of two (else 1)
    HAS_SUM: tl.constexpr,  # delayed: COL_SUM written
    GIVEN_SCALE: tl.constexpr,  # tensorwise: AMAX holds the () scale itself (a delayed cast made again), no fold
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    x = _load_input(X, X_SCALE, rows, cols, row_mask, col_mask, stride_m, stride_n)
    # NOTE: YT's tile is transposed in fp32, before its cast (a layout change through shared memory), so
    # that its stores run along YT's rows.
    if ROWWISE:
        if HAS_Y:
            row_scale = scale_of(tl.load(AMAX + rows, mask=row_mask, other=0.0), FP8_MAX)
            q = _quantized(x, reciprocal(row_scale)[:, None], Y, E5M2)
            tl.store(Y + rows[:, None].to(tl.int64) * N + cols[None, :], q, mask=row_mask[:, None] & col_mask[None, :])
            if pid_n == 0:
                tl.store(Y_SCALE + rows, row_scale, mask=row_mask)
        if HAS_YT:
            col_scale = scale_of(tl.load(COL_AMAX + cols, mask=col_mask, other=0.0), FP8_MAX)  # (BLOCK_N,)
    elif GIVEN_SCALE:  # the scale of an earlier delayed cast of the same values
        col_scale = tl.load(AMAX + cols * 0)  # (BLOCK_N,), all one scale (the NOTE below)
        _known_scale_outputs(x, tl.max(col_scale, axis=0), Y, Y_SCALE, YT_SCALE, COL_SUM, rows, cols, row_mask,
                             col_mask, N, E5M2, HAS_Y, HAS_YT, HAS_SUM)
    elif HISTORY is not None:  # delayed scaling: the scale from earlier calls' amaxes, this call's folded
        col_scale = delayed_scales(HISTORY, history_len, BLOCK_H, BLOCK_N, FP8_MAX)  # (BLOCK_N,), all one scale
        fold_amax(AMAX, tl.max(tl.max(tl.abs(x), axis=1), axis=0))
        _known_scale_outputs(x, tl.max(col_scale, axis=0), Y, Y_SCALE, YT_SCALE, COL_SUM, rows, cols, row_mask,
                             col_mask, N, E5M2, HAS_Y, HAS_YT, HAS_SUM)
    else:
        scale = scale_of(tl.load(AMAX), FP8_MAX)
        if HAS_Y:
            q = _quantized(x, reciprocal(scale), Y, E5M2)
            tl.store(Y + rows[:, None].to(tl.int64) * N + cols[None, :], q, mask=row_mask[:, None] & col_mask[None, :])
        if HAS_YT:
            # NOTE: the tensor's scale as a (BLOCK_N,) load of the one amax, so that YT is quantized by the
            # same code as rowwise's YT below (the transposed fp32 tile over a column of scales). With the
            # scalar (the quotients Y's, which the compiler may share and transpose as FP8 bytes), the
            # gradients of fp32 tensorwise layers on an H200 (torch 2.11, Triton 3.6) came out as if a quarter
            # of the rows of every YT were garbage (dx wrong in 25% of its elements, dweight in 1 - 0.75^2 =
            # 43.75%), while rowwise YT and bf16 inputs were right.
            col_scale = scale_of(tl.load(AMAX + cols * 0), FP8_MAX)  # (BLOCK_N,), every one the tensor's scale
        if (pid_m == 0) & (pid_n == 0):
            if HAS_Y:
                tl.store(Y_SCALE, scale)
            if HAS_YT:
                tl.store(YT_SCALE, scale)
            if RESET is not None:
                tl.store(RESET, 0.0)
    if HAS_YT:
        # Rows M..MP of the tile were loaded as zeros: the padding of YT is written here too.
        qt = _quantized(tl.trans(x), reciprocal(col_scale)[:, None], YT, E5M2)  # (BLOCK_N, BLOCK_M)
        tl.store(YT + cols[:, None].to(tl.int64) * MP + rows[None, :], qt,
                 mask=col_mask[:, None] & (rows < MP)[None, :])
        if ROWWISE:
            if pid_m == 0:
                tl.store(YT_SCALE + cols, col_scale, mask=col_mask)


@triton.jit
def _transpose_bytes_kernel(
    X,  # (M, K) bytes (an FP8 tensor viewed as uint8), unit column stride
    Y,  # (K, MP) bytes: X transposed, zero past column M
    stride_x, M, K, MP,
    BLOCK: tl.constexpr,
):
    """A tile of X transposed into Y through shared memory (tl.trans), so that both the loads and the stores run
    along rows: PyTorch's strided copy of a transposed byte tensor ran at about a tenth of the copy's bandwidth
    (H200: 16 weight transposes, 0.91 ms of te-4layer's FP8 step, benchmarks/results/fp8/9-cast-again-2026-11-28-h200/).
    Rows M..MP of the tile load as zeros: the padding of Y is written here too.

    NOTE: transposed as bytes. Widened to 32 bits first (after _fp8_cast_kernel's NOTE, where FP8 bytes the
    compiler transposed came out a quarter wrong), the sm_90 build still changes the tile's layout on the bytes
    (Triton moves the conversion before the extension); the activation's and the norm's transposed casts
    (ops/fp8_act.py, ops/norm.py) change an FP8 tile's layout the same way, and the first passed its tests on an
    H200 (benchmarks/results/fp8/9-cast-again-2026-11-28-h200/call-1/tests.log)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=(rows < M)[:, None] & (cols < K)[None, :], other=0)
    tl.store(Y + cols[:, None].to(tl.int64) * MP + rows[None, :], tl.trans(x),
             mask=(cols < K)[:, None] & (rows < MP)[None, :])


# ----------------------------------------------------------------------------------------
# Launcher: plain Python that allocates, tiles and launches, registered as an op without autograd
# ----------------------------------------------------------------------------------------

_rowwise_kernel = Kernel(_fp8_rowwise_kernel)
_amax_kernel = Kernel(_fp8_amax_kernel)
_tensor_amax_kernel = Kernel(_fp8_tensor_amax_kernel)
_cast_kernel = Kernel(_fp8_cast_kernel)
_roll_kernel = Kernel(_fp8_roll_kernel)
_transpose_kernel = Kernel(_transpose_bytes_kernel)


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _tiles(device: torch.device) -> Tiles:
    """The table of the kernels that run on ``device``'s tensors: compiled (a GPU) or interpreted."""
    return TILES if device.type == "cuda" else INTERPRETED_TILES


def _launch_rowwise(x: Tensor, y: Tensor, y_scale: Tensor, e5m2: bool) -> None:
    m, n = x.shape
    tiles = _tiles(x.device)
    block_n = min(next_power_of_2(n), tiles.row_chunk)
    block_m = max(1, min(tiles.row_tile_elements // block_n, next_power_of_2(m)))
    num_warps = min(8, max(1, block_m * block_n // 1024))
    _rowwise_kernel((cdiv(m, block_m),), x, y, y_scale, x.stride(0), x.stride(1), m, n,
                    FP8_MAX=FP8_MAX[y.dtype], E5M2=e5m2, BLOCK_M=block_m, BLOCK_N=block_n,
                    CHUNKS=cdiv(n, block_n), num_warps=num_warps)


def _tensor_amax_tile(x: Tensor, n: int) -> tuple[int, int]:
    """(rows, columns) of a tile of the tensorwise amax pass for rows ``n`` wide (``Tiles.tensor_amax_tile``)."""
    tiles = _tiles(x.device)
    rows, widest = tiles.tensor_amax_tile
    block_n = min(next_power_of_2(n), widest)
    while block_n > tiles.tensor_amax_min_block_n and (cdiv(n, block_n) * block_n - n) * 8 > n:
        block_n //= 2
    return rows, block_n


def _launch_tensor_amax(x: Tensor, x_scale: Optional[Tensor], amax: Tensor, partial: Optional[Tensor],
                        iters: int) -> None:
    """The tensorwise amax pass over ``x`` (M, N), M and N > 0: its maximum folded into ``amax`` (1,) fp32 (zeroed
    before), and with ``partial`` the programs' column sums."""
    m, n = x.shape
    amax_m, amax_n = _tensor_amax_tile(x, n)
    _tensor_amax_kernel((cdiv(m, amax_m * iters), cdiv(n, amax_n)), x, x_scale, amax, partial, x.stride(0),
                        x.stride(1), m, n, HAS_SUM=partial is not None, BLOCK_M=amax_m, BLOCK_N=amax_n,
                        ROW_ITERS=iters, num_warps=max(1, amax_n // 256))


class _AmaxSlots:
    """Two (1,) fp32 slots a CUDA stream (or the CPU) for the tensorwise casts' own amax passes, so that their amax
    needs no zero fill (a ``torch.zeros`` allocation and launch on the host: 48 of te-4layer's FP8 step's 394
    launches): a cast's amax pass folds into one slot, which the other cast before it zeroed, and its cast kernel
    reads that slot and zeroes the other one for the next. Launches on one stream run in order, so each pass finds
    its slot zero, as long as every pass is followed by its cast before the next pass (``_fp8_quantize`` launches
    them back to back) and the slots are used from one thread a stream.

    None (the launcher zero-fills its amax as before) while anything traces (the kernels are the compiler's then,
    and the slots would be hidden constants) and during a CUDA graph's capture (a graph replayed would start from
    the slot its capture ended on)."""

    def __init__(self) -> None:
        self.slots: dict = {}  # (device index or -1, raw stream) -> [(slot 0, slot 1), index of the next one]

    def take(self, like: Tensor) -> Optional[tuple[Tensor, Tensor]]:
        """``(slot, other)``: the slot (zero) the next amax pass on ``like``'s stream folds into and the one its cast
        kernel zeroes; or None (see the class)."""
        if tracing():
            return None
        if like.is_cuda:
            device = like.get_device()
            if torch.cuda.is_current_stream_capturing():
                return None
            key = (device, torch._C._cuda_getCurrentRawStream(device))
        else:
            key = (-1, 0)
        entry = self.slots.get(key)
        if entry is None:
            pair = torch.zeros((2,), dtype=torch.float32, device=like.device)
            entry = self.slots[key] = [(pair[0:1], pair[1:2]), 0]
        (first, second), index = entry
        entry[1] = 1 - index
        return (first, second) if index == 0 else (second, first)


AMAX_SLOTS = _AmaxSlots()


def tensor_amax(x: Tensor) -> Tensor:
    """``max |x|`` of a 2-D high-precision ``x`` as the tensorwise casts take it (``amax=``): (1,) fp32, 0 for an
    empty x. The casts' own amax pass (the kernels where they run, the reference elsewhere). Eager only (a
    launcher without an op of its own: :func:`_forward` calls it where nothing traces)."""
    if not use_triton(x):
        return _amax(x.float()).reshape(1)
    amax = torch.zeros((1,), device=x.device, dtype=torch.float32)
    m, n = x.shape
    if m > 0 and n > 0:
        amax_m, amax_n = _tensor_amax_tile(x, n)
        _launch_tensor_amax(x, None, amax, None, _amax_row_iters(x, cdiv(m, amax_m) * cdiv(n, amax_n)))
    return amax


def _amax_row_iters(x: Tensor, count: int) -> int:
    """Row tiles a program of the amax pass takes (a power of two): ``count`` tiles in all, spread so that
    at least ``Tiles.amax_programs_per_sm`` programs a multiprocessor remain (see ``Tiles.amax_max_row_iters``)."""
    tiles = _tiles(x.device)
    if not x.is_cuda:
        return tiles.amax_max_row_iters
    wanted = max(1, count // (tiles.amax_programs_per_sm * sm_count(x.device)))
    return min(tiles.amax_max_row_iters, 1 << (wanted.bit_length() - 1))


@launcher_op("fp8_quantize")
def _fp8_quantize(x: Tensor, dtype: torch.dtype, rowwise: bool, rows: bool, transposed: bool,
                  pad: int, x_scale: Optional[Tensor] = None, sum_dtype: Optional[torch.dtype] = None,
                  amax: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(y, y_scale, yt, yt_scale, col_sum)`` for ``x`` (M, N) of any strides; an output not asked for is
    empty. ``x_scale``: x is FP8 with these (M,) row scales (its values x * x_scale; not with rowwise rows
    alone). ``sum_dtype``: also ``col_sum``, x summed over its rows in fp32 and written in this dtype (a
    layer's bias gradient, from the amax pass; not with rowwise rows: see :func:`_fused_column_sum`).

    ``rows``: ``y`` (M, N) row-major, x quantized by rows (rowwise: ``y_scale`` (M, 1)) or as a whole
    (a 0-d ``y_scale``). ``transposed``: ``yt`` (N, MP) row-major with MP = M rounded up to ``pad``,
    x transposed and quantized by x's columns (rowwise: ``yt_scale`` (N, 1)) or as a whole, zero past
    column M. Rowwise rows alone take one pass over x; everything else two (the amax, then the cast).

    ``amax`` (tensorwise): x's amax, (1,) fp32, already known (the kernel that wrote x folded it,
    ``ops/fp8_act.py``): no amax pass, one pass over x (no ``sum_dtype`` then: the writer sums too).
    """
    m, n = x.shape
    mp = round_up(m, pad)
    e5m2 = dtype == torch.float8_e5m2
    y = x.new_empty((m, n), dtype=dtype) if rows else None
    y_scale = (x.new_empty((m, 1), dtype=torch.float32) if rowwise else empty_scalar(x)) if rows else None
    yt = x.new_empty((n, mp), dtype=dtype) if transposed else None
    yt_scale = (x.new_empty((n, 1), dtype=torch.float32) if rowwise else empty_scalar(x)) if transposed else None
    col_sum = None
    if sum_dtype is not None and rowwise and rows:
        raise ValueError("sum_dtype: the column sum comes from an amax pass over several row tiles a program; with "
                         "rowwise rows it has none (rows alone) or one tile a program (see _fused_column_sum)")
    if amax is not None and (rowwise or sum_dtype is not None):
        raise ValueError("amax: a given amax is the whole tensor's (tensorwise), and the pass it replaces would have "
                         "summed the columns: pass sum_dtype=None (the writer of x sums them)")
    if rowwise and rows and not transposed and x_scale is None:
        if m > 0:
            _launch_rowwise(x, y, y_scale, e5m2)
    else:
        block_m, block_n, num_warps = _tiles(x.device).tile
        amax_m, amax_n = (block_m, block_n) if rowwise else _tensor_amax_tile(x, n)
        iters = 1 if rowwise and rows else _amax_row_iters(x, cdiv(m, amax_m) * cdiv(n, amax_n))
        partial = None
        if sum_dtype is not None:
            col_sum = x.new_empty((n,), dtype=sum_dtype)
            partial = x.new_empty((1, cdiv(m, amax_m * iters), n), dtype=torch.float32)
        slots = None
        if rowwise:
            tensor_amax = None
        elif amax is not None:
            tensor_amax = amax
        else:
            slots = AMAX_SLOTS.take(x) if m > 0 and n > 0 else None
            tensor_amax = slots[0] if slots is not None else torch.zeros((1,), device=x.device, dtype=torch.float32)
        row_amax = torch.zeros((m,), device=x.device, dtype=torch.float32) if rowwise and rows else None
        col_amax = torch.zeros((n,), device=x.device, dtype=torch.float32) if rowwise and transposed else None
        try:
            if m > 0 and n > 0 and rowwise:
                _amax_kernel((cdiv(m, block_m * iters), cdiv(n, block_n)), x, x_scale, row_amax, col_amax, partial,
                             x.stride(0), x.stride(1), m, n, HAS_ROW=row_amax is not None,
                             HAS_COL=col_amax is not None, HAS_SUM=partial is not None, BLOCK_M=block_m,
                             BLOCK_N=block_n, ROW_ITERS=iters, num_warps=num_warps)
            elif m > 0 and n > 0 and amax is None:
                _launch_tensor_amax(x, x_scale, tensor_amax, partial, iters)
            if m > 0 and n > 0 and partial is not None:
                sum_partials(partial, col_sum, None)
            elif col_sum is not None:
                col_sum.zero_()  # an empty x: the sum of nothing
            # At least one program on each axis: an empty x still gets its scales (of the floor).
            grid = (max(1, cdiv(mp if transposed else m, block_m)), max(1, cdiv(n, block_n)))
            _cast_kernel(grid, x, x_scale, row_amax if rowwise else tensor_amax, col_amax,
                         None if slots is None else slots[1], y, y_scale, yt, yt_scale, None, None,
                         x.stride(0), x.stride(1), m, n, mp, 0, FP8_MAX=FP8_MAX[dtype], E5M2=e5m2, ROWWISE=rowwise,
                         HAS_Y=rows, HAS_YT=transposed, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_H=1, HAS_SUM=False,
                         GIVEN_SCALE=False, num_warps=num_warps)
        except BaseException:
            if slots is not None:  # a pass without its cast: both slots zero again for the next
                slots[0].zero_()
                slots[1].zero_()
            raise
    return (empty_if_none(y, x), empty_if_none(y_scale, x), empty_if_none(yt, x), empty_if_none(yt_scale, x),
            empty_if_none(col_sum, x))


@launcher_op("fp8_quantize_delayed", mutates_args=("history", "amax"))
def _fp8_quantize_delayed(x: Tensor, dtype: torch.dtype, rows: bool, transposed: bool, pad: int, history: Tensor,
                          amax: Tensor, sum_dtype: Optional[torch.dtype] = None
                          ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """:func:`_fp8_quantize`'s tensorwise outputs with delayed scaling: the scale from ``history`` (H,) fp32, the
    amaxes of earlier calls (``max(history) / fp8_max``, 1.0 while it is all zeros), so one pass over x (no amax
    pass): the cast kernel folds x's amax into ``amax`` (1,) (zero before the call) and writes each program's
    column sums with ``sum_dtype``; then one program rolls it in (``history = [amax, *history[:-1]]``, ``amax =
    0``). ``x`` is high precision (M, N), any strides."""
    m, n = x.shape
    mp = round_up(m, pad)
    e5m2 = dtype == torch.float8_e5m2
    y, y_scale, yt, yt_scale = tensorwise_outputs(x, m, n, mp, dtype, rows, transposed)
    tiles = _tiles(x.device)
    block_m, block_n, num_warps = tiles.tile if sum_dtype is None else tiles.sum_tile
    # At least one program on each axis: an empty x still gets its scales.
    grid = (max(1, cdiv(mp if transposed else m, block_m)), max(1, cdiv(n, block_n)))
    col_sum, partial = column_partials(x, grid[0], n, sum_dtype)
    h = int(history.shape[0])
    fp8_history.settle(history)
    _cast_kernel(grid, x, None, amax, None, None, y, y_scale, yt, yt_scale, history, partial,
                 x.stride(0), x.stride(1), m, n, mp, h, FP8_MAX=FP8_MAX[dtype], E5M2=e5m2, ROWWISE=False,
                 HAS_Y=rows, HAS_YT=transposed, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_H=next_power_of_2(h),
                 HAS_SUM=partial is not None, GIVEN_SCALE=False, num_warps=num_warps)
    finish_delayed_cast(partial, col_sum, n, history, amax)
    return (empty_if_none(y, x), empty_if_none(y_scale, x), empty_if_none(yt, x), empty_if_none(yt_scale, x),
            empty_if_none(col_sum, x))


def finish_delayed_cast(partial: Optional[Tensor], col_sum: Optional[Tensor], n: int, history: Tensor,
                        amax: Tensor) -> None:
    """After a delayed-recipe cast that wrote ``amax`` (and, with ``partial``, its column sums' partials for ``n``
    columns): the sums into ``col_sum`` with the history's roll as one more program of that launch, or the roll
    alone (no sums; an empty width's sums zeroed)."""
    if partial is not None and n > 0:
        sum_partials(partial, col_sum, None, roll=(history, amax))
        return
    if partial is not None:
        col_sum.zero_()
    roll_amax_history(history, amax)


def tensorwise_outputs(like: Tensor, m: int, n: int, mp: int, dtype: torch.dtype, rows: bool, transposed: bool
                       ) -> tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """``(y, y_scale, yt, yt_scale)`` of a one-pass tensorwise cast into ``dtype`` (on ``like``'s device): the
    (m, n) layout with its 0-d scale where ``rows``, the (n, mp) one where ``transposed``, None otherwise."""
    y = like.new_empty((m, n), dtype=dtype) if rows else None
    y_scale = empty_scalar(like) if rows else None
    yt = like.new_empty((n, mp), dtype=dtype) if transposed else None
    yt_scale = empty_scalar(like) if transposed else None
    return y, y_scale, yt, yt_scale


def column_partials(like: Tensor, programs: int, n: int, sum_dtype: Optional[torch.dtype]
                    ) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """``(col_sum, partial)`` for a pass that sums columns a row block at a time: the (n,) sums in ``sum_dtype``
    and the (1, programs, n) fp32 partials a kernel writes (:func:`blockfuse.ops.reduce.sum_partials` adds
    them); both None without ``sum_dtype``."""
    if sum_dtype is None:
        return None, None
    return like.new_empty((n,), dtype=sum_dtype), like.new_empty((1, programs, n), dtype=torch.float32)


def transposed_cast_with_scale(x: Tensor, scale: Tensor, pad: int) -> tuple[Tensor, Tensor]:
    """``(xt, scale)``: x (M, N) high precision, transposed and cast to e4m3 with a given 0-d ``scale`` (that of an
    earlier delayed cast of x: the same values transposed), ``(N, MP)``, MP = M rounded up to ``pad``, zero past
    column M. One pass (:func:`_fp8_cast_kernel`'s GIVEN_SCALE; an op, which a traced backward records)."""
    if not use_triton(x):
        return _transposed_ref(_cast_ref(x.float(), scale, torch.float8_e4m3fn), pad), scale.clone()
    return _fp8_cast_t_given(x, scale, pad)


def heads_transposed_cast(out: Tensor, scale: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`transposed_cast_with_scale` of attention's output ``out`` (batch, heads, seq, head_dim) as the output
    projection takes it, (batch * seq, heads * head_dim): a :class:`Recast`'s ``fn`` (models/fused.py)."""
    batch, heads, seq, head_dim = out.shape
    return transposed_cast_with_scale(out.transpose(1, 2).reshape(batch * seq, heads * head_dim), scale,
                                      GEMM_MULTIPLE)


@launcher_op("fp8_cast_t_given")
def _fp8_cast_t_given(x: Tensor, scale: Tensor, pad: int) -> tuple[Tensor, Tensor]:
    """:func:`transposed_cast_with_scale` by the kernel."""
    m, n = x.shape
    mp = round_up(m, pad)
    yt = x.new_empty((n, mp), dtype=torch.float8_e4m3fn)
    yt_scale = empty_scalar(x)
    block_m, block_n, num_warps = _tiles(x.device).tile
    _cast_kernel((max(1, cdiv(mp, block_m)), max(1, cdiv(n, block_n))), x, None, scale, None, None, None, None, yt,
                 yt_scale, None, None, x.stride(0), x.stride(1), m, n, mp, 0, FP8_MAX=FP8_MAX[torch.float8_e4m3fn],
                 E5M2=False, ROWWISE=False, HAS_Y=False, HAS_YT=True, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_H=1,
                 HAS_SUM=False, GIVEN_SCALE=True, num_warps=num_warps)
    return yt, yt_scale


def _quantize_2d(x: Tensor, dtype: torch.dtype, rowwise: bool, rows: bool, transposed: bool, pad: int,
                 x_scale: Optional[Tensor] = None, amax: Optional[Tensor] = None
                 ) -> tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """:func:`_fp8_quantize` where the kernels run (``runtime.use_triton``), its reference elsewhere;
    outputs not asked for are None. ``x_scale``: x is FP8 with these (M, 1) row scales; ``amax``: x's
    tensorwise amax, known already."""
    return _quantize_2d_sum(x, dtype, rowwise, rows, transposed, pad, x_scale, None, amax)[:4]


def _fused_column_sum(rowwise: bool, rows: bool) -> bool:
    """Whether the amax pass sums x's columns too (a layer's bias gradient). NOTE: not with rowwise rows: rows
    alone have no amax pass, and with the transposed cast the pass takes one row tile a program (each tile's
    rows need their own maxima), where a column sum a tile (a reduction across the tile's warps) cost more than
    the separate sum it replaced (H200: the rowwise Linear stack's step 25.8 -> 26.5 ms, where tensorwise's went
    23.0 -> 22.7 ms with square tiles of eight row tiles a program, and 22.6 -> 22.0 ms with the wide tiles of
    _fp8_tensor_amax_kernel)."""
    return not (rowwise and rows)


def _quantize_2d_sum(x: Tensor, dtype: torch.dtype, rowwise: bool, rows: bool, transposed: bool, pad: int,
                     x_scale: Optional[Tensor] = None, sum_dtype: Optional[torch.dtype] = None,
                     amax: Optional[Tensor] = None, scaling: Optional["Float8Scaling"] = None):
    """:func:`_quantize_2d`, and fifth x's column sum in ``sum_dtype`` (None when it is None): from the kernels'
    amax pass where it runs, else ``x.sum(0)`` in fp32. ``amax``: x's tensorwise amax, known already (see
    :func:`_fp8_quantize`; no column sum with it). ``scaling``: tensorwise with delayed scaling from this state,
    updated in place (:func:`_fp8_quantize_delayed`; a high-precision x, no ``amax``)."""
    if scaling is not None:
        if use_triton(x):
            y, y_scale, yt, yt_scale, col_sum = _fp8_quantize_delayed(x, dtype, rows, transposed, pad,
                                                                      scaling.history, scaling.amax, sum_dtype)
        else:
            y, y_scale, yt, yt_scale, col_sum = _quantize_delayed_ref(x, dtype, rows, transposed, pad,
                                                                      scaling.history, scaling.amax, sum_dtype)
        return (y if rows else None, y_scale if rows else None, yt if transposed else None,
                yt_scale if transposed else None, col_sum if sum_dtype is not None else None)
    fused_sum = sum_dtype is not None and _fused_column_sum(rowwise, rows) and amax is None
    if use_triton(x):
        y, y_scale, yt, yt_scale, col_sum = _fp8_quantize(x, dtype, rowwise, rows, transposed, pad,
                                                          None if x_scale is None else x_scale.reshape(-1),
                                                          sum_dtype if fused_sum else None, amax)
    else:
        y, y_scale, yt, yt_scale = _quantize_2d_ref(x if x_scale is None else x.float() * x_scale, dtype, rowwise,
                                                    rows, transposed, pad, amax)
        fused_sum = False
    if sum_dtype is None:
        col_sum = None
    elif not fused_sum:
        col_sum = x.sum(0, dtype=torch.float32).to(sum_dtype)
    return (y if rows else None, y_scale if rows else None, yt if transposed else None,
            yt_scale if transposed else None, col_sum)


# ----------------------------------------------------------------------------------------
# The FP8 output option of other ops: the delayed-scaling state, checks, and the history's roll
# ----------------------------------------------------------------------------------------


class Float8Scaling(NamedTuple):
    """The delayed-scaling state of one tensorwise FP8 output (module docstring): pass it as
    ``fp8_scaling=`` with ``fp8="tensorwise"``. Both tensors are updated in place by each call.

    ``history``: (H,) fp32, the amaxes of the last H calls, newest first (zeros: none yet).
    ``amax``: (1,) fp32 scratch, the amax of the call in flight; zero between calls."""

    history: Tensor
    amax: Tensor

    @classmethod
    def new(cls, history_len: int = HISTORY_LEN, device=None) -> "Float8Scaling":
        """A fresh state (an empty history: the first call's scale is 1.0) on ``device``."""
        if not isinstance(history_len, int) or history_len < 1:
            raise ValueError(f"history_len: expected a positive int, got {history_len!r}")
        return cls(torch.zeros(history_len, dtype=torch.float32, device=device),
                   torch.zeros(1, dtype=torch.float32, device=device))

    def scale(self) -> Tensor:
        """The 0-d fp32 scale the next call will use."""
        return delayed_scale_ref(self.history)


class _CheckedScaling(Float8Scaling):
    """A :class:`Float8Scaling` whose tensors :func:`check_fp8_output` has checked (all but their device)."""

    __slots__ = ()


def checked_scaling(history: Tensor, amax: Tensor) -> Float8Scaling:
    """``Float8Scaling(history, amax)``, checked now, for a holder that keeps it from call to call
    (``Float8Linear``): the calls then check only its device."""
    check_fp8_output("tensorwise", Float8Scaling(history, amax), history)
    return _CheckedScaling(history, amax)


def check_fp8_output(fp8, fp8_scaling, like: Tensor) -> int:
    """The kernels' FP8 code (0: none) of an op's ``fp8=`` / ``fp8_scaling=`` arguments, checked; ``like``
    is the op's input (the state must live on its device)."""
    if fp8_scaling.__class__ is _CheckedScaling and fp8 == "tensorwise" and fp8_scaling[0].device == like.device:
        return FP8_OUTPUT_CODES[fp8]
    if fp8 is None:
        if fp8_scaling is not None:
            raise ValueError("fp8_scaling: only with fp8='tensorwise' (the amax history of a delayed scale); "
                             "fp8 is None")
        return 0
    if fp8 not in FP8_OUTPUT_CODES:
        raise ValueError(f"fp8: expected None, 'rowwise' or 'tensorwise', got {fp8!r}")
    if fp8 == "rowwise":
        if fp8_scaling is not None:
            raise ValueError("fp8_scaling: fp8='rowwise' takes each row's scale from the row itself; the amax history "
                             "is for fp8='tensorwise' only, pass fp8_scaling=None")
        return FP8_OUTPUT_CODES[fp8]
    if not isinstance(fp8_scaling, Float8Scaling):
        raise TypeError("fp8_scaling: fp8='tensorwise' takes its scale from the amaxes of earlier calls (delayed "
                        "scaling): pass fp8_scaling=Float8Scaling.new(device=...) and keep it for the next calls, got "
                        f"{type(fp8_scaling).__name__}")
    history, amax = fp8_scaling
    for name, t, shape in (("history", history, None), ("amax", amax, (1,))):
        if not isinstance(t, Tensor) or t.dtype != torch.float32:
            raise TypeError(f"fp8_scaling.{name}: expected a float32 tensor, got {_type_name(t)}")
        if (shape is not None and tuple(t.shape) != shape) or (shape is None and (t.dim() != 1 or t.numel() == 0)):
            raise ValueError(f"fp8_scaling.{name}: expected shape {shape or '(H,), H >= 1'}, got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"fp8_scaling.{name}: expected a contiguous tensor (the kernels update it in place)")
        if t.device != like.device:
            raise ValueError(f"fp8_scaling.{name}: expected a tensor on {like.device} like the input, got {t.device}")
    return FP8_OUTPUT_CODES[fp8]


def refuse_fp8_gradient(*tensors: Optional[Tensor]) -> None:
    """Raises when a gradient would be needed through an op's FP8 output (forward only: module docstring)."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise NotImplementedError(
            "fp8: the FP8 output option is forward only (inference) for now, and an input or parameter of this call "
            "requires grad: run it under torch.no_grad() / torch.inference_mode(), or leave fp8=None and let "
            "fp8_linear quantize (blockfuse.ops.fp8's docstring has the design for training)")


def roll_pdl(t: Tensor) -> bool:
    """Whether the history's roll after a producer on ``t``'s device is a programmatic dependent launch
    (:func:`roll_amax_history`), and so whether a producer triggers it early (``gdc_launch_dependents``): one
    decision for both sides. The knob for A/B runs is ``launch.PDL`` (benchmarks/norm_fp8.py --ablate).

    NOTE: never while tracing. Inductor launches a traced kernel without PDL, so the branch would do nothing
    there; and in triton 3.6 ``gdc_wait`` / ``gdc_launch_dependents`` are impure inline asm, which torch's
    mutation analysis of a user kernel cannot read: it then takes every tensor the kernel is given as written
    ("assuming every input is mutated"). te-4layer's compiled FP8 step: 240 such warnings -> 0, peak 3862 ->
    3798 MiB, time unchanged (benchmarks/results/fp8/21-traced-pdl-2026-12-02-h200/). Nor while rolls are deferred
    (``ops/fp8_history.py``): the launch after the producer is then another op's, which need not wait."""
    return not _roll_kernel._interpreted and not tracing() and programmatic_launch(t) and not fp8_history.deferring()


def roll_amax_history(history: Tensor, amax: Tensor) -> None:
    """``history = [amax, *history[:-1]]`` and ``amax = 0``, in place, in one launch: after a kernel recorded a
    call's amax (for launchers).

    NOTE: on sm_90 and later the roll is a programmatic dependent launch: the card may place it while the
    launch before it (the producer) still runs, from when each of its programs has called
    ``gdc_launch_dependents`` (the norms' tensorwise forward does, first thing) or ended, and it waits for that
    launch's end (``gdc_wait``) before it reads. The launch before it was an ordinary one, placed after everything
    earlier had ended, so whatever precedes the roll, it reads after all of it. H200, [16384, 4096] LayerNorm +
    tensorwise e4m3 (CUDA graph): 59.0-59.1 us against 59.6-59.7 with a plain roll launch, 58.1-58.5 with none
    (benchmarks/results/fp8/16-pdl-roll-2026-11-29-h200/).

    Inside :func:`blockfuse.ops.fp8_history.deferred_rolls` (a fused block's eager forward) the roll is recorded and
    launched with the scope's others at its end instead (``ops/fp8_history.py``)."""
    if fp8_history.defer(history, amax):
        return
    h = int(history.shape[0])
    pdl = roll_pdl(history)
    _roll_kernel((1,), history, amax, h, BLOCK_H=next_power_of_2(h), PDL=pdl, num_warps=1, launch_pdl=pdl)


# ----------------------------------------------------------------------------------------
# The weight's casts, cached while the weight does not change
# ----------------------------------------------------------------------------------------

_CACHE_ATTRIBUTE = "_blockfuse_fp8_casts"
# torch.optim steps taken in this process (every optimizer's, counted by a global step hook): part of the kept casts'
# key. NOTE: a version counter alone misses two updates that write a weight in place: the fused optimizers
# (torch.optim.AdamW(fused=True), the default of Hugging Face's Trainer: its _fused_adamw_ left the version at 0 on
# torch 2.13), and FSDP2, which gathers each step's weights into the same unsharded tensor under
# torch.autograd._unsafe_preserve_version_counter (3-4 of 24 forward calls of a sharded FP8 stack took a cast from
# before the optimizer step: tests/models/test_fsdp.py).
_OPTIMIZER_STEPS = [0]


def _count_optimizer_step(optimizer, args, kwargs) -> None:
    _OPTIMIZER_STEPS[0] += 1


register_optimizer_step_post_hook(_count_optimizer_step)


def weight_cache_key(weight: Tensor, rowwise: bool) -> tuple:
    """What a kept cast of ``weight`` holds for (:func:`_weight_operands`' NOTE): its storage, version, the optimizer
    steps taken, its shape, dtype and device, and the recipe's layout."""
    return (weight.data_ptr(), weight._version, _OPTIMIZER_STEPS[0], tuple(weight.shape), weight.dtype, weight.device,
            rowwise)


def _weight_operands(weight: Tensor, rowwise: bool, dgrad: bool, cache: bool, known: Optional[tuple] = None):
    """``(w, w_scale, wt, wt_scale)``: the weight (N, K) in e4m3 for the forward, and its transpose (K, N) in e4m3
    for the input gradient when ``dgrad`` and the casts are made here (None otherwise: see below); both from one
    cast.

    NOTE: eagerly (``cache``, no tracing) the forward's cast is kept on the weight tensor, keyed on its storage
    pointer, its version counter and the count of ``torch.optim`` steps taken (``_OPTIMIZER_STEPS``): the calls of
    one step (gradient-accumulation micro-batches, a checkpointed forward run again, every call at inference) reuse
    it, and any optimizer step or in-place update (``load_state_dict``, ``weight.add_``) invalidates it. An update
    that bumps no version outside a ``torch.optim`` optimizer (through ``weight.data``, which has a version counter
    of its own, or by a custom update kernel) is not seen: call :func:`clear_weight_cache` after one. The cost:
    the cast stays alive between steps, 1 byte a parameter. The transpose is then not made here, nor kept from
    the forward to the backward: the backward makes it (:func:`_dgrad_operands`) and drops it after its GEMM, so
    the step's peak (the start of the backward, every layer's activations kept) holds one of them, not one a layer
    (te-4layer: 160 MiB, 1 byte a parameter; the first build kept both casts, 2 bytes a parameter, from one cast
    pass: benchmarks/NOTES.md, "FP8 weights' transposes made in the backward"). Under ``torch.compile`` (and any
    tracing) both casts are made in the graph on every call, where Inductor fuses them and plans their buffers.

    ``known``: the cache entry the forward found (:func:`weight_cache_entry`), for a backward whose ``weight`` is
    another tensor object than the forward's (an alias of the same parameter, as saved-tensor hooks unpack it),
    which carries no cache of its own: used where its key still matches."""
    if not cache or torch.compiler.is_compiling() or tracing() or weight.is_inference():
        return _quantize_2d(weight, torch.float8_e4m3fn, rowwise, True, dgrad, 1)
    key = weight_cache_key(weight, rowwise)
    entry = getattr(weight, _CACHE_ATTRIBUTE, None) or known
    if entry is None or entry[0] != key:
        setattr(weight, _CACHE_ATTRIBUTE, None)  # the stale cast goes before the new one is made
        w_q, w_s, _, _ = _quantize_2d(weight.detach(), torch.float8_e4m3fn, rowwise, True, False, 1)
        entry = (key, w_q, w_s)
        setattr(weight, _CACHE_ATTRIBUTE, entry)
    return entry[1], entry[2], None, None


def _dgrad_operands(weight: Tensor, rowwise: bool, cache: bool, wt_q: Optional[Tensor], wt_s: Optional[Tensor],
                    known: Optional[tuple] = None):
    """The weight's transposed e4m3 cast for the input gradient's GEMM: ``(wt_q, wt_s)`` as the forward made them,
    or where it left them to the backward (:func:`_weight_operands`' NOTE), made now: tensorwise, the forward's
    cast (from the cache, or ``known``: :func:`weight_cache_entry`) with its bytes transposed, the same values and
    scale; rowwise, the weight cast again with its columns' scales, as the forward's one pass would have."""
    if wt_q is not None:
        return wt_q, wt_s
    if not rowwise:
        w_q, w_s, _, _ = _weight_operands(weight, False, False, cache, known)
        return _transposed(w_q, 1), w_s
    _, _, wt_q, wt_s = _quantize_2d(weight.detach(), torch.float8_e4m3fn, True, False, True, 1)
    return wt_q, wt_s


def weight_cache_entry(weight: Tensor, cache: bool) -> Optional[tuple]:
    """The forward's cache entry of ``weight`` (its e4m3 cast and the key it holds for), for the backward to find
    through :func:`_dgrad_operands`' ``known``. NOTE: the backward's weight comes from ``ctx.saved_tensors``; under
    saved-tensor hooks that is the hooks' unpacked tensor (a fused block's, ``models/recompute.py``, save
    ``weight.detach()``), another Python object without the cache attribute: every backward then cast each weight
    again (te-4layer's FP8 step: 16 amax passes and 16 casts of the weights more than the forward's,
    ``benchmarks/NOTES.md``, "The weights cast twice a step"). Kept on the ctx, the entry is a reference to the cast
    the parameter keeps anyway; its key is checked against the backward's weight. None while anything traces (the
    cache is eager's)."""
    if not cache or torch.compiler.is_compiling() or tracing():
        return None
    return getattr(weight, _CACHE_ATTRIBUTE, None)


def carry_weight_cache(source: Tensor, target: Tensor) -> None:
    """Hands ``target`` the casts kept on ``source``, another Python object over the same weight (a DTensor's local
    tensor and the view ``to_local()`` makes of it at each call: ``Float8Linear._forward_sharded`` carries them there
    and back), so that :func:`_weight_operands` finds them; the key still decides whether they hold."""
    setattr(target, _CACHE_ATTRIBUTE, getattr(source, _CACHE_ATTRIBUTE, None))


def clear_weight_cache(weight: Tensor) -> None:
    """Forgets the FP8 casts kept for ``weight`` (see :func:`fp8_linear`): needed only after an update that
    bumps no version counter and is not a ``torch.optim`` step (``weight.data.copy_(...)``, a custom update kernel);
    every optimizer step drops every kept cast itself (:func:`_weight_operands`)."""
    if getattr(weight, _CACHE_ATTRIBUTE, None) is not None:
        setattr(weight, _CACHE_ATTRIBUTE, None)


# ----------------------------------------------------------------------------------------
# The GEMM, and the one autograd Function
# ----------------------------------------------------------------------------------------


# Whether this torch's CPU ``_scaled_mm`` takes rowwise scales: torch 2.13 does, 2.11 does not ("only supports
# per-tensor scaling for CPU backend"). A version, not a probe: a probe call traced by torch.compile meets a fake
# _scaled_mm, which takes anything.
CPU_ROWWISE_SCALED_MM = not torch_before(2, 13)


def _scaled_matmul(a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor, out_dtype: torch.dtype,
                   bias: Optional[Tensor], rowwise: bool, fast_accum: bool) -> Tensor:
    """``(a * a_scale) @ (b * b_scale).T + bias`` in ``out_dtype`` for row-major FP8 ``a`` (M, K) and
    ``b`` (N, K); scales 0-d (tensorwise) or (M, 1) and (N, 1) (rowwise).

    NOTE: rowwise GEMMs write bf16, cast afterwards when another dtype is asked for: the rowwise CUTLASS
    kernel of older torch releases writes bf16 only (newer ones, and cuBLAS >= 12.9, take fp16 and fp32
    too), and one output dtype keeps the numerics the same on every version and device. The bias goes
    into the GEMM's epilogue where ``_scaled_mm`` takes it (a bf16 / fp16 output of the bias's dtype)
    and is added after it otherwise (fp32 outputs)."""
    gemm_dtype = torch.bfloat16 if rowwise else out_dtype
    if rowwise and not a.is_cuda and not CPU_ROWWISE_SCALED_MM:
        # This torch's CPU _scaled_mm takes tensorwise scales only (torch 2.11: "only supports per-tensor
        # scaling for CPU backend"): eagerly, the same product in fp32, rounded once to the GEMM's bf16.
        if torch.compiler.is_compiling():
            # NOTE: compiled (aot_eager, torch 2.11) a fused FP8 block's input gradient came out as if the
            # branches had none, where eager's was right; refused rather than trusted.
            raise NotImplementedError(
                f"fp8_linear: recipe 'rowwise' on the CPU under torch.compile needs torch >= 2.13 (this is "
                f"{torch.__version__}, whose CPU _scaled_mm takes tensorwise scales only); run it eagerly, use "
                f"recipe='tensorwise', or a GPU")
        y = ((a.float() * a_scale) @ (b.float() * b_scale).t()).to(gemm_dtype).to(out_dtype)
        return y if bias is None else y + bias.to(out_dtype)
    fused = bias is not None and gemm_dtype != torch.float32 and bias.dtype == gemm_dtype
    y = torch._scaled_mm(a, b.t(), scale_a=a_scale, scale_b=b_scale.t() if rowwise else b_scale,
                         bias=bias if fused else None, out_dtype=gemm_dtype, use_fast_accum=fast_accum)
    if y.dtype != out_dtype:
        y = y.to(out_dtype)
    if bias is not None and not fused:
        y = y + bias.to(out_dtype)
    return y


def _transposed(q: Tensor, pad: int) -> Tensor:
    """An FP8 (M, K) as (K, MP) row-major, MP = M rounded up to ``pad``, zero past column M: by
    :func:`_transpose_bytes_kernel` where the kernels run, eagerly and traced, else (the references) by PyTorch.

    NOTE: traced, the PyTorch form became an Inductor kernel of its own, not fused into anything: te-4layer's
    compiled FP8 step spent 3.0 ms in 12 of them (`triton_poi_fused_clone_t_view_*`, 0.19-0.38 ms for 32-64 MiB)
    where the eager step's 16 byte transposes took 0.12 ms
    (benchmarks/results/fp8/22-traced-transpose-2026-12-02-h200/)."""
    if use_triton(q) and q.stride(1) == 1:
        return _fp8_transpose(q.view(torch.uint8), pad).view(q.dtype)
    return _transposed_ref(q, pad)


@launcher_op("fp8_transpose")
def _fp8_transpose(bits: Tensor, pad: int) -> Tensor:
    """:func:`_transposed` of FP8 bytes (uint8: the interpreter's fake tensors and Inductor move those)."""
    m, k = bits.shape
    mp = round_up(m, pad)
    out = bits.new_empty((k, mp))
    block, num_warps = _tiles(bits.device).transpose_tile
    if k > 0 and mp > 0:
        _transpose_kernel((cdiv(mp, block), cdiv(k, block)), bits, out, bits.stride(0), m, k, mp,
                          BLOCK=block, num_warps=num_warps)
    return out


def _transposed_ref(q: Tensor, pad: int) -> Tensor:
    """:func:`_transposed` in PyTorch."""
    m, k = q.shape
    # NOTE: moved as bytes (a zero byte is +0.0 in both FP8 formats): Inductor's CPU code cannot fill or
    # select FP8 values (it promotes them to bool), but copies and pads uint8.
    bits = q.view(torch.uint8).t()
    mp = round_up(m, pad)
    if mp != m:
        bits = F.pad(bits, (0, mp - m))
    return bits.contiguous().view(q.dtype)


def _forward(x2, x_scale, weight, bias, rowwise, out_dtype, x_grad, weight_grad, cache, x_amax=None, keep_x=False,
             keep_hp=False, scaling=None, x_cast_given=False):
    """The forward GEMM and what the backward needs: ``(y, (xt, xt_scale, wt, wt_scale))``. ``x_amax``: a
    high-precision x's tensorwise amax, known already (its cast then reads x once). ``keep_x``: the forward
    GEMM's x operand too, ``(y, (xt, xt_scale, wt, wt_scale, x_q, x_scale))``, to run the GEMM again.
    ``keep_hp`` (tensorwise, a high-precision x; see :func:`_kept_for_free`): ``xt, xt_scale`` are x itself and
    its amax, which :func:`_x_operand` casts in the backward. ``scaling``: recipe "delayed", x's state
    (:class:`Float8Scaling`): x cast in one pass with its history's scale, x^T kept (``keep_hp``: x and the 0-d
    scale its cast had). ``x_cast_given``: an FP8 x's transpose is not made (the backward makes x^T's cast again:
    fp8_linear's ``x_cast``); with ``keep_hp`` and no ``x_amax`` (a :class:`Recast`), ``xt_scale`` is the 0-d
    scale of x's own cast rather than an amax."""
    keep_hp = keep_hp and x2.dtype != torch.float8_e4m3fn and not rowwise and weight_grad
    if scaling is not None:
        x_q, x_s, xt_q, xt_s, _ = _quantize_2d_sum(x2, torch.float8_e4m3fn, False, True, weight_grad and not keep_hp,
                                                   GEMM_MULTIPLE, scaling=scaling)
        if keep_hp:  # x kept (for free), its transposed cast made by the backward with this scale (_x_operand)
            xt_q, xt_s = x2, x_s
    elif keep_hp and x_amax is None and x_cast_given:
        # (a Recast of an x without its amax, the traced output projection's: the cast's own amax pass, inside its
        # op, and x^T made again with the 0-d scale it gave, as recipe "delayed" does; tensor_amax is eager only)
        x_q, x_s, _, _ = _quantize_2d(x2, torch.float8_e4m3fn, False, True, False, GEMM_MULTIPLE)
        xt_q, xt_s = x2, x_s
    elif keep_hp:
        # NOTE: saving x costs nothing here (it is recomputed, or kept by another op): its transposed cast is
        # made by the backward from x and this amax, the same values, and not kept from the forward (half a
        # byte an element less at the step's peak; benchmarks/NOTES.md, "FP8 inputs kept in high precision").
        xt_s = x_amax if x_amax is not None else tensor_amax(x2)
        x_q, x_s, _, _ = _quantize_2d(x2, torch.float8_e4m3fn, False, True, False, GEMM_MULTIPLE, None, xt_s)
        xt_q = x2
    elif x2.dtype == torch.float8_e4m3fn:
        x_q, x_s = x2, x_scale
        xt_q = xt_s = None
        if weight_grad and rowwise:  # x's columns need scales of their own: from x dequantized as it is read
            _, _, xt_q, xt_s = _quantize_2d(x_q, torch.float8_e4m3fn, True, False, True, GEMM_MULTIPLE, x_s)
        elif weight_grad and not x_cast_given:
            xt_q, xt_s = _transposed(x_q, GEMM_MULTIPLE), x_s
    else:
        # NOTE: x^T for the weight gradient is written here, by the same cast (tensorwise: the same
        # values transposed) and kept instead of x: 1 byte an element rather than 2 or 4.
        x_q, x_s, xt_q, xt_s = _quantize_2d(x2, torch.float8_e4m3fn, rowwise, True, weight_grad, GEMM_MULTIPLE,
                                            None, x_amax)
    w_q, w_s, wt_q, wt_s = _weight_operands(weight, rowwise, x_grad, cache)
    # NOTE: fast accumulation for the forward GEMM only, as torchao (its gradients accumulate in full).
    y = _scaled_matmul(x_q, x_s, w_q, w_s, out_dtype, bias, rowwise, True)
    if keep_x:  # (with keep_hp x's cast too is made again from x, by _forward_again: none of it is kept)
        return y, (xt_q, xt_s, wt_q, wt_s, *((None, None) if keep_hp else (x_q, x_s)))
    return y, (xt_q, xt_s, wt_q, wt_s)


def _x_operand(xt: Optional[Tensor], xt_scale: Optional[Tensor]) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """The weight gradient's x operand as :func:`_forward` left it: x^T in e4m3 and its scale, or (``keep_hp``) x
    in high precision and its amax (1,), cast now as the forward would have cast it (the same amax, the same values),
    or with a delayed scale the 0-d scale the forward's cast had."""
    if xt is None or xt.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return xt, xt_scale
    if xt_scale.dim() == 0:  # recipe "delayed": the forward's scale, not an amax
        return transposed_cast_with_scale(xt, xt_scale, GEMM_MULTIPLE)
    _, _, xt_q, xt_s = _quantize_2d(xt, torch.float8_e4m3fn, False, False, True, GEMM_MULTIPLE, None, xt_scale)
    return xt_q, xt_s


def _top_saved_tensor_hooks():
    """The innermost saved-tensor hooks in force, ``(pack, unpack)``, or None."""
    try:
        return torch._C._autograd._top_saved_tensors_default_hooks(True)
    except TypeError:  # a torch whose binding takes no argument
        return torch._C._autograd._top_saved_tensors_default_hooks()


def _kept_for_free(x: Tensor) -> bool:
    """Saving ``x`` for the backward costs no memory: the innermost saved-tensor hooks are blockfuse's
    (``models/recompute.py``: a fused block's norm output, which they recompute, or attention's output) and their
    pack function says so of x's storage (``kept_for_free``): they recompute it in the backward, or an op of the
    step saved it already. A tensorwise FP8 layer then keeps x, not x^T's e4m3 cast (:func:`_forward`'s
    ``keep_hp``). Eager only: nothing of this runs where torch.compile or another dispatch mode traces."""
    if torch.compiler.is_compiling() or tracing():
        return False
    top = _top_saved_tensor_hooks()
    check = getattr(top[0], "kept_for_free", None) if top is not None else None
    return check is not None and bool(check(x))


def _forward_again(x_q, x_s, weight, bias, out_dtype, cache, x_hp=None, x_amax=None):
    """The tensorwise forward GEMM of :func:`_forward` once more, from its kept x operand (``keep_x``): the
    same operands (the weight's cast from the cache, or cast again the same way) and the same call, so the same
    values. ``x_q`` None (``keep_hp``): x's cast made again from ``x_hp`` and its ``x_amax``."""
    if x_q is None:
        x_q, x_s, _, _ = _quantize_2d(x_hp, torch.float8_e4m3fn, False, True, False, GEMM_MULTIPLE, None, x_amax)
    w_q, w_s, _, _ = _weight_operands(weight, False, False, cache)
    return _scaled_matmul(x_q, x_s, w_q, w_s, out_dtype, bias, False, True)


def _linear_forward(ctx, x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling, recast):
    """The FP8 linear's forward on an autograd ``ctx`` (:class:`_Fp8LinearFunction`'s, or a Function that runs more
    after it: ``ops/fp8_act.py``'s traced up projection + activation): ``(y, saved)``, ``saved`` the tensors its
    backward (:func:`_linear_backward`) takes, for the caller's ``save_for_backward``."""
    # (x_cast: a function (eager), or with ``recast`` a Recast's (fn, statics) and its tensors: traced)
    rowwise, out_dtype, x_grad, weight_grad, cache, keep_hp = config
    y, saved = _forward(x2, x_scale, weight, bias, rowwise, out_dtype, x_grad, weight_grad, cache, x_amax,
                        keep_hp=keep_hp, scaling=None if scaling is None else scaling[0],
                        x_cast_given=x_cast is not None)
    ctx.grad_scaling = None if scaling is None else scaling[1]
    if recast:  # nothing of x kept but its 0-d scale: the backward has x^T's cast made again (Recast)
        saved = (None, x_scale if x2.dtype == torch.float8_e4m3fn else saved[1], *saved[2:])
    elif x_cast is not None:  # nothing of x kept: the backward has it made again (fp8_linear's x_cast)
        saved = (None, None, *saved[2:])
    ctx.x_cast = x_cast
    ctx.weight_entry = weight_cache_entry(weight, cache and not rowwise)
    ctx.recast = len(recast)
    ctx.config = config
    ctx.x_dtype = x2.dtype if proxy is None else proxy.dtype
    ctx.weight_dtype = weight.dtype
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.proxy_shape = None if proxy is None else proxy.shape
    return y, (*saved, weight, *recast)


def _linear_backward(ctx, dy, saved, bias_grad: bool, precast=None):
    """The FP8 linear's backward from what :func:`_linear_forward` saved: the 9 + len(recast) gradients of
    :class:`_Fp8LinearFunction`'s inputs. ``precast``: dy's casts and column sums written by the op after the layer
    (recipe "delayed": ``(dy_q, dy_s, dyt_q, dyt_s, db)``), dy then unused."""
    xt_q, xt_s, wt_q, wt_s, weight, *recast = saved
    rowwise, _, x_grad, weight_grad, cache, _ = ctx.config
    if recast:
        fn, statics = ctx.x_cast
        xt_q, xt_s = fn(*recast, xt_s, *statics)
    elif ctx.x_cast is not None:
        xt_q, xt_s = ctx.x_cast()
        ctx.x_cast = None  # (what it holds, the layer before's node, goes with it)
    elif weight_grad and xt_q is None:
        raise RuntimeError("fp8_linear: backward through the same graph a second time (retain_graph=True) is not "
                           "supported with x_cast: the first backward used it")
    xt_q, xt_s = _x_operand(xt_q, xt_s)  # (first: a recomputed x goes before the GEMMs)
    # NOTE: the gradient in e5m2 (range over precision) for tensorwise, as torchao; e4m3 for rowwise,
    # as torchao's rowwise recipe: per-row scales leave little range to cover.
    grad_dtype = torch.float8_e4m3fn if rowwise else torch.float8_e5m2
    if precast is not None:
        dy_q, dy_s, dyt_q, dyt_s, db = precast
    else:
        # the bias gradient (dy's column sums) from the cast's pass over dy where it has one
        dy_q, dy_s, dyt_q, dyt_s, db = _quantize_2d_sum(dy, grad_dtype, rowwise, x_grad, weight_grad, GEMM_MULTIPLE,
                                                        None, ctx.bias_dtype if bias_grad else None,
                                                        scaling=ctx.grad_scaling)
    dx = None
    if x_grad:
        wt_q, wt_s = _dgrad_operands(weight, rowwise, cache, wt_q, wt_s, ctx.weight_entry)
        dx = _scaled_matmul(dy_q, dy_s, wt_q, wt_s, ctx.x_dtype, None, rowwise, False)
        del wt_q  # a transpose made here goes before the next GEMM
    dw = _scaled_matmul(dyt_q, dyt_s, xt_q, xt_s, ctx.weight_dtype, None, rowwise, False) if weight_grad else None
    if ctx.proxy_shape is not None:
        return (None, None, dw, db, None, dx.view(ctx.proxy_shape) if dx is not None else None, None, None, None,
                *(None,) * ctx.recast)
    return (dx, None, dw, db, None, None, None, None, None, *(None,) * ctx.recast)


class _Fp8LinearFunction(torch.autograd.Function):
    """``proxy``: None, or the tensor that stands for an FP8 ``x2`` in autograd (see :func:`fp8_linear_quantized`):
    x's gradient is then returned as the proxy's. ``x2``: (M, K), or a contiguous (..., K), which the Function views
    as (M, K) itself and whose y it returns as (..., N).

    NOTE: the views inside, not around it: a view of the layer's input or output taken outside is a node of autograd's
    graph of its own (a reshape in the forward, another in the backward, and the engine's work for a node; ~9 us on
    the 2-core CPU of benchmarks/host_block_cpu.py), two a layer. The output is returned detached from the view (a
    custom Function's output that is a view may not be written in place)."""

    @staticmethod
    def forward(ctx, x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling=None, *recast):
        lead = None if x2.dim() == 2 else x2.shape[:-1]
        if lead is not None:
            x2 = x2.view(-1, x2.shape[-1])
        y, saved = _linear_forward(ctx, x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling, recast)
        ctx.save_for_backward(*saved)
        ctx.lead = lead
        return y if lead is None else y.view(*lead, y.shape[-1]).detach()

    @staticmethod
    def backward(ctx, dy):
        precast = getattr(ctx, "precast", None)
        if precast is not None:
            # (recipe "delayed", eagerly: the op after this layer wrote dy's casts and column sums itself, and dy
            # is a zero-stride stand-in: ops/fp8_act.py's _ActDelayedFunction)
            ctx.precast = None
        elif ctx.lead is not None:
            dy = dy.reshape(-1, dy.shape[-1])
        grads = _linear_backward(ctx, dy, ctx.saved_tensors, ctx.needs_input_grad[3], precast)
        if ctx.lead is None or grads[0] is None:
            return grads
        return (grads[0].view(*ctx.lead, grads[0].shape[-1]), *grads[1:])


def delayed_producer(out: Tensor):
    """The node of the delayed FP8 layer whose output ``out`` is (through views), or None: a tensorwise
    :class:`_Fp8LinearFunction` with a gradient state (recipe "delayed"). The op that consumes ``out`` alone may
    write that layer's e5m2 gradient operands in its own backward and hand them to the node (``precast``: see
    :func:`_linear_backward`); ops/fp8_act.py's activation and ops/rotary.py's packed RoPE do."""
    node = out.grad_fn
    while node is not None and type(node).__name__ in ("ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0"):
        node = node.next_functions[0][0]
    if (isinstance(node, _Fp8LinearFunction._backward_cls) and getattr(node, "grad_scaling", None) is not None
            and not node.config[0]):
        return node
    return None


def hand_to_producer(producer, write: Callable) -> None:
    """Writes the gradient operands of ``producer`` (a node :func:`delayed_producer` found) with ``write(history,
    amax, x_grad, weight_grad, pad, sum_dtype)`` (``(dy_q, dy_s, dyt_q, dyt_s, db)``: dy in e5m2 with the delayed
    scale of the layer's gradient history, in the layouts its GEMMs take, and its column sums where the bias takes a
    gradient) and hands them to the node, whose backward takes them instead of casting dy (:func:`_linear_backward`'s
    ``precast``)."""
    _, _, x_grad, weight_grad, _, _ = producer.config
    sum_dtype = producer.bias_dtype if producer.needs_input_grad[3] else None
    state = producer.grad_scaling
    dy_q, dy_s, dyt_q, dyt_s, db = write(state.history, state.amax, x_grad, weight_grad, GEMM_MULTIPLE, sum_dtype)
    producer.precast = (dy_q if x_grad else None, dy_s if x_grad else None, dyt_q if weight_grad else None,
                        dyt_s if weight_grad else None, db if sum_dtype is not None else None)


# ----------------------------------------------------------------------------------------
# Public functionals
# ----------------------------------------------------------------------------------------

_HIGH_PRECISION = (torch.float32, torch.float16, torch.bfloat16)


def _type_name(value) -> str:
    return str(value.dtype) if isinstance(value, Tensor) else type(value).__name__


def _check_recipe(recipe) -> bool:
    if recipe not in RECIPES:
        raise ValueError(f"recipe: expected one of {', '.join(map(repr, RECIPES))}, got {recipe!r}")
    return recipe == "rowwise"


def _check_quantize_args(x, dtype, recipe) -> bool:
    rowwise = _check_recipe(recipe)
    if not isinstance(x, Tensor) or x.dtype not in (*_HIGH_PRECISION, torch.float64):
        raise TypeError(f"x: expected a float32, float16, bfloat16 or float64 tensor, got {_type_name(x)}")
    if x.dim() == 0:
        raise ValueError("x: expected at least one dimension, got a scalar")
    if dtype not in FP8_MAX:
        raise TypeError(f"dtype: expected torch.float8_e4m3fn or torch.float8_e5m2, got {dtype!r}")
    return rowwise


def quantize(x: Tensor, dtype: torch.dtype = torch.float8_e4m3fn, *,
             recipe: str = "tensorwise", fp8_scaling: Optional["Float8Scaling"] = None) -> tuple[Tensor, Tensor]:
    """``(x_fp8, scale)``: ``x`` in ``dtype`` (``float8_e4m3fn`` or ``float8_e5m2``) with its fp32 scale,
    ``x ~= x_fp8.float() * scale``.

    ``scale = max(amax, 1e-12) / fp8_max`` (448 for e4m3, 57344 for e5m2) and
    ``x_fp8 = clamp(x * (1 / scale), -fp8_max, fp8_max)`` rounded to nearest even (the fp32 reciprocal: at most
    one ulp from ``x / scale``). ``recipe="tensorwise"``:
    amax over the whole tensor, a 0-d scale (two passes over x: the amax, then the cast);
    ``"rowwise"``: amax of each row (over the last dimension), scales of shape
    ``(*x.shape[:-1], 1)`` (one pass: a program holds whole rows). Not differentiable.

    ``fp8_scaling`` (tensorwise only; a :class:`Float8Scaling` kept from call to call): delayed scaling, one
    pass over x. The scale comes from the amaxes of earlier calls, ``max(fp8_scaling.history) / fp8_max`` (1.0
    while the history is all zeros), values past that range saturate at ``fp8_max``, and x's own amax is rolled
    into the history for the next call (``history = [amax, *history[:-1]]``), on the device, in place.
    """
    rowwise = _check_quantize_args(x, dtype, recipe)
    if fp8_scaling is not None:
        if rowwise:
            raise ValueError("fp8_scaling: recipe 'rowwise' takes each row's scale from the row itself; delayed "
                             "scaling (an amax history) is for recipe 'tensorwise' only, pass fp8_scaling=None")
        check_fp8_output("tensorwise", fp8_scaling, x)
    x = x.detach()
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    if fp8_scaling is not None:
        y, scale, _, _, _ = _quantize_2d_sum(x2, dtype, False, True, False, 1, scaling=fp8_scaling)
        return y.view(x.shape), scale
    y, scale, _, _ = _quantize_2d(x2, dtype, rowwise, True, False, 1)
    return y.view(x.shape), scale.view(*x.shape[:-1], 1) if rowwise else scale


def dequantize(x_fp8: Tensor, scale: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """``x_fp8 * scale`` in ``dtype``: the inverse of :func:`quantize` (up to FP8's rounding)."""
    return (x_fp8.float() * scale).to(dtype)


def _check_fp8_linear_args(x, weight, bias, x_scale, recipe) -> bool:
    rowwise = _check_recipe(recipe)
    if not isinstance(x, Tensor) or x.dtype not in (*_HIGH_PRECISION, torch.float8_e4m3fn):
        raise TypeError(f"x: expected a float32, float16 or bfloat16 tensor, or a float8_e4m3fn one with its "
                        f"x_scale, got {_type_name(x)}")
    if x.dim() == 0:
        raise ValueError("x: expected at least one dimension (in_features), got a scalar")
    k = x.shape[-1]
    if not isinstance(weight, Tensor) or weight.dtype not in _HIGH_PRECISION:
        raise TypeError(f"weight: expected a float32, float16 or bfloat16 tensor, got {_type_name(weight)}")
    if weight.dim() != 2 or weight.shape[1] != k:
        raise ValueError(f"weight: expected shape (out_features, {k}) (x's last dimension is {k}), "
                         f"got {tuple(weight.shape)}")
    if weight.device != x.device:
        raise ValueError(f"weight: expected a tensor on {x.device} like x, got {weight.device}")
    if bias is not None:
        if not isinstance(bias, Tensor) or bias.dtype not in _HIGH_PRECISION:
            raise TypeError(f"bias: expected a float32, float16 or bfloat16 tensor or None, got {_type_name(bias)}")
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias: expected shape ({weight.shape[0]},) (weight's rows), got {tuple(bias.shape)}")
        if bias.device != x.device:
            raise ValueError(f"bias: expected a tensor on {x.device} like x, got {bias.device}")
    if x.dtype != torch.float8_e4m3fn:
        if x_scale is not None:
            raise ValueError(f"x_scale: only for an x already in float8_e4m3fn; x is {x.dtype} (fp8_linear "
                             "quantizes it itself), pass x_scale=None")
        return rowwise
    if x_scale is None:
        raise ValueError("x_scale: x is float8_e4m3fn, so its fp32 scale is needed (x ~= x.float() * x_scale; "
                         "blockfuse.fp8.quantize returns both)")
    if x.requires_grad:
        raise ValueError("x: a float8_e4m3fn x cannot take its gradient through autograd (autograd would cast it "
                         "to FP8 without a scale); pass it detached, gradients flow to weight and bias")
    if not isinstance(x_scale, Tensor) or x_scale.dtype != torch.float32:
        raise TypeError(f"x_scale: expected a float32 tensor, got {_type_name(x_scale)}")
    if x_scale.device != x.device:
        raise ValueError(f"x_scale: expected a tensor on {x.device} like x, got {x_scale.device}")
    expected = (*x.shape[:-1], 1) if rowwise else ()
    if rowwise and tuple(x_scale.shape) != expected:
        raise ValueError(f"x_scale: recipe 'rowwise' expects one scale a row of x, shape {expected}, got "
                         f"{tuple(x_scale.shape)}")
    if not rowwise and x_scale.numel() != 1:
        raise ValueError(f"x_scale: recipe 'tensorwise' expects one scale (a 0-d or 1-element tensor), got shape "
                         f"{tuple(x_scale.shape)}")
    return rowwise


def fp8_supported(in_features: int, out_features: int) -> bool:
    """True when a linear of these sizes runs its GEMMs in FP8: ``torch._scaled_mm`` on a GPU wants both
    multiples of 16 (see :func:`fp8_linear`)."""
    return in_features % GEMM_MULTIPLE == 0 and out_features % GEMM_MULTIPLE == 0


def fp8_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, x_scale: Optional[Tensor] = None,
               recipe: str = "tensorwise", weight_cache: bool = True, x_amax: Optional[Tensor] = None,
               x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]] = None,
               fp8_scaling: Optional[tuple["Float8Scaling", "Float8Scaling"]] = None) -> Tensor:
    """``x @ weight.T + bias`` with the three GEMMs of a linear layer (forward, input gradient, weight
    gradient) in FP8 on ``torch._scaled_mm``; differentiable in x, weight and bias.

    ``x``: (..., in_features) in float32, float16 or bfloat16, or already quantized: float8_e4m3fn with
    its ``x_scale`` (the 0-d scale of ``recipe="tensorwise"``, or the ``(*x.shape[:-1], 1)`` scales of
    ``"rowwise"``, as :func:`quantize` returns them). ``weight``: (out_features, in_features); ``bias``:
    (out_features,) or None. The output has x's dtype (weight's for an FP8 x); the gradients have the
    dtype of their tensors. An FP8 x takes no gradient (pass it detached); weight and bias do.

    Casts: x to e4m3 (amax of the tensor, or of each row), the weight to e4m3 (kept between calls
    while the weight is unchanged, ``weight_cache``; see :func:`clear_weight_cache`; its transpose for the
    input gradient is made by the backward and not kept), the output
    gradient to e5m2 (tensorwise) or e4m3 (rowwise). A layer whose in_features or out_features is not a
    multiple of 16 (:func:`fp8_supported`) runs a plain ``F.linear`` in x's dtype instead.

    ``x_amax`` (tensorwise, a high-precision x): ``max |x|`` as a (1,) fp32 tensor, when the op that wrote x
    folded it while writing (:func:`blockfuse.ops.fp8_act.fp8_linear_act` returns it): x's cast then skips
    its amax pass and reads x once. It must be x's exact amax; a larger one only coarsens the scale, a
    smaller one saturates the values past it.

    ``x_cast`` (tensorwise, with ``x_amax``): a function that makes x^T's e4m3 cast again, ``(xt (K, MP), scale)``
    as the cast with x_amax's scale writes it (MP = the rows rounded up to 16, zero past them), called once by the
    backward: the layer then keeps nothing of x for its weight gradient (an op that can make x again more cheaply
    than x is kept: :func:`blockfuse.ops.fp8_act.cast_again` from an activation's input,
    :func:`blockfuse.ops.norm.cast_again` from a norm's input and statistics). Eager calls only: a
    traced call (torch.compile) keeps x's cast as usual and never calls it; traced, the fused blocks pass a
    :class:`Recast` instead (the same cast from tensors given, which recipe "delayed" takes too; its ``fn``
    takes x_amax, or without it the 0-d scale of the layer's own cast).

    ``recipe="delayed"`` (a high-precision x): tensorwise, with delayed scaling for x and the output gradient,
    ``fp8_scaling=(x_state, grad_state)``, two :class:`Float8Scaling` kept from step to step (a
    :class:`blockfuse.nn.Float8Linear` holds its own): each cast is one pass over its input with the scale of
    its history (``max(history) / fp8_max``; 1.0 while empty, TransformerEngine's start), values past that range
    saturate, and the tensor's amax is rolled into the history for the next call (:func:`quantize`'s
    ``fp8_scaling``). The weight keeps its own amax (cast once while it is unchanged). No ``x_amax`` with it,
    and ``x_cast`` only as a :class:`Recast`. NOTE: a forward run again by activation checkpointing casts x with
    its history as it is then, and records x's amax once more (TransformerEngine saves and restores the scales
    around the recompute).
    """
    if recipe not in LINEAR_RECIPES:
        raise ValueError(f"recipe: expected one of {', '.join(map(repr, LINEAR_RECIPES))}, got {recipe!r}")
    if recipe == "delayed":
        _check_delayed_args(x, x_scale, x_amax, x_cast, fp8_scaling)
        _check_fp8_linear_args(x, weight, bias, None, "tensorwise")
        return _fp8_linear(x, weight, bias, None, False, weight_cache, None, x_cast=x_cast, scaling=tuple(fp8_scaling))
    if fp8_scaling is not None:
        raise ValueError(f"fp8_scaling: only for recipe 'delayed' (its amax histories), got recipe {recipe!r}")
    rowwise = _check_fp8_linear_args(x, weight, bias, x_scale, recipe)
    _check_x_amax(x_amax, x, rowwise)
    _check_x_cast(x_cast, x_amax)
    return _fp8_linear(x, weight, bias, x_scale, rowwise, weight_cache, None, x_amax, x_cast)


def fp8_linear_quantized(q: Tensor, scale: Tensor, proxy: Optional[Tensor], weight: Tensor,
                         bias: Optional[Tensor] = None, *, weight_cache: bool = True, recipe: str = "rowwise",
                         x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]] = None,
                         grad_scaling: Optional["Float8Scaling"] = None) -> Tensor:
    """:func:`fp8_linear` of an input quantized by the op before it, in a training step: ``q``
    (..., in_features) e4m3 and its ``scale``, the rows' (..., 1) as the norms write them
    (``ops/norm.py``, :func:`norm_for_fp8_projection`), and ``proxy``, the tensor standing for that input in
    autograd (its shape; None without autograd): the input's gradient (FP8 dgrad, in the proxy's dtype) is
    returned as the proxy's. The weight gradient casts q's columns from q itself (1 byte an element read).

    ``recipe="tensorwise"``: a 0-d ``scale`` (a norm's delayed-scaling output, for a ``"delayed"`` layer), the
    weight gradient taking q's bytes transposed, or with ``x_cast`` (see :func:`fp8_linear`; eager calls, or a
    :class:`Recast` while tracing) nothing of q kept: ``x_cast()`` makes q^T's cast again with the same scale.
    ``grad_scaling``: the output gradient's cast with delayed scaling from this state (a ``"delayed"`` layer's),
    else its own amax."""
    if proxy is not None and tuple(proxy.shape) != tuple(q.shape):
        raise ValueError(f"proxy: expected the input's shape {tuple(q.shape)}, got {tuple(proxy.shape)}")
    if recipe not in RECIPES:
        raise ValueError(f"recipe: expected 'rowwise' or 'tensorwise' (the scale's form), got {recipe!r}")
    if recipe == "rowwise" and (x_cast is not None or grad_scaling is not None):
        raise ValueError("x_cast / grad_scaling: for a tensorwise q (recipe 'tensorwise'), got recipe 'rowwise'")
    if x_cast is not None and not (callable(x_cast) or isinstance(x_cast, Recast)):
        raise ValueError(f"x_cast: expected a function making q^T's cast (or a Recast), got {type(x_cast).__name__}")
    rowwise = _check_fp8_linear_args(q, weight, bias, scale, recipe)
    if grad_scaling is not None:
        check_fp8_output("tensorwise", grad_scaling, q)
        scaling = (None, grad_scaling)
    else:
        scaling = None
    return _fp8_linear(q, weight, bias, scale, rowwise, weight_cache, proxy, x_cast=x_cast, scaling=scaling)


class Recast(NamedTuple):
    """``x_cast``'s traced form: x^T's e4m3 cast made again in the backward as ``fn(*tensors, scale, *statics)``
    (``scale``: the 0-d scale x was cast with in the forward: an FP8 x's own, or a delayed cast's), from tensors
    the graph keeps anyway (a norm's input and statistics, an activation's input, attention's output), where an
    eager call passes a function that reads them from the op's autograd node (which tracing has not). The layer
    saves ``tensors`` for its backward in place of x's cast; torch.compile's partitioner keeps one copy of a tensor
    two nodes save (detached here: the same ``detach`` as the other node's is one node after CSE). ``fn`` launches
    through ops (``launch.launcher_op``), so that the traced graph records them."""

    fn: Callable[..., tuple[Tensor, Tensor]]
    statics: tuple
    tensors: tuple

    def unpack(self) -> tuple[tuple, tuple]:
        """``((fn, statics), tensors)`` as a Function takes them: its ``x_cast`` and its trailing inputs, detached."""
        return (self.fn, self.statics), tuple(t if t is None else t.detach() for t in self.tensors)


def _check_x_cast(x_cast, x_amax) -> None:
    """``x_cast`` (fp8_linear's, fp8_linear_act's): None, or a function making x^T's cast (or its traced form, a
    :class:`Recast`), given with x_amax."""
    if isinstance(x_cast, Recast):  # (its fn takes x_amax, or without it the 0-d scale of the layer's own cast)
        return
    if x_cast is not None and (not callable(x_cast) or x_amax is None):
        raise ValueError(f"x_cast: expected a function making x^T's cast, with x_amax (recipe 'tensorwise'), got "
                         f"{type(x_cast).__name__} with x_amax {'given' if x_amax is not None else 'None'}")


def _check_delayed_args(x, x_scale, x_amax, x_cast, fp8_scaling) -> None:
    """fp8_linear's checks for recipe 'delayed' beyond the tensorwise ones (made by the caller after this)."""
    if isinstance(x, Tensor) and x.dtype == torch.float8_e4m3fn or x_scale is not None:
        raise ValueError("x: recipe 'delayed' casts a high-precision x itself with its history's scale; an FP8 x with "
                         "x_scale is for recipes 'tensorwise' / 'rowwise'")
    if x_amax is not None or x_cast is not None and not isinstance(x_cast, Recast):
        raise ValueError("x_amax / x_cast: recipe 'delayed' takes x's scale from its history, not from its amax; "
                         "pass None (x_cast: only a Recast, traced)")
    if (isinstance(fp8_scaling, Float8Scaling) or not isinstance(fp8_scaling, (tuple, list)) or len(fp8_scaling) != 2
            or not all(isinstance(state, Float8Scaling) for state in fp8_scaling)):
        raise TypeError("fp8_scaling: recipe 'delayed' needs (x_state, grad_state), two Float8Scaling kept from step "
                        f"to step (blockfuse.nn.Float8Linear holds its own), got {type(fp8_scaling).__name__}")
    for state in fp8_scaling:
        check_fp8_output("tensorwise", state, x)


def _check_x_amax(x_amax, x: Tensor, rowwise: bool) -> None:
    if x_amax is None:
        return
    if rowwise or x.dtype == torch.float8_e4m3fn:
        raise ValueError("x_amax: only for recipe 'tensorwise' with a high-precision x (the amax its cast would take); "
                         f"got recipe {'rowwise' if rowwise else 'tensorwise'!r} and x of {x.dtype}")
    if not isinstance(x_amax, Tensor) or x_amax.dtype != torch.float32:
        raise TypeError(f"x_amax: expected a float32 tensor, got {_type_name(x_amax)}")
    if tuple(x_amax.shape) != (1,):
        raise ValueError(f"x_amax: expected shape (1,) (max |x| of the whole x), got {tuple(x_amax.shape)}")
    if x_amax.device != x.device:
        raise ValueError(f"x_amax: expected a tensor on {x.device} like x, got {x_amax.device}")


def _fp8_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], x_scale: Optional[Tensor], rowwise: bool,
                weight_cache: bool, proxy: Optional[Tensor], x_amax: Optional[Tensor] = None,
                x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]] = None,
                scaling: Optional[tuple["Float8Scaling", "Float8Scaling"]] = None, then=None) -> Tensor:
    """``then``: ``(Function, args)``, a Function that runs the layer (:func:`_linear_forward`) and more after it,
    applied as ``Function.apply(x2, ..., scaling, *args, *recast)`` in :class:`_Fp8LinearFunction`'s place, its
    outputs returned as they are (a training call with FP8 GEMMs only: the caller checks)."""
    k, n = x.shape[-1], weight.shape[0]
    fp8_input = x.dtype == torch.float8_e4m3fn
    if not fp8_supported(k, n):
        # NOTE: no FP8 GEMM for these sizes on a GPU (and padding K or N would copy x or the output every
        # call): the layer runs in high precision, as torchao leaves such layers alone.
        x_high = dequantize(x, x_scale, weight.dtype) if fp8_input else x
        if proxy is not None:  # the values of x, the gradient to the proxy
            x_high = x_high.detach() + (proxy - proxy.detach()).to(x_high.dtype)
        return F.linear(x_high, weight.to(x_high.dtype), None if bias is None else bias.to(x_high.dtype))
    lead = x.shape[:-1]
    # (a contiguous x goes to the Function as it is, which views it as (M, K) itself: _Fp8LinearFunction's NOTE)
    x2 = x if x.dim() == 2 or x.is_contiguous() else x.reshape(-1, k)
    out_dtype = weight.dtype if fp8_input else x.dtype
    if fp8_input:
        # _scaled_mm wants a row-major first operand at a 16-byte aligned address (a traced tensor has none).
        if not x2.is_contiguous() or not (torch.compiler.is_compiling() or tracing()) and x2.data_ptr() % 16:
            x2 = x2.clone(memory_format=torch.contiguous_format)
        # Unit strides: _scaled_mm checks the strides of a (M, 1) scale, its size-1 dimension's too.
        x_scale = x_scale.reshape(-1).unsqueeze(1) if rowwise else x_scale.reshape(())
    grad = torch.is_grad_enabled()
    x_grad = grad and (x.requires_grad if proxy is None else proxy.requires_grad)
    weight_grad = grad and weight.requires_grad
    eager = not (torch.compiler.is_compiling() or tracing())
    recast = ()
    if isinstance(x_cast, Recast):  # (traced: the tensors go to the Function as inputs, its backward calls fn)
        x_cast, recast = x_cast.unpack()
    elif not eager:
        x_cast = None
    if not (weight_grad and not rowwise):
        x_cast, recast = None, ()
    keep_hp = weight_grad and not rowwise and not fp8_input and (x_cast is not None or _kept_for_free(x2))
    config = (rowwise, out_dtype, x_grad, weight_grad, weight_cache, keep_hp)
    if then is not None:
        if not (x_grad or weight_grad):
            raise RuntimeError("_fp8_linear: then= is for a call that takes gradients")
        return then[0].apply(x2.reshape(-1, k), x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling,
                             *then[1], *recast)
    if x_grad or weight_grad or (grad and bias is not None and bias.requires_grad):
        y = _Fp8LinearFunction.apply(x2, x_scale, weight, bias, config, proxy, x_amax, x_cast, scaling, *recast)
        return y if x2.dim() == x.dim() else unviewed(y, *lead, n)  # (a strided x of more dimensions: reshaped)
    y, _ = _forward(x2.reshape(-1, k), x_scale, weight, bias, rowwise, out_dtype, False, False, weight_cache, x_amax,
                    scaling=None if scaling is None else scaling[0])
    return y.view(*lead, n)


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _amax(t: Tensor, dim: Optional[int] = None) -> Tensor:
    """``t.abs().amax(dim, keepdim=True)`` (the whole tensor, 0-d, for dim None), 0 over no elements."""
    if dim is None:
        return t.abs().amax() if t.numel() else t.new_zeros(())
    if t.shape[dim] == 0:
        shape = list(t.shape)
        shape[dim] = 1
        return t.new_zeros(shape)
    return t.abs().amax(dim, keepdim=True)


def _scale_ref(amax: Tensor, fp8_max: float) -> Tensor:
    """``max(amax, 1e-12) / fp8_max`` in fp32, rounded as :func:`scale_of` rounds it (IEEE division).

    NOTE: divided by a tensor, not by a Python number: CUDA divides by a CPU scalar as a product with
    its reciprocal (PyTorch's ``div_true_kernel_cuda``), up to one ulp from the quotient, which would then
    differ from the kernels' ``div_rn`` (and from the CPU) in the last bit of some scales."""
    amax = amax.float().clamp(min=AMAX_FLOOR)
    return amax / torch.full((), fp8_max, dtype=torch.float32, device=amax.device)


def _cast_ref(x: Tensor, scale: Tensor, dtype: torch.dtype) -> Tensor:
    """``clamp(x * (1 / scale))`` in ``dtype``, as the kernels' :func:`_quantized` computes it (the reciprocal
    divided by a tensor: IEEE-rounded on every device, see :func:`_scale_ref`)."""
    return _clamped(x * (torch.ones_like(scale) / scale), dtype)


def _clamped(v: Tensor, dtype: torch.dtype) -> Tensor:
    fp8_max = FP8_MAX[dtype]
    return v.clamp(-fp8_max, fp8_max).to(dtype)


def _quantize_2d_ref(x, dtype, rowwise, rows, transposed, pad, amax=None):
    """Pure-PyTorch :func:`_fp8_quantize`, the same outputs (empty where not asked for); ``amax``: the
    tensorwise amax, given."""
    xf = x.float()
    fp8_max = FP8_MAX[dtype]
    y = y_scale = yt = yt_scale = None
    if rowwise:
        if rows:
            y_scale = _scale_ref(_amax(xf, 1), fp8_max).reshape(-1).unsqueeze(1)  # (M, 1), unit strides
            y = _cast_ref(xf, y_scale, dtype).contiguous()
        if transposed:
            col_scale = _scale_ref(_amax(xf, 0), fp8_max)  # (1, N)
            yt = _transposed_ref(_cast_ref(xf, col_scale, dtype), pad)
            yt_scale = col_scale.reshape(-1).unsqueeze(1)  # (N, 1), unit strides (_scaled_mm checks them)
    else:
        scale = _scale_ref(_amax(xf) if amax is None else amax.reshape(()), fp8_max)  # ()
        q = _cast_ref(xf, scale, dtype).contiguous()
        if rows:
            y, y_scale = q, scale
        if transposed:
            yt, yt_scale = _transposed_ref(q, pad), scale.clone()
    return empty_if_none(y, x), empty_if_none(y_scale, x), empty_if_none(yt, x), empty_if_none(yt_scale, x)


def _history_scale_ref(history: Tensor, fp8_max: float) -> Tensor:
    """``max(history) / fp8_max`` in fp32 (0-d), 1.0 for an all-zero history: the delayed scale."""
    top = history.float().amax()
    return torch.where(top > 0, _scale_ref(top, fp8_max), torch.ones_like(top))


def _quantize_delayed_ref(x, dtype, rows, transposed, pad, history, amax, sum_dtype=None):
    """Pure-PyTorch :func:`_fp8_quantize_delayed`: the same outputs, and the same update of ``history`` and
    ``amax`` in place."""
    xf = x.float()
    scale = _history_scale_ref(history, FP8_MAX[dtype])
    q = _cast_ref(xf, scale, dtype).contiguous()
    y = y_scale = yt = yt_scale = col_sum = None
    if rows:
        y, y_scale = q, scale
    if transposed:
        yt, yt_scale = _transposed_ref(q, pad), scale.clone()
    if sum_dtype is not None:
        col_sum = xf.sum(0).to(sum_dtype)
    newest = torch.maximum(amax.reshape(()), _amax(xf))
    history.copy_(torch.cat((newest.reshape(1), history[:-1])))
    amax.zero_()
    return (empty_if_none(y, x), empty_if_none(y_scale, x), empty_if_none(yt, x), empty_if_none(yt_scale, x),
            empty_if_none(col_sum, x))


def quantize_ref(x: Tensor, dtype: torch.dtype = torch.float8_e4m3fn, *,
                 recipe: str = "tensorwise", fp8_scaling: Optional["Float8Scaling"] = None) -> tuple[Tensor, Tensor]:
    """Pure-PyTorch :func:`quantize`: the same scales and values (and with ``fp8_scaling`` the same update of
    its history)."""
    rowwise = _check_quantize_args(x, dtype, recipe)
    if fp8_scaling is not None:
        x2 = x.detach().reshape(-1, x.shape[-1])
        y, scale, _, _, _ = _quantize_delayed_ref(x2, dtype, True, False, 1, *fp8_scaling)
        return y.view(x.shape), scale
    xf = x.detach().float()
    scale = _scale_ref(_amax(xf, -1) if rowwise else _amax(xf), FP8_MAX[dtype])
    return _cast_ref(xf, scale, dtype), scale


def fp8_linear_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, x_scale: Optional[Tensor] = None,
                   recipe: str = "tensorwise") -> Tensor:
    """Pure-PyTorch :func:`fp8_linear` (forward): x and the weight quantized as it does, dequantized,
    multiplied in fp32 (fp32 bias), one rounding to the output dtype."""
    _check_fp8_linear_args(x, weight, bias, x_scale, recipe)
    if x.dtype == torch.float8_e4m3fn:
        x_deq, out_dtype = dequantize(x, x_scale), weight.dtype
    else:
        x_deq, out_dtype = dequantize(*quantize_ref(x, recipe=recipe)), x.dtype
    w_deq = dequantize(*quantize_ref(weight, recipe=recipe))
    y = x_deq @ w_deq.t()
    if bias is not None:
        y = y + bias.float()
    return y.to(out_dtype)


def delayed_scale_ref(history: Tensor) -> Tensor:
    """Pure-PyTorch :func:`delayed_scale`: ``max(history) / 448`` in fp32, 1.0 for an all-zero history (0-d)."""
    amax = history.float().amax()
    return torch.where(amax > 0, _scale_ref(amax, FP8_MAX[torch.float8_e4m3fn]), torch.ones_like(amax))


def quantize_output_ref(y: Tensor, fp8: str, fp8_scaling: Optional[Float8Scaling] = None) -> tuple[Tensor, Tensor]:
    """Pure-PyTorch FP8 output option of an op (module docstring): ``(y_fp8, scale)`` for ``y``, the op's
    output in its compute dtype (fp32, or fp64 for fp64 inputs), as the kernels write it (``y`` times the
    reciprocal of its scale, clamped, rounded to e4m3); ``"tensorwise"`` rolls this call's amax into
    ``fp8_scaling.history`` as the kernels do."""
    fp8_max = FP8_MAX[torch.float8_e4m3fn]
    if fp8 == "rowwise":
        scale = _scale_ref(_amax(y, -1), fp8_max)  # (..., 1)
    elif fp8 == "tensorwise":
        history = fp8_scaling.history
        scale = delayed_scale_ref(history)
        history.copy_(torch.cat((_amax(y).float().reshape(1), history[:-1])))
    else:
        raise ValueError(f"fp8: expected 'rowwise' or 'tensorwise', got {fp8!r}")
    inverse = 1.0 / scale
    q = _clamped(y * inverse.to(y.dtype), torch.float8_e4m3fn)
    return q, scale

