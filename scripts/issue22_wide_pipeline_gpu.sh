#!/usr/bin/env bash
# The wide rows' backward pieces (8192 + up to 4096 lanes, 16 warps, one program a multiprocessor) run without the
# pipeliner: one row's loads, then its math, then the next row's loads. A/B of the pipeliner there, and of the GELU
# form's pieces past 8704 lanes (24 lanes a thread, spilling), one call (one GPU):
#   bash scripts/issue22_wide_pipeline_gpu.sh PACK                      (writes PACK/results.tar.gz)
# benchmarks/norm_tiles.py --bwd-setting in alternating rounds of one process: the rule; 2 and 3 (the depth rule's)
# stages for the pieces (BWD_PIPELINE_MAX_LANES=12288), RMSNorm's 4096-lane tails in pieces with 2 stages; then the
# GELU form: the rule (the padded 16384-lane tile read twice) against its pieces to 12288 lanes.
set -u
PACK=${1:?usage: bash scripts/issue22_wide_pipeline_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SHAPES=${SHAPES:-16384x9216,16384x10240,16384x11008,16384x12288,4096x11008}
PIPE="BWD_PIPELINE_MAX_LANES=12288"
step 200 stages python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post \
    --fwd "" --bwd "" --no-check --bwd-setting "rule:" --bwd-setting "s2:$PIPE,BWD_STAGES=2" \
    --bwd-setting "s3:$PIPE" --bwd-setting "rms-s2:$PIPE,BWD_STAGES=2,BWD_WIDE_PIECES_RMS_MAX_TAIL=4096" \
    --setting-rounds 2 --out "$OUT/stages"
step 150 gelu python3 benchmarks/norm_tiles.py --shapes "16384x10240,16384x11008,16384x12288,4096x11008" \
    --forms ln-gelu --fwd "" --bwd "" --no-check --bwd-setting "rule:" \
    --bwd-setting "p24:ACT_BWD_PIECE_LANES_PER_WARP=768,ACT_BWD_PIECES_MAX_LANES=12288" --setting-rounds 2 \
    --out "$OUT/gelu"
pack "$PACK"
