#!/usr/bin/env bash
# After scripts/issue22_rows_gpu.sh (the forward's rows a program from the row count): one GPU, one call (~4 minutes;
# carry .whl):
#   1. the norm tests on CUDA (the rule's tiles run at every row count the tests use);
#   2. the reference-cycle test right after a torch.compile test in one process (the order that failed on
#      2026-11-28: benchmarks/results/session-check/2026-11-28-h200-b/), with its Dynamo reset;
#   3. data for the next rule: the forward's warps (elements a warp 256 / 512 / 1024) and rows (tile elements
#      2048 / 4096) at [2048, 2048-5120], where torch.compile's RMSNorm still leads, and at the listed [16384, 4096].
#
#   bash scripts/issue22_rows_check_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_rows_check_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py tests/ops/test_norm_fp8.py \
    tests/ops/test_layer_norm_gelu.py tests/nn/test_norm.py
grep -v DEBUG "$OUT/tests.log" | tail -5 > "$OUT/tests-summary.log"
step 150 cycles python3 -m pytest -q -p no:cacheprovider -rfE "tests/ops/test_norm.py::test_torch_compile_fullgraph" \
    tests/models/test_reference_cycles.py
step 120 warps python3 benchmarks/norm_tiles.py --no-check --bwd '' --fwd '2048,4096;256,512,1024' --forms rms,ln \
    --shapes 2048x2048,2048x3072,2048x4096,2048x5120,16384x4096 --out "$OUT/warps"
pack "$PACK"
