#!/usr/bin/env bash
# Issue 18, the FP8 blocks on one GPU, in one call (under 10 minutes):
#
#   bash scripts/fp8_blocks_gpu.sh OUT              (RECIPES=tensorwise: one recipe, when time is short)
#
# olmo2-1b, one block at the preset's shape: the bf16 training step (compile in two modes) against FP8
# Linear layers, tensorwise and rowwise (compile, fused, fused + compile): the target is an FP8 training step
# >= 1.25x the best bf16 compile mode. (te-4layer with FP8 layers against torchao and bf16 compile:
# scripts/fp8_norms_gpu.sh.)
# Each step has its own timeout and log under OUT; everything is packed into OUT/fp8-blocks.tar.gz.
set -u
OUT=${1:?usage: bash scripts/fp8_blocks_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
# the FP8 target is against the best bf16 compile mode: default and max-autotune without CUDA graphs (the FP8 block
# runs without them too). max-autotune tunes each GEMM shape for about 7 s (over 160 s for infer + fwdbwd on an
# H200): the training step alone here, the target's mode.
step 360 olmo-bf16 python3 -m blockfuse bench block olmo2-1b \
    --providers compile:default,compile:max-autotune-no-cudagraphs --modes fwdbwd \
    --quick --out "$OUT/olmo2-1b-bf16"
for recipe in ${RECIPES:-tensorwise rowwise}; do
    step 100 "olmo-fp8-$recipe" python3 -m blockfuse bench block olmo2-1b --linear "fp8:$recipe" \
        --providers compile:default,fused,fused+compile:default --modes infer,fwdbwd --quick \
        --out "$OUT/olmo2-1b-fp8-$recipe"
done
tar czf "$OUT/fp8-blocks.tar.gz" -C "$OUT" --exclude fp8-blocks.tar.gz . 2> /dev/null
