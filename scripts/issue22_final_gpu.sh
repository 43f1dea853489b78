#!/usr/bin/env bash
# Issue 22, this session's final code: the rotary and norm tests on CUDA; RoPE's flat kernel with its heads rule
# against the padded kernel and torch.compile; the norm backward's final rule against the code before; one GPU in
# one call (~7 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue22_final_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_final_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py tests/ops/test_norm.py
step 120 rotary python3 benchmarks/rotary_head_dims.py --out "$OUT/rotary"
SHAPES=8192x1152,8192x2560,16384x4096,8192x4304,8192x5120,4096x8192,8192x11008,8192x14336
TILES=(benchmarks/norm_tiles.py --fwd '' --bwd '' --shapes $SHAPES --forms ln,rms,ln-pre,ln-post)
[ ${#OLD[@]} -gt 0 ] && step 70 norm-old "${OLD[@]}" python3 "${TILES[@]}" --no-check --out "$OUT/norm-old"
step 70 norm-new python3 "${TILES[@]}" --no-check --out "$OUT/norm-new"
step 100 norm-check python3 benchmarks/norm_tiles.py --fwd '' --bwd '' --shapes 8192x4096 --forms rms --out "$OUT/norm-check"
pack "$PACK"
