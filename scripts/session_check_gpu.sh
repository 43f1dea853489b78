#!/usr/bin/env bash
# Checks the code changed since the last GPU run, in one call on one GPU (under 10 minutes):
#
#   bash scripts/session_check_gpu.sh OUT
#
# 1. the tests of what changed, on CUDA (8 processes): the norms (the FP8 forward's tile-shaped weight loads, the
#    backward's depth rule, now counting ds in pre mode), the FP8 blocks, the block benchmark's torchao option
#    (carry torchao's wheel), the reference-cycle and memory-snapshot tests;
# 2. the pre-residual backward under the rule that counts ds (3 stages, as before the rule) against the fixed
#    3 stages at 1152 and 4096: equal is the expected result (the sweep had 0.78 -> 0.67 at 1152 with the first
#    version of the rule), and the plain forms at 2880 / 4304 once more;
# 3. `bench ops --op add_layer_norm` at the sweep's 1152 cell against the peers.
# Each step has its own timeout and log under OUT; everything is packed into OUT/check.tar.gz.
set -u
OUT=${1:?usage: bash scripts/session_check_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 240 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py tests/ops/test_norm_fp8.py \
    tests/models/test_fused_fp8.py tests/models/test_reference_cycles.py tests/bench/test_block.py \
    tests/bench/test_memory.py
step 120 tiles python3 benchmarks/norm_tiles.py --out "$OUT/tiles" --forms ln-pre,ln,rms --fwd '' \
    --bwd '4096;512;2;3' --shapes 8192x1152,16384x4096,8192x2880,8192x4304
step 90 add-ln python3 -m blockfuse bench ops --op add_layer_norm --shapes 8192x1152 8192x4096 --modes fwd,fwdbwd \
    --quick --out "$OUT/add-ln"
tar czf "$OUT/check.tar.gz" -C "$OUT" --exclude check.tar.gz . 2> /dev/null
