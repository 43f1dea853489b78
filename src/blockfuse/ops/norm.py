"""LayerNorm and RMSNorm, optionally fused with a residual add and seeded dropout, or a GELU.

Four forms share one pair of kernels:

* no residual:            ``y = norm(x)``
* ``residual_mode="pre"``:  ``s = residual + dropout(x)``; returns ``(norm(s), s)``
  (pre-norm blocks: Llama, SigLIP; ``s`` is the next residual stream)
* ``residual_mode="post"``: returns ``residual + dropout(norm(x))`` (OLMo-2 reordered blocks)
* ``layer_norm_gelu``:      ``y = gelu(layer_norm(x) * weight + bias)``; the backward recomputes
  the GELU's input from the saved x and statistics (nothing but those is kept)

Statistics are computed in fp32 and outputs are written in the input dtype. Every form also takes
``fp8="rowwise"`` / ``"tensorwise"`` (forward only): the normalized output written in e4m3 with its
scale by the same pass, ``(y_fp8, scale)`` returned in its place (ops/fp8.py: the recipes; the kernel
``_norm_fwd_fp8_kernel``, op ``blockfuse::norm_fwd_fp8``). The file reads top to bottom: kernels; the
launchers (ops ``blockfuse::norm_fwd``, ``blockfuse::norm_fwd_fp8`` and ``blockfuse::norm_bwd``, see
``ops/launch.py``); the one autograd Function; the public functionals; the references.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor
from triton.language.extra.cuda import gdc_launch_dependents

from blockfuse.ops.activation import (FAST_MUFU, GELU_CODES, check_gelu_approximation, gelu, gelu_grad,
                                      gelu_tanh_grad_f16x2)
from blockfuse.ops.activation import GELU_TANH as _GELU_TANH
from blockfuse.ops.checks import check_like
from blockfuse.ops.dropout import draw_seed, dropout_code, dropout_scale, dropout_tile
from blockfuse.ops import fp8 as _fp8
from blockfuse.ops.fp8 import (
    E4M3_MAX, FP8_AMAX, FP8_ROWWISE, FP8_TENSORWISE, Float8Scaling, _quantized, check_fp8_output, delayed_scale,
    delayed_scale_ref, fold_amax, quantize_output_ref, reciprocal, refuse_fp8_gradient, roll_amax_history, row_amax,
    scale_of, store_transposed_cast, to_e4m3,
)
from blockfuse.ops.launch import (
    Kernel, as_rows, cdiv, empty_if_none, empty_scalar, launcher_op, next_power_of_2, row_stride, in_row_units,
    sm_count, tracing, vector, zero_stand_in,
)
from blockfuse.ops.reduce import sum_partials
from blockfuse.ops.sharding import is_dtensor
from blockfuse.runtime import interpreter_enabled, use_triton

# Residual forms, as kernel constants (0: no residual), and the same codes as launcher arguments.
_PRE: tl.constexpr = tl.constexpr(1)
_POST: tl.constexpr = tl.constexpr(2)
NONE, PRE, POST = 0, _PRE.value, _POST.value
# Activations applied after the affine: activation.GELU_CODES (0: none).

# NOTE: the launch rule (``_tile``), measured on an H200 against the power-of-two tile it refined
# (benchmarks/norm_rule.py; results in benchmarks/results/launch-rules/):
# * a row is held in registers as one power-of-two tile of next_power_of_2(N) lanes; only rows past
#   TAIL_FROM_LANES take two power-of-two pieces (``row_pieces``: 11008 -> 8192 + 4096, not 16384): there
#   the tile is at its 16 warps, so padded lanes cost registers no warp can take over (forward at 11008:
#   1.11-1.34x). Below it the padding measured cheaper than a tail with the pieces' row sums added as vectors
#   (backward at 4304: the padded 8192 lanes ran 1.8x faster than 4096 + 256); reduced to scalars piece by piece,
#   the pieces won in both passes (forward_rule, backward_rule: the NOTEs above FWD_PIECES_FROM_LANES and
#   BWD_PIECES_FROM_LANES);
# * rows wider than FWD_MAX_LANES (forward) or BWD_MAX_LANES go in chunks, read again for each pass. The
#   one tile spills past 8192 lanes, but every form ran as fast or faster in it than in chunks of two rows a
#   program (chunks: LayerNorm / RMSNorm 1.0x at 11008, 0.5x at 14336; post-residual 0.45x and LayerNorm + GELU
#   0.81x at 14336); in chunks of one row a program RMSNorm's forward is the faster from 8192 lanes (the NOTE
#   above FWD_RMS_CHUNKS_FROM_LANES). The pre-residual backward (which also reads the residual stream's
#   gradient) took chunks past BWD_MAX_LANES_PRE = 8192 once, when the one tile measured 3.3x / 1.7x slower at
#   11008 / 14336; on the kernel of 2026-11-28 (reloaded rows, two-FMA rule) the one tile is the faster (H200,
#   backward of a same-size copy, chunks -> one tile: LayerNorm 11008 0.42 -> 0.51, 14336 0.36 -> 0.59, 16384
#   0.34 -> 0.67; RMSNorm 0.53 -> 0.56, 0.51 -> 0.60, 0.45 -> 0.61; benchmarks/results/launch-rules/11-pre-tile/),
#   so it takes the other forms' limit.
TAIL_FROM_LANES = 8192
FWD_MAX_LANES = 16384
BWD_MAX_LANES = 16384
BWD_MAX_LANES_PRE = 16384
# Chunk widths: the one that pads the row least; CHUNK_TILE_ELEMENTS lanes a program (several rows) in the backward
# and the FP8 forward (the plain forward takes one row a program: FWD_CHUNK_WARPS).
CHUNK_CHOICES = (4096, 2048)
CHUNK_TILE_ELEMENTS = 8192
# The chunked forward's cache hints: the statistics' passes keep the row in L2 for the pass that writes, which
# reads it last.
CHUNK_FIRST_EVICT: tl.constexpr = tl.constexpr("evict_last")
CHUNK_LAST_EVICT: tl.constexpr = tl.constexpr("evict_first")
NO_HINT: tl.constexpr = tl.constexpr("")
# Smallest tail tile (lanes): a narrower one would load a few bytes a row.
MIN_TAIL = 16
# NOTE: a row in two pieces spreads its tail over the program's threads too. Where the tail gave each thread fewer
# than TAIL_VECTOR elements (a 16-byte vector of bf16) its layout differed from the head's: [8192, 9000] (8192 + 1024
# lanes) at 16 warps loaded the tail 4 bytes a thread and moved values between the two layouts through 8 KiB of
# shared memory (15 barriers for LayerNorm, sm_90 SASS), and the forward ran at 0.56 / 0.73 / 0.72 of copy (LayerNorm
# / RMSNorm / post-residual) where 4 warps, 8 tail elements a thread, ran 0.96 / 0.97 / 0.88 (H100,
# benchmarks/results/launch-rules/10-reload/fwd-warps-h100/). So a tail of at least 4 warps' worth of vectors caps
# the warps at one vector a thread (9000: 4; 10240's 2048-lane tail: 8, not measured; 11008's 4096: 16, as before,
# where 4 warps measured 0.91 -> 0.96 for LayerNorm but 0.91 -> 0.87 post-residual). A smaller tail (8200: 8192 +
# 16) cannot fill 4 warps at all and keeps the warps of the whole row. Rows up to 8192 lanes: the pieces of both
# passes there are in the NOTEs below (the backward's: BWD_PIECES_FROM_LANES).
TAIL_VECTOR = 8
# NOTE: the forward also takes two pieces below TAIL_FROM_LANES where the tail alone fills 4 warps with 16-byte vectors
# (FWD_VECTOR_TAIL_LANES lanes, so the warps stay at one vector a thread: the NOTE above): 4609-6144 wide (5120: 4096 +
# 1024 lanes, not 8192), 2561-3072 (3072: 2048 + 1024), and below 1024 lanes never. A smaller tail kept the padded tile
# until the one-row pieces (the next NOTE): H200, [16384, n] bf16, forward's fraction of a copy, padded tile -> pieces:
# 5120 LayerNorm 0.79 -> 0.95, RMSNorm 0.89 -> 0.96; but 4304 (4096 + 256, a tail of 1 element a thread at 8 warps)
# LayerNorm 0.70 -> 0.58, RMSNorm 0.83 -> 0.88 (benchmarks/results/launch-rules/14-vector-tails-2026-11-29-h200/). The
# backward kept its tiles then (at 4304 the padded 8192 lanes ran 1.8x faster than 4096 + 256 with vector sums), and so
# does the FP8 forward at these tails (fp8_forward_tile): with these pieces it ran 1.20-1.36x faster at 5120 but
# LayerNorm rowwise 0.92x at 2880 and 0.82x at 6144 (same folder, fp8/). 0: off.
FWD_VECTOR_TAIL_LANES = 4 * 32 * TAIL_VECTOR
# NOTE: below TAIL_FROM_LANES, a row of at least FWD_PIECES_FROM_LANES with a tail of any size also goes in two
# pieces, one row a program, one warp per FWD_PIECE_LANES_PER_WARP lanes and at least FWD_PIECE_MIN_WARPS: 1152 and
# 1536 as 1024 + 128 / 512 lanes on 2 warps, 2304 and 2560 as 2048 + 256 / 512 on 2, 4160-4608 as 4096 + 64-512 on 4,
# where one padded tile left up to half its lanes idle. (Narrower rows pack several to a program: FWD_TILE_ELEMENTS.)
# A tail of fewer than LAYOUT_TAIL_LANES lanes has another layout than its head, and adding the two pieces' row sums
# made the compiler move the head into the tail's layout through shared memory (sm_90, LayerNorm at 4304: 8 KiB, 11
# barriers), which is why 4096 + 256 had measured slower than the padded tile (the NOTE above). The statistics of
# such a row reduce each piece to a scalar first (_row_statistics_of_pieces: 64 bytes, 7 barriers). Measured on an
# H200, [16384, n] bf16, the rule off / on in alternating rounds of one process, forward's fraction of a copy:
# LayerNorm 4304 0.70 -> 0.93, post-residual 0.64 -> 0.84, + GELU 0.53 -> 0.84, RMSNorm 0.82 -> 0.95; 4160 LayerNorm
# 0.68 -> 0.92; 2304 0.72 -> 0.88 (+ GELU 0.59 -> 0.83); 2560 0.77 -> 0.89; 1152 0.72 -> 0.77 (+ GELU 0.58 -> 0.68);
# 1536 0.85 -> 0.85 (post-residual 0.79 -> 0.85); no cell slower. The warps decide it: 4304 on 8 warps (one tail
# element a thread) 0.77, on 4 0.93; 1152 on 4 warps 0.61, on 2 0.77. At 2048-4096 rows (tensors under 32 MiB,
# kernels of a few microseconds) the pieces are 0.85-1.3x the padded tile by form (2048 x 4304: 1.10-1.30x; 2048 x
# 2560 LayerNorm 0.90x, RMSNorm 1.05x); twice the warps where the rows fit the card in one wave was no better and is
# not in the rule (benchmarks/results/launch-rules/15-one-row-pieces-2026-11-29-h200/). The backward has its
# own pieces (the NOTE above BWD_PIECES_FROM_LANES); the FP8 forward takes these from FP8_FWD_PIECES_FROM_LANES (its
# NOTE). 0: off.
LAYOUT_TAIL_LANES: tl.constexpr = tl.constexpr(4 * 32 * TAIL_VECTOR)
FWD_PIECES_FROM_LANES = 1024
FWD_PIECE_LANES_PER_WARP = 2048
FWD_PIECE_MIN_WARPS = 2
# NOTE: the backward takes two pieces too (row_pieces), one row a block (_norm_bwd_pieces), for rows of at least
# BWD_PIECES_FROM_LANES with a tail under LAYOUT_TAIL_LANES: 2304 = 2048 + 256, 2560 = 2048 + 512, 4304 = 4096 + 256,
# 4608 = 4096 + 512. Each piece's row sums reduce to a scalar before they are added, as in the forward (the NOTE
# above; with vector sums 4304's pieces had measured 1.8x slower than the padded 8192 lanes). The plain forms: one
# warp per BWD_PIECE_LANES_PER_WARP lanes, at least BWD_PIECE_MIN_WARPS (4 at every such width: on 8, 149 registers a
# thread let one program a multiprocessor), the pieces at most BWD_PIECES_MAX_LANES lanes, and a tail of at least
# BWD_PIECE_TAIL_BYTES a thread: a thinner one is not pipelined (cp.async copies 4 bytes or more; sm_90 TTGIR: the
# tail's two loads stay synchronous) and 2176 = 2048 + 128 ran 0.74 -> 0.55 of copy, 4160 = 4096 + 64 RMSNorm 0.77 ->
# 0.72. The GELU form has a rule of its own (the NOTE above ACT_BWD_PIECES_FROM_LANES). Measured on an H200 (the
# backward launcher, [16384, n] bf16, padded tile -> pieces in alternating rounds of one process, fraction of a 1 GiB
# copy; benchmarks/results/launch-rules/16-backward-pieces-2026-11-29-h200/): 4304 LayerNorm 0.72 -> 0.88, RMSNorm 0.77
# -> 0.90, pre-residual 0.79 -> 0.86, post-residual 0.72 -> 0.87, + GELU 0.41 -> 0.52; 4352 0.76 / 0.81 / 0.82 -> 0.89 /
# 0.92 / 0.90, GELU 0.42 -> 0.54; 2304 0.77 / 0.82 / 0.80 -> 0.78 / 0.83 / 0.84, GELU 0.44 -> 0.51; 2560 1.00x, GELU
# 0.48 -> 0.60; [8192, 4304] LayerNorm 0.68 -> 0.77; [4096, 4304] 1.03-1.17x. Left as measured: the pre-residual form at
# 4480 / 4608 (4096 + 512) 0.83 / 0.84 -> 0.80 / 0.81 where the other plain forms gained 1.07-1.14x. Left padded: tails
# of 1024 lanes or more (2880 = 2048 + 1024: 0.83 -> 0.83; 6144 = 4096 + 2048: LayerNorm 0.92 -> 0.79, pre-residual 0.95
# -> 0.64), and rows under 2048 (1152 = 1024 + 128, one row a block: 0.65 -> 0.35, where the padded tile holds two rows
# a block). Wider rows keep one padded tile and its reloaded rows (BWD_RELOAD_FROM_LANES). 0: off.
BWD_PIECES_FROM_LANES = 2048
BWD_PIECES_MAX_LANES = 8192
BWD_PIECE_LANES_PER_WARP = 2048
BWD_PIECE_MIN_WARPS = 4
BWD_PIECE_TAIL_BYTES = 4
BWD_PIECES_MAX_TAIL = LAYOUT_TAIL_LANES.value  # (benchmarks' A/B runs: wider tails, e.g. 11008 = 8192 + 4096)
# NOTE: a 16-bit row whose accesses are one element (VEC 1: an odd width, or an odd row stride, starts it at a 2-byte
# boundary) holds each value in a register of its own where vector accesses pack two, so the tiles above, sized for
# vectors, spill: built for sm_90 (benchmarks/results/launch-rules/34-odd-widths-2026-12-05-cpu/), 4567 in pieces
# (4096 + 512) on 4 warps 336-616 bytes a thread (none on 8), 7777's padded tile on 8 warps 136-208, 12345's
# pre-residual padded tile 3064. Timed on an H100 (35-odd-widths-2026-12-06-h100/, the backward launcher at [16384,
# 4567]): the rule's 4 warps 0.35-0.36 of copy (LayerNorm, pre-residual), 8 warps 0.51-0.52 (RMSNorm, which spilled
# nothing, 0.54 both); the even 4568 0.85-0.89 on 4 warps. So scalar rows in one-row pieces take BWD_SCALAR_WARPS
# times their warps: timed through the launcher on an H100 (35-odd-widths-*/3-scalar/, rule off / on in alternating
# rounds of one process) 1.48-1.52x at 4567 (LayerNorm, pre- and post-residual 0.34-0.35 -> 0.51-0.52 of copy),
# RMSNorm 1.01x; no other width moved. The padded tile's warps likewise (BWD_SCALAR_TILE_WARPS), but only for tiles of
# at least BWD_SCALAR_TILE_WARPS_FROM_LANES: at 7777 (8192 lanes, 16 warps instead of 8; its sm_90 build spills 56-136
# bytes instead of 136-208) LayerNorm and post-residual 1.03x, pre-residual 1.16x (0.53 -> 0.62), RMSNorm 1.00x; at
# 1001, 2049 and 3001 (1024 / 4096-lane tiles; 2049 / 3001 spilled 104-176 bytes on 4 warps and none on 8) twice the
# warps ran 0.65-0.86x (RMSNorm at 1001 1.05x): the spills do not predict it there. And the pre-residual form's rows
# past BWD_SCALAR_MAX_LANES_PRE in chunks (12345: 3064 bytes of spills -> 848): its backward 22.7 -> 7.4 ms at [16384,
# 12345] (3.1x), still 0.07 of copy; the other forms there (three pieces on 16 warps, 352-480 bytes) 0.20-0.34 of
# copy. The GELU form keeps its tiles (its own warps and register cap). 1 / 0: off.
BWD_SCALAR_WARPS = 2
BWD_SCALAR_TILE_WARPS = 2
BWD_SCALAR_TILE_WARPS_FROM_LANES = 8192
BWD_SCALAR_MAX_LANES_PRE = 8192
# NOTE: past 8192 lanes every plain form's scalar rows spill in the rule's tiles (sm_90 builds with the card's Triton
# 3.6, stack bytes a thread: 9999 in two pieces, LayerNorm and post-residual 1312 on 32 registers, RMSNorm 248,
# pre-residual 472; 12345 in three pieces 352-480, the pre-residual chunks of 4 rows x 2048 lanes 848; 15001's padded
# tile 904-1080), and at 12345 they ran at 0.02-0.34 of copy (35-odd-widths-*/3-scalar/). One row of
# BWD_SCALAR_CHUNK_LANES lanes a chunk on BWD_CHUNK_WARPS warps, the weight gradients from their own kernel (the NOTE
# above BWD_WEIGHT_KERNEL_FROM_LANES), builds without a spill in every plain form at 9999 / 12345 (424-472
# instructions against 1144-2136), at the price of reading each row twice (10 bytes an element against 6: 0.6 of copy
# at best). Timed on an H100 (35-odd-widths-*/5-wide/, `PHASE=wide scripts/issue22_scalar_rows_gpu.sh`, the backward
# launcher at [16384, n], two alternating rounds of one process) against the rule: 8447 3.4-4.8x (0.05-0.08 -> 0.26-
# 0.27 of copy), 9999 LayerNorm / post-residual 5.9x, pre-residual 1.37x, 12345 1.30x (pre-residual 3.5x), 15001
# 1.35-3.0x, all at 0.25-0.29 of copy; but RMSNorm's pieces at 9999 / 12345 (which spill least) ran 0.38 / 0.34 against
# 0.29 / 0.27, so RMSNorm keeps pieces where the rule has them (BWD_SCALAR_RMS_KEEPS_PIECES). The plain chunks with the
# weight kernel (4 rows x 2048 lanes at 8447-12345: 0.08-0.22 of copy) were slower but at 15001 (one row x 4096 lanes:
# 0.29-0.35 against 0.26-0.28). So one row of 4096 lanes a chunk (BWD_SCALAR_CHUNK_LANES; builds without a spill at
# 9999 / 15001, 704-776 instructions): timed against 2048 in the same way (35-odd-widths-*/6-landed/, LANDED=1) 0.99-
# 1.27x (8447 LayerNorm / post-residual 1.01x, pre-residual 1.16x, RMSNorm 0.99x; 9999 1.00-1.14x; 12345 1.04-1.19x;
# 15001 1.10-1.27x), 0.26-0.35 of copy. Rows from BWD_SCALAR_ROW_CHUNKS_FROM_LANES lanes; 0: off.
BWD_SCALAR_ROW_CHUNKS_FROM_LANES = 8193
BWD_SCALAR_RMS_KEEPS_PIECES = True
# NOTE: RMSNorm's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES (plain form, up to BWD_MAX_LANES) go in one padded
# tile of one row on BWD_SCALAR_WHOLE_ROW_WARPS warps, read once: 32 warps hold 16384 lanes at 16 a thread (sm_90
# builds: 64 registers, 248 bytes of stack; on 16 warps, 664). Timed on an H100 against the rule above it
# (35-odd-widths-*/7-whole-row/, LANDED=2, the backward launcher at [16384, n], two alternating rounds of one process):
# 8447 1.65x (0.26 -> 0.42 of copy), 9999 1.17x (its pieces: 0.38 -> 0.45), 12345 1.35x (0.35 -> 0.47), 15001 1.57x
# (0.31 -> 0.49). Not the LayerNorm forms: 0.97-1.03x with a bias gradient and a mean more, pre-residual 0.63-0.72x (the
# residual's gradient a third stream; the other forms' whole rows since: the NOTE below). With the whole rows off, the
# pre-residual RMSNorm keeps the rule's pieces (BWD_SCALAR_RMS_KEEPS_PIECES) and the rest take one-row chunks. Through
# the op (35-odd-widths-*/9-rms-op/, `blockfuse bench ops --sweep`) RMSNorm's forward + backward at those widths went
# from 0.71-0.82x to 0.97-1.15x the faster of torch.compile and Liger. The forward in the same whole row (32 or 16
# warps; sm_90: 64 / 128 registers, no spill) lost to its chunks at every width (10-rms-forward-whole/: 0.73-0.97x, 8447
# 0.75 -> 0.55 of copy): the forward keeps its chunks. 0: off.
BWD_SCALAR_WHOLE_ROW_WARPS = 32
# NOTE: every other form's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES (LayerNorm plain, pre- and post-residual, +
# GELU; the pre-residual RMSNorm) take that whole row too, writing dx only (and the residual's gradient), the weight
# kernel making their weight / bias gradients as the one-row chunks' (BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL): in the
# kernel, the two accumulators across the row blocks are what spilled on 32 warps (sm_90 builds: 248-328 bytes a thread
# -> 0-8, 872-1272 instructions -> 584-752), for a second read of z and dy by the weight kernel (10 bytes an element
# against 6; the chunks move 14). Timed on an H100 (35-odd-widths-*/13-whole-row-wk/, LANDED=7, the backward launcher at
# [16384, n], two alternating rounds of one process) against the rule then (one-row chunks): LayerNorm / post-residual
# 1.37-1.51x (8447 0.26 -> 0.38 of copy, 12345 0.27 -> 0.40), pre-residual 1.41-1.52x (0.31-0.35 -> 0.46-0.49); the same
# rows with the gradients in the kernel 0.97-1.03x, pre-residual 0.63-0.72x. As landed (14-whole-row-landed/, LANDED=8)
# the same ratios again, and through the op (its sweep, [16384, n] bf16) LayerNorm's forward + backward 1.14-1.24x the
# faster of torch.compile and Liger at 8447-15001 (0.89-0.92x before), pre-residual 1.37-1.47x, post-residual
# 1.12-1.26x. RMSNorm's plain form, one accumulator (dw) and two streams, keeps its own: with the weight kernel
# 0.93-0.96x (BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS). The pre-residual RMSNorm (BWD_SCALAR_WHOLE_ROW_RMS_PRE; its rule
# before: pieces at 9999, one-row chunks elsewhere), timed in 14-*: 8447 1.56x (0.31 -> 0.48 of copy), 9999 1.85x (0.27
# -> 0.51), 12345 1.58x, 15001 1.47x (0.37 -> 0.54); its gradients in the kernel instead 1.24-1.63x.
# BWD_SCALAR_WHOLE_ROW_RMS_ONLY True: the rule before this NOTE (RMSNorm's plain form only).
BWD_SCALAR_WHOLE_ROW_RMS_ONLY = False
BWD_SCALAR_WHOLE_ROW_RMS_PRE = True
BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL = True
BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS = False
# NOTE: LayerNorm + GELU's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES took its own tiles, which at 12289-16384
# are one padded 16384-lane tile that spills 1608 bytes a thread in its sm_90 build (4768 instructions; 0.04-0.07 of
# copy, 0.36x the faster peer at 12345 in 35-odd-widths-*/2-odd/), and at 8193-12288 two pieces, 8192 lanes and a
# tail. They take the whole row above (BWD_SCALAR_ROW_CHUNKS_ACT; 80 bytes of stack, 952 instructions, its register
# cap 64: _act_bwd_maxnreg), but where the pieces' tail is ACT_BWD_SCALAR_PIECES_MAX_TAIL lanes or fewer. Timed as
# above (13-whole-row-wk/): 12345 6.9x (9.27 -> 1.34 ms, 0.04 -> 0.30 of copy), 15001 6.1x, 9999 (a 2048-lane tail)
# 1.40x (0.21 -> 0.29); 8447 (a 256-lane tail: the pieces at 0.33 of copy) 0.89x. One-row chunks instead of the whole
# row: 0.64-0.69x the whole row. Through the op (14-whole-row-landed/'s sweep) forward + backward 1.80-2.18x
# torch.compile at 8447-15001 (12345: 0.36x the faster peer in 2-odd/). Where between 256 and 2048 lanes of tail the
# whole row starts to win is not measured (14-*'s 8800 / 9216 are even: vector rows, which no scalar rule touches).
BWD_SCALAR_ROW_CHUNKS_ACT = True
ACT_BWD_SCALAR_PIECES_MAX_TAIL = 256
BWD_SCALAR_CHUNK_LANES = 4096
# NOTE: rows past BWD_PIECES_MAX_LANES go in two pieces of at most BWD_WIDE_PIECES_MAX_LANES lanes (8192 + a tail of
# up to 4096: 9000, 10240, 11008, 12288) on BWD_WIDE_PIECE_WARPS warps (24 lanes a thread at most, each row read
# once, pipelined: the NOTE above BWD_PIPELINE_MAX_LANES), where the padded 16384-lane tile reads each row twice
# (BWD_RELOAD_FROM_LANES) and pays for a quarter to a half of idle lanes. Every plain form at any tail of
# BWD_PIECE_TAIL_BYTES a thread (BWD_WIDE_PIECES_RMS_MAX_TAIL: RMSNorm's, a knob for the A/B that set it), and the
# GELU form past its own pieces (ACT_BWD_WIDE_PIECES; above its 17 lanes a thread, so spilling: 312 bytes at 11008).
# Built for sm_90 the plain pieces spill RMSNorm 0 bytes a thread, LayerNorm 64-80 (the reloaded tile: 88),
# pre-residual LayerNorm 64-88 (208). Measured on an H200 (benchmarks/norm_tiles.py --bwd-setting, alternating
# rounds of one process, [16384, n] bf16, fraction of a same-size copy;
# benchmarks/results/launch-rules/20-wide-pieces-2026-12-01-h200/ and 21-wide-pipeline-2026-12-01-h200/), the
# padded tile -> the pieces unpipelined -> pipelined: LayerNorm 9216 0.44 -> 0.71 -> 0.94, 10240 0.48 -> 0.77 ->
# 0.96, 11008 0.50 -> 0.71 -> 0.80, 12288 0.55 -> 0.77 -> 0.82; pre-residual 11008 0.54 -> 0.64 -> 0.78; RMSNorm
# 11008 0.68 -> 0.64 -> 0.97 (unpipelined, its padded tile had won at tails of 4096); + GELU 11008 0.31 -> 0.37 ->
# 0.44, 9000 0.26 -> 0.50 (a 1024-lane tail: not pipelined). On 8 warps (48 lanes a thread): 232 bytes of spill,
# 0.54 at 11008. 0: off.
BWD_WIDE_PIECES_MAX_LANES = 12288
BWD_WIDE_PIECE_WARPS = 16
# NOTE: rows past BWD_WIDE_PIECES_MAX_LANES up to BWD_THREE_PIECES_MAX_LANES in three pieces (_three_pieces: 12800 and
# 13312 as 8192 + 4096 + 1024 lanes, the last masked at the row's end) on BWD_WIDE_PIECE_WARPS warps, each row read
# once, pipelined by the depth rule, the weight read again each row (RELOAD in pieces: _bwd_reload; its registers
# freed, 26 a thread at 13312, the 26 KiB of it staying in cache), where the padded 16384-lane tile reads each row
# twice and leaves a fifth of its lanes idle. Only where BWD_THREE_PIECES_MIN_STAGES stages of z and dy fit
# BWD_SMEM_BYTES: bf16 rows of up to 13312 lanes; not the pre-residual forms (their third stream leaves two stages:
# LayerNorm 0.58 -> 0.44; since, BWD_THREE_PIECES_PRE) nor the GELU form (ACT_BWD_THREE_PIECES; 13312 0.35 -> 0.37
# unpipelined, 0.15 pipelined).
# Measured on an H200 (benchmarks/norm_tiles.py --bwd-setting, the backward launcher in alternating rounds of one
# process, [16384, n] bf16, fraction of a same-size copy;
# benchmarks/results/launch-rules/24-three-pieces-2026-12-03-h200/), padded -> three pieces: 13312 LayerNorm 0.58 ->
# 0.66, RMSNorm 0.78 -> 0.95, post-residual 0.58 -> 0.65; 12800 0.56 / 0.76 / 0.56 -> 0.65 / 0.96 / 0.65. Unpipelined
# or with the weight held in registers the pieces lost (13312 LayerNorm 0.52-0.56). 0: off.
# 13313-14336 lanes (14336 = 8192 + 4096 + 2048): three stages of z and dy count 168 KiB there, past BWD_SMEM_BYTES,
# and with that budget raised the pieces had lost (H200, 24-*: LayerNorm 0.61 -> 0.52, RMSNorm 0.82 -> 0.84; two
# stages 0.48), but that was before the plain forms' wide pieces held their bf16 rows across the row sums (the NOTE
# above BWD_HOLD_PIECES: 104 bytes of spill a thread at 14336 -> 56 in the sm_90 build). So three pieces count their
# stage buffers against BWD_THREE_PIECES_SMEM_BYTES (172 KiB: the pipeliner's buffers as Triton 3.6 builds them for
# sm_90 take 112 KiB at 14336, its stages less one, of the 227 KiB a block may have; one program a multiprocessor),
# where z and dy are bf16 (held; fp16 rows keep BWD_SMEM_BYTES and their padded tile past 13312 lanes): 13313-14336
# lanes take three pieces and three stages where the padded tile had one stage. No other tile changes.
# Measured on an H100 (benchmarks/norm_tiles.py --bwd-setting through scripts/issue22_row_cap_gpu.sh, the backward
# launcher with BWD_SMEM_BYTES at 160 and 172 KiB in two alternating rounds of one process;
# benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/), padded -> three pieces: [16384, 14336] LayerNorm 0.79
# -> 0.86 of copy (1.09x), post-residual 0.80 -> 0.87 (1.09x), RMSNorm 1.00x (0.96); [32768, 14336] 1.09x / 1.10x /
# 1.00x (LayerNorm 0.81 -> 0.88); [4096, 14336] 1.14x / 1.13x / 1.02x (0.72 -> 0.81); [16384, 13824] 1.12x / 1.11x /
# 1.02x (0.78 -> 0.87); 13312 (three pieces either way) 1.00x. The pre-residual forms and the GELU form are unchanged.
BWD_THREE_PIECES_MAX_LANES = 14336
BWD_THREE_PIECES_MIN_STAGES = 3
BWD_THREE_PIECES_SMEM_BYTES = 172 * 1024
# NOTE: the pre-residual forms (LayerNorm and RMSNorm with ds, a third stream) take those three pieces too where z and
# dy are bf16 and the rule above fits them (12289-14336 lanes), pipelined by the depth rule with their three streams
# (two stages, 107-115 KB of shared memory as built for sm_90), where they kept the padded 16384-lane tile read twice,
# unpipelined (LayerNorm's sm_90 build: 168 bytes of spill a thread, 56-72 in pieces). They had lost there before the
# rows were held (the NOTE above: LayerNorm 0.58 -> 0.44, H200, 24-*). Measured on an H200 (benchmarks/norm_tiles.py
# --bwd-setting through `PHASES=pre scripts/issue22_row_cap_gpu.sh`, the backward launcher, the rule then three
# pieces then three pieces unpipelined in two alternating rounds of one process, fraction of a same-size copy;
# benchmarks/results/launch-rules/39-pre-three-pieces-2026-12-06-h200/): [16384, 14336] LayerNorm 0.62 -> 0.75
# (1.21x), RMSNorm 0.86 -> 0.93 (1.08x); [2048, 14336] 1.13x / 1.04x; [16384, 12800] 1.06x / 1.03x (unpipelined:
# LayerNorm 1.07-1.10x, RMSNorm 0.87-0.88x). fp16 rows keep the padded tile (not measured; odd widths' rows take
# their own whole-row tiles first: the NOTE above BWD_SCALAR_WHOLE_ROW_WARPS). On an H100 (the same phase, the padded
# tile over the rule's time; launch-rules/40-pre-act32-2026-12-06-h100/): LayerNorm 1.12-1.21x (0.64-0.74 -> 0.73-0.90
# of copy) at [2048 - 32768, 12800 - 14336], RMSNorm 1.03-1.06x. False: off.
BWD_THREE_PIECES_PRE = True
# NOTE: the GELU form's backward takes three pieces too, past BWD_PIECES_MAX_LANES to BWD_THREE_PIECES_MAX_LANES, where
# they hold fewer lanes than its other tile (two pieces, or the padded 16384-lane tile) and z and dy are bf16 (its
# rows held: ACT_BWD_HOLD): 11008 as 8192 + 2048 + 1024 lanes (11264, not 8192 + 4096), 12289-14336 as 8192 + 4096 +
# up to 2048 (not 16384 read twice). Its stages as its wide pieces' (ACT_BWD_STAGES where they fit BWD_SMEM_BYTES:
# 11008 and 13312 pipelined, 14336 not). It had lost before its rows were held (H200, 24-*: 13312 0.35 -> 0.37
# unpipelined, 0.15 pipelined); built for sm_90 now, 14336's padded tile spills 184 bytes a thread (1976 instructions),
# its three pieces 112 (1368, unpipelined), 11008's two pieces 64, its three 32. Measured on an H100
# (benchmarks/norm_tiles.py --bwd-setting through `PHASES=act scripts/issue22_row_cap_gpu.sh`, the backward launcher,
# the rule then against three pieces in two alternating rounds of one process, fraction of a same-size copy;
# benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/2-gelu/): [16384, 11008] 0.65 -> 0.78 (1.20x), [16384,
# 13312] 0.49 -> 0.64 (1.31x), [16384, 14336] 0.50 -> 0.62 (1.24x; pipelined with a 172 KiB budget 1.24x too), [2048,
# 14336] 0.43 -> 0.52 (1.20x), [32768, 14336] 0.51 -> 0.63 (1.24x). Rows whose three pieces would hold more lanes
# (9000: 8192 + 512 + 1024 against 8192 + 1024; 12288 has no third) keep their tile; fp16 and fp32 too. False: off.
ACT_BWD_THREE_PIECES = True
# NOTE: the weight / bias gradient accumulators of rows in two wide pieces (past BWD_PIECES_MAX_LANES, pipelined, not
# the pre-residual forms: _early_acc) take the row before its sums are reduced, not after its stores: dy then dies
# before the reductions and fewer values stay live across them (LayerNorm at 11008, sm_90: 56 bytes of spill a
# thread, not 64; + GELU 160, not 232). The same sums in the same order (the same bits in the interpreter). Measured
# on an H200 (benchmarks/norm_tiles.py, the code before and after in alternating processes, two rounds each,
# fraction of a same-size copy; launch-rules/24-three-pieces-2026-12-03-h200/2-early/, and 3-final/ with the order
# forced either way in one process): [16384, 11008] LayerNorm and post-residual 0.79 -> 0.90, + GELU 0.44 -> 0.49;
# [16384, 12288] 0.81 -> 0.88, + GELU 0.46 -> 0.52; [4096, 11008] 0.71 -> 0.79; [2048, 11008] 0.62 -> 0.66; RMSNorm
# and 9216 within 0.01. Where it lost it is not taken: the pre-residual forms (0.78 -> 0.76 at 11008, 0.75 -> 0.73 at
# 9216), the GELU form's unpipelined 1024-lane tails (9216: 0.53 -> 0.48), three pieces (13312: 0.65 -> 0.62). The
# narrower pieces (one row of at most 8192 lanes) keep the order they were measured with (plain forms unchanged by
# it at 4304; the GELU form's mixed: 4304 0.52 -> 0.61, 6144 0.63 -> 0.66, 2880-5120 and 8704 0.01-0.02 lower).
# None: the rule; True / False: forced (benchmarks' A/B runs).
BWD_EARLY_ACC = None
BWD_WIDE_PIECES_RMS_MAX_TAIL = 4096
ACT_BWD_WIDE_PIECES = True
# NOTE: the GELU form's backward in pieces. Its loop issues about twice the plain LayerNorm's instructions an element
# (the activation's input and derivative recomputed: 35 SASS instructions a useful element at 4096 against 17,
# benchmarks/kernel_stats.py --loop), which puts it past the ~43 at which an H200's issue rate rather than its memory
# bounds the kernel wherever a padded tile's idle lanes count too (1152 in 2048 lanes: 72; 3072 in 4096: 49; 5120 in
# 8192: 59). So it takes the two pieces at any tail (3072 = 2048 + 1024 and 6144 = 4096 + 2048 too, which the plain
# forms leave padded: their memory, not their issue, bounds them), the fewest warps that keep a thread at
# ACT_BWD_PIECE_LANES_PER_THREAD lanes or fewer under its ACT_BWD_MAXNREG cap (17: 4608's 18 on 8 warps spilled 24
# bytes and ran 0.44 -> 0.39, 16 warps 0.46; 4304 on 8 warps 0.52, on 16 0.41), up to 16 warps, and as many programs
# a multiprocessor as the cap lets its registers hold (_act_programs_per_sm). Built for sm_90 the pieces spill
# nothing at 2304-6144 (96-124 registers; 8 bytes at 17 lanes a thread: 2176, 4352; 32-40 at 8200-8704, as the
# padded 8192-lane tile) and issue 42-46 instructions a useful element. Rows of 8193-8704 lanes (8192 + a tail of up
# to 512) leave the padded 16384-lane tile that reads them twice. Measured on an H200 (benchmarks/norm_tiles.py
# --bwd-setting, the backward launcher, the rule before -> this one in alternating rounds of one process, fraction
# of a same-size copy; benchmarks/results/launch-rules/18-gelu-pieces-2026-12-01-h200/): [16384, n] 2176 0.47 ->
# 0.50, 2880 0.54 -> 0.63, 3072 0.57 -> 0.66, 4608 0.44 -> 0.48, 5120 0.48 -> 0.57, 5504 0.51 -> 0.57, 6144 0.56 ->
# 0.63, 8200 0.24 -> 0.50, 8704 0.25 -> 0.51; [32768, 3072 / 6144] 0.60 / 0.58 -> 0.69 / 0.64; [2048, 3072 / 6144]
# 0.33 / 0.40 -> 0.36 / 0.47; 2304, 2560, 3584, 4304, 7168 and 4096 within 0.01. 2 stages lost 25-30% everywhere, 4
# matched 3; 2 programs a multiprocessor instead of the registers' count lost up to 20% (4 warps: 768 0.51 -> 0.39).
# Rows under ACT_BWD_PIECES_FROM_LANES keep the padded tile: one row a block in pieces won at [32768, 768 / 1152 /
# 1536] (0.49 / 0.46 / 0.55 -> 0.51 / 0.52 / 0.58) but lost at [2048, 1152] (0.19 -> 0.15).
ACT_BWD_PIECES_FROM_LANES = 2048
# NOTE: the GELU form's backward takes the tanh-form derivative in packed fp16 where x is bf16
# (activation.gelu_tanh_grad_f16x2: two elements an instruction, one MUFU for two; the loop 35.2 -> 32.2 SASS
# instructions a useful element at 4096, 39.8 -> 37.8 at 4304). Measured on an H200 (torch 2.11, triton 3.6,
# benchmarks/results/launch-rules/31-gelu-f16x2-2026-12-05-h200/): the backward launcher (norm_tiles.py, processes
# on / off / on, fraction of a same-size copy) 0.80 -> 0.84-0.85 at [16384, 4096], 0.53 -> 0.55 at 4304, 0.43 ->
# 0.46 at 1152, 0.58 -> 0.59 at 5120, 0.35 -> 0.40 at [8192, 14336], 0.47 -> 0.46 at [8192, 11008] (left: one
# cell, -2%); the op's forward + backward (bench ops, CUDA graphs) 1.04x / 1.03x / 1.10x at [16384, 4096] /
# [16384, 4304] / [8192, 14336], its gradients' error against fp32 1.66e-3 -> 1.73e-3 (PyTorch eager in bf16:
# 2.4e-3; torch.compile 1.7e-3). fp16 and fp32 keep the fp32 derivative (their PyTorch forms are more exact).
# BLOCKFUSE_GELU_GRAD_F16X2=0 (read at import): the fp32 derivative everywhere, for A/B runs; off with
# BLOCKFUSE_FAST_MUFU=0 too (no inline PTX in the kernels: activation.FAST_MUFU).
GELU_GRAD_F16X2: tl.constexpr = tl.constexpr(os.environ.get("BLOCKFUSE_GELU_GRAD_F16X2", "1") != "0" and FAST_MUFU)
ACT_BWD_PIECE_LANES_PER_THREAD = 17
ACT_BWD_PIECE_LANES_PER_WARP = 32 * ACT_BWD_PIECE_LANES_PER_THREAD
ACT_BWD_PIECE_MIN_WARPS = 4
ACT_BWD_PIECE_MAX_WARPS = 16
ACT_BWD_PIECES_MAX_LANES = ACT_BWD_PIECE_LANES_PER_WARP * ACT_BWD_PIECE_MAX_WARPS
ACT_BWD_PIECES_ANY_TAIL = True
# Elements per program tile in the forward and backward kernels, elements per warp, and
# backward programs per multiprocessor for rows up to 4096 wide (each program keeps its own
# partial weight gradient; wider rows use one program per multiprocessor). Tuned on an
# H200 with CUDA-graph timing: benchmarks/norm_tiles.py sweeps them.
FWD_TILE_ELEMENTS = 4096
BWD_TILE_ELEMENTS = 4096
# NOTE: the weight and bias gradients of rows read in chunks (past BWD_MAX_LANES) by a kernel of their own.
# The chunked backward kept them in a program's row of partial sums, read and written once a row block (16 bytes
# a column in fp32, against 12 a row of that block's data), and with 2 programs a multiprocessor those rows
# and the blocks' second reads outgrew L2; on an H200 (bf16, [16384, 18944 / 28672], bench ops sweep with
# --widths) its forward + backward ran 0.37 of a copy's bandwidth for LayerNorm (0.75-0.83x torch.compile) and
# 0.51-0.55 for RMSNorm (0.84-0.88x). _norm_bwd_weight_kernel instead walks the rows down BWD_WEIGHT_COLUMNS
# columns (read again: 4 bytes an element more than the minimum, no read-modify-write), and the chunked
# backward writes dx only. 0: off.
BWD_WEIGHT_KERNEL_FROM_LANES = 16385
# NOTE: with the weight gradients out of it, the chunked backward's own tile (plain forms): 16 warps, and one row
# a block where the chunk is 4096 lanes (2048-lane chunks keep CHUNK_TILE_ELEMENTS' four rows). Measured on an H200
# (benchmarks/norm_tiles.py --bwd-setting, alternating rounds in one process; launch-rules/30-wide-weight-*/2-tiles),
# backward's fraction of a copy, LayerNorm / RMSNorm, the 8-warp tile of 2 rows x 4096 (160 registers a thread as
# Triton 3.6 builds it for sm_90: one program a multiprocessor) -> this (64: two programs of 16 warps):
# [16384, 18944] 0.40 / 0.38 -> 0.49 / 0.50, [16384, 28672] 0.43 / 0.41 ->
# 0.47 / 0.48, [4096, 32768] 0.41 / 0.39 -> 0.44 / 0.46; [16384, 16400] (2048-lane chunks) on 16 warps 0.41 / 0.38
# -> 0.42 / 0.44, where two rows a block took 0.37 / 0.42. The GELU form keeps its tile (not measured). 0: off.
BWD_CHUNK_WARPS = 16
BWD_CHUNK_ONE_ROW_LANES = 4096
BWD_WEIGHT_COLUMNS = 256
BWD_WEIGHT_ROWS = 16
BWD_WEIGHT_WARPS = 4
BWD_WEIGHT_STAGES = 3
BWD_WEIGHT_PROGRAMS_PER_SM = 4
BWD_PROGRAMS_PER_SM = 2
FWD_ELEMENTS_PER_WARP = 1024
FWD_MIN_WARPS = 4  # the plain forward's floor (benchmarks/norm_tiles.py --fwd-knob FWD_MIN_WARPS=4,2 times others)
BWD_ELEMENTS_PER_WARP = 1024
# NOTE: the plain backward's warps and dz's form, measured together on an H200 (torch 2.11, triton 3.6; the
# backward launcher alone, CUDA-graph replays, benchmarks/results/launch-rules/7-two-fma/): 1024 elements a warp
# (32 a thread) against the 512 before, and dz as two multiply-adds on per-row constants (_input_grad), lifted
# LayerNorm's backward at every width up to 8192 lanes, of a same-size copy: 1152 0.45 -> 0.51, 2560 0.65 ->
# 0.69, 4304 0.62 -> 0.67, 5120 0.74 -> 0.81, 4096 and 8192 within 0.01 (RMSNorm 0.00-0.02 up). sm_90 SASS of
# the loop (benchmarks/kernel_stats.py --loop): 22.5 -> 20.8 instructions an element at 4096, 47.9 -> 44.1 at
# 4304 with 512 a warp (and one select an element less: _norm_bwd_math's NOTE). But the two-FMA form keeps
# more of the tile live (LayerNorm at [8192, 1152], 8 warps: 118 -> 161 registers a thread, as triton 3.9
# compiles it); where ptxas must fit 128 registers (16 warps: 512 threads; the GELU form's cap) it spilled
# 360 -> 776 bytes a thread at 16384 lanes and the LayerNorm backward at [8192, 11008] fell from 0.34 to 0.08
# of copy. So the two-FMA form only up to BWD_TWO_FMA_MAX_WARPS warps and without a register cap.
BWD_TWO_FMA_MAX_WARPS = 8
# Backward pipeline depth: tl.range's pipeliner copies the loads STAGES - 1 row blocks ahead into
# shared memory (cp.async): more bytes in flight than the register prefetch of the next row block
# that the kernel used before, without the registers. The depth is chosen from bytes (_bwd_stages): the
# fewest stages that keep BWD_BYTES_IN_FLIGHT bytes of real columns (z and dy) in flight a multiprocessor,
# at most BWD_MAX_STAGES, and no more than BWD_SMEM_BYTES of stage buffers a multiprocessor (padded lanes take
# their slots there too). Where it was measured (H200, CUDA-graph timing, benchmarks/norm_tiles.py):
# * [16384, 4096] bf16 (2 programs a multiprocessor, 16 KiB of z and dy a row block): 3 stages, 64 KiB in
#   flight; the plain LayerNorm backward went from 0.78 (register prefetch) to 0.87 of copy (2 stages: 0.66,
#   4: 0.81, 96 KiB: past the point where more in flight pays, the buffers cost occupancy);
# * widths that pad their tile hold fewer real bytes a stage (4304 in 8192 lanes: 53%), so the fixed 3 stages
#   left less in flight. The rule's 4-5 stages against 3, backward at [8192, N], LayerNorm / RMSNorm, of a 1 GiB
#   copy: 2880 0.64 / 0.72 -> 0.69 / 0.76, 4304 0.57 / 0.65 -> 0.57 / 0.72, 5120 0.67 / 0.73 -> 0.68 / 0.84,
#   1152 0.42 / 0.51 -> 0.42 / 0.56; where it gives 3 stages (4096, 2048, 8192 bf16) the kernel is unchanged
#   (benchmarks/results/launch-rules/5-stages/).
BWD_BYTES_IN_FLIGHT = 64 * 1024
BWD_MAX_STAGES = 5
BWD_SMEM_BYTES = 160 * 1024
BWD_STAGES = None  # a fixed depth instead of the rule (benchmarks/norm_tiles.py's grid sets it)
# NOTE: a row block of more than BWD_PIPELINE_MAX_LANES lanes (one program of 16 warps a multiprocessor) runs
# without the pipeliner (1 stage). Its stage buffers were 64-192 KiB (z and dy of a 16384-lane row, twice with
# BWD_RELOAD: 196 KiB at 2 stages), and the copies into them and out again cost more than the overlap gave: the
# unpipelined loads go to registers, and a reloaded row comes from L2. Measured (H200, the backward launcher,
# BWD_STAGES 2 -> 1 in one process, fraction of a same-size copy, benchmarks/results/launch-rules/11-pre-tile/):
# LayerNorm 11008 0.38 -> 0.48, 14336 0.43 -> 0.59, 16384 0.54 -> 0.59; RMSNorm 0.52 -> 0.54, 0.57 -> 0.60,
# 0.57 -> 0.61.
# The wide rows' two pieces (8192 + up to 4096 lanes, the NOTE above BWD_WIDE_PIECES_MAX_LANES; and the three pieces
# to 13312 lanes, the NOTE above BWD_THREE_PIECES_MAX_LANES: tiles of up to 14336 lanes) take the pipeliner, with the
# depth rule's stages, in 16-bit dtypes where two stages fit BWD_SMEM_BYTES (bf16: 3 stages of z and dy, 2 with the
# pre-residual form's ds; fp32 keeps one stage, as before: its 80-147 KiB stages were never run on a GPU): one program
# a multiprocessor had its loads and its math in turn. Measured on an H200 (benchmarks/norm_tiles.py --bwd-setting, 1
# -> the rule's stages in alternating rounds of one process, [16384, n] bf16, fraction of a same-size copy;
# benchmarks/results/launch-rules/21-wide-pipeline-2026-12-01-h200/): LayerNorm 9216 0.71 -> 0.94, 10240 0.76 -> 0.96,
# 11008 0.71 -> 0.79, 12288 0.76 -> 0.82; RMSNorm 9216 / 10240 0.74 / 0.78 -> 0.97 / 0.97; pre-residual LayerNorm (2
# stages) 11008 0.64 -> 0.78; 2 stages where the rule gives 3 lost (LayerNorm 11008 0.54). The padded 16384-lane tile
# keeps one stage (above). Run again with the rule's other cells (launch-rules/21-*, 2-final, 3-tails): 11008 RMSNorm
# 0.68 -> 0.97 (its 4096-lane tails in pieces now too), pre-residual RMSNorm 0.77 -> 0.84, [32768, 11008] LayerNorm
# 0.73 -> 0.81; 8960 = 8192 + 768 0.70 -> 0.93. The one loss: 9000 = 8192 + 808 in the pre-residual forms (LayerNorm
# 0.69 -> 0.64, RMSNorm 0.71 -> 0.69), where 8960 and 9216 gain (0.71 -> 0.73 / 0.75), left as measured. The GELU
# form's pieces past its own (ACT_BWD_PIPELINE_MAX_LANES, 8192 + up to 512) take ACT_BWD_STAGES stages where their
# tail gives a thread ACT_BWD_PIPELINE_TAIL_BYTES or more and the stages fit BWD_SMEM_BYTES: 9472 / 9728 / 10752 /
# 11008 / 12288 (tails of 2048-4096 lanes) 0.42 / 0.42 / 0.37 / 0.37 / 0.39 -> 0.53 / 0.54 / 0.44 / 0.44 / 0.46, where
# a 1024-lane tail (4 bytes a thread: 8960, 9000, 9216) lost (0.52 -> 0.38).
BWD_PIPELINE_MAX_LANES = 14336
BWD_PIPELINE_FULL_LANES = 8192  # (row blocks up to here keep 2 stages even past BWD_SMEM_BYTES, as measured)
ACT_BWD_PIPELINE_MAX_LANES = 8192
ACT_BWD_PIPELINE_TAIL_BYTES = 8
# NOTE: a tile of BWD_RELOAD_FROM_LANES lanes or more (one row of 16384: 16 warps, at most 128 registers a thread)
# cannot hold its row (z, dy and w in fp32) and the weight and bias gradients' accumulators at once: 5 x 32 values a
# thread. LayerNorm's backward spilled 352 bytes a thread there (656 with GELU; kernel_stats.py --rule) and ran at
# 0.35-0.42 of copy. With RELOAD it loads each row twice, once for the row sums and once for the gradients (w too),
# so that only the accumulators stay live across the sums, the second read hitting L2 behind the first. Spill 88
# bytes. Pipelined (2 stages, both reads staged in 196 KiB of shared memory) it paid for LayerNorm only (11008
# 0.35 -> 0.38, 14336 0.40 -> 0.43, 16384 0.42 -> 0.53 of copy; RMSNorm lost 2-5%; launch-rules/10-reload/), and
# the rule took the forms with two accumulators. Without the pipeliner (BWD_PIPELINE_MAX_LANES) it pays for every
# form (H200, the backward launcher, BWD_RELOAD off / on in one process, fraction of a same-size copy at 9000 /
# 11008 / 14336 / 16384 wide, benchmarks/results/launch-rules/11-pre-tile/): LayerNorm 0.28 / 0.32 / 0.38 / 0.43
# -> 0.41 / 0.48 / 0.59 / 0.59, RMSNorm 0.46 / 0.53 / 0.60 / 0.61 -> 0.56 / 0.66 / 0.79 / 0.66, pre-residual
# RMSNorm 0.48 / 0.57 / 0.65 / 0.65 -> 0.65 / 0.74 / 0.83 / 0.76, LayerNorm + GELU 0.11 / 0.14 / 0.16 / 0.22 ->
# 0.25 / 0.30 / 0.34 / 0.45.
BWD_RELOAD_FROM_LANES = 16384
BWD_RELOAD = None  # force the choice (benchmarks' A/B runs)
# NOTE: a bf16 row held across its row sums as it was loaded (16 bits an element) and widened to fp32 again after
# them (_widen_bf16_again), rather than kept as fp32 tiles (the pieces: z, dy, xhat and wdy live across the sums)
# or read again (RELOAD): half the registers for the row, for ~4 instructions an element more (xhat and w * dy made
# again). Compiled for sm_90 (kernel_stats.py --rule --set BWD_HOLD_PIECES=False/True), the wide pieces' spills go:
# LayerNorm 11008 56 -> 0 bytes a thread, 13312 104 -> 0, pre-residual 11008 88 -> 48. Measured on an H200 (the
# backward launcher, the settings alternating in one process, fraction of a same-size copy,
# benchmarks/results/launch-rules/33-hold-2026-12-05-h200/): [8192 / 32768, 11008] LayerNorm 0.87 / 0.93 -> 0.92 /
# 1.00, pre-residual 0.75 / 0.80 -> 0.77 / 0.81, [8192, 13312] 0.64 -> 0.65, RMSNorm (no spill before) 0.93-0.99
# unchanged; where nothing spilled (2048-4304 lanes) no gain, and the GELU form, whose recomputed derivative costs
# ~12 instructions an element more, lost at 2560 (0.59 -> 0.50) and 11008 (0.46 -> 0.45) and won only at 4304 (0.51
# -> 0.57; its one spilling cell): so the plain forms' wide pieces only (BWD_HOLD_PIECES), where their fp32 tiles
# spill: from 24 lanes a thread (BWD_HOLD_PIECES_LANES_PER_THREAD; 9216 / 10240 wide hold 18 / 20, spilling nothing).
# Instead of the padded 16384-lane tile's second read (BWD_HOLD): LayerNorm / RMSNorm at 16384 wide, no lane padded,
# 0.62 / 0.69 -> 0.69 / 0.71; where the tile pads (14336: 0.59 / 0.80 -> 0.53 / 0.65), in pre mode (16384: 0.79 ->
# 0.65) and with GELU (0.50 -> 0.45) it lost (more spill: 88 -> 136 bytes at 14336), so only there. The rule against
# both off on an H100 (2-confirm/ there): LayerNorm / post-residual 11008-12288 1.02-1.04x, 13312 1.12x, 16384
# 1.10-1.18x; RMSNorm 1.00-1.02x; 9216 / 10240 unchanged (held at any lanes, LayerNorm at 10240 lost 18%).
BWD_HOLD_PIECES = True
BWD_HOLD_PIECES_LANES_PER_THREAD = 24  # (the fp32 tiles spill from 24 lanes a thread on 16 warps: 11008-13312 wide)
BWD_HOLD = True
# NOTE: the GELU form's pieces held too, in one of two ways: 1 z and dy (the activation's derivative computed again
# after the sums, ~12 instructions an element), 2 z and d(affine output) rounded to bf16 (as PyTorch's GELU backward
# hands it to the norm's backward; the derivative computed once, ~4 instructions an element more; the gradients stay
# within twice PyTorch's bf16 error against float64, tests/ops/test_norm.py). On sm_90 builds the second takes the
# fp32 pieces' spills away where they have them, past 16 lanes a thread (48-152 bytes -> 0 at 4160-10240 wide, 160 ->
# 56 at 11008). Measured on an H100 (the launcher, alternating in one process, results/launch-rules/33-hold-*/
# 2-confirm/), against the fp32 pieces, [8192, n]: 4304 1.14x, 8704 1.03x, 9216 1.17x, 10240 1.05x, 11008 1.06x
# (the first form 0.92-1.14x); where nothing spilled (2560, 3072, 6144: 10-12 lanes a thread) 0.97-1.00x. So the
# second form, past ACT_BWD_HOLD_LANES_PER_THREAD lanes a thread.
ACT_BWD_HOLD = 2
ACT_BWD_HOLD_LANES_PER_THREAD = 16
# NOTE: with a GELU after the norm (layer_norm_gelu) the backward holds more registers (the bias
# and the activation's derivative). 8 warps a program then need about 166 registers a thread,
# which leaves one program per multiprocessor and too few bytes in flight (0.46 of copy); capped
# at 128 (ptxas' maxnreg) two programs fit, and with EVEN_N nothing spills. Measured on an H200
# at [16384, 4096] (benchmarks/NOTES.md, "Norms"): backward 0.54 (4 warps, register
# prefetch, before the cheaper sigmoid in ops/activation.py) -> 0.74 of copy. Its forward takes the
# plain norm's tile (one row of 4 warps): 0.83 -> 0.92 once the sigmoid was cheaper.
ACT_BWD_ELEMENTS_PER_WARP = 512
ACT_BWD_WARPS_PER_SM = None  # None: as many warps as the register cap lets a multiprocessor hold (_act_programs_per_sm)
# Register cap (rows in one tile or in pieces), so that two 8-warp programs fit a multiprocessor.
ACT_BWD_MAXNREG = 128
SM_REGISTERS = 65536  # 32-bit registers a multiprocessor (sm_80 - sm_90)
ACT_BWD_STAGES = 3
# NOTE: a row in pieces reduces its sums across the program once rather than once a piece (the backward's two row
# sums in _norm_bwd_pieces; with FWD_JOINT_SUMS the forward's statistics, _row_statistics_of_pieces): each piece is
# first summed within its threads to one partial a thread (_thread_partials: the reshape names the load's layout, so
# no value moves), the pieces' partials are added, and the row's threads exchange those. A piece narrower than the
# program's threads keeps the sums piece by piece (joint_sums_threads). sm_90 builds with Triton 3.6: the backward's
# loop 3 barriers where 6-9, a third to a half of the shuffles, 3-12% fewer instructions a useful element (LayerNorm
# + GELU at 14336 41.7 -> 38.4); the forward's one-row programs 5 barriers where 11
# (benchmarks/results/launch-rules/41-joint-sums-2026-12-07/). Off until timed on a card against the sums piece by
# piece (no machine came on 2026-12-07): `PHASES="bwd fwd tests" bash scripts/issue22_joint_sums_gpu.sh PACK`.
JOINT_SUMS = False
FWD_JOINT_SUMS = True  # (with JOINT_SUMS: the forward's statistics of a row in pieces alike)
# A backward of at most this many elements (rows in one tile each) runs as one program that writes
# the weight / bias gradients itself (one launch, no partial sums): at such sizes a launch costs more
# host time than the whole kernel takes on the GPU.
DIRECT_MAX_ELEMENTS = 32768


# ----------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------


@triton.jit
def _column_mask(offs, cols, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    """``cols < N`` for the columns ``cols`` (= chunk start + ``offs``). With EVEN_N (N a multiple
    of BLOCK_N) every column is real and the mask is ``offs < BLOCK_N``, which the compiler folds
    to a constant: no per-element predicates (at N = 4096 LayerNorm + GELU's backward then needs
    no spill and 9% fewer instructions)."""
    if EVEN_N:
        return offs < BLOCK_N
    else:
        return cols < N


@triton.jit
def _chunk_columns(c, offs, row_mask, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    """Chunk ``c`` of a row read in chunks: its columns, their mask, and the (rows, columns) tile's mask."""
    cols = c * BLOCK_N + offs
    col_mask = _column_mask(offs, cols, N, BLOCK_N, EVEN_N)
    return cols, col_mask, row_mask[:, None] & col_mask[None, :]


