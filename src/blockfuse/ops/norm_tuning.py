"""The norms' tuning choices: ops/norm.py's launch rules' constants (tile widths, warps, pipeline depths, register
caps, the forms each rule takes, and the knobs A/B runs set), one frozen table with the NOTEs that justify its values.

``norm.TUNING`` is the table in force and ``norm.tuned(JOINT_SUMS=True)`` sets knobs for a block. A knob is named by
its field (``joint_sums``) or in upper case (``JOINT_SUMS``), as the NOTEs, the benchmark tools (``NAME=V``), their
results and the docs name it: "the NOTE above NAME" is the NOTE above the field ``name`` here. Values that were
computed from others (``fwd_vector_tail_lanes``, ``bwd_pieces_max_tail``, ``act_bwd_piece_lanes_per_warp``,
``act_bwd_pieces_max_lanes``) are fields of their own, fixed as they were at import: setting the one a value came from
does not move them.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Optional


@dataclasses.dataclass(frozen=True, slots=True)
class NormTuning:
    """The launch rules' constants of ops/norm.py, grouped by pass in the order the NOTEs refer to each other."""

    # ---- Both passes: a row's tile, in registers, in pieces or in chunks ----
    # NOTE: the launch rule (``_tile``), measured on an H200 against the power-of-two tile it refined
    # (benchmarks/norm_rule.py; results in benchmarks/results/launch-rules/):
    # * a row is held in registers as one power-of-two tile of next_power_of_2(N) lanes; only rows past TAIL_FROM_LANES
    #   take two power-of-two pieces (``row_pieces``: 11008 -> 8192 + 4096, not 16384): there the tile is at its 16
    #   warps, so padded lanes cost registers no warp can take over (forward at 11008: 1.11-1.34x). Below it the padding
    #   measured cheaper than a tail with the pieces' row sums added as vectors (backward at 4304: the padded 8192 lanes
    #   ran 1.8x faster than 4096 + 256); reduced to scalars piece by piece, the pieces won in both passes
    #   (forward_rule, backward_rule: the NOTEs above FWD_PIECES_FROM_LANES and BWD_PIECES_FROM_LANES);
    # * rows wider than FWD_MAX_LANES (forward) or BWD_MAX_LANES go in chunks, read again for each pass. The one tile
    #   spills past 8192 lanes, but every form ran as fast or faster in it than in chunks of two rows a program (chunks:
    #   LayerNorm / RMSNorm 1.0x at 11008, 0.5x at 14336; post-residual 0.45x and LayerNorm + GELU 0.81x at 14336); in
    #   chunks of one row a program RMSNorm's forward is the faster from 8192 lanes (the NOTE above
    #   FWD_RMS_CHUNKS_FROM_LANES). The pre-residual backward (which also reads the residual stream's gradient) took
    #   chunks past BWD_MAX_LANES_PRE = 8192 once, when the one tile measured 3.3x / 1.7x slower at 11008 / 14336; on
    #   the kernel of 2026-11-28 (reloaded rows, two-FMA rule) the one tile is the faster (H200, backward of a same-size
    #   copy, chunks -> one tile: LayerNorm 11008 0.42 -> 0.51, 14336 0.36 -> 0.59, 16384 0.34 -> 0.67; RMSNorm 0.53 ->
    #   0.56, 0.51 -> 0.60, 0.45 -> 0.61; benchmarks/results/launch-rules/11-pre-tile/), so it takes the other forms'
    #   limit.
    tail_from_lanes: int = 8192
    fwd_max_lanes: int = 16384
    bwd_max_lanes: int = 16384
    bwd_max_lanes_pre: int = 16384
    # Chunk widths: the one that pads the row least; CHUNK_TILE_ELEMENTS lanes a program (several rows) in the backward
    # and the FP8 forward (the plain forward takes one row a program: FWD_CHUNK_WARPS).
    chunk_choices: tuple[int, ...] = (4096, 2048)
    chunk_tile_elements: int = 8192
    # Smallest tail tile (lanes): a narrower one would load a few bytes a row.
    min_tail: int = 16
    # NOTE: a row in two pieces spreads its tail over the program's threads too. Where the tail gave each thread fewer
    # than TAIL_VECTOR elements (a 16-byte vector of bf16) its layout differed from the head's: [8192, 9000] (8192 +
    # 1024 lanes) at 16 warps loaded the tail 4 bytes a thread and moved values between the two layouts through 8 KiB of
    # shared memory (15 barriers for LayerNorm, sm_90 SASS), and the forward ran at 0.56 / 0.73 / 0.72 of copy
    # (LayerNorm / RMSNorm / post-residual) where 4 warps, 8 tail elements a thread, ran 0.96 / 0.97 / 0.88 (H100,
    # benchmarks/results/launch-rules/10-reload/fwd-warps-h100/). So a tail of at least 4 warps' worth of vectors caps
    # the warps at one vector a thread (9000: 4; 10240's 2048-lane tail: 8, not measured; 11008's 4096: 16, as before,
    # where 4 warps measured 0.91 -> 0.96 for LayerNorm but 0.91 -> 0.87 post-residual). A smaller tail (8200: 8192 +
    # 16) cannot fill 4 warps at all and keeps the warps of the whole row. Rows up to 8192 lanes: the pieces of both
    # passes there are in the NOTEs below (the backward's: BWD_PIECES_FROM_LANES).
    tail_vector: int = 8

    # ---- The forward: rows in two pieces ----
    # NOTE: the forward also takes two pieces below TAIL_FROM_LANES where the tail alone fills 4 warps with 16-byte
    # vectors (FWD_VECTOR_TAIL_LANES lanes, so the warps stay at one vector a thread: the NOTE above): 4609-6144 wide
    # (5120: 4096 + 1024 lanes, not 8192), 2561-3072 (3072: 2048 + 1024), and below 1024 lanes never. A smaller tail
    # kept the padded tile until the one-row pieces (the next NOTE): H200, [16384, n] bf16, forward's fraction of a
    # copy, padded tile -> pieces: 5120 LayerNorm 0.79 -> 0.95, RMSNorm 0.89 -> 0.96; but 4304 (4096 + 256, a tail of 1
    # element a thread at 8 warps) LayerNorm 0.70 -> 0.58, RMSNorm 0.83 -> 0.88
    # (benchmarks/results/launch-rules/14-vector-tails-2026-11-29-h200/). The backward kept its tiles then (at 4304 the
    # padded 8192 lanes ran 1.8x faster than 4096 + 256 with vector sums). The FP8 forward kept its padded tiles too
    # (with these pieces it ran 1.20-1.36x faster at 5120 but LayerNorm rowwise 0.92x at 2880 and 0.82x at 6144, same
    # folder, fp8/) until the kernel had changed enough to win with them (the NOTE above FP8_FWD_PLAIN_ROWS). 0: off.
    fwd_vector_tail_lanes: int = 4 * 32 * 8  # (4 * 32 * TAIL_VECTOR at import: setting TAIL_VECTOR does not move it)
    # NOTE: below TAIL_FROM_LANES, a row of at least FWD_PIECES_FROM_LANES with a tail of any size also goes in two
    # pieces, one row a program, one warp per FWD_PIECE_LANES_PER_WARP lanes and at least FWD_PIECE_MIN_WARPS: 1152 and
    # 1536 as 1024 + 128 / 512 lanes on 2 warps, 2304 and 2560 as 2048 + 256 / 512 on 2, 4160-4608 as 4096 + 64-512 on
    # 4, where one padded tile left up to half its lanes idle. (Narrower rows pack several to a program:
    # FWD_TILE_ELEMENTS.) A tail of fewer than LAYOUT_TAIL_LANES lanes has another layout than its head, and adding the
    # two pieces' row sums made the compiler move the head into the tail's layout through shared memory (sm_90,
    # LayerNorm at 4304: 8 KiB, 11 barriers), which is why 4096 + 256 had measured slower than the padded tile (the NOTE
    # above). The statistics of such a row reduce each piece to a scalar first (_row_statistics_of_pieces: 64 bytes, 7
    # barriers). Measured on an H200, [16384, n] bf16, the rule off / on in alternating rounds of one process, forward's
    # fraction of a copy: LayerNorm 4304 0.70 -> 0.93, post-residual 0.64 -> 0.84, + GELU 0.53 -> 0.84, RMSNorm 0.82 ->
    # 0.95; 4160 LayerNorm 0.68 -> 0.92; 2304 0.72 -> 0.88 (+ GELU 0.59 -> 0.83); 2560 0.77 -> 0.89; 1152 0.72 -> 0.77
    # (+ GELU 0.58 -> 0.68); 1536 0.85 -> 0.85 (post-residual 0.79 -> 0.85); no cell slower. The warps decide it: 4304
    # on 8 warps (one tail element a thread) 0.77, on 4 0.93; 1152 on 4 warps 0.61, on 2 0.77. At 2048-4096 rows
    # (tensors under 32 MiB, kernels of a few microseconds) the pieces are 0.85-1.3x the padded tile by form (2048 x
    # 4304: 1.10-1.30x; 2048 x 2560 LayerNorm 0.90x, RMSNorm 1.05x); twice the warps where the rows fit the card in one
    # wave was no better and is not in the rule (benchmarks/results/launch-rules/15-one-row-pieces-2026-11-29-h200/).
    # The backward has its own pieces (the NOTE above BWD_PIECES_FROM_LANES); the FP8 forward takes these from
    # FP8_FWD_PIECES_FROM_LANES (its NOTE). 0: off.
    fwd_pieces_from_lanes: int = 1024
    fwd_piece_lanes_per_warp: int = 2048
    fwd_piece_min_warps: int = 2

    # ---- The backward: rows in pieces, scalar rows, wide rows in two or three pieces ----
    # NOTE: the backward takes two pieces too (row_pieces), one row a block (_norm_bwd_pieces), for rows of at least
    # BWD_PIECES_FROM_LANES with a tail under LAYOUT_TAIL_LANES: 2304 = 2048 + 256, 2560 = 2048 + 512, 4304 = 4096 +
    # 256, 4608 = 4096 + 512. Each piece's row sums reduce to a scalar before they are added, as in the forward (the
    # NOTE above; with vector sums 4304's pieces had measured 1.8x slower than the padded 8192 lanes). The plain forms:
    # one warp per BWD_PIECE_LANES_PER_WARP lanes, at least BWD_PIECE_MIN_WARPS (4 at every such width: on 8, 149
    # registers a thread let one program a multiprocessor), the pieces at most BWD_PIECES_MAX_LANES lanes, and a tail of
    # at least BWD_PIECE_TAIL_BYTES a thread: a thinner one is not pipelined (cp.async copies 4 bytes or more; sm_90
    # TTGIR: the tail's two loads stay synchronous) and 2176 = 2048 + 128 ran 0.74 -> 0.55 of copy, 4160 = 4096 + 64
    # RMSNorm 0.77 -> 0.72. The GELU form has a rule of its own (the NOTE above ACT_BWD_PIECES_FROM_LANES). Measured on
    # an H200 (the backward launcher, [16384, n] bf16, padded tile -> pieces in alternating rounds of one process,
    # fraction of a 1 GiB copy; benchmarks/results/launch-rules/16-backward-pieces-2026-11-29-h200/): 4304 LayerNorm
    # 0.72 -> 0.88, RMSNorm 0.77 -> 0.90, pre-residual 0.79 -> 0.86, post-residual 0.72 -> 0.87, + GELU 0.41 -> 0.52;
    # 4352 0.76 / 0.81 / 0.82 -> 0.89 / 0.92 / 0.90, GELU 0.42 -> 0.54; 2304 0.77 / 0.82 / 0.80 -> 0.78 / 0.83 / 0.84,
    # GELU 0.44 -> 0.51; 2560 1.00x, GELU 0.48 -> 0.60; [8192, 4304] LayerNorm 0.68 -> 0.77; [4096, 4304] 1.03-1.17x.
    # Left as measured: the pre-residual form at 4480 / 4608 (4096 + 512) 0.83 / 0.84 -> 0.80 / 0.81 where the other
    # plain forms gained 1.07-1.14x. Left padded: tails of 1024 lanes or more (2880 = 2048 + 1024: 0.83 -> 0.83; 6144 =
    # 4096 + 2048: LayerNorm 0.92 -> 0.79, pre-residual 0.95 -> 0.64), and rows under 2048 (1152 = 1024 + 128, one row a
    # block: 0.65 -> 0.35, where the padded tile holds two rows a block). Wider rows keep one padded tile and its
    # reloaded rows (BWD_RELOAD_FROM_LANES). 0: off.
    bwd_pieces_from_lanes: int = 2048
    bwd_pieces_max_lanes: int = 8192
    bwd_piece_lanes_per_warp: int = 2048
    bwd_piece_min_warps: int = 4
    bwd_piece_tail_bytes: int = 4
    # (benchmarks' A/B runs: wider tails, e.g. 11008 = 8192 + 4096)
    # (norm.LAYOUT_TAIL_LANES, 4 * 32 * TAIL_VECTOR at import: setting TAIL_VECTOR does not move it)
    bwd_pieces_max_tail: int = 4 * 32 * 8
    # NOTE: a 16-bit row whose accesses are one element (VEC 1: an odd width, or an odd row stride, starts it at a
    # 2-byte boundary) holds each value in a register of its own where vector accesses pack two, so the tiles above,
    # sized for vectors, spill: built for sm_90 (benchmarks/results/launch-rules/34-odd-widths-2026-12-05-cpu/), 4567 in
    # pieces (4096 + 512) on 4 warps 336-616 bytes a thread (none on 8), 7777's padded tile on 8 warps 136-208, 12345's
    # pre-residual padded tile 3064. Timed on an H100 (35-odd-widths-2026-12-06-h100/, the backward launcher at [16384,
    # 4567]): the rule's 4 warps 0.35-0.36 of copy (LayerNorm, pre-residual), 8 warps 0.51-0.52 (RMSNorm, which spilled
    # nothing, 0.54 both); the even 4568 0.85-0.89 on 4 warps. So scalar rows in one-row pieces take BWD_SCALAR_WARPS
    # times their warps: timed through the launcher on an H100 (35-odd-widths-*/3-scalar/, rule off / on in alternating
    # rounds of one process) 1.48-1.52x at 4567 (LayerNorm, pre- and post-residual 0.34-0.35 -> 0.51-0.52 of copy),
    # RMSNorm 1.01x; no other width moved. The padded tile's warps likewise (BWD_SCALAR_TILE_WARPS), but only for tiles
    # of at least BWD_SCALAR_TILE_WARPS_FROM_LANES: at 7777 (8192 lanes, 16 warps instead of 8; its sm_90 build spills
    # 56-136 bytes instead of 136-208) LayerNorm and post-residual 1.03x, pre-residual 1.16x (0.53 -> 0.62), RMSNorm
    # 1.00x; at 1001, 2049 and 3001 (1024 / 4096-lane tiles; 2049 / 3001 spilled 104-176 bytes on 4 warps and none on 8)
    # twice the warps ran 0.65-0.86x (RMSNorm at 1001 1.05x): the spills do not predict it there. And the pre-residual
    # form's rows past BWD_SCALAR_MAX_LANES_PRE in chunks (12345: 3064 bytes of spills -> 848): its backward 22.7 -> 7.4
    # ms at [16384, 12345] (3.1x), still 0.07 of copy; the other forms there (three pieces on 16 warps, 352-480 bytes)
    # 0.20-0.34 of copy. The GELU form keeps its tiles (its own warps and register cap). 1 / 0: off.
    bwd_scalar_warps: int = 2
    bwd_scalar_tile_warps: int = 2
    bwd_scalar_tile_warps_from_lanes: int = 8192
    bwd_scalar_max_lanes_pre: int = 8192
    # NOTE: past 8192 lanes every plain form's scalar rows spill in the rule's tiles (sm_90 builds with the card's
    # Triton 3.6, stack bytes a thread: 9999 in two pieces, LayerNorm and post-residual 1312 on 32 registers, RMSNorm
    # 248, pre-residual 472; 12345 in three pieces 352-480, the pre-residual chunks of 4 rows x 2048 lanes 848; 15001's
    # padded tile 904-1080), and at 12345 they ran at 0.02-0.34 of copy (35-odd-widths-*/3-scalar/). One row of
    # BWD_SCALAR_CHUNK_LANES lanes a chunk on BWD_CHUNK_WARPS warps, the weight gradients from their own kernel (the
    # NOTE above BWD_WEIGHT_KERNEL_FROM_LANES), builds without a spill in every plain form at 9999 / 12345 (424-472
    # instructions against 1144-2136), at the price of reading each row twice (10 bytes an element against 6: 0.6 of
    # copy at best). Timed on an H100 (35-odd-widths-*/5-wide/, `PHASE=wide scripts/issue22_scalar_rows_gpu.sh`, the
    # backward launcher at [16384, n], two alternating rounds of one process) against the rule: 8447 3.4-4.8x (0.05-0.08
    # -> 0.26-0.27 of copy), 9999 LayerNorm / post-residual 5.9x, pre-residual 1.37x, 12345 1.30x (pre-residual 3.5x),
    # 15001 1.35-3.0x, all at 0.25-0.29 of copy; but RMSNorm's pieces at 9999 / 12345 (which spill least) ran 0.38 /
    # 0.34 against 0.29 / 0.27, so RMSNorm keeps pieces where the rule has them (BWD_SCALAR_RMS_KEEPS_PIECES). The plain
    # chunks with the weight kernel (4 rows x 2048 lanes at 8447-12345: 0.08-0.22 of copy) were slower but at 15001 (one
    # row x 4096 lanes: 0.29-0.35 against 0.26-0.28). So one row of 4096 lanes a chunk (BWD_SCALAR_CHUNK_LANES; builds
    # without a spill at 9999 / 15001, 704-776 instructions): timed against 2048 in the same way
    # (35-odd-widths-*/6-landed/, LANDED=1) 0.99-1.27x (8447 LayerNorm / post-residual 1.01x, pre-residual 1.16x,
    # RMSNorm 0.99x; 9999 1.00-1.14x; 12345 1.04-1.19x; 15001 1.10-1.27x), 0.26-0.35 of copy. Rows from
    # BWD_SCALAR_ROW_CHUNKS_FROM_LANES lanes; 0: off.
    bwd_scalar_row_chunks_from_lanes: int = 8193
    bwd_scalar_rms_keeps_pieces: bool = True
    # NOTE: RMSNorm's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES (plain form, up to BWD_MAX_LANES) go in one
    # padded tile of one row on BWD_SCALAR_WHOLE_ROW_WARPS warps, read once: 32 warps hold 16384 lanes at 16 a thread
    # (sm_90 builds: 64 registers, 248 bytes of stack; on 16 warps, 664). Timed on an H100 against the rule above it
    # (35-odd-widths-*/7-whole-row/, LANDED=2, the backward launcher at [16384, n], two alternating rounds of one
    # process): 8447 1.65x (0.26 -> 0.42 of copy), 9999 1.17x (its pieces: 0.38 -> 0.45), 12345 1.35x (0.35 -> 0.47),
    # 15001 1.57x (0.31 -> 0.49). Not the LayerNorm forms: 0.97-1.03x with a bias gradient and a mean more, pre-residual
    # 0.63-0.72x (the residual's gradient a third stream; the other forms' whole rows since: the NOTE below). With the
    # whole rows off, the pre-residual RMSNorm keeps the rule's pieces (BWD_SCALAR_RMS_KEEPS_PIECES) and the rest take
    # one-row chunks. Through the op (35-odd-widths-*/9-rms-op/, `blockfuse bench ops --sweep`) RMSNorm's forward +
    # backward at those widths went from 0.71-0.82x to 0.97-1.15x the faster of torch.compile and Liger. The forward in
    # the same whole row (32 or 16 warps; sm_90: 64 / 128 registers, no spill) lost to its chunks at every width
    # (10-rms-forward-whole/: 0.73-0.97x, 8447 0.75 -> 0.55 of copy): the forward keeps its chunks. 0: off.
    bwd_scalar_whole_row_warps: int = 32
    # NOTE: every other form's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES (LayerNorm plain, pre- and
    # post-residual, + GELU; the pre-residual RMSNorm) take that whole row too, writing dx only (and the residual's
    # gradient), the weight kernel making their weight / bias gradients as the one-row chunks'
    # (BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL): in the kernel, the two accumulators across the row blocks are what spilled
    # on 32 warps (sm_90 builds: 248-328 bytes a thread -> 0-8, 872-1272 instructions -> 584-752), for a second read of
    # z and dy by the weight kernel (10 bytes an element against 6; the chunks move 14). Timed on an H100
    # (35-odd-widths-*/13-whole-row-wk/, LANDED=7, the backward launcher at [16384, n], two alternating rounds of one
    # process) against the rule then (one-row chunks): LayerNorm / post-residual 1.37-1.51x (8447 0.26 -> 0.38 of copy,
    # 12345 0.27 -> 0.40), pre-residual 1.41-1.52x (0.31-0.35 -> 0.46-0.49); the same rows with the gradients in the
    # kernel 0.97-1.03x, pre-residual 0.63-0.72x. As landed (14-whole-row-landed/, LANDED=8) the same ratios again, and
    # through the op (its sweep, [16384, n] bf16) LayerNorm's forward + backward 1.14-1.24x the faster of torch.compile
    # and Liger at 8447-15001 (0.89-0.92x before), pre-residual 1.37-1.47x, post-residual 1.12-1.26x. RMSNorm's plain
    # form, one accumulator (dw) and two streams, keeps its own: with the weight kernel 0.93-0.96x
    # (BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS). The pre-residual RMSNorm (BWD_SCALAR_WHOLE_ROW_RMS_PRE; its rule before:
    # pieces at 9999, one-row chunks elsewhere), timed in 14-*: 8447 1.56x (0.31 -> 0.48 of copy), 9999 1.85x (0.27 ->
    # 0.51), 12345 1.58x, 15001 1.47x (0.37 -> 0.54); its gradients in the kernel instead 1.24-1.63x.
    # BWD_SCALAR_WHOLE_ROW_RMS_ONLY True: the rule before this NOTE (RMSNorm's plain form only).
    bwd_scalar_whole_row_rms_only: bool = False
    bwd_scalar_whole_row_rms_pre: bool = True
    bwd_scalar_whole_row_weight_kernel: bool = True
    bwd_scalar_whole_row_weight_kernel_rms: bool = False
    # NOTE: LayerNorm + GELU's scalar rows past BWD_SCALAR_ROW_CHUNKS_FROM_LANES took its own tiles, which at
    # 12289-16384 are one padded 16384-lane tile that spills 1608 bytes a thread in its sm_90 build (4768 instructions;
    # 0.04-0.07 of copy, 0.36x the faster peer at 12345 in 35-odd-widths-*/2-odd/), and at 8193-12288 two pieces, 8192
    # lanes and a tail. They take the whole row above (BWD_SCALAR_ROW_CHUNKS_ACT; 80 bytes of stack, 952 instructions,
    # its register cap 64: _act_bwd_maxnreg), but where the pieces' tail is ACT_BWD_SCALAR_PIECES_MAX_TAIL lanes or
    # fewer. Timed as above (13-whole-row-wk/): 12345 6.9x (9.27 -> 1.34 ms, 0.04 -> 0.30 of copy), 15001 6.1x, 9999 (a
    # 2048-lane tail) 1.40x (0.21 -> 0.29); 8447 (a 256-lane tail: the pieces at 0.33 of copy) 0.89x. One-row chunks
    # instead of the whole row: 0.64-0.69x the whole row. Through the op (14-whole-row-landed/'s sweep) forward +
    # backward 1.80-2.18x torch.compile at 8447-15001 (12345: 0.36x the faster peer in 2-odd/). Where between 256 and
    # 2048 lanes of tail the whole row starts to win is not measured (14-*'s 8800 / 9216 are even: vector rows, which no
    # scalar rule touches).
    bwd_scalar_row_chunks_act: bool = True
    act_bwd_scalar_pieces_max_tail: int = 256
    bwd_scalar_chunk_lanes: int = 4096
    # NOTE: rows past BWD_PIECES_MAX_LANES go in two pieces of at most BWD_WIDE_PIECES_MAX_LANES lanes (8192 + a tail of
    # up to 4096: 9000, 10240, 11008, 12288) on BWD_WIDE_PIECE_WARPS warps (24 lanes a thread at most, each row read
    # once, pipelined: the NOTE above BWD_PIPELINE_MAX_LANES), where the padded 16384-lane tile reads each row twice
    # (BWD_RELOAD_FROM_LANES) and pays for a quarter to a half of idle lanes. Every plain form at any tail of
    # BWD_PIECE_TAIL_BYTES a thread (BWD_WIDE_PIECES_RMS_MAX_TAIL: RMSNorm's, a knob for the A/B that set it), and the
    # GELU form past its own pieces (ACT_BWD_WIDE_PIECES; above its 17 lanes a thread, so spilling: 312 bytes at 11008).
    # Built for sm_90 the plain pieces spill RMSNorm 0 bytes a thread, LayerNorm 64-80 (the reloaded tile: 88),
    # pre-residual LayerNorm 64-88 (208). Measured on an H200 (benchmarks/norm_tiles.py --bwd-setting, alternating
    # rounds of one process, [16384, n] bf16, fraction of a same-size copy;
    # benchmarks/results/launch-rules/20-wide-pieces-2026-12-01-h200/ and 21-wide-pipeline-2026-12-01-h200/), the padded
    # tile -> the pieces unpipelined -> pipelined: LayerNorm 9216 0.44 -> 0.71 -> 0.94, 10240 0.48 -> 0.77 -> 0.96,
    # 11008 0.50 -> 0.71 -> 0.80, 12288 0.55 -> 0.77 -> 0.82; pre-residual 11008 0.54 -> 0.64 -> 0.78; RMSNorm 11008
    # 0.68 -> 0.64 -> 0.97 (unpipelined, its padded tile had won at tails of 4096); + GELU 11008 0.31 -> 0.37 -> 0.44,
    # 9000 0.26 -> 0.50 (a 1024-lane tail: not pipelined). On 8 warps (48 lanes a thread): 232 bytes of spill, 0.54 at
    # 11008. 0: off.
    bwd_wide_pieces_max_lanes: int = 12288
    bwd_wide_piece_warps: int = 16
    # NOTE: rows past BWD_WIDE_PIECES_MAX_LANES up to BWD_THREE_PIECES_MAX_LANES in three pieces (_three_pieces: 12800
    # and 13312 as 8192 + 4096 + 1024 lanes, the last masked at the row's end) on BWD_WIDE_PIECE_WARPS warps, each row
    # read once, pipelined by the depth rule, the weight read again each row (RELOAD in pieces: _bwd_reload; its
    # registers freed, 26 a thread at 13312, the 26 KiB of it staying in cache), where the padded 16384-lane tile reads
    # each row twice and leaves a fifth of its lanes idle. Only where BWD_THREE_PIECES_MIN_STAGES stages of z and dy fit
    # BWD_SMEM_BYTES: bf16 rows of up to 13312 lanes; not the pre-residual forms (their third stream leaves two stages:
    # LayerNorm 0.58 -> 0.44; since, BWD_THREE_PIECES_PRE) nor the GELU form (ACT_BWD_THREE_PIECES; 13312 0.35 -> 0.37
    # unpipelined, 0.15 pipelined).
    # Measured on an H200 (benchmarks/norm_tiles.py --bwd-setting, the backward launcher in alternating rounds of one
    # process, [16384, n] bf16, fraction of a same-size copy;
    # benchmarks/results/launch-rules/24-three-pieces-2026-12-03-h200/), padded -> three pieces: 13312 LayerNorm 0.58 ->
    # 0.66, RMSNorm 0.78 -> 0.95, post-residual 0.58 -> 0.65; 12800 0.56 / 0.76 / 0.56 -> 0.65 / 0.96 / 0.65.
    # Unpipelined or with the weight held in registers the pieces lost (13312 LayerNorm 0.52-0.56). 0: off.
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
    # benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/), padded -> three pieces: [16384, 14336] LayerNorm
    # 0.79 -> 0.86 of copy (1.09x), post-residual 0.80 -> 0.87 (1.09x), RMSNorm 1.00x (0.96); [32768, 14336] 1.09x /
    # 1.10x / 1.00x (LayerNorm 0.81 -> 0.88); [4096, 14336] 1.14x / 1.13x / 1.02x (0.72 -> 0.81); [16384, 13824] 1.12x /
    # 1.11x / 1.02x (0.78 -> 0.87); 13312 (three pieces either way) 1.00x. The pre-residual forms and the GELU form are
    # unchanged.
    bwd_three_pieces_max_lanes: int = 14336
    bwd_three_pieces_min_stages: int = 3
    bwd_three_pieces_smem_bytes: int = 172 * 1024
    # NOTE: the pre-residual forms (LayerNorm and RMSNorm with ds, a third stream) take those three pieces too where z
    # and dy are bf16 and the rule above fits them (12289-14336 lanes), pipelined by the depth rule with their three
    # streams (two stages, 107-115 KB of shared memory as built for sm_90), where they kept the padded 16384-lane tile
    # read twice, unpipelined (LayerNorm's sm_90 build: 168 bytes of spill a thread, 56-72 in pieces). They had lost
    # there before the rows were held (the NOTE above: LayerNorm 0.58 -> 0.44, H200, 24-*). Measured on an H200
    # (benchmarks/norm_tiles.py --bwd-setting through `PHASES=pre scripts/issue22_row_cap_gpu.sh`, the backward
    # launcher, the rule then three pieces then three pieces unpipelined in two alternating rounds of one process,
    # fraction of a same-size copy; benchmarks/results/launch-rules/39-pre-three-pieces-2026-12-06-h200/): [16384,
    # 14336] LayerNorm 0.62 -> 0.75 (1.21x), RMSNorm 0.86 -> 0.93 (1.08x); [2048, 14336] 1.13x / 1.04x; [16384, 12800]
    # 1.06x / 1.03x (unpipelined: LayerNorm 1.07-1.10x, RMSNorm 0.87-0.88x). fp16 rows keep the padded tile (not
    # measured; odd widths' rows take their own whole-row tiles first: the NOTE above BWD_SCALAR_WHOLE_ROW_WARPS). On an
    # H100 (the same phase, the padded tile over the rule's time; launch-rules/40-pre-act32-2026-12-06-h100/): LayerNorm
    # 1.12-1.21x (0.64-0.74 -> 0.73-0.90 of copy) at [2048 - 32768, 12800 - 14336], RMSNorm 1.03-1.06x. False: off.
    bwd_three_pieces_pre: bool = True
    # NOTE: the GELU form's backward takes three pieces too, past BWD_PIECES_MAX_LANES to BWD_THREE_PIECES_MAX_LANES,
    # where they hold fewer lanes than its other tile (two pieces, or the padded 16384-lane tile) and z and dy are bf16
    # (its rows held: ACT_BWD_HOLD): 11008 as 8192 + 2048 + 1024 lanes (11264, not 8192 + 4096), 12289-14336 as 8192 +
    # 4096 + up to 2048 (not 16384 read twice). Its stages as its wide pieces' (ACT_BWD_STAGES where they fit
    # BWD_SMEM_BYTES: 11008 and 13312 pipelined, 14336 not). It had lost before its rows were held (H200, 24-*: 13312
    # 0.35 -> 0.37 unpipelined, 0.15 pipelined); built for sm_90 now, 14336's padded tile spills 184 bytes a thread
    # (1976 instructions), its three pieces 112 (1368, unpipelined), 11008's two pieces 64, its three 32. Measured on an
    # H100 (benchmarks/norm_tiles.py --bwd-setting through `PHASES=act scripts/issue22_row_cap_gpu.sh`, the backward
    # launcher, the rule then against three pieces in two alternating rounds of one process, fraction of a same-size
    # copy; benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/2-gelu/): [16384, 11008] 0.65 -> 0.78 (1.20x),
    # [16384, 13312] 0.49 -> 0.64 (1.31x), [16384, 14336] 0.50 -> 0.62 (1.24x; pipelined with a 172 KiB budget 1.24x
    # too), [2048, 14336] 0.43 -> 0.52 (1.20x), [32768, 14336] 0.51 -> 0.63 (1.24x). Rows whose three pieces would hold
    # more lanes (9000: 8192 + 512 + 1024 against 8192 + 1024; 12288 has no third) keep their tile; fp16 and fp32 too.
    # False: off.
    act_bwd_three_pieces: bool = True
    # NOTE: the weight / bias gradient accumulators of rows in two wide pieces (past BWD_PIECES_MAX_LANES, pipelined,
    # not the pre-residual forms: _early_acc) take the row before its sums are reduced, not after its stores: dy then
    # dies before the reductions and fewer values stay live across them (LayerNorm at 11008, sm_90: 56 bytes of spill a
    # thread, not 64; + GELU 160, not 232). The same sums in the same order (the same bits in the interpreter). Measured
    # on an H200 (benchmarks/norm_tiles.py, the code before and after in alternating processes, two rounds each,
    # fraction of a same-size copy; launch-rules/24-three-pieces-2026-12-03-h200/2-early/, and 3-final/ with the order
    # forced either way in one process): [16384, 11008] LayerNorm and post-residual 0.79 -> 0.90, + GELU 0.44 -> 0.49;
    # [16384, 12288] 0.81 -> 0.88, + GELU 0.46 -> 0.52; [4096, 11008] 0.71 -> 0.79; [2048, 11008] 0.62 -> 0.66; RMSNorm
    # and 9216 within 0.01. Where it lost it is not taken: the pre-residual forms (0.78 -> 0.76 at 11008, 0.75 -> 0.73
    # at 9216), the GELU form's unpipelined 1024-lane tails (9216: 0.53 -> 0.48), three pieces (13312: 0.65 -> 0.62).
    # The narrower pieces (one row of at most 8192 lanes) keep the order they were measured with (plain forms unchanged
    # by it at 4304; the GELU form's mixed: 4304 0.52 -> 0.61, 6144 0.63 -> 0.66, 2880-5120 and 8704 0.01-0.02 lower).
    # None: the rule; True / False: forced (benchmarks' A/B runs).
    bwd_early_acc: Optional[bool] = None
    bwd_wide_pieces_rms_max_tail: int = 4096
    act_bwd_wide_pieces: bool = True

    # ---- The GELU form's backward: its pieces ----
    # NOTE: the GELU form's backward in pieces. Its loop issues about twice the plain LayerNorm's instructions an
    # element (the activation's input and derivative recomputed: 35 SASS instructions a useful element at 4096 against
    # 17, benchmarks/kernel_stats.py --loop), which puts it past the ~43 at which an H200's issue rate rather than its
    # memory bounds the kernel wherever a padded tile's idle lanes count too (1152 in 2048 lanes: 72; 3072 in 4096: 49;
    # 5120 in 8192: 59). So it takes the two pieces at any tail (3072 = 2048 + 1024 and 6144 = 4096 + 2048 too, which
    # the plain forms leave padded: their memory, not their issue, bounds them), the fewest warps that keep a thread at
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
    act_bwd_pieces_from_lanes: int = 2048
    act_bwd_piece_lanes_per_thread: int = 17
    # (32 * ACT_BWD_PIECE_LANES_PER_THREAD at import: setting that does not move it)
    act_bwd_piece_lanes_per_warp: int = 32 * 17
    act_bwd_piece_min_warps: int = 4
    act_bwd_piece_max_warps: int = 16
    # (ACT_BWD_PIECE_LANES_PER_WARP * ACT_BWD_PIECE_MAX_WARPS at import: setting those does not move it)
    act_bwd_pieces_max_lanes: int = 32 * 17 * 16
    act_bwd_pieces_any_tail: bool = True

    # ---- Both passes: tiles and warps; the backward's weight kernel and chunks ----
    # Elements per program tile in the forward and backward kernels, elements per warp, and backward programs per
    # multiprocessor for rows up to 4096 wide (each program keeps its own partial weight gradient; wider rows use one
    # program per multiprocessor). Tuned on an H200 with CUDA-graph timing: benchmarks/norm_tiles.py sweeps them.
    fwd_tile_elements: int = 4096
    bwd_tile_elements: int = 4096
    # NOTE: the weight and bias gradients of rows read in chunks (past BWD_MAX_LANES) by a kernel of their own.
    # The chunked backward kept them in a program's row of partial sums, read and written once a row block (16 bytes a
    # column in fp32, against 12 a row of that block's data), and with 2 programs a multiprocessor those rows and the
    # blocks' second reads outgrew L2; on an H200 (bf16, [16384, 18944 / 28672], bench ops sweep with --widths) its
    # forward + backward ran 0.37 of a copy's bandwidth for LayerNorm (0.75-0.83x torch.compile) and 0.51-0.55 for
    # RMSNorm (0.84-0.88x). _norm_bwd_weight_kernel instead walks the rows down BWD_WEIGHT_COLUMNS columns (read again:
    # 4 bytes an element more than the minimum, no read-modify-write), and the chunked backward writes dx only. 0: off.
    bwd_weight_kernel_from_lanes: int = 16385
    # NOTE: with the weight gradients out of it, the chunked backward's own tile (plain forms): 16 warps, and one row a
    # block where the chunk is 4096 lanes (2048-lane chunks keep CHUNK_TILE_ELEMENTS' four rows). Measured on an H200
    # (benchmarks/norm_tiles.py --bwd-setting, alternating rounds in one process;
    # launch-rules/30-wide-weight-*/2-tiles), backward's fraction of a copy, LayerNorm / RMSNorm, the 8-warp tile of 2
    # rows x 4096 (160 registers a thread as Triton 3.6 builds it for sm_90: one program a multiprocessor) -> this (64:
    # two programs of 16 warps): [16384, 18944] 0.40 / 0.38 -> 0.49 / 0.50, [16384, 28672] 0.43 / 0.41 -> 0.47 / 0.48,
    # [4096, 32768] 0.41 / 0.39 -> 0.44 / 0.46; [16384, 16400] (2048-lane chunks) on 16 warps 0.41 / 0.38 -> 0.42 /
    # 0.44, where two rows a block took 0.37 / 0.42. The GELU form keeps its tile (not measured). 0: off.
    bwd_chunk_warps: int = 16
    bwd_chunk_one_row_lanes: int = 4096
    bwd_weight_columns: int = 256
    bwd_weight_rows: int = 16
    bwd_weight_warps: int = 4
    bwd_weight_stages: int = 3
    bwd_weight_programs_per_sm: int = 4
    bwd_programs_per_sm: int = 2
    fwd_elements_per_warp: int = 1024
    # the plain forward's floor (benchmarks/norm_tiles.py --fwd-knob FWD_MIN_WARPS=4,2 times others)
    fwd_min_warps: int = 4
    bwd_elements_per_warp: int = 1024
    # NOTE: the plain backward's warps and dz's form, measured together on an H200 (torch 2.11, triton 3.6; the backward
    # launcher alone, CUDA-graph replays, benchmarks/results/launch-rules/7-two-fma/): 1024 elements a warp (32 a
    # thread) against the 512 before, and dz as two multiply-adds on per-row constants (_input_grad), lifted LayerNorm's
    # backward at every width up to 8192 lanes, of a same-size copy: 1152 0.45 -> 0.51, 2560 0.65 -> 0.69, 4304 0.62 ->
    # 0.67, 5120 0.74 -> 0.81, 4096 and 8192 within 0.01 (RMSNorm 0.00-0.02 up). sm_90 SASS of the loop
    # (benchmarks/kernel_stats.py --loop): 22.5 -> 20.8 instructions an element at 4096, 47.9 -> 44.1 at 4304 with 512 a
    # warp (and one select an element less: _norm_bwd_math's NOTE). But the two-FMA form keeps more of the tile live
    # (LayerNorm at [8192, 1152], 8 warps: 118 -> 161 registers a thread, as triton 3.9 compiles it); where ptxas must
    # fit 128 registers (16 warps: 512 threads; the GELU form's cap) it spilled 360 -> 776 bytes a thread at 16384 lanes
    # and the LayerNorm backward at [8192, 11008] fell from 0.34 to 0.08 of copy. So the two-FMA form only up to
    # BWD_TWO_FMA_MAX_WARPS warps and without a register cap.
    bwd_two_fma_max_warps: int = 8

    # ---- The backward: pipeline depth, rows read twice or held ----
    # Backward pipeline depth: tl.range's pipeliner copies the loads STAGES - 1 row blocks ahead into shared memory
    # (cp.async): more bytes in flight than the register prefetch of the next row block that the kernel used before,
    # without the registers. The depth is chosen from bytes (_bwd_stages): the fewest stages that keep
    # BWD_BYTES_IN_FLIGHT bytes of real columns (z and dy) in flight a multiprocessor, at most BWD_MAX_STAGES, and no
    # more than BWD_SMEM_BYTES of stage buffers a multiprocessor (padded lanes take their slots there too). Where it was
    # measured (H200, CUDA-graph timing, benchmarks/norm_tiles.py):
    # * [16384, 4096] bf16 (2 programs a multiprocessor, 16 KiB of z and dy a row block): 3 stages, 64 KiB in flight;
    #   the plain LayerNorm backward went from 0.78 (register prefetch) to 0.87 of copy (2 stages: 0.66, 4: 0.81, 96
    #   KiB: past the point where more in flight pays, the buffers cost occupancy);
    # * widths that pad their tile hold fewer real bytes a stage (4304 in 8192 lanes: 53%), so the fixed 3 stages left
    #   less in flight. The rule's 4-5 stages against 3, backward at [8192, N], LayerNorm / RMSNorm, of a 1 GiB copy:
    #   2880 0.64 / 0.72 -> 0.69 / 0.76, 4304 0.57 / 0.65 -> 0.57 / 0.72, 5120 0.67 / 0.73 -> 0.68 / 0.84, 1152 0.42 /
    #   0.51 -> 0.42 / 0.56; where it gives 3 stages (4096, 2048, 8192 bf16) the kernel is unchanged
    #   (benchmarks/results/launch-rules/5-stages/).
    bwd_bytes_in_flight: int = 64 * 1024
    bwd_max_stages: int = 5
    bwd_smem_bytes: int = 160 * 1024
    bwd_stages: Optional[int] = None  # a fixed depth instead of the rule (benchmarks/norm_tiles.py's grid sets it)
    # NOTE: a row block of more than BWD_PIPELINE_MAX_LANES lanes (one program of 16 warps a multiprocessor) runs
    # without the pipeliner (1 stage). Its stage buffers were 64-192 KiB (z and dy of a 16384-lane row, twice with
    # BWD_RELOAD: 196 KiB at 2 stages), and the copies into them and out again cost more than the overlap gave: the
    # unpipelined loads go to registers, and a reloaded row comes from L2. Measured (H200, the backward launcher,
    # BWD_STAGES 2 -> 1 in one process, fraction of a same-size copy, benchmarks/results/launch-rules/11-pre-tile/):
    # LayerNorm 11008 0.38 -> 0.48, 14336 0.43 -> 0.59, 16384 0.54 -> 0.59; RMSNorm 0.52 -> 0.54, 0.57 -> 0.60, 0.57 ->
    # 0.61.
    # The wide rows' two pieces (8192 + up to 4096 lanes, the NOTE above BWD_WIDE_PIECES_MAX_LANES; and the three pieces
    # to 13312 lanes, the NOTE above BWD_THREE_PIECES_MAX_LANES: tiles of up to 14336 lanes) take the pipeliner, with
    # the depth rule's stages, in 16-bit dtypes where two stages fit BWD_SMEM_BYTES (bf16: 3 stages of z and dy, 2 with
    # the pre-residual form's ds; fp32 keeps one stage, as before: its 80-147 KiB stages were never run on a GPU): one
    # program a multiprocessor had its loads and its math in turn. Measured on an H200 (benchmarks/norm_tiles.py
    # --bwd-setting, 1 -> the rule's stages in alternating rounds of one process, [16384, n] bf16, fraction of a
    # same-size copy; benchmarks/results/launch-rules/21-wide-pipeline-2026-12-01-h200/): LayerNorm 9216 0.71 -> 0.94,
    # 10240 0.76 -> 0.96, 11008 0.71 -> 0.79, 12288 0.76 -> 0.82; RMSNorm 9216 / 10240 0.74 / 0.78 -> 0.97 / 0.97;
    # pre-residual LayerNorm (2 stages) 11008 0.64 -> 0.78; 2 stages where the rule gives 3 lost (LayerNorm 11008 0.54).
    # The padded 16384-lane tile keeps one stage (above). Run again with the rule's other cells (launch-rules/21-*,
    # 2-final, 3-tails): 11008 RMSNorm 0.68 -> 0.97 (its 4096-lane tails in pieces now too), pre-residual RMSNorm 0.77
    # -> 0.84, [32768, 11008] LayerNorm 0.73 -> 0.81; 8960 = 8192 + 768 0.70 -> 0.93. The one loss: 9000 = 8192 + 808 in
    # the pre-residual forms (LayerNorm 0.69 -> 0.64, RMSNorm 0.71 -> 0.69), where 8960 and 9216 gain (0.71 -> 0.73 /
    # 0.75), left as measured. The GELU form's pieces past its own (ACT_BWD_PIPELINE_MAX_LANES, 8192 + up to 512) take
    # ACT_BWD_STAGES stages where their tail gives a thread ACT_BWD_PIPELINE_TAIL_BYTES or more and the stages fit
    # BWD_SMEM_BYTES: 9472 / 9728 / 10752 / 11008 / 12288 (tails of 2048-4096 lanes) 0.42 / 0.42 / 0.37 / 0.37 / 0.39 ->
    # 0.53 / 0.54 / 0.44 / 0.44 / 0.46, where a 1024-lane tail (4 bytes a thread: 8960, 9000, 9216) lost (0.52 -> 0.38).
    bwd_pipeline_max_lanes: int = 14336
    bwd_pipeline_full_lanes: int = 8192  # (row blocks up to here keep 2 stages even past BWD_SMEM_BYTES, as measured)
    act_bwd_pipeline_max_lanes: int = 8192
    act_bwd_pipeline_tail_bytes: int = 8
    # NOTE: a tile of BWD_RELOAD_FROM_LANES lanes or more (one row of 16384: 16 warps, at most 128 registers a thread)
    # cannot hold its row (z, dy and w in fp32) and the weight and bias gradients' accumulators at once: 5 x 32 values a
    # thread. LayerNorm's backward spilled 352 bytes a thread there (656 with GELU; kernel_stats.py --rule) and ran at
    # 0.35-0.42 of copy. With RELOAD it loads each row twice, once for the row sums and once for the gradients (w too),
    # so that only the accumulators stay live across the sums, the second read hitting L2 behind the first. Spill 88
    # bytes. Pipelined (2 stages, both reads staged in 196 KiB of shared memory) it paid for LayerNorm only (11008 0.35
    # -> 0.38, 14336 0.40 -> 0.43, 16384 0.42 -> 0.53 of copy; RMSNorm lost 2-5%; launch-rules/10-reload/), and the rule
    # took the forms with two accumulators. Without the pipeliner (BWD_PIPELINE_MAX_LANES) it pays for every form (H200,
    # the backward launcher, BWD_RELOAD off / on in one process, fraction of a same-size copy at 9000 / 11008 / 14336 /
    # 16384 wide, benchmarks/results/launch-rules/11-pre-tile/): LayerNorm 0.28 / 0.32 / 0.38 / 0.43 -> 0.41 / 0.48 /
    # 0.59 / 0.59, RMSNorm 0.46 / 0.53 / 0.60 / 0.61 -> 0.56 / 0.66 / 0.79 / 0.66, pre-residual RMSNorm 0.48 / 0.57 /
    # 0.65 / 0.65 -> 0.65 / 0.74 / 0.83 / 0.76, LayerNorm + GELU 0.11 / 0.14 / 0.16 / 0.22 -> 0.25 / 0.30 / 0.34 / 0.45.
    bwd_reload_from_lanes: int = 16384
    bwd_reload: Optional[bool] = None  # force the choice (benchmarks' A/B runs)
    # NOTE: a bf16 row held across its row sums as it was loaded (16 bits an element) and widened to fp32 again after
    # them (_widen_bf16_again), rather than kept as fp32 tiles (the pieces: z, dy, xhat and wdy live across the sums) or
    # read again (RELOAD): half the registers for the row, for ~4 instructions an element more (xhat and w * dy made
    # again). Compiled for sm_90 (kernel_stats.py --rule --set BWD_HOLD_PIECES=False/True), the wide pieces' spills go:
    # LayerNorm 11008 56 -> 0 bytes a thread, 13312 104 -> 0, pre-residual 11008 88 -> 48. Measured on an H200 (the
    # backward launcher, the settings alternating in one process, fraction of a same-size copy,
    # benchmarks/results/launch-rules/33-hold-2026-12-05-h200/): [8192 / 32768, 11008] LayerNorm 0.87 / 0.93 -> 0.92 /
    # 1.00, pre-residual 0.75 / 0.80 -> 0.77 / 0.81, [8192, 13312] 0.64 -> 0.65, RMSNorm (no spill before) 0.93-0.99
    # unchanged; where nothing spilled (2048-4304 lanes) no gain, and the GELU form, whose recomputed derivative costs
    # ~12 instructions an element more, lost at 2560 (0.59 -> 0.50) and 11008 (0.46 -> 0.45) and won only at 4304 (0.51
    # -> 0.57; its one spilling cell): so the plain forms' wide pieces only (BWD_HOLD_PIECES), where their fp32 tiles
    # spill: from 24 lanes a thread (BWD_HOLD_PIECES_LANES_PER_THREAD; 9216 / 10240 wide hold 18 / 20, spilling
    # nothing). Instead of the padded 16384-lane tile's second read (BWD_HOLD): LayerNorm / RMSNorm at 16384 wide, no
    # lane padded, 0.62 / 0.69 -> 0.69 / 0.71; where the tile pads (14336: 0.59 / 0.80 -> 0.53 / 0.65), in pre mode
    # (16384: 0.79 -> 0.65) and with GELU (0.50 -> 0.45) it lost (more spill: 88 -> 136 bytes at 14336), so only there.
    # The rule against both off on an H100 (2-confirm/ there): LayerNorm / post-residual 11008-12288 1.02-1.04x, 13312
    # 1.12x, 16384 1.10-1.18x; RMSNorm 1.00-1.02x; 9216 / 10240 unchanged (held at any lanes, LayerNorm at 10240 lost
    # 18%).
    bwd_hold_pieces: bool = True
    # (the fp32 tiles spill from 24 lanes a thread on 16 warps: 11008-13312 wide)
    bwd_hold_pieces_lanes_per_thread: int = 24
    bwd_hold: bool = True

    # ---- The GELU form's backward: held rows, warps, register cap, stages ----
    # NOTE: the GELU form's pieces held too, in one of two ways: 1 z and dy (the activation's derivative computed again
    # after the sums, ~12 instructions an element), 2 z and d(affine output) rounded to bf16 (as PyTorch's GELU backward
    # hands it to the norm's backward; the derivative computed once, ~4 instructions an element more; the gradients stay
    # within twice PyTorch's bf16 error against float64, tests/ops/test_norm.py). On sm_90 builds the second takes the
    # fp32 pieces' spills away where they have them, past 16 lanes a thread (48-152 bytes -> 0 at 4160-10240 wide, 160
    # -> 56 at 11008). Measured on an H100 (the launcher, alternating in one process, results/launch-rules/33-hold-*/
    # 2-confirm/), against the fp32 pieces, [8192, n]: 4304 1.14x, 8704 1.03x, 9216 1.17x, 10240 1.05x, 11008 1.06x (the
    # first form 0.92-1.14x); where nothing spilled (2560, 3072, 6144: 10-12 lanes a thread) 0.97-1.00x. So the second
    # form, past ACT_BWD_HOLD_LANES_PER_THREAD lanes a thread.
    act_bwd_hold: int = 2
    act_bwd_hold_lanes_per_thread: int = 16
    # NOTE: with a GELU after the norm (layer_norm_gelu) the backward holds more registers (the bias and the
    # activation's derivative). 8 warps a program then need about 166 registers a thread, which leaves one program per
    # multiprocessor and too few bytes in flight (0.46 of copy); capped at 128 (ptxas' maxnreg) two programs fit, and
    # with EVEN_N nothing spills. Measured on an H200 at [16384, 4096] (benchmarks/NOTES.md, "Norms"): backward 0.54 (4
    # warps, register prefetch, before the cheaper sigmoid in ops/activation.py) -> 0.74 of copy. Its forward takes the
    # plain norm's tile (one row of 4 warps): 0.83 -> 0.92 once the sigmoid was cheaper.
    act_bwd_elements_per_warp: int = 512
    # None: as many warps as the register cap lets a multiprocessor hold (_act_programs_per_sm)
    act_bwd_warps_per_sm: Optional[int] = None
    # Register cap (rows in one tile or in pieces), so that two 8-warp programs fit a multiprocessor.
    act_bwd_maxnreg: int = 128
    act_bwd_stages: int = 3

    # ---- Both passes: the sums of a row in pieces; the backward of a small input ----
    # NOTE: a row in pieces reduces its sums across the program once rather than once a piece (the backward's two
    # row sums in _norm_bwd_pieces; with FWD_JOINT_SUMS the forward's statistics, _row_statistics_of_pieces): each
    # piece is first summed within its threads to one partial a thread (_thread_partials: the reshape names the
    # load's layout, so no value moves), the pieces' partials are added, and the row's threads exchange those. A
    # piece narrower than the program's threads keeps the sums piece by piece (joint_sums_threads). sm_90 builds
    # with Triton 3.6: the backward's loop 3 barriers where 6-9, a third to a half of the shuffles, 3-12% fewer
    # instructions a useful element (LayerNorm + GELU at 14336 41.7 -> 38.4); the forward's one-row programs 5
    # barriers where 11 (benchmarks/results/launch-rules/41-joint-sums-2026-12-07/). Timed on an H100 against the
    # sums piece by piece (benchmarks/results/launch-rules/42-joint-sums-2026-12-07-h100/, two runs, fraction of a
    # same-size copy), the backward: LayerNorm + GELU [16384, 4304] 0.79 -> 0.84, [2048, 4304] 0.51 -> 0.55, [16384,
    # 11008] 0.79 -> 0.87, LayerNorm [16384, 14336] 0.87 -> 0.93, pre-residual [16384, 11008] 0.95 -> 0.97, the
    # other cells 0.998-1.019x; the forward 0.99-1.06x, the lowest in 5-10 us cells ([2048, 1152] LayerNorm 0.52 ->
    # 0.55, [2048, 4304] post-residual 0.81 -> 0.84; [2048, 2304] LayerNorm + GELU 0.991x / 0.994x, its 2048-row
    # cells within 1-2% run to run). Slower, both runs: LayerNorm + GELU's backward at [16384, 2304] 0.98x (the
    # build gives no reason: same registers, 45.2 -> 41.2 instructions an element) and at 14336 (8192 + 4096 + 2048
    # lanes) [16384 / 2048 rows] 0.986x / 0.993x, where the joint partials spill more (112 -> 136 bytes, though with
    # fewer local accesses, 53 -> 47). No rule found that parts them from the GELU form's wins: [16384, 11008] is in
    # three pieces too (8192 + 2048 + 1024, 1.11x) and [16384, 4304] in two like 2304 (1.07x). So it is on for every
    # form; the two cells' loss is in the results' README. (Not the FP8 forward: the NOTE above FP8_FWD_JOINT_SUMS.)
    joint_sums: bool = True
    fwd_joint_sums: bool = True  # (with JOINT_SUMS: the forward's statistics of a row in pieces alike)
    # A backward of at most this many elements (rows in one tile each) runs as one program that writes the weight / bias
    # gradients itself (one launch, no partial sums): at such sizes a launch costs more host time than the whole kernel
    # takes on the GPU.
    direct_max_elements: int = 32768

    # ---- The forward: rows a program, chunks, cache hints, persistent programs, register caps ----
    # NOTE: the forward's rows per program also depend on the row count and the card. The width's tile packs
    # FWD_TILE_ELEMENTS lanes a program (4 rows of 1024), which keeps bytes in flight where there are rows to spare; a
    # few thousand rows then make too few programs to fill the card ([2048, 768]: 512 programs of 4 warps, 2048 warps
    # where an H200 holds 132 x 64), and the kernel is a few microseconds long, so warps that could have been loading
    # are the time. So where the width's tile would make fewer than FWD_MIN_PROGRAMS_PER_SM programs a multiprocessor,
    # the forward takes fewer rows a program (a power of two, at least one), the warps following the lanes as in _tile.
    # 0 or None: off. More rows, every backward, and traced calls with a symbolic row count keep the width's tile.
    fwd_min_programs_per_sm: Optional[int] = 4
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
    # folder's grid, 11008-16384 wide), and no one chunking of the grid's 18 won every cell (the best of each
    # 0.97-1.12x: post-residual at 11008 0.81 -> 0.91 in 4096-lane chunks on 8 warps, + GELU at 14336 0.75 -> 0.82 in
    # 2048-lane ones on 8; a lead, not a rule yet). The FP8 forward's chunks (its own tile) share the statistics' read
    # and the hints, not timed. 0: off.
    fwd_rms_chunks_from_lanes: int = 8192
    fwd_chunk_warps: int = 16
    # (A knob for an A/B, off: the forward's chunks of this many lanes rather than CHUNK_CHOICES' least padding. 0:
    # off.)
    fwd_chunk_lanes: int = 0
    # NOTE: RMSNorm's plain forward on 16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS)
    # from FWD_SCALAR_RMS_CHUNKS_FROM_LANES lanes (up to FWD_MAX_LANES) reads its one-row chunks
    # FWD_SCALAR_RMS_CHUNK_LANES wide on FWD_SCALAR_RMS_CHUNK_WARPS warps (8 one-element loads a thread a chunk, not the
    # 4-8 of the chunks above on FWD_CHUNK_WARPS), unless FWD_CHUNK_LANES is set (an A/B's knob). Timed on an H100
    # (benchmarks/norm_tiles.py through `LANDED=9 PHASE=wide FWD_ONLY=1 scripts/issue22_scalar_rows_gpu.sh`, the forward
    # launcher at [16384, n], two alternating rounds of one process;
    # benchmarks/results/launch-rules/35-odd-widths-2026-12-06-h100/15-forward-settings/) against the rule above: 12345
    # 1.03x (0.387 -> 0.375 ms, 0.69 -> 0.72 of copy), 15001 1.13x (0.489 -> 0.434 ms, 0.67 -> 0.75; 2048 lanes on 16
    # warps: 1.04x, so the warps are most of it), but 8447 0.94x (0.75 -> 0.71), and 9999 0.96x in the call before
    # (13-whole-row-wk/, where 12345 / 15001 gave the same 1.03x / 1.13x): so from 12289 lanes, past the widest measured
    # loss. 1024-lane chunks lost on 4 or 8 warps (0.87-1.00x). Not the pre-residual RMSNorm (its chunks on 8 warps ran
    # 0.91-1.07x its 16, the NOTE below), nor vector rows (not timed). 0: off.
    fwd_scalar_rms_chunks_from_lanes: int = 12289
    fwd_scalar_rms_chunk_lanes: int = 2048
    fwd_scalar_rms_chunk_warps: int = 8
    # NOTE: the pre-residual LayerNorm's forward on 16-bit rows of one-element accesses (odd widths: the NOTE above
    # BWD_SCALAR_WARPS) that the rule holds in one padded tile past 8192 lanes (12289-16384: no pieces) reads them in
    # one-row chunks of FWD_SCALAR_PRE_CHUNK_LANES lanes on FWD_SCALAR_PRE_CHUNK_WARPS warps (8 lanes a thread), s
    # stored in the first pass and read back in the second. Timed on an H100 (benchmarks/norm_tiles.py through `LANDED=5
    # PHASE=wide scripts/issue22_scalar_rows_gpu.sh`, the forward launcher at [16384, n], two alternating rounds of one
    # process; benchmarks/results/launch-rules/35-odd-widths-2026-12-06-h100/11-pre-chunks/) against the padded tile:
    # 12345 1.33x (1.231 -> 0.922 ms), 15001 1.20x (1.407 -> 1.171); 1024 lanes on 4 warps 1.19x / 1.12x, 4096 on 16
    # 0.96x / 1.00x, 2048 on 4 0.70-0.76x. Where the rule has pieces (8447, 9999) every chunking lost (0.43-0.76x); the
    # post-residual form, which would read x and the residual twice, lost too (0.48-1.07x, the rule's padded tile ahead
    # at 12345 / 15001), and so did the pre-residual RMSNorm's chunks on 8 warps against its 16 (0.91-1.07x).
    # 0: off.
    fwd_scalar_pre_chunk_lanes: int = 2048
    fwd_scalar_pre_chunk_warps: int = 8
    # NOTE: LayerNorm without a residual (and with its GELU), a row in two pieces with a tail of FWD_VECTOR_TAIL_LANES
    # or more (the width's tile: 5504 and 6144 = 4096 + 2048, 11008 and 12288 = 8192 + 4096), takes one warp per
    # FWD_TAIL_PIECE_LANES_PER_WARP lanes, as the one-row pieces with smaller tails do, not one per
    # FWD_ELEMENTS_PER_WARP: 4 warps at 6144 where it had 8, 8 at 11008 where it had 16 (fewer warps to reduce its two
    # statistics across; 9000 and 10240 keep theirs, their tails' vectors capping the warps already). Measured on an
    # H200 (benchmarks/norm_tiles.py --fwd-knob FWD_TAIL_PIECE_LANES_PER_WARP=0,2048 in alternating rounds of one
    # process, [16384, n] bf16, fraction of a same-size copy;
    # benchmarks/results/launch-rules/19-tail-warps-2026-12-01-h200/): 6144 LayerNorm 0.87 -> 0.95, + GELU 0.76 -> 0.90;
    # 5504 + GELU 0.70 -> 0.84; 11008 LayerNorm 0.76 -> 0.80, + GELU 0.65 -> 0.81; 12288 0.82 -> 0.86, + GELU 0.71 ->
    # 0.88; [4096, 6144 / 11008] LayerNorm 0.76 / 0.70 -> 0.83 / 0.73.
    # The residual forms lost past 8192 lanes (11008 pre-residual 0.99 -> 0.91, post-residual 0.81 -> 0.74: they stream
    # 4 bytes an element more) and gained at most 0.03 below it, RMSNorm lost up to 0.02 (it reads rows of 8192 lanes or
    # more in chunks): they keep the width's warps. The padded 16384 lanes of 14336 on 8 warps instead of 16: + GELU
    # 0.76 -> 0.70, so padded tiles keep theirs too. 0: off.
    fwd_tail_piece_lanes_per_warp: int = 2048
    # NOTE: the post-residual forward (y = residual + norm(x)) of a row held in registers loads the residual with x,
    # before the statistics, so that its latency hides under their reductions instead of following them; except in one
    # power-of-two tile of more than FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES lanes without column masks, where the early load
    # lost. Counted for sm_90 on a CPU (benchmarks/kernel_stats.py --rule --forms ln-post, the constant 0 against
    # 1048576): such a tile's statistics take 3 barriers where a masked tile's or a row in pieces take 7, so less
    # latency waits on them, while the early residual costs registers everywhere (2048 62 -> 72, 4096 62 -> 79, 8192 69
    # -> 93 a thread, fewer programs a multiprocessor; 1024 67 -> 72, 2560 79 -> 96, 4304 78 -> 84). Measured on an H200
    # (benchmarks/norm_forward_warps.py --setting: the forward launcher in inference, late and early alternating in one
    # process; benchmarks/results/launch-rules/25-forward-streams-2026-12-03-h200/), the late load's time over the early
    # one's at rows 2048 / 8192 / 32768: 768 1.14 / 1.06 / 1.03, 1024 1.19 / 1.03 / 1.03, 1152 1.14 / 1.12 / 1.10, 1536
    # 0.96 / 1.08 / 1.06, 2560 1.17 / 1.09 / 1.08, 3072 1.05 / 1.10 / 1.10, 4304 1.14 / 1.12 / 1.15, 5120 1.11 / 1.09 /
    # 1.10, 6144 1.09 / 1.09 / 1.09; the whole tiles 2048 0.93 / 1.00 / 1.00, 4096 0.97 / 1.01 / 1.00, 8192 0.99 / 0.98
    # / 0.98. Measured in the same call and not taken: pre mode's s stored as soon as it is loaded (0.94-1.10, geometric
    # mean 0.997), and cache hints on the rows' streams (loads and stores evict_first, the weight and bias evict_last:
    # 1.05-1.20 faster at 2048 rows, 0.92-0.95 at 32768 in every form). Rows past FWD_PERSIST_FROM_LANES in persistent
    # programs read their residual a row ahead already (the NOTE above FWD_PERSIST_STAGES); the FP8 forward keeps its
    # order. 0: off.
    fwd_early_residual_max_whole_lanes: int = 1024
    # NOTE: the plain forward loads its weight and bias with an evict_last cache hint, as Inductor's kernels do: a
    # program of a few rows reads the whole weight again, as many bytes as a row of x, through caches that the rows'
    # streams, each read once, would otherwise evict it from (the likely reading, not shown). Measured on an H200
    # (benchmarks/norm_forward_warps.py --setting, the forward launcher in inference, with and without the hint
    # alternating in one process, two rounds; benchmarks/results/launch-rules/26-weight-hint-2026-12-04-h200/), the time
    # without it over the time with it, by form's geometric mean 1.00-1.03 (2048 rows 1.03, 32768 rows 1.006 and never
    # below 0.996 there); post-residual at 8192 wide 1.09-1.11 at every row count, LayerNorm at 2048 rows 1.06-1.19 at
    # 2560-8192 wide, RMSNorm at 2048 rows 1.00-1.16 up to 6144 wide; lowest post-residual [8192, 768 / 1024] 0.95-0.98
    # and LayerNorm [2048, 1152] 0.96-0.97 (kernels of 5-16 us). Measured in the same call and not taken: the weight and
    # bias loaded first, before x's statistics, as values (Inductor's order): 0.95 by LayerNorm's geometric mean (to
    # 0.76; 17-42 registers a thread more at 4096-4304, benchmarks/kernel_stats.py --rule). The FP8 forward (its vectors
    # in the tile's shape) and the backward (the weight loaded once a program) keep theirs. "": no hint.
    fwd_wb_evict: str = "evict_last"
    # NOTE: not in the GELU form (LayerNorm + GELU), which that A/B did not run: the sweep after it
    # (benchmarks/results/sweep/2026-12-04-h200-ln-gelu/) had its forward at 8192 wide 0.86-0.87 of copy where it had
    # been 0.95-0.97, and with the hint and without in one process (benchmarks/norm_forward_warps.py --forms ln-gelu
    # --setting, two rounds; launch-rules/29-gelu-weight-hint-2026-12-04-h200/), [8192 / 32768, 8192] 0.87-0.88 ->
    # 0.96-0.97 of copy without it, 14336 wide 0.72-0.74 -> 0.75-0.77, 11008 0.82-0.83 -> 0.82-0.84, 2048 and 4096 wide
    # equal. Why the hint costs this form and pays in the others was not looked into. ACT_FWD_WB_EVICT: its hint ("":
    # none).
    act_fwd_wb_evict: str = ""
    # NOTE: a row past FWD_PERSIST_FROM_LANES lanes held in registers (one row a program, one chunk) on FWD_WIDE_WARPS
    # warps, in the post-residual form or (in one padded tile) LayerNorm without a residual or activation, goes to
    # persistent programs, FWD_PERSIST_PER_SM a multiprocessor, each walking a strided set of rows with its loads
    # FWD_PERSIST_STAGES - 1 rows ahead (Triton's pipeliner, as the backward's wide pieces) and the weight and bias
    # loaded once. One row a program, such programs hold a multiprocessor two at a time (FWD_WIDE_MAXNREG) and a row's
    # reads wait for its own statistics: the post form reads its residual after them, which the pipeline reads a row
    # ahead. Measured on an H200 (benchmarks/norm_tiles.py --fwd-setting, settings alternating in one process, 2-3
    # rounds; bf16, fraction of a same-size copy, a program a row -> persistent;
    # benchmarks/results/launch-rules/23-forward-persistent-2026-12-02-h200/): post-residual [16384, 11008] 0.81 ->
    # 0.98, [32768, 11008] 0.82 -> 1.00, [4096, 11008] 0.75 -> 0.89, [16384, 12288] 0.86 -> 0.97, [16384, 13312] 0.89 ->
    # 0.98, [16384, 14336] 0.91 -> 0.97, [2048, 14336] 0.80 -> 0.86, [16384, 16384] 0.97 -> 0.98; LayerNorm in the
    # padded 16384-lane tile: [16384, 14336] 0.86 -> 0.92, [2048, 14336] 0.72 -> 0.81, [16384, 13312] 0.84 -> 0.90. Left
    # out, as they lost: LayerNorm in a whole 16384-lane tile (a program a row at 0.92-0.94 already; 0.94 -> 0.93) and
    # at 11008 / 12288 (8192 + 4096 on 8 warps, three programs a multiprocessor: 0.80 / 0.86 -> 0.77 / 0.83 on 16 warps;
    # so no rows in pieces, 8200 = 8192 + 16 on 16 warps included, not measured); the pre-residual form, which reads
    # both its inputs first (0.97-0.99 -> 0.90-0.93); + GELU (0.81 -> 0.59 at 11008, even at 14336). 2 stages lost
    # everywhere (0.44-0.84), 4 ran as 3. 16-bit dtypes only (fp32 not measured; its stages take twice the shared
    # memory), stages within FWD_PERSIST_SMEM_BYTES, and at least FWD_PERSIST_STAGES rows a program (else a program a
    # row, as before). The weight and bias are loaded once: loaded in the loop, the pipeliner staged them too (LayerNorm
    # at 11008: 147 KiB of shared memory), and post-residual [16384, 11008] ran 0.87 against 0.98. 0: off.
    fwd_persist_from_lanes: int = 8192
    fwd_persist_stages: int = 3
    fwd_persist_per_sm: int = 1
    fwd_persist_smem_bytes: int = 160 * 1024
    # NOTE: on 16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS) the post-residual
    # form's two pieces (8193-12288 lanes, the ones on 16 warps) run a program a row, not persistent
    # (FWD_PERSIST_SCALAR_PIECES): timed on an H100 (benchmarks/norm_tiles.py through `LANDED=9 PHASE=wide FWD_ONLY=1
    # scripts/issue22_scalar_rows_gpu.sh`, the forward launcher at [16384, n], FWD_PERSIST_STAGES=0 against the rule in
    # two alternating rounds of one process; launch-rules/35-odd-widths-2026-12-06-h100/15-forward-settings/ and
    # 16-post-pieces-pipeline/) 8447 1.35x (0.56 -> 0.76 of copy), 8703 1.35x, 11007 1.27x (0.51 -> 0.65), 12287 1.22x
    # (0.55 -> 0.67). Its padded 16384-lane tile keeps the pipeline (12345 / 15001: 0.41x without it). Not measured, a
    # guess: a one-element (2-byte) load cannot be an asynchronous copy (4 bytes at least), so the pipeliner's staging
    # costs more than the latency it hides.
    fwd_persist_scalar_pieces: bool = False
    # NOTE: the forward's rows past 8192 lanes take one row a program of 16 warps (512 threads). Above 64 registers a
    # thread only one such program fits a multiprocessor, and nothing overlaps its reductions with another row's loads:
    # at [8192, 14336] the post- and pre-residual forms (84 and 89 registers as triton 3.9 compiles them for sm_90) ran
    # 0.66 and 0.84 of copy. FWD_WIDE_MAXNREG caps such a program's registers so that two fit (65536 / (2 x 512));
    # measured (H200, benchmarks/norm_tiles.py --fwd-maxnreg 0,64, forward of a 1 GiB copy,
    # benchmarks/results/launch-rules/9-wide-forward/): 14336 post-residual 0.66 -> 0.90, pre-residual 0.84 -> 0.97
    # (spilling 152 and 72 bytes a thread), LayerNorm / RMSNorm 0.83 / 0.91 -> 0.83 / 0.92; at 11008 (two pieces, 51-79
    # registers) within 0.02 either way. None: no cap.
    fwd_wide_maxnreg: Optional[int] = 64
    fwd_wide_warps: int = 16
    # NOTE: the forward of LayerNorm without a residual (and of its GELU form), one row a program past
    # FWD_PERSIST_FROM_LANES lanes on fewer than FWD_WIDE_WARPS warps (two pieces, 8193-12288 lanes: 4 warps at 8960 /
    # 9216, 8 at 10240-12288), caps a thread's registers so that FWD_ROW_WARPS_PER_SM warps of such programs share a
    # multiprocessor (4 warps: 5 programs at 96 registers; 8 warps: 3 at 80). As Triton 3.6 builds them for sm_90
    # (benchmarks/kernel_stats.py --rule), they took 100 (11008 / 12288) to 130 registers (8960 / 9216): two or three
    # programs, 12-16 warps a multiprocessor; capped, they spill nothing. Measured on an H100 (benchmarks/norm_tiles.py
    # --fwd-setting through scripts/issue22_row_cap_gpu.sh: the forward launcher, no cap against the caps for 20 / 24 /
    # 32 warps, in two alternating rounds of one process; benchmarks/results/launch-rules/37-row-cap-2026-12-06-h100/),
    # 20 warps against none: LayerNorm [16384, 11008] 1.047x, [4096 / 32768, 11008] 1.053x / 1.046x, [16384, 12288]
    # 1.011x, 10240 1.004x (78 registers: the cap does not bind), 8960 / 9216 0.987x / 0.984x (left as measured); + GELU
    # 8960 / 9216 1.39x / 1.35x, 11007 (odd: one-element accesses) 1.02x, 11008 / 12288 1.00x. 24 warps ran as 20 on 8
    # warps and lost on 4 (80 registers, 128-176 bytes of spill: LayerNorm 0.65x), 32 lost everywhere (0.40-0.95x). The
    # residual forms keep their registers: at 8960 / 9216 they spill under the cap (post-residual 232 bytes at 96
    # registers: 0.64x; pre-residual 64: 0.89x), and from 10240 they run on 16 warps; fp32 rows too (not measured), and
    # 16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS), which hold each value in a
    # register of its own: on 4 warps (8193-9727) they build without a spill at 168 registers and spill 264-416 bytes
    # under the cap (not timed); at 11007 (8 warps, 64-72 bytes under it) the cap ran 1.006x / 1.019x (LayerNorm / +
    # GELU). 0: off.
    fwd_row_warps_per_sm: int = 20

    # ---- The FP8 forward ----
    # The forward with an FP8 output (forward only) takes the forward's rows (FP8_FWD_PLAIN_ROWS) with its own warps:
    # one per FP8_FWD_LANES_PER_WARP lanes of the tile, and at least FP8_FWD_RESIDUAL_WARPS_PER_ROW a row in the
    # residual forms, which stream 4 more bytes an element (a row in two pieces counts its head and tail together
    # (FP8_FWD_TAIL_WARPS; off: the forward's warps), a row in chunks keeps the forward's warps).
    # NOTE: measured against the forward's warps (one per 1024 lanes, at least 4), H200, [16384, n] bf16, old and new
    # code in one call (benchmarks/results/fp8/15-fp8-forward-2026-11-29-h200/): 2048 lanes a warp ran as fast or faster
    # in the plain forms from 1152 to 8192 wide, and in the residual forms from 4096 (best of two rounds, rowwise:
    # LayerNorm 8192 1.08x, 4304 1.13x; post-residual 4304 1.20x, 14336 1.61x; LayerNorm at 4096 0.90 -> 0.93 of copy);
    # with one warp a row (two rows a program at 1152 and 2048) the residual forms lost (post-residual 1152 0.83 ->
    # 0.75), hence their floor; 4096 lanes a warp lost almost everywhere. Left as measured: 0.96-0.98x at 2560
    # (post-residual, and LayerNorm tensorwise) and LayerNorm rowwise at 14336 (0.97x).
    fp8_fwd_lanes_per_warp: int = 2048
    # NOTE: the FP8 forward takes the plain forward's one-row pieces (the NOTE above FWD_PIECES_FROM_LANES) from rows of
    # FP8_FWD_PIECES_FROM_LANES, so that from there its statistics are the plain forward's arithmetic too. Measured,
    # H200, [16384, n] bf16, against the padded tile (old and new code in alternating rounds of one call, rowwise /
    # tensorwise, fraction of copy, the first of two rounds, the second within 0.03; benchmarks/results/launch-rules/
    # 15-one-row-pieces-2026-11-29-h200/4-final/): 4304 RMSNorm 0.71 / 0.72 -> 0.95 / 0.91, LayerNorm 0.57 / 0.49 ->
    # 0.73 / 0.72, post-residual 0.76 / 0.63 -> 0.88 / 0.83; 2304 LayerNorm 0.64 / 0.56 -> 0.79 / 0.76. At 1152 (1024 +
    # 128 on 2 warps) rowwise lost (RMSNorm 22.9 -> 25.2 us, LayerNorm 28.9 -> 30.9) where tensorwise and post-residual
    # gained 1.05-1.09x: 1152-1536 keep the padded tile.
    fp8_fwd_pieces_from_lanes: int = 2048
    # NOTE: from FP8_FWD_PIECES_FROM_LANES the FP8 forward takes the plain forward's rows (forward_rule: its vector
    # tails 2561-3072 and 4609-6144, and LayerNorm's wide tails on one warp per 2048 lanes, which RMSNorm takes too:
    # its plain chunks would cost the rowwise scale a third pass), with those rows' warps (FP8_FWD_TAIL_WARPS: its own).
    # Its own rule had kept padded tiles at the vector tails (the NOTE above FWD_VECTOR_TAIL_LANES) and 16 warps for
    # the wide tails. Measured on an H100 against that rule, [16384, n] bf16, two alternating rounds of one process,
    # rowwise / tensorwise speed-up (benchmarks/results/fp8/38-plain-rows-2026-12-07-h100/): the wide tails RMSNorm
    # 1.12-1.20x, LayerNorm 1.24-1.32x (11008 0.66 -> 0.87 of copy; residual forms unchanged: 16 warps); the vector
    # tails at 4864-6144 LayerNorm 1.04-1.14x / 1.15-1.31x, RMSNorm 1.00-1.09x, post-residual tensorwise 1.03-1.12x and
    # rowwise 1.02x at 4864 / 5120 but 0.94x / 0.96x at 5632 / 6144; at 2816-3072 RMSNorm 1.01-1.03x, post-residual
    # 1.04-1.06x, LayerNorm tensorwise 1.05x but rowwise 0.96x; the pre-residual forms within 0.6%. Below 2048 lanes
    # (1152, 1536) the plain pieces lost rowwise (RMSNorm 0.94x / 0.97x, LayerNorm 0.96x / 0.94x): those keep the
    # padded tile. Off: the FP8 forward's own rows at every width.
    fp8_fwd_plain_rows: bool = True
    # NOTE: the warps above (one per FP8_FWD_LANES_PER_WARP lanes, the residual forms' floor) for a row in two pieces
    # too, its head and tail counted, where the plain forward's warps came with its rows: 2816-3072 on 2 warps (not 4),
    # the residual forms and RMSNorm at 5121-6144 on 4 (not 8), the residual forms' wide tails on 8 (not 16). Measured
    # on an H100 against the plain forward's warps, [16384, n] bf16, two alternating rounds (fp8/38-plain-rows-*/
    # run5-tail-warps/; every warp count in run4-tiles/), rowwise / tensorwise: LayerNorm 2816 / 3072 1.11x / 1.09x and
    # 1.09x / 1.08x (0.85 -> 0.94 of copy), post-residual 5632 / 6144 1.07x / 1.06x and 1.04x / 1.04x, RMSNorm 5632
    # 1.04x / 1.03x, the wide tails within 1.3%; the cost: the post-residual form at 2816 / 3072 tensorwise 0.97x /
    # 0.98x, the pre-residual RMSNorm within 0.8%. No spill in the sm_90 builds (sm90-builds/registers-tail-warps.md).
    # Timed again with every variant's outputs checked, and tests/ops/test_norm_fp8.py on CUDA with it on (232 passed:
    # run6-tail-warps-tests/, H100): LayerNorm 2816 rowwise 0.84 -> 0.93 of copy, post-residual 5632 0.93 -> 1.00.
    fp8_fwd_tail_warps: bool = True
    fp8_fwd_residual_warps_per_row: int = 2
    fp8_fwd_min_warps: int = 1  # a floor for benchmarks/norm_fp8.py --warps
    # a register cap for the FP8 forward (benchmarks/norm_fp8.py --maxnreg times it)
    fp8_fwd_maxnreg: Optional[int] = None
    # NOTE: the FP8 forward sums a row in pieces piece by piece, where the plain forward takes the joint sums (the NOTE
    # above JOINT_SUMS). Timed on an H200 against the joint sums, [16384, n] bf16, two calls, each two alternating
    # rounds within 0.012 (benchmarks/results/fp8/36-joint-sums-2026-12-07-h200/), rowwise, fraction of copy, joint ->
    # pieces: LayerNorm 2304 0.62 -> 0.82, 4304 0.51 -> 0.72, 11008 0.43 -> 0.50; RMSNorm 2304 0.82 -> 0.97, 4304
    # 0.75 -> 0.96; post-residual 4304 0.79 -> 0.88, 11008 0.66 -> 0.72 (tensorwise alike); pre-residual RMSNorm
    # within 0.01 either way. So its statistics may differ from the plain forward's in the last fp32 bits at these
    # widths (a different summation order), as they do where it takes a tile of its own (tests/ops/test_norm_fp8.py).
    # Its sm_90 builds with the joint sums have more barriers (4304 LayerNorm 19 -> 33), the plain forward's fewer.
    fp8_fwd_joint_sums: bool = False

    # ---- Numerics: pre mode's narrow rows ----
    # NOTE: pre mode normalizes the fp32 sum s = residual + dropout(x) and returns s in x's dtype, as flash-attn's fused
    # add + norm does (a forward more exact than PyTorch's norm(residual + x), which normalizes the rounded sum); the
    # backward recomputes x-hat from that rounded s with the forward's statistics, off by s's rounding times rstd. In
    # rows of 16 lanes and more that stays within PyTorch's own error (a fuzz of unlisted shapes, 2026-12-04: LayerNorm
    # fp16, 30 seeds a width, worst gradient error 1.54x PyTorch's at 16, 1.13x at 64); in narrower rows x-hat is a
    # difference of a few nearly equal values, and the gradients came back up to 11x PyTorch's error at width 3 and rstd
    # x rounding at width 1 (dx -134 where it is 0; -inf in fp16). Such rows in 16-bit dtypes take the reference (its
    # fp32 sum is what autograd differentiates). fp32 rounds nothing there.
    pre_min_lanes: int = 16

    def replace(self, **changes) -> NormTuning:
        """A copy with ``changes``: knobs by field or upper-case name (``replace(BWD_RELOAD=True)``); a ValueError
        names an unknown knob and the known ones nearest to it."""
        fields = {}
        for knob, value in changes.items():
            name = field_name(knob)
            if name in fields:
                raise ValueError(f"norm tuning knob {name.upper()} given twice")
            fields[name] = value
        return dataclasses.replace(self, **fields)


FIELDS = frozenset(field.name for field in dataclasses.fields(NormTuning))


def field_name(knob: str) -> str:
    """The field that ``knob`` names (``JOINT_SUMS`` or ``joint_sums``: ``joint_sums``); a ValueError for an unknown
    knob, naming the known ones nearest to it."""
    name = knob.lower()
    if name in FIELDS:
        return name
    near = difflib.get_close_matches(name, sorted(FIELDS), n=3)
    hint = f"; the nearest: {', '.join(match.upper() for match in near)}" if near else ""
    raise ValueError(f"unknown norm tuning knob {knob!r}{hint}")
