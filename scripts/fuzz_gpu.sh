#!/usr/bin/env bash
# The robustness fuzz (benchmarks/fuzz_ops.py) on one GPU's compiled kernels, every group, its leading shapes also up
# to thousands of rows (GPU_LEADS), in SHARDS processes side by side (each case's new kernels compile first: most of a
# case's time); then the CUDA tests named in TESTS (default: the paths changed since the last GPU run), one process.
#
#   bash scripts/fuzz_gpu.sh PACK        (writes PACK/results.tar.gz; SEED=21 SHARDS=8 LIMIT_S=360, FUZZ_GROUPS=a,b: those only)
set -u
PACK=${1:?usage: bash scripts/fuzz_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SEED=${SEED:-21}
SHARDS=${SHARDS:-8}
mkdir -p "$OUT/fuzz"
began=$SECONDS
for i in $(seq 0 $((SHARDS - 1))); do
    timeout -s INT -k 10 "${LIMIT_S:-360}" python3 benchmarks/fuzz_ops.py --seed "$SEED" --shard "$i/$SHARDS" \
        ${FUZZ_GROUPS:+--groups "$FUZZ_GROUPS"} \
        --out "$OUT/fuzz/s$SEED-$i.json" > "$OUT/fuzz/s$SEED-$i.log" 2>&1 &
done
wait
echo "fuzz: $SHARDS processes, $((SECONDS - began)) s" | tee "$OUT/fuzz/summary.txt"
python3 benchmarks/fuzz_ops.py --summarize "$OUT"/fuzz/s"$SEED"-*.json | tee -a "$OUT/fuzz/summary.txt"
pack "$PACK"
T=tests/ops
N=$T/test_norm.py
TESTS=${TESTS-$N::test_scalar_rows_rule $N::test_scalar_rows_take_their_rule_and_match_the_reference
    $N::test_scalar_row_chunks_match_the_reference $N::test_scalar_whole_row_in_kernel_weights_match_the_reference
    $N::test_scalar_whole_row_weight_kernel_matches_the_reference
    $T/test_layer_norm_gelu.py::test_scalar_rows_in_the_plain_forms_tiles
    $T/test_layer_norm_gelu.py::test_scalar_rows_keep_narrow_tails_pieces $T/test_fp8.py}
if [ -n "$TESTS" ]; then
    # shellcheck disable=SC2086
    packed "${TESTS_S:-150}" tests python3 -m pytest -q -rfE -p no:cacheprovider $TESTS
fi
