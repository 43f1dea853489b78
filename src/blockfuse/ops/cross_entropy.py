"""The LM head fused with its cross-entropy: ``cross_entropy(hidden @ weight.T + bias, target)`` without
ever keeping the (tokens, vocab) logits.

The tokens go through in chunks. For each chunk one cuBLAS GEMM makes its logits into a reused
(chunk, vocab) buffer; one Triton program per row then reads the row twice: an online max / sum of
exponentials gives the fp32 log-sum-exp and the loss, and (when gradients are wanted) the second pass
overwrites the logits with their gradient ``softmax - one_hot`` (label smoothing, softcap and z-loss
folded in). Two more GEMMs turn that gradient into the chunk's rows of ``d hidden`` and its share of
``d weight``; the buffer is then reused by the next chunk.

* reduction ``"mean"`` / ``"sum"``: the loss is a scalar, so the gradients are made in the forward for an
  upstream gradient of 1 and the backward only scales them (three GEMMs in all, the floor);
* reduction ``"none"``: each token's upstream gradient is only known in the backward, which makes the
  logits again (four GEMMs in all);
* without autograd: one GEMM per chunk and the loss.

Math of one row (``c`` the logits, capped ``c = s tanh(z / s)`` with a softcap ``s``; ``V`` classes;
label smoothing ``e``; z-loss ``k``; ``lse = log sum exp c``)::

    loss  = (1 - e) (lse - c[target]) + e (lse - mean(c)) + k lse^2           (0 for an ignored target)
    dloss / dc_j = softmax(c)_j (1 + 2 k lse) - e / V - (1 - e) [j == target]
    dc / dz = 1 - (c / s)^2

These are ``torch.nn.functional.cross_entropy``'s loss and label smoothing on the same logits, plus
PaLM's z-loss. The file reads top to bottom: the row kernel; the chunk launchers (opaque ops
``blockfuse::linear_cross_entropy_fwd`` / ``_bwd``, see ``ops/launch.py``); the one autograd Function;
the public functional; the reference.
"""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass
from typing import Optional, Union

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.activation import column_sum
from blockfuse.ops.launch import Kernel, cdiv, empty_if_none, launcher_op, next_power_of_2
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import use_triton

REDUCTIONS = ("mean", "sum", "none")
# Chunks are a multiple of this many tokens (a GEMM tile's rows) and never fewer.
CHUNK_ALIGN = 128
# NOTE: chunk_size="low-memory" trades speed for the least memory that still runs the GEMMs on whole tiles: a chunk's
# logits no larger than the hidden states (tokens x width), a power of two of at least Tuning.low_memory_min_chunk
# tokens. That is Liger-Kernel's fused loss's memory (its chunk: next_power_of_2(cdiv(tokens, cdiv(vocab, width))), the
# same at the three shapes, 256 / 1024 / 64 tokens; rounded up, Liger's holds up to twice as much elsewhere: 256
# tokens where this takes 128 at [8192, 4096, 151936]); its cost is the weight gradient's read and write a chunk (the
# NOTE above Tuning.min_chunk_bytes). Measured beside Liger and Cut Cross-Entropy:
# benchmarks/results/cross-entropy/low-memory-2026-12-03-h200/.
LOW_MEMORY = "low-memory"


@dataclass(frozen=True)
class Tuning:
    """The launch rules' tuning: the tokens a chunk (``default_chunk_size``, ``low_memory_plan``), the row kernel's
    block of classes (``launch_rows``) and the gradients' scale's block (``scale_gradients``)."""

    # NOTE: how many tokens a chunk takes is a trade of memory for speed. Each chunk's GEMM adds its share
    # into the weight gradient, reading and writing all of it: 4 V d bytes (bf16) against the chunk's three
    # GEMMs' 6 chunk V d FLOPs, i.e. (2/3) (FLOP/s / bytes/s) / chunk of extra time, 95 / chunk on an H200
    # (687 TFLOP/s measured, 4.8 TB/s). Measured there at [8192 tokens, d 4096, vocab 128256], bf16,
    # forward + backward, as a fraction of the three GEMMs' own time (benchmarks/cross_entropy_chunks.py):
    # chunk 256 (64 MiB of logits, Liger-Kernel's memory) 0.67, 512 0.80, 1024 (250 MiB) 0.86, 2048 (500 MiB)
    # 0.89. The default keeps the chunk's logits within a quarter of the op's inputs (hidden and weight),
    # and never under 64 MiB: the op then holds at most 1.25x its inputs and gradients.
    min_chunk_bytes: int = 64 << 20
    chunk_fraction_of_inputs: float = 0.25
    # The low-memory chunk's floor, in tokens (the NOTE above LOW_MEMORY).
    low_memory_min_chunk: int = 16
    # NOTE: at Liger's memory the token-chunked loop pays the weight gradient's read and write a chunk, (2/3) (FLOP/s /
    # bytes/s) / chunk of the GEMMs' time (the NOTE above min_chunk_bytes), and below a few hundred tokens a chunk its
    # two weight GEMMs read the whole weight for few rows (memory-bound). The two-pass loop (_two_pass_loop) instead
    # makes the logits twice, block of classes by block: the first pass for the rows' log-sum-exp, the second for the
    # gradients, which then go straight into that block of d weight (a GEMM over a quarter of the tokens) and into an
    # fp32 d hidden of the chunk's rows: one GEMM more, a third of the floor. By that arithmetic the two meet at a chunk
    # of 2 x the card's FLOPs a byte (~286 tokens on an H200: 687 TFLOP/s measured over 4.8 TB/s). Measured on an H200
    # (torch 2.11, bf16, cross-entropy/low-memory-2026-12-03-h200/4-two-pass/): [4096, 4096, 262144], whose low-memory
    # chunk is 64 tokens, 180.8 ms one pass against 61.3 two passes (2.9x; Liger 180.0, Cut Cross-Entropy 157.5, all at
    # 32 MiB); [8192, 4096, 128256] at 256 tokens 53.7-56.2 one pass against 55.6-58.7 two passes in two calls, though a
    # profiled two-pass step's kernels took 48.8 ms (the GPU busy 48.8 of its 50.7: not its launches; 5-plan-trace/), a
    # one-pass step's 52.0 in another call (1-rule/): perhaps a third more tensor work in a timed loop at the card's
    # power limit, not shown. So the two-pass loop takes chunks of fewer than low_memory_two_pass_below tokens (the
    # arithmetic's crossover moved to what was measured), and only with at least 4 x CHUNK_ALIGN tokens.
    # low_memory_two_pass: None follows that rule, True / False force a loop (a benchmark's knob).
    low_memory_two_pass_below: int = 256
    low_memory_two_pass: Optional[bool] = None
    # The two-pass loop's chunk: at most this fraction of the tokens (a power of two), its fp32 d hidden rows at most
    # half of the memory, the rest of it the logits of a block of classes.
    two_pass_chunk_fraction: int = 4
    two_pass_spare_bytes: int = 1 << 20
    # The row kernel walks the vocabulary this many columns at a time (at most), 8 warps.
    max_block_v: int = 4096
    # Elements a program of the gradients' scale (_scale_kernel).
    scale_block: int = 4096


