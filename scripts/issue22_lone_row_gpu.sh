#!/usr/bin/env bash
# Issue 22, data for the forward's next launch rule: warps for a row alone in its program (one GPU, one call, ~5
# minutes; carry .whl for Liger-Kernel). On 2026-11-28 a row of 4096 lanes alone in its program ran 1.07-1.09x faster
# in 8 warps than in the rule's 4 at 2048 rows (RMSNorm / LayerNorm), 1.01x at 16384, where 8192 lanes lost at 16
# warps and two rows of 2048 lost at 8 (benchmarks/results/launch-rules/12-row-count/check/warps*; one run each).
# This measures it across forms and row counts before it becomes a rule:
#   1. the forward launcher alone (norm_tiles.py: tile elements 4096, elements a warp 256 / 512 / 1024) at the widths
#      that take one 4096-lane row a program (2304-4096) and their neighbours, 2048 / 8192 / 32768 rows;
#   2. the norms' FP8 forward with 4 and 8 warps at [16384, 4096] (norm_fp8.py --warps 4,8; its target is 0.9 of copy).
#
#   bash scripts/issue22_lone_row_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_lone_row_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SHAPES=2048x2560,2048x3072,2048x4096,8192x2560,8192x3072,8192x4096,32768x3072,32768x4096,8192x2048,8192x5120
step 240 warps python3 benchmarks/norm_tiles.py --no-check --bwd '' --fwd '4096;256,512,1024' \
    --forms ln,rms,rms-pre,ln-post,ln-gelu --shapes "$SHAPES" --out "$OUT/warps"
step 120 fp8 python3 benchmarks/norm_fp8.py --rows 16384 --widths 4096 --forms rms,ln,rms-pre,ln-post --warps 4,8 \
    --out "$OUT/fp8"
pack "$PACK"
