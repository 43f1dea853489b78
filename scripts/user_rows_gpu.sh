#!/usr/bin/env bash
# What a user runs, on the committed code, one GPU in one call (~8 minutes): the Hugging Face patching's CUDA tests
# and `bench model hf-llama --quick` with the transformers carried in .whl (CI's version: 5.25 and the `kernels`
# package it needs, with huggingface_hub 2.x and its own needs), then the host-inclusive block rows (no CUDA graphs:
# eager, torch.compile default, fused, fused + compile) of reordered and olmo2-1b:
#
#   bash scripts/user_rows_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/user_rows_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 100 tests-patching python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/patching
step 150 hf-llama python3 -m blockfuse bench model hf-llama --quick --out "$OUT/hf-llama"
for preset in reordered olmo2-1b; do
    step 145 "block-$preset" python3 -m blockfuse bench block "$preset" --fast --quick --out "$OUT/block-$preset"
done
pack "$PACK"
