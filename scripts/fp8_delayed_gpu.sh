#!/usr/bin/env bash
# Recipe "delayed" (issue 18) on a GPU for the first time: its tests and the FP8 tests it touches, then te-4layer's
# FP8 training step, tensorwise against delayed, by kernels (the profiler) and in alternating wall rounds, with the
# targets' baselines (one GPU, ~7 minutes, at most ~9 by the steps' limits; carry .whl with torchao's wheel):
#
#   TRAINING=1 ROUNDS=2 bash scripts/fp8_delayed_gpu.sh PACK        (writes PACK/results.tar.gz)
#
# ROUNDS (default 2) rounds of the two recipes. TRAINING=1: last, the small LM's accuracy over 300 steps (the
# issue's 1% target) in bf16, tensorwise and delayed FP8 (benchmarks/fp8_training.py, ~1 minute).
set -u
PACK=${1:?usage: bash scripts/fp8_delayed_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 180 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_delayed.py tests/ops/test_fp8.py \
    tests/ops/test_fp8_act.py tests/models/test_fused_fp8.py tests/ops/test_norm.py -k "fp8 or cast or delayed"
for linear in fp8:tensorwise fp8:delayed; do
    step 30 "profile-${linear#fp8:}" python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 40 \
        --providers fused --linear "$linear" --json "$OUT/profile-${linear#fp8:}.json"
done
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
step 50 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
step 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise --providers compile:default \
    --out "$OUT/te-torchao"
for round in $(seq 1 "${ROUNDS:-2}"); do
    for linear in fp8:tensorwise fp8:delayed; do
        step 30 "te-${linear#fp8:}-$round" python3 -m blockfuse bench block "${TE[@]}" --linear "$linear" \
            --providers fused --out "$OUT/te-${linear#fp8:}-$round"
    done
done
if [ "${TRAINING:-0}" = 1 ]; then
    step 80 training python3 benchmarks/fp8_training.py --runs bf16 fp8-tensorwise fp8-delayed --quiet \
        --out "$OUT/training"
fi
pack "$PACK"
