#!/usr/bin/env bash
# The norms' forward in pieces at any tail, one row a program (norm.FWD_PIECES_FROM_LANES), and its statistics
# reduced piece by piece to scalars (no layout conversion), against the code before it, one call (one GPU):
#
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_pieces_gpu.sh PACK                              (writes PACK/results.tar.gz)
#
# 1. benchmarks/norm_tiles.py on the new code: its float64 check, then the rule off / on in alternating rounds and
#    the pieces' warps, at widths that take pieces (PIECES);
# 2. the old code's defaults and the new code's, at those and at widths the change leaves alone (CONTROLS).
# (The first call of 2026-11-29, with the tests on CUDA and 8 warps a piece, is in this script's history.)
set -u
PACK=${1:?usage: bash scripts/issue22_pieces_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
PIECES=${PIECES:-16384x1152,16384x1280,16384x1536,16384x2304,16384x2560,16384x4160,16384x4304,16384x4608,2048x1152,2048x2560,2048x4304}
CONTROLS=${CONTROLS:-16384x2048,16384x2880,16384x5120,8192x11008}
FORMS=${FORMS:-ln,rms,ln-post,ln-pre,ln-gelu}
# the rule off / on in alternating rounds of one process (with the float64 check of every form first), and the
# pieces' warps otherwise
step 300 knobs python3 benchmarks/norm_tiles.py --shapes "$PIECES" --forms "$FORMS" --fwd "" --bwd "" \
    --fwd-knob FWD_PIECES_FROM_LANES=0,1024,0,1024 --fwd-knob FWD_PIECE_LANES_PER_WARP=1024 \
    --fwd-knob FWD_PIECE_MIN_WARPS=1,4 --out "$OUT/knobs"
[ ${#OLD[@]} -gt 0 ] && step 100 old "${OLD[@]}" python3 benchmarks/norm_tiles.py --shapes "$PIECES,$CONTROLS" \
    --forms "$FORMS" --fwd "" --bwd "" --no-check --out "$OUT/old"
step 100 new python3 benchmarks/norm_tiles.py --shapes "$PIECES,$CONTROLS" --forms "$FORMS" --fwd "" --bwd "" \
    --no-check --out "$OUT/new"
pack "$PACK"
