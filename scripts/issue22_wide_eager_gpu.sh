#!/usr/bin/env bash
# After the wide rows' backward pieces (launch-rules/20-*, 21-*): what their first runs left open, one call (one GPU,
# about 8 minutes; carry .whl for Liger-Kernel):
#   mkdir -p _gpu/old && git archive 7286a8b src | tar x -C _gpu/old     # the code before the pieces
#   bash scripts/issue22_wide_eager_gpu.sh PACK                            (writes PACK/results.tar.gz)
# 1. the fp32 test without a floor (tests/ops/test_norm.py -k fp32_within: never run on a GPU) and the wide rows'
#    tests on CUDA;
# 2. `blockfuse bench ops` without --quick (50 back-to-back calls x 9 samples: the eager-call column, host time
#    included, which the --quick runs of 2026-12-01 sampled 10 x 3 times and left at 1.0-4.6x their CUDA-graph
#    times, every custom provider alike), the norms at the wide widths, new and old code.
set -u
PACK=${1:?usage: bash scripts/issue22_wide_eager_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    tests/ops/test_layer_norm_gelu.py -k "fp32_within or wide or pieces or reload or odd"
OPS=(--op layer_norm rms_norm layer_norm_gelu --shapes 16384x11008 16384x10240 4096x12288 --modes fwdbwd
     --warm-jobs 8)
step 180 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 180 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
