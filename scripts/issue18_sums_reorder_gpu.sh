#!/usr/bin/env bash
# Issue 18, one GPU call (carry .whl; _gpu/old/src: `git archive e4c7fa9 src | tar x -C _gpu/old`, the partial sums
# on their old tile; _gpu/new/src: `git archive 617c923 src | tar x -C _gpu/new`, the reverted opaque packed RoPE
# backward):
#
#   bash scripts/issue18_sums_reorder_gpu.sh PACK                     (writes PACK/results.tar.gz after every step)
#
# 1. the CUDA tests of the partial sums' users (the delayed casts, the rolls);
# 2. te-4layer's delayed-FP8 step under the profiler, the sums on their new tile (this checkout) and the old;
# 3. what is alive at the compiled FP8 step's peak (benchmarks/memory_block.py) with the opaque packed backward,
#    Inductor's peak-memory reordering on (its default) and off, and this checkout's code; each run's generated
#    backward wrapper kept (inductor/) to read its order;
# 4. te-4layer's step on this checkout: bf16 compile (the target's baseline), fused delayed FP8 eager and compiled.
set -u
PACK=${1:?usage: bash scripts/issue18_sums_reorder_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
packed 100 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_history.py \
    tests/ops/test_fp8_delayed.py tests/ops/test_reduce.py
old_code
PROF=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --providers fused --linear fp8:delayed --top 60)
packed 60 profile-main python3 "${PROF[@]}"
[ ${#OLD[@]} -gt 0 ] && packed 60 profile-old "${OLD[@]}" python3 "${PROF[@]}"
MEM="import sys, runpy, torch._inductor.config as c; c.reorder_for_peak_memory = sys.argv.pop(1) == 'on'; \
sys.path.insert(0, 'benchmarks'); sys.argv[0] = 'benchmarks/memory_block.py'; \
runpy.run_path(sys.argv[0], run_name='__main__')"
ARGS=(te-4layer --layers 4 --impl fused --compile default --linear fp8:delayed --top 30)
memory() {  # NAME on|off PYTHONPATH-first
    packed 120 "memory-$1" env TORCHINDUCTOR_CACHE_DIR="$OUT/cache-$1" PYTHONPATH="$3:$PYTHONPATH" \
        python3 -c "$MEM" "$2" "${ARGS[@]}"
    mkdir -p "$OUT/inductor/$1"
    grep -l "cudnn_attention_backward" -r "$OUT/cache-$1" --include=*.py | xargs -r -I{} cp {} "$OUT/inductor/$1/"
    rm -rf "$OUT/cache-$1"
}
[ -d _gpu/new/src ] && memory new-on on "$PWD/_gpu/new/src"
[ -d _gpu/new/src ] && memory new-off off "$PWD/_gpu/new/src"
memory main-on on "$PWD/src"
pack "$PACK"
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
packed 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
packed 120 te-fp8 python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed \
    --providers fused,fused+compile:default --out "$OUT/te-fp8"
(cd "$OUT" && for f in */block-*.md; do echo "== $f"; grep -E "^\| (fused|compile)" "$f" | head -4; done) \
    > "$OUT/summary.txt" 2>&1
cp "$OUT/summary.txt" "$PACK/"
pack "$PACK"
