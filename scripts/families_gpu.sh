#!/usr/bin/env bash
# The Hugging Face families blockfuse.patch took on 2026-12-04 (Mistral, Qwen2, Qwen3, Phi-3, Gemma 1-3), first on a
# GPU, one call (~10 minutes): the patching's CUDA tests (every family against its own forward and backward) and the
# CUDA tests of that day's launcher changes (the norms' bias gradient dtype, the fused loss's divisor), then
# the training step of Qwen3 and Gemma-3 at Llama's sizes against HF eager, torch.compile and Liger-Kernel
# (`bench model hf-llama --family`, the wheels in .whl), then the fused LM-head loss against torch.compile at the
# issue's first shape with the kernels of each step profiled and the op's fp32 split-K reductions A/B'd (issue 19:
# where blockfuse's 40.9 ms at a whole-logits chunk loses to compile's 39.5):
#
#   bash scripts/families_gpu.sh PACK        (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/families_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests-patching python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/patching
step 60 tests-launchers python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_norm.py \
    tests/ops/test_cross_entropy.py -k "bias_gradient or narrower_than_16 or divisor"
for family in ${FAMILIES:-qwen3 gemma3}; do
    step 280 "hf-$family" python3 -m blockfuse bench model hf-llama --family "$family" --quick \
        --modes fwdbwd,loss --out "$OUT/hf-$family"
done
step 200 ce-chunks python3 benchmarks/cross_entropy_chunks.py --shapes 8192x4096x128256 --chunks 1024 4096 8192 \
    --peers --dtype-reductions --profile 1024 8192 --profile-peers --json "$OUT/ce-chunks.json"
pack "$PACK"
