#!/usr/bin/env bash
# Issue 18's last miss, LayerNorm + tensorwise e4m3 at [16384, 4096] (0.87-0.90 of copy, target 0.9): the amax fold's
# check-load first thing in each program (norm.FP8_AMAX_EARLY, the NOTE above it) against at its end, alternating
# in one process, 4 rounds; the tests that compare the two bit for bit and the rolls, on CUDA. One GPU, ~3 minutes:
#   bash scripts/issue18_amax_early_gpu.sh PACK            (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue18_amax_early_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_norm_fp8.py -k "amax_read_early or roll"
step 240 norm-fp8 python3 benchmarks/norm_fp8.py --forms ln,rms,ln-post --widths 4096 --rows 16384 --ablate \
    --setting early:FP8_AMAX_EARLY=True --rounds 4 --out "$OUT/norm-fp8"
pack "$PACK"
