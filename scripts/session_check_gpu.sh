#!/usr/bin/env bash
# Checks the code changed since the last GPU run, in one call on one GPU (under 10 minutes):
#
#   bash scripts/session_check_gpu.sh OUT
#
# 1. the op, module, model and patching tests on CUDA (spread over 8 processes): the one MLP family
#    (ops/mlp.py, gated.py, linear_act.py), RoPE without its tuning globals, the FP8 casts by the reciprocal;
# 2. benchmarks/fp8_linear.py --profile: the FP8 Linear stack's training step after the cast change;
# 3. benchmarks/norm_fp8.py: LayerNorm / RMSNorm + FP8 at several widths with other tiles (rows x warps);
# 4. `bench block olmo2-1b`: the fused block's time and peak memory after the MLP family change (committed before:
#    benchmarks/results/blocks/block-olmo2-1b.md, fused fwd+bwd 6.64 ms, 641 MiB).
# Each step has its own timeout and log under OUT; everything is packed into OUT/check.tar.gz.
set -u
OUT=${1:?usage: bash scripts/session_check_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 250 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops tests/nn tests/models tests/patching
step 70 fp8-linear python3 benchmarks/fp8_linear.py --quick --profile --out "$OUT/fp8-linear" --providers bf16_compile \
    blockfuse_fp8_tensorwise_eager blockfuse_fp8_rowwise_eager torchao_tensorwise_compile
step 70 norm-fp8 python3 benchmarks/norm_fp8.py --rows 16384 --widths 1152,2048,4096,5120,8192 --forms ln,rms \
    --tiles 2x4,4x4,2x8 --out "$OUT/norm-fp8"
step 80 block python3 -m blockfuse bench block olmo2-1b --quick --providers eager,compile:default,fused,fused+compile:default \
    --modes infer,fwdbwd --out "$OUT/block"
tar czf "$OUT/check.tar.gz" -C "$OUT" --exclude check.tar.gz . 2> /dev/null
