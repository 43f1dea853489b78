#!/usr/bin/env bash
# The quick sweep grid of the six norm ops on the one-row pieces' code (8192 rows, widths 768-14336; issue 22), and
# the FP8 norms' tests on CUDA. One call (one GPU, about 6 minutes; carry .whl for Liger-Kernel):
#   bash scripts/issue22_pieces_sweep_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_pieces_sweep_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 100 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm_fp8.py
step 280 sweep python3 -m blockfuse bench ops --sweep --quick --op rms_norm layer_norm add_rms_norm add_layer_norm \
    layer_norm_gelu layer_norm_post --budget 200 --warm-jobs 8 --out "$OUT/sweep"
pack "$PACK"
