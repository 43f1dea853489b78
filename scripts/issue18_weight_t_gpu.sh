#!/usr/bin/env bash
# Issue 18, the FP8 weights' transposed casts made in the backward instead of kept from the forward (ops/fp8.py,
# _weight_operands / _dgrad_operands): one GPU, one call (~6 minutes; carry .whl with torchao's wheel):
#   1. the FP8 tests on CUDA;
#   2. te-4layer (4 layers, [8, 2048, 2048]) training step: bf16 compile and torchao tensorwise compiled (the
#      targets' baselines), blockfuse's fused FP8 tensorwise block new and old, default and +recompute.
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue18_weight_t_gpu.sh OUT        (writes OUT/results.tar.gz)
#
# EXTRA_TESTS: more test paths for step 1; CYCLES=1: then the reference-cycle tests right after a compile test in one
# process (scripts/issue18_keep_hp_gpu.sh sets both).
set -u
PACK=${1:?usage: bash scripts/issue18_weight_t_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
step 150 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_fp8_act.py tests/ops/test_fp8.py \
    tests/nn/test_fp8.py tests/models/test_fused_fp8.py ${EXTRA_TESTS:-}
grep -v DEBUG "$OUT/tests.log" | grep -v "^\s*$" | tail -8 > "$OUT/tests-summary.log"
[ "${CYCLES:-0}" = 1 ] && step 120 cycles python3 -m pytest -q -p no:cacheprovider -rfE \
    "tests/ops/test_norm.py::test_torch_compile_fullgraph" tests/models/test_reference_cycles.py
te_fp8_ab
pack "$PACK"
