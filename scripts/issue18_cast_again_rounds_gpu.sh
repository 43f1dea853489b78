#!/usr/bin/env bash
# Issue 18, te-4layer's FP8 tensorwise fused step by its kernels (host-independent) and in alternating rounds, new /
# mid / old code (see scripts/issue18_cast_again_gpu.sh for _gpu/mid and _gpu/old): one GPU, one call (~4 minutes).
#
#   bash scripts/issue18_cast_again_rounds_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue18_cast_again_rounds_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
tree_env() {  # TREE -> ENV=(...) running that tree's code (empty TREE: this checkout's)
    ENV=()
    [ -n "$1" ] && ENV=(env PYTHONPATH="$PWD/$1/src:$PYTHONPATH")
}
PROFILE=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 40 --providers fused --linear fp8:tensorwise)
for which in new: mid:_gpu/mid old:_gpu/old; do
    name=${which%%:*}; tree_env "${which#*:}"
    step 40 "profile-$name" "${ENV[@]}" python3 "${PROFILE[@]}" --json "$OUT/profile-$name.json"
done
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick --linear fp8:tensorwise --providers fused)
for round in 1 2; do
    for which in new: mid:_gpu/mid old:_gpu/old; do
        name=${which%%:*}; tree_env "${which#*:}"
        step 40 "te-$name-$round" "${ENV[@]}" python3 -m blockfuse bench block "${TE[@]}" --out "$OUT/te-$name-$round"
    done
done
pack "$PACK"
