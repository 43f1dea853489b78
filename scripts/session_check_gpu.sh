#!/usr/bin/env bash
# Checks the code changed since the last GPU run, in one call on a two-GPU machine (about 8 minutes):
#
#   bash scripts/session_check_gpu.sh OUT
#
# 1. the norm tests (four fixed launcher outputs, statistics shaped x.shape[:-1]) and every `gpu` test;
# 2. the DTensor sharding rules, FSDP2 over the fused stack and the vocab-parallel loss over NCCL
#    (tests/multiprocess.py picks NCCL when two GPUs are present);
# 3. host-inclusive rows: `bench host` for the norms and `bench block reordered` eager / compile default / fused.
# Each step has its own timeout and log under OUT.
set -u
OUT=${1:?usage: bash scripts/session_check_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv >> "$OUT/env.log" 2>&1
step 150 tests-norm python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_norm.py tests/ops/test_layer_norm_gelu.py tests/analyze/test_api_gpu.py
step 200 tests-gpu python3 -m pytest -q -p no:cacheprovider -rfE tests -m gpu
step 200 tests-nccl python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_sharding.py tests/models/test_fsdp.py \
    tests/ops/test_cross_entropy_parallel.py tests/patching/test_loss_fsdp.py
step 90 host python3 -m blockfuse bench host --quick --op rms_norm layer_norm --out "$OUT/host"
step 120 block python3 -m blockfuse bench block reordered --quick --providers eager,compile:default,fused,fused+compile:default \
    --modes fwdbwd --out "$OUT/block"
