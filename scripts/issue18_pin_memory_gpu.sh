#!/usr/bin/env bash
# Issue 18, one GPU call (carry .whl; _gpu/new/src: `git archive 617c923 src | tar x -C _gpu/new`, the opaque packed
# RoPE backward that was reverted):
#
#   [ROUNDS=2] bash scripts/issue18_pin_memory_gpu.sh PACK            (writes PACK/results.tar.gz after every step)
#
# 1. memory: what is alive at the peak of te-4layer's compiled delayed-FP8 step (benchmarks/memory_block.py, one
#    process each), the code on main against _gpu/new's (617c923: +122 MiB in `bench block`'s peak);
# 2. the partial sums' launch settings (benchmarks/sum_partials_tiles.py), and the step's kernels with the rule on main
#    against _gpu/old's (`git archive e4c7fa9 src | tar x -C _gpu/old`: one tile for every sum);
# 3. the host: te-4layer's eager delayed-FP8 fused step in fresh processes, ROUNDS times each unpinned and pinned to
#    two cores (`taskset -c 2,3`), bf16 compile first and last (the target's baseline).
set -u
PACK=${1:?usage: bash scripts/issue18_pin_memory_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
(lscpu; nproc; cat /proc/loadavg; nvidia-smi topo -m) > "$OUT/machine.log" 2>&1
MEM=(benchmarks/memory_block.py te-4layer --layers 4 --impl fused --compile default --linear fp8:delayed --top 30)
packed 120 memory-main python3 "${MEM[@]}"
[ -d _gpu/new/src ] && packed 120 memory-new env PYTHONPATH="$PWD/_gpu/new/src:$PYTHONPATH" python3 "${MEM[@]}"
packed 90 sum-tiles python3 benchmarks/sum_partials_tiles.py --out "$OUT/sum-tiles.json"
old_code
PROF=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --providers fused --linear fp8:delayed --top 60)
packed 60 profile-main python3 "${PROF[@]}"
[ ${#OLD[@]} -gt 0 ] && packed 60 profile-old "${OLD[@]}" python3 "${PROF[@]}"
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
packed 60 te-bf16-1 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-1"
for i in $(seq 1 "${ROUNDS:-2}"); do
    for pin in none 2,3; do
        name=fp8-${pin//,/-}-$i
        [ "$pin" = none ] || name=fp8-pin-${pin//,/-}-$i
        run=(python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed --providers fused --out "$OUT/$name")
        [ "$pin" = none ] || run=(taskset -c "$pin" "${run[@]}")
        packed 50 "$name" "${run[@]}"
    done
done
packed 60 te-bf16-2 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-2"
(cd "$OUT" && for f in */block-*.md; do echo "== $f"; grep -E "^\| (fused|compile)" "$f" | head -4; done) \
    > "$OUT/summary.txt" 2>&1
cp "$OUT/summary.txt" "$PACK/"
pack "$PACK"
