"""The activations: their one table of names and kernel codes, and their math, shared by every fused kernel.

:data:`ACTIVATIONS` names every activation an op takes: the pointwise ones (``gelu_tanh``, ``gelu``
(erf), ``silu``, ``relu``) and the gated ones (``swiglu``, ``geglu``, ``geglu_erf``: ``act(gate) * up``).
A kernel takes the pointwise function as one constexpr code (:data:`CODES`, 0 for none) and applies it
with :func:`activate` / :func:`activate_grad`; the references use :func:`activate_ref`.

Each kernel helper takes and returns fp32 values. The GELU helpers implement both of PyTorch's
forms, ``approximate="tanh"`` and ``approximate="none"`` (erf), so a fused op matches
``torch.nn.functional.gelu`` with the same argument.

The activation / MLP ops (``gated``, ``mlp``, ``linear_act``) also share, from here, the tiling of
an elementwise pass over (M, N) rows (:func:`program_tile` in the kernels, :func:`launch_shape` on
the host) and the bias gradient of a GEMM (:func:`column_sum`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.launch import MAX_GRID_YZ, cdiv
from blockfuse.runtime import interpreter_enabled

# NOTE: the constants are literals inside the kernels: a compiled kernel may only read
# constexpr globals, and the interpreter mishandles constexpr * tensor. They are
# 2 sqrt(2 / pi) = 1.5957691216057308, 1 / sqrt(2) = 0.7071067811865476,
# 1 / sqrt(2 pi) = 0.3989422804014327, the cubic coefficient of the tanh form 0.044715,
# log2(e) = 1.4426950408889634, and the products of these that the kernels use:
# 2 sqrt(2 / pi) log2(e) = 2.302208198144325, times 0.044715 = 0.1029432395800235, and
# 3 * 0.044715 * 2 sqrt(2 / pi) = 0.21406444881780073.

GELU_APPROXIMATIONS = ("tanh", "none")

# The pointwise activations as kernel constants (0: none, e.g. a LayerNorm without its GELU).
GELU_TANH: tl.constexpr = tl.constexpr(1)
GELU_ERF: tl.constexpr = tl.constexpr(2)
SILU: tl.constexpr = tl.constexpr(3)
RELU: tl.constexpr = tl.constexpr(4)
CODES = {"gelu_tanh": GELU_TANH.value, "gelu": GELU_ERF.value, "silu": SILU.value, "relu": RELU.value}
GELU_CODES = {"tanh": GELU_TANH.value, "none": GELU_ERF.value}  # F.gelu's approximate -> the code


class Activation(NamedTuple):
    pointwise: str  # the pointwise function, a key of CODES
    gated: bool  # act(gate) * up, the input holding the gate columns then the up columns


# Every activation an op takes, by name.
ACTIVATIONS = {
    "gelu_tanh": Activation("gelu_tanh", False),
    "gelu": Activation("gelu", False),
    "silu": Activation("silu", False),
    "relu": Activation("relu", False),
    "swiglu": Activation("silu", True),
    "geglu": Activation("gelu_tanh", True),
    "geglu_erf": Activation("gelu", True),
}
GATED = tuple(name for name, activation in ACTIVATIONS.items() if activation.gated)

# NOTE: a sigmoid written as 1 / (1 + exp(-x)) compiles to about twelve instructions on
# sm_90: exp2 and the division each get range fix-ups for denormals (compare, select,
# two conditional multiplies) around their MUFU instruction. The approximate ftz forms
# below are one MUFU instruction each, with a relative error of about 2^-22 (ex2) and
# one ulp (rcp): fp32 accuracy for an activation whose result is rounded to bf16 or fp16.
# LayerNorm + GELU's backward kernel (4 warps, N = 4096) went from 1920 to 1528 SASS
# instructions (benchmarks/kernel_stats.py). The interpreter cannot run PTX, so there they are plain
# tl.exp2 and a division; Triton, too, decides between interpreter and compiler when a
# kernel is defined (TRITON_INTERPRET must be set before Python starts).
# BLOCKFUSE_FAST_MUFU=0 (read at import) gives the GPU the plain forms too, for A/B runs: torch 2.11's mutation
# analysis of a user kernel cannot read inline asm and takes every tensor the kernel is given as written; the plain
# forms did not change a compiled FP8 te-4layer step (benchmarks/NOTES.md, "Under torch.compile").
FAST_MUFU = os.environ.get("BLOCKFUSE_FAST_MUFU", "1") != "0"
if interpreter_enabled() or not FAST_MUFU:

    @triton.jit
    def fast_exp2(x):
        """``2 ** x`` in fp32."""
        return tl.exp2(x)

    @triton.jit
    def fast_rcp(x):
        """``1 / x`` in fp32."""
        return 1.0 / x

else:

    @triton.jit
    def fast_exp2(x):
        """``2 ** x`` in fp32 (``ex2.approx.ftz``: denormal results flush to zero)."""
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)

    @triton.jit
    def fast_rcp(x):
        """``1 / x`` in fp32 (``rcp.approx.ftz``; 1 / inf = 0, so a sigmoid saturates cleanly)."""
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)


@triton.jit
def sigmoid(x):
    """``1 / (1 + exp(-x))``; 0 for large negative x (exp2 overflows to inf), 1 for large positive."""
    return fast_rcp(1.0 + fast_exp2(x * -1.4426950408889634))


@triton.jit
def silu(x):
    """``x * sigmoid(x)``."""
    return x * sigmoid(x)


@triton.jit
def silu_grad(x):
    """d silu / dx ``= s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``."""
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


@triton.jit
def _gelu_tanh_sigmoid(x):
    """sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3): 0.5 (1 + tanh(u)) without a tanh (which
    Triton only offers through libdevice) and without cancellation in 1 + tanh(u) for negative x."""
    return fast_rcp(1.0 + fast_exp2(x * (-2.302208198144325 - 0.1029432395800235 * (x * x))))


@triton.jit
def _gelu_tanh(x):
    return x * _gelu_tanh_sigmoid(x)


@triton.jit
def _gelu_tanh_grad(x):
    # d/dx x s(x) = s + x s (1 - s) 2u'(x), 2u'(x) = 2 sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
    s = _gelu_tanh_sigmoid(x)
    return s * (1.0 + x * (1.0 - s) * (1.5957691216057308 + 0.21406444881780073 * (x * x)))


# NOTE: the tanh-form GELU's derivative in packed half precision, for the backward of a bf16 op (whose PyTorch
# form sees the GELU's input rounded to bf16's 8 bits and rounds the derivative's product to bf16: this derivative
# adds 6e-4 relative (norm) error against fp64 where bf16 input rounding alone gives 4.6e-4, in a numpy emulation
# of these roundings over 2^20 normal inputs of std 2; not used for fp16 or
# fp32, whose PyTorch forms are more exact). Two elements an instruction: x clamped to [-8, 8] (past it the
# derivative is 0 or 1 in fp16, and x^2 stays finite), t = tanh(u) by one MUFU (tanh.approx.f16x2),
# d = 0.5 (1 + t) + x (1 - t^2) (0.5 a + 1.5 b x^2), a = sqrt(2 / pi), b = 0.044715 a. Built for sm_90 (triton
# 3.6), the LayerNorm + GELU backward's loop: 35.2 -> 32.2 SASS instructions a useful element at 4096, 39.8 -> 37.8
# at 4304 (benchmarks/kernel_stats.py --loop). The NOTE above GELU_GRAD_F16X2 in ops/norm.py: what it measured.
if interpreter_enabled():

    @triton.jit
    def gelu_tanh_grad_f16x2(x):
        """The GPU form's arithmetic in fp16 ops, one element at a time (the interpreter cannot run PTX): the same
        clamp, the same roundings, tanh rounded from fp32."""
        h = tl.minimum(tl.maximum(x, -8.0), 8.0).to(tl.float16)
        x2 = h * h
        u = (x2 * 0.03568 + 0.798) * h
        t = (2.0 / (1.0 + tl.exp(-2.0 * u.to(tl.float32))) - 1.0).to(tl.float16)
        r = h * (x2 * 0.05353 + 0.399)
        return (r * (1.0 - t * t) + (t * 0.5 + 0.5)).to(tl.float32)

else:

    @triton.jit
    def gelu_tanh_grad_f16x2(x):
        """d gelu_tanh / dx of fp32 ``x``, computed two elements at a time in fp16 (the NOTE above)."""
        return tl.inline_asm_elementwise(
            """{
            .reg .b32 h, x2, u, t, p, q, r, s, g, hi8, lo8, ca, cb, cp0, cp1, one, half;
            .reg .b16 lo, hi;
            mov.b32 hi8, 0x48004800;
            mov.b32 lo8, 0xc800c800;
            mov.b32 ca, 0x3a623a62;
            mov.b32 cb, 0x28912891;
            mov.b32 cp0, 0x36623662;
            mov.b32 cp1, 0x2ada2ada;
            mov.b32 one, 0x3c003c00;
            mov.b32 half, 0x38003800;
            cvt.rn.f16x2.f32 h, $3, $2;
            min.f16x2 h, h, hi8;
            max.f16x2 h, h, lo8;
            mul.rn.f16x2 x2, h, h;
            fma.rn.f16x2 u, x2, cb, ca;
            mul.rn.f16x2 u, u, h;
            tanh.approx.f16x2 t, u;
            fma.rn.f16x2 p, x2, cp1, cp0;
            neg.f16x2 q, t;
            fma.rn.f16x2 q, q, t, one;
            mul.rn.f16x2 r, h, p;
            fma.rn.f16x2 s, t, half, half;
            fma.rn.f16x2 g, r, q, s;
            mov.b32 {lo, hi}, g;
            cvt.f32.f16 $0, lo;
            cvt.f32.f16 $1, hi;
            }""",
            "=f,=f,f,f", [x], dtype=tl.float32, is_pure=True, pack=2)


@triton.jit
def _gelu_erf(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_erf_grad(x):
    cdf = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
    return cdf + x * 0.3989422804014327 * tl.exp(-0.5 * x * x)


@triton.jit
def gelu(x, TANH: tl.constexpr):
    """GELU: the tanh approximation when ``TANH``, else the exact erf form."""
    if TANH:
        return _gelu_tanh(x)
    else:
        return _gelu_erf(x)


@triton.jit
def gelu_grad(x, TANH: tl.constexpr):
    """d gelu / dx, in the same form as :func:`gelu`."""
    if TANH:
        return _gelu_tanh_grad(x)
    else:
        return _gelu_erf_grad(x)


@triton.jit
def activate(z, ACTIVATION: tl.constexpr):
    """act(z) for an fp32 tile; ``ACTIVATION`` one of :data:`CODES`."""
    if ACTIVATION == RELU:
        return tl.maximum(z, 0.0)
    elif ACTIVATION == SILU:
        return silu(z)
    else:
        return gelu(z, ACTIVATION == GELU_TANH)


@triton.jit
def activate_grad(z, ACTIVATION: tl.constexpr):
    """act'(z) for an fp32 tile (relu: 0 at 0, as PyTorch)."""
    if ACTIVATION == RELU:
        return tl.where(z > 0.0, 1.0, 0.0)
    elif ACTIVATION == SILU:
        return silu_grad(z)
    else:
        return gelu_grad(z, ACTIVATION == GELU_TANH)


