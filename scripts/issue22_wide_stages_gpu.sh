#!/usr/bin/env bash
# Issue 22: the backward of rows past 8192 lanes without the software pipeliner (norm.BWD_PIPELINE_MAX_LANES) and
# the pre-residual forms in one tile (BWD_MAX_LANES_PRE 16384), every form, against the code before (_gpu/old);
# reading each row twice (BWD_RELOAD) under the new depth, the GELU form included; 8192-lane rows' depth (1 / 3);
# the ops against torch.compile and Liger at 11008 / 14336. The norm tests on CUDA.
# One GPU, one call (~8 minutes; carry .whl for Liger-Kernel):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue22_wide_stages_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_wide_stages_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
TILES=(benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln,rms,ln-pre,rms-pre,ln-post,ln-gelu
       --shapes 8192x9000,8192x11008,8192x14336,4096x16384)
step 110 wide-new python3 "${TILES[@]}" --bwd-knob BWD_RELOAD=False,True --out "$OUT/wide-new"
[ ${#OLD[@]} -gt 0 ] && step 60 wide-old "${OLD[@]}" python3 "${TILES[@]}" --out "$OUT/wide-old"
step 30 pre-9000 python3 benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln-pre,rms-pre \
    --shapes 8192x9000 --bwd-knob BWD_MAX_LANES_PRE=8192,16384 --out "$OUT/pre-9000"
step 30 stages-8192 python3 benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln,rms,ln-pre \
    --shapes 16384x8192,8192x8192 --bwd-knob BWD_STAGES=1,3 --out "$OUT/stages-8192"
step 150 bench python3 -m blockfuse bench ops --op layer_norm rms_norm add_rms_norm add_layer_norm layer_norm_gelu \
    layer_norm_post --shapes 8192x11008 8192x14336 --modes fwd,fwdbwd --providers compile,liger,blockfuse \
    --out "$OUT/bench"
pack "$PACK"
