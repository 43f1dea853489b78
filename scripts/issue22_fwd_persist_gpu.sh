#!/usr/bin/env bash
# The forward of rows past 8192 lanes in persistent programs with Triton's pipeliner (norm.FWD_PERSIST_STAGES,
# FWD_PERSIST_HOIST: the weight and bias loaded once a program; FWD_TAIL_PIECE_LANES_PER_WARP=0: 16 warps), against
# one row a program, settings alternating in one process (benchmarks/norm_tiles.py); one GPU, about 6 minutes. The
# settings need the experiment's code (every one-row tile past 8192 lanes, FWD_PERSIST_HOIST): patch -p1 <
# benchmarks/results/launch-rules/23-forward-persistent-2026-12-02-h200/2-settings/settings-2-experiment.patch
#   bash scripts/issue22_fwd_persist_gpu.sh PACK            (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_fwd_persist_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
S=FWD_PERSIST_STAGES W16=FWD_TAIL_PIECE_LANES_PER_WARP=0 H=FWD_PERSIST_HOIST=True
step 480 persist python3 benchmarks/norm_tiles.py --no-check --fwd "" --bwd "" --out "$OUT/persist" \
    --shapes 16384x11008,32768x11008,4096x11008,16384x14336,2048x14336,16384x12288 --forms ln,ln-gelu,ln-post,ln-pre \
    --fwd-setting "off:$S=0" --fwd-setting "w16:$W16" --fwd-setting "s3w16:$S=3,$W16" \
    --fwd-setting "s3w16h:$S=3,$W16,$H" --fwd-setting "s2w16h:$S=2,$W16,$H" --fwd-setting "s4w16h:$S=4,$W16,$H" \
    --setting-rounds 2
pack "$PACK"
