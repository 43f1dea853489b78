#!/usr/bin/env bash
# LayerNorm and LayerNorm + GELU on the code as committed, one call (one GPU; carry .whl for Liger-Kernel):
#
#   [OPS=...] [TESTS=0] [BUDGET=340] bash scripts/issue22_ln_sweep_gpu.sh PACK     (writes PACK/results.tar.gz)
#
# 1. tests/ops/test_norm.py on CUDA (TESTS=0: not);
# 2. the sweep's every cell of layer_norm_gelu and layer_norm (widths x rows {2048, 8192, 32768}, not --quick), with
#    the peers (OPS to change the ops), within BUDGET seconds of measuring.
set -u
PACK=${1:?usage: bash scripts/issue22_ln_sweep_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
[ "${TESTS:-1}" = 0 ] || step 130 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
step $((${BUDGET:-340} + 40)) sweep python3 -m blockfuse bench ops --sweep --op ${OPS:-layer_norm_gelu layer_norm} --budget "${BUDGET:-340}" \
    --warm-jobs 8 --out "$OUT/sweep"
pack "$PACK"
