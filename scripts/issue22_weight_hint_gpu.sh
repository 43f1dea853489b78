#!/usr/bin/env bash
# The norm forward's weight / bias cache hint (issue 22), one call (one GPU; carry .whl for Liger-Kernel):
#
#   [BUDGET=230] [TESTS=0] bash scripts/issue22_weight_hint_gpu.sh PACK      (writes PACK/results.tar.gz)
#
# 1. the norms' CUDA tests (tests/ops/test_norm.py, tests/ops/test_norm_fp8.py; TESTS=0: not);
# 2. the sweep's forward cells of the five norm ops with the peers, within BUDGET seconds.
# The A/B of the hint itself: scripts/issue22_forward_warps_gpu.sh with WARPS_ARGS="--no-tiles --setting
# none:FWD_WB_EVICT=''" (benchmarks/results/launch-rules/26-weight-hint-*/README.md).
set -u
PACK=${1:?usage: bash scripts/issue22_weight_hint_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${TESTS:-1}" != 0 ]; then
    step 170 tests-norm python3 -m pytest -q -n 16 -p no:cacheprovider tests/ops/test_norm.py
    step 80 tests-fp8 python3 -m pytest -q -n 16 -p no:cacheprovider tests/ops/test_norm_fp8.py
fi
step $((${BUDGET:-230} + 70)) sweep python3 -m blockfuse bench ops --sweep --modes fwd \
    --op rms_norm layer_norm add_layer_norm layer_norm_post add_rms_norm --budget "${BUDGET:-230}" --warm-jobs 8 \
    --out "$OUT/sweep"
pack "$PACK"