TUNING = Tuning()


# ----------------------------------------------------------------------------------------
# Triton kernel
# ----------------------------------------------------------------------------------------


@triton.jit
def _tanh(x):
    """tanh without libdevice, exact to fp32 rounding for either sign: sign(x) (1 - e) / (1 + e),
    e = exp(-2 |x|)."""
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _cross_entropy_rows_kernel(
    Z,  # (rows, V) one chunk's logits (GEMM output, hidden's dtype); their gradient overwrites them (WRITE_GRAD)
    TARGET,  # (rows,) integer target classes (of the whole vocabulary)
    LOSS,  # (rows,) fp32 per-row loss, or its terms linear in the logits when PARTIAL (written when WRITE_LOSS)
    LSE,  # (rows,) fp32 log-sum-exp of the (capped) logits: written, or read when LSE_GIVEN
    SCALE,  # fp32 gradient scale: one value (1 / count for "mean"), or (rows,) upstream gradients (SCALE_PER_ROW)
    stride_z, V, V_MEM, vocab_start, vocab_total, ignore_index, smoothing, softcap, z_loss,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    HAS_Z_LOSS: tl.constexpr,
    LSE_GIVEN: tl.constexpr,
    WRITE_LOSS: tl.constexpr,
    PARTIAL: tl.constexpr,
    WRITE_GRAD: tl.constexpr,
    SCALE_PER_ROW: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """One row of logits per program. Z holds the classes [vocab_start, vocab_start + V) of a vocabulary of
    vocab_total (all of it unless the vocabulary is sharded across devices). V_MEM >= V: the columns of a row that
    may be read and written (a padded buffer's, see logits_buffer), so that loads and stores are masked at a
    multiple of 16 and go out as vectors; columns past V are masked off in the arithmetic.

    loss = lse + z_loss lse^2 + A, with A = -(1 - e) c[target] - e sum(c) / vocab_total the terms linear in
    the logits. PARTIAL (a shard): LOSS gets this shard's share of A (c[target] only where the target is
    in the shard) and LSE this shard's log-sum-exp; the caller combines the shards'. Otherwise LOSS gets the
    whole loss."""
    # NOTE: Inductor may pass float scalars as fp64: every one is cast to fp32 first.
    smoothing = tl.cast(smoothing, tl.float32)
    softcap = tl.cast(softcap, tl.float32)
    z_loss = tl.cast(z_loss, tl.float32)
    row = tl.program_id(0).to(tl.int64)
    z_row = Z + row * stride_z
    cols = tl.arange(0, BLOCK_V)
    target = tl.load(TARGET + row).to(tl.int64)
    ignored = target == ignore_index
    # An out-of-range target (not the ignore index) gives a NaN loss and gradient, never a wrong number.
    bad = ((target < 0) | (target >= vocab_total)) & ~ignored
    local = target - vocab_start  # the target's column in this block of classes
    here = (local >= 0) & (local < V) & ~ignored & ~bad
    safe_local = tl.where(here, local, 0)

    if LSE_GIVEN:
        lse = tl.load(LSE + row)
        total = 0.0
    else:
        # Online max and sum of exponentials, one running pair per lane; lanes combined at the end.
        m = tl.full([BLOCK_V], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_V], tl.float32)
        sums = tl.zeros([BLOCK_V], tl.float32)
        for v0 in range(0, V, BLOCK_V):
            mask = v0 + cols < V
            c = tl.load(z_row + v0 + cols, mask=v0 + cols < V_MEM, other=float("-inf")).to(tl.float32)
            if HAS_SOFTCAP:
                c = softcap * _tanh(c / softcap)
            c = tl.where(mask, c, float("-inf"))
            m_new = tl.maximum(m, c)
            # A lane that has only seen masked columns keeps m = -inf (and s = 0): no exp(-inf - -inf).
            shift = tl.where(m_new > float("-inf"), m_new, 0.0)
            s = s * tl.exp(m - shift) + tl.exp(c - shift)
            m = m_new
            if HAS_SMOOTHING:
                sums += tl.where(mask, c, 0.0)
        row_max = tl.max(m, axis=0)
        lse = row_max + tl.log(tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0))
        total = tl.sum(sums, axis=0)

    if WRITE_LOSS:
        c_target = tl.load(z_row + safe_local).to(tl.float32)
        if HAS_SOFTCAP:
            c_target = softcap * _tanh(c_target / softcap)
        linear = -tl.where(here, c_target, 0.0)
        if HAS_SMOOTHING:
            linear = (1.0 - smoothing) * linear - smoothing * total / vocab_total
        if PARTIAL:
            loss = linear
        else:
            loss = lse + linear
            if HAS_Z_LOSS:
                loss += z_loss * lse * lse
        loss = tl.where(ignored, 0.0, loss)
        loss = tl.where(bad, float("nan"), loss)
        tl.store(LOSS + row, loss)
    if not LSE_GIVEN:
        tl.store(LSE + row, tl.where(bad, float("nan"), lse))

    if WRITE_GRAD:
        if SCALE_PER_ROW:
            scale = tl.load(SCALE + row).to(tl.float32)
        else:
            scale = tl.load(SCALE).to(tl.float32)
        scale = tl.where(ignored, 0.0, scale)
        scale = tl.where(bad, float("nan"), scale)
        softmax_scale = scale
        if HAS_Z_LOSS:
            softmax_scale = scale * (1.0 + 2.0 * z_loss * lse)
        hit = tl.where(here, scale * (1.0 - smoothing), 0.0)
        spread = scale * smoothing / vocab_total
        for v0 in range(0, V, BLOCK_V):
            mask = v0 + cols < V
            mem_mask = v0 + cols < V_MEM
            c = tl.load(z_row + v0 + cols, mask=mem_mask, other=0.0).to(tl.float32)
            if HAS_SOFTCAP:
                th = _tanh(c / softcap)
                c = softcap * th
            g = tl.exp(c - lse) * softmax_scale - tl.where(v0 + cols == safe_local, hit, 0.0)
            if HAS_SMOOTHING:
                g -= spread
            if HAS_SOFTCAP:
                g *= 1.0 - th * th
            tl.store(z_row + v0 + cols, tl.where(mask, g, 0.0).to(Z.dtype.element_ty), mask=mem_mask)


