#!/usr/bin/env bash
# The op path's GPU tests in one call of about 5 minutes: every test marked `gpu`, and each op's
# torch.compile test on Inductor (on CUDA the launchers are triton_ops that Inductor launches itself).
#
#   bash scripts/issue16_tests_gpu.sh OUT
#
# Writes OUT/tests-gpu.log.
set -u
OUT=${1:?usage: bash scripts/issue16_tests_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
timeout -s INT -k 10 ${LIMIT:-195} python3 -m pytest -q -p no:cacheprovider -rfE tests -m gpu 2>&1 | tee "$OUT/tests-gpu.log" | tail -25
timeout -s INT -k 10 ${LIMIT2:-85} python3 -m pytest -q -p no:cacheprovider -rfE \
    "tests/ops/test_norm.py::test_torch_compile_fullgraph" "tests/ops/test_rotary.py::test_torch_compile_every_form" \
    "tests/ops/test_bias_dropout_add.py::test_torch_compile_fullgraph" "tests/ops/test_gated.py::test_torch_compile_fullgraph" \
    "tests/ops/test_linear_act.py::test_compiles_fullgraph" -k "inductor and not triton_tma and not auto" 2>&1 | tee -a "$OUT/tests-gpu.log" | tail -15
