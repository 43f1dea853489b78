#!/usr/bin/env bash
# Issue 17: does the CUDA caching allocator stall the host in an FSDP2 step? (2 GPUs, NCCL, multicast off; about
# 3 minutes)
#
#   bash scripts/issue17_allocator_gpu.sh OUT
#
# olmo2-1b, 8 layers, [2, 4096] a GPU, compile / fused / fused + compile, 10 steps: the Markdown lists the
# allocator's cudaMalloc / cudaFree calls, retries and all-stream synchronizations a timed step; then the same
# with expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), which maps memory into one
# growing segment instead of allocating new ones.
set -u
OUT=${1:?usage: bash scripts/issue17_allocator_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
write_env
ARGS=(olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 2 --parallel fsdp --providers compile,fused,fused+compile
      --steps 10 --no-reference)
step 150 fsdp python3 -m blockfuse bench model "${ARGS[@]}" --out "$OUT/fsdp"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True step 150 fsdp-expandable python3 -m blockfuse bench model \
    "${ARGS[@]}" --out "$OUT/fsdp-expandable"
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
