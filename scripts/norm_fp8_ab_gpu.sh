#!/usr/bin/env bash
# Norm + FP8 quantize (issue 18's last target: >= 0.9 of copy at [16384, 4096]) after a change to the norms' FP8
# forward, against the code before it, in alternating rounds of one call (one GPU, about 5 minutes):
#
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   ROUNDS=2 bash scripts/norm_fp8_ab_gpu.sh PACK                        (writes PACK/results.tar.gz)
#
# 1. the norms' FP8 tests and the FP8 blocks' on CUDA;
# 2. benchmarks/norm_fp8.py at 16384 rows, real models' widths, every norm form: new, then old, ROUNDS times.
# WIDTHS and FORMS (comma-separated) replace the defaults below; NEW_ARGS are more arguments of the new code's runs
# (e.g. "--ablate --lanes-per-warp 2048,4096": variants timed beside its figures).
set -u
PACK=${1:?usage: bash scripts/norm_fp8_ab_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 170 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm_fp8.py tests/models/test_fused_fp8.py \
    tests/ops/test_fp8_delayed.py tests/ops/test_gated_fp8.py tests/ops/test_fp8_act.py
NORM_FP8=(--rows 16384 --widths ${WIDTHS:-1152,2048,4096,4304,8192} --forms ${FORMS:-rms,ln,rms-pre,ln-post,ln-gelu})
for round in $(seq 1 "${ROUNDS:-2}"); do
    # shellcheck disable=SC2086
    step 150 "new-$round" python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" ${NEW_ARGS:-} --out "$OUT/new-$round"
    [ ${#OLD[@]} -gt 0 ] && step 75 "old-$round" "${OLD[@]}" python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" \
        --out "$OUT/old-$round"
done
pack "$PACK"
