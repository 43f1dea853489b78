"""A block's FP8 weight casts in two launches: :func:`cast_weights`.

A tensorwise (or delayed-recipe) FP8 layer casts its weight to e4m3 once a training step (the cast is kept on the
weight until an optimizer step or an in-place write: ``ops/fp8.py``, ``_weight_operands``), and that cast is two
launches (the amax pass, then the cast) and the Python of a launcher. A block has four such layers (QKV, output,
the MLP's two), so eight launches a step; :func:`cast_weights` makes the casts of up to four weights in two launches
(:data:`GROUP`), before the block's first layer runs, and leaves each in the weight's cache, where the layers find
it. The values and the scales are the layers' own casts bit for bit: the same amax (a maximum is exact in any order),
the same :func:`~blockfuse.ops.fp8.scale_of` and the same product with the scale's reciprocal.

NOTE: the amax pass writes one partial maximum a program (no atomics, so no zeroed slot), and each program of the
cast reduces its weight's partials itself (at most :data:`MAX_PARTIALS`: a few KiB from L2) rather than a third
launch doing it once. Each weight is read as one flat contiguous range: a weight's e4m3 cast (N, K) row-major is
the same flat layout.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops import fp8
from blockfuse.ops.fp8 import _quantized, reciprocal, scale_of
from blockfuse.ops.launch import _PLAIN_TENSORS, Kernel, cdiv, next_power_of_2, sm_count, tracing
from blockfuse.runtime import use_triton

GROUP = 4  # weights a launch (the kernels' pointer arguments)
MAX_PARTIALS = 1024  # amax programs a weight at most: the partial maxima each cast program reduces
# (elements a block: amax pass, cast; num_warps)
TILE = {"compiled": (4096, 8192, 8), "interpreted": (4096, 4096, 4)}  # (the interpreter: few programs)
# The amax pass's programs in all: this many a multiprocessor (the interpreter: in all), each taking the same number
# of blocks whatever its weight's size.
AMAX_PROGRAMS_PER_SM = 8
INTERPRETED_AMAX_PROGRAMS = 16
_SCALE_STRIDE = 4  # fp32 elements between two weights' scales: each 0-d scale 16-byte aligned


@triton.jit
def _select(i, a0, a1, a2, a3):
    """``(a0, a1, a2, a3)[i]`` for runtime integers."""
    return tl.where(i == 0, a0, tl.where(i == 1, a1, tl.where(i == 2, a2, a3)))


@triton.jit
def _program_weight(start1, start2, start3, NUM: tl.constexpr):
    """``(pid, i, local)``: this program's id, the weight it works on (the programs of weight i start at start_i,
    weight 0's at 0) and its index among that weight's programs."""
    pid = tl.program_id(0)
    i = (pid >= start1).to(tl.int32) + (pid >= start2).to(tl.int32) + (pid >= start3).to(tl.int32)
    i = tl.minimum(i, NUM - 1)
    return pid, i, pid - _select(i, 0, start1, start2, start3)


@triton.jit
def _range_amax(W, local, n, programs, iters, BLOCK: tl.constexpr):
    """``max |W[j]|`` over the blocks ``local, local + programs, ...`` (``iters`` of them, those past the range masked
    out) of a flat range of ``n`` elements. (The loop's bound is a plain argument: triton 3.6's interpreter cannot
    bound a loop by a value derived from the program id.)"""
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(0, iters):
        offs = (local + it * programs).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc = tl.maximum(acc, tl.abs(tl.load(W + offs, mask=offs < n, other=0.0).to(tl.float32)))
    return tl.max(acc, axis=0)


@triton.jit
def _fp8_weights_amax_kernel(
    W0, W1, W2, W3,  # the weights, contiguous, one dtype (W1..W3 unused past NUM: any tensor)
    PARTIAL,  # (programs,) fp32: each program's max |w| of its weight's blocks
    n0, n1, n2, n3,  # the weights' element counts
    start1, start2, start3,  # the first program of weights 1..3 (weight 0's is 0)
    programs0, programs1, programs2, programs3,  # the programs of each weight
    iters,  # blocks a program at most (over every weight)
    NUM: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid, i, local = _program_weight(start1, start2, start3, NUM)
    n = _select(i, n0, n1, n2, n3)
    programs = _select(i, programs0, programs1, programs2, programs3)
    if i == 0:
        amax = _range_amax(W0, local, n, programs, iters, BLOCK)
    elif i == 1:
        amax = _range_amax(W1, local, n, programs, iters, BLOCK)
    elif i == 2:
        amax = _range_amax(W2, local, n, programs, iters, BLOCK)
    else:
        amax = _range_amax(W3, local, n, programs, iters, BLOCK)
    tl.store(PARTIAL + pid, amax)


@triton.jit
def _fp8_weights_cast_kernel(
    W0, W1, W2, W3,  # as _fp8_weights_amax_kernel
    Q0, Q1, Q2, Q3,  # e4m3 outputs, each shaped and laid out as its weight
    PARTIAL,  # the amax pass's partial maxima
    SCALES,  # (NUM, SCALE_STRIDE) fp32: weight i's scale at SCALES[i, 0]
    n0, n1, n2, n3,
    start1, start2, start3,  # the first cast program of weights 1..3
    partial0, partial1, partial2, partial3,  # the first partial of each weight (its amax programs' first)
    partials0, partials1, partials2, partials3,  # the partials of each weight
    NUM: tl.constexpr,
    BLOCK: tl.constexpr,
    MAX_P: tl.constexpr,  # MAX_PARTIALS rounded up to a power of two
    SCALE_STRIDE: tl.constexpr,
    FP8_MAX: tl.constexpr,
):
    _, i, block = _program_weight(start1, start2, start3, NUM)
    n = _select(i, n0, n1, n2, n3)
    first = _select(i, partial0, partial1, partial2, partial3)
    count = _select(i, partials0, partials1, partials2, partials3)
    offs = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # (the weight's block loaded before the partials are reduced: neither waits for the other)
    if i == 0:
        x = tl.load(W0 + offs, mask=mask, other=0.0)
    elif i == 1:
        x = tl.load(W1 + offs, mask=mask, other=0.0)
    elif i == 2:
        x = tl.load(W2 + offs, mask=mask, other=0.0)
    else:
        x = tl.load(W3 + offs, mask=mask, other=0.0)
    slots = tl.arange(0, MAX_P)
    amax = tl.max(tl.load(PARTIAL + first + slots, mask=slots < count, other=0.0), axis=0)
    scale = scale_of(amax, FP8_MAX)
    inverse = reciprocal(scale)
    if i == 0:
        tl.store(Q0 + offs, _quantized(x.to(tl.float32), inverse, Q0, False), mask=mask)
    elif i == 1:
        tl.store(Q1 + offs, _quantized(x.to(tl.float32), inverse, Q1, False), mask=mask)
    elif i == 2:
        tl.store(Q2 + offs, _quantized(x.to(tl.float32), inverse, Q2, False), mask=mask)
    else:
        tl.store(Q3 + offs, _quantized(x.to(tl.float32), inverse, Q3, False), mask=mask)
    if block == 0:
        tl.store(SCALES + i * SCALE_STRIDE, scale)


_amax_kernel = Kernel(_fp8_weights_amax_kernel)
_cast_kernel = Kernel(_fp8_weights_cast_kernel)


def _pad(values: list, fill) -> list:
    return values + [fill] * (GROUP - len(values))


def _starts(counts: list[int]) -> list[int]:
    """The first program of weights 1..GROUP-1 (past the last weight: the grid's end)."""
    starts, total = [], 0
    for count in _pad(counts, 0)[:-1]:
        total += count
        starts.append(total)
    return starts


def amax_iterations(blocks: list[int], device: torch.device) -> int:
    """Blocks an amax program takes, the same for every weight of a launch (``blocks``: each weight's).

    NOTE: a fixed number of programs a weight (256 at first) left the largest weight's programs running alone at the
    end: a Llama-3-8B block's casts (its gate|up weight 7x the output projection's) ran at 0.80 of a copy where
    casting weight by weight ran at 0.89 (H200, benchmarks/fp8_weight_casts.py). Programs as long as each other,
    AMAX_PROGRAMS_PER_SM of them a multiprocessor in all, and no weight with more than MAX_PARTIALS."""
    target = (AMAX_PROGRAMS_PER_SM * sm_count(device)) if device.type == "cuda" else INTERPRETED_AMAX_PROGRAMS
    return max(cdiv(sum(blocks), target), *(cdiv(b, MAX_PARTIALS) for b in blocks))


def _launch(weights: list[Tensor]) -> list[tuple[Tensor, Tensor]]:
    """The e4m3 casts ``(w_q, w_s)`` of up to GROUP contiguous, non-empty weights of one dtype and device."""
    mode = "compiled" if weights[0].is_cuda else "interpreted"
    amax_block, cast_block, num_warps = TILE[mode]
    sizes = [w.numel() for w in weights]
    blocks = [cdiv(n, amax_block) for n in sizes]
    iters = amax_iterations(blocks, weights[0].device)
    amax_programs = [cdiv(b, iters) for b in blocks]
    cast_programs = [cdiv(n, cast_block) for n in sizes]
    amax_starts = _starts(amax_programs)
    partial = weights[0].new_empty((sum(amax_programs),), dtype=torch.float32)
    scales = weights[0].new_empty((len(weights), _SCALE_STRIDE), dtype=torch.float32)
    outputs = [torch.empty_like(w, dtype=torch.float8_e4m3fn) for w in weights]
    padded_w, padded_q = _pad(weights, weights[0]), _pad(outputs, outputs[0])
    padded_n = _pad(sizes, 0)
    _amax_kernel((sum(amax_programs),), *padded_w, partial, *padded_n, *amax_starts,
                 *_pad(amax_programs, 1), iters, NUM=len(weights), BLOCK=amax_block, num_warps=num_warps)
    _cast_kernel((sum(cast_programs),), *padded_w, *padded_q, partial, scales, *padded_n, *_starts(cast_programs),
                 0, *amax_starts, *_pad(amax_programs, 0), NUM=len(weights), BLOCK=cast_block,
                 MAX_P=next_power_of_2(MAX_PARTIALS), SCALE_STRIDE=_SCALE_STRIDE,
                 FP8_MAX=fp8.FP8_MAX[torch.float8_e4m3fn], num_warps=num_warps)
    return list(zip(outputs, scales[:, 0].unbind(0)))


def _groupable(weight: Tensor) -> bool:
    return (weight.__class__ in _PLAIN_TENSORS and weight.dtype in fp8._HIGH_PRECISION
            and weight.numel() > 0 and weight.is_contiguous() and not weight.is_inference() and use_triton(weight))


def cast_weights(weights: Sequence[Optional[Tensor]]) -> int:
    """Makes the tensorwise e4m3 casts of ``weights`` (the forward GEMMs' weight operands of FP8 layers that keep
    their casts: ``weight_cache=True``, recipe "tensorwise" or "delayed") whose kept cast is missing or stale, GROUP
    weights a pair of launches, and keeps each where the layer's own call finds it. Returns how many were cast.

    Eager only (nothing happens while anything traces, where the layers cast in the graph); weights that are not
    plain contiguous tensors on a device the kernels run on (a DTensor of FSDP2 or tensor parallelism, a CPU
    tensor without the interpreter, an inference tensor, whose casts are not kept) and None are skipped: their
    layers cast them as before."""
    if torch.compiler.is_compiling() or tracing():
        return 0
    stale: dict = {}
    for weight in weights:
        if weight is None or not _groupable(weight):
            continue
        key = fp8.weight_cache_key(weight, False)
        entry = getattr(weight, fp8._CACHE_ATTRIBUTE, None)
        if entry is not None and entry[0] == key:
            continue
        setattr(weight, fp8._CACHE_ATTRIBUTE, None)  # the stale cast goes before the new one is made
        stale.setdefault((weight.device, weight.dtype), []).append((weight, key))
    cast = 0
    for group in stale.values():
        for begin in range(0, len(group), GROUP):
            chunk = group[begin:begin + GROUP]
            for (weight, key), (w_q, w_s) in zip(chunk, _launch([w.detach() for w, _ in chunk])):
                setattr(weight, fp8._CACHE_ATTRIBUTE, (key, w_q, w_s))
            cast += len(chunk)
    return cast
