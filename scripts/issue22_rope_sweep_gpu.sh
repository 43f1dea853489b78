#!/usr/bin/env bash
# RoPE's every cell of the sweep grid (head_dim x (heads, kv heads) x seq {1024, 4096}, not --quick), with the peers,
# one call (one GPU; carry .whl for Liger-Kernel):
#
#   bash scripts/issue22_rope_sweep_gpu.sh PACK                             (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_rope_sweep_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step ${LIMIT:-230} sweep python3 -m blockfuse bench ops --sweep --op rotary --budget ${BUDGET:-190} --warm-jobs 8 \
    --out "$OUT/sweep"
pack "$PACK"
