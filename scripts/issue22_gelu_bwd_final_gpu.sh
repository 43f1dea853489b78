#!/usr/bin/env bash
# LayerNorm + GELU's backward rule as landed (norm.backward_rule's GELU form), one call (one GPU, under 10 minutes;
# carry .whl for Liger-Kernel):
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_gelu_bwd_final_gpu.sh PACK                      (writes PACK/results.tar.gz)
# 1. tests/ops/test_norm.py on CUDA;
# 2. benchmarks/norm_tiles.py, the GELU form's backward: the rule before ("old": its constants set back) and the rule
#    ("rule"), and the pieces capped at 8192 lanes ("cap8192"), in alternating rounds of one process, at SHAPES (most
#    never measured while the rule was chosen);
# 3. the op benchmark with the peers, forward + backward (time, error against float32, peak memory), old and new code.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_bwd_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
SHAPES=${SHAPES:-16384x2176,16384x2304,16384x2880,16384x3072,16384x4304,16384x4608,16384x5120,16384x5504,16384x6144,16384x8200,16384x8704,32768x3072,32768x6144,2048x3072,2048x6144,4096x2560}
OLD_RULE="ACT_BWD_PIECE_LANES_PER_WARP=512,ACT_BWD_PIECE_MAX_WARPS=8,ACT_BWD_PIECES_MAX_LANES=4352,ACT_BWD_PIECES_ANY_TAIL=False"
step 200 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln-gelu --fwd "" --bwd "" --no-check \
    --bwd-setting "old:$OLD_RULE" --bwd-setting "rule:" --bwd-setting "cap8192:ACT_BWD_PIECES_MAX_LANES=8192" \
    --setting-rounds 2 --out "$OUT/settings"
OPS=(--op layer_norm_gelu --shapes 16384x3072 16384x5120 16384x6144 8192x2880 2048x6144 16384x4096 --modes fwd,fwdbwd
     --quick --warm-jobs 8)
step 120 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 120 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
