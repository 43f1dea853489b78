#!/usr/bin/env bash
# Issue 18 (FP8) on one GPU, in one call (about 8 minutes on an H200):
#
#   bash scripts/fp8_gpu.sh OUT
#
# 1. benchmarks/fp8_training.py: the small LM trained 300 steps in fp32, bf16 and FP8 (tensorwise, rowwise);
# 2. benchmarks/fp8_linear.py --profile: the Linear stack's training step, bf16 compile / blockfuse FP8 eager /
#    torchao FP8 compiled (torchao when its wheel is carried in .whl/), each step's GPU time by kernel class;
# 3. benchmarks/norm_fp8.py: the norms' FP8 forward at [16384, 4096] with other tiles (rows a program x warps);
# 4. te-4layer (batch 8, seq 2048, d 2048, 4 layers) with FP8 Linear layers and with bf16 ones, every provider of
#    the source documents' experiment: eager, compile, surgical compile, fused, fused + compile.
# Each step has its own timeout and log under OUT; everything is packed into OUT/fp8.tar.gz.
set -u
OUT=${1:?usage: bash scripts/fp8_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 110 training python3 benchmarks/fp8_training.py --out "$OUT/training" --quiet
step 120 linear python3 benchmarks/fp8_linear.py --quick --profile --out "$OUT/linear" --providers bf16_compile \
    blockfuse_fp8_tensorwise_eager blockfuse_fp8_rowwise_eager torchao_tensorwise_compile
step 45 norm-tiles python3 benchmarks/norm_fp8.py --rows 16384 --widths 4096 --forms rms,ln,ln-post \
    --tiles 1x8,2x4,2x8,4x8,1x16 --out "$OUT/norm-tiles"
PROVIDERS=eager,compile:default,surgical:default,fused,fused+compile:default
for linear in fp8 bf16; do
    step 110 "te-4layer-$linear" python3 -m blockfuse bench block te-4layer --layers 4 --shape 8x2048x2048 \
        --providers "$PROVIDERS" --modes infer,fwdbwd --linear "$linear" --quick --out "$OUT/te-4layer"
done
tar czf "$OUT/fp8.tar.gz" -C "$OUT" --exclude fp8.tar.gz . 2> /dev/null
