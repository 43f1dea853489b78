#!/usr/bin/env bash
# Issue 18, tensorwise FP8 casts that read their input once: the MLP's activation (ops/fp8_act.py) and the norms
# before the QKV and gate|up layers (norm_for_tensorwise_projection) fold the amaxes; one GPU in one call
# (~7 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before, for the A/B (untracked: it travels)
#
# Run 1 (2026-11-28, old 28d865a): benchmarks/results/fp8/5-act-amax-2026-11-28-h200/. Run 2 (old 16f5bc8, carrying
# .whl with torchao's wheel, NO_TESTS=1 after the session's all-tests check): the backward that writes the gradient
# over the pre-activation and `fp8:tensorwise+recompute`, benchmarks/results/fp8/6-inplace-2026-11-28-h200/.
#   [NO_TESTS=1] bash scripts/issue18_act_amax_gpu.sh OUT        (writes OUT/results.tar.gz)
#
# 1. the FP8 and activation tests on CUDA; 2. te-4layer (4 layers, [8, 2048, 2048]) training step: bf16 compile (the
# target's baseline), torchao tensorwise compiled, blockfuse's fused FP8 tensorwise block, new and old alternated
# twice; 3. where the fused FP8 step's GPU time goes, new and old (the amax passes it drops, the new kernels' time);
# 4. norm + FP8 at [16384, 4096] (benchmarks/norm_fp8.py), new and old twice: tensorwise's atomics skipped where
# the amax is already larger (fp8.fold_amax). The bf16 blocks' A/B: scripts/rotary_packed_gpu.sh.
set -u
PACK=${1:?usage: bash scripts/issue18_act_amax_gpu.sh OUT}
# everything is written to a work folder and packed into OUT/results.tar.gz: the device tool returns a few files
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
# NO_TESTS=1 skips the tests (when scripts/session_check_gpu.sh ran them in the same session)
[ -z "${NO_TESTS:-}" ] && step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_act.py tests/ops/test_fp8.py \
    tests/nn/test_fp8.py tests/models/test_fused_fp8.py tests/ops/test_gated.py tests/ops/test_norm_fp8.py
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
step 100 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
step 100 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise --providers compile:default \
    --out "$OUT/te-torchao"
for round in 1 2; do
    step 60 "te-new$round" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:tensorwise --providers fused \
        --out "$OUT/te-new$round"
    if [ ${#OLD[@]} -gt 0 ]; then
        step 60 "te-old$round" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" --linear fp8:tensorwise \
            --providers fused --out "$OUT/te-old$round"
    fi
done
# the pre-activation recomputed in the backward instead of kept (memory for one more FP8 GEMM a layer)
step 60 te-recompute python3 -m blockfuse bench block "${TE[@]}" --linear fp8:tensorwise+recompute --providers fused \
    --out "$OUT/te-recompute"
PROFILE=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 30 --providers fused --linear fp8:tensorwise)
step 60 profile-new python3 "${PROFILE[@]}" --json "$OUT/profile-new.json"
[ ${#OLD[@]} -gt 0 ] && step 60 profile-old "${OLD[@]}" python3 "${PROFILE[@]}" --json "$OUT/profile-old.json"
for round in 1 2; do
    NORMS=(benchmarks/norm_fp8.py --rows 16384 --widths 4096 --forms rms,ln,rms-pre,swiglu)
    step 60 "norms-new$round" python3 "${NORMS[@]}" --out "$OUT/norms-new$round"
    [ ${#OLD[@]} -gt 0 ] && step 60 "norms-old$round" "${OLD[@]}" python3 "${NORMS[@]}" --out "$OUT/norms-old$round"
done
pack "$PACK"
