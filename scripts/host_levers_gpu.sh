#!/usr/bin/env bash
# (issue 22's host leads) Two host-path levers of the fused block, one GPU, one call (~8 minutes): first the CUDA
# tests of the MLP and the rotary ops, then benchmarks/mlp_blocks_ab.py's two knobs, a training step without CUDA
# graphs with the knob's two settings in alternating rounds of one process (peaks, gradients):
#   - rotary-v-copy (rotary.PACKED_COPY_IN_LAUNCH): the attention's v and its gradient copied in the rotation's
#     launch against copy_rows' launches of their own (2 launches a layer a step), `reordered`;
#   - mlp-blocks (mlp.BLOCKS.min_block_bytes): the MLP's blocks by the activation's bytes against the fixed counts,
#     `reordered` (4 -> 2 blocks) and `olmo2-1b` (4 either way: the control). scripts/mlp_blocks_gpu.sh alone.
#
#   bash scripts/host_levers_gpu.sh OUT                         (writes OUT/*.log, OUT/rotary-v-copy/, OUT/mlp-blocks/)
set -u
OUT=${1:?usage: bash scripts/host_levers_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 180 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_mlp.py tests/ops/test_rotary.py \
    tests/models/test_native_gqa.py
step 150 rotary-v-copy python3 benchmarks/mlp_blocks_ab.py reordered --knob rotary-v-copy \
    --providers eager,fused,fused+compile:default --out "$OUT/rotary-v-copy"
step 150 mlp-reordered python3 benchmarks/mlp_blocks_ab.py reordered --out "$OUT/mlp-blocks"
step 60 mlp-olmo2-1b python3 benchmarks/mlp_blocks_ab.py olmo2-1b --providers eager,fused --out "$OUT/mlp-blocks"
