#!/usr/bin/env bash
# (issue 22) 16-bit rows of one-element accesses (odd widths: the NOTE above norm.BWD_SCALAR_WARPS) on one GPU, one
# call (~4 minutes; carry .whl for Liger-Kernel):
#   1. the backward launcher alone (benchmarks/norm_tiles.py, its correctness check on), alternating in two rounds of
#      one process at odd widths 1001-12345: `before` (no scalar rows' rule), `rule` (the first rule: the pieces'
#      warps doubled, BWD_SCALAR_WARPS), `tile` (also the padded tile's warps at every width, BWD_SCALAR_TILE_WARPS,
#      and the pre-residual form's chunks past 8192 lanes, BWD_SCALAR_MAX_LANES_PRE: the candidates timed in
#      35-odd-widths-*/3-scalar/, where `rule` was the code's default and `tile` its two knobs) and `landed` (the
#      rule since: the padded tile's warps from 8192 lanes only);
#   2. the op sweep (forward and forward + backward as users call them, with the peers) at the odd widths;
#   3. (PHASE=wide, instead of 1-2) odd rows past 8192 lanes, which the rule's wide pieces hold in registers (12345:
#      0.02-0.34 of copy in 1-2): the rule against chunks (2048 lanes x 4 rows at 9999 / 12345, 4096 x 1 at 15001)
#      with the weight gradients from their own kernel (`chunks-wk`) and without it (`chunks`), and the knob
#      norm.BWD_SCALAR_ROW_CHUNKS_FROM_LANES (`row-chunks`: one row of 2048 lanes a chunk with that kernel, the only
#      setting whose sm_90 builds spill nothing there), at 9999 / 12345 / 15001 (~2 minutes; not run yet).
#
#   bash scripts/issue22_scalar_rows_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_scalar_rows_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${PHASE:-}" = wide ]; then
    CHUNKS=BWD_MAX_LANES=8192,BWD_MAX_LANES_PRE=8192,BWD_WIDE_PIECES_MAX_LANES=8192,BWD_THREE_PIECES_MAX_LANES=0
    packed 150 wide python3 benchmarks/norm_tiles.py --shapes "${SHAPES:-16384x9999,16384x12345,16384x15001}" \
        --forms "${FORMS:-ln,rms,ln-pre,ln-post}" --fwd "" --bwd "" --bwd-setting "rule:" \
        --bwd-setting "chunks-wk:$CHUNKS,BWD_WEIGHT_KERNEL_FROM_LANES=8193" --bwd-setting "chunks:$CHUNKS" \
        --bwd-setting "row-chunks:BWD_SCALAR_ROW_CHUNKS_FROM_LANES=8193" \
        --setting-rounds 2 --out "$OUT/wide"
    exit 0
fi
SHAPES=${SHAPES:-16384x1001,16384x2049,16384x3001,16384x4567,16384x7777,16384x12345}
packed 150 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "${FORMS:-ln,rms,ln-pre,ln-post}" \
    --fwd "" --bwd "" --bwd-setting "before:BWD_SCALAR_WARPS=1,BWD_SCALAR_TILE_WARPS=1,BWD_SCALAR_MAX_LANES_PRE=0" \
    --bwd-setting "rule:BWD_SCALAR_TILE_WARPS=1,BWD_SCALAR_MAX_LANES_PRE=0" \
    --bwd-setting "tile:BWD_SCALAR_TILE_WARPS_FROM_LANES=0" --bwd-setting "landed:" \
    --setting-rounds 2 --out "$OUT/settings"
packed 170 sweep python3 -m blockfuse bench ops --sweep --op layer_norm rms_norm add_layer_norm layer_norm_post \
    --widths "${SWEEP_WIDTHS:-4567,7777,12345}" --rows 16384 --budget "${BUDGET:-120}" --out "$OUT/sweep"
