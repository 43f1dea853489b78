#!/usr/bin/env bash
# (issue 22's host lead) The gated MLP's blocks by the activation's bytes (mlp.BLOCKS.min_block_bytes, 32 MiB a
# block at most) against the fixed counts, one GPU, one call (~4 minutes): first tests/ops/test_mlp.py on CUDA, then
# benchmarks/mlp_blocks_ab.py: `reordered` (64 MiB of activation: 4 -> 2 blocks) with eager, compile default, fused
# and fused + compile default, and `olmo2-1b` (128 MiB: 4 blocks either way, the control) eager and fused; each a
# training step without CUDA graphs, the two settings in alternating rounds of one process, peak memory, gradients.
#
#   bash scripts/mlp_blocks_gpu.sh OUT                                    (writes OUT/*.log and OUT/mlp-blocks/)
set -u
OUT=${1:?usage: bash scripts/mlp_blocks_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_mlp.py
step 150 reordered python3 benchmarks/mlp_blocks_ab.py reordered --out "$OUT/mlp-blocks"
step 60 olmo2-1b python3 benchmarks/mlp_blocks_ab.py olmo2-1b --providers eager,fused --out "$OUT/mlp-blocks"
