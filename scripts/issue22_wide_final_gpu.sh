#!/usr/bin/env bash
# Issue 22, the shipped rules for rows past 8192 lanes (no software pipeline, every form reading its row twice, the
# pre-residual forms in one tile) and the forward's per-element selects dropped, against the code before
# (_gpu/old): every norm form at the wide widths and at the listed shapes (which must keep their figures), the
# ops against torch.compile and Liger at 9000 / 11008 / 14336, the norm tests on CUDA.
# One GPU, one call (~6 minutes; carry .whl for Liger-Kernel):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue22_wide_final_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_wide_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
TILES=(benchmarks/norm_tiles.py --fwd '' --bwd '' --forms ln,rms,ln-pre,rms-pre,ln-post,ln-gelu
       --shapes 8192x9000,8192x11008,8192x14336,4096x16384,16384x4096,8192x1024,4096x8192,8192x2880)
step 60 tiles-new python3 "${TILES[@]}" --out "$OUT/tiles-new"
[ ${#OLD[@]} -gt 0 ] && step 60 tiles-old "${OLD[@]}" python3 "${TILES[@]}" --no-check --out "$OUT/tiles-old"
step 170 bench python3 -m blockfuse bench ops --op layer_norm rms_norm add_rms_norm add_layer_norm layer_norm_gelu \
    layer_norm_post --shapes 8192x9000 8192x11008 8192x14336 --modes fwd,fwdbwd --providers compile,liger,blockfuse \
    --out "$OUT/bench"
pack "$PACK"
