#!/usr/bin/env bash
# Issue 18, the FP8 linear's bias gradient from the cast's amax pass (ops/fp8.py), one GPU in one call (~7 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before, for the A/B (untracked: it travels)
#   bash scripts/fp8_bias_gpu.sh OUT        (writes OUT/results.tar.gz)
#
# 1. the FP8 tests on CUDA; 2. te-4layer (4 layers, [8, 2048, 2048]) training step: bf16 compile (the target's
# baseline), torchao tensorwise compiled, blockfuse's fused FP8 block (both recipes), new and old code alternated;
# 3. the Linear stack (benchmarks/fp8_linear.py), new and old; 4. where the fused FP8 step's GPU time goes, new and old.
set -u
PACK=${1:?usage: bash scripts/fp8_bias_gpu.sh OUT}
# everything is written to a work folder and packed into OUT/results.tar.gz: the device tool returns a few files
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
OLD=()
[ -d _gpu/old/src ] && OLD=(env PYTHONPATH="$PWD/_gpu/old/src:$PYTHONPATH")
step 100 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8.py tests/nn/test_fp8.py
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
step 100 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
step 100 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise --providers compile:default \
    --out "$OUT/te-torchao"
for round in 1 2; do
    for recipe in tensorwise rowwise; do
        step 60 "te-$recipe-new$round" python3 -m blockfuse bench block "${TE[@]}" --linear "fp8:$recipe" \
            --providers fused --out "$OUT/te-$recipe-new$round"
        if [ ${#OLD[@]} -gt 0 ]; then
            step 60 "te-$recipe-old$round" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" --linear "fp8:$recipe" \
                --providers fused --out "$OUT/te-$recipe-old$round"
        fi
    done
done
STACK=(benchmarks/fp8_linear.py --quick --providers bf16_compile blockfuse_fp8_tensorwise_eager blockfuse_fp8_rowwise_eager)
step 100 stack-new python3 "${STACK[@]}" --out "$OUT/stack-new"
[ ${#OLD[@]} -gt 0 ] && step 100 stack-old "${OLD[@]}" python3 "${STACK[@]}" --out "$OUT/stack-old"
for recipe in tensorwise rowwise; do
    PROFILE=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 30 --providers fused --linear "fp8:$recipe")
    step 60 "profile-$recipe-new" python3 "${PROFILE[@]}" --json "$OUT/profile-$recipe-new.json"
    [ ${#OLD[@]} -gt 0 ] && step 60 "profile-$recipe-old" "${OLD[@]}" python3 "${PROFILE[@]}" --json "$OUT/profile-$recipe-old.json"
done
mkdir -p "$PACK" && tar czf "$PACK/results.tar.gz" -C "$OUT" .
