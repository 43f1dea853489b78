#!/usr/bin/env bash
# Issue 18, the down projection's input cast made again from the pre-activation in one pass (ops/fp8_act.py,
# cast_again), against the code before it (_gpu/mid: the activation recomputed, then cast) and before both
# (_gpu/old: every cast kept): one GPU, one call (~7 minutes; carry .whl with torchao's wheel):
#   1. the FP8 tests on CUDA, and the reference-cycle tests (tensorwise FP8 among them);
#   2. te-4layer (4 layers, [8, 2048, 2048]) training step: bf16 compile and torchao tensorwise compiled (the
#      targets' baselines), blockfuse's fused FP8 tensorwise block new / mid / old, default and +recompute.
#
#   git archive <commit> src | tar x -C _gpu/old; git archive <commit> src | tar x -C _gpu/mid
#   bash scripts/issue18_cast_again_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue18_cast_again_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_act.py tests/ops/test_fp8.py \
    tests/nn/test_fp8.py tests/models/test_fused_fp8.py tests/models/test_reference_cycles.py
grep -v DEBUG "$OUT/tests.log" | grep -v "^\s*$" | tail -8 > "$OUT/tests-summary.log"
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
step 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
step 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise --providers compile:default \
    --out "$OUT/te-torchao"
run() {  # run NAME TREE LINEAR: one fused FP8 run of the code in TREE (empty: this checkout's)
    local name=$1 tree=$2 linear=$3 env=()
    [ -n "$tree" ] && env=(env PYTHONPATH="$PWD/$tree/src:$PYTHONPATH")
    [ -z "$tree" ] || [ -d "$tree/src" ] || return 0
    step 45 "$name" "${env[@]}" python3 -m blockfuse bench block "${TE[@]}" --linear "$linear" --providers fused \
        --out "$OUT/$name"
}
# (the new default first and last: a first run may take its samples while its kernels compile)
run te-new "" fp8:tensorwise
run te-mid _gpu/mid fp8:tensorwise
run te-old _gpu/old fp8:tensorwise
run te-new-recompute "" fp8:tensorwise+recompute
run te-mid-recompute _gpu/mid fp8:tensorwise+recompute
run te-old-recompute _gpu/old fp8:tensorwise+recompute
run te-new-2 "" fp8:tensorwise
run te-old-2 _gpu/old fp8:tensorwise
pack "$PACK"
