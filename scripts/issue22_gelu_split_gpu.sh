#!/usr/bin/env bash
# Run at 52e1d73: the knob was measured (results/launch-rules/32-gelu-split-2026-12-05-h200, it lost) and taken out.
# LayerNorm + GELU's wide backward split in two (norm.ACT_BWD_CHUNKS_FROM_LANES, an A/B knob, off; its NOTE): the rows
# in the chunked backward (dx only) and the weight / bias gradients by the weight kernel, against the rule's tiles
# (two or three pieces to 13312 lanes, the padded 16384-lane tile read twice at 13824-16384), one call:
#
#   bash scripts/issue22_gelu_split_gpu.sh PACK                               (writes PACK/results.tar.gz)
#
# 1. tests/ops/test_norm.py -k "gelu or chunks or weight_kernel" on CUDA (the knob's own test among them);
# 2. benchmarks/norm_tiles.py, the GELU form's backward launcher only: each setting in alternating rounds of one
#    process, at SHAPES (fraction of a same-size copy);
# 3. the op sweep at these widths with the peers (forward and forward + backward, as users call the op), the knob off
#    and at SWEEP_SETTING (NAME=VALUE,...; default: chunks from 8193 lanes, 2048-lane chunks on 8 warps).
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_split_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
packed 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py -k "gelu or chunks or weight_kernel"
SHAPES=${SHAPES:-8192x9216,8192x11008,8192x12288,8192x13824,8192x14336,16384x14336,8192x16384,32768x11008}
SPLIT=ACT_BWD_CHUNKS_FROM_LANES=8193
SETTINGS=${SETTINGS:-"rule:ACT_BWD_CHUNKS_FROM_LANES=0 c4096w16:$SPLIT c4096w8:$SPLIT,ACT_BWD_CHUNK_WARPS=8 c2048w8:$SPLIT,ACT_BWD_CHUNK_LANES=2048,ACT_BWD_CHUNK_WARPS=8 c2048w8p4:$SPLIT,ACT_BWD_CHUNK_LANES=2048,ACT_BWD_CHUNK_WARPS=8,BWD_PROGRAMS_PER_SM=4 c2048w4:$SPLIT,ACT_BWD_CHUNK_LANES=2048,ACT_BWD_CHUNK_WARPS=4,BWD_PROGRAMS_PER_SM=4"}
settings=()
for setting in $SETTINGS; do settings+=(--bwd-setting "$setting"); done
packed 240 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln-gelu --fwd "" --bwd "" --no-check \
    "${settings[@]}" --setting-rounds 2 --out "$OUT/settings"
# the op as users call it with the peers, the knob off and then at SWEEP_SETTING (set in the sweep's own process: the
# module constants are read at each launch)
SWEEP_SETTING=${SWEEP_SETTING:-$SPLIT,ACT_BWD_CHUNK_LANES=2048,ACT_BWD_CHUNK_WARPS=8}
for run in ${SWEEPS:-rule split}; do  # SWEEPS=split: the knob only (the sweep's ratios are to its own run's copy and peers)
    setting=$([ "$run" = rule ] && echo ACT_BWD_CHUNKS_FROM_LANES=0 || echo "$SWEEP_SETTING")
    packed 120 "sweep-$run" python3 - "$setting" --out "$OUT/sweep-$run" <<'PY'
import ast
import sys

sys.path.insert(0, "benchmarks")
from norm_knobs import rule_constants

from blockfuse.cli import main

with rule_constants({name: ast.literal_eval(value) for name, value in
                     (item.split("=") for item in sys.argv[1].split(","))}):
    status = main(["bench", "ops", "--sweep", "--op", "layer_norm_gelu", "--widths",
                   "9216,11008,12288,13824,14336,16384", "--rows", "8192,32768", "--budget", "100", *sys.argv[2:]])
sys.exit(status)
PY
done
