#!/usr/bin/env bash
# The forward's warps for rows in two pieces with wide tails (norm.FWD_TAIL_PIECE_LANES_PER_WARP), one call (one GPU;
# carry .whl for Liger-Kernel):
#
#   bash scripts/issue22_tail_warps_gpu.sh PACK                             (writes PACK/results.tar.gz)
#
# 1. tests/ops/test_norm.py on CUDA;
# 2. benchmarks/norm_tiles.py, the forward only, every form: the rule off (0) and on (2048) in alternating rounds of
#    one process at widths it changes (5504, 6144, 11008, 12288) and a control (10240: unchanged);
# 3. the op benchmark with the peers, forward, at [16384, 6144] and [16384, 11008].
set -u
PACK=${1:?usage: bash scripts/issue22_tail_warps_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
SHAPES=${SHAPES:-16384x5504,16384x6144,16384x11008,16384x12288,16384x10240,4096x6144,4096x11008}
step 200 knob python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post,ln-gelu \
    --fwd "" --bwd "" --no-check --fwd-knob FWD_TAIL_PIECE_LANES_PER_WARP=0,2048,0,2048 --out "$OUT/knob"
step 150 ops python3 -m blockfuse bench ops --op layer_norm rms_norm layer_norm_post add_layer_norm layer_norm_gelu \
    --shapes 16384x6144 16384x11008 --modes fwd --quick --warm-jobs 8 --out "$OUT/ops"
pack "$PACK"
