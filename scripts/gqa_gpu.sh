#!/usr/bin/env bash
# Grouped-query heads handed to SDPA as they are in the fused block (branch lead/sdpa-gqa: models/fused.py NATIVE_GQA)
# against repeated first, on a GPU: the tests on CUDA (which SDPA kernel takes them, the numbers against the repeated
# heads), then benchmarks/gqa_attention.py: the olmo2-1b layer with 4 kv heads and a Llama-3-8B-like layer (32 / 8
# heads), 2 layers at [2, 4096] bf16, training step time, peak and errors, alternating in one process, 3 rounds.
# One GPU, ~3 minutes:
#
#   bash scripts/gqa_gpu.sh PACK                            (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/gqa_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE tests/models/test_native_gqa.py tests/models/test_blocks.py
step 240 bench python3 benchmarks/gqa_attention.py --rounds 3 --json "$OUT/gqa.json"
pack "$PACK"