@triton.jit
def _scale_kernel(
    X,  # (N,) a gradient, contiguous: multiplied by G's value in place
    G,  # () fp32 the loss's upstream gradient
    N,
    BLOCK: tl.constexpr,
):
    # NOTE: an upstream gradient of exactly 1 (loss.backward()) touches no memory: one scalar load a
    # program, where a multiply would read and write the whole (vocab, d) weight gradient once more.
    g = tl.load(G).to(tl.float32)
    if g != 1.0:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(X + offs, mask=mask)
        tl.store(X + offs, (x.to(tl.float32) * g).to(X.dtype.element_ty), mask=mask)


_rows_kernel = Kernel(_cross_entropy_rows_kernel)
_scale = Kernel(_scale_kernel)


# ----------------------------------------------------------------------------------------
# Launchers: the chunks, registered as opaque ops without autograd
# ----------------------------------------------------------------------------------------


def default_chunk_size(tokens: int, width: int, vocab: int, itemsize: int) -> int:
    """Tokens per chunk: as many as keep the (chunk, vocab) logits within a quarter of the inputs' bytes
    (tokens x width hidden states, vocab x width weight) or 64 MiB if more, a multiple of CHUNK_ALIGN (at
    least one such block), and no more than the tokens."""
    tuning = TUNING
    budget = max(tuning.min_chunk_bytes, int(tuning.chunk_fraction_of_inputs * (tokens + vocab) * width * itemsize))
    rows = budget // max(1, vocab * itemsize)
    rows = max(CHUNK_ALIGN, rows // CHUNK_ALIGN * CHUNK_ALIGN)
    return max(1, min(tokens, rows))


def low_memory_chunk_size(tokens: int, width: int, vocab: int) -> int:
    """Tokens per chunk for ``chunk_size="low-memory"`` (the NOTE above LOW_MEMORY): the largest power of two whose
    (chunk, vocab) logits take no more elements than the (tokens, width) hidden states, at least
    ``Tuning.low_memory_min_chunk``, and no more than the tokens."""
    rows = max(TUNING.low_memory_min_chunk, (tokens * width) // max(1, vocab))
    return max(1, min(tokens, 1 << (rows.bit_length() - 1)))


def low_memory_plan(tokens: int, width: int, vocab: int, itemsize: int) -> tuple[int, int]:
    """``(tokens a chunk, classes a block)`` for ``chunk_size="low-memory"``: ``(low_memory_chunk_size, 0)``, the
    token-chunked loop, unless the rule above ``Tuning.low_memory_two_pass_below`` picks the two-pass loop. Its memory
    is the token-chunked loop's logits: chunks of a power of two tokens, at most ``tokens / two_pass_chunk_fraction``,
    whose fp32 d hidden takes at most half of it, and blocks of classes (a multiple of CHUNK_ALIGN) whose logits
    take the rest, less ``two_pass_spare_bytes`` for the rows' statistics; at least CHUNK_ALIGN tokens a chunk."""
    rows = low_memory_chunk_size(tokens, width, vocab)
    tuning = TUNING
    wanted = tuning.low_memory_two_pass
    if wanted is None:
        wanted = rows < tuning.low_memory_two_pass_below
    memory = rows * vocab * itemsize
    most = min(tokens // tuning.two_pass_chunk_fraction, memory // (2 * width * 4))
    if not wanted or most < CHUNK_ALIGN:
        return rows, 0
    chunk = 1 << (most.bit_length() - 1)
    budget = memory - chunk * width * 4 - tuning.two_pass_spare_bytes
    block = max(CHUNK_ALIGN, budget // (chunk * itemsize) // CHUNK_ALIGN * CHUNK_ALIGN)
    return (rows, 0) if block >= vocab else (chunk, block)


def chunk_plan(chunk_size, tokens: int, width: int, vocab: int, itemsize: int) -> tuple[int, int]:
    """``(tokens a chunk, classes a block (0: the whole vocabulary))`` for the ``chunk_size`` argument (checked)."""
    if isinstance(chunk_size, str):  # LOW_MEMORY (the only string _check_args lets through)
        return low_memory_plan(tokens, width, vocab, itemsize)
    return chunk_rows(chunk_size, tokens, width, vocab, itemsize), 0


def chunk_rows(chunk_size, tokens: int, width: int, vocab: int, itemsize: int) -> int:
    """Tokens per chunk for the ``chunk_size`` argument (checked): an int as given, None the default rule,
    "low-memory" its rule."""
    if chunk_size is None:
        return default_chunk_size(tokens, width, vocab, itemsize)
    if isinstance(chunk_size, str):  # LOW_MEMORY (the only string _check_args lets through)
        return low_memory_chunk_size(tokens, width, vocab)
    return int(chunk_size)


def launch_rows(z: Tensor, target: Tensor, loss: Optional[Tensor], lse: Tensor, scale: Optional[Tensor],
                 ignore_index: int, smoothing: float, softcap: Optional[float], z_loss: float, *,
                 lse_given: bool, write_grad: bool, scale_per_row: bool, shard: Optional[tuple[int, int]] = None,
                 partial: bool = False, padded: bool = False) -> None:
    """``shard``: (first class, classes of the whole vocabulary) when ``z`` holds a block of the vocabulary.
    ``padded``: z's rows come from :func:`logits_buffer` (their columns up to the row stride may be written)."""
    rows, vocab = z.shape
    if rows == 0:
        return
    vocab_start, vocab_total = shard if shard is not None else (0, vocab)
    block_v = min(next_power_of_2(vocab), TUNING.max_block_v)
    _rows_kernel(
        (rows,),
        z, target, loss, lse, scale,
        z.stride(0), vocab, z.stride(0) if padded else vocab, vocab_start, vocab_total, ignore_index, smoothing,
        1.0 if softcap is None else softcap, z_loss,
        HAS_SOFTCAP=softcap is not None, HAS_SMOOTHING=smoothing > 0, HAS_Z_LOSS=z_loss > 0,
        LSE_GIVEN=lse_given, WRITE_LOSS=loss is not None, PARTIAL=partial, WRITE_GRAD=write_grad,
        SCALE_PER_ROW=scale_per_row, BLOCK_V=block_v,
        num_warps=8 if block_v >= 2048 else 4,
    )


# A chunk's logits buffer has rows of a multiple of this many elements (see logits_buffer).
LOGITS_ROW_MULTIPLE = 16


def logits_buffer(like: Tensor, rows: int, vocab: int) -> Tensor:
    """A (rows, vocab) buffer for a chunk's logits, in ``like``'s dtype and device, whose rows start every
    ``round_up(vocab, 16)`` elements (a view of a padded allocation; launch_rows with ``padded=True``).

    NOTE: at a vocabulary that is not a multiple of 16 (GPT-2's 50257, Llama's 32001 with an added token) rows of
    exactly ``vocab`` elements start at addresses and strides the compiler knows nothing about, and the row
    kernel's loads and stores went out 2 bytes at a time; padded, it reads and writes 16-byte vectors, and the
    GEMMs writing and reading the logits get an aligned leading dimension (cuBLAS takes a row stride past the
    width as it is: no copy)."""
    padded = -(-vocab // LOGITS_ROW_MULTIPLE) * LOGITS_ROW_MULTIPLE
    buffer = like.new_empty((rows, padded))
    return buffer if padded == vocab else buffer[:, :vocab]


# The GEMMs' vocabulary side is split at a multiple of this many classes (16 bytes of bf16 / fp16; see vocab_split).
GEMM_VOCAB_MULTIPLE = 8


def vocab_split(vocab: int) -> int:
    """Classes of the GEMMs' aligned part: ``vocab`` rounded down to a multiple of 8 (the rest, at most 7 classes,
    take GEMMs of their own; 0: no aligned part, one GEMM).

    NOTE: cuBLAS runs a GEMM with a side of odd length far below its rate, even with aligned rows: a chunk's GEMMs
    at [1024 tokens, 4096, 50257] took 3.86 / 3.13 / 1.14 ms (logits, d hidden, d weight) against 0.62 / 0.61 /
    0.67 ms split at 50256 (H200, benchmarks/cross_entropy_odd_vocab.py). The op at [8192, 4096, 50257] ran 101 ms
    where 50264 takes 17.6 (torch.compile, whose Inductor pads such GEMMs, 17.1 ms); split, 17.2-17.3 ms
    (benchmarks/results/cross-entropy/odd-vocab/). The 1-7 classes left over cost a GEMV each."""
    return vocab // GEMM_VOCAB_MULTIPLE * GEMM_VOCAB_MULTIPLE


def _parts(vocab: int) -> tuple[slice, ...]:
    """The vocabulary's slices the GEMMs run on (see vocab_split): one, or the aligned part and the rest."""
    main = vocab_split(vocab)
    return (slice(0, vocab),) if main in (0, vocab) else (slice(0, main), slice(main, vocab))


def logits_into(h_rows: Tensor, weight: Tensor, bias: Optional[Tensor], out: Tensor) -> Tensor:
    """``out = h_rows @ weight.T + bias``: a cuBLAS GEMM a part of the vocabulary (see vocab_split); with a bias, one
    GEMM with the bias in its epilogue.

    NOTE: with a bias the vocabulary is not split: on an H200 the aligned part's GEMM with the bias (200 of 203
    classes) made a loss 2.7-7.8x as wrong as PyTorch's (three bias tests of tests/ops/test_cross_entropy.py, the
    same error with the other 3 classes in fp32), where the whole 203 classes' GEMM passed. A bias on an LM head is
    rare; with one, an odd vocabulary's logits GEMM stays slow (the gradients' GEMMs are split)."""
    if bias is not None:
        return torch.addmm(bias, h_rows, weight.t(), out=out)
    for part in _parts(weight.shape[0]):
        torch.mm(h_rows, weight[part].t(), out=out[:, part])
    return out


def _chunks(h2: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, loss: Optional[Tensor],
            lse: Tensor, scale: Optional[Tensor], config: tuple, *, lse_given: bool, scale_per_row: bool,
            grad_hidden: bool, grad_weight: bool, grad_bias: bool, chunk: int, vocab_block: int = 0):
    """The chunk loop both launchers share (``vocab_block``: the two-pass loop's classes a block, 0: the
    token-chunked loop). Returns (d hidden, d weight, d bias), None where not asked."""
    tokens, vocab = h2.shape[0], weight.shape[0]
    write_grad = grad_hidden or grad_weight or grad_bias
    dh = torch.empty_like(h2) if grad_hidden else None  # (tokens, d)
    dw = torch.empty_like(weight, memory_format=torch.contiguous_format) if grad_weight else None  # (V, d)
    db = torch.zeros((vocab,), dtype=torch.float32, device=h2.device) if grad_bias else None
    if tokens == 0:
        if dw is not None:
            dw.zero_()
        return dh, dw, db
    if vocab_block and vocab_block < vocab:
        with full_precision_reductions():
            _two_pass_loop(h2, weight, bias, target, loss, lse, scale, config, dh, dw, db, lse_given=lse_given,
                           scale_per_row=scale_per_row, write_grad=write_grad, chunk=chunk, vocab_block=vocab_block)
        return dh, dw, db
    z_buffer = logits_buffer(h2, min(chunk, tokens), vocab)  # (chunk, V): reused by every chunk
    with full_precision_reductions():
        _chunk_loop(h2, weight, bias, target, loss, lse, scale, config, z_buffer, dh, dw, db, lse_given=lse_given,
                    scale_per_row=scale_per_row, write_grad=write_grad, chunk=chunk)
    return dh, dw, db


_REDUCED_PRECISION_FLAGS = ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction")


@contextlib.contextmanager
def full_precision_reductions():
    """cuBLAS sums split-K partials in fp32 inside this block.

    NOTE: PyTorch lets cuBLAS reduce a bf16 / fp16 GEMM's split-K partials in that dtype by default. A
    chunk's GEMMs have few rows, where cuBLAS splits K: the loss of 16-token chunks came out 3x as wrong as
    PyTorch's whole-logits loss that way, and equal to it with fp32 reductions (H200, torch 2.11); at
    [8192, 4096, 128256] the fp32 reductions cost 1-2% (benchmarks/cross_entropy_chunks.py
    --strict-reduction)."""
    matmul = torch.backends.cuda.matmul
    saved = [(flag, getattr(matmul, flag)) for flag in _REDUCED_PRECISION_FLAGS if hasattr(matmul, flag)]
    for flag, _ in saved:
        setattr(matmul, flag, False)
    try:
        yield
    finally:
        for flag, value in saved:
            setattr(matmul, flag, value)


def _chunk_loop(h2, weight, bias, target, loss, lse, scale, config, z_buffer, dh, dw, db, *, lse_given,
                scale_per_row, write_grad, chunk):
    ignore_index, smoothing, softcap, z_loss = config
    tokens = h2.shape[0]
    for i, start in enumerate(range(0, tokens, chunk)):
        rows = slice(start, min(start + chunk, tokens))
        h_rows = h2[rows]
        z = z_buffer[: h_rows.shape[0]]
        logits_into(h_rows, weight, bias, z)
        launch_rows(z, target[rows], None if loss is None else loss[rows], lse[rows],
                     None if scale is None else (scale[rows] if scale_per_row else scale),
                     ignore_index, smoothing, softcap, z_loss,
                     lse_given=lse_given, write_grad=write_grad, scale_per_row=scale_per_row, padded=True)
        if write_grad:
            add_chunk_gradients(z, h_rows, weight, rows, i == 0, dh, dw, db)


def add_chunk_gradients(z: Tensor, h_rows: Tensor, weight: Tensor, rows: slice, first: bool, dh: Optional[Tensor],
                        dw: Optional[Tensor], db: Optional[Tensor]) -> None:
    """A chunk's share of the gradients from its logits' gradient ``z`` (chunk, V): its rows of d hidden, and
    its sums into d weight and d bias (``first``: the first chunk, which writes rather than adds)."""
    parts = _parts(weight.shape[0])  # (see vocab_split)
    if dh is not None:
        torch.mm(z[:, parts[0]], weight[parts[0]], out=dh[rows])  # straight into the chunk's rows
        for part in parts[1:]:
            dh[rows].addmm_(z[:, part], weight[part])
    if dw is not None:
        # NOTE: accumulated in the weight's dtype (a second (V, d) buffer in fp32 would be twice the
        # weight's memory); cuBLAS sums each chunk's share in fp32 and rounds once per chunk.
        for part in parts:
            if first:
                torch.mm(z[:, part].t(), h_rows, out=dw[part])
            else:
                dw[part].addmm_(z[:, part].t(), h_rows)
    if db is not None:
        db += column_sum(z).float()


def _two_pass_loop(h2, weight, bias, target, loss, lse, scale, config, dh, dw, db, *, lse_given, scale_per_row,
                   write_grad, chunk, vocab_block):
    """The two-pass loop (the NOTE above ``Tuning.low_memory_two_pass_below``): for each chunk of tokens, the logits of
    each block of classes made twice, first for the rows' log-sum-exp and loss (the row kernel's PARTIAL mode, the
    blocks' shares combined as the vocabulary-parallel loss combines its ranks'), then for the gradients: the block's
    rows of d weight (written by the first chunk, added to by the others), d bias, and the chunk's d hidden summed over
    the blocks in fp32 and rounded once."""
    ignore_index, smoothing, softcap, z_loss = config
    tokens, vocab = h2.shape[0], weight.shape[0]
    rows_max = min(chunk, tokens)
    z_buffer = logits_buffer(h2, rows_max, vocab_block)
    # NOTE: each block's views made once, not once a chunk: the loop launches ~6 calls a block and chunk, and a
    # view costs the host a few microseconds
    blocks = [_Block(slice(v, min(v + vocab_block, vocab)), weight, bias, dw, db, z_buffer)
              for v in range(0, vocab, vocab_block)]
    acc = h2.new_empty((rows_max, h2.shape[1]), dtype=torch.float32) if dh is not None else None
    partial = h2.new_empty((2, len(blocks), rows_max), dtype=torch.float32) if not lse_given else None
    for i, start in enumerate(range(0, tokens, chunk)):
        rows = slice(start, min(start + chunk, tokens))
        h_rows, t_rows = h2[rows], target[rows]
        n = h_rows.shape[0]
        whole = n == rows_max
        if not lse_given:
            chunk_partial = partial if whole else partial[:, :, :n]
            for j, block in enumerate(blocks):
                z = block.logits(h_rows, whole)
                launch_rows(z, t_rows, chunk_partial[1, j], chunk_partial[0, j], None, ignore_index, smoothing,
                             softcap, z_loss, lse_given=False, write_grad=False, scale_per_row=False,
                             shard=block.shard, partial=True, padded=True)
            row_lse = torch.logsumexp(chunk_partial[0], dim=0)
            lse[rows] = row_lse
            loss[rows] = combined_loss(row_lse, chunk_partial[1].sum(dim=0), t_rows, ignore_index, z_loss)
        if not write_grad:
            continue
        rows_scale = scale[rows] if scale_per_row else scale
        rows_lse = lse[rows]
        rows_acc = acc if acc is None or whole else acc[:n]
        for j, block in enumerate(blocks):
            z = block.logits(h_rows, whole)
            launch_rows(z, t_rows, None, rows_lse, rows_scale, ignore_index, smoothing, softcap, z_loss,
                         lse_given=True, write_grad=True, scale_per_row=scale_per_row, shard=block.shard,
                         padded=True)
            if rows_acc is not None:
                _add_fp32(rows_acc, z, block.weight, first=j == 0)
            if block.dw is not None:
                if i == 0:
                    torch.mm(z.t(), h_rows, out=block.dw)
                else:
                    block.dw.addmm_(z.t(), h_rows)
            if block.db is not None:
                block.db += column_sum(z).float()
        if rows_acc is not None:
            dh[rows] = rows_acc


def combined_loss(lse: Tensor, linear: Tensor, target: Tensor, ignore_index: int, z_loss: float) -> Tensor:
    """Each row's loss from the whole vocabulary's log-sum-exp and the sum of its blocks' (or ranks') terms linear in
    the logits (the row kernel's PARTIAL outputs): ``lse + linear + z_loss lse^2``, 0 for an ignored target."""
    loss = lse + linear
    if z_loss:
        loss = loss + z_loss * lse * lse
    return torch.where(target == ignore_index, torch.zeros_like(loss), loss)


class _Block:
    """One block of classes of the two-pass loop: its views of the weight, bias, their gradients and the logits
    buffer, made once."""

    def __init__(self, classes: slice, weight: Tensor, bias: Optional[Tensor], dw: Optional[Tensor],
                 db: Optional[Tensor], z_buffer: Tensor):
        self.shard = (classes.start, weight.shape[0])
        self.weight = weight[classes]
        self.bias = None if bias is None else bias[classes]
        self.dw = None if dw is None else dw[classes]
        self.db = None if db is None else db[classes]
        self.z = z_buffer[:, : classes.stop - classes.start]

    def logits(self, h_rows: Tensor, whole: bool) -> Tensor:
        """The logits of ``h_rows`` (``whole``: as many rows as the buffer) for this block, in its buffer's front."""
        return logits_into(h_rows, self.weight, self.bias, self.z if whole else self.z[: h_rows.shape[0]])


def _add_fp32(acc: Tensor, a: Tensor, b: Tensor, *, first: bool) -> None:
    """``acc = a @ b`` (``first``) or ``acc += a @ b``: 16-bit ``a`` and ``b``, fp32 ``acc``, the product's sums
    in fp32 and never rounded to 16 bits (cuBLAS's fp32 output on CUDA; the CPU has no such GEMM: fp32 copies)."""
    if a.dtype == acc.dtype or not acc.is_cuda:
        a, b = a.to(acc.dtype), b.to(acc.dtype)
        if first:
            torch.mm(a, b, out=acc)
        else:
            acc.addmm_(a, b)
    elif first:
        torch.mm(a, b, out_dtype=acc.dtype, out=acc)
    else:
        torch.addmm(acc, a, b, out_dtype=acc.dtype, out=acc)


def _forward_fake(h2, weight, bias, target, scale, ignore_index, smoothing, softcap, z_loss, grad_hidden,
                  grad_weight, grad_bias, chunk, vocab_block):
    tokens = h2.shape[0]
    stats = h2.new_empty((tokens,), dtype=torch.float32)
    return (stats, torch.empty_like(stats), h2.new_empty(h2.shape if grad_hidden else (0,)),
            weight.new_empty(weight.shape if grad_weight else (0,)),
            h2.new_empty((weight.shape[0] if grad_bias else 0,), dtype=torch.float32))


@launcher_op("linear_cross_entropy_fwd", fake=_forward_fake)
def _forward(h2: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, scale: Optional[Tensor],
             ignore_index: int, smoothing: float, softcap: Optional[float], z_loss: float, grad_hidden: bool,
             grad_weight: bool, grad_bias: bool, chunk: int, vocab_block: int
             ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per-row loss and log-sum-exp (fp32) of the tokens ``h2`` (tokens, d), and the gradients asked for
    an upstream gradient of ``scale`` (a 0-d fp32 tensor) on every row's loss: (loss, lse, d hidden,
    d weight, d bias (fp32)), an absent gradient as an empty tensor.

    NOTE: opaque under torch.compile (``launcher_op(fake=...)``): its GEMMs and kernels write row blocks
    of its buffers, which traced would become Inductor's scatter copies (see ops/mlp.py)."""
    tokens = h2.shape[0]
    loss = h2.new_empty((tokens,), dtype=torch.float32)
    lse = torch.empty_like(loss)
    dh, dw, db = _chunks(h2, weight, bias, target, loss, lse, scale, (ignore_index, smoothing, softcap, z_loss),
                         lse_given=False, scale_per_row=False, grad_hidden=grad_hidden, grad_weight=grad_weight,
                         grad_bias=grad_bias, chunk=chunk, vocab_block=vocab_block)
    return loss, lse, empty_if_none(dh, h2), empty_if_none(dw, weight), empty_if_none(db, loss)


def _backward_fake(grad_rows, h2, weight, bias, target, lse, ignore_index, smoothing, softcap, z_loss,
                   grad_hidden, grad_weight, grad_bias, chunk, vocab_block):
    return (h2.new_empty(h2.shape if grad_hidden else (0,)), weight.new_empty(weight.shape if grad_weight else (0,)),
            h2.new_empty((weight.shape[0] if grad_bias else 0,), dtype=torch.float32))


@launcher_op("linear_cross_entropy_bwd", fake=_backward_fake)
def _backward(grad_rows: Tensor, h2: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, lse: Tensor,
              ignore_index: int, smoothing: float, softcap: Optional[float], z_loss: float, grad_hidden: bool,
              grad_weight: bool, grad_bias: bool, chunk: int, vocab_block: int) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients for per-row upstream gradients ``grad_rows`` (tokens,) fp32 (reduction "none"): the
    logits are made again, chunk by chunk, from the saved log-sum-exp."""
    dh, dw, db = _chunks(h2, weight, bias, target, None, lse, grad_rows, (ignore_index, smoothing, softcap, z_loss),
                         lse_given=True, scale_per_row=True, grad_hidden=grad_hidden, grad_weight=grad_weight,
                         grad_bias=grad_bias, chunk=chunk, vocab_block=vocab_block)
    return empty_if_none(dh, h2), empty_if_none(dw, weight), empty_if_none(db, lse)


def _scale_fake(dh: Tensor, dw: Tensor, db: Tensor, g: Tensor) -> None:
    return None


@launcher_op("linear_cross_entropy_scale_", mutates_args=("dh", "dw", "db"), fake=_scale_fake)
def scale_gradients(dh: Tensor, dw: Tensor, db: Tensor, g: Tensor) -> None:
    """Multiplies the gradients the forward made (contiguous; empty ones stay empty) by the loss's upstream
    gradient ``g`` (0-d fp32), in place.

    NOTE: an op that declares the mutation, so that under torch.compile the weight-sized gradient is
    scaled where it lies: traced as a plain ``mul``, AOTAutograd made a second weight-sized tensor in
    the backward."""
    block = TUNING.scale_block
    for t in (dh, dw, db):
        if t.numel():
            _scale((cdiv(t.numel(), block),), t.view(-1), g, t.numel(), BLOCK=block, num_warps=8)


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


def loss_scale(target: Tensor, ignore_index: int, reduction: str) -> tuple[Tensor, Tensor]:
    """(tokens not ignored, the upstream gradient each row's loss gets from a "mean" or "sum" reduction),
    both 0-d tensors: nothing waits for the GPU."""
    count = (target != ignore_index).sum()
    scale = 1.0 / count.float() if reduction == "mean" else torch.ones((), dtype=torch.float32, device=target.device)
    return count, scale


def claim_first_backward(ctx) -> None:
    """The gradients made in the forward are scaled in place by the first backward: a second one through the
    same graph (retain_graph) is refused rather than scaled twice."""
    if ctx.scaled:
        raise RuntimeError("linear_cross_entropy: a second backward through the same graph (retain_graph) is "
                           "not supported with reduction='mean' or 'sum': the forward made the gradients and the "
                           "first backward scaled them in place")
    ctx.scaled = True


class _LinearCrossEntropyFunction(torch.autograd.Function):
    """``config``: (ignore_index, label_smoothing, softcap, z_loss, reduction, chunk, vocab_block: 0 or the two-pass
    loop's classes a block). Returns (loss, lse):
    the loss reduced as asked, the per-token log-sum-exp (fp32, not differentiable)."""

    @staticmethod
    def forward(ctx, h2, weight, bias, target, config, divisor=None):
        ignore_index, smoothing, softcap, z_loss, reduction, chunk, vocab_block = config
        grads = ctx.needs_input_grad[:3]
        if reduction == "none":
            loss, lse, _, _, _ = _forward(h2, weight, bias, target, None, ignore_index, smoothing, softcap, z_loss,
                                          False, False, False, chunk, vocab_block)
            ctx.save_for_backward(h2, weight, bias, target, lse)
        else:
            # The gradients of the loss itself, made now: the backward only scales them.
            count, scale = loss_scale(target, ignore_index, reduction)
            if divisor is not None:  # ("sum" / divisor: the gradients made now carry the division)
                scale = 1.0 / divisor.float().reshape(())
            loss, lse, dh, dw, db = _forward(h2, weight, bias, target, scale, ignore_index, smoothing, softcap,
                                             z_loss, *grads, chunk, vocab_block)
            if reduction == "mean":
                loss = loss.sum() / count
            else:
                loss = loss.sum() if divisor is None else loss.sum() / divisor.float().reshape(())
            ctx.save_for_backward(dh, dw, db)
        ctx.config = config
        ctx.scaled = False
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.mark_non_differentiable(lse)
        return loss, lse

    @staticmethod
    def backward(ctx, dloss, dlse):
        ignore_index, smoothing, softcap, z_loss, reduction, chunk, vocab_block = ctx.config
        grad_hidden, grad_weight, grad_bias = ctx.needs_input_grad[:3]
        if reduction == "none":
            h2, weight, bias, target, lse = ctx.saved_tensors
            dh, dw, db = _backward(dloss.float().contiguous(), h2, weight, bias, target, lse, ignore_index,
                                   smoothing, softcap, z_loss, grad_hidden, grad_weight, grad_bias, chunk,
                                   vocab_block)
        else:
            claim_first_backward(ctx)
            dh, dw, db = ctx.saved_tensors
            # NOTE: scaled in place: a second weight-sized gradient would double the op's memory.
            scale_gradients(dh, dw, db, dloss.float())
        return (dh if grad_hidden else None, dw if grad_weight else None,
                db.to(ctx.bias_dtype) if grad_bias else None, None, None, None)


# ----------------------------------------------------------------------------------------
# Public functional
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_args(hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss, reduction, chunk):
    if not isinstance(hidden, Tensor) or hidden.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"hidden: expected a float32, float16 or bfloat16 tensor, got "
                        f"{hidden.dtype if isinstance(hidden, Tensor) else type(hidden).__name__}")
    if hidden.dim() < 1:
        raise ValueError("hidden: expected at least one dimension (the model's width), got a scalar")
    d = hidden.shape[-1]
    if not isinstance(weight, Tensor) or weight.dim() != 2 or weight.shape[1] != d:
        got = tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
        raise ValueError(f"weight: expected shape (vocab, {d}) (hidden's last dimension), got {got}")
    if weight.dtype != hidden.dtype or weight.device != hidden.device:
        raise TypeError(f"weight: expected {hidden.dtype} on {hidden.device} like hidden, got {weight.dtype} on "
                        f"{weight.device}")
    if (not isinstance(target, Tensor) or target.is_floating_point() or target.is_complex()
            or target.dtype == torch.bool):
        raise TypeError(f"target: expected an integer tensor of class indices, got "
                        f"{target.dtype if isinstance(target, Tensor) else type(target).__name__}")
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"target: expected shape {tuple(hidden.shape[:-1])} (hidden's without its last "
                         f"dimension), got {tuple(target.shape)}")
    if target.device != hidden.device:
        raise ValueError(f"target: expected a tensor on {hidden.device} like hidden, got {target.device}")
    if bias is not None:
        if not isinstance(bias, Tensor) or tuple(bias.shape) != (weight.shape[0],):
            got = tuple(bias.shape) if isinstance(bias, Tensor) else type(bias).__name__
            raise ValueError(f"bias: expected shape ({weight.shape[0]},) (weight's rows) or None, got {got}")
        if bias.dtype != hidden.dtype or bias.device != hidden.device:
            raise TypeError(f"bias: expected {hidden.dtype} on {hidden.device} like hidden, got {bias.dtype} on "
                            f"{bias.device}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"ignore_index: expected an int, got {ignore_index!r}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing: expected a number in [0, 1], got {label_smoothing!r}")
    if softcap is not None and (isinstance(softcap, bool) or not isinstance(softcap, numbers.Real)
                                or not 0 < softcap < float("inf")):
        raise ValueError(f"softcap: expected a positive finite number or None, got {softcap!r}")
    if isinstance(z_loss, bool) or not isinstance(z_loss, numbers.Real) or not 0.0 <= z_loss < float("inf"):
        raise ValueError(f"z_loss: expected a finite number >= 0, got {z_loss!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}")
    if chunk is not None and not (isinstance(chunk, str) and chunk == LOW_MEMORY) and (
            isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1):
        raise ValueError(f"chunk_size: expected a positive int, None or {LOW_MEMORY!r}, got {chunk!r}")


def linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    softcap: Optional[float] = None,
    z_loss: float = 0.0,
    reduction: str = "mean",
    return_lse: bool = False,
    chunk_size: Union[int, str, None] = None,
    divisor: Union[int, float, Tensor, None] = None,
):
    """``cross_entropy(hidden @ weight.T + bias, target)`` without keeping the logits.

    ``hidden``: (..., d); ``weight``: (vocab, d), the LM head (hidden's dtype); ``target``: hidden's shape
    without its last dimension, integer classes, ``ignore_index`` for tokens without a loss; ``bias``:
    (vocab,) or None. ``softcap``: logits capped as ``softcap * tanh(logits / softcap)`` first (Gemma-2);
    ``label_smoothing`` as in ``F.cross_entropy``; ``z_loss``: adds ``z_loss * logsumexp(logits)^2`` to each
    token's loss. ``reduction``: "mean" (over tokens not ignored; NaN when there are none, as PyTorch),
    "sum", or "none" (hidden's leading shape). Returns the loss, or ``(loss, lse)`` with ``return_lse``
    (the fp32 log-sum-exp of each token's logits; not differentiable).

    The logits are made ``chunk_size`` tokens at a time (None: as many as fit in a quarter of the inputs'
    memory, at least 64 MiB: see ``default_chunk_size``; ``"low-memory"``: logits no larger than the hidden
    states, Liger-Kernel's memory: see ``low_memory_chunk_size``); larger chunks run faster and keep more
    memory. An out-of-range target gives a NaN
    loss (a ValueError for CPU tensors, eagerly) rather than a wrong number.

    ``divisor`` (with ``reduction="sum"``): the loss is the sum divided by it (a positive number or a one-element
    tensor: Hugging Face's ``num_items_in_batch``, the labelled tokens of a whole gradient-accumulation step). The
    gradients, made in the forward, carry the division, so ``loss.backward()`` leaves them as they are; dividing
    the returned sum instead makes the backward scale them in place, one more pass over the weight's gradient and
    a second rounding of each value in the low dtype. (The vocabulary-parallel loss and the CPU reference divide
    their returned sum.)
    """
    _check_args(hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss, reduction, chunk_size)
    divisor = _divisor_tensor(divisor, reduction, hidden)
    sharded = is_dtensor(weight) or is_dtensor(hidden)
    if not hidden.is_cuda and not torch.compiler.is_compiling() and not sharded:
        _check_target_range(target, weight.shape[0], ignore_index)
    if sharded or not use_triton(hidden):
        if sharded:
            out = _vocab_parallel(hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss,
                                  reduction, return_lse, chunk_size)
        else:
            out = linear_cross_entropy_ref(hidden, weight, target, bias, ignore_index=ignore_index,
                                           label_smoothing=label_smoothing, softcap=softcap, z_loss=z_loss,
                                           reduction=reduction, return_lse=return_lse)
        if divisor is None:
            return out
        return (out[0] / divisor, out[1]) if return_lse else out / divisor
    d, vocab = hidden.shape[-1], weight.shape[0]
    h2 = hidden.reshape(-1, d)
    if h2.stride(-1) != 1 or (h2.shape[0] > 1 and h2.stride(0) != d):
        h2 = h2.contiguous()
    t = target.reshape(-1)
    chunk, vocab_block = chunk_plan(chunk_size, h2.shape[0], d, vocab, h2.element_size())
    config = (int(ignore_index), float(label_smoothing), None if softcap is None else float(softcap), float(z_loss),
              reduction, chunk, vocab_block)
    loss, lse = _LinearCrossEntropyFunction.apply(h2, weight, bias, t, config, divisor)
    lead = hidden.shape[:-1]
    if reduction == "none":
        loss = loss.view(lead)
    return (loss, lse.view(lead)) if return_lse else loss



def _divisor_tensor(divisor, reduction: str, like: Tensor) -> Optional[Tensor]:
    """``linear_cross_entropy``'s ``divisor`` checked, as a one-element fp32 tensor on ``like``'s device (None:
    none)."""
    if divisor is None:
        return None
    if reduction != "sum":
        raise ValueError(f"divisor: the sum's divisor goes with reduction='sum', got reduction={reduction!r}")
    if isinstance(divisor, Tensor):
        if divisor.numel() != 1 or divisor.is_complex() or divisor.dtype == torch.bool:
            raise ValueError(f"divisor: expected a number or a one-element real tensor, got a {divisor.dtype} tensor "
                             f"of shape {tuple(divisor.shape)}")
        return divisor.to(device=like.device, dtype=torch.float32).reshape(())
    if isinstance(divisor, bool) or not isinstance(divisor, numbers.Real) or not 0 < divisor < float("inf"):
        raise ValueError(f"divisor: expected a positive finite number or a one-element tensor, got {divisor!r}")
    return torch.full((), float(divisor), dtype=torch.float32, device=like.device)


def _vocab_parallel(hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss, reduction,
                    return_lse, chunk_size):
    """The LM head sharded on the vocabulary (a DTensor weight): ops/cross_entropy_parallel.py."""
    from blockfuse.ops.cross_entropy_parallel import vocab_parallel_linear_cross_entropy

    if not is_dtensor(weight):
        raise ValueError("weight: hidden is a DTensor but weight is not; pass the LM head's weight as a DTensor "
                         "sharded on the vocabulary (Shard(0)), or plain tensors")
    local = weight.to_local()
    if not use_triton(local):
        raise ValueError("weight: the vocabulary-parallel loss runs blockfuse's kernels: CUDA tensors, or CPU tensors "
                         "with TRITON_INTERPRET=1 set before Python starts")
    tokens = hidden.numel() // max(1, hidden.shape[-1])
    chunk = chunk_rows(chunk_size, tokens, hidden.shape[-1], local.shape[0], local.element_size())
    config = (int(ignore_index), float(label_smoothing), None if softcap is None else float(softcap), float(z_loss),
              reduction, chunk)
    return vocab_parallel_linear_cross_entropy(hidden, weight, target, bias, config, return_lse)


def _check_target_range(target: Tensor, vocab: int, ignore_index: int) -> None:
    """Targets of CPU tensors are checked here, eagerly (on CUDA the check would wait for the GPU, and under
    torch.compile it would depend on the data: there the kernel gives NaN for a bad one instead)."""
    if target.numel() == 0:
        return
    bad = (target != ignore_index) & ((target < 0) | (target >= vocab))
    if bool(bad.any()):
        value = int(target[bad].flatten()[0])
        raise ValueError(f"target: expected class indices in [0, {vocab}) or ignore_index={ignore_index}, "
                         f"got {value}")


# ----------------------------------------------------------------------------------------
# Reference (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def linear_cross_entropy_ref(hidden, weight, target, bias=None, *, ignore_index=-100, label_smoothing=0.0,
                             softcap=None, z_loss=0.0, reduction="mean", return_lse=False):
    """Pure-PyTorch :func:`linear_cross_entropy`: the logits made whole, in hidden's dtype as a plain
    ``F.linear`` makes them, then ``F.cross_entropy`` in fp32 (fp64 for fp64 inputs)."""
    compute = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    logits = F.linear(hidden, weight, bias).to(compute)  # (..., V)
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    vocab = logits.shape[-1]
    z, t = logits.reshape(-1, vocab), target.reshape(-1)
    loss = F.cross_entropy(z, t, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")
    lse = torch.logsumexp(z, dim=-1)
    valid = t != ignore_index
    if z_loss:
        loss = loss + torch.where(valid, z_loss * lse * lse, torch.zeros_like(lse))
    if reduction == "mean":
        loss = loss.sum() / valid.sum()
    elif reduction == "sum":
        loss = loss.sum()
    else:
        loss = loss.view(target.shape)
    lse = lse.view(target.shape).detach().float()
    return (loss, lse) if return_lse else loss
