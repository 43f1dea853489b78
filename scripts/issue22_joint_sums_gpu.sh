#!/usr/bin/env bash
# (issue 22) The norms' rows in pieces with their sums reduced across the program once, against the sums reduced piece
# by piece (norm.JOINT_SUMS: the backward's two row sums; norm.FWD_JOINT_SUMS: the forward's statistics; the NOTE
# above JOINT_SUMS), one GPU, one call (~8 minutes; carry .whl for Liger-Kernel):
#   1. (tests) tests/ops/test_norm.py's and test_layer_norm_gelu.py's tests of rows in pieces on CUDA;
#   2. (bwd) the backward launcher (benchmarks/norm_tiles.py --bwd-setting) at BWD_SHAPES x BWD_FORMS, `joint`
#      (JOINT_SUMS=True) against `pieces` (JOINT_SUMS=False; the default until this A/B has run);
#   3. (fwd) the forward launcher alike (--fwd-setting: FWD_JOINT_SUMS=False for `pieces`) at FWD_SHAPES x FWD_FORMS;
#      each with the settings alternating in two rounds of one process (CUDA-graph replays, the L2 flushed), after
#      the kernels were built in parallel processes;
#   4. (sweep) the op sweep at SWEEP_WIDTHS x SWEEP_ROWS (SWEEP_OPS; forward and forward + backward as users call
#      them, with the peers; its compiles first in 8 processes);
#   5. (fp8) the norms' forward into FP8 (benchmarks/norm_fp8.py) at FP8_WIDTHS: the default (its sums piece by
#      piece since fp8/36-joint-sums-2026-12-07-h200/; the NOTE above FP8_FWD_JOINT_SUMS) and `joint`
#      (FP8_FWD_JOINT_SUMS=True) in two alternating rounds; then tests/ops/test_norm_fp8.py. (That run, before the
#      change, timed the joint default against `pieces:FWD_JOINT_SUMS=False`.)
#
#   [PHASES="tests bwd fwd sweep fp8": run in that order] [FP8_WIDTHS=...] [BWD_SHAPES=16384x4304,...] [BWD_FORMS=ln,...] \
#       [FWD_SHAPES=...] [FWD_FORMS=...] [SWEEP_WIDTHS=1152,...] [SWEEP_ROWS=2048] [SWEEP_OPS=...] \
#       bash scripts/issue22_joint_sums_gpu.sh PACK
#                                                                               (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_joint_sums_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
for phase in ${PHASES:-tests bwd fwd}; do  # (in the order given)
    case $phase in
    tests) packed "${TESTS_S:-150}" tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_norm.py \
        tests/ops/test_layer_norm_gelu.py -k "joint or pieces or statistics or wide_tails or hold" ;;
    bwd) norm_tiles_ab bwd "${BWD_SHAPES:-16384x2304,16384x4304,16384x11008,16384x14336,2048x14336,2048x4304}" \
        "${BWD_FORMS:-ln,rms,ln-pre,ln-gelu}" --bwd-setting "joint:JOINT_SUMS=True" \
        --bwd-setting "pieces:JOINT_SUMS=False" ;;
    fwd) norm_tiles_ab fwd "${FWD_SHAPES:-2048x1152,2048x2304,2048x4304,16384x1152,16384x2560,16384x4304,16384x11008}" \
        "${FWD_FORMS:-ln,rms,ln-post,ln-gelu}" --fwd-setting "joint:JOINT_SUMS=True" \
        --fwd-setting "pieces:JOINT_SUMS=True,FWD_JOINT_SUMS=False" ;;
    sweep)
        # shellcheck disable=SC2086
        packed $((${BUDGET:-150} + 150)) sweep python3 -m blockfuse bench ops --sweep \
            --op ${SWEEP_OPS:-layer_norm rms_norm layer_norm_gelu add_layer_norm} \
            --widths "${SWEEP_WIDTHS:-1152,2304,4304,11008,14336}" --rows "${SWEEP_ROWS:-2048}" \
            --budget "${BUDGET:-150}" --warm-jobs 8 --out "$OUT/sweep" ;;
    fp8)
        packed 240 fp8 python3 benchmarks/norm_fp8.py --widths "${FP8_WIDTHS:-2304,2560,4304,11008}" \
            --setting "joint:FP8_FWD_JOINT_SUMS=True" --rounds 2 --out "$OUT/fp8"
        packed 150 fp8-tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_norm_fp8.py ;;
    *) echo "unknown phase $phase" ;;
    esac
done
pack "$PACK"
