# te-4layer FP8 delayed step, this checkout against the code of c737e11 (the 1.38x call), with the profiler and in
# three alternating wall rounds. From the repository root, one GPU, carry .whl and _gpu:
#   mkdir -p _gpu/old && git archive c737e11 src | tar x -C _gpu/old
#   bash benchmarks/results/fp8/17-targets-2026-12-02-h200/ab-scripts/ab.sh PACK
set -u
PACK=$1
OUT=$(mktemp -d)
source scripts/device_python.sh
export PYTHONUNBUFFERED=1
write_env
old_code
for v in new old; do
    R=(); [ $v = old ] && R=("${OLD[@]}")
    step 40 "profile-$v" "${R[@]}" python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 45 \
        --providers fused --linear fp8:delayed --json "$OUT/profile-$v.json"
done
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
for round in 1 2 3; do
  for v in new old; do
    R=(); [ $v = old ] && R=("${OLD[@]}")
    step 40 "te-$v-$round" "${R[@]}" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed --providers fused --out "$OUT/te-$v-$round"
  done
done
pack "$PACK"
