#!/usr/bin/env bash
# The fused attention's packed QKV gradient without the concatenation (ops/rotary.py, rotary_packed), one GPU in
# one call (~8 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before, for the A/B (untracked: it travels)
#   bash scripts/rotary_packed_gpu.sh PACK        (writes PACK/results.tar.gz)
#
# 1. the rotary, copy and block tests on CUDA; 2. the bf16 blocks with RoPE and no QK-norm (reordered, te-4layer):
# torch.compile once, then the fused block, new and old code alternated twice; training steps as people run them
# (no CUDA graphs).
set -u
PACK=${1:?usage: bash scripts/rotary_packed_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py tests/ops/test_copy.py \
    tests/models/test_blocks.py
block() {  # block PRESET PROVIDERS: the bench block arguments
    local args=(-m blockfuse bench block "$1" --modes fwdbwd --quick --providers "$2")
    [ "$1" = te-4layer ] && args+=(--layers 4 --shape 8x2048x2048)
    BLOCK=("${args[@]}")
}
for preset in reordered te-4layer; do
    block "$preset" compile:default
    step 150 "$preset-compile" python3 "${BLOCK[@]}" --out "$OUT/$preset-compile"
done
for round in 1 2; do
    for preset in reordered te-4layer; do
        block "$preset" fused
        step 60 "$preset-new$round" python3 "${BLOCK[@]}" --out "$OUT/$preset-new$round"
        [ ${#OLD[@]} -gt 0 ] && step 60 "$preset-old$round" "${OLD[@]}" python3 "${BLOCK[@]}" \
            --out "$OUT/$preset-old$round"
    done
done
pack "$PACK"
