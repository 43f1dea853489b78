#!/usr/bin/env bash
# The packed fp16 GELU derivative's CUDA tests that have not run on a GPU yet (2026-12-05), one call (~2 minutes):
#   bash scripts/gelu_f16x2_check_gpu.sh PACK        (writes PACK/results.tar.gz)
# tests/ops/test_layer_norm_gelu.py whole (test_gelu_inputs_far_from_the_curve among them) and the GELU tests of
# tests/ops/test_norm.py, on CUDA.
set -u
PACK=${1:?usage: bash scripts/gelu_f16x2_check_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_layer_norm_gelu.py \
    tests/ops/test_norm.py -k "gelu or far_from"
pack "$PACK"
