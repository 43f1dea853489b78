#!/usr/bin/env bash
# The packed RoPE's backward as one opaque op under torch.compile (ops/rotary.py, `blockfuse::rotary_packed_bwd`: the
# q / k / v gradients written into their columns of the QKV gradient, as eagerly, where traced Inductor concatenated
# them), against the code before it (_gpu/old/src: `git archive COMMIT src | tar x -C _gpu/old`). One GPU, carry .whl
# and _gpu:
#
#   [TESTS=1] [ROUNDS=2] bash scripts/issue18_packed_bwd_gpu.sh PACK
#
# TESTS (~2 min): the CUDA tests of the changed paths. Then te-4layer's training step ([8, 2048, 2048], 4 layers):
# bf16 compile (issue 18's baseline) first and last; in ROUNDS alternating fresh processes, new and old code: the
# fused delayed-FP8 block compiled (and eager, new code), and the fused bf16 block compiled. ~7 minutes with ROUNDS=1.
# Writes PACK/results.tar.gz after every step and PACK/summary.txt.
set -u
PACK=${1:?usage: bash scripts/issue18_packed_bwd_gpu.sh PACK}
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
    packed 240 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py \
        tests/analyze/test_api_gpu.py tests/models/test_fused_fp8.py tests/models/test_blocks.py \
        -k "${TESTS_K:-packed or opaque or compile or fused}"
fi
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
packed 60 te-bf16-1 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-1"
for i in $(seq 1 "${ROUNDS:-1}"); do
    packed 150 "fp8-new-$i" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed \
        --providers fused,fused+compile:default --out "$OUT/fp8-new-$i"
    [ ${#OLD[@]} -gt 0 ] && packed 120 "fp8-old-$i" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" \
        --linear fp8:delayed --providers fused+compile:default --out "$OUT/fp8-old-$i"
    packed 90 "bf16-new-$i" python3 -m blockfuse bench block "${TE[@]}" --providers fused+compile:default \
        --out "$OUT/bf16-new-$i"
    [ ${#OLD[@]} -gt 0 ] && packed 90 "bf16-old-$i" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" \
        --providers fused+compile:default --out "$OUT/bf16-old-$i"
done
packed 60 te-bf16-2 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16-2"
(cd "$OUT" && for f in */block-*.md; do echo "== $f"; grep -E "^\|" "$f" | head -8; done) > "$OUT/summary.txt" 2>&1
cp "$OUT/summary.txt" "$PACK/"
pack "$PACK"
