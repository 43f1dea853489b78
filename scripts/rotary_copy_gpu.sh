#!/usr/bin/env bash
# (issue 22's host leads) The packed rotary with the attention's v copied in the rotation's launch, one GPU, one call
# (~3 minutes): its CUDA tests (tests/ops/test_rotary.py's packed and flat cases), its kernel time against the copy
# launched apart (benchmarks/rotary_packed_ab.py: padded and flat kernels, head_dim 64-128), then the `reordered`
# step without CUDA graphs under both settings of each host knob (benchmarks/mlp_blocks_ab.py, eager and fused).
#
#   bash scripts/rotary_copy_gpu.sh OUT                 (writes OUT/*.log, OUT/rotary-packed/, OUT/ab/)
set -u
OUT=${1:?usage: bash scripts/rotary_copy_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_rotary.py -k "packed or flat"
step 90 rotary-packed python3 benchmarks/rotary_packed_ab.py --out "$OUT/rotary-packed"
for knob in rotary-v-copy mlp-blocks; do
    step 60 "ab-$knob" python3 benchmarks/mlp_blocks_ab.py reordered --knob "$knob" --providers eager,fused \
        --rounds 10 --steps 60 --out "$OUT/ab"
done
