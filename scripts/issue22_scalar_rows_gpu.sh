#!/usr/bin/env bash
# (issue 22) 16-bit rows of one-element accesses (odd widths: the NOTE above norm.BWD_SCALAR_WARPS) on one GPU, one
# call (~4 minutes; carry .whl for Liger-Kernel):
#   1. the backward launcher alone (benchmarks/norm_tiles.py, its correctness check on), alternating in two rounds of
#      one process at odd widths 1001-12345: `before` (no scalar rows' rule), `rule` (the first rule: the pieces'
#      warps doubled, BWD_SCALAR_WARPS), `tile` (also the padded tile's warps at every width, BWD_SCALAR_TILE_WARPS,
#      and the pre-residual form's chunks past 8192 lanes, BWD_SCALAR_MAX_LANES_PRE: the candidates timed in
#      35-odd-widths-*/3-scalar/, where `rule` was the code's default and `tile` its two knobs) and `landed` (the
#      rule since: the padded tile's warps from 8192 lanes only);
#   2. the op sweep (forward and forward + backward as users call them, with the peers) at the odd widths;
#   3. (PHASE=wide, instead of 1-2) odd rows past 8192 lanes, which the rule's wide pieces hold in registers (12345:
#      0.02-0.34 of copy in 1-2): the rule against chunks (2048 lanes x 4 rows at 9999 / 12345, 4096 x 1 at 15001)
#      with the weight gradients from their own kernel (`chunks-wk`; WITH_CHUNKS=1: also without it, `chunks`), and
#      the knob norm.BWD_SCALAR_ROW_CHUNKS_FROM_LANES (`row-chunks`: one row of 2048 lanes a chunk with that kernel,
#      the only setting whose sm_90 builds spill nothing there), at 8447 / 9999 / 12345 / 15001: the kernels built
#      first in parallel processes (WARM_S), then timed in one (WIDE_S; ~4 minutes in all). The settings name the
#      code since (rows from 8193 lanes in one-row chunks: `rule` is the rule before it). LANDED=1: those chunks' 2048
#      lanes against 4096 (landed since); LANDED=2: the rule then against one whole row on 32 warps (landed since
#      for RMSNorm), and the LayerNorm forms' forward in chunks past 8192 lanes against its rule; LANDED=3: the
#      RMSNorm rule as it is against one-row chunks; SWEEP_WIDTHS=w,w: then the op sweep at those widths (of the
#      ops in SWEEP_OPS: the four norms'; WARM_JOBS=N: its compiles first in N processes, so that its budget
#      measures rather than compiles; TESTS="-k EXPR": tests/ops/test_norm.py's on CUDA before it). LANDED=5: the
#      residual forms' forward in one-row chunks of 1024-4096 lanes on 4-16 warps against the rule (the pre-residual
#      LayerNorm's landed since, FWD_SCALAR_PRE_CHUNK_LANES); LANDED=6: that rule against the padded tile; LANDED=7:
#      the backward's rule against one whole row on 32 warps in every form, with its weight / bias gradients in the
#      kernel or from the weight kernel (norm.BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL, off; sm_90 builds: the stack's
#      248-328 bytes a thread -> 0-8, 872-1272 instructions -> 584-752), and LayerNorm + GELU in those tiles
#      (norm.BWD_SCALAR_ROW_CHUNKS_ACT, off; its rule's padded tile spills 1608 bytes at 12289-16384); and RMSNorm's
#      forward chunks on 8 warps (0.93x torch.compile's forward at 8447 / 15001 in 9-rms-op/).
#      LANDED=8: 7's winners as landed (the LayerNorm forms' whole rows with the weight kernel; the GELU form's whole
#      rows where its pieces' tail is wider than 256 lanes) against the rule before them, the pre-residual RMSNorm in
#      the whole row (knobs BWD_SCALAR_WHOLE_ROW_RMS_PRE, ..._WEIGHT_KERNEL_RMS), and the GELU form's pieces kept to
#      1024-lane tails (ACT_BWD_SCALAR_PIECES_MAX_TAIL=1024), at 8447-15001 (8800 / 9216 were meant as 1024-lane
#      tails but are even: vector rows, untouched). LANDED=9: that limit at odd widths (8703 / 9215: tails of 511 /
#      1023 lanes; 0 and 1024 against the rule's 256), and RMSNorm's forward chunks (2048 lanes on 16 or 8 warps, 1024
#      on 4 or 8) against its rule at 8447-16383 (its 2048 lanes on 8 warps ran 1.03x / 1.13x at 12345 / 15001 and
#      0.94x / 0.96x at 8447 / 9999 in 13-*: whether the width or the warps won is the question); and the
#      post-residual / plain LayerNorm forward's padded 16384-lane tile at 12289-16384 without its persistent
#      pipeline (FWD_PERSIST_STAGES=0; measured on vector rows only: the post form's forward is 0.83-0.85x torch.compile
#      at 12345 / 15001 in 14-*). FWD_ONLY=1 with LANDED=9: its forward settings alone, on rms, rms-pre, ln-post and
#      ln at 8447 / 12345 / 15001 / 16383 (~3 minutes).
#      (LANDED=4, RMSNorm's forward in one whole row against its chunks, ran at b89ee81 for
#      35-odd-widths-*/10-rms-forward-whole/, lost, and went with its knob: `git show b89ee81:scripts/...`.)
#
#   bash scripts/issue22_scalar_rows_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_scalar_rows_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${PHASE:-}" = wide ]; then
    CHUNKS=BWD_MAX_LANES=8192,BWD_MAX_LANES_PRE=8192,BWD_WIDE_PIECES_MAX_LANES=8192,BWD_THREE_PIECES_MAX_LANES=0
    LANES_2048=BWD_SCALAR_CHUNK_LANES=2048
    SETTINGS=(--bwd-setting "rule:BWD_SCALAR_ROW_CHUNKS_FROM_LANES=0"
              --bwd-setting "chunks-wk:$CHUNKS,BWD_SCALAR_ROW_CHUNKS_FROM_LANES=0,BWD_WEIGHT_KERNEL_FROM_LANES=8193"
              --bwd-setting "row-chunks:BWD_SCALAR_RMS_KEEPS_PIECES=False,BWD_SCALAR_WHOLE_ROW_WARPS=0,$LANES_2048")
    [ -n "${WITH_CHUNKS:-}" ] && SETTINGS+=(--bwd-setting "chunks:$CHUNKS,BWD_SCALAR_ROW_CHUNKS_FROM_LANES=0")
    if [ "${LANDED:-}" = 1 ]; then  # (the rule landed from 5-wide/, against one-row chunks of 4096 lanes)
        SETTINGS=(--bwd-setting "landed:BWD_SCALAR_CHUNK_LANES=2048,BWD_SCALAR_WHOLE_ROW_WARPS=0"
                  --bwd-setting "lanes-4096:BWD_SCALAR_CHUNK_LANES=4096,BWD_SCALAR_WHOLE_ROW_WARPS=0")
    elif [ "${LANDED:-}" = 2 ]; then  # (the rule landed from 6-landed/ against a whole row on 32 warps; the forward
        # of the LayerNorm forms in one-row chunks past 8192 lanes, on 16 or 8 warps, against its rule)
        SETTINGS=(--bwd-setting "landed:BWD_SCALAR_WHOLE_ROW_WARPS=0"
                  --bwd-setting "whole32:BWD_SCALAR_WHOLE_ROW_WARPS=32,BWD_SCALAR_WHOLE_ROW_RMS_ONLY=False"
                  --fwd-setting "fwd-rule:" --fwd-setting "fwd-chunks:FWD_MAX_LANES=8192"
                  --fwd-setting "fwd-chunks8:FWD_MAX_LANES=8192,FWD_CHUNK_WARPS=8")
    elif [ "${LANDED:-}" = 3 ]; then
        SETTINGS=(--bwd-setting "landed:" --bwd-setting "chunks:BWD_SCALAR_WHOLE_ROW_WARPS=0")
    elif [ "${LANDED:-}" = 5 ]; then  # (the residual forms' forward in chunks of 8 lanes a thread, or 16)
        C=FWD_MAX_LANES=8192
        SETTINGS=(--fwd-setting "fwd-rule:" --fwd-setting "c1024w4:$C,FWD_CHUNK_LANES=1024,FWD_CHUNK_WARPS=4"
                  --fwd-setting "c2048w8:$C,FWD_CHUNK_LANES=2048,FWD_CHUNK_WARPS=8"
                  --fwd-setting "c4096w16:$C,FWD_CHUNK_LANES=4096,FWD_CHUNK_WARPS=16"
                  --fwd-setting "c2048w4:$C,FWD_CHUNK_LANES=2048,FWD_CHUNK_WARPS=4")
        FORMS=${FORMS:-ln-pre,rms-pre,ln-post}
    elif [ "${LANDED:-}" = 6 ]; then  # (those chunks as landed, FWD_SCALAR_PRE_CHUNK_LANES, against the padded tile)
        SETTINGS=(--fwd-setting "fwd-landed:" --fwd-setting "fwd-padded:FWD_SCALAR_PRE_CHUNK_LANES=0")
        FORMS=${FORMS:-ln-pre}
    elif [ "${LANDED:-}" = 7 ]; then  # (whole rows on 32 warps writing dx only, the weight kernel for the rest; the
        # GELU form in the plain forms' tiles)
        WHOLE=BWD_SCALAR_WHOLE_ROW_RMS_ONLY=False,BWD_SCALAR_ROW_CHUNKS_ACT=True
        SETTINGS=(--bwd-setting "landed:" --bwd-setting "whole32:$WHOLE"
                  --bwd-setting "whole32-wk:$WHOLE,BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL=True"
                  --bwd-setting "act-chunks:BWD_SCALAR_ROW_CHUNKS_ACT=True"
                  --fwd-setting "fwd-rule:" --fwd-setting "fwd-c2048w8:FWD_CHUNK_LANES=2048,FWD_CHUNK_WARPS=8"
                  --fwd-setting "fwd-c4096w8:FWD_CHUNK_LANES=4096,FWD_CHUNK_WARPS=8")
        FORMS=${FORMS:-ln,rms,ln-pre,ln-post,ln-gelu}
    elif [ "${LANDED:-}" = 8 ]; then  # (7's winners as landed against the rule before them; the pre-residual
        # RMSNorm in the whole row, its gradients in the kernel or not; the GELU form's pieces kept to 1024-lane tails)
        # (as it ran at d0e656f; since, the pre-residual RMSNorm's whole row takes BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL,
        # so that both rms-pre settings time what `landed` does)
        WK_RMS=BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS=True
        SETTINGS=(--bwd-setting "landed:"
                  --bwd-setting "before:BWD_SCALAR_WHOLE_ROW_RMS_ONLY=True,BWD_SCALAR_ROW_CHUNKS_ACT=False"
                  --bwd-setting "rms-pre-whole:BWD_SCALAR_WHOLE_ROW_RMS_PRE=True"
                  --bwd-setting "rms-pre-whole-wk:BWD_SCALAR_WHOLE_ROW_RMS_PRE=True,$WK_RMS"
                  --bwd-setting "act-tail1024:ACT_BWD_SCALAR_PIECES_MAX_TAIL=1024")
        FORMS=${FORMS:-ln,ln-pre,ln-post,ln-gelu,rms-pre}
        SHAPES=${SHAPES:-16384x8447,16384x8800,16384x9216,16384x9999,16384x12345,16384x15001}
    elif [ "${LANDED:-}" = 9 ]; then  # (the GELU form's tail limit at odd widths; RMSNorm's forward chunks' warps
        # and width past 12288 lanes, where 2048 lanes on 8 warps ran 1.03x / 1.13x its rule in 13-whole-row-wk/)
        SETTINGS=(--fwd-setting "fwd-rule:" --fwd-setting "fwd-c2048w16:FWD_CHUNK_LANES=2048"
                  --fwd-setting "fwd-c2048w8:FWD_CHUNK_LANES=2048,FWD_CHUNK_WARPS=8"
                  --fwd-setting "fwd-c1024w4:FWD_CHUNK_LANES=1024,FWD_CHUNK_WARPS=4"
                  --fwd-setting "fwd-c1024w8:FWD_CHUNK_LANES=1024,FWD_CHUNK_WARPS=8"
                  --fwd-setting "fwd-nopersist:FWD_PERSIST_STAGES=0")
        [ -n "${FWD_ONLY:-}" ] || SETTINGS+=(--bwd-setting "landed:"
            --bwd-setting "act-tail0:ACT_BWD_SCALAR_PIECES_MAX_TAIL=0"
            --bwd-setting "act-tail1024:ACT_BWD_SCALAR_PIECES_MAX_TAIL=1024")
        if [ -n "${FWD_ONLY:-}" ]; then  # (FWD_ONLY=1: the forward settings alone, on the forms they change)
            FORMS=${FORMS:-rms,rms-pre,ln-post,ln}
            SHAPES=${SHAPES:-16384x8447,16384x12345,16384x15001,16384x16383}
        fi
        FORMS=${FORMS:-rms,rms-pre,ln-gelu,ln-post,ln}
        SHAPES=${SHAPES:-16384x8447,16384x8703,16384x9215,16384x9999,16384x12345,16384x13001,16384x15001,16384x16383}
    fi
    SHAPES=${SHAPES:-16384x8447,16384x9999,16384x12345,16384x15001}
    FORMS=${FORMS:-ln,rms,ln-pre,ln-post}
    # The kernels compile first, one process a shape and form side by side (their times are not used; Triton's
    # cache keeps the builds), with the float64 check in one more; then one process times them all.
    WARM_S=${WARM_S:-240} warm_norm_tiles "$OUT/warm" "$SHAPES" "$FORMS" "${SETTINGS[@]}"
    timeout -s INT -k 10 "${WARM_S:-240}" python3 benchmarks/norm_tiles.py --shapes 64x1001 --forms ln --fwd "" \
        --bwd "" --out "$OUT/warm/check" > "$OUT/warm/check.log" 2>&1 &
    wait
    grep -h "correctness failures\|^   " "$OUT/warm/check.log"
    packed "${WIDE_S:-240}" wide python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "$FORMS" --fwd "" \
        --bwd "" "${SETTINGS[@]}" --setting-rounds 2 --no-check --out "$OUT/wide"
    if [ -n "${TESTS:-}" ]; then  # (CUDA tests: TESTS="-k EXPR" of TEST_FILES, default tests/ops/test_norm.py)
        # shellcheck disable=SC2086
        packed "${TESTS_S:-120}" tests python3 -m pytest -q -rfE -p no:cacheprovider -n 4 \
            ${TEST_FILES:-tests/ops/test_norm.py} -k "${TESTS#-k }"
    fi
    if [ -n "${SWEEP_WIDTHS:-}" ]; then  # (the op sweep at those widths, as in 1-2)
        # shellcheck disable=SC2086
        packed $((${BUDGET:-150} + 90)) sweep python3 -m blockfuse bench ops --sweep \
            --op ${SWEEP_OPS:-layer_norm rms_norm add_layer_norm layer_norm_post} --widths "$SWEEP_WIDTHS" \
            --rows 16384 --budget "${BUDGET:-150}" ${WARM_JOBS:+--warm-jobs "$WARM_JOBS"} --out "$OUT/sweep"
    fi
    exit 0
fi
SHAPES=${SHAPES:-16384x1001,16384x2049,16384x3001,16384x4567,16384x7777,16384x12345}
packed 150 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "${FORMS:-ln,rms,ln-pre,ln-post}" \
    --fwd "" --bwd "" --bwd-setting "before:BWD_SCALAR_WARPS=1,BWD_SCALAR_TILE_WARPS=1,BWD_SCALAR_MAX_LANES_PRE=0" \
    --bwd-setting "rule:BWD_SCALAR_TILE_WARPS=1,BWD_SCALAR_MAX_LANES_PRE=0" \
    --bwd-setting "tile:BWD_SCALAR_TILE_WARPS_FROM_LANES=0" --bwd-setting "landed:" \
    --setting-rounds 2 --out "$OUT/settings"
packed 170 sweep python3 -m blockfuse bench ops --sweep --op layer_norm rms_norm add_layer_norm layer_norm_post \
    --widths "${SWEEP_WIDTHS:-4567,7777,12345}" --rows 16384 --budget "${BUDGET:-120}" --out "$OUT/sweep"
