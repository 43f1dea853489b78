#!/usr/bin/env bash
# Issue 22: the norms' backward at rows of 16384 lanes (widths past 8192) reading each row twice (norm.BWD_RELOAD)
# against the one-read kernel, both in one process (norm_tiles.py --bwd-knob); widths that are not multiples of 16
# (9000, 4300, 1128) with widths and strides passed in units the compiler can vectorize on (launch.row_units),
# against the code before (_gpu/old); the ops against torch.compile and Liger; the norm tests on CUDA.
# The same for the gated activations, bias_dropout_add and add_rms_norm at 9000 and 9008 wide.
# One GPU, one call (~8 minutes; carry .whl for Liger-Kernel):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   [SKIP_TESTS=1] bash scripts/issue22_reload_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_reload_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 140 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    tests/ops/test_launch.py
TILES=(benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln,rms,ln-post)
step 90 tiles python3 "${TILES[@]}" --shapes 8192x11008,8192x14336,16384x14336,4096x16384,8192x9000 \
    --bwd-knob BWD_RELOAD=False,True --out "$OUT/tiles"
ODD=8192x9000,8192x4300,16384x1128,8192x4304
step 45 odd-new python3 "${TILES[@]}" --shapes $ODD --out "$OUT/odd-new"
[ ${#OLD[@]} -gt 0 ] && step 45 odd-old "${OLD[@]}" python3 "${TILES[@]}" --shapes $ODD --out "$OUT/odd-old"
BENCH=(-m blockfuse bench ops --op layer_norm rms_norm layer_norm_post --shapes 8192x11008 8192x14336 8192x9000
       --modes fwd,fwdbwd --providers compile,liger,blockfuse)
step 100 bench-new python3 "${BENCH[@]}" --out "$OUT/bench-new"
ELEMENTWISE=(-m blockfuse bench ops --op swiglu swiglu_packed bias_dropout_add add_rms_norm --shapes 8192x9000
             8192x9008 --modes fwd,fwdbwd --providers compile,blockfuse)
step 60 odd-ops-new python3 "${ELEMENTWISE[@]}" --out "$OUT/odd-ops-new"
[ ${#OLD[@]} -gt 0 ] && step 60 odd-ops-old "${OLD[@]}" python3 "${ELEMENTWISE[@]}" --out "$OUT/odd-ops-old"
pack "$PACK"
