#!/usr/bin/env bash
# The wide rows' backward pieces pipelined, RMSNorm's 4096-lane tails in pieces, and the GELU form's pieces past
# 8704 lanes, as landed (the NOTEs above norm.BWD_PIPELINE_MAX_LANES and BWD_WIDE_PIECES_MAX_LANES), one call (one
# GPU, under 10 minutes; carry .whl for Liger-Kernel):
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_wide_pipeline_final_gpu.sh PACK                 (writes PACK/results.tar.gz)
# 1. tests/ops/test_norm.py and tests/ops/test_layer_norm_gelu.py on CUDA;
# 2. benchmarks/norm_tiles.py, the backward in alternating rounds of one process: the rule before ("old": no pipeline
#    past 8192 lanes, RMSNorm's pieces to a 2048-lane tail), the rule, and the rule with RMSNorm's tails kept to 2048
#    ("rms2048"); the GELU form: before ("old": the padded tile read twice), the rule, the rule pipelined ("pipe");
# 3. the op benchmark with the peers, forward + backward (time, error against float32, peak memory), old and new code.
set -u
PACK=${1:?usage: bash scripts/issue22_wide_pipeline_final_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 170 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    tests/ops/test_layer_norm_gelu.py
SHAPES=${SHAPES:-16384x9000,16384x9216,16384x10240,16384x10752,16384x11008,16384x12288,32768x11008,\
2048x11008,8192x12288}
step 200 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post \
    --fwd "" --bwd "" --no-check --bwd-setting "old:BWD_PIPELINE_MAX_LANES=8192,BWD_WIDE_PIECES_RMS_MAX_TAIL=2048" \
    --bwd-setting "rule:" --bwd-setting "rms2048:BWD_WIDE_PIECES_RMS_MAX_TAIL=2048" --setting-rounds 2 \
    --out "$OUT/settings"
GELU_SHAPES=16384x9000,16384x10240,16384x11008,16384x12288,32768x11008,4096x11008
step 120 gelu python3 benchmarks/norm_tiles.py --shapes "$GELU_SHAPES" \
    --forms ln-gelu --fwd "" --bwd "" --no-check --bwd-setting "old:ACT_BWD_WIDE_PIECES=False" --bwd-setting "rule:" \
    --bwd-setting "pipe:ACT_BWD_PIPELINE_MAX_LANES=12288" --setting-rounds 2 --out "$OUT/gelu"
OPS=(--op layer_norm rms_norm add_layer_norm layer_norm_post layer_norm_gelu --shapes 16384x11008 16384x10240
     4096x12288 16384x9216 --modes fwdbwd --quick --warm-jobs 8)
step 150 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 150 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
