#!/usr/bin/env bash
# The norms' backward in two pieces, one row a block (norm.BWD_PIECES_FROM_LANES, norm._norm_bwd_pieces), against the
# padded tile, one call (one GPU):
#
#   bash scripts/issue22_bwd_pieces_gpu.sh PACK                              (writes PACK/results.tar.gz)
#
# 1. the backward tests on CUDA (the pieces against float64 and against the padded tile, the rules);
# 2. benchmarks/norm_tiles.py, backward only: the pieces off / on in alternating rounds of one process, and the
#    pieces' warps (plain and GELU forms), at widths that take pieces (PIECES) and widths left alone (CONTROLS);
#    KNOBS: other --bwd-knob settings (the second call: see results/launch-rules/16-backward-pieces-*/README.md).
set -u
PACK=${1:?usage: bash scripts/issue22_bwd_pieces_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
PIECES=${PIECES:-16384x1152,16384x2304,16384x2880,16384x4304,16384x6144,8192x2560,2048x4304}
CONTROLS=${CONTROLS:-16384x4096}
FORMS=${FORMS:-ln,rms,ln-pre,ln-gelu}
# the first call's knobs (the rule's constants then: pieces from 1024 lanes at any tail, 1024 lanes a warp)
KNOBS=${KNOBS:-BWD_PIECES_FROM_LANES=0,1024,0,1024 BWD_PIECE_LANES_PER_WARP=512,2048 ACT_BWD_PIECE_LANES_PER_WARP=256,1024}
knobs=()
for knob in $KNOBS; do knobs+=(--bwd-knob "$knob"); done
[ -z "${NO_TESTS:-}" ] && step 120 tests python3 -m pytest -q -x tests/ops/test_norm.py -k "pieces or reload" \
    -p no:cacheprovider
step 420 knobs python3 benchmarks/norm_tiles.py --shapes "$PIECES,$CONTROLS" --forms "$FORMS" --fwd "" --bwd "" \
    --no-check "${knobs[@]}" --out "$OUT/knobs"
pack "$PACK"
