#!/usr/bin/env bash
# Issue 22: the norms' forward at rows past 8192 lanes, the code before (_gpu/old) against the new one (a 64-register
# cap on 16-warp programs, FWD_WIDE_MAXNREG; a two-piece row's LayerNorm statistics in 4 reductions, not 6), and the
# norm tests on CUDA; one GPU in one call (~3 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   [SKIP_TESTS=1] bash scripts/issue22_wide_forward_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_wide_forward_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
TILES=(benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --shapes 8192x11008,8192x14336,16384x11008,8192x20000
       --forms ln,rms,ln-pre,ln-post)
[ ${#OLD[@]} -gt 0 ] && step 80 norm-old "${OLD[@]}" python3 "${TILES[@]}" --out "$OUT/norm-old"
step 80 norm-new python3 "${TILES[@]}" --out "$OUT/norm-new"
pack "$PACK"
