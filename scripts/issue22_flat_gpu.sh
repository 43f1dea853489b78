#!/usr/bin/env bash
# Issue 22: RoPE's flat kernel (ops/rotary.py, pair counts that are not powers of two) and the norm backward's
# arithmetic (ops/norm.py: no select an element, dz as two multiply-adds), one GPU in one call (~8 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before, for the norm A/B (untracked: it travels)
#   bash scripts/issue22_flat_gpu.sh OUT        (writes OUT/results.tar.gz)
#
# 1. the rotary and norm tests on CUDA; 2. RoPE at head_dim {64, 72, 80, 96, 128, 256} x (heads, kv heads)
# {(32, 32), (32, 8), (16, 4)}: the padded kernel (flat off), the flat one, torch.compile, in one process
# (benchmarks/rotary_head_dims.py); 3. the norms' backward launcher at real widths, old and new code, each at
# 512 (the rule) and 1024 elements a warp (benchmarks/norm_tiles.py; stages by the rule).
set -u
PACK=${1:?usage: bash scripts/issue22_flat_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py tests/ops/test_norm.py
step 120 rotary python3 benchmarks/rotary_head_dims.py --out "$OUT/rotary"
SHAPES=8192x1152,8192x2560,8192x2880,16384x4096,8192x4304,8192x5120,4096x8192,8192x11008
TILES=(benchmarks/norm_tiles.py --fwd '' --bwd '4096;1024;2;0' --shapes $SHAPES --forms ln,rms,ln-post)
[ ${#OLD[@]} -gt 0 ] && step 110 norm-old "${OLD[@]}" python3 "${TILES[@]}" --no-check --out "$OUT/norm-old"
step 150 norm-new python3 "${TILES[@]}" --out "$OUT/norm-new"
pack "$PACK"
