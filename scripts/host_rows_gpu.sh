#!/usr/bin/env bash
# The host-inclusive rows, as people run models (no CUDA graphs), on the committed code, one GPU in one call
# (~8 minutes):
#
#   bash scripts/host_rows_gpu.sh PACK        (writes PACK/results.tar.gz)
#
# 1. `blockfuse bench host --quick`: each op's host time a call, eager and compiled, beside PyTorch's and Liger's
#    (carry .whl for Liger-Kernel); 2. `blockfuse bench block` (reordered, olmo2-1b) without max-autotune: eager,
#    torch.compile default, fused and fused + compile, times with the host in them.
set -u
PACK=${1:?usage: bash scripts/host_rows_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 170 host python3 -m blockfuse bench host --quick --profile rms_norm --out "$OUT/host"
for preset in reordered olmo2-1b; do
    step 170 "block-$preset" python3 -m blockfuse bench block "$preset" --fast --quick --out "$OUT/block-$preset"
done
pack "$PACK"
