#!/usr/bin/env bash
# te-4layer's FP8 tensorwise fused step (issue 18) by its kernels (the profiler: not moved by the host) and in
# alternating rounds of wall time, for several versions of the code in one call (one GPU, ~4 minutes for three
# versions, ~6 with BASELINES=1; carry .whl with torchao's wheel for the baselines):
#
#   git archive <commit> src | tar x -C _gpu/<name>      # each older version (untracked: it travels)
#   TREES="new: old:_gpu/old" ROUNDS=2 BASELINES=1 bash scripts/fp8_rounds_gpu.sh OUT     (writes OUT/results.tar.gz)
#
# TREES: NAME:DIR pairs, DIR empty for this checkout (default "new: mid:_gpu/mid old:_gpu/old", the call of
# benchmarks/results/fp8/9-cast-again-2026-11-28-h200/call-2/); BASELINES=1 first runs bf16 compile and torchao
# tensorwise compiled, the targets' baselines; HOST=1 profiles the host too (`profile_block.py --cpu`: ms to enqueue a
# step, and the ops by self CPU time).
set -u
PACK=${1:?usage: bash scripts/fp8_rounds_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
TREES=${TREES:-"new: mid:_gpu/mid old:_gpu/old"}
tree_env() {  # DIR -> ENV=(...) running that tree's code (empty DIR: this checkout's)
    ENV=()
    [ -n "$1" ] && ENV=(env PYTHONPATH="$PWD/$1/src:$PYTHONPATH")
}
PROFILE=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 40 --providers fused --linear fp8:tensorwise)
[ "${HOST:-0}" = 1 ] && PROFILE+=(--cpu)
for which in $TREES; do
    name=${which%%:*}; tree_env "${which#*:}"
    step 40 "profile-$name" "${ENV[@]}" python3 "${PROFILE[@]}" --json "$OUT/profile-$name.json"
done
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
if [ "${BASELINES:-0}" = 1 ]; then
    step 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
    step 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise \
        --providers compile:default --out "$OUT/te-torchao"
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
    for which in $TREES; do
        name=${which%%:*}; tree_env "${which#*:}"
        step 40 "te-$name-$round" "${ENV[@]}" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:tensorwise \
            --providers fused --out "$OUT/te-$name-$round"
    done
done
pack "$PACK"
