#!/usr/bin/env bash
# (issue 22) Rows of an odd width (a bf16 row then starts at a 2-byte boundary: no vector access at all, the
# launchers' VEC = 1) beside their even neighbours, one GPU, one call (~5 minutes; carry .whl for Liger-Kernel).
# Built for sm_90 on a CPU (benchmarks/results/launch-rules/34-odd-widths-2026-12-05-cpu/), the backward spills at
# odd widths where the neighbour does not (4567: 336-616 bytes a thread on 4 warps; 7777: 136-208; 12345: 352-3064),
# and at 4567 twice the warps (BWD_PIECE_LANES_PER_WARP 2048 -> 1024) spill nothing. Never timed:
#   * the sweep's norms at 4567 / 4568, 7777 / 7776, 12345 / 12344 x 16384 rows, with their peers (fraction of copy);
#   * the backward launcher at [16384, 4567] and [16384, 4568]: the rule against 8 warps for the pieces, in
#     alternating rounds of one process (norm_tiles.py --bwd-setting).
#
#   bash scripts/issue22_odd_widths_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_odd_widths_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
packed 240 sweep python3 -m blockfuse bench ops --sweep --op layer_norm rms_norm add_layer_norm layer_norm_post \
    layer_norm_gelu --widths 4567,4568,7777,7776,12345,12344 --rows 16384 --budget 200 --out "$OUT/sweep"
packed 150 bwd-warps python3 benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln,rms,ln-pre \
    --shapes 16384x4567,16384x4568 --bwd-setting 'rule:BWD_PIECE_LANES_PER_WARP=2048' \
    --bwd-setting 'warps8:BWD_PIECE_LANES_PER_WARP=1024' --setting-rounds 2 --out "$OUT/bwd-warps"
