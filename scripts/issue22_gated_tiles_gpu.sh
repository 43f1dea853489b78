#!/usr/bin/env bash
# The gated activations' flat rows and tiles (issue 22), one call (one GPU):
#
#   [GATED_ARGS=...] bash scripts/issue22_gated_tiles_gpu.sh PACK      (writes PACK/results.tar.gz)
#
# benchmarks/gated_tiles.py: the forward and backward launchers of swiglu and geglu on the rule and on each variant
# (flat rows, other tiles), two rounds in one process, every width x rows {2048, 8192, 32768} (GATED_ARGS: more
# arguments, e.g. "--rows 2048 --variants rule,flat").
set -u
PACK=${1:?usage: bash scripts/issue22_gated_tiles_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 420 gated python3 benchmarks/gated_tiles.py --out "$OUT/gated" ${GATED_ARGS:-}
pack "$PACK"
