#!/usr/bin/env bash
# The GELU form's wide backward pieces (past 8704 lanes, 24 lanes a thread) pipelined where the tail gives a thread
# 8 bytes (the NOTE above norm.BWD_PIPELINE_MAX_LANES), as landed, one call (one GPU; carry .whl for Liger-Kernel):
#   mkdir -p _gpu/old && git archive COMMIT src | tar x -C _gpu/old     # the code before (untracked: it travels)
#   bash scripts/issue22_gelu_wide_pipeline_gpu.sh PACK                  (writes PACK/results.tar.gz)
# 1. tests/ops/test_layer_norm_gelu.py and the wide rows' tests of tests/ops/test_norm.py on CUDA;
# 2. benchmarks/norm_tiles.py, the GELU form's backward in alternating rounds of one process: the padded tile read
#    twice ("old"), the rule, its pieces unpipelined ("nopipe");
# 3. the op benchmark, forward + backward, old and new code.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_wide_pipeline_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_layer_norm_gelu.py \
    tests/ops/test_norm.py -k "gelu or wide or pieces or reload"
SHAPES=${SHAPES:-16384x9216,16384x9472,16384x10240,16384x11008,16384x12288,32768x11008,2048x11008}
step 90 gelu python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln-gelu --fwd "" --bwd "" --no-check \
    --bwd-setting "old:ACT_BWD_WIDE_PIECES=False" --bwd-setting "rule:" \
    --bwd-setting "nopipe:ACT_BWD_PIPELINE_TAIL_BYTES=1000000" --setting-rounds 2 --out "$OUT/gelu"
OPS=(--op layer_norm_gelu --shapes 16384x11008 16384x10240 4096x12288 16384x9216 --modes fwdbwd --quick
     --warm-jobs 8)
step 100 ops-new python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 100 ops-old "${OLD[@]}" python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-old"
pack "$PACK"
