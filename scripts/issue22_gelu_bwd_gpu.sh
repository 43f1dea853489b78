#!/usr/bin/env bash
# LayerNorm + GELU's backward in two pieces at more widths (norm.backward_rule's GELU form: the NOTE above
# ACT_BWD_PIECES_FROM_LANES), one call (one GPU):
#
#   bash scripts/issue22_gelu_bwd_gpu.sh PACK                               (writes PACK/results.tar.gz)
#
# benchmarks/norm_tiles.py, backward only, the GELU form: each --bwd-setting (SETTINGS, a set of the rule's constants
# changed together; "rule:" is the rule as the checkout has it) timed in alternating rounds of one process, at SHAPES.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_bwd_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SHAPES=${SHAPES:-32768x768,32768x1152,16384x1536,16384x2560,16384x3072,16384x4304,16384x5120,16384x6144,8192x2880,8192x3584,8192x4608,8192x7168,2048x1152,2048x5120,16384x4096}
PIECES="ACT_BWD_PIECES_FROM_LANES=512,ACT_BWD_PIECES_MAX_TAIL=1048576,ACT_BWD_PIECE_MIN_WARPS=1,ACT_BWD_PIECE_MAX_WARPS=16,ACT_BWD_PIECES_MAX_LANES=8704"
SETTINGS=${SETTINGS:-"rule: new:$PIECES,ACT_BWD_PIECE_LANES_PER_WARP=544,ACT_BWD_WARPS_PER_SM=16 new-512:$PIECES,ACT_BWD_PIECE_LANES_PER_WARP=512,ACT_BWD_WARPS_PER_SM=16 new-2-a-sm:$PIECES,ACT_BWD_PIECE_LANES_PER_WARP=544 new-s2:$PIECES,ACT_BWD_PIECE_LANES_PER_WARP=544,ACT_BWD_WARPS_PER_SM=16,ACT_BWD_STAGES=2 new-s4:$PIECES,ACT_BWD_PIECE_LANES_PER_WARP=544,ACT_BWD_WARPS_PER_SM=16,ACT_BWD_STAGES=4"}
settings=()
for setting in $SETTINGS; do settings+=(--bwd-setting "$setting"); done
step 500 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln-gelu --fwd "" --bwd "" --no-check \
    "${settings[@]}" --setting-rounds 2 --out "$OUT/settings"
pack "$PACK"
