#!/usr/bin/env bash
# Checks the code changed since the last GPU run, in one call on one GPU (under 10 minutes):
#
#   bash scripts/session_check_gpu.sh OUT
#
# 1. FP8 (issue 18): the FP8 tests on CUDA, then benchmarks/fp8_linear.py (bf16 / blockfuse / torchao FP8 linear
#    stacks; torchao when its wheel is carried in .whl/) and benchmarks/norm_fp8.py (norms quantizing as they write);
# 2. RoPE's launch with alignment hints: benchmarks/rotary_head_dims.py (old / new / compile, checked to 1 ulp);
# 3. the norm tests on CUDA after the launch rule's tidy, and the host-inclusive norm rows (`bench host --quick`).
# Each step has its own timeout and log under OUT; everything is packed into OUT/check.tar.gz.
set -u
OUT=${1:?usage: bash scripts/session_check_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import torchao; print('torchao', torchao.__version__)" >> "$OUT/env.log" 2>&1
step 140 tests-fp8 python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_fp8.py tests/nn/test_fp8.py \
    tests/ops/test_norm_fp8.py tests/ops/test_gated_fp8.py
step 120 fp8-linear python3 benchmarks/fp8_linear.py --quick --out "$OUT/fp8-linear"
step 50 norm-fp8 python3 benchmarks/norm_fp8.py --rows 16384 --widths 4096 --warps 4,8 --out "$OUT/norm-fp8"
step 90 rotary python3 benchmarks/rotary_head_dims.py --out "$OUT/rotary"
step 100 tests-norm python3 -m pytest -q -p no:cacheprovider -rfE -x tests/ops/test_norm.py
step 50 host python3 -m blockfuse bench host --quick --op rms_norm layer_norm --out "$OUT/host"
tar czf "$OUT/check.tar.gz" -C "$OUT" --exclude check.tar.gz . 2> /dev/null
