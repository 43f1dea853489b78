#!/usr/bin/env bash
# Issue 17, FSDP2 on 2 GPUs: the step, its peak and where the host leaves the GPU idle, then what is alive at the
# peak (NCCL, NVLink multicast off; about 5 minutes):
#
#   bash scripts/issue17_memory_gpu.sh OUT
#
# 1. `fsdp`: compile, fused, fused + compile, 20 steps, the loss against one GPU, rank 0's profiler trace of one
#    step each, summarized by benchmarks/trace_gaps.py (compute idle waiting on NCCL / on the host);
# 2. `fsdp-memory` (`--memory-snapshot`): rank 0 records the CUDA allocator's history from each provider's build
#    on, then one more step; the Markdown lists what is alive at its peak, what the step made that outlives it,
#    and all memory after it, by the line that allocated it. Its timed steps run with the recording on: they are
#    not for comparison. (It found the fused eager run's extra 2 GB: the compile provider's model, kept alive by
#    the training step's closure past the release; bench/distributed/training.py now raises if a model outlives
#    its run.)
set -u
OUT=${1:?usage: bash scripts/issue17_memory_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
write_env
step 300 fsdp python3 -m blockfuse bench model olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 2 --parallel fsdp \
    --providers compile,fused,fused+compile --profile --out "$OUT/fsdp"
step 60 trace-gaps python3 benchmarks/trace_gaps.py "$OUT"/fsdp/trace-*.json --json "$OUT/trace-gaps.json"
rm -f "$OUT"/fsdp/trace-*.json  # tens of MB
step 150 fsdp-memory python3 -m blockfuse bench model olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 2 \
    --parallel fsdp --providers compile,fused,fused+compile --steps 5 --warmup 2 --no-reference --memory-snapshot \
    --out "$OUT/fsdp-memory"
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
