#!/usr/bin/env bash
# Why te-4layer's eager FP8 step takes 23.7 ms in one process and 27-32 ms in another of the same call with the same
# kernels (benchmarks/results/fp8/17-targets-2026-12-02-h200/): PROCESSES (5) fresh processes each time the step
# unprofiled (host: ms to enqueue a step; wall: with the GPU; the allocator's cudaMalloc / cudaFree / retries over
# the timed steps) and then its kernels under the profiler (benchmarks/profile_block.py --cpu), then `bench block`'s
# own figure in a process of its own. A slow process whose kernels add up to its wall has slower kernels (clocks:
# machine.log); one whose kernels stay at ~21.5 ms idles the GPU, on its host (a full launch queue makes "host"
# read as the wall either way: the kernels decide) or on the allocator (cudaFree waits for the device). One GPU,
# ~4 minutes; carry .whl:
#
#   bash scripts/issue18_slow_process_gpu.sh PACK               (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue18_slow_process_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
for i in $(seq 1 "${PROCESSES:-5}"); do
    echo "process $i: $(cat /proc/loadavg); clocks $(nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv,noheader)" >> "$OUT/machine.log"
    step 40 "profile-$i" python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --providers fused \
        --linear fp8:delayed --cpu --top 8 --json "$OUT/profile-$i.json"
    step 40 "bench-$i" python3 -m blockfuse bench block te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick \
        --linear fp8:delayed --providers fused --out "$OUT/bench-$i"
done
grep -h "per step\|ms of kernels" "$OUT"/profile-*.log
pack "$PACK"
