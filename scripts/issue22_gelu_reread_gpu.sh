#!/usr/bin/env bash
# LayerNorm + GELU's backward in wide pieces holding less across the row sums (norm._bwd_reread: the NOTE above
# ACT_BWD_REREAD), one call (one GPU):
#
#   bash scripts/issue22_gelu_reread_gpu.sh PACK                            (writes PACK/results.tar.gz)
#
# The CUDA tests of the changed paths, then benchmarks/norm_tiles.py, backward only, the GELU form: each
# --bwd-setting (a set of the rule's constants changed together; "rule:" is the rule as the checkout has it) timed in
# alternating rounds of one process, at SHAPES.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_reread_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
TESTS_K=${TESTS_K:-"reread or early or three_pieces or wide or pieces"}
step 120 tests python3 -m pytest -q -x tests/ops/test_norm.py -k "$TESTS_K" -p no:cacheprovider
SHAPES=${SHAPES:-16384x9216,16384x11008,16384x12288,32768x11008,2048x11008,16384x13312,16384x14336,32768x14336,2048x14336}
THREE="ACT_BWD_THREE_PIECES=True,BWD_THREE_PIECES_MIN_STAGES=1"
SETTINGS=${SETTINGS:-"rule: hold:ACT_BWD_REREAD=0 again:ACT_BWD_REREAD=2 three:$THREE three-again:$THREE,ACT_BWD_REREAD=2 three-s2:$THREE,ACT_BWD_STAGES=2"}
settings=()
for setting in $SETTINGS; do settings+=(--bwd-setting "$setting"); done
step 400 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln-gelu --fwd "" --bwd "" --no-check \
    "${settings[@]}" --setting-rounds 2 --out "$OUT/settings"
pack "$PACK"
