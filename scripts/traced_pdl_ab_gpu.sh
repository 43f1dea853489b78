#!/usr/bin/env bash
# Traced launches without programmatic dependent launch (issue 18's compiled FP8 block): te-4layer, delayed recipe,
# training step, eager and compiled, this checkout's code (new-*) against the code before the change (old-*, from
# _gpu/old/src: `git archive COMMIT src | tar x -C _gpu/old`) in alternating processes, bf16 compile first and last;
# each process compiles cold (its own Inductor cache) and counts torch's "assuming every input is mutated" warnings.
# Then the CUDA tests of the change. One GPU, ~7 minutes; carry .whl:
#
#   OUT=... bash scripts/traced_pdl_ab_gpu.sh                (writes $OUT/results.tar.gz and $OUT/summary.txt)
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
    mkdir -p "$FINAL" && cp "$OUT/summary.txt" "$FINAL/"  # (what came back if the call runs out of time)
}
FP8=(--linear fp8:delayed --providers fused,fused+compile:default)
run bf16-1 env -- --providers compile:default
for round in 1 2; do
    run "new-$round" env -- "${FP8[@]}"
    [ ${#OLD[@]} -gt 0 ] && run "old-$round" "${OLD[@]}" -- "${FP8[@]}"
done
run bf16-2 env -- --providers compile:default
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 4 tests/models/test_fused_fp8.py \
    tests/ops/test_norm_fp8.py -k "inductor or pdl or programmatic or compile"
cat "$OUT/summary.txt"
mkdir -p "$FINAL" && tar czf "$FINAL/results.tar.gz" -C "$OUT" . && cp "$OUT/summary.txt" "$FINAL/"
