"""Triton GEMMs with the activation in their epilogue: ``linear_act`` and ``fused_mlp`` on Triton's ``tl.dot``
instead of cuBLAS, kept as a benchmark because they measured slower (``benchmarks/NOTES.md``, "Linear +
activation"). The package runs cuBLAS GEMMs and its activation kernel (``blockfuse/ops/linear_act.py``,
``ops/mlp.py``); ``benchmarks/linear_act.py`` times the two side by side (providers ``linear_act_triton``,
``linear_act_triton_tma``, ``fused_mlp_triton``).

* forward: bias + activation in the GEMM's epilogue from the fp32 accumulator (Hopper wgmma, autotuned
  tiles); ``tma=True`` loads the tiles through tensor-memory-accelerator descriptors on sm_90+, where the
  layout allows it (falling back, with a warning, if the descriptors fail to compile);
* ``linear_act``'s backward: ``dx = d_pre @ W`` with ``d_pre = dy * act'(pre)`` computed while loading its
  tiles (prologue); ``fused_mlp``'s: ``d_pre = (dy @ W2) * act'(pre)`` in the hidden-gradient GEMM's
  epilogue, written over the pre-activation. Weight and bias gradients are cuBLAS calls on materialized
  operands, as in the package.

Correctness check in Triton's interpreter (the tests run it):
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/triton_gemm_epilogue.py --check
"""

from __future__ import annotations

import argparse
import warnings
from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.activation import ACTIVATIONS, CODES, activate, activate_grad, activate_ref, column_sum
from blockfuse.ops.gated import launch_gated_backward, launch_gated_forward
from blockfuse.ops.launch import Kernel, as_rows, cdiv, next_power_of_2
from blockfuse.ops.linear_act import pre_halves
from blockfuse.ops.mlp import column_blocks
from blockfuse.runtime import interpreter_enabled

# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """acc + a @ b in fp32.

    NOTE: ``UPCAST`` is set only in Triton's interpreter for bf16 tiles: it keeps bf16 as uint16
    and its ``tl.dot`` multiplies those integers (Triton 3.9, ``interpreter.py``, ``create_dot``).
    The product of two bf16 values is exact in fp32, so the upcast computes what the GPU's MMA does.
    """
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision=INPUT_PRECISION)
    else:
        return tl.dot(a, b, acc, input_precision=INPUT_PRECISION)


@triton.jit
def _grouped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program.

    NOTE: consecutive programs cover GROUP_M row blocks column block by column block, rather than
    a whole row of column blocks: the programs in flight then share their A tiles (GROUP_M row
    blocks) and B tiles (a few column blocks) in L2, instead of streaming all of B per row block.
    """
    pid = tl.program_id(0)
    row_blocks = tl.cdiv(M, BLOCK_M)
    col_blocks = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * col_blocks
    first = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(row_blocks - first, GROUP_M)
    row_block = first + (pid % per_group) % rows_in_group
    col_block = (pid % per_group) // rows_in_group
    return row_block, col_block


