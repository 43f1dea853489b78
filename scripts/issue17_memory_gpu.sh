#!/usr/bin/env bash
# Issue 17, what the fused eager stack holds under FSDP2 (2 GPUs, NCCL, NVLink multicast off; about 3 minutes):
#
#   bash scripts/issue17_memory_gpu.sh OUT
#
# benchmarks/results/distributed/README.md ("Where the peak sits"): under FSDP2 the fused eager stack held about
# 2 GB more than compile and fused + compile in every phase of a step, 2064 MiB in the optimizer step, where no
# activation is alive (the 8 blocks' parameters in fp32 are 2048 MiB). `--memory-snapshot`: rank 0 records the
# CUDA allocator's history from each provider's build on, then one more step; the Markdown lists what is alive at
# its peak, what the step made that outlives it, and all memory after it, by the line that allocated it. Its
# timed steps run with the recording on: they are not for comparison.
set -u
OUT=${1:?usage: bash scripts/issue17_memory_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
write_env
step 300 fsdp-memory python3 -m blockfuse bench model olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 2 \
    --parallel fsdp --providers compile,fused,fused+compile --steps 5 --warmup 2 --no-reference --memory-snapshot \
    --out "$OUT/fsdp-memory"
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