@triton.jit
def _load_norm_input(
    X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_DROPOUT: tl.constexpr, EVICT: tl.constexpr,
):
    """The fp32 tile that is normalized: ``x``, or ``residual + dropout(x)`` in pre mode. ``EVICT``: the loads'
    cache hint (a row read in chunks keeps its first reads in L2 for the passes after them)."""
    z = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                eviction_policy=EVICT).to(tl.float32)
    if MODE == _PRE:
        z = _residual_plus_dropout(z, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                                   HAS_DROPOUT, EVICT)
    return z


@triton.jit
def _residual_plus_dropout(v, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                           HAS_DROPOUT: tl.constexpr, EVICT: tl.constexpr):
    """``residual + dropout(v)`` in fp32 for the (rows, cols) tile ``v``: the pre mode's input, the post mode's
    output."""
    v = dropout_tile(v, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    return v + tl.load(RES + rows[:, None] * stride_res + cols[None, :], mask=mask, other=0.0,
                       eviction_policy=EVICT).to(tl.float32)


@triton.jit
def _norm_fwd_kernel(
    X,  # (M, N) rows to normalize (pre mode: the branch output added to the residual)
    RES,  # (M, N) residual stream, or None
    W,  # (N,) weight, or None
    B,  # (N,) bias, or None
    Y,  # (M, N) output
    S,  # (M, N) pre mode: residual + dropout(x), the next residual stream; else None
    MEAN,  # (M,) fp32 row means (LayerNorm with STATS), or None
    RSTD,  # (M,) fp32 reciprocal standard deviations (STATS), or None
    SEED,  # (1,) int64 dropout seed, or None
    stride_x, stride_res, stride_y, stride_s,  # row strides (the last dimension is contiguous)
    M, N, eps, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,  # 0, or _GELU_TANH / _GELU_ERF applied after the affine (no residual)
    STATS: tl.constexpr,  # write the statistics the backward reads (not for inference)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,  # N is a multiple of BLOCK_N, or TAIL (the first BLOCK_N are real): no column masks
    TAIL: tl.constexpr,  # (one chunk) the row goes on past BLOCK_N: BLOCK_T more columns, masked at N
    BLOCK_T: tl.constexpr,
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    STAGES: tl.constexpr,  # 0: a program a row block; else persistent programs (one row a block, one chunk), each
    #                        walking a strided set of rows with its loads STAGES - 1 rows ahead, the weight and bias
    #                        loaded once (the NOTE above FWD_PERSIST_STAGES: forward_stages)
    EARLY_RESIDUAL: tl.constexpr = False,  # (post mode, STAGES = 0, one chunk) the residual loaded with x, before
    #                                        the statistics (the NOTE above FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES)
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # the weight's and bias's loads' hint (the NOTE above FWD_WB_EVICT)
    THREADS: tl.constexpr = 0,  # TAIL: the program's threads, where the pieces' sums are reduced jointly
    #                             (joint_sums_threads; 0: piece by piece)
):
    N, stride_x, stride_res = N * VEC, stride_x * VEC, stride_res * VEC
    stride_y, stride_s = stride_y * VEC, stride_s * VEC
    # The body without an FP8 output (FP8 = 0: its branch is not compiled in).
    if STAGES == 0:
        _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, None, None, None, None, tl.program_id(0), stride_x,
                       stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, 0, IS_RMS, MODE, HAS_W,
                       HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N, NUM_CHUNKS,
                       EVEN_N, TAIL, BLOCK_T, 0, 1, EARLY_RESIDUAL=EARLY_RESIDUAL, WB_EVICT=WB_EVICT,
                       THREADS=THREADS)
    else:
        # (the weight and bias in registers across the rows: the NOTE above FWD_PERSIST_STAGES)
        wh, bh, wt, bt = _weight_and_bias_values(W, B, N, HAS_W, HAS_B, BLOCK_N, EVEN_N, TAIL, BLOCK_T, WB_EVICT)
        for block in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.num_programs(0), num_stages=STAGES):
            _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, None, None, None, None, block, stride_x,
                           stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, 0, IS_RMS, MODE,
                           HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N,
                           NUM_CHUNKS, EVEN_N, TAIL, BLOCK_T, 0, 1, wh, bh, wt, bt, True, THREADS=THREADS)


