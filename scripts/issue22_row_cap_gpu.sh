#!/usr/bin/env bash
# (issue 22) Two launch settings of the LayerNorm forms past 8192 lanes, each against the rule, one GPU, one call (~6
# minutes; carry .whl for Liger-Kernel):
#   1. the forward's one-row programs on fewer than 16 warps (two pieces, 8193-12288 lanes: 4 warps at 8960 / 9216, 8
#      at 10240-12288) with a register cap that lets WPS warps of such programs share a multiprocessor
#      (norm.FWD_ROW_WARPS_PER_SM; as Triton 3.6 builds them for sm_90, LayerNorm at 11008 / 12288 takes 100 registers
#      a thread, two programs of 8 warps a multiprocessor; capped at 80, three, no spill): the forward launcher alone
#      (benchmarks/norm_tiles.py --fwd-setting) at SHAPES;
#   2. the backward at 13313-14336 lanes in three pieces (8192 + 4096 + 2048, the row held in bf16 across its sums)
#      where the rule keeps the padded 16384-lane tile read twice because three stages of z and dy count 168 KiB
#      against BWD_SMEM_BYTES' 160 (the pipeliner's buffers as built for sm_90: 112 KiB): the backward launcher
#      (--bwd-setting, BWD_SMEM_BYTES raised to 172 KiB) at BWD_SHAPES;
#   each with the settings alternating in two rounds of one process (CUDA-graph replays, the L2 flushed), after the
#   kernels were built in parallel processes;
#   3. (SWEEP_WIDTHS=w,w) the op sweep at those widths x SWEEP_ROWS (16384) rows (SWEEP_OPS, default the four norms;
#      forward and forward + backward as users call them, with the peers; its compiles first in 8 processes);
#   4. (TESTS="-k EXPR") tests/ops/test_norm.py's tests of EXPR on CUDA.
#   PHASES (default "fwd bwd"): which of 1, 2, "act" (the GELU form's backward in three pieces), "act32" (its pieces
#   on 32 warps) and "pre" (the pre-residual forms' backward in three pieces) run: below.
#
#   [PHASES="fwd bwd act act32 pre"] [SHAPES=16384x11008,...] [FORMS=ln,...] [WPS="20 24 32"] [BWD_SHAPES=...] \
#       [BWD_FORMS=...] [ACT_SHAPES=...] [PRE_SHAPES=...] [SWEEP_WIDTHS=...] [TESTS=...] \
#       bash scripts/issue22_row_cap_gpu.sh PACK
#                                                                               (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_row_cap_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
FWD=(--fwd-setting "rule:")
for wps in ${WPS:-20 24 32}; do
    FWD+=(--fwd-setting "w$wps:FWD_ROW_WARPS_PER_SM=$wps")
done
PHASES=" ${PHASES:-fwd bwd} "
[[ $PHASES == *" fwd "* ]] && norm_tiles_ab fwd \
    "${SHAPES:-16384x8960,16384x9216,16384x10240,16384x11008,16384x12288,4096x11008,32768x11008,16384x11007}" \
    "${FORMS:-ln,ln-post,ln-pre,ln-gelu}" "${FWD[@]}"
[[ $PHASES == *" bwd "* ]] && norm_tiles_ab bwd \
    "${BWD_SHAPES:-16384x13312,16384x13824,16384x14336,4096x14336,32768x14336}" \
    "${BWD_FORMS:-ln,ln-post,rms}" --bwd-setting "rule:" --bwd-setting "smem172:BWD_SMEM_BYTES=176128"
# (PHASES="act": the GELU form's backward in three pieces, ACT_BWD_THREE_PIECES, at 13313-14336 lanes where its rule
# has the padded tile (184 bytes of spill a thread in the sm_90 build, 128 in three pieces): `three` unpipelined there
# (its own stage check counts 168 KiB against BWD_SMEM_BYTES), `three-172` with that budget at 172 KiB (three stages);
# and at 11008 (8192 + 2048 + 1024 lanes instead of 8192 + 4096: 32 bytes of spill, not 64), `three-11008`)
THREE=ACT_BWD_THREE_PIECES=True
[[ $PHASES == *" act "* ]] && norm_tiles_ab act \
    "${ACT_SHAPES:-16384x11008,16384x13312,16384x14336,2048x14336,32768x14336}" \
    ln-gelu --bwd-setting "rule:" --bwd-setting "three:$THREE" --bwd-setting "three-172:$THREE,BWD_SMEM_BYTES=176128" \
    --bwd-setting "three-11008:$THREE,BWD_SMEM_BYTES=176128,BWD_WIDE_PIECES_MAX_LANES=8192"
# (PHASES="act32": the GELU form's backward pieces past 8192 lanes on 32 warps at 64 registers, not 16 at 128: one
# program of 16 warps a multiprocessor leaves its math's latency unhidden (benchmarks/NOTES.md, "What the H100 leaves");
# the sm_90 builds spill 184-248 bytes a thread there, against 32-128 on 16 warps, with 13 barriers, not 18-22; run on
# an H100 in launch-rules/40-pre-act32-2026-12-06-h100/: 2.2-2.6x slower than the rule in every cell, not taken)
[[ $PHASES == *" act32 "* ]] && norm_tiles_ab act32 \
    "${ACT_SHAPES:-16384x11008,16384x13312,16384x14336,2048x14336,32768x14336}" \
    ln-gelu --bwd-setting "rule:" --bwd-setting "w32:BWD_WIDE_PIECE_WARPS=32"
# (PHASES="pre": the pre-residual forms' backward in three pieces at 12289-14336 lanes, BWD_THREE_PIECES_PRE (the
# rule since launch-rules/39-*, which ran this phase with the knob off: then `rule` was the padded tile), against the
# padded 16384-lane tile it replaced (`padded`: unpipelined, 168 bytes of spill a thread in LayerNorm's sm_90 build;
# three pieces 56-72, two stages of z, dy and ds) and the pieces unpipelined (`three-1`))
[[ $PHASES == *" pre "* ]] && norm_tiles_ab pre \
    "${PRE_SHAPES:-16384x12800,16384x13312,16384x14336,2048x14336,32768x14336}" \
    ln-pre,rms-pre --bwd-setting "rule:" --bwd-setting "padded:BWD_THREE_PIECES_PRE=False" \
    --bwd-setting "three-1:BWD_STAGES=1"
if [ -n "${SWEEP_WIDTHS:-}" ]; then
    # shellcheck disable=SC2086
    packed $((${BUDGET:-150} + 90)) sweep python3 -m blockfuse bench ops --sweep \
        --op ${SWEEP_OPS:-layer_norm rms_norm add_layer_norm layer_norm_post} --widths "$SWEEP_WIDTHS" \
        --rows "${SWEEP_ROWS:-16384}" --budget "${BUDGET:-150}" --warm-jobs 8 --out "$OUT/sweep"
fi
if [ -n "${TESTS:-}" ]; then
    packed "${TESTS_S:-150}" tests python3 -m pytest -q -rfE -p no:cacheprovider -n 4 tests/ops/test_norm.py \
        -k "${TESTS#-k }"
fi
pack "$PACK"
