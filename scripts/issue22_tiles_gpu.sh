#!/usr/bin/env bash
# Issue 22, next measurements, one GPU in one call (under 10 minutes):
#
#   bash scripts/issue22_tiles_gpu.sh OUT
#
# 1. the norms' backward at padded widths over pipeline depth (3-5 stages), tile rows and programs a
#    multiprocessor, and both kernels with every row read in chunks (benchmarks/norm_tiles.py --chunked), to
#    test what benchmarks/results/launch-rules/4-tile-grid/ suggests: the padded lanes' shared-memory stages
#    leave fewer real bytes in flight;
# 2. the sweep on the current code (benchmarks/results/sweep/baseline/ was before the launch rules), cut by its
#    time budget.
set -u
OUT=${1:?usage: bash scripts/issue22_tiles_gpu.sh OUT}
mkdir -p "$OUT/tiles" "$OUT/sweep"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 200 tiles python3 benchmarks/norm_tiles.py --no-check --no-wide-cap --out "$OUT/tiles" \
    --shapes 8192x1152,8192x2880,8192x4304 --forms ln,rms --fwd '' \
    --bwd '4096,8192,16384;512,1024;1,2;3,4,5' --chunked '256,512,1024;4096,8192,16384;256,512'
step 360 sweep python3 -m blockfuse bench ops --sweep --quick --budget 330 --out "$OUT/sweep"
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
