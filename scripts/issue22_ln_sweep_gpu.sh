#!/usr/bin/env bash
# The sweep on the code as committed, one call (one GPU; carry .whl for Liger-Kernel):
#
#   [OPS=...] [GRID="--widths ... --rows ..."] [TESTS=0 | TEST_FILES=... [TEST_K=EXPR]] [BUDGET=340] \
#       bash scripts/issue22_ln_sweep_gpu.sh PACK                                   (writes PACK/results.tar.gz)
#
# 1. TEST_FILES on CUDA (default tests/ops/test_norm.py; TEST_K: pytest's -k EXPR; TESTS=0: none);
# 2. the sweep's every cell of OPS (default layer_norm_gelu and layer_norm; widths x rows {2048, 8192, 32768}, not
#    --quick, or the grid options in GRID: shapes off the grid), with the peers, within BUDGET seconds of measuring.
#    The step's limit is BUDGET + 150 s: the budget counts from the first measurement, so the warm-up's compiles
#    (60-90 s) and the cell in progress come on top (2026-12-07: BUDGET + 60 cut a 300 s sweep in RoPE).
set -u
PACK=${1:?usage: bash scripts/issue22_ln_sweep_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
[ "${TESTS:-1}" = 0 ] || step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 ${TEST_FILES:-tests/ops/test_norm.py} \
    ${TEST_K:+-k "$TEST_K"}
step $((${BUDGET:-340} + 150)) sweep python3 -m blockfuse bench ops --sweep --op ${OPS:-layer_norm_gelu layer_norm} ${GRID:-} \
    --budget "${BUDGET:-340}" --warm-jobs 8 --out "$OUT/sweep"
pack "$PACK"
