#!/usr/bin/env bash
# Checks the code changed since the last GPU run, in one call on one GPU (under 10 minutes):
#
#   bash scripts/session_check_gpu.sh OUT
#
# 1. the op, module, model and patching tests on CUDA (spread over 8 processes): the MLP's gate|up GEMMs as an
#    opaque op (Inductor's padded pre-activation, ops/mlp.py), cached empty outputs of directly called launchers,
#    the FP8 linear's CPU fallback for rowwise scales;
# 2. `bench host --quick` of the norms: the launchers' host cost after those changes;
# 3. `bench block siglip2` (fused, fused + compile): the 4304-wide MLP's gradients under torch.compile at full size.
# Each step has its own timeout and log under OUT; everything is packed into OUT/check.tar.gz.
set -u
OUT=${1:?usage: bash scripts/session_check_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 300 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops tests/nn tests/models tests/patching
step 45 host python3 -m blockfuse bench host --quick --op rms_norm layer_norm --out "$OUT/host"
step 70 block python3 -m blockfuse bench block siglip2 --quick --providers eager,fused,fused+compile:default \
    --modes fwdbwd --out "$OUT/block"
tar czf "$OUT/check.tar.gz" -C "$OUT" --exclude check.tar.gz . 2> /dev/null
