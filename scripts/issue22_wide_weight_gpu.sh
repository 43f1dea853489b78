#!/usr/bin/env bash
# Rows read in chunks (past 16384 lanes): the backward's weight / bias gradients by a kernel of their own against
# the program's partial rows read and written in place (norm.BWD_WEIGHT_KERNEL_FROM_LANES, its NOTE), one call:
#
#   bash scripts/issue22_wide_weight_gpu.sh PACK                               (writes PACK/results.tar.gz)
#
# 1. tests/ops/test_norm.py on CUDA (20000-65536 wide rows among them);
# 2. benchmarks/norm_tiles.py, backward only: each setting in alternating rounds of one process, at SHAPES;
# 3. the op sweep at these widths with the peers (forward and forward + backward, as users call the ops).
set -u
PACK=${1:?usage: bash scripts/issue22_wide_weight_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
SHAPES=${SHAPES:-16384x16400,16384x18944,16384x28672,4096x32768}
SETTINGS=${SETTINGS:-"old:BWD_WEIGHT_KERNEL_FROM_LANES=0 new: new-row1:CHUNK_TILE_ELEMENTS=4096 new-pps1:BWD_PROGRAMS_PER_SM=1 new-c512:BWD_WEIGHT_COLUMNS=512 new-r32:BWD_WEIGHT_ROWS=32"}
settings=()
for setting in $SETTINGS; do settings+=(--bwd-setting "$setting"); done
step 240 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-gelu --fwd "" --bwd "" --no-check \
    "${settings[@]}" --setting-rounds 2 --out "$OUT/settings"
step 200 sweep python3 -m blockfuse bench ops --sweep --op layer_norm rms_norm layer_norm_gelu layer_norm_post \
    --widths 16400,18944,28672 --rows 4096,16384 --budget 150 --warm-jobs 8 --out "$OUT/sweep"
pack "$PACK"
