#!/usr/bin/env bash
# Issue 18: the packed RoPE backward writing the delayed QKV layer's e5m2 gradient operands itself
# (ops/rotary.py's _rotary_bwd_fp8: no bf16 QKV gradient written and read back by the layer's cast, two launches a
# layer fewer), against the code before it (_gpu/old/src: `git archive COMMIT src | tar x -C _gpu/old`). One GPU,
# carry .whl and _gpu:
#
#   PART=1 bash scripts/issue18_rope_fp8_gpu.sh PACK   # CUDA tests, then each step's kernels new / old (~4 min)
#   PART=2 bash scripts/issue18_rope_fp8_gpu.sh PACK   # te-4layer's step, new / old in alternating processes (~5 min)
#
# PART=1 also runs the packed fp16 GELU derivative's CUDA tests queued on 2026-12-05 (scripts/gelu_f16x2_check_gpu.sh).
# Writes PACK/results.tar.gz (after every step).
set -u
PACK=${1:?usage: PART=1|2 bash scripts/issue18_rope_fp8_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
if [ "${PART:-1}" = 1 ]; then
    packed 120 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_delayed.py \
        tests/ops/test_fp8_history.py
    packed 120 tests-rope-block python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py \
        tests/models/test_fused_fp8.py -k "fp8 or packed or delayed"
    packed 120 tests-gelu python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_layer_norm_gelu.py \
        tests/ops/test_norm.py -k "gelu or far_from"
    PROFILE=(python3 benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 40 --providers fused
             --linear fp8:delayed --bytes --cpu)
    packed 90 bytes-new "${PROFILE[@]}"
    [ ${#OLD[@]} -gt 0 ] && packed 90 bytes-old "${OLD[@]}" "${PROFILE[@]}"
fi
if [ "${PART:-1}" = 2 ]; then
    OUT="$OUT/ab" ROUNDS=${ROUNDS:-3} PROVIDERS=${PROVIDERS:-fused} TORCHAO=${TORCHAO:-1} \
        bash "$(dirname "$0")/te_fp8_ab_gpu.sh"
    cp "$OUT/ab/summary.txt" "$PACK/" 2>/dev/null
    cp "$OUT/ab/results.tar.gz" "$PACK/ab.tar.gz" 2>/dev/null
    pack "$PACK"
fi