def activate_ref(z: Tensor, pointwise: str) -> Tensor:
    """Pure-PyTorch act(z) of a pointwise activation (a key of :data:`CODES`)."""
    if pointwise == "relu":
        return F.relu(z)
    if pointwise == "silu":
        return F.silu(z)
    return F.gelu(z, approximate="tanh" if pointwise == "gelu_tanh" else "none")


def check_activation(activation, allowed=ACTIVATIONS) -> Activation:
    """Validate an activation name (one of ``allowed``) and return its table entry."""
    if activation not in allowed:
        raise ValueError(f"activation: expected one of {list(allowed)}, got {activation!r}")
    return ACTIVATIONS[activation]


def check_gelu_approximation(approximate) -> bool:
    """Validate ``approximate`` (PyTorch's GELU argument); True for ``"tanh"``."""
    if approximate not in GELU_APPROXIMATIONS:
        raise ValueError(f"approximate: expected 'tanh' or 'none' (as torch.nn.functional.gelu), "
                         f"got {approximate!r}")
    return approximate == "tanh"


# ----------------------------------------------------------------------------------------
# Shared by the activation / MLP ops: elementwise tiles and the bias gradient of a GEMM
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tiles:
    """The column block of an elementwise pass (``launch_shape``; the tile sizes are each op's own)."""

    # Widest column block of an elementwise pass, and the narrowest one tried to avoid wasted (masked)
    # columns.
    max_block_n: int = 4096
    min_block_n: int = 128
    # NOTE: a 2-D grid (column blocks x row blocks) gives each program its tile from two program ids; on a 1-D
    # grid the program divides its id by the column blocks' count, a runtime integer division (~30 dependent SASS
    # instructions, a MUFU among them, on sm_90 with Triton 3.6) before its first load's address is known: the
    # gated backward at [2048, 1024] issued its first load at its 57th instruction, Liger-Kernel's (one row a
    # program) at its 21st. Timed on an H200 (benchmarks/results/launch-rules/47-gated-grid-2026-12-07-h200/, two
    # runs, SwiGLU's kernels alone at [2048, 768-4304] and [8192, 768 / 4096]): the forward 1.001-1.062x in all 16
    # cell-runs (1.02-1.06x at [2048, 768 / 1024], now within 2.1% of Liger's), the backward 1.006-1.043x at 768-1536
    # wide, 0.978 / 0.997x at [2048, 2048], within 1.1% elsewhere; on an H100 (48-gated-grid-2026-12-07-h100/) the
    # forward 1.001-1.046x, the backward 0.998-1.035x. Row blocks past the grid's second dimension keep the 1-D grid.
    grid_2d: bool = True


