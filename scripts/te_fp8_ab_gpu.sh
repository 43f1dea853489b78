#!/usr/bin/env bash
# te-4layer's FP8 training step (issue 18), this checkout's code (new-*) against the code before a change (old-*,
# from _gpu/old/src: `git archive COMMIT src | tar x -C _gpu/old`) in alternating processes, bf16 compile first and
# last; recipe "delayed", eager and compiled. Each process compiles cold (its own Inductor cache) and counts torch's
# "assuming every input is mutated" warnings (a kernel its mutation analysis cannot read). Then the CUDA tests
# (TESTS: test files, TESTS_K: a -k expression) and, with PROFILE=1, the new code's kernels eager and compiled
# (profile_block.py). One GPU, ~6-9 minutes; carry .whl:
#
#   OUT=... [ROUNDS=2] [OLD_PROVIDERS=...] [TORCHAO=1] [TENSORWISE=1] [PROFILE=1] [TESTS="FILES" [TESTS_K="..."]] \
#       bash scripts/te_fp8_ab_gpu.sh
#
# writes $OUT/results.tar.gz and $OUT/summary.txt (the summary after each process, should the call run out of time).
# PROVIDERS (default fused,fused+compile:default): the new rows'; OLD_PROVIDERS (default: PROVIDERS) the old code's.
# TORCHAO=1 adds torchao's tensorwise FP8 compiled (the memory and speed target's baseline) after the second bf16
# process;
# TENSORWISE=1 then the recipe "tensorwise" compiled, new and old code.
set -u
FINAL=${OUT:?set OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
run() {  # run NAME [env...] -- BENCH-ARGS...: one process, a fresh Inductor cache, warnings counted
    local name=$1 prefix=()
    shift
    while [ "$1" != "--" ]; do prefix+=("$1"); shift; done
    shift
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout -s INT -k 10 150 "${prefix[@]}" python3 -m blockfuse bench block \
        "${TE[@]}" "$@" --out "$OUT/$name" > "$OUT/$name.raw" 2>&1
    echo "$name exit $?" >> "$OUT/summary.txt"
    echo "$name assumed-mutated warnings: $(grep -c 'assuming every input is mutated' "$OUT/$name.raw")" \
        >> "$OUT/summary.txt"
    grep -v "triton_kernel_wrap.py\|^Traceback\|^  " "$OUT/$name.raw" > "$OUT/$name.log"
    rm "$OUT/$name.raw"
    grep -h "^| fused\|^| compile" "$OUT/$name"/*.md >> "$OUT/summary.txt" 2>/dev/null
    mkdir -p "$FINAL" && cp "$OUT/summary.txt" "$FINAL/"
}
PROVIDERS=${PROVIDERS:-fused,fused+compile:default}
run bf16-1 env -- --providers compile:default
for round in $(seq 1 "${ROUNDS:-2}"); do
    run "new-$round" env -- --linear fp8:delayed --providers "$PROVIDERS"
    [ ${#OLD[@]} -gt 0 ] && run "old-$round" "${OLD[@]}" -- --linear fp8:delayed \
        --providers "${OLD_PROVIDERS:-$PROVIDERS}"
done
run bf16-2 env -- --providers compile:default
[ "${TORCHAO:-0}" = 1 ] && run torchao env -- --linear torchao:tensorwise --providers compile:default
if [ "${TENSORWISE:-0}" = 1 ]; then
    run tensorwise-new env -- --linear fp8:tensorwise --providers fused+compile:default
    [ ${#OLD[@]} -gt 0 ] && run tensorwise-old "${OLD[@]}" -- --linear fp8:tensorwise --providers fused+compile:default
fi
if [ -n "${TESTS:-}" ]; then
    # shellcheck disable=SC2086
    step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 4 $TESTS -k "${TESTS_K:-not nothing}"
fi
if [ "${PROFILE:-0}" = 1 ]; then
    step 150 profile python3 benchmarks/profile_block.py te-4layer --layers 4 --linear fp8:delayed \
        --providers "$PROVIDERS" --top 80 --json "$OUT/profile.json"
fi
cat "$OUT/summary.txt"
mkdir -p "$FINAL" && tar czf "$FINAL/results.tar.gz" -C "$OUT" . && cp "$OUT/summary.txt" "$FINAL/"