@triton.jit
def _weight_and_bias_values(W, B, N, HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK_N: tl.constexpr,
                            EVEN_N: tl.constexpr, TAIL: tl.constexpr, BLOCK_T: tl.constexpr, EVICT: tl.constexpr):
    """The weight and bias of a row's head columns and of its tail, (1, BLOCK_N) and (1, BLOCK_T) fp32 (the body's
    WB_VALUES); 0.0 for what the norm has not (NOTE: a jit function returning None fails in triton 3.6)."""
    offs = tl.arange(0, BLOCK_N)
    head_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
    cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
    wh, bh, wt, bt = 0.0, 0.0, 0.0, 0.0
    if HAS_W:
        wh = tl.load(W + offs, mask=head_mask, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
        if TAIL:
            wt = tl.load(W + cols_t, mask=cols_t < N, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
    if HAS_B:
        bh = tl.load(B + offs, mask=head_mask, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
        if TAIL:
            bt = tl.load(B + cols_t, mask=cols_t < N, other=0.0, eviction_policy=EVICT).to(tl.float32)[None, :]
    return wh, bh, wt, bt


@triton.jit
def _norm_fwd_fp8_kernel(
    X,  # (M, N) rows to normalize (pre mode: the branch output added to the residual)
    RES,  # (M, N) residual stream, or None
    W,  # (N,) weight, or None
    B,  # (N,) bias, or None
    Y,  # (M, N) post mode: residual + dropout(norm(x)) in x's dtype, the next residual stream; else None
    S,  # (M, N) pre mode: residual + dropout(x), the next residual stream; else None
    Q,  # (M, N) e4m3 output (row-major): the normalized output times the reciprocal of its scale; FP8_AMAX: the
    #     normalized output in x's dtype
    Q_SCALE,  # rowwise: (M,) fp32 scale of each row; tensorwise: () fp32 scale of the call; FP8_AMAX: None
    HISTORY,  # tensorwise: (H,) fp32 amaxes of earlier calls, newest first; else None
    AMAX,  # tensorwise, FP8_AMAX: (1,) fp32 this call's amax (zero before the call; atomic max); rowwise: None
    SEED,  # (1,) int64 dropout seed, or None
    MEAN,  # (M,) fp32 row means (LayerNorm with STATS), or None
    RSTD,  # (M,) fp32 reciprocal standard deviations (STATS), or None
    stride_x, stride_res, stride_y, stride_s,  # row strides (the last dimension is contiguous)
    M, N, eps, dropout_p, dropout_scale,
    history_len,  # H (tensorwise)
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STATS: tl.constexpr,  # write the statistics a backward reads (a block's training step)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,
    TAIL: tl.constexpr,
    BLOCK_T: tl.constexpr,
    FP8: tl.constexpr,  # fp8.FP8_ROWWISE, fp8.FP8_TENSORWISE or fp8.FP8_AMAX
    BLOCK_H: tl.constexpr,  # tensorwise: H rounded up to a power of two
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    PDL: tl.constexpr,  # tensorwise: the history's roll may be placed from now (a programmatic dependent launch)
    THREADS: tl.constexpr = 0,  # as in _norm_fwd_kernel: the plain output's arithmetic, so its scale is the same
):
    if PDL:
        gdc_launch_dependents()  # (the roll waits for this kernel's end before it reads: fp8.roll_amax_history)
    N, stride_x, stride_res = N * VEC, stride_x * VEC, stride_res * VEC
    stride_y, stride_s = stride_y * VEC, stride_s * VEC
    # The body with an FP8 output (constexprs as in _norm_fwd_kernel).
    _norm_fwd_body(X, RES, W, B, Y, S, MEAN, RSTD, SEED, Q, Q_SCALE, HISTORY, AMAX, tl.program_id(0), stride_x,
                   stride_res, stride_y,
                   stride_s, M, N, eps, dropout_p, dropout_scale, history_len, IS_RMS, MODE, HAS_W, HAS_B,
                   HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, STATS, BLOCK_M, BLOCK_N, NUM_CHUNKS, EVEN_N, TAIL,
                   BLOCK_T, FP8, BLOCK_H, THREADS=THREADS)


@triton.jit
def _norm_fwd_body(
    X, RES, W, B, Y, S, MEAN, RSTD, SEED, Q, Q_SCALE, HISTORY, AMAX,  # as in the two kernels above
    block,  # the row block: rows block * BLOCK_M ... + BLOCK_M - 1
    stride_x, stride_res, stride_y, stride_s, M, N, eps, dropout_p, dropout_scale, history_len,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, STATS: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr, EVEN_N: tl.constexpr, TAIL: tl.constexpr,
    BLOCK_T: tl.constexpr,
    FP8: tl.constexpr,  # 0: y in Y (x's dtype); else e4m3 in Q with its scale (fp8.FP8_ROWWISE / FP8_TENSORWISE)
    BLOCK_H: tl.constexpr,
    WH=None, BH=None, WT=None, BT=None,  # WB_VALUES: the weight and bias of the head's columns and of the tail's
    WB_VALUES: tl.constexpr = False,  # (FP8 = 0, one chunk) W and B given as values, loaded once a program
    EARLY_RESIDUAL: tl.constexpr = False,  # (the plain kernel's)
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # (the plain kernel's)
    THREADS: tl.constexpr = 0,  # (the plain kernel's)
):
    """The norms' forward, one program's BLOCK_M rows. NOTE: one body, two kernels: the kernel without an FP8
    output keeps its signature (benchmarks/kernel_stats.py and the host-path benchmark launch it by name), and
    with FP8 = 0 the FP8 branch below is not compiled in."""
    rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    offs = tl.arange(0, BLOCK_N)
    # NOTE: float scalars cast to fp32: Inductor may pass them to a user kernel as fp64.
    eps = tl.cast(eps, tl.float32)
    dropout_p = tl.cast(dropout_p, tl.float32)
    dropout_scale = tl.cast(dropout_scale, tl.float32)

    # Statistics. With one chunk the row stays in registers for the output pass: BLOCK_N columns, plus
    # BLOCK_T more (the tail, masked at N) when TAIL.
    r, r_t = None, None  # (EARLY_RESIDUAL: the residual, loaded with x)
    if NUM_CHUNKS == 1:
        mask = row_mask[:, None] & _column_mask(offs, offs, N, BLOCK_N, EVEN_N)[None, :]
        z = _load_norm_input(X, RES, rows, offs, mask, stride_x, stride_res, seed, N, dropout_p,
                             dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
        if TAIL:
            cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
            mask_t = row_mask[:, None] & (cols_t < N)[None, :]
            z_t = _load_norm_input(X, RES, rows, cols_t, mask_t, stride_x, stride_res, seed, N, dropout_p,
                                   dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
        if EARLY_RESIDUAL and MODE == _POST:
            r = tl.load(RES + rows[:, None] * stride_res + offs[None, :], mask=mask, other=0.0).to(tl.float32)
            if TAIL:
                r_t = tl.load(RES + rows[:, None] * stride_res + cols_t[None, :], mask=mask_t, other=0.0
                              ).to(tl.float32)
        if TAIL and BLOCK_M == 1 and (FP8 != 0 or BLOCK_T < LAYOUT_TAIL_LANES or THREADS > 0):
            mean, var = _row_statistics_of_pieces(z, z_t, mask, mask_t, N, IS_RMS, BLOCK_M, BLOCK_N, BLOCK_T, THREADS,
                                                  128 // X.dtype.element_ty.primitive_bitwidth)
        elif IS_RMS:
            mean = tl.zeros([BLOCK_M], dtype=tl.float32)
            sq = tl.sum(z * z, axis=1)
            if TAIL:
                sq += tl.sum(z_t * z_t, axis=1)
            var = sq / N
        else:
            total = tl.sum(z, axis=1)
            if TAIL:
                total += tl.sum(z_t, axis=1)
            mean = total / N
            if EVEN_N:
                # NOTE: no select an element: the head has no masked columns, and a row past M loads as zeros,
                # so its mean and its deviations are 0 already (sm_90: one FSEL an element less).
                diff = z - mean[:, None]
            else:
                diff = tl.where(mask, z - mean[:, None], 0.0)
            if TAIL:
                # NOTE: a row this wide sums 32+ elements a thread in sequence: with a large mean (300 + randn,
                # 20000 wide) the mean came out several fp32 ulps off, 3x PyTorch's error in y (H200). The
                # deviations' own mean corrects it (and the variance: sum d^2 / N - shift^2). Each piece's two
                # sums in one reduction (_row_sums): a row of two pieces reduces 4 times, not 6 (the forward of
                # these rows is one row a program: its reductions are its latency).
                diff_t = tl.where(mask_t, z_t - mean[:, None], 0.0)
                sq, shift = _row_sums(diff * diff, diff)
                sq_t, shift_t = _row_sums(diff_t * diff_t, diff_t)
                shift = (shift + shift_t) / N
                mean += shift
                sq += sq_t
                sq -= shift * shift * N
            elif X.dtype.element_ty == tl.float32:
                # NOTE: fp32 rows correct their mean by the deviations' mean too (as rows in pieces do above): rows of
                # 300 + randn had y 2-3x PyTorch's error in 1-3 seeds of 20 at 760-4096 lanes (the fuzz, 2026-12-04/05;
                # the sum of 300s is rounded at 0.03 and more), at most 1.00x with it. 16-bit rows skip it: their
                # inputs' own rounding there (bf16: 2.0 at 300) dwarfs the sum's, and it would cost their kernels a
                # sum a row (their sm_90 code stays as it was: benchmarks/sass_digest.py).
                sq, shift = _row_sums(diff * diff, diff)
                shift = shift / N
                mean += shift
                sq -= shift * shift * N
            else:
                sq = tl.sum(diff * diff, axis=1)
            var = sq / N
    else:
        # NOTE: one read of the row for its statistics. LayerNorm's: each lane keeps a running mean and sum of
        # squared deviations of its columns (Welford's update), and two reductions merge the lanes (Chan's
        # formula): stable for rows with a large mean, where a sum and a sum of squares cancel, and two
        # reductions a row as a row held in registers has, where a mean and deviations per chunk had two a
        # chunk. The reads keep the row in L2 for the pass that writes (CHUNK_FIRST_EVICT).
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)  # RMSNorm: squares; LayerNorm: the running means
        m2 = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cols, _, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
            z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                 dropout_scale, MODE, HAS_DROPOUT, CHUNK_FIRST_EVICT)
            if IS_RMS:
                acc += z * z
            else:
                # A lane's columns so far are c + 1 wherever it holds one of the row's (every chunk before
                # is whole); a lane past N in the last chunk keeps what it had.
                delta = z - acc
                step = delta * (1.0 / tl.cast(c + 1, tl.float32))
                if EVEN_N:
                    acc += step
                    m2 += delta * (z - acc)
                else:
                    acc += tl.where(mask, step, 0.0)
                    m2 += tl.where(mask, delta * (z - acc), 0.0)
        if IS_RMS:
            mean = tl.zeros([BLOCK_M], dtype=tl.float32)
            var = tl.sum(acc, axis=1) / N
        else:
            last = (NUM_CHUNKS - 1) * BLOCK_N + offs < N
            lane_count = tl.where(last, NUM_CHUNKS, NUM_CHUNKS - 1).to(tl.float32)
            lane_count = tl.broadcast_to(lane_count[None, :], (BLOCK_M, BLOCK_N))
            # Chan's formula for the lanes as groups: the row's mean from theirs, then the sum of squared
            # deviations as the lanes' own plus each lane's count times its mean's squared deviation. The
            # deviations' own mean corrects the row's, as for a row in two pieces (300 + randn, 20000 wide: y's
            # error 2.6x PyTorch's without it, H200).
            mean = tl.sum(acc * lane_count, axis=1) / N
            spread = acc - mean[:, None]
            sq, shift = _row_sums(m2 + lane_count * spread * spread, lane_count * spread)
            shift = shift / N
            mean += shift
            var = sq / N - shift * shift
    rstd = 1.0 / tl.sqrt(var + eps)
    if STATS:
        if not IS_RMS:
            tl.store(MEAN + rows, mean, mask=row_mask)
        tl.store(RSTD + rows, rstd, mask=row_mask)

    # Normalize, affine, activation or residual; write.
    if FP8 == 0:
        w_head, b_head, w_tail, b_tail = W, B, W, B
        if WB_VALUES:
            w_head, b_head, w_tail, b_tail = WH, BH, WT, BT
        for c in range(NUM_CHUNKS):
            cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
            if NUM_CHUNKS > 1:
                z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                     dropout_scale, MODE, HAS_DROPOUT, CHUNK_LAST_EVICT)
            _norm_fwd_write(z, w_head, b_head, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N,
                            stride_res, stride_y, stride_s, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
                            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, WB_VALUES, r, EARLY_RESIDUAL, WB_EVICT)
        if TAIL:
            _norm_fwd_write(z_t, w_tail, b_tail, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd, seed, N,
                            stride_res, stride_y, stride_s, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
                            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, WB_VALUES, r_t, EARLY_RESIDUAL, WB_EVICT)
    else:
        # The FP8 output: y in e4m3 over its scale (Q, Q_SCALE), and the residual stream in x's dtype (s in
        # pre mode, y in post mode). The scale: rowwise, the row's amax, from y in fp32 before any FP8 store;
        # tensorwise, from the history (delayed scaling, ops/fp8.py), this call's amax folded into AMAX.
        if FP8 == FP8_TENSORWISE:
            scale = delayed_scale(HISTORY, history_len, BLOCK_H)
        elif FP8 == FP8_AMAX:
            scale = 1.0  # (no scale: the output goes out in x's dtype, its amax folded)
        else:
            if NUM_CHUNKS > 1:
                # NOTE: a row wider than the registers (past FWD_MAX_LANES: rare) takes one more pass, for its
                # amax before anything is written: x read a third time (mostly from L2), y computed twice.
                amax = tl.zeros([BLOCK_M], dtype=tl.float32)
                for c in range(NUM_CHUNKS):
                    cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                    z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                         dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
                    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res,
                                        dropout_p, dropout_scale, X.dtype.element_ty, MODE, HAS_W, HAS_B,
                                        HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, True)
                    amax = tl.maximum(amax, row_amax(y, mask))
                row_scale = scale_of(amax, E4M3_MAX)
                scale = row_scale[:, None]
        if FP8 == FP8_ROWWISE and NUM_CHUNKS == 1:
            # The row is in registers (z, and z_t for a tail): y of all of it, then its amax, then the stores.
            col_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
            mask = row_mask[:, None] & col_mask[None, :]
            y = _norm_fwd_write_stream(z, W, B, RES, Y, S, rows, offs, col_mask, mask, mean, rstd, seed, N,
                                       stride_res, stride_y, stride_s, dropout_p, dropout_scale, X.dtype.element_ty,
                                       MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION)
            amax = _rows_amax(y, mask, row_mask, EVEN_N)
            if TAIL:
                y_t = _norm_fwd_write_stream(z_t, W, B, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd,
                                             seed, N, stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                             X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                             ACTIVATION)
                amax = tl.maximum(amax, row_amax(y_t, mask_t))
            row_scale = scale_of(amax, E4M3_MAX)
            inverse = reciprocal(row_scale)[:, None]
            tl.store(Q + rows[:, None] * N + offs[None, :], to_e4m3(y, inverse, Q), mask=mask)
            if TAIL:
                tl.store(Q + rows[:, None] * N + cols_t[None, :], to_e4m3(y_t, inverse, Q), mask=mask_t)
        else:
            # The scale is known (tensorwise, or a wide row's extra pass): each piece is written as it comes.
            inverse = reciprocal(scale)
            amax = tl.zeros([BLOCK_M], dtype=tl.float32)  # tensorwise: each row's, over every piece
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                if NUM_CHUNKS > 1:
                    z = _load_norm_input(X, RES, rows, cols, mask, stride_x, stride_res, seed, N, dropout_p,
                                         dropout_scale, MODE, HAS_DROPOUT, NO_HINT)
                y = _norm_fwd_write_stream(z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N,
                                           stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                           X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                           ACTIVATION)
                if FP8 == FP8_AMAX:
                    written = y.to(Q.dtype.element_ty)
                    tl.store(Q + rows[:, None] * N + cols[None, :], written, mask=mask)
                    amax = tl.maximum(amax, _rows_amax(written.to(tl.float32), mask, row_mask, EVEN_N))
                else:
                    tl.store(Q + rows[:, None] * N + cols[None, :], to_e4m3(y, inverse, Q), mask=mask)
                if FP8 == FP8_TENSORWISE:
                    amax = tl.maximum(amax, _rows_amax(y, mask, row_mask, EVEN_N))
            if TAIL:  # tensorwise or FP8_AMAX only (a rowwise tail is in the branch above)
                y_t = _norm_fwd_write_stream(z_t, W, B, RES, Y, S, rows, cols_t, cols_t < N, mask_t, mean, rstd,
                                             seed, N, stride_res, stride_y, stride_s, dropout_p, dropout_scale,
                                             X.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                                             ACTIVATION)
                if FP8 == FP8_AMAX:
                    written_t = y_t.to(Q.dtype.element_ty)
                    tl.store(Q + rows[:, None] * N + cols_t[None, :], written_t, mask=mask_t)
                    amax = tl.maximum(amax, row_amax(written_t.to(tl.float32), mask_t))
                else:
                    tl.store(Q + rows[:, None] * N + cols_t[None, :], to_e4m3(y_t, inverse, Q), mask=mask_t)
                    amax = tl.maximum(amax, row_amax(y_t, mask_t))
        if FP8 == FP8_ROWWISE:
            tl.store(Q_SCALE + rows, row_scale, mask=row_mask)
        else:
            if FP8 == FP8_TENSORWISE:
                if tl.program_id(0) == 0:
                    tl.store(Q_SCALE, scale)
            # NOTE: one atomic a program at most (its rows' amax, masked rows excluded; fp8.fold_amax); the roll
            # into the history is a second, one-program launch (fp8.roll_amax_history), after every program has
            # folded its amax.
            fold_amax(AMAX, tl.max(amax, axis=0))


@triton.jit
def _rows_amax(y, mask, row_mask, EVEN_N: tl.constexpr):
    """:func:`row_amax` of a tile whose columns are all in the row (EVEN_N): the rows past M masked once a row,
    not once an element (sm_90: one FSEL an element less; such a row's |y| is finite, then dropped)."""
    if EVEN_N:
        return tl.where(row_mask, tl.max(tl.abs(y), axis=1), 0.0)
    return row_amax(y, mask)


@triton.jit
def _row_statistics_of_pieces(z, z_t, mask, mask_t, N, IS_RMS: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr = 0, BLOCK_T: tl.constexpr = 0, THREADS: tl.constexpr = 0,
                              UNIT: tl.constexpr = 0):
    """(mean, var) of one row (BLOCK_M = 1) held as a head ``z`` and a tail ``z_t``: each piece's sums reduced to
    scalars before they are added, the results (BLOCK_M,) vectors made from the scalars. NOTE: (FP8 forward only)
    the head's and the tail's row sums otherwise carry their pieces' layouts, and adding them made the compiler
    move the head to the tail's layout; the FP8 output's amax then read y in that layout too, computed a second
    time beside the store's (sm_90, a row of 4096 + 256 lanes: 212-226 registers a thread, against 80-96 this way
    and the plain kernel's 80). THREADS > 0: each sum of the two pieces reduced across the program once, from the
    pieces' partial sums a thread (_thread_partials; the NOTE above JOINT_SUMS)."""
    if IS_RMS:
        mean = 0.0
        if THREADS > 0:
            var = tl.sum(_thread_partials(z * z, BLOCK_N, THREADS, UNIT)
                         + _thread_partials(z_t * z_t, BLOCK_T, THREADS, UNIT), axis=0) / N
        else:
            var = (tl.sum(tl.sum(z * z, axis=1), axis=0) + tl.sum(tl.sum(z_t * z_t, axis=1), axis=0)) / N
    else:
        if THREADS > 0:
            mean = tl.sum(_thread_partials(z, BLOCK_N, THREADS, UNIT) + _thread_partials(z_t, BLOCK_T, THREADS, UNIT),
                          axis=0) / N
        else:
            mean = (tl.sum(tl.sum(z, axis=1), axis=0) + tl.sum(tl.sum(z_t, axis=1), axis=0)) / N
        diff = tl.where(mask, z - mean, 0.0)
        diff_t = tl.where(mask_t, z_t - mean, 0.0)
        # the deviations' mean corrects the mean (see the NOTE in _norm_fwd_body), with each piece's two sums in
        # one reduction and the same arithmetic as there: the FP8 output's scale is that of the plain output
        if THREADS > 0:
            sq = _thread_partials(diff * diff, BLOCK_N, THREADS, UNIT) + _thread_partials(diff_t * diff_t, BLOCK_T,
                                                                                          THREADS, UNIT)
            shift = _thread_partials(diff, BLOCK_N, THREADS, UNIT) + _thread_partials(diff_t, BLOCK_T, THREADS, UNIT)
            sq, shift = _row_sums(sq[None, :], shift[None, :])
            shift = tl.sum(shift, axis=0) / N
            sq = tl.sum(sq, axis=0)
        else:
            sq, shift = _row_sums(diff * diff, diff)
            sq_t, shift_t = _row_sums(diff_t * diff_t, diff_t)
            shift = (tl.sum(shift, axis=0) + tl.sum(shift_t, axis=0)) / N
            sq = tl.sum(sq, axis=0) + tl.sum(sq_t, axis=0)
        sq -= shift * shift * N
        var = sq / N
        mean += shift
    return tl.zeros([BLOCK_M], dtype=tl.float32) + mean, tl.zeros([BLOCK_M], dtype=tl.float32) + var


@triton.jit
def _column_vector(P, rows, cols, mask):
    """A per-column vector (the weight or bias) at ``cols``, in fp32, loaded in the shape of the rows' tile
    (BLOCK_M, BLOCK_N): each row's copy comes from L1.

    NOTE: loaded as a (BLOCK_N,) or (1, BLOCK_N) vector the compiler gives it a layout of its own (fewer elements
    a thread), and then moves it, or the whole tile computed from it, through shared memory into the other
    layout: a convert_layout of up to BLOCK_M * BLOCK_N fp32 with its barriers in every program (the LayerNorm +
    FP8 forward at 4096 wide, sm_90: 13 barriers against 5 this way; at 1152, two rows a program, two whole-tile
    moves, one of them before the FP8 store)."""
    return tl.load(P + (rows[:, None] * 0 + cols[None, :]), mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _norm_fwd_value(
    z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p, dropout_scale,
    OUT_DTYPE: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, TILE_VECTORS: tl.constexpr,
    WB_VALUES: tl.constexpr = False,  # W and B are the weight and bias values at cols, (1, BLOCK) fp32, not pointers
    r=None, R_GIVEN: tl.constexpr = False,  # post mode: ``r`` is the residual at (rows, cols), fp32, loaded already
    WB_EVICT: tl.constexpr = tl.constexpr(""),  # the weight's and bias's loads' cache hint
):
    """The forward's output ``y`` in fp32 for the columns ``cols`` of the rows ``rows`` (``z``: their fp32
    normalized input); ``OUT_DTYPE``, the output's dtype, is what CAST_BEFORE_WEIGHT rounds to. TILE_VECTORS: the
    weight and bias loaded in the tile's shape (:func:`_column_vector`; the FP8 forward, whose layouts they
    otherwise moved; the plain forward's vectors already share its layout there, and loaded in the tile's shape
    they cost it registers: 80 -> 96 post-residual at 4096, sm_90)."""
    y = (z - mean[:, None]) * rstd[:, None]
    if HAS_W:
        if WB_VALUES:
            w = W
        elif TILE_VECTORS:
            w = _column_vector(W, rows, cols, mask)
        else:
            w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=WB_EVICT).to(tl.float32)[None, :]
        if CAST_BEFORE_WEIGHT:
            y = y.to(OUT_DTYPE).to(tl.float32)
        y = y * w
    if HAS_B:
        if WB_VALUES:
            y += B
        elif TILE_VECTORS:
            y += _column_vector(B, rows, cols, mask)
        else:
            y += tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=WB_EVICT).to(tl.float32)[None, :]
    if ACTIVATION != 0:
        y = gelu(y, ACTIVATION == _GELU_TANH)
    if MODE == _POST:
        if R_GIVEN:
            y = dropout_tile(y, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT) + r
        else:
            y = _residual_plus_dropout(y, RES, rows, cols, mask, stride_res, seed, N, dropout_p, dropout_scale,
                                       HAS_DROPOUT, NO_HINT)
    return y


@triton.jit
def _norm_fwd_write(
    z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, stride_y, stride_s,
    dropout_p, dropout_scale, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr,
    WB_VALUES: tl.constexpr = False, r=None, R_GIVEN: tl.constexpr = False, WB_EVICT: tl.constexpr = tl.constexpr(""),
):
    """Writes the forward's outputs for the columns ``cols`` of the rows ``rows`` (``z``: their fp32
    normalized input): ``s`` in pre mode, and ``y``. WB_VALUES, ``r`` and R_GIVEN: as in :func:`_norm_fwd_value`."""
    if MODE == _PRE:
        tl.store(S + rows[:, None] * stride_s + cols[None, :], z.to(S.dtype.element_ty), mask=mask)
    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p,
                        dropout_scale, Y.dtype.element_ty, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                        ACTIVATION, False, WB_VALUES, r, R_GIVEN, WB_EVICT)
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _norm_fwd_write_stream(
    z, W, B, RES, Y, S, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, stride_y, stride_s,
    dropout_p, dropout_scale, OUT_DTYPE: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr,
):
    """The FP8 forward's outputs in x's dtype for the columns ``cols`` (the residual stream: ``s`` in pre
    mode, ``y`` in post mode); returns ``y`` in fp32, for the FP8 output."""
    if MODE == _PRE:
        tl.store(S + rows[:, None] * stride_s + cols[None, :], z.to(S.dtype.element_ty), mask=mask)
    y = _norm_fwd_value(z, W, B, RES, rows, cols, col_mask, mask, mean, rstd, seed, N, stride_res, dropout_p,
                        dropout_scale, OUT_DTYPE, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                        True)
    if MODE == _POST:
        tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    return y


