#!/usr/bin/env bash
# (issue 22's host leads) The packed rotary with the attention's v copied in the rotation's launch, one GPU, one call
# (~3 minutes): its CUDA tests (tests/ops/test_rotary.py's packed and flat cases), then its kernel time against the
# copy launched apart (benchmarks/rotary_packed_ab.py: padded and flat kernels, head_dim 64-128, the flat kernel's
# copy on whatever FLAT_COPY_IN_LAUNCH's default). The `reordered` step's A/B of either host knob:
# scripts/host_levers_gpu.sh.
#
#   bash scripts/rotary_copy_gpu.sh OUT                 (writes OUT/*.log, OUT/rotary-packed/)
set -u
OUT=${1:?usage: bash scripts/rotary_copy_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_rotary.py -k "packed or flat"
step 150 rotary-packed python3 benchmarks/rotary_packed_ab.py --rounds 5 --out "$OUT/rotary-packed"
