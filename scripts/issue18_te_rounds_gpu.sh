#!/usr/bin/env bash
# te-4layer's FP8 training step (issue 18's 1.35x-over-bf16-compile target) in rounds, its baselines in the same call:
# bf16 compile and torchao tensorwise compiled first and last, the fused block with recipe "delayed" and "tensorwise"
# between them, alternating, ROUNDS (3) rounds; the host's load before each step (the eager FP8 step has ~2 ms of
# slack at most: a busy host moves it). One GPU, ~5 minutes; carry .whl with torchao's wheel:
#
#   bash scripts/issue18_te_rounds_gpu.sh PACK               (writes PACK/results.tar.gz)
#
# FP8_PROVIDERS (default fused): the FP8 rows' providers, e.g. fused,fused+compile:default to time the compiled FP8
# block beside the eager one in each process (the eager step is host-bound on the H200's host:
# benchmarks/results/fp8/18-host-2026-12-02-h200/; compiled, Inductor's wrapper launches the kernels). FP8_RECIPES
# (default "delayed tensorwise"): the recipes of each round. QUICK=0: without --quick (its 25 ms of warm-up and 50 of
# samples give a 24 ms step one warm-up call and seven timed ones).
set -u
PACK=${1:?usage: bash scripts/issue18_te_rounds_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd)
[ "${QUICK:-1}" = 0 ] || TE+=(--quick)  # (QUICK=0: the longer timing, 100 ms of warm-up and 400 of samples a row)
te() {  # te NAME BENCH-ARGS...: one step's bench, the load average logged before it
    local name=$1
    shift
    echo "$name: $(cat /proc/loadavg)" >> "$OUT/loadavg.log"
    step "${STEP_SECONDS:-150}" "$name" python3 -m blockfuse bench block "${TE[@]}" "$@" --out "$OUT/$name"
}
te bf16-1 --providers compile:default
te torchao-1 --linear torchao:tensorwise --providers compile:default
for round in $(seq 1 "${ROUNDS:-3}"); do
    for recipe in ${FP8_RECIPES:-delayed tensorwise}; do
        te "$recipe-$round" --linear "fp8:$recipe" --providers "${FP8_PROVIDERS:-fused}"
    done
done
te bf16-2 --providers compile:default
pack "$PACK"