@triton.jit
def _norm_bwd_math(
    z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr,
):
    """One fp32 tile of the backward: (xhat, xhat as the weight saw it, d(affine output) (dy
    after dropout, or times the activation's derivative), w * that). ``b`` is read only with
    an activation.

    NOTE: xhat is not masked: on masked lanes it is -mean * rstd (z loaded as 0; 0 on rows past M, whose
    statistics load as 0), but dy loads as 0 there, so every product with it (the row sums, dz's terms, the
    weight and bias gradients) is 0 and masked stores drop the rest. One select an element less."""
    xhat = (z - mean[:, None]) * rstd[:, None]
    if MODE == _POST:
        dy = dropout_tile(dy, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    if ACTIVATION != 0:
        # NOTE: the activation's input is recomputed from x and the statistics (as the
        # forward computed it, in fp32) instead of being saved: one tensor less to write in
        # the forward and to read here.
        h = xhat
        if HAS_W:
            h = h * w[None, :]
        if HAS_B:
            h = h + b[None, :]
        if ACTIVATION == _GELU_TANH and GELU_GRAD_F16X2 and OUT_DTYPE == tl.bfloat16:
            dy = dy * gelu_tanh_grad_f16x2(h)
        else:
            dy = dy * gelu_grad(h, ACTIVATION == _GELU_TANH)
    if HAS_W:
        wdy = dy * w[None, :]
    else:
        wdy = dy
    if CAST_BEFORE_WEIGHT:
        xhat_w = xhat.to(OUT_DTYPE).to(tl.float32)
    else:
        xhat_w = xhat
    return xhat, xhat_w, dy, wdy


@triton.jit
def _load_weight_and_bias(W, B, cols, col_mask, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACTIVATION: tl.constexpr,
                          EVICTION: tl.constexpr):
    """fp32 ``(w, b)`` of the columns ``cols``: w zeros without a weight; b the bias that the backward needs to
    recompute an activation's input, else ``w`` as a placeholder that is never read (so the path without an
    activation is unchanged)."""
    w = tl.zeros(cols.shape, dtype=tl.float32)
    if HAS_W:
        w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    b = w
    if ACTIVATION != 0:
        if HAS_B:
            b = tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    return w, b


@triton.jit
def _norm_bwd_chunk(
    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr,
):
    """Loads one chunk of a wide row (z, dy, w, and b with an activation) and returns
    ``_norm_bwd_math`` of it."""
    z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w, b = _load_weight_and_bias(W, B, cols, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    return _norm_bwd_math(z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale,
                          MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)


# NOTE: Triton's interpreter sums a tile with ``np.sum`` over the reduced axis. Over a row of a 2-D tile that is
# numpy's pairwise summation (errors of a few ulps, like the GPU's per-thread partial sums merged as a tree), but
# over the row axis of the joined (rows, N, 2) tile below it is a strided reduction, which numpy adds element after
# element: a sum of squares of 1024 bf16 values came out 14 ulps off (1.6e-6) where ``tl.sum`` of the 2-D tile was
# off by 0.6. The CPU tests and the fuzz then saw norms whose statistics and weight gradients were 5-20x less exact
# than PyTorch's at widths with a tail piece (5120, 8193, 11008: the 2026-12-05 fuzz, benchmarks/results/fuzz/), an
# error of the interpreter, not of the kernel. So the interpreter sums the two tiles one by one.
if interpreter_enabled():

    @triton.jit
    def _row_sums(a, b):
        """Both rows' sums of two tiles (the interpreter's form: the NOTE above)."""
        return tl.sum(a, axis=1), tl.sum(b, axis=1)

else:

    @triton.jit
    def _row_sums(a, b):
        """Both rows' sums of two tiles in one reduction: the tiles joined on a new minor axis and summed over the
        row, so the warps exchange their partial sums once, where two ``tl.sum`` calls exchange twice (LayerNorm's
        backward, sm_90: 4 -> 2 barriers a row block in the loop; benchmarks/results/launch-rules/6-paired-sums).

        NOTE: not ``tl.reduce((a, b), combine_fn=...)``, which reduces once on the GPU too (3 barriers) but runs
        its combine function element by element in Triton's interpreter: 25x slower there, the CPU tests' time."""
        return tl.split(tl.sum(tl.join(a, b), axis=1))


@triton.jit
def _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS: tl.constexpr, TWO_FMA: tl.constexpr):
    """d(normalized input) = (wdy - xhat * c1 - c2) * rstd from the row means c1 = mean(xhat * w * dy) and
    c2 = mean(w * dy). TWO_FMA: as ``wdy * rstd + (xhat * (-c1 * rstd) + (-c2 * rstd))`` on per-row constants,
    two multiply-adds an element once the compiler contracts them, where the form above takes three
    instructions; but ptxas keeps more of the tile live for it (the launcher's NOTE above BWD_TWO_FMA_MAX_WARPS)."""
    if TWO_FMA:
        c1r = -c1 * rstd
        if IS_RMS:
            return wdy * rstd[:, None] + xhat * c1r[:, None]
        c2r = -c2 * rstd
        return wdy * rstd[:, None] + (xhat * c1r[:, None] + c2r[:, None])
    if IS_RMS:
        return (wdy - xhat * c1[:, None]) * rstd[:, None]
    return (wdy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]


@triton.jit
def _store_input_grad(
    DX, DRES, DS, rows, cols, mask, dz, seed, N, stride_dx, stride_dres, stride_ds, dropout_p, dropout_scale,
    MODE: tl.constexpr, HAS_DS: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):
    """Writes d(input): dz, plus the residual gradient in pre mode (and its dropout)."""
    if MODE == _PRE:
        if HAS_DS:
            dz += tl.load(DS + rows[:, None] * stride_ds + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_DROPOUT:
            tl.store(DRES + rows[:, None] * stride_dres + cols[None, :], dz.to(DRES.dtype.element_ty), mask=mask)
        dz = dropout_tile(dz, seed, rows, cols, N, dropout_p, dropout_scale, HAS_DROPOUT)
    tl.store(DX + rows[:, None] * stride_dx + cols[None, :], dz.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS: tl.constexpr):
    """(mean, rstd) of ``rows`` as the forward saved them; RMSNorm's mean zeros (it saves none)."""
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    if IS_RMS:
        mean = tl.zeros([rows.shape[0]], dtype=tl.float32)
    else:
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
    return mean, rstd


# NOTE: a bf16 row held across its sums as loaded and widened to fp32 twice, once for the sums and once for the
# gradients (the NOTE above BWD_HOLD_PIECES: where that pays). The two widenings are written as different
# instructions (shifts, then byte permutes: the same values) so that neither LLVM nor ptxas merges them into one fp32
# copy kept across the sums, which is what spills. The interpreter widens with ``.to`` (it cannot run PTX).
if interpreter_enabled():

    @triton.jit
    def _widen_bf16(x):
        """bf16 -> fp32."""
        return x.to(tl.float32)

    @triton.jit
    def _widen_bf16_again(x):
        """bf16 -> fp32 (the second widening of a held row)."""
        return x.to(tl.float32)

else:

    @triton.jit
    def _widen_bf16(x):
        """bf16 -> fp32 by shifts (two elements an instance: the low one shifted up, the high one masked)."""
        wide = tl.inline_asm_elementwise("{ shl.b32 $0, $2, 16; and.b32 $1, $2, 0xffff0000; }", "=r,=r,r",
                                         [x.to(tl.int16, bitcast=True)], dtype=tl.int32, is_pure=True, pack=2)
        return wide.to(tl.float32, bitcast=True)

    @triton.jit
    def _widen_bf16_again(x):
        """bf16 -> fp32 by byte permutes: the same values as _widen_bf16, by other instructions."""
        wide = tl.inline_asm_elementwise(
            "{ .reg .b32 zr; mov.b32 zr, 0; prmt.b32 $0, $2, zr, 0x1044; prmt.b32 $1, $2, zr, 0x3244; }",
            "=r,=r,r", [x.to(tl.int16, bitcast=True)], dtype=tl.int32, is_pure=True, pack=2)
        return wide.to(tl.float32, bitcast=True)


@triton.jit
def _widen(x, HOLD: tl.constexpr):
    """A loaded tile in fp32: the first of a held row's two widenings (HOLD), else a plain conversion."""
    if HOLD:
        return _widen_bf16(x)
    return x.to(tl.float32)


@triton.jit
def _round_held_gradient(dh, w, HAS_W: tl.constexpr):
    """HOLD == 2 (the GELU form): d(affine output) rounded to bf16 to be held across the row sums (as PyTorch's GELU
    backward hands it to the norm's), and (its bf16 bits, its widened value, w times that)."""
    dh_h = dh.to(tl.bfloat16)
    dh = _widen_bf16(dh_h)
    wdh = dh
    if HAS_W:
        wdh = dh * w[None, :]
    return dh_h, dh, wdh


@triton.jit
def _held_gradient_math(z_h, dh_h, w, mean, rstd, HAS_W: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr,
                        OUT_DTYPE: tl.constexpr):
    """HOLD == 2 after the row sums: (xhat, xhat as the weight saw it, d(affine output), w times that) from the held
    bf16 z and d(affine output), widened again; the activation's derivative is not computed again."""
    xhat = (_widen_bf16_again(z_h) - mean[:, None]) * rstd[:, None]
    dh = _widen_bf16_again(dh_h)
    wdh = dh
    if HAS_W:
        wdh = dh * w[None, :]
    xhat_w = xhat
    if CAST_BEFORE_WEIGHT:
        xhat_w = xhat.to(OUT_DTYPE).to(tl.float32)
    return xhat, xhat_w, dh, wdh


@triton.jit
def _norm_bwd_rows(
    z, dy, w, b, dw_acc, db_acc, DY, Z, W, B, DS, MEAN, RSTD, DX, DRES, seed, rows, offs, col_mask, M, N,
    stride_dy, stride_z, stride_ds, stride_dx, stride_dres, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, TWO_FMA: tl.constexpr,
    RELOAD: tl.constexpr, HOLD: tl.constexpr = 0, ACC: tl.constexpr = True,
):
    """The backward of one block of whole rows (z and dy as loaded): writes dx (and the residual's
    gradient) and returns the weight and bias gradient accumulators with this block added (not with ACC False:
    the weight kernel makes them, WEIGHT_KERNEL). RELOAD: w and b
    are loaded here (``w``, ``b`` unused), and z, dy, w and b loaded again after the row sums, so that only
    the accumulators stay live across them (the launcher's rule: _bwd_reload); with HOLD (bf16 z and dy) the
    row is not loaded again but held as loaded, in bf16, and widened again (the NOTE above _widen_bf16)."""
    row_mask = rows < M
    mask = row_mask[:, None] & col_mask[None, :]
    mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
    if RELOAD:
        w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "evict_last")
    dy_held = dy  # (as loaded: the math below names its result dy)
    xhat, xhat_w, dy, wdy = _norm_bwd_math(
        _widen(z, HOLD), _widen(dy, HOLD), w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p, dropout_scale,
        MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, DX.dtype.element_ty)
    if IS_RMS:
        c1 = tl.sum(xhat * wdy, axis=1) / N
        c2 = c1
    else:
        c1, c2 = _row_sums(xhat * wdy, wdy)
        c1, c2 = c1 / N, c2 / N
    if RELOAD:
        if HOLD:
            z = _widen_bf16_again(z)
            dy = _widen_bf16_again(dy_held)
        else:
            # NOTE: the row read again (from L2: the first read went through it moments ago) rather than held
            # across the row sums: other cache hints than the first loads', so that the compiler keeps both.
            z = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0,
                        eviction_policy="evict_first")
            dy = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0,
                         eviction_policy="evict_first")
        w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z.to(tl.float32), dy.to(tl.float32), w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p,
            dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, DX.dtype.element_ty)
    dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
    _store_input_grad(DX, DRES, DS, rows, offs, mask, dz, seed, N, stride_dx, stride_dres,
                      stride_ds, dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
    if HAS_W and ACC:
        dw_acc += dy * xhat_w
    if HAS_B and ACC:
        db_acc += dy
    return dw_acc, db_acc


@triton.jit
def _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols, col_mask, dw_acc, db_acc,
                        HAS_W: tl.constexpr, HAS_B: tl.constexpr, DIRECT: tl.constexpr):
    """A program's weight / bias gradients of the columns ``cols``: written as they are (DIRECT: the one
    program saw every row) or as this program's partial sums (row ``pid`` of PARTIAL)."""
    if DIRECT:
        if HAS_W:
            tl.store(DW + cols, tl.sum(dw_acc, axis=0).to(DW.dtype.element_ty), mask=col_mask)
        if HAS_B:
            tl.store(DB + cols, tl.sum(db_acc, axis=0).to(DB.dtype.element_ty), mask=col_mask)
    else:
        if HAS_W:
            tl.store(PARTIAL + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
        if HAS_B:
            tl.store(PARTIAL + (num_programs + pid) * N + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def _piece_row_sums(xhat, wdy, IS_RMS: tl.constexpr):
    """A piece's two row sums of the backward, each reduced to a scalar (``s2`` is ``s1`` for RMSNorm)."""
    if IS_RMS:
        s1 = tl.sum(tl.sum(xhat * wdy, axis=1), axis=0)
        s2 = s1
    else:
        s1, s2 = _row_sums(xhat * wdy, wdy)
        s1, s2 = tl.sum(s1, axis=0), tl.sum(s2, axis=0)
    return s1, s2


@triton.jit
def _thread_partials(t, PIECE: tl.constexpr, THREADS: tl.constexpr, UNIT: tl.constexpr):
    """A (1, PIECE) tile of one row summed to (THREADS,): each thread's own elements added, nothing exchanged. The
    load's layout gives thread j the UNIT-element vectors at j * UNIT + k * THREADS * UNIT (fewer a vector where the
    piece is narrower: PIECE // THREADS); the reshape names that order, so it moves no value (sm_90 builds: no
    shuffle, no shared memory). Any other order would still add the same elements, only through shared memory."""
    V: tl.constexpr = UNIT if PIECE >= THREADS * UNIT else PIECE // THREADS
    return tl.sum(tl.sum(tl.reshape(t, [PIECE // (THREADS * V), THREADS, V]), axis=2), axis=0)


@triton.jit
def _joint_row_sums(xhat, wdy, xhat_t, wdy_t, xhat_u, wdy_u, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                    BLOCK_U: tl.constexpr, THREADS: tl.constexpr, UNIT: tl.constexpr, IS_RMS: tl.constexpr):
    """The backward's two row sums of a row in pieces (``s2`` is ``s1`` for RMSNorm) in one reduction across the
    program: each piece summed within its threads first (_thread_partials), the pieces' partials added, then one
    exchange between the threads for the row (the NOTE above JOINT_SUMS)."""
    p1 = _thread_partials(xhat * wdy, BLOCK_N, THREADS, UNIT) + _thread_partials(xhat_t * wdy_t, BLOCK_T, THREADS, UNIT)
    if BLOCK_U > 1:
        p1 += _thread_partials(xhat_u * wdy_u, BLOCK_U, THREADS, UNIT)
    if IS_RMS:
        s1 = tl.sum(p1, axis=0)
        s2 = s1
    else:
        p2 = _thread_partials(wdy, BLOCK_N, THREADS, UNIT) + _thread_partials(wdy_t, BLOCK_T, THREADS, UNIT)
        if BLOCK_U > 1:
            p2 += _thread_partials(wdy_u, BLOCK_U, THREADS, UNIT)
        s1, s2 = _row_sums(p1[None, :], p2[None, :])
        s1, s2 = tl.sum(s1, axis=0), tl.sum(s2, axis=0)
    return s1, s2


@triton.jit
def _add_to_accumulators(dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u,
                         xhat_w_u, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_U: tl.constexpr):
    """The weight / bias gradients' accumulators of a row's pieces (the third one's only with HAS_U) with the row
    added, in this order (_norm_bwd_pieces places the call: EARLY_ACC)."""
    if HAS_W:
        dw_acc += dy * xhat_w
        dw_acc_t += dy_t * xhat_w_t
        if HAS_U:
            dw_acc_u += dy_u * xhat_w_u
    if HAS_B:
        db_acc += dy
        db_acc_t += dy_t
        if HAS_U:
            db_acc_u += dy_u
    return dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u


@triton.jit
def _norm_bwd_pieces(
    DY, DS, Z, W, B, MEAN, RSTD, DX, DRES, PARTIAL, DW, DB, seed, pid, num_programs, num_blocks, M, N,
    stride_dy, stride_ds, stride_z, stride_dx, stride_dres, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr, CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_U: tl.constexpr, STAGES: tl.constexpr, DIRECT: tl.constexpr,
    TWO_FMA: tl.constexpr, RELOAD: tl.constexpr, EARLY_ACC: tl.constexpr, HOLD: tl.constexpr = 0,
    THREADS: tl.constexpr = 0,
):
    """The backward of rows held in pieces (the launcher's rule: backward_rule), one row a block: the head's
    BLOCK_N columns (all in the row), the tail's BLOCK_T (masked at N) and, where BLOCK_U > 1, a third piece of
    BLOCK_U after them (masked at N; the tail then inside the row: 13312 = 8192 + 4096 + 1024), each with its own
    weight / bias gradient accumulators. The row sums reduce each piece to a scalar before they are added (as the
    forward's _row_statistics_of_pieces: a piece of another layout than the head's is never moved into it). RELOAD:
    the weight (and bias) loaded again each row rather than held (_bwd_reload); EARLY_ACC: the accumulators take the
    row before its sums are reduced rather than after its stores (_early_acc)."""
    tl.static_assert(BLOCK_M == 1, "a row in pieces is one row a block")
    OUT_DTYPE: tl.constexpr = DX.dtype.element_ty
    offs = tl.arange(0, BLOCK_N)
    cols_t = BLOCK_N + tl.arange(0, BLOCK_T)
    cols_u = BLOCK_N + BLOCK_T + tl.arange(0, BLOCK_U)
    col_mask = offs < BLOCK_N  # (all true: the head is inside the row)
    if BLOCK_U > 1:
        col_mask_t = cols_t < BLOCK_N + BLOCK_T  # (all true: a third piece follows)
    else:
        col_mask_t = cols_t < N
    col_mask_u = cols_u < N
    w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    w_t, b_t = _load_weight_and_bias(W, B, cols_t, col_mask_t, HAS_W, HAS_B, ACTIVATION, "")
    w_u, b_u = _load_weight_and_bias(W, B, cols_u, col_mask_u, HAS_W, HAS_B, ACTIVATION, "")
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    dw_acc_t = tl.zeros([BLOCK_M, BLOCK_T], dtype=tl.float32)
    db_acc_t = tl.zeros([BLOCK_M, BLOCK_T], dtype=tl.float32)
    dw_acc_u = tl.zeros([BLOCK_M, BLOCK_U], dtype=tl.float32)
    db_acc_u = tl.zeros([BLOCK_M, BLOCK_U], dtype=tl.float32)
    for block in tl.range(pid, num_blocks, num_programs, num_stages=STAGES):
        rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        mask_t = row_mask[:, None] & col_mask_t[None, :]
        mask_u = row_mask[:, None] & col_mask_u[None, :]
        z_h = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0)
        dy_h = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0)
        z_t_h = tl.load(Z + rows[:, None] * stride_z + cols_t[None, :], mask=mask_t, other=0.0)
        dy_t_h = tl.load(DY + rows[:, None] * stride_dy + cols_t[None, :], mask=mask_t, other=0.0)
        z, dy, z_t, dy_t = _widen(z_h, HOLD), _widen(dy_h, HOLD), _widen(z_t_h, HOLD), _widen(dy_t_h, HOLD)
        if BLOCK_U > 1:
            z_u_h = tl.load(Z + rows[:, None] * stride_z + cols_u[None, :], mask=mask_u, other=0.0)
            dy_u_h = tl.load(DY + rows[:, None] * stride_dy + cols_u[None, :], mask=mask_u, other=0.0)
            z_u, dy_u = _widen(z_u_h, HOLD), _widen(dy_u_h, HOLD)
        mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
        if RELOAD:
            w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "evict_last")
            w_t, b_t = _load_weight_and_bias(W, B, cols_t, col_mask_t, HAS_W, HAS_B, ACTIVATION, "evict_last")
            w_u, b_u = _load_weight_and_bias(W, B, cols_u, col_mask_u, HAS_W, HAS_B, ACTIVATION, "evict_last")
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z, dy, w, b, mean, rstd, mask, seed, rows, offs, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        xhat_t, xhat_w_t, dy_t, wdy_t = _norm_bwd_math(
            z_t, dy_t, w_t, b_t, mean, rstd, mask_t, seed, rows, cols_t, N, dropout_p, dropout_scale, MODE, HAS_W,
            HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        if BLOCK_U > 1:
            xhat_u, xhat_w_u, dy_u, wdy_u = _norm_bwd_math(
                z_u, dy_u, w_u, b_u, mean, rstd, mask_u, seed, rows, cols_u, N, dropout_p, dropout_scale, MODE,
                HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
        else:
            # (names for _add_to_accumulators and _joint_row_sums, which leave them unread)
            dy_u, xhat_w_u, xhat_u, wdy_u = dw_acc_u, dw_acc_u, dw_acc_u, dw_acc_u
        if HOLD == 2:
            dh_h, dy, wdy = _round_held_gradient(dy, w, HAS_W)
            dh_t_h, dy_t, wdy_t = _round_held_gradient(dy_t, w_t, HAS_W)
            if BLOCK_U > 1:
                dh_u_h, dy_u, wdy_u = _round_held_gradient(dy_u, w_u, HAS_W)
        if EARLY_ACC:
            dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u = _add_to_accumulators(
                dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u, xhat_w_u,
                HAS_W, HAS_B, BLOCK_U > 1)
        if THREADS > 0:
            s1, s2 = _joint_row_sums(xhat, wdy, xhat_t, wdy_t, xhat_u, wdy_u, BLOCK_N, BLOCK_T, BLOCK_U, THREADS,
                                     128 // Z.dtype.element_ty.primitive_bitwidth, IS_RMS)
        else:
            s1, s2 = _piece_row_sums(xhat, wdy, IS_RMS)
            s1_t, s2_t = _piece_row_sums(xhat_t, wdy_t, IS_RMS)
            s1 += s1_t
            s2 += s2_t
            if BLOCK_U > 1:
                s1_u, s2_u = _piece_row_sums(xhat_u, wdy_u, IS_RMS)
                s1 += s1_u
                s2 += s2_u
        c1 = tl.zeros([BLOCK_M], dtype=tl.float32) + s1 / N
        c2 = tl.zeros([BLOCK_M], dtype=tl.float32) + s2 / N
        if HOLD == 2:
            # z and the rounded d(affine output) held, widened again (the NOTE above ACT_BWD_HOLD)
            xhat, xhat_w, dy, wdy = _held_gradient_math(z_h, dh_h, w, mean, rstd, HAS_W, CAST_BEFORE_WEIGHT, OUT_DTYPE)
            xhat_t, xhat_w_t, dy_t, wdy_t = _held_gradient_math(z_t_h, dh_t_h, w_t, mean, rstd, HAS_W,
                                                                CAST_BEFORE_WEIGHT, OUT_DTYPE)
            if BLOCK_U > 1:
                xhat_u, xhat_w_u, dy_u, wdy_u = _held_gradient_math(z_u_h, dh_u_h, w_u, mean, rstd, HAS_W,
                                                                    CAST_BEFORE_WEIGHT, OUT_DTYPE)
        elif HOLD:
            # the held bf16 row widened again (the NOTE above _widen_bf16): its fp32 tiles not kept across the sums
            xhat, xhat_w, dy, wdy = _norm_bwd_math(
                _widen_bf16_again(z_h), _widen_bf16_again(dy_h), w, b, mean, rstd, mask, seed, rows, offs, N,
                dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, OUT_DTYPE)
            xhat_t, xhat_w_t, dy_t, wdy_t = _norm_bwd_math(
                _widen_bf16_again(z_t_h), _widen_bf16_again(dy_t_h), w_t, b_t, mean, rstd, mask_t, seed, rows, cols_t,
                N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                OUT_DTYPE)
            if BLOCK_U > 1:
                xhat_u, xhat_w_u, dy_u, wdy_u = _norm_bwd_math(
                    _widen_bf16_again(z_u_h), _widen_bf16_again(dy_u_h), w_u, b_u, mean, rstd, mask_u, seed, rows,
                    cols_u, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT,
                    ACTIVATION, OUT_DTYPE)
        dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
        _store_input_grad(DX, DRES, DS, rows, offs, mask, dz, seed, N, stride_dx, stride_dres, stride_ds, dropout_p,
                          dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        dz_t = _input_grad(xhat_t, wdy_t, c1, c2, rstd, IS_RMS, TWO_FMA)
        _store_input_grad(DX, DRES, DS, rows, cols_t, mask_t, dz_t, seed, N, stride_dx, stride_dres, stride_ds,
                          dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        if BLOCK_U > 1:
            dz_u = _input_grad(xhat_u, wdy_u, c1, c2, rstd, IS_RMS, TWO_FMA)
            _store_input_grad(DX, DRES, DS, rows, cols_u, mask_u, dz_u, seed, N, stride_dx, stride_dres, stride_ds,
                              dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
        if not EARLY_ACC:
            dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u = _add_to_accumulators(
                dw_acc, db_acc, dw_acc_t, db_acc_t, dw_acc_u, db_acc_u, dy, xhat_w, dy_t, xhat_w_t, dy_u, xhat_w_u,
                HAS_W, HAS_B, BLOCK_U > 1)
    _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, offs, col_mask, dw_acc, db_acc, HAS_W, HAS_B, DIRECT)
    _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols_t, col_mask_t, dw_acc_t, db_acc_t, HAS_W, HAS_B,
                        DIRECT)
    if BLOCK_U > 1:
        _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, cols_u, col_mask_u, dw_acc_u, db_acc_u, HAS_W,
                            HAS_B, DIRECT)


@triton.jit
def _norm_bwd_kernel(
    DY,  # (M, N) gradient of the output y (post mode: of residual + dropout(norm(x)))
    DS,  # (M, N) pre mode: gradient of the residual-stream output s, or None
    Z,  # (M, N) the normalized input saved by the forward: x, or s in pre mode
    W,  # (N,) weight, or None
    B,  # (N,) bias with an activation (to recompute its input), else None
    MEAN,  # (M,) fp32 row means (LayerNorm only)
    RSTD,  # (M,) fp32 reciprocal standard deviations
    SEED,  # (1,) int64 dropout seed, or None
    DX,  # (M, N) gradient of x
    DRES,  # (M, N) pre mode with dropout: gradient of the residual (before dropout); else None
    PARTIAL,  # (2, G, N) fp32: per-program partial sums of dweight [0] and dbias [1], or None (DIRECT)
    DW,  # (N,) DIRECT: the weight gradient, written by the one program; else None
    DB,  # (N,) DIRECT: the bias gradient; else None
    stride_dy, stride_ds, stride_z, stride_dx, stride_dres,
    M, N, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr,
    MODE: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_DS: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,  # a code of dropout.dropout_code (0: no dropout)
    CAST_BEFORE_WEIGHT: tl.constexpr,
    ACTIVATION: tl.constexpr,  # as in the forward: 0, _GELU_TANH or _GELU_ERF
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
    EVEN_N: tl.constexpr,  # N is a multiple of BLOCK_N: no column masks
    TAIL: tl.constexpr,  # one row a block (BLOCK_M = 1) in two pieces: BLOCK_N lanes, then BLOCK_T (backward_rule)
    BLOCK_T: tl.constexpr,
    BLOCK_U: tl.constexpr,  # TAIL: a third piece of BLOCK_U lanes after the tail where > 1 (backward_rule)
    STAGES: tl.constexpr,  # software-pipeline depth of the row-block loop (tl.range num_stages)
    DIRECT: tl.constexpr,  # one program (rows in one tile): writes DW / DB itself, no partials to sum
    TWO_FMA: tl.constexpr,  # dz's form (_input_grad; the launcher's rule: _two_fma)
    RELOAD: tl.constexpr,  # read each row twice, not hold it across its sums (the launcher's rule: _bwd_reload)
    EARLY_ACC: tl.constexpr,  # TAIL: the weight / bias gradients added before the row sums (the rule: _early_acc)
    VEC: tl.constexpr,  # N and the row strides come in units of VEC (launch.row_units)
    WEIGHT_KERNEL: tl.constexpr = False,  # (chunks, or one tile) the weight / bias gradients left to
    # _norm_bwd_weight_kernel (weight_kernel_rule; not in pieces)
    HOLD: tl.constexpr = 0,  # bf16 rows (_bwd_hold): 1 held as loaded across the row sums, widened again (pieces,
    # or RELOAD's one tile instead of its second read); 2 (the GELU form's pieces) z and the rounded gradient held
    THREADS: tl.constexpr = 0,  # TAIL: the program's threads, where the pieces' row sums are reduced jointly
    # (joint_sums_threads; 0: piece by piece)
):
    N, stride_dy, stride_ds, stride_z = N * VEC, stride_dy * VEC, stride_ds * VEC, stride_z * VEC
    stride_dx, stride_dres = stride_dx * VEC, stride_dres * VEC
    # NOTE: each of the G programs walks a strided set of row blocks and keeps its own
    # partial weight / bias gradient; a second kernel sums the G partials in a fixed
    # order. No float atomics, so dweight and dbias are bitwise reproducible.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    offs = tl.arange(0, BLOCK_N)
    num_blocks = tl.cdiv(M, BLOCK_M)
    dropout_p = tl.cast(dropout_p, tl.float32)  # fp32 even when Inductor passes fp64
    dropout_scale = tl.cast(dropout_scale, tl.float32)

    if TAIL:
        _norm_bwd_pieces(
            DY, DS, Z, W, B, MEAN, RSTD, DX, DRES, PARTIAL, DW, DB, seed, pid, num_programs, num_blocks, M, N,
            stride_dy, stride_ds, stride_z, stride_dx, stride_dres, dropout_p, dropout_scale, IS_RMS, MODE, HAS_W,
            HAS_B, HAS_DS, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, BLOCK_M, BLOCK_N, BLOCK_T, BLOCK_U, STAGES,
            DIRECT, TWO_FMA, RELOAD, EARLY_ACC, HOLD, THREADS)
    elif NUM_CHUNKS == 1:
        col_mask = _column_mask(offs, offs, N, BLOCK_N, EVEN_N)
        w = tl.zeros([BLOCK_N], dtype=tl.float32)
        b = w
        if not RELOAD:
            w, b = _load_weight_and_bias(W, B, offs, col_mask, HAS_W, HAS_B, ACTIVATION, "")
        dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        # NOTE: Triton's pipeliner issues the loads of z and dy STAGES - 1 row blocks ahead as
        # asynchronous copies into shared memory (a persistent program has no other source of
        # overlap between its loads and its reductions).
        for block in tl.range(pid, num_blocks, num_programs, num_stages=STAGES):
            rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
            mask = (rows < M)[:, None] & col_mask[None, :]
            z = tl.load(Z + rows[:, None] * stride_z + offs[None, :], mask=mask, other=0.0)
            dy = tl.load(DY + rows[:, None] * stride_dy + offs[None, :], mask=mask, other=0.0)
            dw_acc, db_acc = _norm_bwd_rows(
                z, dy, w, b, dw_acc, db_acc, DY, Z, W, B, DS, MEAN, RSTD, DX, DRES, seed, rows, offs, col_mask, M,
                N, stride_dy, stride_z, stride_ds, stride_dx, stride_dres, dropout_p, dropout_scale, IS_RMS, MODE,
                HAS_W, HAS_B, HAS_DS, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, TWO_FMA, RELOAD, HOLD,
                not WEIGHT_KERNEL)
        if not WEIGHT_KERNEL:
            _store_weight_grads(DW, DB, PARTIAL, pid, num_programs, N, offs, col_mask, dw_acc, db_acc, HAS_W, HAS_B,
                                DIRECT)
    else:
        # Wide rows, one row at a time: one pass for the two row sums, one for the
        # gradients. The partial weight gradient lives in PARTIAL (this program's row).
        for block in range(pid, num_blocks, num_programs):
            rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
            row_mask = rows < M
            mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
            c1_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            c2_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                xhat, xhat_w, dy, wdy = _norm_bwd_chunk(
                    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N,
                    dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                    DX.dtype.element_ty)
                c1_acc += xhat * wdy
                c2_acc += wdy
            c1, c2 = _row_sums(c1_acc, c2_acc)
            c1, c2 = c1 / N, c2 / N
            for c in range(NUM_CHUNKS):
                cols, col_mask, mask = _chunk_columns(c, offs, row_mask, N, BLOCK_N, EVEN_N)
                xhat, xhat_w, dy, wdy = _norm_bwd_chunk(
                    DY, Z, W, B, seed, rows, cols, mask, col_mask, mean, rstd, stride_dy, stride_z, N,
                    dropout_p, dropout_scale, MODE, HAS_W, HAS_B, HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION,
                    DX.dtype.element_ty)
                dz = _input_grad(xhat, wdy, c1, c2, rstd, IS_RMS, TWO_FMA)
                _store_input_grad(DX, DRES, DS, rows, cols, mask, dz, seed, N, stride_dx, stride_dres,
                                  stride_ds, dropout_p, dropout_scale, MODE, HAS_DS, HAS_DROPOUT)
                if HAS_W and not WEIGHT_KERNEL:
                    partial_w = PARTIAL + pid * N + cols
                    pw = tl.load(partial_w, mask=col_mask, other=0.0)
                    tl.store(partial_w, pw + tl.sum(dy * xhat_w, axis=0), mask=col_mask)
                if HAS_B and not WEIGHT_KERNEL:
                    partial_b = PARTIAL + (num_programs + pid) * N + cols
                    pb = tl.load(partial_b, mask=col_mask, other=0.0)
                    tl.store(partial_b, pb + tl.sum(dy, axis=0), mask=col_mask)


@triton.jit
def _norm_bwd_weight_kernel(
    DY,  # (M, N) gradient of the output y, as _norm_bwd_kernel reads it
    Z,  # (M, N) the normalized input saved by the forward
    W,  # (N,) weight, or None
    B,  # (N,) bias with an activation (to recompute its input), else None
    MEAN,  # (M,) fp32 row means (LayerNorm only)
    RSTD,  # (M,) fp32 reciprocal standard deviations
    SEED,  # (1,) int64 dropout seed (post mode), or None
    PARTIAL,  # (2, G, N) fp32: row g of [0] / [1] the weight / bias gradient of row group g, every row written
    stride_dy, stride_z, M, N, rows_per_group, dropout_p, dropout_scale,
    IS_RMS: tl.constexpr, MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
    STAGES: tl.constexpr, VEC: tl.constexpr,
):
    """The weight and bias gradients of rows too wide for a program to hold their accumulators (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): program (c, g) walks the rows of group g (``rows_per_group`` of them, a multiple
    of BLOCK_R) down its BLOCK_C columns, BLOCK_R rows at a time, with the backward's own per-element math
    (_norm_bwd_math: dropout, the activation's derivative, the cast before the weight), and writes its sums to row g
    of PARTIAL[0] and PARTIAL[1] (summed by reduce.sum_partials)."""
    N, stride_dy, stride_z = N * VEC, stride_dy * VEC, stride_z * VEC
    dropout_p = tl.cast(dropout_p, tl.float32)  # fp32 even when Inductor passes fp64
    dropout_scale = tl.cast(dropout_scale, tl.float32)
    c = tl.program_id(0)
    g = tl.program_id(1)
    groups = tl.num_programs(1)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    cols = c * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols < N
    w, b = _load_weight_and_bias(W, B, cols, col_mask, HAS_W, HAS_B, ACTIVATION, "")
    dw_acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    first = tl.cast(g, tl.int64) * rows_per_group
    last = tl.minimum(first + rows_per_group, M)
    for start in tl.range(first, last, BLOCK_R, num_stages=STAGES):
        rows = start + tl.arange(0, BLOCK_R)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean, rstd = _row_statistics(MEAN, RSTD, rows, row_mask, IS_RMS)
        xhat, xhat_w, dy, wdy = _norm_bwd_math(
            z, dy, w, b, mean, rstd, mask, seed, rows, cols, N, dropout_p, dropout_scale, MODE, HAS_W, HAS_B,
            HAS_DROPOUT, CAST_BEFORE_WEIGHT, ACTIVATION, Z.dtype.element_ty)
        if HAS_W:
            dw_acc += dy * xhat_w
        if HAS_B:
            db_acc += dy
    if HAS_W:
        tl.store(PARTIAL + g * N + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
    if HAS_B:
        tl.store(PARTIAL + (groups + g) * N + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def _norm_cast_t_kernel(
    Z,  # (M, N) the normalized input as the norm's backward reads it (x, or pre mode's stream s)
    MEAN,  # (M,) fp32 LayerNorm's means, or None (RMSNorm)
    RSTD,  # (M,) fp32
    W,  # (N,) or None
    B,  # (N,) or None
    AMAX,  # (1,) fp32 max |y| of the output as the forward wrote it; GIVEN_SCALE: () fp32 the scale itself
    YT,  # (N, MP) e4m3: y^T quantized with AMAX's scale, zero past column M
    YT_SCALE,  # () fp32 the scale
    stride_z, M, N, MP,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    CAST_BEFORE_WEIGHT: tl.constexpr,
    GIVEN_SCALE: tl.constexpr,  # AMAX is the forward's scale (delayed scaling: the forward's e4m3 output's)
    ROUND: tl.constexpr,  # y rounded to Z's dtype first, as a forward writing y in x's dtype had it (else fp32 y,
    #                       as a forward writing e4m3 quantized it)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """The norm's output made again from its input and the forward's statistics, as _norm_fwd_value makes it and
    rounded to the input's dtype as the forward wrote it, straight into its transposed tensorwise e4m3 cast (the
    weight gradient's operand of the FP8 projection it feeds): one read of the input, where the norm made again
    and then cast would write and read the output once more (ops/fp8.py's _fp8_cast_kernel does the cast the same
    way, its NOTE: the scale loaded as a column of the one amax)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    z = tl.load(Z + rows[:, None] * stride_z + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if MEAN is None:
        mean = tl.zeros([BLOCK_M], dtype=tl.float32)
    else:
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    # (no residual, seed or dropout; OUT_DTYPE z's, MODE none, HAS_DROPOUT no, ACTIVATION none, TILE_VECTORS no)
    y = _norm_fwd_value(z, W, B, None, rows, cols, col_mask, mask, mean, rstd, 0, N, 0, 0.0, 1.0,
                        Z.dtype.element_ty, 0, HAS_W, HAS_B, False, CAST_BEFORE_WEIGHT, 0, False)
    if ROUND:
        y = y.to(Z.dtype.element_ty).to(tl.float32)
    store_transposed_cast(y, mask, rows, cols, col_mask, AMAX, YT, YT_SCALE, MP, pid_m, pid_n, GIVEN_SCALE)


# ----------------------------------------------------------------------------------------
# Launchers: plain Python that allocates, tiles and launches, registered as ops without autograd
# ----------------------------------------------------------------------------------------

_fwd_kernel = Kernel(_norm_fwd_kernel)
_fwd_fp8_kernel = Kernel(_norm_fwd_fp8_kernel)
_bwd_kernel = Kernel(_norm_bwd_kernel)
_bwd_weight_kernel = Kernel(_norm_bwd_weight_kernel)
_cast_t_kernel = Kernel(_norm_cast_t_kernel)


class Tile(NamedTuple):
    """How a launch covers a row of N: BLOCK_M rows of BLOCK_N columns a program, plus BLOCK_T more (the
    tail) when ``tail`` and BLOCK_U more after it where ``block_u`` > 1 (the backward's third piece), or NUM_CHUNKS
    chunks of BLOCK_N read again for each pass; ``num_warps``."""

    block_m: int
    block_n: int
    num_chunks: int
    num_warps: int
    tail: bool
    block_t: int
    block_u: int = 1

    def constexprs(self, n: int, tail: bool = True) -> dict:
        """The kernels' tile constexprs (``tail=False``: without TAIL / BLOCK_T, for a kernel that has no tail).
        Cached (a dict a call costs the host path); callers unpack it, never change it."""
        return _tile_constexprs(self, n, tail)

    @property
    def lanes(self) -> int:
        """Lanes a row of the tile: BLOCK_N, plus BLOCK_T with a tail (and BLOCK_U with a third piece)."""
        return self.block_n + (self.block_t + (self.block_u if self.block_u > 1 else 0) if self.tail else 0)


@functools.lru_cache(maxsize=None)
def _tile_constexprs(tile: Tile, n: int, tail: bool) -> dict:
    shape = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, NUM_CHUNKS=tile.num_chunks,
                 EVEN_N=tile.tail or n % tile.block_n == 0)
    if not tail:
        return shape
    return dict(shape, TAIL=tile.tail, BLOCK_T=tile.block_t)


def row_pieces(n: int) -> tuple[int, int]:
    """A row of ``n`` held in registers as power-of-two tiles: ``(n, 0)`` for a power of two, else the
    largest power of two below ``n`` and a power-of-two tail for the rest, where the two waste fewer
    lanes than one tile of ``next_power_of_2(n)`` (4304: 4096 + 256 lanes, not 8192; 1152: 1024 + 128;
    11008: 8192 + 4096; 3 * 2^k: no waste), else ``(next_power_of_2(n), 0)``."""
    whole = next_power_of_2(n)
    head = whole // 2
    if whole == n or head == 0:
        return whole, 0
    tail = max(MIN_TAIL, next_power_of_2(n - head))
    return (head, tail) if head + tail < whole else (whole, 0)


@functools.lru_cache(maxsize=None)
def _tile(n: int, target_elements: int, elements_per_warp: int, max_lanes: int, tail_from: float,
          min_warps: int = 4, vector_tail: int = 0) -> Tile:
    """The launch rule of both kernels, from the row width alone (see the constants above):

    * a row of at most ``max_lanes`` lanes stays in registers: one power-of-two tile, or two pieces
      (:func:`row_pieces`) when the tile would pass ``tail_from`` lanes or the tail has at least ``vector_tail``
      lanes (nonzero: the forward's FWD_VECTOR_TAIL_LANES); narrow rows are packed several to a
      program (``target_elements`` lanes a program: one row of 1024 bf16 alone is too little work to hide
      memory latency);
    * wider rows go in chunks (the width in CHUNK_CHOICES that pads least), read again for each pass,
      CHUNK_TILE_ELEMENTS lanes a program (several rows: a persistent backward program alone on its
      multiprocessor must keep enough bytes in flight);
    * warps: one per ``elements_per_warp`` lanes, a power of two within ``min_warps``-16.

    (Rows in pieces one row a program, at any tail: :func:`_one_row_pieces`, which the rules try first.)"""
    whole = next_power_of_2(n)
    head, tail = row_pieces(n)
    if whole <= tail_from and not (vector_tail and tail >= vector_tail):
        head, tail = whole, 0
    lanes = head + tail
    if lanes <= max_lanes:
        block_m = max(1, target_elements // lanes)
        block_m = 1 << (block_m.bit_length() - 1)  # a power of two (tl.arange)
        tile_lanes, block_n, num_chunks = block_m * lanes, head, 1
    else:
        block_n = _chunk_width(n, CHUNK_CHOICES)
        block_m, tail, num_chunks = CHUNK_TILE_ELEMENTS // block_n, 0, cdiv(n, block_n)
        tile_lanes = block_m * block_n
    num_warps = min(16, max(min_warps, next_power_of_2(cdiv(tile_lanes, elements_per_warp))))
    if tail >= 4 * 32 * TAIL_VECTOR:
        num_warps = min(num_warps, tail // (32 * TAIL_VECTOR))  # (the NOTE above TAIL_VECTOR)
    return Tile(block_m, block_n, num_chunks, num_warps, tail > 0, max(tail, 1))


# NOTE: the forward's rows per program also depend on the row count and the card. The width's tile packs
# FWD_TILE_ELEMENTS lanes a program (4 rows of 1024), which keeps bytes in flight where there are rows to spare; a
# few thousand rows then make too few programs to fill the card ([2048, 768]: 512 programs of 4 warps, 2048 warps
# where an H200 holds 132 x 64), and the kernel is a few microseconds long, so warps that could have been loading
# are the time. So where the width's tile would make fewer than FWD_MIN_PROGRAMS_PER_SM programs a multiprocessor,
# the forward takes fewer rows a program (a power of two, at least one), the warps following the lanes as in
# _tile. 0 or None: off. More rows, every backward, and traced calls with a symbolic row count keep the width's
# tile.
FWD_MIN_PROGRAMS_PER_SM = 4


def rows_for_count(tile: Tile, m: int, sms: int, elements_per_warp: int = FWD_ELEMENTS_PER_WARP) -> Tile:
    """``tile`` (the width's, from :func:`_tile`) with fewer rows a program when ``m`` rows of it would make fewer
    than ``FWD_MIN_PROGRAMS_PER_SM`` programs for each of ``sms`` multiprocessors (the NOTE above)."""
    wanted = sms * (FWD_MIN_PROGRAMS_PER_SM or 0)
    if tile.block_m == 1 or m >= tile.block_m * wanted or tile.num_chunks != 1:
        return tile
    return _fewer_rows(tile, 1 << (max(1, m // wanted).bit_length() - 1), elements_per_warp)


@functools.lru_cache(maxsize=None)
def _fewer_rows(tile: Tile, block_m: int, elements_per_warp: int) -> Tile:
    lanes = tile.block_n + (tile.block_t if tile.tail else 0)
    warps = min(tile.num_warps, max(4, next_power_of_2(cdiv(block_m * lanes, elements_per_warp))))
    return tile._replace(block_m=block_m, num_warps=warps)


# NOTE: rows the forward reads in chunks (past FWD_MAX_LANES; RMSNorm's from FWD_RMS_CHUNKS_FROM_LANES) take one row
# a program of FWD_CHUNK_WARPS warps, chunks of the CHUNK_CHOICES width that pads least: a program then holds one
# chunk (8 bf16 a thread), so several fit a multiprocessor, and the statistics' read keeps the row in L2 for the
# pass that writes (CHUNK_FIRST_EVICT). LayerNorm's statistics are one read too (Welford's update per lane, Chan's
# merge of the lanes), as RMSNorm's. Before, such rows took two rows a program of 8 warps (CHUNK_TILE_ELEMENTS, the
# backward's) and LayerNorm read them three times. Measured, H200, the forward launcher, fraction of a same-size
# copy, the code before and after in one call (benchmarks/results/launch-rules/17-wide-forward-2026-11-29-h200/):
# [8192, 20000] LayerNorm 0.60 -> 0.78, post-residual 0.65 -> 0.83, + GELU 0.54 -> 0.68, pre-residual 0.51 -> 0.90,
# RMSNorm 0.62 -> 0.99, pre-residual RMSNorm 0.65 -> 0.99; [8192, 28672] LayerNorm 0.50 -> 0.93; [4096, 32768]
# LayerNorm 0.43 -> 0.88, RMSNorm 0.64 -> 0.97 (pre-residual RMSNorm 0.64 -> 0.69, where 2048-lane chunks had run
# 0.89 in the grid: left as measured). RMSNorm's rows held in registers from 8192 lanes (16 warps capped at 64
# registers, or 8 at 8192) ran slower than in chunks: [16384, n] 8192 0.96 -> 1.01, 11008 0.90 -> 1.01, 14336 0.95
# -> 1.00, [8192, 16384] 0.96 -> 1.00, [2048, 11008] 0.77 -> 0.88; pre-residual 0.96-0.99 -> 0.99-1.02. LayerNorm's
# forms keep their registers up to FWD_MAX_LANES: in these chunks they ran 0.82-1.03x of them there (the same
# folder's grid, 11008-16384 wide), and no one chunking of the grid's 18 won every cell (the best of each 0.97-1.12x:
# post-residual at 11008 0.81 -> 0.91 in 4096-lane chunks on 8 warps, + GELU at 14336 0.75 -> 0.82 in 2048-lane
# ones on 8; a lead, not a rule yet). The FP8 forward's chunks (its own tile) share the statistics' read and the
# hints, not timed. 0: off.
FWD_RMS_CHUNKS_FROM_LANES = 8192
FWD_CHUNK_WARPS = 16
# (A knob for an A/B, off: the forward's chunks of this many lanes rather than CHUNK_CHOICES' least padding. 0: off.)
FWD_CHUNK_LANES = 0
# NOTE: RMSNorm's plain forward on 16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS)
# from FWD_SCALAR_RMS_CHUNKS_FROM_LANES lanes (up to FWD_MAX_LANES) reads its one-row chunks FWD_SCALAR_RMS_CHUNK_LANES
# wide on FWD_SCALAR_RMS_CHUNK_WARPS warps (8 one-element loads a thread a chunk, not the 4-8 of the chunks above on
# FWD_CHUNK_WARPS), unless FWD_CHUNK_LANES is set (an A/B's knob). Timed on an H100 (benchmarks/norm_tiles.py through
# `LANDED=9 PHASE=wide FWD_ONLY=1 scripts/issue22_scalar_rows_gpu.sh`, the forward launcher at [16384, n], two
# alternating rounds of one process; benchmarks/results/launch-rules/35-odd-widths-2026-12-06-h100/15-forward-settings/)
# against the rule above: 12345 1.03x (0.387 -> 0.375 ms, 0.69 -> 0.72 of copy), 15001 1.13x (0.489 -> 0.434 ms, 0.67
# -> 0.75; 2048 lanes on 16 warps: 1.04x, so the warps are most of it), but 8447 0.94x (0.75 -> 0.71), and 9999 0.96x
# in the call before (13-whole-row-wk/, where 12345 / 15001 gave the same 1.03x / 1.13x): so from 12289 lanes, past
# the widest measured loss. 1024-lane chunks lost on 4 or 8 warps (0.87-1.00x). Not the pre-residual RMSNorm (its
# chunks on 8 warps ran 0.91-1.07x its 16, the NOTE below), nor vector rows (not timed). 0: off.
FWD_SCALAR_RMS_CHUNKS_FROM_LANES = 12289
FWD_SCALAR_RMS_CHUNK_LANES = 2048
FWD_SCALAR_RMS_CHUNK_WARPS = 8
# NOTE: the pre-residual LayerNorm's forward on 16-bit rows of one-element accesses (odd widths: the NOTE above
# BWD_SCALAR_WARPS) that the rule holds in one padded tile past 8192 lanes (12289-16384: no pieces) reads them in
# one-row chunks of FWD_SCALAR_PRE_CHUNK_LANES lanes on FWD_SCALAR_PRE_CHUNK_WARPS warps (8 lanes a thread), s stored
# in the first pass and read back in the second. Timed on an H100 (benchmarks/norm_tiles.py through
# `LANDED=5 PHASE=wide scripts/issue22_scalar_rows_gpu.sh`, the forward launcher at [16384, n], two alternating rounds
# of one process; benchmarks/results/launch-rules/35-odd-widths-2026-12-06-h100/11-pre-chunks/) against the padded
# tile: 12345 1.33x (1.231 -> 0.922 ms), 15001 1.20x (1.407 -> 1.171); 1024 lanes on 4 warps 1.19x / 1.12x, 4096 on
# 16 0.96x / 1.00x, 2048 on 4 0.70-0.76x. Where the rule has pieces (8447, 9999) every chunking lost (0.43-0.76x);
# the post-residual form, which would read x and the residual twice, lost too (0.48-1.07x, the rule's padded tile
# ahead at 12345 / 15001), and so did the pre-residual RMSNorm's chunks on 8 warps against its 16 (0.91-1.07x).
# 0: off.
FWD_SCALAR_PRE_CHUNK_LANES = 2048
FWD_SCALAR_PRE_CHUNK_WARPS = 8
# NOTE: LayerNorm without a residual (and with its GELU), a row in two pieces with a tail of FWD_VECTOR_TAIL_LANES or
# more (the width's tile: 5504 and 6144 = 4096 + 2048, 11008 and 12288 = 8192 + 4096), takes one warp per
# FWD_TAIL_PIECE_LANES_PER_WARP lanes, as the one-row pieces with smaller tails do, not one per
# FWD_ELEMENTS_PER_WARP: 4 warps at 6144 where it had 8, 8 at 11008 where it had 16 (fewer warps to reduce its two
# statistics across; 9000 and 10240 keep theirs, their tails' vectors capping the warps already). Measured on an H200
# (benchmarks/norm_tiles.py --fwd-knob FWD_TAIL_PIECE_LANES_PER_WARP=0,2048 in alternating rounds of one process,
# [16384, n] bf16, fraction of a same-size copy; benchmarks/results/launch-rules/19-tail-warps-2026-12-01-h200/):
# 6144 LayerNorm 0.87 -> 0.95, + GELU 0.76 -> 0.90; 5504 + GELU 0.70 -> 0.84; 11008 LayerNorm 0.76 -> 0.80, + GELU
# 0.65 -> 0.81; 12288 0.82 -> 0.86, + GELU 0.71 -> 0.88; [4096, 6144 / 11008] LayerNorm 0.76 / 0.70 -> 0.83 / 0.73.
# The residual forms lost past 8192 lanes (11008 pre-residual 0.99 -> 0.91, post-residual 0.81 -> 0.74: they stream
# 4 bytes an element more) and gained at most 0.03 below it, RMSNorm lost up to 0.02 (it reads rows of 8192
# lanes or more in chunks): they keep the width's warps. The padded 16384 lanes of 14336 on 8 warps instead of 16: +
# GELU 0.76 -> 0.70, so padded tiles keep theirs too. 0: off.
FWD_TAIL_PIECE_LANES_PER_WARP = 2048


def forward_rule(n: int, is_rms: bool = False, residual: bool = False, pre: bool = False, scalar: bool = False
                 ) -> Tile:
    """The plain forward's tile for rows of ``n`` (the one-row pieces of :func:`_one_row_pieces` from
    FWD_PIECES_FROM_LANES; one row in chunks past FWD_MAX_LANES, RMSNorm's from FWD_RMS_CHUNKS_FROM_LANES
    (:func:`_forward_chunks`); else :func:`_tile`, with the forward's constants read at each call so that a
    benchmark's knob takes effect; LayerNorm without a ``residual`` takes fewer warps for a wide tail, the NOTE
    above FWD_TAIL_PIECE_LANES_PER_WARP), before the row count's rule (:func:`rows_for_count`). ``pre`` and
    ``scalar``: the pre-residual form, and 16-bit rows of one-element accesses (:func:`scalar_rows`): such a
    LayerNorm row in a padded tile past 8192 lanes goes in chunks (the NOTE above FWD_SCALAR_PRE_CHUNK_LANES), and
    RMSNorm's plain chunks take fewer warps from 12289 lanes (the NOTE above FWD_SCALAR_RMS_CHUNKS_FROM_LANES)."""
    if n > FWD_MAX_LANES or (is_rms and FWD_RMS_CHUNKS_FROM_LANES and n >= FWD_RMS_CHUNKS_FROM_LANES):
        if (scalar and is_rms and not residual and not FWD_CHUNK_LANES and FWD_SCALAR_RMS_CHUNKS_FROM_LANES
                and FWD_SCALAR_RMS_CHUNKS_FROM_LANES <= n <= FWD_MAX_LANES):
            # (the NOTE above FWD_SCALAR_RMS_CHUNKS_FROM_LANES)
            return _forward_chunks(n, (FWD_SCALAR_RMS_CHUNK_LANES,), FWD_SCALAR_RMS_CHUNK_WARPS)
        return _forward_chunks(n, (FWD_CHUNK_LANES,) if FWD_CHUNK_LANES else CHUNK_CHOICES, FWD_CHUNK_WARPS)
    pieces = _one_row_pieces(n, FWD_PIECES_FROM_LANES, TAIL_FROM_LANES, FWD_PIECE_LANES_PER_WARP,
                             FWD_PIECE_MIN_WARPS)
    if pieces is not None:
        return pieces
    tile = _tile(n, FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP, FWD_MAX_LANES, TAIL_FROM_LANES, FWD_MIN_WARPS,
                 FWD_VECTOR_TAIL_LANES)
    if (scalar and pre and not is_rms and FWD_SCALAR_PRE_CHUNK_LANES and tile.num_chunks == 1 and not tile.tail
            and tile.block_m == 1 and tile.block_n > 8192):
        return _forward_chunks(n, (FWD_SCALAR_PRE_CHUNK_LANES,), FWD_SCALAR_PRE_CHUNK_WARPS)
    if (tile.tail and FWD_TAIL_PIECE_LANES_PER_WARP and not is_rms and not residual and tile.block_m == 1
            and tile.block_t >= FWD_VECTOR_TAIL_LANES):
        # (the NOTE above FWD_TAIL_PIECE_LANES_PER_WARP)
        warps = max(FWD_MIN_WARPS, next_power_of_2(cdiv(tile.lanes, FWD_TAIL_PIECE_LANES_PER_WARP)))
        tile = tile._replace(num_warps=min(tile.num_warps, warps))
    return tile


@functools.lru_cache(maxsize=None)
def _forward_chunks(n: int, choices: tuple, warps: int) -> Tile:
    """One row a program of ``warps`` warps in chunks of the width in ``choices`` that pads ``n`` least (the NOTE
    above FWD_RMS_CHUNKS_FROM_LANES)."""
    block_n = _chunk_width(n, choices)
    return Tile(1, block_n, cdiv(n, block_n), warps, False, 1)


def _chunk_width(n: int, choices: tuple) -> int:
    """The chunk width in ``choices`` that pads a row of ``n`` least (the wider one on a tie): both rules' chunks."""
    return min(choices, key=lambda c: (cdiv(n, c) * c, -c))


def _forward_tile(tile: Tile, m, device: torch.device) -> Tile:
    """The forward launch's tile: ``tile`` with :func:`rows_for_count` on CUDA for a plain int row count."""
    if m.__class__ is not int or device.type != "cuda":
        return tile
    return rows_for_count(tile, m, sm_count(device))


def backward_rule(n: int, activation: int = 0, pre: bool = False, element_size: int = 2, is_rms: bool = False,
                  scalar: bool = False, bf16: bool = True) -> Tile:
    """The backward's tile for rows of ``n`` (``activation``: the GELU form's warps; ``pre``: the pre-residual form's
    width limit; ``element_size``: of z and dy; ``is_rms``: RMSNorm's wide tails, BWD_WIDE_PIECES_RMS_MAX_TAIL): the
    three pieces of :func:`_three_pieces` past BWD_WIDE_PIECES_MAX_LANES where three stages of them fit (in the
    pre-residual form only where z and dy are ``bf16``: BWD_THREE_PIECES_PRE; within
    BWD_THREE_PIECES_SMEM_BYTES where they are ``bf16``, held across the row sums, else BWD_SMEM_BYTES: the NOTE above
    BWD_THREE_PIECES_SMEM_BYTES), the two pieces of :func:`_one_row_pieces` where they apply, else one padded tile
    (:func:`_tile`, no tail); ``scalar``: 16-bit rows of one-element accesses, the NOTE above BWD_SCALAR_WARPS. Module
    constants read at each call, so that a benchmark's knob takes effect."""
    row_chunks = _scalar_row_chunks(n, activation, scalar)
    if row_chunks:
        whole_row = (is_rms and not pre) or (not BWD_SCALAR_WHOLE_ROW_RMS_ONLY
                                             and (not (is_rms and pre) or BWD_SCALAR_WHOLE_ROW_RMS_PRE))
        if whole_row and BWD_SCALAR_WHOLE_ROW_WARPS and next_power_of_2(n) <= BWD_MAX_LANES:
            return Tile(1, next_power_of_2(n), 1, BWD_SCALAR_WHOLE_ROW_WARPS, False, 1)
        if not (is_rms and BWD_SCALAR_RMS_KEEPS_PIECES):
            return _scalar_chunk_tile(n)
    wide = BWD_PIECES_MAX_LANES < n <= BWD_WIDE_PIECES_MAX_LANES and BWD_PIECES_FROM_LANES
    piece_warps = BWD_SCALAR_WARPS if scalar and not activation and BWD_SCALAR_WARPS else 1
    tile_warps = BWD_SCALAR_TILE_WARPS if (scalar and not activation and BWD_SCALAR_TILE_WARPS
                                          and next_power_of_2(n) >= BWD_SCALAR_TILE_WARPS_FROM_LANES) else 1
    if (BWD_WIDE_PIECES_MAX_LANES < n <= BWD_THREE_PIECES_MAX_LANES and BWD_PIECES_FROM_LANES
            and not activation and (not pre or (BWD_THREE_PIECES_PRE and bf16))):
        pieces = _fitting_three_pieces(n, element_size, bf16)
        if pieces is not None:
            return pieces
    if activation:
        pieces = _one_row_pieces(n, ACT_BWD_PIECES_FROM_LANES, ACT_BWD_PIECES_MAX_LANES, ACT_BWD_PIECE_LANES_PER_WARP,
                                 ACT_BWD_PIECE_MIN_WARPS, ACT_BWD_PIECE_MAX_WARPS,
                                 max_tail=n if ACT_BWD_PIECES_ANY_TAIL else LAYOUT_TAIL_LANES.value)
        if pieces is None and wide and ACT_BWD_WIDE_PIECES and ACT_BWD_PIECES_FROM_LANES:
            pieces = _wide_pieces(n, 0, n)  # (past the 17 lanes a thread, spilling)
        if (ACT_BWD_THREE_PIECES and ACT_BWD_PIECES_FROM_LANES and bf16
                and BWD_PIECES_MAX_LANES < n <= BWD_THREE_PIECES_MAX_LANES):  # (the NOTE above ACT_BWD_THREE_PIECES)
            three = _fitting_three_pieces(n, element_size, bf16)
            if three is not None and three.lanes < (pieces.lanes if pieces is not None else next_power_of_2(n)):
                pieces = three
    elif wide:
        pieces = _wide_pieces(n, BWD_PIECE_TAIL_BYTES // element_size,
                              BWD_WIDE_PIECES_RMS_MAX_TAIL + 1 if is_rms else BWD_WIDE_PIECES_MAX_LANES)
    else:
        pieces = _one_row_pieces(n, BWD_PIECES_FROM_LANES, BWD_PIECES_MAX_LANES,
                                 BWD_PIECE_LANES_PER_WARP // piece_warps, BWD_PIECE_MIN_WARPS, 16,
                                 BWD_PIECE_TAIL_BYTES // element_size, BWD_PIECES_MAX_TAIL)
    if pieces is not None:
        return pieces
    if row_chunks:  # (RMSNorm's pre-residual form where the rule has no pieces)
        return _scalar_chunk_tile(n)
    max_lanes = BWD_MAX_LANES_PRE if pre else BWD_MAX_LANES
    if pre and scalar and BWD_SCALAR_MAX_LANES_PRE:
        max_lanes = min(max_lanes, BWD_SCALAR_MAX_LANES_PRE)
    tile = _tile(n, BWD_TILE_ELEMENTS, ACT_BWD_ELEMENTS_PER_WARP if activation else BWD_ELEMENTS_PER_WARP // tile_warps,
                 max_lanes, float("inf"))
    if tile.num_chunks > 1 and not activation and BWD_CHUNK_WARPS:
        return _chunk_tile(tile)
    return tile


def scalar_rows(vec: int, t: Tensor) -> bool:
    """Whether the rows of ``t``, passed in units of ``vec`` elements, are 16-bit rows of one-element accesses (the
    rules' ``scalar``: the NOTE above BWD_SCALAR_WARPS)."""
    return vec == 1 and t.element_size() == 2


def _scalar_chunk_tile(n: int) -> Tile:
    """Scalar rows of ``n`` in one-row chunks of BWD_SCALAR_CHUNK_LANES lanes (the NOTE above
    BWD_SCALAR_ROW_CHUNKS_FROM_LANES)."""
    return Tile(1, BWD_SCALAR_CHUNK_LANES, cdiv(n, BWD_SCALAR_CHUNK_LANES), BWD_CHUNK_WARPS, False, 1, 1)


def _scalar_row_chunks(n: int, activation: int, scalar: bool) -> bool:
    """Whether the backward takes scalar rows of ``n`` in the one-row chunks or whole rows of the NOTEs above
    BWD_SCALAR_ROW_CHUNKS_FROM_LANES and BWD_SCALAR_WHOLE_ROW_WARPS; the GELU form with BWD_SCALAR_ROW_CHUNKS_ACT, where
    its own tile is not pieces with a tail of at most ACT_BWD_SCALAR_PIECES_MAX_TAIL lanes, up to the whole row's
    BWD_MAX_LANES."""
    if not (scalar and BWD_SCALAR_ROW_CHUNKS_FROM_LANES and n >= BWD_SCALAR_ROW_CHUNKS_FROM_LANES):
        return False
    if not activation:
        return True
    if not BWD_SCALAR_ROW_CHUNKS_ACT or next_power_of_2(n) > BWD_MAX_LANES:  # (not timed past the whole row)
        return False
    own = backward_rule(n, activation)  # (the GELU form's tiles are the same for scalar rows)
    return not (own.tail and own.block_t <= ACT_BWD_SCALAR_PIECES_MAX_TAIL)


def _chunk_tile(tile: Tile) -> Tile:
    """The plain forms' backward tile for rows in chunks (the NOTE above BWD_CHUNK_WARPS): BWD_CHUNK_WARPS warps,
    and one row a block where the chunk is BWD_CHUNK_ONE_ROW_LANES lanes or wider."""
    block_m = 1 if tile.block_n >= BWD_CHUNK_ONE_ROW_LANES else tile.block_m
    return tile._replace(block_m=block_m, num_warps=BWD_CHUNK_WARPS)


def _wide_pieces(n: int, tail_per_thread: int, max_tail: int) -> Optional[Tile]:
    """The backward's two pieces past BWD_PIECES_MAX_LANES (the NOTE above BWD_WIDE_PIECES_MAX_LANES): at most
    BWD_WIDE_PIECES_MAX_LANES lanes on BWD_WIDE_PIECE_WARPS warps, the tail as :func:`_one_row_pieces` takes it."""
    warps = BWD_WIDE_PIECE_WARPS
    return _one_row_pieces(n, 1, BWD_WIDE_PIECES_MAX_LANES, cdiv(BWD_WIDE_PIECES_MAX_LANES, warps), warps, warps,
                           tail_per_thread, max_tail)


def _fitting_three_pieces(n: int, element_size: int, bf16: bool) -> Optional[Tile]:
    """:func:`_three_pieces` of rows of ``n`` where BWD_THREE_PIECES_MIN_STAGES stages of their z and dy fit the stage
    budget: BWD_THREE_PIECES_SMEM_BYTES where they are ``bf16`` (held; the NOTE above it), else BWD_SMEM_BYTES."""
    pieces = _three_pieces(n, BWD_PIECE_TAIL_BYTES // element_size)
    budget = BWD_THREE_PIECES_SMEM_BYTES if bf16 and BWD_HOLD_PIECES else BWD_SMEM_BYTES
    if pieces is None or BWD_THREE_PIECES_MIN_STAGES * 2 * pieces.lanes * element_size > budget:
        return None
    return pieces


@functools.lru_cache(maxsize=None)
def _three_pieces(n: int, tail_per_thread: int) -> Optional[Tile]:
    """The backward's three pieces past BWD_WIDE_PIECES_MAX_LANES (the NOTE above BWD_THREE_PIECES_MAX_LANES): the
    largest power of two below ``n``, the largest one in the rest, and a power-of-two tail for what is left, of at
    least ``tail_per_thread`` elements a thread (masked past ``n``: 12800 = 8192 + 4096 + 1024 lanes), on
    BWD_WIDE_PIECE_WARPS warps; None where the row has no third piece (12288 = 8192 + 4096: two) or the three would
    take as many lanes as one padded tile."""
    whole = next_power_of_2(n)
    head = whole // 2
    mid = next_power_of_2(n - head + 1) // 2
    rest = n - head - mid
    if rest <= 0:  # (a power of two, or two pieces exactly)
        return None
    warps = BWD_WIDE_PIECE_WARPS
    tail = max(MIN_TAIL, next_power_of_2(rest), tail_per_thread * 32 * warps)
    if head + mid + tail >= whole:
        return None
    return Tile(1, head, 1, warps, True, mid, tail)


@functools.lru_cache(maxsize=None)
def _one_row_pieces(n: int, from_lanes: int, max_lanes: int, lanes_per_warp: int, min_warps: int,
                    max_warps: int = 16, tail_per_thread: int = 0, max_tail: int = LAYOUT_TAIL_LANES.value
                    ) -> Optional[Tile]:
    """Rows of ``n`` in two pieces (:func:`row_pieces`), one row a program (a block of the backward's), one warp per
    ``lanes_per_warp`` lanes (a power of two within ``min_warps``-``max_warps``), where ``n`` is at least
    ``from_lanes`` (0: never), the row has a tail of fewer than ``max_tail`` lanes (LAYOUT_TAIL_LANES unless a rule
    says otherwise) and at least ``tail_per_thread`` elements a thread, and the two pieces take at most ``max_lanes``
    lanes; else None. The
    forwards' and the backward's rules (the NOTEs above FWD_PIECES_FROM_LANES and BWD_PIECES_FROM_LANES)."""
    head, tail = row_pieces(n)
    if not from_lanes or n < from_lanes or not 0 < tail < max_tail or head + tail > max_lanes:
        return None
    warps = min(max_warps, max(min_warps, next_power_of_2(cdiv(head + tail, lanes_per_warp))))
    if tail < tail_per_thread * 32 * warps:
        return None
    return Tile(1, head, 1, warps, True, tail)


def _two_fma(tile: Tile, activation: int) -> bool:
    """dz's form in the backward (see the NOTE above BWD_TWO_FMA_MAX_WARPS): two multiply-adds where a thread
    may hold more than 128 registers (at most BWD_TWO_FMA_MAX_WARPS warps, no register cap)."""
    return not activation and tile.num_warps <= BWD_TWO_FMA_MAX_WARPS


def _bwd_reload(tile: Tile) -> bool:
    """Whether the backward reads each row twice (see the NOTE above BWD_RELOAD_FROM_LANES): every form, in a tile
    of BWD_RELOAD_FROM_LANES lanes or more; in three pieces, whether it reads the weight (and bias) again each row
    (always: the NOTE above BWD_THREE_PIECES_MAX_LANES)."""
    if BWD_RELOAD is not None:
        return BWD_RELOAD
    if tile.num_warps > 16:
        return False  # (BWD_SCALAR_WHOLE_ROW_WARPS: a 16384-lane row on 32 warps holds 16 lanes a thread)
    if tile.tail and tile.block_u > 1:
        return True  # (three pieces: the weight read again each row, the NOTE above BWD_THREE_PIECES_MAX_LANES)
    return tile.num_chunks == 1 and tile.block_m * tile.block_n >= BWD_RELOAD_FROM_LANES


def _bwd_hold(tile: Tile, n: int, z_dtype: torch.dtype, dy_dtype: torch.dtype, activation: int, mode: int) -> int:
    """Whether the backward holds its bf16 row as loaded across the row sums and widens it again, the NOTE above
    BWD_HOLD_PIECES: the plain forms' wide pieces (past BWD_PIECES_MAX_LANES: 16 warps under the register cap) of
    BWD_HOLD_PIECES_LANES_PER_THREAD lanes a thread or more instead of their fp32 tiles; the padded 16384-lane tile
    of LayerNorm / RMSNorm (not pre mode) where it pads nothing, instead of its second read (1 in both). With an
    activation, ACT_BWD_HOLD in pieces (1 or 2: its NOTE)."""
    if tile.num_chunks != 1 or z_dtype != torch.bfloat16 or dy_dtype != torch.bfloat16:
        return 0
    if activation:
        threads = 32 * tile.num_warps
        return ACT_BWD_HOLD if tile.tail and tile.block_m * tile.lanes > ACT_BWD_HOLD_LANES_PER_THREAD * threads else 0
    if tile.tail:
        return int(BWD_HOLD_PIECES and n > BWD_PIECES_MAX_LANES
                   and tile.block_m * tile.lanes >= BWD_HOLD_PIECES_LANES_PER_THREAD * 32 * tile.num_warps)
    return int(BWD_HOLD and mode != PRE and _bwd_reload(tile) and tile.block_m * tile.block_n == n)


def _early_acc(tile: Tile, mode: int, stages: int) -> bool:
    """Whether the backward in pieces adds a row to the weight / bias gradients' accumulators before its row sums
    rather than after its stores (the NOTE above BWD_EARLY_ACC)."""
    if BWD_EARLY_ACC is not None:
        return BWD_EARLY_ACC
    return (tile.tail and tile.block_u == 1 and tile.lanes > BWD_PIECES_MAX_LANES and mode != PRE and stages > 1)


def _stages(stages: int, row_blocks: int, programs: int) -> int:
    """The backward's pipeline depth: none unless each program walks at least ``stages`` row blocks
    (a short walk only pays the pipeline's prologue: [2048, 1024] ran 7% slower with 3 stages)."""
    return stages if row_blocks >= stages * programs else 1


def _bwd_stages(tile: Tile, n: int, element_size: int, per_sm: int, streams: int = 2) -> int:
    """The plain backward's pipeline depth for rows of ``n`` in ``tile`` (one tile a row block), ``per_sm``
    programs a multiprocessor, ``streams`` tensors read a row block (z and dy; and ds in pre mode, which the
    pipeliner stages too): enough row blocks in flight for BWD_BYTES_IN_FLIGHT real bytes a multiprocessor, within
    BWD_MAX_STAGES and BWD_SMEM_BYTES (see the NOTE above BWD_BYTES_IN_FLIGHT); 1 (no pipeline) for row blocks
    past BWD_PIPELINE_MAX_LANES lanes.

    NOTE: counted with two streams in pre mode too, the rule gave the pre-residual LayerNorm backward at
    [8192, 1152] 5 stages (72 KiB of buffers a program): 0.78 -> 0.67 of copy in the sweep
    (benchmarks/results/sweep/2026-11-27-h200/); with its three it keeps 3 stages there and at 4096."""
    if BWD_STAGES is not None:
        return BWD_STAGES
    return _bwd_stages_rule(tile, n, element_size, per_sm, streams)


def _bwd_depth(tile: Tile, n: int, element_size: int, per_sm: int, streams: int, activation: int) -> int:
    """The backward launcher's pipeline depth for every form: the GELU form's fixed ACT_BWD_STAGES (none past
    BWD_PIPELINE_MAX_LANES lanes), the others' :func:`_bwd_stages` (``per_sm``: the form's programs a multiprocessor
    for narrow tiles)."""
    if activation:
        if tile.block_m * tile.lanes <= ACT_BWD_PIPELINE_MAX_LANES:
            return ACT_BWD_STAGES
        # (the NOTE above BWD_PIPELINE_MAX_LANES: the GELU form's wide pieces with a tail of 8 bytes a thread or more)
        wide_pipelined = (tile.tail and tile.lanes <= BWD_PIPELINE_MAX_LANES
                          and tile.block_t * element_size >= ACT_BWD_PIPELINE_TAIL_BYTES * 32 * tile.num_warps
                          and ACT_BWD_STAGES * streams * tile.lanes * element_size <= BWD_SMEM_BYTES)
        return ACT_BWD_STAGES if wide_pipelined else 1
    return _bwd_stages(tile, n, element_size, _programs_per_sm(tile.block_n, per_sm), streams)


@functools.lru_cache(maxsize=None)
def _bwd_stages_rule(tile: Tile, n: int, element_size: int, per_sm: int, streams: int) -> int:
    if tile.block_m * tile.lanes > BWD_PIPELINE_MAX_LANES:
        return 1  # (the NOTE above BWD_PIPELINE_MAX_LANES)
    real = streams * tile.block_m * n * element_size
    padded = streams * tile.block_m * tile.lanes * element_size
    stages = 1 + cdiv(BWD_BYTES_IN_FLIGHT, per_sm * real)
    budget = BWD_THREE_PIECES_SMEM_BYTES if tile.block_u > 1 else BWD_SMEM_BYTES  # (the NOTE above it)
    fit = budget // (per_sm * padded)
    if tile.block_m * tile.lanes > BWD_PIPELINE_FULL_LANES and (fit < 2 or element_size > 2):
        return 1  # (the NOTE above BWD_PIPELINE_MAX_LANES: the wide pieces pipelined in 16-bit dtypes only)
    return max(2, min(stages, BWD_MAX_STAGES, fit))


def _act_bwd_maxnreg(tile: Tile) -> int:
    """The GELU form's one-tile backward's register cap: ACT_BWD_MAXNREG, or what a multiprocessor's registers give
    each thread of a wider block (32 warps: 64; Triton tells ptxas no block size, and a cap past it fails to launch)."""
    return min(ACT_BWD_MAXNREG, SM_REGISTERS // (32 * tile.num_warps))


def joint_sums_threads(tile: Tile, scalar: bool = False, forward: bool = False) -> int:
    """A row in pieces' THREADS (both passes' kernels; ``forward``: also FWD_JOINT_SUMS): the program's threads where
    every piece spans them (the NOTE above JOINT_SUMS), else 0 (the row's sums reduced piece by piece): never for rows
    of one-element accesses."""
    if not (JOINT_SUMS and (FWD_JOINT_SUMS or not forward) and tile.tail and tile.block_m == 1 and not scalar):
        return 0
    threads = 32 * tile.num_warps
    return threads if min(tile.block_n, tile.block_t, tile.block_u if tile.block_u > 1 else threads) >= threads else 0


def _act_programs_per_sm(tile: Tile) -> int:
    """The GELU form's backward programs a multiprocessor: as many of the tile's as fit its registers under the
    ACT_BWD_MAXNREG cap (65536 a multiprocessor on sm_80-sm_90: 16 warps at 128 a thread), or ACT_BWD_WARPS_PER_SM
    warps where set (the NOTE above ACT_BWD_PIECES_FROM_LANES)."""
    warps = ACT_BWD_WARPS_PER_SM or SM_REGISTERS // (32 * ACT_BWD_MAXNREG)
    return max(1, warps // tile.num_warps)


def _programs_per_sm(block_n: int, per_sm: int) -> int:
    """The backward's programs a multiprocessor: ``per_sm`` for tiles up to 4096 lanes, one for wider ones
    (the comment above FWD_TILE_ELEMENTS)."""
    return per_sm if block_n <= 4096 else 1


def _num_programs(x: Tensor, row_blocks: int, block_n: int, per_sm: int) -> int:
    if x.is_cuda:
        return max(1, min(row_blocks, sm_count(x.device) * _programs_per_sm(block_n, per_sm)))
    return max(1, min(row_blocks, 4))


def _statistics(x: Tensor, is_rms: bool, stats: bool) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """The forwards' ``(mean, rstd)`` buffers, fp32: mean for LayerNorm with ``stats``, rstd with ``stats``, else
    None. NOTE: shaped like x's rows (its leading dimensions), so that a DTensor x sharded on any of them shards
    its statistics the same way (ops/sharding.py); the kernels index them by flat row."""
    if not stats:
        return None, None
    mean = None if is_rms else x.new_empty(x.shape[:-1], dtype=torch.float32)
    return mean, x.new_empty(x.shape[:-1], dtype=torch.float32)


@launcher_op("norm_fwd")
def _norm_fwd(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, mode: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, activation: int, stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """LayerNorm / RMSNorm forward in every form: returns ``(y, s, mean, rstd)``, an empty tensor for each
    one the form has not: ``s`` (pre mode's residual stream) in pre mode only, ``mean`` for LayerNorm with
    ``stats`` only, ``rstd`` with ``stats`` only (the statistics the backward reads; inference needs
    none). ``mode``: NONE, PRE or POST; ``activation``: 0 or a GELU code, applied after the affine
    (without a residual only). NOTE: always four outputs, so that a DTensor rule can give each one its
    placement (ops/sharding.py)."""
    if activation and mode != NONE:
        raise ValueError("residual_mode: an activation after the norm is fused only without a residual")
    n = int(x.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    m = x2.shape[0]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    s = torch.empty_like(y) if mode == PRE else None
    mean, rstd = _statistics(x, is_rms, stats)
    outputs = (y, empty_if_none(s, x), empty_if_none(mean, x), empty_if_none(rstd, x))
    if m == 0:
        return outputs
    y2 = y.view(-1, n)
    s2 = None if s is None else s.view(-1, n)
    vec, n_units, strides = in_row_units(n, x2.stride(0), row_stride(res2), y2.stride(0), row_stride(s2))
    scalar = scalar_rows(vec, x2)
    tile = _forward_tile(forward_rule(n, is_rms, mode != NONE, mode == PRE, scalar), m, x2.device)
    programs, stages = cdiv(m, tile.block_m), 0
    if n > FWD_PERSIST_FROM_LANES and tile.block_m == 1:  # (a narrow row's launch pays no more host time for it)
        programs, stages = _forward_programs(x2, programs, tile, mode, activation, scalar)
    _fwd_kernel(
        (programs,),
        x2, res2, weight, bias, y2, s2, mean, rstd, seed if dropout_p > 0 else None,
        *strides,
        m, n_units, eps, dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=weight is not None, HAS_B=bias is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        STATS=stats, **tile.constexprs(n), VEC=vec, STAGES=stages,
        EARLY_RESIDUAL=early_residual(tile, n, mode, stages), WB_EVICT=forward_weight_hint(activation),
        THREADS=joint_sums_threads(tile, scalar, forward=True), num_warps=tile.num_warps,
        maxnreg=_fwd_maxnreg(tile, stages, mode, x.element_size(), scalar),
    )
    return outputs


# NOTE: the post-residual forward (y = residual + norm(x)) of a row held in registers loads the residual with x, before
# the statistics, so that its latency hides under their reductions instead of following them; except in one
# power-of-two tile of more than FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES lanes without column masks, where the early load
# lost. Counted for sm_90 on a CPU (benchmarks/kernel_stats.py --rule --forms ln-post, the constant 0 against
# 1048576): such a tile's statistics take 3 barriers where a masked tile's or a row in pieces take 7, so less latency
# waits on them, while the early residual costs registers everywhere (2048 62 -> 72, 4096 62 -> 79, 8192 69 -> 93
# a thread, fewer programs a multiprocessor; 1024 67 -> 72, 2560 79 -> 96, 4304 78 -> 84). Measured on an H200
# (benchmarks/norm_forward_warps.py --setting: the forward launcher in inference, late and early alternating in one
# process; benchmarks/results/launch-rules/25-forward-streams-2026-12-03-h200/), the late load's time over the early
# one's at rows 2048 / 8192 / 32768: 768 1.14 / 1.06 / 1.03, 1024 1.19 / 1.03 / 1.03, 1152 1.14 / 1.12 / 1.10, 1536
# 0.96 / 1.08 / 1.06, 2560 1.17 / 1.09 / 1.08, 3072 1.05 / 1.10 / 1.10, 4304 1.14 / 1.12 / 1.15, 5120 1.11 / 1.09 /
# 1.10, 6144 1.09 / 1.09 / 1.09; the whole tiles 2048 0.93 / 1.00 / 1.00, 4096 0.97 / 1.01 / 1.00, 8192 0.99 / 0.98 /
# 0.98. Measured in the same call and not taken: pre mode's s stored as soon as it is loaded (0.94-1.10, geometric
# mean 0.997), and cache hints on the rows' streams (loads and stores evict_first, the weight and bias evict_last:
# 1.05-1.20 faster at 2048 rows, 0.92-0.95 at 32768 in every form). Rows past FWD_PERSIST_FROM_LANES in persistent
# programs read their residual a row ahead already (the NOTE above FWD_PERSIST_STAGES); the FP8 forward keeps its
# order. 0: off.
FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES = 1024


def early_residual(tile: Tile, n: int, mode: int = POST, stages: int = 0) -> bool:
    """Whether the forward of rows of ``n`` in ``mode`` on ``tile`` loads its residual with x (the NOTE above
    FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES): the post-residual form, one chunk, a program a row block (``stages`` 0)."""
    if mode != POST or stages or not FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES or tile.num_chunks != 1:
        return False
    return tile.tail or n % tile.block_n != 0 or tile.block_n <= FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES


# NOTE: the plain forward loads its weight and bias with an evict_last cache hint, as Inductor's kernels do: a program
# of a few rows reads the whole weight again, as many bytes as a row of x, through caches that the rows' streams, each
# read once, would otherwise evict it from (the likely reading, not shown). Measured on an H200
# (benchmarks/norm_forward_warps.py --setting, the forward launcher in inference, with and without the hint alternating
# in one process, two rounds; benchmarks/results/launch-rules/26-weight-hint-2026-12-04-h200/), the time without it over
# the time with it, by form's geometric mean 1.00-1.03 (2048 rows 1.03, 32768 rows 1.006 and never below 0.996 there);
# post-residual at 8192 wide 1.09-1.11 at every row count, LayerNorm at 2048 rows 1.06-1.19 at 2560-8192 wide, RMSNorm
# at 2048 rows 1.00-1.16 up to 6144 wide; lowest post-residual [8192, 768 / 1024] 0.95-0.98 and LayerNorm [2048, 1152]
# 0.96-0.97 (kernels of 5-16 us). Measured in the same call and not taken: the weight and bias loaded first, before x's
# statistics, as values (Inductor's order): 0.95 by LayerNorm's geometric mean (to 0.76; 17-42 registers a thread more
# at 4096-4304, benchmarks/kernel_stats.py --rule). The FP8 forward (its vectors in the tile's shape) and the backward
# (the weight loaded once a program) keep theirs. "": no hint.
FWD_WB_EVICT = "evict_last"
# NOTE: not in the GELU form (LayerNorm + GELU), which that A/B did not run: the sweep after it
# (benchmarks/results/sweep/2026-12-04-h200-ln-gelu/) had its forward at 8192 wide 0.86-0.87 of copy where it had been
# 0.95-0.97, and with the hint and without in one process (benchmarks/norm_forward_warps.py --forms ln-gelu --setting,
# two rounds; launch-rules/29-gelu-weight-hint-2026-12-04-h200/), [8192 / 32768, 8192] 0.87-0.88 -> 0.96-0.97 of copy
# without it, 14336 wide 0.72-0.74 -> 0.75-0.77, 11008 0.82-0.83 -> 0.82-0.84, 2048 and 4096 wide equal. Why the hint
# costs this form and pays in the others was not looked into. ACT_FWD_WB_EVICT: its hint ("": none).
ACT_FWD_WB_EVICT = ""


def forward_weight_hint(activation: int) -> str:
    """The forward's weight and bias loads' cache hint (the NOTEs above FWD_WB_EVICT and ACT_FWD_WB_EVICT)."""
    return ACT_FWD_WB_EVICT if activation else FWD_WB_EVICT


# NOTE: a row past FWD_PERSIST_FROM_LANES lanes held in registers (one row a program, one chunk) on FWD_WIDE_WARPS
# warps, in the post-residual form or (in one padded tile) LayerNorm without a residual or activation, goes to
# persistent programs, FWD_PERSIST_PER_SM a multiprocessor, each walking a strided set of rows with its loads
# FWD_PERSIST_STAGES - 1 rows ahead (Triton's pipeliner, as the backward's wide pieces) and the weight and bias
# loaded once. One row a program, such programs hold a multiprocessor two at a time (FWD_WIDE_MAXNREG) and a row's
# reads wait for its own statistics: the post form reads its residual after them, which the pipeline reads a row
# ahead. Measured on an H200 (benchmarks/norm_tiles.py --fwd-setting, settings alternating in one process, 2-3
# rounds; bf16, fraction of a same-size copy, a program a row -> persistent;
# benchmarks/results/launch-rules/23-forward-persistent-2026-12-02-h200/): post-residual [16384, 11008] 0.81 -> 0.98,
# [32768, 11008] 0.82 -> 1.00, [4096, 11008] 0.75 -> 0.89, [16384, 12288] 0.86 -> 0.97, [16384, 13312] 0.89 -> 0.98,
# [16384, 14336] 0.91 -> 0.97, [2048, 14336] 0.80 -> 0.86, [16384, 16384] 0.97 -> 0.98; LayerNorm in the padded
# 16384-lane tile: [16384, 14336] 0.86 -> 0.92, [2048, 14336] 0.72 -> 0.81, [16384, 13312] 0.84 -> 0.90. Left out,
# as they lost: LayerNorm in a whole 16384-lane tile (a program a row at 0.92-0.94 already; 0.94 -> 0.93) and at
# 11008 / 12288 (8192 + 4096 on 8 warps, three programs a multiprocessor: 0.80 / 0.86 -> 0.77 / 0.83 on 16 warps;
# so no rows in pieces, 8200 = 8192 + 16 on 16 warps included, not measured); the pre-residual form, which reads
# both its inputs first (0.97-0.99 -> 0.90-0.93); + GELU (0.81 -> 0.59 at 11008, even at 14336). 2 stages lost
# everywhere (0.44-0.84), 4 ran as 3. 16-bit dtypes only (fp32 not measured; its stages take twice the shared
# memory), stages within FWD_PERSIST_SMEM_BYTES, and at least FWD_PERSIST_STAGES rows a program (else a program a
# row, as before). The weight and bias are loaded once: loaded in the loop, the pipeliner staged them too (LayerNorm
# at 11008: 147 KiB of shared memory), and post-residual [16384, 11008] ran 0.87 against 0.98. 0: off.
FWD_PERSIST_FROM_LANES = 8192
FWD_PERSIST_STAGES = 3
FWD_PERSIST_PER_SM = 1
FWD_PERSIST_SMEM_BYTES = 160 * 1024
# NOTE: on 16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS) the post-residual form's
# two pieces (8193-12288 lanes, the ones on 16 warps) run a program a row, not persistent (FWD_PERSIST_SCALAR_PIECES):
# timed on an H100 (benchmarks/norm_tiles.py through `LANDED=9 PHASE=wide FWD_ONLY=1
# scripts/issue22_scalar_rows_gpu.sh`, the forward launcher at [16384, n], FWD_PERSIST_STAGES=0 against the rule in
# two alternating rounds of one process;
# launch-rules/35-odd-widths-2026-12-06-h100/15-forward-settings/ and 16-post-pieces-pipeline/) 8447 1.35x (0.56 ->
# 0.76 of copy), 8703 1.35x, 11007 1.27x (0.51 -> 0.65), 12287 1.22x (0.55 -> 0.67). Its padded 16384-lane tile keeps
# the pipeline (12345 / 15001: 0.41x without it). Not measured, a guess: a one-element (2-byte) load cannot be an
# asynchronous copy (4 bytes at least), so the pipeliner's staging costs more than the latency it hides.
FWD_PERSIST_SCALAR_PIECES = False


def forward_stages(tile: Tile, n: int, mode: int = NONE, activation: int = 0, element_size: int = 2,
                   scalar: bool = False) -> int:
    """The forward's pipeline depth for rows of ``n`` in ``tile``, ``mode`` (0: a program a row block; the NOTE above
    FWD_PERSIST_STAGES), before the row count's part (:func:`_forward_programs`); ``scalar``: 16-bit rows of
    one-element accesses, whose pieces take none (the NOTE above FWD_PERSIST_SCALAR_PIECES)."""
    if (not FWD_PERSIST_STAGES or tile.num_chunks != 1 or tile.block_m != 1 or tile.lanes <= FWD_PERSIST_FROM_LANES
            or tile.num_warps < FWD_WIDE_WARPS or element_size > 2
            or (scalar and tile.tail and not FWD_PERSIST_SCALAR_PIECES)):
        return 0
    if not (mode == POST or (mode == NONE and not activation and not tile.tail and tile.lanes > n)):
        return 0
    streams = 2 if mode == POST else 1  # the rows the pipeline stages: x (and the residual)
    if (FWD_PERSIST_STAGES - 1) * streams * tile.lanes * element_size > FWD_PERSIST_SMEM_BYTES:
        return 0
    return FWD_PERSIST_STAGES


def _forward_programs(x: Tensor, row_blocks: int, tile: Tile, mode: int, activation: int, scalar: bool = False
                      ) -> tuple[int, int]:
    """``(programs, stages)`` of the forward's launch: a program a row block, or persistent programs
    (:func:`forward_stages`; ``scalar``: its rows' access width) where each walks at least its stages' rows."""
    stages = forward_stages(tile, int(x.shape[-1]), mode, activation, x.element_size(), scalar)
    if not stages:
        return row_blocks, 0
    programs = _num_programs(x, row_blocks, 0, FWD_PERSIST_PER_SM)
    if row_blocks < stages * programs:
        return row_blocks, 0
    return programs, stages


# NOTE: the forward's rows past 8192 lanes take one row a program of 16 warps (512 threads). Above 64 registers
# a thread only one such program fits a multiprocessor, and nothing overlaps its reductions with another row's
# loads: at [8192, 14336] the post- and pre-residual forms (84 and 89 registers as triton 3.9 compiles them for
# sm_90) ran 0.66 and 0.84 of copy. FWD_WIDE_MAXNREG caps such a program's registers so that two fit
# (65536 / (2 x 512)); measured (H200, benchmarks/norm_tiles.py --fwd-maxnreg 0,64, forward of a 1 GiB copy,
# benchmarks/results/launch-rules/9-wide-forward/): 14336 post-residual 0.66 -> 0.90, pre-residual 0.84 -> 0.97
# (spilling 152 and 72 bytes a thread), LayerNorm / RMSNorm 0.83 / 0.91 -> 0.83 / 0.92; at 11008 (two pieces,
# 51-79 registers) within 0.02 either way. None: no cap.
FWD_WIDE_MAXNREG = 64
FWD_WIDE_WARPS = 16


# NOTE: the forward of LayerNorm without a residual (and of its GELU form), one row a program past
# FWD_PERSIST_FROM_LANES lanes on fewer than FWD_WIDE_WARPS warps (two pieces, 8193-12288 lanes: 4 warps at 8960 /
# 9216, 8 at 10240-12288), caps a thread's registers so that FWD_ROW_WARPS_PER_SM warps of such programs share a
# multiprocessor (4 warps: 5 programs at 96 registers; 8 warps: 3 at 80). As Triton 3.6 builds them for sm_90
# (benchmarks/kernel_stats.py --rule), they took 100 (11008 / 12288) to 130 registers (8960 / 9216): two or three
# programs, 12-16 warps a multiprocessor; capped, they spill nothing. Measured on an H100 (benchmarks/norm_tiles.py
# --fwd-setting through scripts/issue22_row_cap_gpu.sh: the forward launcher, no cap against the caps for 20 / 24 / 32
# warps, in two alternating rounds of one process; benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/), 20
# warps against none: LayerNorm [16384, 11008] 1.047x, [4096 / 32768, 11008] 1.053x / 1.046x, [16384, 12288] 1.011x,
# 10240 1.004x (78 registers: the cap does not bind), 8960 / 9216 0.987x / 0.984x (left as measured); + GELU 8960 /
# 9216 1.39x / 1.35x, 11007 (odd: one-element accesses) 1.02x, 11008 / 12288 1.00x. 24 warps ran as 20 on 8 warps and
# lost on 4 (80 registers, 128-176 bytes of spill: LayerNorm 0.65x), 32 lost everywhere (0.40-0.95x). The residual
# forms keep their registers: at 8960 / 9216 they spill under the cap (post-residual 232 bytes at 96 registers: 0.64x;
# pre-residual 64: 0.89x), and from 10240 they run on 16 warps; fp32 rows too (not measured), and 16-bit rows of
# one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS), which hold each value in a register of its own:
# on 4 warps (8193-9727) they build without a spill at 168 registers and spill 264-416 bytes under the cap (not
# timed); at 11007 (8 warps, 64-72 bytes under it) the cap ran 1.006x / 1.019x (LayerNorm / + GELU). 0: off.
FWD_ROW_WARPS_PER_SM = 20


def _fwd_maxnreg(tile: Tile, stages: int = 0, mode: int = NONE, element_size: int = 2, scalar: bool = False
                 ) -> Optional[int]:
    """The forward's register cap for ``tile`` (the NOTE above FWD_WIDE_MAXNREG; persistent programs, ``stages``:
    what FWD_PERSIST_PER_SM of them leave a thread; the one-row programs of ``mode`` NONE in 16-bit rows
    (``element_size``) of vector accesses (not ``scalar``): the NOTE above FWD_ROW_WARPS_PER_SM)."""
    if stages:
        threads = 32 * tile.num_warps * FWD_PERSIST_PER_SM
        return SM_REGISTERS // threads if threads >= 512 else None
    if tile.num_warps >= FWD_WIDE_WARPS:
        return FWD_WIDE_MAXNREG
    if (FWD_ROW_WARPS_PER_SM and mode == NONE and element_size <= 2 and not scalar and tile.block_m == 1
            and tile.num_chunks == 1 and tile.lanes > FWD_PERSIST_FROM_LANES):
        programs = cdiv(FWD_ROW_WARPS_PER_SM, tile.num_warps)
        return SM_REGISTERS // (32 * tile.num_warps * programs) // 8 * 8
    return None


# The forward with an FP8 output (forward only) takes the forward's tiles (_tile) and rows a program, with its own
# warps: one per FP8_FWD_LANES_PER_WARP lanes of the tile, and at least FP8_FWD_RESIDUAL_WARPS_PER_ROW a row in the
# residual forms, which stream 4 more bytes an element (a row with a tail, or in chunks, keeps the forward's).
# NOTE: measured against the forward's warps (one per 1024 lanes, at least 4), H200, [16384, n] bf16, old and new code
# in one call (benchmarks/results/fp8/15-fp8-forward-2026-11-29-h200/): 2048 lanes a warp ran as fast or faster in
# the plain forms from 1152 to 8192 wide, and in the residual forms from 4096 (best of two rounds, rowwise: LayerNorm
# 8192 1.08x, 4304 1.13x; post-residual 4304 1.20x, 14336 1.61x; LayerNorm at 4096 0.90 -> 0.93 of copy); with one
# warp a row (two rows a program at 1152 and 2048) the residual forms lost (post-residual 1152 0.83 -> 0.75), hence
# their floor; 4096 lanes a warp lost almost everywhere. Left as measured: 0.96-0.98x at 2560 (post-residual, and
# LayerNorm tensorwise) and LayerNorm rowwise at 14336 (0.97x).
FP8_FWD_LANES_PER_WARP = 2048
# NOTE: the FP8 forward takes the plain forward's one-row pieces (the NOTE above FWD_PIECES_FROM_LANES) from rows of
# FP8_FWD_PIECES_FROM_LANES, so that from there its statistics are the plain forward's arithmetic too. Measured, H200,
# [16384, n] bf16, against the padded tile (old and new code in alternating rounds of one call, rowwise / tensorwise,
# fraction of copy, the first of two rounds, the second within 0.03; benchmarks/results/launch-rules/
# 15-one-row-pieces-2026-11-29-h200/4-final/): 4304 RMSNorm 0.71 / 0.72 -> 0.95 / 0.91, LayerNorm 0.57 / 0.49 ->
# 0.73 / 0.72, post-residual 0.76 / 0.63 -> 0.88 / 0.83; 2304 LayerNorm 0.64 / 0.56 -> 0.79 / 0.76. At 1152 (1024 +
# 128 on 2 warps) rowwise lost (RMSNorm 22.9 -> 25.2 us, LayerNorm 28.9 -> 30.9) where tensorwise and post-residual
# gained 1.05-1.09x: 1152-1536 keep the padded tile.
FP8_FWD_PIECES_FROM_LANES = 2048
FP8_FWD_RESIDUAL_WARPS_PER_ROW = 2
FP8_FWD_MIN_WARPS = 1  # a floor for benchmarks/norm_fp8.py --warps
FP8_FWD_MAXNREG = None  # a register cap for the FP8 forward (benchmarks/norm_fp8.py --maxnreg times it)


def fp8_forward_rows(n: int) -> Tile:
    """The FP8 forward's rows and pieces for rows of ``n``, before its warps (:func:`fp8_forward_tile`): the one-row
    pieces from FP8_FWD_PIECES_FROM_LANES (the NOTE above it), else the forward's width tile."""
    return (_one_row_pieces(n, FP8_FWD_PIECES_FROM_LANES, TAIL_FROM_LANES, FWD_PIECE_LANES_PER_WARP,
                            FWD_PIECE_MIN_WARPS)
            or _tile(n, FWD_TILE_ELEMENTS, FWD_ELEMENTS_PER_WARP, FWD_MAX_LANES, TAIL_FROM_LANES))


def fp8_forward_tile(n: int, m=None, device: Optional[torch.device] = None, residual: bool = False) -> Tile:
    """The tile of the forward with an FP8 output for rows of ``n`` (``m`` of them on ``device``, when given: the
    forward's row-count rule), ``residual`` for the pre- and post-residual forms: the forward's rows, with warps
    by the rule above (benchmarks/norm_fp8.py compiles and times it)."""
    tile = fp8_forward_rows(n)
    if device is not None:
        tile = _forward_tile(tile, m, device)
    warps = tile.num_warps
    if not tile.tail and tile.num_chunks == 1:
        warps = next_power_of_2(cdiv(tile.block_m * tile.block_n, FP8_FWD_LANES_PER_WARP))
        if residual:
            warps = max(warps, tile.block_m * FP8_FWD_RESIDUAL_WARPS_PER_ROW)
        warps = min(16, warps)
    return tile._replace(num_warps=max(warps, FP8_FWD_MIN_WARPS))


@launcher_op("norm_fwd_fp8", mutates_args=("history", "amax"))
def _norm_fwd_fp8(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, residual_form: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, activation: int,
    history: Optional[Tensor], amax: Optional[Tensor], stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The norms' forward with an FP8 output: returns ``(y_fp8, scale, s, y, mean, rstd)``.
    ``y_fp8``: the output in e4m3, shaped like x; ``scale``: fp32, rowwise (``history`` None) one a row,
    ``(*x.shape[:-1], 1)``, tensorwise 0-d from ``history`` (delayed scaling: ops/fp8.py), this call's amax
    then rolled into ``history`` (``amax``: its zeroed (1,) scratch). ``s`` in pre mode and ``y`` (the output
    in x's dtype) in post mode, the residual stream; else empty. ``mean`` (LayerNorm) and ``rstd`` with ``stats``
    only (a training step's backward reads them: models/fused.py's FP8 projections), else empty.
    ``residual_form``: NONE, PRE or POST (NOTE: not named ``mode``, which a mutating op's arguments cannot be:
    torch's auto_functionalized passes them as keywords to a function of its own with a ``mode`` parameter).
    Arguments otherwise as :func:`_norm_fwd`."""
    mode = residual_form
    if activation and mode != NONE:
        raise ValueError("residual_mode: an activation after the norm is fused only without a residual")
    n = int(x.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    m = x2.shape[0]
    rowwise = history is None
    if not rowwise:
        _fp8.fp8_history.settle(history)
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scale = x.new_empty((*x.shape[:-1], 1), dtype=torch.float32) if rowwise else empty_scalar(x)
    s = torch.empty_like(x, memory_format=torch.contiguous_format) if mode == PRE else None
    y = torch.empty_like(x, memory_format=torch.contiguous_format) if mode == POST else None
    mean, rstd = _statistics(x, is_rms, stats)
    outputs = (q, scale, empty_if_none(s, x), empty_if_none(y, x), empty_if_none(mean, x), empty_if_none(rstd, x))
    if m == 0:
        if not rowwise:
            scale.copy_(delayed_scale_ref(history))
            roll_amax_history(history, amax)  # an empty call records an amax of 0, as the reference
        return outputs
    _launch_fwd_fp8(x2, res2, weight, bias, y, s, q, scale, history, amax, seed, mean, rstd, eps, mode, dropout_p,
                    is_rms, cast_before_weight, activation, stats,
                    FP8_ROWWISE.value if rowwise else FP8_TENSORWISE.value)
    if not rowwise:
        roll_amax_history(history, amax)
    return outputs


def _launch_fwd_fp8(x2, res2, weight, bias, y, s, q, scale, history, amax, seed, mean, rstd, eps, mode, dropout_p,
                    is_rms, cast_before_weight, activation, stats, code) -> None:
    """Launches the forward with an FP8 output code (``_norm_fwd_fp8_kernel``) over the (M, n) rows ``x2``."""
    m, n = x2.shape[0], int(x2.shape[1])  # a symbolic width is specialized: the tiles depend on it
    h = 0 if history is None else int(history.shape[0])
    s2 = None if s is None else s.view(-1, n)
    y2 = None if y is None else y.view(-1, n)
    tile = fp8_forward_tile(n, m, x2.device, residual=mode != NONE)
    vec, n_units, strides = in_row_units(n, x2.stride(0), row_stride(res2), row_stride(y2), row_stride(s2))
    _fwd_fp8_kernel(
        (cdiv(m, tile.block_m),),
        x2, res2, weight, bias, y2, s2, q.view(-1, n), scale, history, amax, seed if dropout_p > 0 else None,
        mean, rstd, *strides,
        m, n_units, eps, dropout_p, dropout_scale(dropout_p), h,
        IS_RMS=is_rms, MODE=mode, HAS_W=weight is not None, HAS_B=bias is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        STATS=stats, **tile.constexprs(n), FP8=code, BLOCK_H=next_power_of_2(h), VEC=vec,
        PDL=code == FP8_TENSORWISE.value and _fp8.roll_pdl(x2),
        THREADS=joint_sums_threads(tile, scalar_rows(vec, x2), forward=True), num_warps=tile.num_warps,
        maxnreg=FP8_FWD_MAXNREG,
    )


@launcher_op("norm_fwd_amax")
def _norm_fwd_amax(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], residual: Optional[Tensor], seed: Optional[Tensor],
    eps: float, residual_form: int, dropout_p: float, is_rms: bool, cast_before_weight: bool, stats: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The norms' forward for a tensorwise FP8 projection (no residual, or pre mode): ``(y, amax, s, mean, rstd)``,
    ``y`` the normalized output in x's dtype and ``amax`` max |y| (as written) as (1,) fp32, folded by the kernel
    that writes y (the projection's cast then reads y once: fp8_linear's ``x_amax``); ``s``, ``mean``, ``rstd`` as
    :func:`_norm_fwd`'s. The FP8 forward's kernel and tiles (FP8 code ``fp8.FP8_AMAX``)."""
    mode = residual_form
    if mode == POST:
        raise ValueError("residual_mode: the output with its amax is the normalized output, before a residual; "
                         "post mode's output is the residual stream")
    n = int(x.shape[-1])
    x2, res2 = as_rows(x, n), as_rows(residual, n)
    weight, bias = vector(weight), vector(bias)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    amax = torch.zeros((1,), dtype=torch.float32, device=x.device)
    s = torch.empty_like(y) if mode == PRE else None
    mean, rstd = _statistics(x, is_rms, stats)
    if x2.shape[0] > 0:
        _launch_fwd_fp8(x2, res2, weight, bias, None, s, y, None, None, amax, seed, mean, rstd, eps, mode, dropout_p,
                        is_rms, cast_before_weight, 0, stats, FP8_AMAX.value)
    return y, amax, empty_if_none(s, x), empty_if_none(mean, x), empty_if_none(rstd, x)


@launcher_op("norm_bwd")
def _norm_bwd(
    dy: Tensor, ds: Optional[Tensor], z: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], has_bias: bool,
    mean: Optional[Tensor], rstd: Tensor, seed: Optional[Tensor], mode: int, dropout_p: float, is_rms: bool,
    cast_before_weight: bool, activation: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The norms' backward: returns ``(dx, dres, dweight, dbias)``, an empty tensor for each one the form
    has not: ``dres``, the residual's gradient where it differs from dx, in pre mode with dropout only;
    dweight / dbias with a weight / bias only. ``z`` is the normalized input the forward saved (x, or s
    in pre mode); ``bias`` is read to recompute an activation's input, and gives dbias its dtype."""
    n = int(z.shape[-1])  # a symbolic width is specialized: the tiles depend on it
    dy2, ds2, z2 = as_rows(dy, n), as_rows(ds, n), as_rows(z, n)
    weight, bias = vector(weight), vector(bias)
    m = z2.shape[0]
    has_w = weight is not None
    has_dropout = dropout_p > 0
    param_dtype = weight.dtype if has_w else z.dtype
    dx = torch.empty_like(z, memory_format=torch.contiguous_format)
    dres = dw = db = None
    if mode == PRE and has_dropout:
        dres = torch.empty_like(dx)
    if has_w:
        dw = z.new_empty((n,), dtype=param_dtype)
    if has_bias:
        # NOTE: in the bias's own dtype: with no weight, x's dtype had rounded an fp32 bias's gradient to bf16 (relative
        # error 3e-3 where the sums are exact in fp32; found by a fuzz of unlisted shapes, 2026-12-04)
        db = z.new_empty((n,), dtype=bias.dtype if bias is not None else param_dtype)
    outputs = (dx, empty_if_none(dres, z), empty_if_none(dw, z), empty_if_none(db, z))
    if m == 0:
        for grad in (dw, db):
            if grad is not None:
                grad.zero_()
        return outputs
    vec, n_units, strides = in_row_units(n, dy2.stride(0), row_stride(ds2), z2.stride(0), n, n)
    scalar = scalar_rows(vec, z)
    bf16 = z.dtype == torch.bfloat16 and dy.dtype == torch.bfloat16
    tile = backward_rule(n, activation, mode == PRE, z.element_size(), is_rms, scalar, bf16)
    block_m, block_n, num_chunks = tile.block_m, tile.block_n, tile.num_chunks
    row_blocks = cdiv(m, block_m)
    # NOTE: a small input (all its rows in a few tiles) is done by one program, which writes the
    # weight and bias gradients itself: one launch instead of two, where the launches are the cost.
    weight_kernel = (has_w or has_bias) and weight_kernel_rule(tile, n, scalar, activation, is_rms, mode == PRE)
    direct = num_chunks == 1 and m * n <= DIRECT_MAX_ELEMENTS and not weight_kernel
    per_sm = _act_programs_per_sm(tile) if activation else BWD_PROGRAMS_PER_SM
    g = 1 if direct else _num_programs(z, row_blocks, block_n, per_sm)
    stages = _stages(_bwd_depth(tile, n, z.element_size(), per_sm, 3 if ds is not None else 2, activation),
                     row_blocks, g)
    partial = None
    if (has_w or has_bias) and not direct and not weight_kernel:
        # Wide rows accumulate into PARTIAL in place, so there it must start at zero.
        alloc = torch.zeros if num_chunks > 1 else torch.empty
        partial = alloc((2, g, n), dtype=torch.float32, device=z.device)
    _bwd_kernel(
        (g,),
        dy2, ds2, z2, weight, bias if activation else None, mean, rstd, seed if has_dropout else None,
        dx.view(-1, n), None if dres is None else dres.view(-1, n), partial,
        dw if direct else None, db if direct else None,
        *strides,
        m, n_units, dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=has_w, HAS_B=has_bias, HAS_DS=ds is not None,
        HAS_DROPOUT=dropout_code(dropout_p, n), CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation,
        **tile.constexprs(n), BLOCK_U=tile.block_u,
        STAGES=stages, DIRECT=direct, TWO_FMA=_two_fma(tile, activation),
        RELOAD=_bwd_reload(tile), EARLY_ACC=_early_acc(tile, mode, stages), VEC=vec,
        WEIGHT_KERNEL=weight_kernel, HOLD=_bwd_hold(tile, n, z2.dtype, dy2.dtype, activation, mode),
        THREADS=joint_sums_threads(tile, scalar), num_warps=tile.num_warps,
        maxnreg=_act_bwd_maxnreg(tile) if activation and num_chunks == 1 else None,
    )
    if weight_kernel:
        partial = _launch_bwd_weight(dy2, z2, weight, bias if activation else None, mean, rstd,
                                     seed if has_dropout else None, strides, m, n, vec, n_units, has_w, has_bias,
                                     dropout_p, is_rms, mode, cast_before_weight, activation)
    if partial is not None:
        sum_partials(partial, dw, db)
    return outputs


def weight_kernel_rule(tile: Tile, n: int, scalar: bool = False, activation: int = 0, is_rms: bool = False,
                       pre: bool = False) -> bool:
    """Whether rows of ``n`` in ``tile`` take their weight / bias gradients from the weight kernel (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): rows in chunks from BWD_WEIGHT_KERNEL_FROM_LANES lanes, scalar rows in one-row
    chunks, and scalar rows in one whole row but plain RMSNorm's (``scalar``, ``activation``, ``is_rms``, ``pre``: as
    :func:`backward_rule`'s; the NOTE above BWD_SCALAR_WHOLE_ROW_RMS_ONLY)."""
    if tile.num_chunks == 1:
        knob = BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS if is_rms and not pre else BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL
        return bool(knob and not tile.tail and tile.block_m == 1 and _scalar_row_chunks(n, activation, scalar))
    return 0 < BWD_WEIGHT_KERNEL_FROM_LANES <= n or _scalar_row_chunks(n, activation, scalar)


def weight_grid(m: int, n: int, sms: int) -> tuple[int, int, int]:
    """``(column blocks, row groups, rows a group)`` of the weight kernel (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): the columns in BWD_WEIGHT_COLUMNS, and as many row groups (each a multiple of
    BWD_WEIGHT_ROWS rows) as make BWD_WEIGHT_PROGRAMS_PER_SM programs a multiprocessor of ``sms``, no more than the
    rows allow."""
    blocks = cdiv(n, BWD_WEIGHT_COLUMNS)
    groups = max(1, min(cdiv(m, BWD_WEIGHT_ROWS), cdiv(BWD_WEIGHT_PROGRAMS_PER_SM * sms, blocks)))
    rows_per_group = cdiv(cdiv(m, groups), BWD_WEIGHT_ROWS) * BWD_WEIGHT_ROWS
    return blocks, cdiv(m, rows_per_group), rows_per_group


def _launch_bwd_weight(dy2, z2, weight, bias, mean, rstd, seed, strides, m, n, vec, n_units, has_w, has_bias,
                       dropout_p, is_rms, mode, cast_before_weight, activation) -> Tensor:
    """The weight kernel's launch (:func:`_norm_bwd_weight_kernel`); returns its partial sums (2, G, n)."""
    blocks, groups, rows_per_group = weight_grid(m, n, sm_count(z2.device) if z2.is_cuda else 1)
    partial = torch.empty((2, groups, n), dtype=torch.float32, device=z2.device)
    _bwd_weight_kernel(
        (blocks, groups),
        dy2, z2, weight, bias, mean, rstd, seed, partial, strides[0], strides[2], m, n_units, rows_per_group,
        dropout_p, dropout_scale(dropout_p),
        IS_RMS=is_rms, MODE=mode, HAS_W=has_w, HAS_B=has_bias, HAS_DROPOUT=dropout_code(dropout_p, n),
        CAST_BEFORE_WEIGHT=cast_before_weight, ACTIVATION=activation, BLOCK_R=BWD_WEIGHT_ROWS,
        BLOCK_C=BWD_WEIGHT_COLUMNS, STAGES=BWD_WEIGHT_STAGES, VEC=vec, num_warps=BWD_WEIGHT_WARPS,
    )
    return partial


# ----------------------------------------------------------------------------------------
# Autograd: one Function, eager and under torch.compile
# ----------------------------------------------------------------------------------------


class _NormFunction(torch.autograd.Function):
    """Every norm form. ``config``: (eps, mode, dropout_p, is_rms, cast_before_weight, activation).
    Returns (y, s); ``s`` is None unless the mode is PRE."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config):
        y, s, mean, rstd = _norm_fwd(x, weight, bias, residual, seed, *config, True)
        return y, _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)

    @staticmethod
    def backward(ctx, dy, ds):
        return _norm_backward(ctx, dy, ds)


class _NormFp8Function(torch.autograd.Function):
    """A norm whose normalized output feeds one FP8 projection in a training step (models/fused.py): the forward
    writes it in e4m3 with each row's scale and the statistics, and nothing in x's dtype but the residual stream.
    Returns ``(out, s, q, scale)``: ``out`` stands for the normalized output in autograd, ``y`` itself in post
    mode (the residual stream, which the projection reads), else a tensor of its shape with no storage of its own
    (zero strides), which :func:`blockfuse.ops.fp8.fp8_linear_quantized` takes beside ``q``: the projection's
    input gradient comes back here as its gradient. ``s``: pre mode's residual stream, else None; ``q`` and
    ``scale`` take no gradient. Then, while traced (else None), the row statistics ``mean`` (None for RMSNorm) and
    ``rstd``, no gradient either: with ``s`` (else x) what :func:`_norm_transposed_cast` makes y^T's cast again
    from (:func:`norm_for_fp8_projection`'s ``recast``)."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config, history=None, amax=None):
        eps, mode, dropout_p, is_rms, cast_before_weight, activation = config
        # (history, amax: tensorwise with delayed scaling from this state, updated in place; None: rowwise)
        q, scale, s, y, mean, rstd = _norm_fwd_fp8(x, weight, bias, residual, seed, eps, mode, dropout_p, is_rms,
                                                   cast_before_weight, activation, history, amax, True)
        s = _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)
        # (a launcher's absent output may be a shared empty tensor: not returned; eagerly none is returned, no Recast)
        traced = torch.compiler.is_compiling() or tracing()
        mean, rstd = (None if is_rms else mean, rstd) if traced else (None, None)
        ctx.mark_non_differentiable(q, scale, *(t for t in (mean, rstd) if t is not None))
        out = y if mode == POST else zero_stand_in(x, x.shape)
        return out, s, q, scale, mean, rstd

    @staticmethod
    def backward(ctx, dy, ds, dq, dscale, dmean, drstd):
        return (*_norm_backward(ctx, dy, ds), None, None)


class _NormAmaxFunction(torch.autograd.Function):
    """A norm whose normalized output feeds one tensorwise FP8 projection in a training step (models/fused.py):
    ``(y, s, amax, mean, rstd)``, the output in x's dtype, pre mode's residual stream (else None) and y's amax,
    folded by the kernel (:func:`_norm_fwd_amax`), which takes no gradient; then, while traced (else None), the
    row statistics as :class:`_NormFp8Function` returns them (:func:`norm_for_tensorwise_projection`'s
    ``recast``). The backward is :class:`_NormFunction`'s."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, seed, config):
        eps, mode, dropout_p, is_rms, cast_before_weight, _ = config
        y, amax, s, mean, rstd = _norm_fwd_amax(x, weight, bias, residual, seed, eps, mode, dropout_p, is_rms,
                                                cast_before_weight, True)
        s = _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd)
        traced = torch.compiler.is_compiling() or tracing()
        mean, rstd = (None if is_rms else mean, rstd) if traced else (None, None)
        ctx.mark_non_differentiable(amax, *(t for t in (mean, rstd) if t is not None))
        return y, s, amax, mean, rstd

    @staticmethod
    def backward(ctx, dy, ds, damax, dmean, drstd):
        return _norm_backward(ctx, dy, ds)


def _save_for_backward(ctx, x, weight, bias, seed, config, s, mean, rstd) -> Optional[Tensor]:
    """What both Functions' backward reads; returns ``s`` (None unless the mode is PRE)."""
    _, mode, _, is_rms, _, activation = config
    s = s if mode == PRE else None
    mean = None if is_rms else mean
    # Pre mode normalizes s = residual + dropout(x): keep s (an output the block keeps anyway as
    # its residual stream) rather than x and residual. An activation's backward also reads the bias, and the
    # bias gradient is made in the bias's dtype (a parameter: kept at no cost).
    ctx.save_for_backward(x if s is None else s, weight, bias, mean, rstd, seed)
    ctx.config = config
    ctx.has_bias = bias is not None
    ctx.set_materialize_grads(False)
    return s


def _norm_backward(ctx, dy, ds):
    z, weight, bias, mean, rstd, seed = ctx.saved_tensors
    _, mode, dropout_p, is_rms, cast_before_weight, activation = ctx.config
    if dy is None:
        dy = torch.zeros_like(z)
    grads = _norm_bwd(dy, ds if mode == PRE else None, z, weight, bias, ctx.has_bias, mean, rstd, seed, mode,
                      dropout_p, is_rms, cast_before_weight, activation)
    dx, dres, dw, db = grads
    if mode == POST:
        dresidual = dy  # the add passes the gradient straight through
    elif mode == PRE:
        dresidual = dres if dropout_p > 0 else dx
    else:
        dresidual = None
    db = db if ctx.has_bias else None
    dw = None if weight is None else dw
    return dx, dw, db, dresidual, None, None


def norm_for_fp8_projection(x, weight, bias, eps, residual, residual_mode, dropout_p, training, is_rms,
                            cast_before_weight=False, fp8_scaling: Optional[Float8Scaling] = None,
                            recast: Optional[list] = None):
    """The norm (LayerNorm, or RMSNorm with ``is_rms``; residual forms as :func:`layer_norm`'s) whose output one
    rowwise FP8 projection reads: ``((q, scale, proxy), stream)``. ``q`` (e4m3, x's shape) and ``scale`` (fp32,
    ``(*x.shape[:-1], 1)``) are the normalized output and its rows' scales, written by the one pass; ``stream``
    the residual stream (pre mode's ``s``, post mode's output), None without a residual. ``proxy``: None without
    autograd; in a training step what :func:`blockfuse.ops.fp8.fp8_linear_quantized` takes for the input's
    gradient (see :class:`_NormFp8Function`). For blocks (models/fused.py); needs the Triton path.
    ``fp8_scaling``: tensorwise instead, the one 0-d scale from this delayed-scaling state (the projection's,
    a ``Float8Linear(recipe="delayed")``'s x history; updated in place). ``recast``: a list, to which a traced
    training call with ``fp8_scaling`` (no residual, or pre mode) appends the projection's ``x_cast``, a
    :class:`blockfuse.ops.fp8.Recast` making y^T's cast again from the norm's input and statistics (eagerly
    :func:`cast_again_quantized` reads them from the norm's node)."""
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    if fp8_scaling is not None:
        check_fp8_output("tensorwise", fp8_scaling, x)
    history, amax = (None, None) if fp8_scaling is None else fp8_scaling
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    config = (float(eps), mode, p, is_rms, cast_before_weight, 0)
    if _needs_grad(x, weight, bias, residual):
        out, s, q, scale, mean, rstd = _NormFp8Function.apply(x, weight, bias, residual, seed, config, history,
                                                               amax)
        if torch.compiler.is_compiling():
            # NOTE: Dynamo traces the Function without its mark_non_differentiable (torch 2.11-2.13): q came back
            # requiring grad and the projection refused it; it takes no gradient either way.
            q, scale = q.detach(), scale.detach()
        if recast is not None and fp8_scaling is not None and mode != POST and (
                torch.compiler.is_compiling() or tracing()):
            recast.append(_fp8.Recast(_norm_transposed_cast, (cast_before_weight, True),
                                      (x if s is None else s, mean, rstd, weight, bias)))
        return (q, scale, out), (out if mode == POST else s)
    q, scale, s, y, _, _ = _norm_fwd_fp8(x, weight, bias, residual, seed, *config, history, amax, False)
    return (q, scale, None), (s if mode == PRE else y if mode == POST else None)


def norm_for_tensorwise_projection(x, weight, bias, eps, residual, residual_mode, dropout_p, training, is_rms,
                                   cast_before_weight=False, recast: Optional[list] = None):
    """The norm (LayerNorm, or RMSNorm with ``is_rms``; no residual, or pre mode) whose output one tensorwise FP8
    projection reads: ``((y, amax), stream)``. ``y`` is the normalized output in x's dtype, as the plain norm
    writes it, and ``amax`` (1,) fp32 its max |y|, folded by the kernel that writes y: the projection takes it as
    ``x_amax`` and its cast reads y once. ``stream``: pre mode's residual stream, else None. For blocks
    (models/fused.py); needs the Triton path. ``recast``: a list, to which a traced training call appends the
    projection's ``x_cast``, a :class:`blockfuse.ops.fp8.Recast` making y^T's cast with amax's scale again from the
    norm's input and statistics (eagerly :func:`cast_again` reads them from the norm's node)."""
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    config = (float(eps), mode, p, is_rms, cast_before_weight, 0)
    if _needs_grad(x, weight, bias, residual):
        y, s, amax, mean, rstd = _NormAmaxFunction.apply(x, weight, bias, residual, seed, config)
        if recast is not None and mode != POST and (torch.compiler.is_compiling() or tracing()):
            recast.append(_fp8.Recast(_norm_transposed_cast, (cast_before_weight, False),
                                      (x if s is None else s, mean, rstd, weight, bias)))
        return (y, amax), s
    y, amax, s, _, _ = _norm_fwd_amax(x, weight, bias, residual, seed, *config[:5], False)
    return (y, amax), (s if mode == PRE else None)


@launcher_op("norm_cast_t")
def _norm_transposed_cast(z: Tensor, mean: Optional[Tensor], rstd: Tensor, weight: Optional[Tensor],
                          bias: Optional[Tensor], amax: Tensor, cast_before_weight: bool,
                          given_scale: bool) -> tuple[Tensor, Tensor]:
    """``(yt, scale)``: the norm's output of ``z`` with the forward's statistics, transposed and quantized to e4m3
    with the tensorwise scale of ``amax``, ``(N, MP)``, MP = the rows rounded up to fp8.GEMM_MULTIPLE, zero past
    them (:func:`_norm_cast_t_kernel`). ``given_scale``: ``amax`` is the 0-d scale of the forward's own e4m3 output
    (delayed scaling), which quantized y in fp32, so y is not rounded to z's dtype first."""
    n = int(z.shape[-1])
    z2 = as_rows(z, n)
    m = z2.shape[0]
    mp = _fp8.round_up(m, _fp8.GEMM_MULTIPLE)
    yt = z.new_empty((n, mp), dtype=torch.float8_e4m3fn)
    scale = empty_scalar(z)
    block_m, block_n, num_warps = _fp8.TILE[_fp8._mode(z)]
    _cast_t_kernel((max(1, cdiv(mp, block_m)), max(1, cdiv(n, block_n))), z2, mean, rstd, vector(weight),
                   vector(bias), amax, yt, scale, z2.stride(0), m, n, mp, HAS_W=weight is not None,
                   HAS_B=bias is not None, CAST_BEFORE_WEIGHT=cast_before_weight, GIVEN_SCALE=given_scale,
                   ROUND=not given_scale, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps)
    return yt, scale


def cast_again(y: Tensor, amax: Tensor, bias: Optional[Tensor]):
    """For ``(y, amax)`` of :func:`norm_for_tensorwise_projection` recorded eagerly (``bias``: the norm's bias, or
    None): a function that makes y^T's tensorwise e4m3 cast and its scale again from what the norm's node keeps for
    its backward (its input, or pre mode's stream, rounded to x's dtype as the backward reads it, with the
    forward's statistics), in one pass (:func:`_norm_cast_t_kernel`), for as long as that node's backward has not
    run; None for any other tensor, or while anything traces. The fused block passes it to the projection the
    norm feeds (``x_cast=``), which then keeps nothing of y. Without a residual the values are y's own; in pre mode
    (y normalized the fp32 sum) those of the kept stream with the forward's statistics, as the norm's backward
    reads them (the block's recompute of y, models/recompute.py, takes that stream's own statistics: within a
    rounding of these)."""
    if torch.compiler.is_compiling() or tracing() or not use_triton(y):
        return None
    node = y.grad_fn
    if not isinstance(node, _NormAmaxFunction._backward_cls):
        return None
    return _cast_from_node(node, bias, amax, False)


def cast_again_quantized(proxy: Tensor, scale: Tensor, bias: Optional[Tensor]):
    """:func:`cast_again` for a norm that wrote its output in e4m3 with a tensorwise (delayed) ``scale``
    (:func:`norm_for_fp8_projection` with ``fp8_scaling``, recorded eagerly, no residual or pre mode; ``proxy``
    its stand-in): a function making y^T's e4m3 cast with that scale again from what the norm's node keeps for
    its backward, in one pass, for the projection's weight gradient (``x_cast=``), which then keeps nothing of
    the norm's output. y is quantized in fp32 as the forward quantized it: without a residual the forward's
    bytes transposed; in pre mode those of the kept stream with the forward's statistics (see
    :func:`cast_again`). None for any other tensor, or while anything traces."""
    if torch.compiler.is_compiling() or tracing() or not use_triton(proxy):
        return None
    node = proxy.grad_fn
    if not isinstance(node, _NormFp8Function._backward_cls) or scale.dim() != 0 or node.config[1] == POST:
        return None
    return _cast_from_node(node, bias, scale, True)


def _cast_from_node(node, bias: Optional[Tensor], amax: Tensor, given_scale: bool):
    """The function :func:`cast_again` and :func:`cast_again_quantized` return: y^T's cast made again
    (:func:`_norm_transposed_cast`) from what the norm's autograd ``node`` keeps for its backward."""
    cast_before_weight = node.config[4]
    bias = None if bias is None else bias.detach()

    def cast() -> tuple[Tensor, Tensor]:
        z, weight, _, mean, rstd, _ = node.saved_tensors
        return _norm_transposed_cast(z, mean, rstd, weight, bias, amax, cast_before_weight, given_scale)

    return cast


def _call_form(x, residual, residual_mode, dropout_p, training) -> tuple[float, int, Optional[Tensor]]:
    """(dropout probability, residual mode code, dropout seed or None) of one call."""
    p = float(dropout_p) if training else 0.0
    if p > 0 and is_dtensor(x):
        raise ValueError("dropout_p: dropout on a DTensor is not supported yet (each rank's shard would draw the "
                         "same mask); pass dropout_p=0 or training=False")
    mode = NONE if residual is None else (PRE if residual_mode == "pre" else POST)
    return p, mode, draw_seed(x.device) if p > 0 else None


def _needs_grad(*tensors: Optional[Tensor]) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _run_norm(x, weight, bias, residual, residual_mode, dropout_p, training, eps, is_rms, cast_before_weight,
              activation=0, fp8=None, fp8_scaling=None):
    p, mode, seed = _call_form(x, residual, residual_mode, dropout_p, training)
    if fp8 is not None:
        # Forward only (checked by the functionals): the launcher, no autograd.
        history, amax = (None, None) if fp8 == "rowwise" else fp8_scaling
        q, scale, s, y, _, _ = _norm_fwd_fp8(x, weight, bias, residual, seed, float(eps), mode, p, is_rms,
                                             cast_before_weight, activation, history, amax, False)
        if mode == NONE:
            return q, scale
        return (q, scale), (s if mode == PRE else y)
    config = (float(eps), mode, p, is_rms, cast_before_weight, activation)
    if _needs_grad(x, weight, bias, residual):
        y, s = _NormFunction.apply(x, weight, bias, residual, seed, config)
        return (y, s) if mode == PRE else y
    outputs = _norm_fwd(x, weight, bias, residual, seed, *config, False)
    return (outputs[0], outputs[1]) if mode == PRE else outputs[0]  # (y, s) or y


# ----------------------------------------------------------------------------------------
# Public functionals
# ----------------------------------------------------------------------------------------

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p):
    if not isinstance(x, Tensor):
        raise TypeError(f"x: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"x: expected a float32, float16 or bfloat16 tensor (float64 runs the "
                        f"reference), got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x: expected at least one dimension (the normalized one), got a scalar")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _check_parameter(name, p, x)
    # NOTE: comparisons only (no math.isinf): under torch.compile a float module attribute may be a
    # symbolic float, which Dynamo compares and guards but cannot pass to math functions (a graph
    # break on torch 2.11).
    if not isinstance(eps, (int, float)) or not eps > 0 or eps == float("inf"):
        raise ValueError(f"eps: expected a positive finite number, got {eps!r}")
    if residual_mode != "pre" and residual_mode != "post":
        raise ValueError(f"residual_mode: expected 'pre' or 'post', got {residual_mode!r}")
    if not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p: expected a probability in [0, 1), got {dropout_p!r}")
    if residual is not None:
        check_like("residual", residual, x, "x")
    elif dropout_p > 0:
        raise ValueError("dropout_p: dropout is applied to the branch added to a residual; "
                         "pass residual= or set dropout_p=0")


# NOTE: pre mode normalizes the fp32 sum s = residual + dropout(x) and returns s in x's dtype, as flash-attn's fused
# add + norm does (a forward more exact than PyTorch's norm(residual + x), which normalizes the rounded sum); the
# backward recomputes x-hat from that rounded s with the forward's statistics, off by s's rounding times rstd. In
# rows of 16 lanes and more that stays within PyTorch's own error (a fuzz of unlisted shapes, 2026-12-04: LayerNorm
# fp16, 30 seeds a width, worst gradient error 1.54x PyTorch's at 16, 1.13x at 64); in narrower rows x-hat is a
# difference of a few nearly equal values, and the gradients came back up to 11x PyTorch's error at width 3 and
# rstd x rounding at width 1 (dx -134 where it is 0; -inf in fp16). Such rows in 16-bit dtypes take the reference
# (its fp32 sum is what autograd differentiates). fp32 rounds nothing there.
PRE_MIN_LANES = 16


def _narrow_pre(x: Tensor, residual: Optional[Tensor], residual_mode: str) -> bool:
    """Pre mode on rows narrower than PRE_MIN_LANES in a 16-bit dtype (the NOTE above PRE_MIN_LANES)."""
    return (residual is not None and residual_mode == "pre" and x.shape[-1] < PRE_MIN_LANES
            and x.element_size() < 4)


def _check_parameter(name, p, x):
    if not isinstance(p, Tensor) or not p.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got "
                        f"{p.dtype if isinstance(p, Tensor) else type(p).__name__}")
    if p.dim() != 1 or p.shape[0] != x.shape[-1]:
        raise ValueError(f"{name}: expected shape ({x.shape[-1]},) to match the last dimension of x, "
                         f"got {tuple(p.shape)}")
    if p.device != x.device:
        raise ValueError(f"{name}: expected a tensor on {x.device} like x, got {p.device}")


def _check_fp8(fp8, fp8_scaling, x, *params) -> None:
    """The FP8 output option's arguments (ops/fp8.py); forward only, so no gradient may be asked for."""
    if check_fp8_output(fp8, fp8_scaling, x):
        refuse_fp8_gradient(x, *params)
        if is_dtensor(x):
            raise ValueError("fp8: an FP8 output of a DTensor is not supported yet; pass fp8=None")


def layer_norm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
    *,
    residual: Optional[Tensor] = None,
    residual_mode: str = "pre",
    dropout_p: float = 0.0,
    training: bool = True,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """LayerNorm over the last dimension, optionally fused with a residual add and dropout.

    Returns ``y`` without a residual, ``(norm(s), s)`` with ``s = residual + dropout(x)`` in
    ``"pre"`` mode, and ``residual + dropout(norm(x))`` in ``"post"`` mode.

    ``fp8="rowwise"`` or ``"tensorwise"`` (forward only): the normalized output is written in
    float8_e4m3fn with its fp32 scale in the same pass, and ``(y_fp8, scale)`` comes back in place of the
    GEMM's input: ``(y_fp8, scale)`` without a residual, ``((y_fp8, scale), s)`` in pre mode, and in post
    mode ``((y_fp8, scale), y)`` with ``y`` the output in x's dtype too (the next residual stream).
    ``blockfuse.fp8_linear(y_fp8, w, x_scale=scale, recipe=<the same>)`` takes them as they are. Rowwise
    scales are ``(*x.shape[:-1], 1)``, each row's amax / 448; tensorwise is delayed scaling from
    ``fp8_scaling`` (a :class:`blockfuse.ops.fp8.Float8Scaling` kept across calls), a 0-d scale.
    ``blockfuse.ops.fp8``'s docstring has the recipe, and why the option is forward only.
    """
    _check_norm_args(x, weight, bias, eps, residual, residual_mode, dropout_p)
    _check_fp8(fp8, fp8_scaling, x, weight, bias, residual)
    if not use_triton(x, draws_random=training and dropout_p > 0) or _narrow_pre(x, residual, residual_mode):
        return layer_norm_ref(x, weight, bias, eps, residual=residual, residual_mode=residual_mode,
                              dropout_p=dropout_p, training=training, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, bias, residual, residual_mode, dropout_p, training, eps, False, False,
                     fp8=fp8, fp8_scaling=fp8_scaling)


def rms_norm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    eps: float = 1e-6,
    *,
    residual: Optional[Tensor] = None,
    residual_mode: str = "pre",
    dropout_p: float = 0.0,
    training: bool = True,
    cast_before_weight: bool = False,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """RMSNorm over the last dimension, optionally fused with a residual add and dropout.

    ``cast_before_weight=False`` multiplies by the weight in fp32 and casts once (OLMo-2, and
    ``torch.nn.functional.rms_norm``); ``True`` casts the normalized row to x's dtype first,
    then multiplies (Hugging Face Llama). Returns as :func:`layer_norm` does, ``fp8`` included.
    """
    _check_norm_args(x, weight, None, eps, residual, residual_mode, dropout_p)
    _check_fp8(fp8, fp8_scaling, x, weight, residual)
    if not use_triton(x, draws_random=training and dropout_p > 0) or _narrow_pre(x, residual, residual_mode):
        return rms_norm_ref(x, weight, eps, residual=residual, residual_mode=residual_mode,
                            dropout_p=dropout_p, training=training, cast_before_weight=cast_before_weight,
                            fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, None, residual, residual_mode, dropout_p, training, eps, True,
                     bool(cast_before_weight), fp8=fp8, fp8_scaling=fp8_scaling)


def layer_norm_gelu(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
    approximate: str = "tanh",
    *,
    fp8: Optional[str] = None,
    fp8_scaling: Optional[Float8Scaling] = None,
):
    """``gelu(layer_norm(x) * weight + bias)`` over the last dimension in one pass, and a fused
    backward. ``approximate`` is GELU's form as in ``torch.nn.functional.gelu``: ``"tanh"`` or
    ``"none"`` (erf). The output is in x's dtype; statistics and GELU are computed in fp32, except the tanh
    form's derivative in the backward of bf16 ``x`` on a GPU: packed fp16 (its error stays under what PyTorch's bf16
    GELU makes; ``BLOCKFUSE_GELU_GRAD_F16X2=0`` at import for fp32, the NOTE above ``GELU_GRAD_F16X2``).
    ``fp8``: ``(y_fp8, scale)`` instead (forward only), as :func:`layer_norm` without a residual."""
    _check_norm_args(x, weight, bias, eps, None, "pre", 0.0)
    tanh = check_gelu_approximation(approximate)
    _check_fp8(fp8, fp8_scaling, x, weight, bias)
    if not use_triton(x):
        return layer_norm_gelu_ref(x, weight, bias, eps, approximate, fp8=fp8, fp8_scaling=fp8_scaling)
    return _run_norm(x, weight, bias, None, "pre", 0.0, False, eps, False, False,
                     GELU_CODES["tanh" if tanh else "none"], fp8=fp8, fp8_scaling=fp8_scaling)


# ----------------------------------------------------------------------------------------
# References (pure PyTorch): the oracle of the tests, the CPU fallback, the benchmark baseline
# ----------------------------------------------------------------------------------------


def _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8=None,
                    fp8_scaling=None):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    p = float(dropout_p) if training else 0.0

    def output(y):  # the normalized output as the op returns it: in x's dtype, or (y_fp8, scale) from fp32
        return y.to(x.dtype) if fp8 is None else quantize_output_ref(y, fp8, fp8_scaling)

    def dropout(t):
        if p == 0.0:
            return t
        keep = dropout_mask if dropout_mask is not None else torch.rand_like(t) >= p
        return torch.where(keep, t / (1.0 - p), torch.zeros_like(t))

    z = x.to(compute)
    if residual is None:
        return output(normalize(z, compute))
    if residual_mode == "pre":
        s = residual.to(compute) + dropout(z)
        return output(normalize(s, compute)), s.to(x.dtype)
    y = residual.to(compute) + dropout(normalize(z, compute))
    return y.to(x.dtype) if fp8 is None else (output(y), y.to(x.dtype))


def layer_norm_ref(x, weight=None, bias=None, eps=1e-5, *, residual=None, residual_mode="pre",
                   dropout_p=0.0, training=True, dropout_mask=None, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`layer_norm`: fp32 math (fp64 for fp64 inputs), output in x's dtype (with ``fp8``:
    quantized from the fp32 output, :func:`blockfuse.ops.fp8.quantize_output_ref`).

    ``dropout_mask`` (bool, like the dropped tensor, True = keep) replaces the random mask.
    """

    def normalize(z, compute):
        w = weight.to(compute) if weight is not None else None
        b = bias.to(compute) if bias is not None else None
        return F.layer_norm(z, (z.shape[-1],), w, b, eps)

    return _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8, fp8_scaling)


def rms_norm_ref(x, weight=None, eps=1e-6, *, residual=None, residual_mode="pre", dropout_p=0.0,
                 training=True, cast_before_weight=False, dropout_mask=None, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`rms_norm`: fp32 math (fp64 for fp64 inputs), output in x's dtype (``fp8``: as
    :func:`layer_norm_ref`)."""

    def normalize(z, compute):
        y = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)
        if weight is None:
            return y
        if cast_before_weight:
            y = y.to(x.dtype).to(compute)
        return y * weight.to(compute)

    return _reference_norm(x, normalize, residual, residual_mode, dropout_p, training, dropout_mask, fp8, fp8_scaling)


def layer_norm_gelu_ref(x, weight=None, bias=None, eps=1e-5, approximate="tanh", *, fp8=None, fp8_scaling=None):
    """Pure-PyTorch :func:`layer_norm_gelu`: fp32 math (fp64 for fp64 inputs), output in x's dtype (``fp8``: as
    :func:`layer_norm_ref`)."""
    check_gelu_approximation(approximate)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = weight.to(compute) if weight is not None else None
    b = bias.to(compute) if bias is not None else None
    y = F.gelu(F.layer_norm(x.to(compute), (x.shape[-1],), w, b, eps), approximate=approximate)
    return y.to(x.dtype) if fp8 is None else quantize_output_ref(y, fp8, fp8_scaling)
