# The roll's host cost with and without programmatic dependent launch, and te-4layer's FP8 delayed step with
# launch.PDL on / off / the code of c737e11, two rounds. From the repository root, as ab.sh (carry .whl and _gpu):
#   bash benchmarks/results/fp8/17-targets-2026-12-02-h200/ab-scripts/ab2.sh PACK
set -u
PACK=$1
OUT=$(mktemp -d)
source scripts/device_python.sh
export PYTHONUNBUFFERED=1
write_env
old_code
step 60 pdl-host python3 "$(dirname "$0")/pdl_host.py"
TE=(bench block te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick --linear fp8:delayed --providers fused)
for round in 1 2; do
    step 40 "te-pdl-$round" python3 "$(dirname "$0")/pdl_bench.py" 1 "${TE[@]}" --out "$OUT/te-pdl-$round"
    step 40 "te-nopdl-$round" python3 "$(dirname "$0")/pdl_bench.py" 0 "${TE[@]}" --out "$OUT/te-nopdl-$round"
    step 40 "te-old-$round" "${OLD[@]}" python3 -m blockfuse "${TE[@]}" --out "$OUT/te-old-$round"
done
pack "$PACK"
