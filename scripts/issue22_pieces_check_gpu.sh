#!/usr/bin/env bash
# The forward's one-row pieces (norm.FWD_PIECES_FROM_LANES) at few rows, where the rows fit the card in one wave and
# the pieces take twice the warps (norm.pieces_for_count), against the code before the pieces; then the op benchmark
# with the peers at shapes the pieces change. One call (one GPU, about 5 minutes; carry .whl for Liger-Kernel):
#
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_pieces_check_gpu.sh PACK                        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_pieces_check_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
SHAPES=${SHAPES:-2048x1152,2048x1536,2048x2304,2048x2560,2048x4304,2048x4608,4096x1536,4096x2560,8192x2560}
FORMS=${FORMS:-ln,rms,ln-post,ln-pre,ln-gelu}
# in one process: the pieces off / on, and on without the doubled warps (a tail of 1000 elements a thread)
step 200 knobs python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "$FORMS" --fwd "" --bwd "" --no-check \
    --fwd-knob FWD_PIECES_FROM_LANES=0,1024,0,1024 --fwd-knob FWD_PIECE_TAIL_PER_THREAD=1000 --out "$OUT/knobs"
[ ${#OLD[@]} -gt 0 ] && step 60 old "${OLD[@]}" python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "$FORMS" \
    --fwd "" --bwd "" --no-check --out "$OUT/old"
step 60 new python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "$FORMS" --fwd "" --bwd "" --no-check \
    --out "$OUT/new"
step 240 ops python3 -m blockfuse bench ops --op layer_norm rms_norm layer_norm_post layer_norm_gelu \
    --shapes 16384x4304 16384x2304 2048x2560 --modes fwd,fwdbwd --quick --warm-jobs 8 --out "$OUT/ops"
pack "$PACK"
