#!/usr/bin/env bash
# The persistent wide forward (norm.FWD_PERSIST_STAGES) as landed, one call (one GPU, about 6 minutes; carry .whl for
# Liger-Kernel and _gpu for the old code):
#   mkdir -p _gpu/old && git archive edc74b5 src | tar x -C _gpu/old     # the code before it
#   bash scripts/issue22_fwd_persist_confirm_gpu.sh PACK                   (writes PACK/results.tar.gz)
# 1. the norm tests on CUDA (the persistent forward's among them); 2. `blockfuse bench ops` (not --quick), new and
# old code, the forms and widths the rule changes and one it leaves (4096x12288: LayerNorm on 8 warps).
set -u
PACK=${1:?usage: bash scripts/issue22_fwd_persist_confirm_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    -k "persistent or wide or post or fp32_within"
OPS=(--op layer_norm layer_norm_post --shapes 16384x11008 16384x14336 2048x14336 16384x16384 4096x12288
     --modes fwd,fwdbwd --warm-jobs 8)
step 170 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 170 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
