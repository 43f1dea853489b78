#!/usr/bin/env bash
# The sweep's compile warm-up (--warm-jobs) on a GPU: the same quick cells (RMSNorm, LayerNorm; the quick grid's
# widths at 8192 rows) measured twice, each on empty compile caches of its own: without a warm-up, then after one
# in 8 processes. Each run's log and sweep.md give the time, the warm-up's and the cache hits while measuring.
# One GPU, one call (~4 minutes; carry .whl for Liger-Kernel):  bash scripts/sweep_warm_gpu.sh PACK
set -u
PACK=${1:?usage: bash scripts/sweep_warm_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SWEEP=(-m blockfuse bench ops --sweep --quick --op rms_norm layer_norm --budget inf)
step 170 cold env TORCHINDUCTOR_CACHE_DIR=/tmp/cold-inductor TRITON_CACHE_DIR=/tmp/cold-triton \
    python3 "${SWEEP[@]}" --out "$OUT/cold"
step 170 warm env TORCHINDUCTOR_CACHE_DIR=/tmp/warm-inductor TRITON_CACHE_DIR=/tmp/warm-triton \
    python3 "${SWEEP[@]}" --warm-jobs 8 --out "$OUT/warm"
pack "$PACK"
