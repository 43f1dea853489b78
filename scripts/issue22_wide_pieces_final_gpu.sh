#!/usr/bin/env bash
# The plain norms' backward past 8192 lanes in two pieces on 16 warps as landed (norm.backward_rule, the NOTE above
# BWD_WIDE_PIECES_MAX_LANES), one call (one GPU, under 10 minutes; carry .whl for Liger-Kernel):
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_wide_pieces_final_gpu.sh PACK                   (writes PACK/results.tar.gz)
# 1. tests/ops/test_norm.py on CUDA;
# 2. benchmarks/norm_tiles.py, the backward: the padded tile ("old": BWD_WIDE_PIECES_MAX_LANES=0) and the rule
#    ("rule"), and RMSNorm's wider tails in pieces too ("rms4096"), in alternating rounds of one process, at SHAPES
#    (9216, 9728, 10752 and the row counts never measured while the rule was chosen);
# 3. the op benchmark with the peers, forward + backward (time, error against float32, peak memory), old and new code.
set -u
PACK=${1:?usage: bash scripts/issue22_wide_pieces_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
SHAPES=${SHAPES:-16384x9216,16384x9728,16384x10240,16384x10752,16384x11008,16384x12288,32768x10240,\
2048x11008,8192x12288}
step 240 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post \
    --fwd "" --bwd "" --no-check --bwd-setting "old:BWD_WIDE_PIECES_MAX_LANES=0" --bwd-setting "rule:" \
    --bwd-setting "rms4096:BWD_WIDE_PIECES_RMS_MAX_TAIL=4096" --setting-rounds 2 --out "$OUT/settings"
OPS=(--op layer_norm rms_norm add_layer_norm layer_norm_post --shapes 16384x11008 16384x10240 4096x12288 --modes fwdbwd
     --quick --warm-jobs 8)
step 120 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 120 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
