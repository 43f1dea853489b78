#!/usr/bin/env bash
# Issue 22: the norms' forward at rows past 8192 lanes (one row a program of 16 warps), with and without a 64-register
# cap (two programs a multiprocessor; ops/norm.py FWD_WIDE_MAXNREG), one GPU in one call (~3 minutes):
#
#   bash scripts/issue22_fwd_cap_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_fwd_cap_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 200 fwd-cap python3 benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --fwd-maxnreg 0,64 \
    --shapes 8192x11008,8192x14336,16384x11008 --forms ln,rms,ln-pre,ln-post --out "$OUT/fwd-cap"
pack "$PACK"
