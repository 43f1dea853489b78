#!/usr/bin/env bash
# The backward's pieces as landed (norm.backward_rule), one call (one GPU, under 10 minutes; carry .whl for
# Liger-Kernel):
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_bwd_pieces_final_gpu.sh PACK                    (writes PACK/results.tar.gz)
# 1. tests/ops/test_norm.py on CUDA;
# 2. benchmarks/norm_tiles.py's defaults, old and new code in alternating rounds, at widths that take pieces (PIECES:
#    some never measured before the rule was set) and widths left alone (CONTROLS);
# 3. the op benchmark with the peers, forward + backward (time, error against float32, peak memory).
set -u
PACK=${1:?usage: bash scripts/issue22_bwd_pieces_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
PIECES=${PIECES:-16384x2176,16384x2304,16384x2560,16384x4160,16384x4304,16384x4608,4096x4304}
CONTROLS=${CONTROLS:-16384x1152,16384x2880,16384x6144}
FORMS=${FORMS:-ln,rms,ln-pre,ln-post,ln-gelu}
for round in 1 2; do
    limit=$((round == 1 ? 90 : 60))
    step $limit "new-$round" python3 benchmarks/norm_tiles.py --shapes "$PIECES,$CONTROLS" --forms "$FORMS" --fwd "" \
        --bwd "" --no-check --out "$OUT/new-$round"
    [ ${#OLD[@]} -gt 0 ] && step $limit "old-$round" "${OLD[@]}" python3 benchmarks/norm_tiles.py \
        --shapes "$PIECES,$CONTROLS" --forms "$FORMS" --fwd "" --bwd "" --no-check --out "$OUT/old-$round"
done
step 140 ops python3 -m blockfuse bench ops --op layer_norm rms_norm layer_norm_post layer_norm_gelu \
    --shapes 16384x4304 16384x2304 8192x2560 2048x4304 --modes fwd,fwdbwd --quick --warm-jobs 8 --out "$OUT/ops"
pack "$PACK"
