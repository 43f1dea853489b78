#!/usr/bin/env bash
# Where the wide rows' backward pieces stop paying for the pipeliner: the pieces' tails of 1024-4096 lanes (8192 +
# 768 ... 8192 + 2560), every form, one call (one GPU):
#   bash scripts/issue22_wide_tail_pipeline_gpu.sh PACK                 (writes PACK/results.tar.gz)
# benchmarks/norm_tiles.py --bwd-setting in alternating rounds of one process: the rule; the plain forms' pieces
# without the pipeliner ("nopipe"); the GELU form's pieces with it ("gpipe").
set -u
PACK=${1:?usage: bash scripts/issue22_wide_tail_pipeline_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SHAPES=${SHAPES:-16384x8960,16384x9000,16384x9216,16384x9472,16384x9728,16384x10752,4096x9000}
step 240 tails python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post,ln-gelu \
    --fwd "" --bwd "" --no-check --bwd-setting "rule:" --bwd-setting "nopipe:BWD_PIPELINE_MAX_LANES=8192" \
    --bwd-setting "gpipe:ACT_BWD_PIPELINE_MAX_LANES=12288" --setting-rounds 2 --out "$OUT/tails"
pack "$PACK"
