#!/usr/bin/env bash
# Issue 18: where te-4layer's FP8 training step spends its GPU time beyond the GEMMs and attention, launch by launch:
# each blockfuse kernel's time against a copy of its tensors' bytes (benchmarks/profile_block.py --bytes), eager;
# then the compiled step's kernels (Inductor's own among them) and its host's time. One GPU, carry .whl:
#
#   [RECIPES="delayed"] [COMPILED=1] bash scripts/issue18_bytes_gpu.sh PACK
#
# ~2-3 minutes. Writes PACK/results.tar.gz (after every step).
set -u
PACK=${1:?usage: bash scripts/issue18_bytes_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
PROFILE=(python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 60)
for recipe in ${RECIPES:-delayed}; do
    step 90 "bytes-$recipe" "${PROFILE[@]}" --providers fused --linear "fp8:$recipe" --bytes --cpu
    pack "$PACK"
done
if [ "${COMPILED:-1}" = 1 ]; then
    step 150 compiled-delayed "${PROFILE[@]}" --providers fused+compile:default --linear fp8:delayed --cpu
    pack "$PACK"
fi
