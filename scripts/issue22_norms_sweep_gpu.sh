#!/usr/bin/env bash
# Issue 22: the quick sweep of the six norm ops and RoPE (their cells of `blockfuse bench ops --sweep --quick`),
# one GPU in one call (~5 minutes; carry .whl for Liger-Kernel):
#
#   bash scripts/issue22_norms_sweep_gpu.sh OUT        (writes OUT/results.tar.gz)
#
# Results: benchmarks/results/sweep/2026-11-27-h200-norms-rope/. (The call that made them also ran a norm A/B
# that failed, the old code lacking a form; the A/B is scripts/issue22_final_gpu.sh's.)
set -u
PACK=${1:?usage: bash scripts/issue22_norms_sweep_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 400 sweep python3 -m blockfuse bench ops --sweep --quick --budget 300 --out "$OUT/sweep" \
    --op rms_norm layer_norm add_rms_norm add_layer_norm layer_norm_gelu layer_norm_post rotary
pack "$PACK"
