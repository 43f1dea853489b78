"""A strided view's rows copied into a contiguous tensor at the copy bandwidth: ``copy_rows(t)``.

The fused attention takes v out of the packed QKV GEMM's output as a view whose rows are strided (each row a
slice of a wider row) and copies it, so attention's saved v does not keep the whole QKV output alive
(``models/fused.py``). ``Tensor.contiguous()`` runs such a copy through PyTorch's general strided-copy kernel:
on an H200 it moved te-4layer's v ((8, 2048, 16, 128) bf16, rows 6144 wide) at about a third of the copy
bandwidth (0.33 ms for four layers; ``benchmarks/results/fp8/4-bias-2026-11-27-h200/``). Here each program
copies a tile of whole rows with vector loads and stores.

No autograd here: the gradient of a copy is the incoming gradient itself, and the one caller (the rotary
Function, which copies v beside rotating q and k) passes it through, so the copy adds no autograd node: as a
Function of its own it added an autograd node a layer (an empty one costs these hosts 69-99 us fwd + bwd,
benchmarks/NOTES.md, "The op path"; this one's cost was not timed alone), and te-4layer's bf16 fused step measured
0.7-1.9% slower with it in both rounds of one H200 call (within that host's spread, but one way) for the 0.2 ms of
GPU time it saved over four layers.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.launch import Kernel, cdiv, launcher_op, next_power_of_2, tracing
from blockfuse.runtime import use_triton

# Elements a program copies (16 KiB of bf16) and a warp for every 1024 of them; the column block is the row
# width's power of two up to MAX_BLOCK_N. NOTE: the sizes of the other elementwise passes (gated.py,
# bias_dropout_add.py), which run at the copy bandwidth at these sizes on an H200.
TILE_ELEMENTS = 8192
ELEMENTS_PER_WARP = 1024
MAX_BLOCK_N = 1024


@triton.jit
def _copy_rows_kernel(
    X,  # (M, N) source, rows of stride stride_x, unit column stride
    Y,  # (M, N) destination, rows of stride stride_y, unit column stride
    stride_x, stride_y, M, N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask)
    tl.store(Y + rows64 * stride_y + cols[None, :], x, mask=mask)


_kernel = Kernel(_copy_rows_kernel)


def launch_copy_rows(x: Tensor, y: Tensor) -> None:
    """``y[:] = x`` for (M, N) ``x`` and ``y``, each with a unit column stride and any row stride. For launchers
    and eager backwards that write into a slice of a buffer of their own (``ops/rotary.py``'s packed QKV
    gradient): traced by torch.compile, a kernel writing into a view becomes scatter copies (ops/launch.py)."""
    m, n = x.shape
    block_n = min(next_power_of_2(n), MAX_BLOCK_N)
    block_m = max(1, min(TILE_ELEMENTS // block_n, next_power_of_2(m)))
    if m > 0 and n > 0:
        _kernel((cdiv(m, block_m), cdiv(n, block_n)), x, y, x.stride(0), y.stride(0), m, n, BLOCK_M=block_m,
                BLOCK_N=block_n, num_warps=max(1, min(8, block_m * block_n // ELEMENTS_PER_WARP)))


@launcher_op("copy_rows")
def _copy_rows(x: Tensor) -> Tensor:
    """A contiguous copy of the (M, N) ``x`` (unit column stride, any row stride)."""
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    launch_copy_rows(x, y)
    return y


def _rows_of(t: Tensor) -> Optional[tuple[tuple[int, int], int]]:
    """``((M, N), row_stride)``: ``t`` read as M rows of N elements, N its trailing dimensions' elements, when
    those are packed (unit last stride, each dimension's stride the next one's extent times its stride) and the
    leading dimensions step by whole rows of one stride (dimensions of extent 1 aside). None otherwise."""
    dims = [(size, stride) for size, stride in zip(t.shape, t.stride()) if size != 1]
    if len(dims) < 2 or dims[-1][1] != 1:
        return None
    n, lead = dims[-1][0], len(dims) - 1  # the row: the dimensions packed behind the last one
    while lead > 0 and dims[lead - 1][1] == n:
        n *= dims[lead - 1][0]
        lead -= 1
    if lead == 0:
        return None  # packed throughout: contiguous
    m, row_stride = dims[lead - 1]
    for d in range(lead - 2, -1, -1):  # the leading dimensions: each steps by the next one's extent of rows
        if dims[d][1] != dims[d + 1][0] * dims[d + 1][1]:
            return None
        m *= dims[d][0]
    return (m, n), row_stride


def copy_rows(t: Tensor) -> Tensor:
    """``t.contiguous()`` outside autograd (the caller's Function carries the gradient; see
    ``ops/rotary.py``'s v): blockfuse's kernel where the kernels run and ``t``'s rows have one stride,
    ``Tensor.contiguous`` otherwise. A contiguous ``t`` is returned as it is (as ``Tensor.contiguous`` does)."""
    if t.is_contiguous():
        return t
    if torch.compiler.is_compiling() or tracing():  # (Dynamo reads the first: it cannot trace the second)
        # NOTE: traced, Inductor makes this copy as one of its own pointwise kernels, fused where it can. The
        # kernel's path must stay out: there ``t.as_strided`` of a view of a computed buffer read the wrong
        # memory (an H200, torch 2.11: the fused reordered and standard blocks compiled with Inductor had
        # output errors of 0.08-0.80 against fp32, tests/models/test_blocks.py).
        return t.contiguous()
    rows = _rows_of(t) if use_triton(t) else None
    if rows is None:
        return t.contiguous()
    shape, row_stride = rows
    return _copy_rows(t.as_strided(shape, (row_stride, 1))).view(t.shape)
