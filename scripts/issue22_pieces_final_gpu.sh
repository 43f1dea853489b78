#!/usr/bin/env bash
# The forward's one-row pieces as landed (norm.forward_rule), one call (one GPU, under 10 minutes; carry .whl for
# Liger-Kernel):
#   bash scripts/issue22_pieces_final_gpu.sh PACK        (writes PACK/results.tar.gz)
#   (with _gpu/old/src the code before the pieces: mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old)
# 1. tests/ops/test_norm.py and test_norm_fp8.py on CUDA;
# 2. the FP8 forward, which takes the same pieces: benchmarks/norm_fp8.py new and old in alternating rounds;
# 3. the op benchmark with the peers at shapes the pieces change (time, error against float32, peak memory).
set -u
PACK=${1:?usage: bash scripts/issue22_pieces_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py tests/ops/test_norm_fp8.py
NORM_FP8=(--rows 16384 --widths 1152,2304,4304 --forms rms,ln,ln-post)
for round in 1 2; do
    step 60 "fp8-new-$round" python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" --out "$OUT/fp8-new-$round"
    [ ${#OLD[@]} -gt 0 ] && step 60 "fp8-old-$round" "${OLD[@]}" python3 benchmarks/norm_fp8.py "${NORM_FP8[@]}" \
        --out "$OUT/fp8-old-$round"
done
step 150 ops python3 -m blockfuse bench ops --op layer_norm rms_norm layer_norm_post layer_norm_gelu \
    --shapes 16384x4304 16384x2304 16384x1152 2048x2560 --modes fwd,fwdbwd --quick --warm-jobs 8 --out "$OUT/ops"
pack "$PACK"
