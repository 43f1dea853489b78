#!/usr/bin/env bash
# LayerNorm + GELU after its backward's pieces (norm.backward_rule's GELU form), one call (one GPU; carry .whl):
#
#   bash scripts/issue22_gelu_sweep_gpu.sh PACK                             (writes PACK/results.tar.gz)
#
# 1. the sweep's every cell of layer_norm_gelu (widths x rows {2048, 8192, 32768}, not --quick), with the peers;
# 2. benchmarks/norm_tiles.py, the forward only, GELU and plain LayerNorm where the GELU form's forward lags
#    (FWD_SHAPES): the warps (FWD_ELEMENTS_PER_WARP) and the 16-warp register cap (FWD_WIDE_MAXNREG) on the rule's tile.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_sweep_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 330 sweep python3 -m blockfuse bench ops --sweep --op layer_norm_gelu --budget 300 --warm-jobs 8 --out "$OUT/sweep"
FWD_SHAPES=${FWD_SHAPES:-16384x2880,16384x6144,16384x11008,16384x14336}
step 150 forward python3 benchmarks/norm_tiles.py --shapes "$FWD_SHAPES" --forms ln-gelu,ln --fwd "" --bwd "" \
    --no-check --fwd-knob FWD_ELEMENTS_PER_WARP=512,1024,2048 --fwd-maxnreg 0,64,96,128 --out "$OUT/forward"
pack "$PACK"
