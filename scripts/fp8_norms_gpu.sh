#!/usr/bin/env bash
# Issues 18 and 22 after the norms' changes, one GPU in one call (under 10 minutes):
#
#   git archive HEAD~N src | tar x -C _gpu/old    # the code before, for the A/B (untracked: it travels)
#   bash scripts/fp8_norms_gpu.sh OUT
#
# 1. the changed kernels' tests on CUDA (norms, their FP8 outputs, the FP8 blocks on the GPU);
# 2. norm + FP8 quantize (benchmarks/norm_fp8.py) with the weight and bias loaded in the tile's layout, against the
#    code in _gpu/old, same shapes, one after the other;
# 3. the norms' backward with the pipeline depth from bytes in flight (the rule) against the fixed 3 stages
#    (benchmarks/norm_tiles.py, grid point 4096;512;2;3 = the old rule), at padded and listed widths;
# 4. te-4layer with torchao's FP8 layers compiled (the issue's baseline), blockfuse's FP8 fused block
#    (tensorwise, rowwise), bf16 compile: inference and training.
set -u
OUT=${1:?usage: bash scripts/fp8_norms_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 170 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py tests/ops/test_norm_fp8.py \
    tests/models/test_fused_fp8.py
NORM_FP8=(--rows 16384 --widths 1152,4096,4304 --forms rms,ln,ln-post)
step 60 norm-fp8-new python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" --out "$OUT/norm-fp8-new"
if [ -d _gpu/old/src ]; then
    step 60 norm-fp8-old env PYTHONPATH="$PWD/_gpu/old/src:$PYTHONPATH" python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" \
        --out "$OUT/norm-fp8-old"
fi
step 120 tiles python3 benchmarks/norm_tiles.py --out "$OUT/tiles" --forms ln,rms --fwd '' --bwd '4096;512;2;3' \
    --shapes 16384x4096,8192x1152,8192x2880,8192x4304,8192x5120,8192x8192,8192x2048
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes infer,fwdbwd --quick)
step 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise --providers compile:default \
    --out "$OUT/te-4layer-torchao"
for recipe in tensorwise rowwise; do
    step 60 "te-fp8-$recipe" python3 -m blockfuse bench block "${TE[@]}" --linear "fp8:$recipe" --providers fused \
        --out "$OUT/te-4layer-fp8-$recipe"
done
step 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-4layer-bf16"
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
