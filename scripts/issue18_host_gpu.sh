#!/usr/bin/env bash
# Issue 18's te-4layer training step with less host work a step (ops/fp8_history.py: the delayed recipe's amax-history
# rolls without a launch each; no view nodes around the FP8 layers, the activation and attention's inputs; the FP8 ops'
# stand-ins for autograd without a fill), against the code before the change (_gpu/old/src: `git archive COMMIT src |
# tar x -C _gpu/old`), after the CUDA tests of what changed. One GPU, carry .whl:
#
#   [TESTS=1] [AB=1 [ROUNDS=3] [PROVIDERS=fused]] [FINAL=0] bash scripts/issue18_host_gpu.sh PACK
#
# AB=1 (~4 minutes): bench block's te-4layer step, new and old code in alternating fresh processes, bf16 compile first
# and last (scripts/te_fp8_ab_gpu.sh). FINAL=1 (~5 minutes; with AB=0): te-4layer's step, bf16 compile against the
# fused delayed-FP8 block eager and compiled (issue 18's target on it); then the host's time to enqueue a step
# (benchmarks/profile_block.py --cpu), new and old code in HOST_ROUNDS (2) pairs of processes; OLMO=1 adds the
# olmo2-1b block, bf16 compile against FP8 tensorwise fused + compile (~2 minutes). Writes PACK/results.tar.gz (after
# every step) and PACK/summary.txt.
set -u
PACK=${1:?usage: bash scripts/issue18_host_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
if [ "${TESTS:-1}" = 1 ]; then
    packed 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_history.py \
        tests/ops/test_fp8_delayed.py tests/ops/test_fp8_act.py tests/ops/test_fp8.py tests/models/test_fused_fp8.py \
        tests/ops/test_norm_fp8.py tests/models/test_blocks.py tests/models/test_recompute_qk.py \
        tests/models/test_native_gqa.py tests/ops/test_rotary.py tests/ops/test_launch.py \
        -k "${TESTS_K:-not rowwise or packed}"
fi
if [ "${AB:-1}" = 1 ]; then
    OUT="$OUT/ab" ROUNDS=${ROUNDS:-3} PROVIDERS=${PROVIDERS:-fused} bash "$(dirname "$0")/te_fp8_ab_gpu.sh"
    cp "$OUT/ab/summary.txt" "$PACK/" 2>/dev/null
    pack "$PACK"
fi
if [ "${FINAL:-0}" = 1 ]; then
    TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
    packed 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
    packed 160 te-delayed python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed \
        --providers fused,fused+compile:default --out "$OUT/te-delayed"
    for i in $(seq 1 "${HOST_ROUNDS:-2}"); do
        packed 45 "host-new-$i" python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd \
            --providers fused --linear fp8:delayed --cpu --top 8
        [ ${#OLD[@]} -gt 0 ] && packed 45 "host-old-$i" "${OLD[@]}" python3 benchmarks/profile_block.py te-4layer \
            --layers 4 --mode fwdbwd --providers fused --linear fp8:delayed --cpu --top 8
    done
    (cd "$OUT" && grep -H "per step\|ms of kernels" host-*.log) > "$OUT/host.txt"
    if [ "${OLMO:-0}" = 1 ]; then
        OLMO=(olmo2-1b --modes fwdbwd --quick)
        packed 70 olmo-bf16 python3 -m blockfuse bench block "${OLMO[@]}" --providers compile:default \
            --out "$OUT/olmo-bf16"
        packed 70 olmo-fp8 python3 -m blockfuse bench block "${OLMO[@]}" --linear fp8:tensorwise \
            --providers fused+compile:default --out "$OUT/olmo-fp8"
    fi
    { cat "$OUT/host.txt"; grep -h "^| fused\|^| compile" "$OUT"/te-*/*.md "$OUT"/olmo-*/*.md 2>/dev/null; } \
        > "$OUT/summary.txt"
    cp "$OUT/summary.txt" "$PACK/"
    pack "$PACK"
fi
