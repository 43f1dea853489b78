#!/usr/bin/env bash
# Issue 17: what a training step costs the host under FSDP2, per provider (2 GPUs, NCCL, multicast off; about
# 2 minutes):
#
#   bash scripts/issue17_host_gpu.sh OUT
#
# olmo2-1b, 8 layers, at [1, 128] tokens a GPU, where the GPU work of a step is a few ms and the step's wall time
# is the host's (FSDP2's hooks, the provider's op calls, the optimizer) and NCCL's latency; then the same on one
# GPU (FSDP2 over one rank: the hooks without the wait for another rank). Beside the [2, 4096] run of
# scripts/issue17_memory_gpu.sh, it says how much of the fused eager step's gap is host time.
set -u
OUT=${1:?usage: bash scripts/issue17_host_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
write_env
for nproc in 2 1; do
    step 150 "host-x$nproc" python3 -m blockfuse bench model olmo2-1b --layers 8 --shape 1x128x2048 \
        --nproc "$nproc" --parallel fsdp --providers eager,compile,fused,fused+compile --steps 20 --no-reference \
        --out "$OUT/host-x$nproc"
done
tar czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2> /dev/null
