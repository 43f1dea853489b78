#!/usr/bin/env bash
# (issue 22) Rows of an odd width (a bf16 row then starts at a 2-byte boundary: no vector access at all, the
# launchers' VEC = 1) beside their even neighbours (PHASE=odd, the default, ~6 minutes), and fp32 LayerNorm's mean
# correction in one tile (PHASE=fp32, ~5 minutes), one GPU, one call each (carry .whl for Liger-Kernel; PHASE=fp32
# also _gpu/old).
# Built for sm_90 on a CPU (benchmarks/results/launch-rules/34-odd-widths-2026-12-05-cpu/), the backward spills at
# odd widths where the neighbour does not (4567: 336-616 bytes a thread on 4 warps; 7777: 136-208; 12345: 352-3064),
# and at 4567 twice the warps (BWD_PIECE_LANES_PER_WARP 2048 -> 1024) spill nothing. Never timed:
#   PHASE=odd:
#   * the sweep's norms at 4567 / 4568, 7777 / 7776, 12345 / 12344 x 16384 rows, with their peers (fraction of copy);
#   * the backward launcher at [16384, 4567] and [16384, 4568]: the rule against 8 warps for the pieces, in
#     alternating rounds of one process (norm_tiles.py --bwd-setting);
#   PHASE=fp32:
#   * fp32 LayerNorm (and + GELU) in one tile, the forward correcting its mean by the deviations' mean (a sum a row
#     more, 2026-12-05) against the code before it (_gpu/old), and the norm tests on CUDA.
#
#   git archive a625391 src | tar x -C _gpu/old      # the code before the fp32 correction (untracked: it travels)
#   [PHASE=fp32] bash scripts/issue22_odd_widths_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_odd_widths_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${PHASE:-odd}" = fp32 ]; then
    old_code
    packed 180 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
        tests/ops/test_layer_norm_gelu.py
    FP32=(-m blockfuse bench ops --op layer_norm layer_norm_gelu --shapes 16384x1024 16384x4096 8192x760 --dtype fp32
          --modes fwd,fwdbwd --providers compile,blockfuse)
    packed 100 fp32-new python3 "${FP32[@]}" --out "$OUT/fp32-new"
    [ ${#OLD[@]} -gt 0 ] && packed 100 fp32-old "${OLD[@]}" python3 "${FP32[@]}" --out "$OUT/fp32-old"
    exit 0
fi
packed 240 sweep python3 -m blockfuse bench ops --sweep --op layer_norm rms_norm add_layer_norm layer_norm_post \
    layer_norm_gelu --widths 4567,4568,7777,7776,12345,12344 --rows 16384 --budget 200 --out "$OUT/sweep"
packed 150 bwd-warps python3 benchmarks/norm_tiles.py --no-check --fwd '' --bwd '' --forms ln,rms,ln-pre \
    --shapes 16384x4567,16384x4568 --bwd-setting 'rule:BWD_PIECE_LANES_PER_WARP=2048' \
    --bwd-setting 'warps8:BWD_PIECE_LANES_PER_WARP=1024' --setting-rounds 2 --out "$OUT/bwd-warps"
