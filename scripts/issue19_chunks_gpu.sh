#!/usr/bin/env bash
# Issue 19: the fused LM-head cross-entropy's chunk size (its memory) against its speed, beside torch.compile of
# Hugging Face's loss and Liger-Kernel's fused linear cross-entropy timed the same way in the same process
# (`loss.backward()`, bf16), at the issue's first and third shapes. One GPU, ~3 minutes; carry .whl (Liger):
#
#   bash scripts/issue19_chunks_gpu.sh OUT            (writes OUT/env.log, OUT/chunks.log, OUT/chunks.json)
set -u
OUT=${1:?usage: bash scripts/issue19_chunks_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 330 chunks python3 benchmarks/cross_entropy_chunks.py --shapes 8192x4096x128256 4096x4096x262144 \
    --chunks 256 1024 2048 4096 8192 --peers --json "$OUT/chunks.json"