TILES = Tiles()


@triton.jit
def program_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GRID_2D: tl.constexpr = False):
    """Rows (int64), columns and mask of this program's tile of an (M, N) elementwise pass; programs
    walk a row block's column blocks first, so neighbouring programs read neighbouring memory. ``GRID_2D``: the
    grid is (column blocks, row blocks) (:func:`tile_grid`), else one dimension of both."""
    if GRID_2D:
        col_block = tl.program_id(0)
        row_block = tl.program_id(1)
    else:
        pid = tl.program_id(0)
        col_blocks = tl.cdiv(N, BLOCK_N)
        row_block = pid // col_blocks
        col_block = pid - row_block * col_blocks
    rows = tl.cast(row_block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    return rows, cols, mask


def _column_block(n: int, max_block_n: int, min_block_n: int) -> int:
    """The column block: the widest power of two up to max_block_n that wastes at most an
    eighth of the columns in masked lanes (14336 -> 2048, 4304 -> 512, 760 -> 256). Comparisons
    only, so that n may be a symbolic size while torch.compile traces."""
    widest = 1
    while widest < n and widest < max_block_n:
        widest *= 2
    best, best_waste = widest, None
    block = widest
    while block >= min(min_block_n, widest):
        waste = cdiv(n, block) * block - n
        if 8 * waste <= n:
            return block
        if best_waste is None or waste < best_waste:
            best, best_waste = block, waste
        block //= 2
    return best


# (keyed on TILES' values too, so that a table swapped in is seen)
_cached_column_block = functools.lru_cache(maxsize=None)(_column_block)


def launch_shape(m: int, n: int, tile_elements: int, elements_per_warp: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) of a (m, n) elementwise pass (:func:`program_tile`; its grid:
    :func:`tile_grid`)."""
    tiles = TILES
    column_block = _cached_column_block if n.__class__ is int else _column_block
    block_n = column_block(n, tiles.max_block_n, tiles.min_block_n)
    # NOTE: narrow rows are packed several to a program so that each program moves a few KB: BLOCK_M
    # is the smaller of tile_elements // BLOCK_N and the power of two that covers m, found by halving
    # (comparisons only, so that m may be a symbolic size while torch.compile traces).
    block_m = max(1, tile_elements // block_n)
    while block_m > 1 and block_m // 2 >= m:
        block_m //= 2
    num_warps = min(16, max(1, (block_m * block_n) // elements_per_warp))
    return block_m, block_n, num_warps


def tile_grid(m: int, n: int, block_m: int, block_n: int) -> tuple[tuple[int, ...], bool]:
    """(grid, GRID_2D) of an elementwise pass over (m, n) in (block_m, block_n) tiles (:func:`program_tile`):
    (column blocks, row blocks) where ``TILES.grid_2d`` and the row blocks fit, else one dimension of both."""
    col_blocks, row_blocks = cdiv(n, block_n), cdiv(m, block_m)
    if TILES.grid_2d and row_blocks <= MAX_GRID_YZ:
        return (col_blocks, row_blocks), True
    return (col_blocks * row_blocks,), False


def column_sum(t2: Tensor) -> Tensor:
    """Sum over rows of a (tokens, n) gradient as one GEMV (fp32 accumulation in cuBLAS): the bias
    gradient of a GEMM.

    NOTE: ``t2.sum(0)`` on a bf16 (8192, 8192) gradient allocated 132 MiB of temporaries on an
    H200 (torch 2.11), the largest allocation at the block's peak; the GEMV allocates only n."""
    return torch.mv(t2.t(), t2.new_ones(t2.shape[0]))
