#!/usr/bin/env bash
# Issue 18: the delayed recipe's kernels with column sums (the activation's backward, the gradients' casts) taking
# several row tiles a program, their sums and amax reduced once (fp8_act.BWD_DELAYED_ROWS, fp8.SUM_ROWS). One GPU,
# carry .whl (and _gpu for the old code, `git archive COMMIT src | tar x -C _gpu/old`):
#
#   [TESTS=1] [SWEEP=1] [AB=0 [ROUNDS=2]] [BYTES=0] bash scripts/issue18_sums_gpu.sh PACK
#
# TESTS (~2 min): the CUDA tests of the delayed recipe. SWEEP (~3-4 min): benchmarks/fp8_delayed_tiles.py --iters
# over TILES_ARG x ITERS_ARG. AB (~3 min a round): te-4layer's training step, bf16 compile then the fused delayed-FP8
# block new and old code in alternating fresh processes (eager; +compiled with COMPILED=1). BYTES: the step's
# launches against a copy (benchmarks/profile_block.py --bytes). Writes PACK/results.tar.gz after every step.
set -u
PACK=${1:?usage: bash scripts/issue18_sums_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
packed() {
    step "$@"
    pack "$PACK"
}
if [ "${TESTS:-1}" = 1 ]; then
    packed 240 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_delayed.py \
        tests/ops/test_fp8_act.py tests/ops/test_fp8_history.py tests/models/test_fused_fp8.py tests/ops/test_fp8.py \
        -k "${TESTS_K:-delayed or history or act or sums or fused}"
fi
if [ "${SWEEP:-1}" = 1 ]; then
    packed 330 sweep python3 benchmarks/fp8_delayed_tiles.py --iters "${ITERS_ARG:-1,2,4,8}" \
        --tiles "${TILES_ARG:-64,64,4;64,32,4;32,64,4;64,64,8;128,64,2;128,64,4;64,128,8}" --out "$OUT/sweep.json"
fi
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
PROVIDERS=fused
[ "${COMPILED:-0}" = 1 ] && PROVIDERS=fused,fused+compile:default
if [ "${AB:-0}" = 1 ]; then
    packed 60 te-bf16-1 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-1"
    for i in $(seq 1 "${ROUNDS:-2}"); do
        packed 120 "te-new-$i" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed \
            --providers "$PROVIDERS" --out "$OUT/te-new-$i"
        [ ${#OLD[@]} -gt 0 ] && packed 120 "te-old-$i" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" \
            --linear fp8:delayed --providers "$PROVIDERS" --out "$OUT/te-old-$i"
    done
    packed 60 te-bf16-2 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-2"
    (cd "$OUT" && grep -H "ms" te-*/*.md | grep -i "fwdbwd\|train" ) > "$OUT/summary.txt" 2>&1
fi
if [ "${BYTES:-0}" = 1 ]; then
    packed 90 bytes-new python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 30 \
        --providers fused --linear fp8:delayed --bytes --cpu
    [ ${#OLD[@]} -gt 0 ] && packed 90 bytes-old "${OLD[@]}" python3 benchmarks/profile_block.py te-4layer --layers 4 \
        --mode fwdbwd --top 30 --providers fused --linear fp8:delayed --bytes --cpu
fi
