#!/usr/bin/env bash
# Issue 18's targets on the code as committed, every baseline in the same call (one GPU, ~8 minutes; carry .whl
# with torchao's wheel):
#
#   [TESTS=0|only] [QUICK=0] [STEPS=a,b] bash scripts/issue18_close_gpu.sh PACK    (writes PACK/results.tar.gz after
#   every step; STEPS: only those steps, by the names below: norm-fp8, linear, te-bf16, te-torchao, te-rowwise,
#   te-delayed, olmo-bf16, olmo-fp8, olmo-fp8-delayed, te-tensorwise)
#
# QUICK=0: the Linear stack and the block rows without --quick (its 25 / 50 ms give a 24 ms step 3 warm-up calls
# and 7 timed ones; the eager FP8 step measured 1.19-1.37x bf16 compile with it and 1.367-1.374x without,
# fp8/33-h100-rounds-2026-12-06/).
#
# 1. the FP8 tests on CUDA (TESTS=0 leaves them to another call, TESTS=only runs nothing else);
# 2. the norms / SwiGLU + FP8 forward at [16384, 4096] against a device copy of the same bytes, 3 rounds;
# 3. the Linear stack (4 x QKV, out, fc1, GELU, fc2 at [16384, 2048]): bf16 compile, blockfuse FP8 eager (each
#    recipe), torchao tensorwise compiled;
# 4. te-4layer ([8, 2048, 2048], 4 layers), inference and training step: bf16 compile, torchao tensorwise compiled,
#    the fused block with each FP8 recipe (eager; the delayed recipe compiled too, in the same process);
# 5. the olmo2-1b block's training step: bf16 compile (default) against FP8 tensorwise and delayed fused + compile.
set -u
PACK=${1:?usage: bash scripts/issue18_close_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
want() {  # (budget, name, command...: the step unless STEPS leaves it out)
    [ -z "${STEPS:-}" ] || [[ ",$STEPS," == *",$2,"* ]] || return 0
    packed "$@"
}
[ "${TESTS:-1}" = 0 ] || packed 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_delayed.py \
    tests/ops/test_fp8.py tests/ops/test_fp8_act.py tests/ops/test_gated_fp8.py tests/ops/test_norm_fp8.py \
    tests/ops/test_fp8_weights.py tests/models/test_fused_fp8.py
[ "${TESTS:-1}" = only ] && exit 0
want 60 norm-fp8 python3 benchmarks/norm_fp8.py --forms ln,rms,rms-pre,ln-post,swiglu --widths 4096 --rows 16384 \
    --rounds 3 --out "$OUT/norm-fp8"
LINEAR=(benchmarks/fp8_linear.py --out "$OUT/linear")
[ "${QUICK:-1}" = 0 ] || LINEAR+=(--quick)
want 120 linear python3 "${LINEAR[@]}" --providers bf16_compile blockfuse_fp8_tensorwise_eager \
    blockfuse_fp8_rowwise_eager blockfuse_fp8_delayed_eager torchao_tensorwise_compile
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes infer,fwdbwd)
[ "${QUICK:-1}" = 0 ] || TE+=(--quick)  # (QUICK=0: 100 ms of warm-up and 400 of samples a row; fp8/33-*/long/)
want 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
want 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise \
    --providers compile:default --out "$OUT/te-torchao"
want 40 te-rowwise python3 -m blockfuse bench block "${TE[@]}" --linear fp8:rowwise --providers fused \
    --out "$OUT/te-rowwise"
want 160 te-delayed python3 -m blockfuse bench block "${TE[@]}" --linear fp8:delayed \
    --providers fused,fused+compile:default --out "$OUT/te-delayed"
OLMO=(olmo2-1b --modes fwdbwd)
[ "${QUICK:-1}" = 0 ] || OLMO+=(--quick)
# (OLMO_BF16=compile:default,compile:max-autotune-no-cudagraphs: the best bf16 mode too, up to 6 minutes of autotuning;
# it was 0.9% faster than default on the H200, fp8/3-olmo2-*)
want "${OLMO_BF16_S:-70}" olmo-bf16 python3 -m blockfuse bench block "${OLMO[@]}" \
    --providers "${OLMO_BF16:-compile:default}" --out "$OUT/olmo-bf16"
want 70 olmo-fp8 python3 -m blockfuse bench block "${OLMO[@]}" --linear fp8:tensorwise \
    --providers fused+compile:default --out "$OUT/olmo-fp8"
want 70 olmo-fp8-delayed python3 -m blockfuse bench block "${OLMO[@]}" --linear fp8:delayed \
    --providers fused+compile:default --out "$OUT/olmo-fp8-delayed"
want 40 te-tensorwise python3 -m blockfuse bench block "${TE[@]}" --linear fp8:tensorwise --providers fused \
    --out "$OUT/te-tensorwise"
