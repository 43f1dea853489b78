#!/usr/bin/env bash
# Issue 22: the pre-residual backward of rows past 8192 lanes in one tile (BWD_MAX_LANES_PRE 8192 -> 16384, both in
# one process), the pipeline depth of the plain wide backward (BWD_STAGES 1 / 2), the pre-residual ops against
# torch.compile and Liger. Issue 18: the FP8 casts without a clamp (the conversion saturates) and the norms' FP8
# forward without per-element selects, against the code before (_gpu/old). The tests of both on CUDA.
# One GPU, one call (~7 minutes; carry .whl for Liger-Kernel):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue22_pre_fp8_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_pre_fp8_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py tests/ops/test_norm_fp8.py \
    tests/ops/test_fp8.py tests/ops/test_gated.py
FP8=(benchmarks/norm_fp8.py --widths 4096,8192,2048 --forms ln,rms,ln-post,swiglu --tiles 2x4)
step 60 fp8-new python3 "${FP8[@]}" --out "$OUT/fp8-new"
[ ${#OLD[@]} -gt 0 ] && step 60 fp8-old "${OLD[@]}" python3 "${FP8[@]}" --out "$OUT/fp8-old"
TILES=(benchmarks/norm_tiles.py --no-check --fwd '' --bwd '')
step 50 pre-tile python3 "${TILES[@]}" --forms ln-pre,rms-pre --shapes 8192x9000,8192x11008,8192x14336 \
    --bwd-knob BWD_MAX_LANES_PRE=8192,16384 --out "$OUT/pre-tile"
step 40 stages python3 "${TILES[@]}" --forms ln,rms --shapes 8192x11008,8192x14336,4096x16384 \
    --bwd-knob BWD_STAGES=1,2 --out "$OUT/stages"
step 90 bench-pre python3 -m blockfuse bench ops --op add_rms_norm add_layer_norm --shapes 8192x11008 8192x14336 \
    --modes fwd,fwdbwd --providers compile,liger,blockfuse --out "$OUT/bench-pre"
pack "$PACK"