@triton.jit
def _accumulate(
    A,  # (M, K) left operand, element (m, k) at m * stride_am + k * stride_ak
    B,  # (K, N) right operand, element (k, n) at k * stride_bk + n * stride_bn
    a_rows,  # (BLOCK_M,) rows of A, already inside [0, M)
    b_cols,  # (BLOCK_N,) columns of B, already inside [0, N)
    K, stride_am, stride_ak, stride_bk, stride_bn,
    second_offset,  # elements from B's column n to the second operand's column n (TWO only)
    TWO: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """(A[a_rows] @ B[:, b_cols], A[a_rows] @ B2[:, b_cols]) in fp32, B2 = B + second_offset (the up
    half of a gated weight); the second result is zeros unless TWO. Only K is masked."""
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = A + a_rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = B + ks[:, None] * stride_bk + b_cols[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = ks < K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)
        acc = _dot(a, b, acc, UPCAST, INPUT_PRECISION)
        if TWO:
            b2 = tl.load(b_ptrs + second_offset, mask=k_mask[:, None], other=0.0)
            acc2 = _dot(a, b2, acc2, UPCAST, INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc, acc2


@triton.jit
def _accumulate_tma(
    X,  # (M, K) input rows, last dimension contiguous, 16-byte aligned rows
    W,  # (N_W, K) weight, same conditions
    row_start, col_start, up_row,  # first row of the X tile and of the W tile; up_row: row offset of up in W
    M, N_W, K, stride_xm, stride_wn,
    TWO: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """``_accumulate`` of x @ W.T with the tiles loaded by TMA descriptors (out-of-range
    elements read as zeros, so nothing is masked)."""
    x_desc = tl.make_tensor_descriptor(X, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(W, shape=[N_W, K], strides=[stride_wn, 1], block_shape=[BLOCK_N, BLOCK_K])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = x_desc.load([row_start, k])
        b = w_desc.load([col_start, k])
        acc = _dot(a, tl.trans(b), acc, UPCAST, INPUT_PRECISION)
        if TWO:
            b2 = w_desc.load([up_row + col_start, k])
            acc2 = _dot(a, tl.trans(b2), acc2, UPCAST, INPUT_PRECISION)
    return acc, acc2


@triton.jit
def _linear_act_fwd_kernel(
    X,  # (M, K) input rows (any strides)
    W,  # (N, K) weight; gated: (2 N, K), the gate rows then the up rows
    B,  # (N,) bias, gated (2 N,); or None
    PRE,  # (M, N) pre-activation x @ W.T + b, gated (M, 2 N), written in x's dtype; or None
    Y,  # (M, N) output act(pre); gated act(gate) * up
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_pre, stride_y,
    up_offset,  # N * stride_wn: from a gate row of W to its up row
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, HAS_BIAS: tl.constexpr, STORE_PRE: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    row_block, col_block = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    if USE_TMA:
        n_w = 2 * N if GATED else N
        acc, acc_up = _accumulate_tma(X, W, row_block * BLOCK_M, col_block * BLOCK_N, N, M, n_w, K, stride_xm,
                                      stride_wn, GATED, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        # NOTE: rows and columns past the edge are read from row / column (i mod size) instead of
        # masked: every load but the K tail is then unmasked, and the extra results are not stored.
        acc, acc_up = _accumulate(X, W, rows % M, cols % N, K, stride_xm, stride_xk, stride_wk, stride_wn,
                                  up_offset, GATED, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)

    # Epilogue, on the fp32 accumulator: bias, pre-activation, activation.
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)
    if HAS_BIAS:
        acc += tl.load(B + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
        if GATED:
            acc_up += tl.load(B + N + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if STORE_PRE:
        pre_ptrs = PRE + rows64[:, None] * stride_pre + cols[None, :]
        tl.store(pre_ptrs, acc.to(PRE.dtype.element_ty), mask=mask)
        if GATED:
            tl.store(pre_ptrs + N, acc_up.to(PRE.dtype.element_ty), mask=mask)
    y = activate(acc, ACTIVATION)
    if GATED:
        y = y * acc_up
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _linear_act_dx_kernel(
    DY,  # (M, N) gradient of the output
    PRE,  # (M, N) pre-activation saved by the forward; gated (M, 2 N), gate then up
    W,  # (N, K) weight; gated (2 N, K)
    DX,  # (M, K) gradient of x, out
    M, N, K,
    stride_dy, stride_pre, stride_wn, stride_wk, stride_dx,
    up_offset,  # N * stride_wn: from a gate row of W to its up row
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """dx = d_pre @ W, d_pre = dy * act'(pre) (gated: [dy * up * act'(gate), dy * act(gate)])
    computed from dy and pre as each A tile is loaded: d_pre is never written. BLOCK_K: columns of
    dx per program; BLOCK_N: the reduction step over N."""
    row_block, col_block = _grouped_tile(M, K, BLOCK_M, BLOCK_K, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    ks = col_block * BLOCK_K + tl.arange(0, BLOCK_K)
    ns = tl.arange(0, BLOCK_N)
    rows64 = rows.to(tl.int64)
    row_mask = rows < M
    dy_ptrs = DY + rows64[:, None] * stride_dy + ns[None, :]
    pre_ptrs = PRE + rows64[:, None] * stride_pre + ns[None, :]
    w_ptrs = W + ns[:, None].to(tl.int64) * stride_wn + (ks % K)[None, :] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for step in range(0, tl.cdiv(N, BLOCK_N)):
        n_mask = ns < N - step * BLOCK_N
        mask = row_mask[:, None] & n_mask[None, :]
        # Masked rows and columns read dy = 0, so their d_pre is 0.
        dy = tl.load(dy_ptrs, mask=mask, other=0.0).to(tl.float32)
        z = tl.load(pre_ptrs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptrs, mask=n_mask[:, None], other=0.0)
        if GATED:
            u = tl.load(pre_ptrs + N, mask=mask, other=0.0).to(tl.float32)
            w_up = tl.load(w_ptrs + up_offset, mask=n_mask[:, None], other=0.0)
            d_up = (dy * activate(z, ACTIVATION)).to(W.dtype.element_ty)
            acc = _dot(d_up, w_up, acc, UPCAST, INPUT_PRECISION)
            dy = dy * u
        # NOTE: d_pre is rounded to the weight's dtype before the dot, as the materialized
        # gradient would be: both paths give the same dx.
        d_pre = (dy * activate_grad(z, ACTIVATION)).to(W.dtype.element_ty)
        acc = _dot(d_pre, w, acc, UPCAST, INPUT_PRECISION)
        dy_ptrs += BLOCK_N
        pre_ptrs += BLOCK_N
        w_ptrs += BLOCK_N * stride_wn
    mask = row_mask[:, None] & (ks < K)[None, :]
    tl.store(DX + rows64[:, None] * stride_dx + ks[None, :], acc.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _mlp_dpre_kernel(
    DY,  # (M, D) gradient of the MLP's output
    W2,  # (D, N) fc2 weight
    PRE,  # (M, N) fc1 pre-activation (gated (M, 2 N), gate then up); overwritten by its gradient
    M, N, D,
    stride_dy, stride_dyd, stride_w2d, stride_w2n, stride_pre,
    M_BUCKET,  # the autotuning key of M (a power of two); unused here
    ACTIVATION: tl.constexpr, GATED: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """d_pre = (dy @ W2) * act'(pre) (gated: [dh * up * act'(gate), dh * act(gate)]) in the GEMM's
    epilogue, written over pre: each element is read and written by one program only."""
    row_block, col_block = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    dh, _ = _accumulate(DY, W2, rows % M, cols % N, D, stride_dy, stride_dyd, stride_w2d, stride_w2n, 0, False,
                        UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    pre_ptrs = PRE + rows.to(tl.int64)[:, None] * stride_pre + cols[None, :]
    z = tl.load(pre_ptrs, mask=mask, other=0.0).to(tl.float32)
    if GATED:
        up_ptrs = pre_ptrs + N
        u = tl.load(up_ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(up_ptrs, (dh * activate(z, ACTIVATION)).to(PRE.dtype.element_ty), mask=mask)
        dh = dh * u
    tl.store(pre_ptrs, (dh * activate_grad(z, ACTIVATION)).to(PRE.dtype.element_ty), mask=mask)



# ----------------------------------------------------------------------------------------
# Tile configurations
# ----------------------------------------------------------------------------------------


def _config(block_m, block_n, block_k, warps, stages, group_m=8):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group_m},
                         num_warps=warps, num_stages=stages)


# NOTE: candidates for Hopper's wgmma (128-row tiles over 8 warps = two warp groups, 64-deep K
# steps, 3-4 stages of shared memory), plus 64-row tiles for fewer rows. The pruning below drops the
# ones whose stages overflow shared memory or whose accumulators (two, gated) overflow registers.
FWD_CONFIGS = [
    _config(128, 256, 64, 8, 3), _config(128, 256, 64, 8, 4), _config(128, 128, 64, 8, 4),
    _config(128, 128, 64, 8, 3), _config(128, 128, 64, 4, 4), _config(64, 256, 64, 8, 4),
    _config(64, 128, 64, 4, 4), _config(128, 64, 64, 4, 4),
]
# dx: BLOCK_K is the dx column block (the output), BLOCK_N the reduction step over N.
DX_CONFIGS = [
    _config(128, 64, 128, 8, 3), _config(128, 64, 256, 8, 3), _config(128, 32, 128, 8, 4),
    _config(64, 64, 128, 4, 4), _config(64, 64, 256, 8, 3),
]
DPRE_CONFIGS = [
    _config(128, 256, 64, 8, 3), _config(128, 128, 64, 8, 4), _config(128, 128, 64, 4, 4),
    _config(64, 256, 64, 8, 4), _config(64, 128, 64, 4, 4),
]
# Where none of the above fits (fp32 with two accumulators, say): a small tile that always does.
FALLBACK_CONFIGS = {"fwd": _config(64, 64, 32, 4, 3), "dx": _config(64, 32, 64, 4, 3),
                    "dpre": _config(64, 64, 32, 4, 3)}
# In Triton's interpreter (CPU tests) the autotuner is bypassed: one tile, small enough that edge
# tiles and partial groups occur at the tests' sizes (72 -> 2 blocks), large enough that the
# interpreter runs few programs (its cost is per program and per op, not per element).
INTERPRETER_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 2}
# Shared memory of a block on H100 / H200 (227 KiB), and the fp32 accumulator registers a thread
# may hold: 128 (a 128 x 256 tile over 8 warps). NOTE: compiled by Triton 3.9 for sm_90 in bf16
# (on a CPU, ptxas from the wheel): 128 x 128 x 2 accumulators over 4 warps (256 a thread) spilled
# 1.2 KB of stack; at 128 a thread, 255 registers and at most 56 bytes of stack.
SHARED_MEMORY_BYTES = 227 * 1024
# From this many rows (a power-of-two bucket) on, only 128-row tiles are tried: 64-row tiles halve
# the reuse of each W tile, and skipping them saves autotuning compiles (not measured on a GPU yet).
LARGE_M = 8192
MAX_ACCUMULATORS_PER_THREAD = 128


def _shared_bytes(kind: str, gated: bool, block_m: int, block_n: int, block_k: int, stages: int, size: int) -> int:
    """Shared memory of a config's pipeline. NOTE: the formulas reproduce what Triton 3.9 allocated
    for sm_90 for every config listed here (dx: its A tiles, computed in registers, are staged one
    time fewer than the W tiles; up to 4 KiB more besides)."""
    w_tiles = 2 if gated else 1
    if kind == "fwd":
        return stages * (block_m * block_k + w_tiles * block_n * block_k) * size
    if kind == "dpre":
        return stages * (block_m * block_k + block_k * block_n) * size
    a_tiles = 3 if gated else 2  # dy, pre (gate) and up
    return ((stages - 1) * a_tiles * block_m * block_n + stages * w_tiles * block_n * block_k) * size + 4096


def _prune(kind):
    """An ``early_config_prune`` for the kernel ``kind``: drops configs that cannot fit."""

    def prune(configs, named_args, **kwargs):
        arguments = {**named_args, **kwargs}
        gated = bool(arguments.get("GATED", False))
        size = (arguments["X"] if kind == "fwd" else arguments["DY"]).element_size()
        m_bucket = int(arguments.get("M_BUCKET", 1 << 20))
        kept = []
        for config in configs:
            block_m, block_n, block_k = (config.kwargs[name] for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
            accumulators = block_m * (block_k if kind == "dx" else block_n) * (2 if gated and kind == "fwd" else 1)
            if (_shared_bytes(kind, gated, block_m, block_n, block_k, config.num_stages, size) > SHARED_MEMORY_BYTES
                    or accumulators > MAX_ACCUMULATORS_PER_THREAD * 32 * config.num_warps
                    or (m_bucket <= 64 and block_m > 64) or (m_bucket >= LARGE_M and block_m < 128)):
                continue
            kept.append(config)
        return kept or [FALLBACK_CONFIGS[kind]]

    return prune


def _tuned(kernel, configs, kind, key, restore=None):
    return triton.autotune(configs=configs, key=key, prune_configs_by={"early_config_prune": _prune(kind)},
                           restore_value=restore)(kernel)


_fwd_tuned = _tuned(_linear_act_fwd_kernel, FWD_CONFIGS, "fwd",
                    ["M_BUCKET", "N", "K", "GATED", "STORE_PRE", "USE_TMA"])
_dx_tuned = _tuned(_linear_act_dx_kernel, DX_CONFIGS, "dx", ["M_BUCKET", "N", "K", "GATED"])
# NOTE: the d_pre kernel writes over PRE: the autotuner restores it after each trial.
_dpre_tuned = _tuned(_mlp_dpre_kernel, DPRE_CONFIGS, "dpre", ["M_BUCKET", "N", "D", "GATED"], restore=["PRE"])
# The autotuned GEMMs as blockfuse launches them. NOTE: in Triton's interpreter the autotuners are
# bypassed: their kernels run alone, with INTERPRETER_CONFIG (see _launch_gemm).
_INTERPRETED = interpreter_enabled()
_fwd_gemm = Kernel(_fwd_tuned.fn if _INTERPRETED else _fwd_tuned)
_dx_gemm = Kernel(_dx_tuned.fn if _INTERPRETED else _dx_tuned)
_dpre_gemm = Kernel(_dpre_tuned.fn if _INTERPRETED else _dpre_tuned)

# ----------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------


def _m_bucket(m: int) -> int:
    """The power of two >= m (at least 1): the autotuning key of the row count. A symbolic m (while
    torch.compile traces) is bucketed by doubling, with comparisons only."""
    if m.__class__ is int:
        return next_power_of_2(m)
    bucket = 1
    while bucket < m:
        bucket *= 2
    return bucket


def _dot_constants(dtype: torch.dtype) -> dict:
    """UPCAST and INPUT_PRECISION for tiles of ``dtype`` (fp32: tf32 only where PyTorch's own
    matmuls may use it, so the kernel is as accurate as torch.mm)."""
    highest = dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest"
    return {"UPCAST": _INTERPRETED and dtype == torch.bfloat16,
            "INPUT_PRECISION": "ieee" if highest else "tf32"}


def _launch_gemm(kernel: Kernel, grid, args: tuple, constants: dict) -> None:
    """Launch an autotuned GEMM ``kernel`` on ``grid`` (a function of the config's constants); in the
    interpreter, its kernel alone with one small tile."""
    if _INTERPRETED:
        kernel(grid(INTERPRETER_CONFIG), *args, **constants, **INTERPRETER_CONFIG)
    else:
        kernel(grid, *args, **constants)


_TMA_FAILURE: Optional[str] = None  # why the TMA path was turned off in this process, if it was


def _traced(t: Tensor) -> bool:
    """True for the fake or functional tensors of tracing (torch.compile), which have no data."""
    return (torch._C._len_torch_dispatch_stack() > 0
            or (t.__class__ is not Tensor and not isinstance(t, torch.nn.Parameter)))


def _tma_usable(x2: Tensor, weight: Tensor) -> bool:
    """TMA descriptors need sm_90+, a contiguous last dimension and 16-byte aligned bases and rows.

    NOTE: while torch.compile traces a launcher (CUDA: Inductor takes in the launches), the forward
    takes the pointer path: the alignment of the bases is known only from real data pointers, and
    device-side descriptors need Triton's global scratch allocator set up around the launch, which
    blockfuse does (:func:`_ensure_tma_allocator`) but Inductor's launch of a user kernel does not
    promise on every torch version. Eager calls, and the interpreter's custom ops, still take TMA."""
    if _TMA_FAILURE is not None or not hasattr(tl, "make_tensor_descriptor") or _traced(x2):
        return False
    if x2.device.type == "cuda" and torch.cuda.get_device_capability(x2.device)[0] < 9:
        return False
    size = x2.element_size()
    return all(t.stride(1) == 1 and (t.stride(0) * size) % 16 == 0 and t.data_ptr() % 16 == 0
               for t in (x2, weight))


def _tma_scratch(size: int, alignment: int, stream) -> Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_tma_allocator() -> None:
    """Device-side descriptors need a global scratch allocator; install one unless the caller has.

    NOTE: Triton keeps the allocator in a ContextVar, so it is checked on every launch: a backward
    runs in autograd's own thread, which does not see one set in the main thread."""
    try:
        from triton.runtime._allocation import NullAllocator, _allocator

        if not isinstance(_allocator.get(), NullAllocator):
            return
    except (ImportError, AttributeError):  # a Triton that keeps it elsewhere: install ours
        pass
    triton.set_allocator(_tma_scratch)


def _launch_forward(x2: Tensor, weight: Tensor, bias: Optional[Tensor], pre2: Optional[Tensor], y2: Tensor,
                    activation: str, use_tma: bool) -> None:
    """y2 = act(x2 @ weight.T + bias), pre2 = the pre-activation (when not None), in one kernel."""
    global _TMA_FAILURE
    name, gated = ACTIVATIONS[activation]
    m, k = x2.shape
    n = y2.shape[1]
    args = (x2, weight, bias, pre2, y2, m, n, k, x2.stride(0), x2.stride(1), weight.stride(0), weight.stride(1),
            0 if pre2 is None else pre2.stride(0), y2.stride(0), n * weight.stride(0), _m_bucket(m))

    def constants(tma: bool) -> dict:
        return {"ACTIVATION": CODES[name], "GATED": gated, "HAS_BIAS": bias is not None,
                "STORE_PRE": pre2 is not None, "USE_TMA": tma, **_dot_constants(x2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    if use_tma and _tma_usable(x2, weight):
        if x2.is_cuda:
            _ensure_tma_allocator()
        try:
            _launch_gemm(_fwd_gemm, grid, args, constants(True))
            return
        except Exception as error:  # noqa: BLE001  (any compile failure: the pointer path still works)
            _TMA_FAILURE = f"{type(error).__name__}: {str(error).strip()[:300]}"
            warnings.warn(f"linear_act: the TMA path failed and is turned off ({_TMA_FAILURE}); "
                          f"using pointer loads", RuntimeWarning, stacklevel=2)
    _launch_gemm(_fwd_gemm, grid, args, constants(False))


def _launch_dx(dy2: Tensor, pre2: Tensor, weight: Tensor, dx2: Tensor, activation: str) -> None:
    name, gated = ACTIVATIONS[activation]
    m, n = dy2.shape
    k = weight.shape[1]
    args = (dy2, pre2, weight, dx2, m, n, k, dy2.stride(0), pre2.stride(0), weight.stride(0), weight.stride(1),
            dx2.stride(0), n * weight.stride(0), _m_bucket(m))
    constants = {"ACTIVATION": CODES[name], "GATED": gated, **_dot_constants(dy2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(k, meta["BLOCK_K"]),)

    _launch_gemm(_dx_gemm, grid, args, constants)


def _launch_dpre(dy2: Tensor, fc2_weight: Tensor, pre2: Tensor, activation: str) -> None:
    """pre2 <- d_pre = (dy2 @ fc2_weight) * act'(pre2), in place."""
    name, gated = ACTIVATIONS[activation]
    m, d = dy2.shape
    n = fc2_weight.shape[1]
    args = (dy2, fc2_weight, pre2, m, n, d, dy2.stride(0), dy2.stride(1), fc2_weight.stride(0), fc2_weight.stride(1),
            pre2.stride(0), _m_bucket(m))
    constants = {"ACTIVATION": CODES[name], "GATED": gated, **_dot_constants(dy2.dtype)}

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    _launch_gemm(_dpre_gemm, grid, args, constants)



# ----------------------------------------------------------------------------------------
# Autograd (eager only: a benchmark)
# ----------------------------------------------------------------------------------------


class _LinearActTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation, tma):
        pointwise, gated = ACTIVATIONS[activation]
        k, rows = x.shape[-1], weight.shape[0]
        n = rows // 2 if gated else rows
        x2 = x.reshape(-1, k)
        y = x.new_empty((*x.shape[:-1], n))
        pre = x.new_empty((x2.shape[0], rows))
        if x2.shape[0] and n:
            _launch_forward(x2, weight, bias, pre, y.view(-1, n), activation, use_tma=tma)
        ctx.save_for_backward(x, pre, weight)
        ctx.activation = activation
        return y

    @staticmethod
    def backward(ctx, dy):
        x, pre2, weight = ctx.saved_tensors
        pointwise, gated = ACTIVATIONS[ctx.activation]
        needs_dx, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        gate2, up2 = pre_halves(pre2, gated)
        dy2 = as_rows(dy, gate2.shape[1]).to(pre2.dtype)
        dx = d_weight = d_bias = None
        if needs_dx:  # first: the kernel reads the pre-activation that d_pre overwrites below
            dx2 = x.new_empty((pre2.shape[0], x.shape[-1]))
            if dx2.numel():
                _launch_dx(dy2, pre2, weight, dx2, ctx.activation)
            dx = dx2.view(x.shape)
        if needs_weight or needs_bias:
            launch_gated_backward(dy2, gate2, up2, gate2, up2, pointwise)
            d_weight = pre2.t().mm(x.reshape(-1, x.shape[-1])) if needs_weight else None
            d_bias = column_sum(pre2) if needs_bias else None
        return dx, d_weight, d_bias, None, None


class _FusedMLPTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation):
        pointwise, gated = ACTIVATIONS[activation]
        k, rows = x.shape[-1], fc1_weight.shape[0]
        n = fc2_weight.shape[1]
        x2 = x.reshape(-1, k)
        hidden = x.new_empty((x2.shape[0], n))
        pre = x.new_empty((x2.shape[0], rows))
        if x2.shape[0] and n:
            _launch_forward(x2, fc1_weight, fc1_bias, pre, hidden, activation, use_tma=False)
        y = torch.nn.functional.linear(hidden, fc2_weight, fc2_bias)
        ctx.save_for_backward(x, pre, fc1_weight, fc2_weight)  # not the activation (fc2's input)
        ctx.activation = activation
        return y.view(*x.shape[:-1], fc2_weight.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x, pre2, fc1_weight, fc2_weight = ctx.saved_tensors
        pointwise, gated = ACTIVATIONS[ctx.activation]
        needs = ctx.needs_input_grad[:5]
        d_out, n = fc2_weight.shape
        dy2 = as_rows(dy, d_out).to(pre2.dtype)
        gate2, up2 = pre_halves(pre2, gated)
        m = pre2.shape[0]
        # fc2's weight gradient from the activation recomputed a block of hidden columns at a time.
        d_fc2_weight = torch.empty_like(fc2_weight)
        for cols in column_blocks(n, 4, 512):
            hidden = pre2.new_empty((m, cols.stop - cols.start))
            launch_gated_forward(gate2[:, cols], None if up2 is None else up2[:, cols], hidden, pointwise)
            torch.mm(dy2.t(), hidden, out=d_fc2_weight[:, cols])
        d_fc2_bias = column_sum(dy2) if needs[4] else None
        if m and n:
            _launch_dpre(dy2, fc2_weight, pre2, ctx.activation)  # pre2 <- d_pre, in place
        dx = pre2.mm(fc1_weight).view(x.shape)
        d_fc1_weight = pre2.t().mm(x.reshape(-1, x.shape[-1]))
        d_fc1_bias = column_sum(pre2) if needs[2] else None
        return dx, d_fc1_weight, d_fc1_bias, d_fc2_weight, d_fc2_bias, None


def linear_act_triton(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "gelu_tanh", *,
                      tma: bool = False) -> Tensor:
    """``blockfuse.linear_act`` on the Triton GEMM (``tma``: descriptor loads in the forward)."""
    return _LinearActTriton.apply(x, weight, bias, activation, tma)


def fused_mlp_triton(x: Tensor, fc1_weight: Tensor, fc1_bias: Optional[Tensor], fc2_weight: Tensor,
                     fc2_bias: Optional[Tensor] = None, activation: str = "gelu_tanh") -> Tensor:
    """``blockfuse.fused_mlp`` (packed or ungated weights) with fc1 and the hidden gradient on Triton GEMMs."""
    return _FusedMLPTriton.apply(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, activation)


# ----------------------------------------------------------------------------------------
# Correctness check (Triton's interpreter on a CPU, or a GPU)
# ----------------------------------------------------------------------------------------


def eager_linear_act(x, weight, bias, activation):
    """PyTorch's composition in the inputs' dtype: the baseline a fused op is measured against."""
    pointwise, gated = ACTIVATIONS[activation]
    pre = torch.nn.functional.linear(x, weight, bias)
    gate, up = pre.chunk(2, dim=-1) if gated else (pre, None)
    out = activate_ref(gate, pointwise)
    return out if up is None else out * up


def eager_mlp(x, w1, b1, w2, b2, activation):
    return torch.nn.functional.linear(eager_linear_act(x, w1, b1, activation), w2, b2)


def _check_close(name, fn, composition, inputs, dtype) -> None:
    """fn's output and gradients against PyTorch's ``composition`` in fp64: at most 2x as wrong as the
    composition in ``dtype`` (plus a small part), as the package's tests ask of its ops."""
    leaves = [None if t is None else t.detach().to(dtype).requires_grad_() for t in inputs]
    exact = [None if t is None else t.detach().double().requires_grad_() for t in inputs]
    low = [None if t is None else t.detach().to(dtype).requires_grad_() for t in inputs]
    outs = [f(*ts) for f, ts in ((fn, leaves), (composition, exact), (composition, low))]
    dy = torch.randn_like(outs[1])
    grads = [torch.autograd.grad(out, [t for t in ts if t is not None], dy.to(out.dtype))
             for out, ts in zip(outs, (leaves, exact, low))]
    # NOTE: Triton's interpreter truncates bf16 instead of rounding it, so there the bound is twice as wide (as
    # in the package's tests, tests/helpers.py).
    factor = 4 if interpreter_enabled() and dtype == torch.bfloat16 else 2
    for label, (mine, want, baseline) in [("out", outs), *((f"grad {i}", g) for i, g in enumerate(zip(*grads)))]:
        error = (mine.double() - want).norm() / want.norm().clamp_min(1e-30)
        bound = factor * (baseline.double() - want).norm() / want.norm().clamp_min(1e-30) + 1e-5
        assert error <= bound, f"{name} {label}: relative error {error:.2e} > {bound:.2e}"


def check(device: str = "cpu") -> None:
    """Forward and gradients of both ops on odd shapes, every activation, bias or not, fp32 and bf16."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=generator) * scale).to(device)

    for activation, (_, gated) in ACTIVATIONS.items():
        for dtype, bias, tma in ((torch.float32, True, False), (torch.bfloat16, False, True)):
            tokens, k, n = 67, 72, 40
            rows = 2 * n if gated else n
            x, w, b = randn(3, tokens // 3 + 1, k), randn(rows, k, scale=k**-0.5), randn(rows, scale=0.1)
            w2, b2 = randn(24, n, scale=n**-0.5), randn(24, scale=0.1)
            b, b2 = (b, b2) if bias else (None, None)
            _check_close(f"linear_act {activation} {dtype} tma={tma}",
                         lambda *a: linear_act_triton(*a, activation, tma=tma),
                         lambda *a: eager_linear_act(*a, activation), (x, w, b), dtype)
            _check_close(f"fused_mlp {activation} {dtype}", lambda *a: fused_mlp_triton(*a, activation),
                         lambda *a: eager_mlp(*a, activation), (x, w, b, w2, b2), dtype)
    print("triton_gemm_epilogue: forward and gradients match the reference")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the kernels against the reference")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.check or args.device == "cpu":
        check(args.device)
    else:
        parser.error("times are taken by benchmarks/linear_act.py (its triton providers); pass --check")


if __name__ == "__main__":
    main()
