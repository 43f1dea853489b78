#!/usr/bin/env bash
# The GPU tests first, before any benchmark of a session (one GPU, one call, under 10 minutes):
#
#   bash scripts/session_check_gpu.sh PACK        (writes PACK/check.tar.gz)
#
# `pytest -n 12` of the tests that run kernels on CUDA: tests/ops, tests/nn, tests/models, tests/patching and the
# CUDA timer's, tests/bench/test_timing.py (the newest run: benchmarks/results/session-check/2026-11-28-h200-d/; on
# 2026-11-28 the compiled reordered and standard blocks were found wrong by tests/models/test_blocks.py a day after
# the change that broke them, because only the changed files' tests had run:
# benchmarks/results/session-check/2026-11-28-h200/).
# The log keeps pytest's summary and failures without the captured DEBUG lines. Carry .whl (Liger-Kernel,
# torchao) for the tests that compare with them.
set -u
PACK=${1:?usage: bash scripts/session_check_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 545 tests-raw python3 -m pytest -q -p no:cacheprovider -rfE -n 12 --durations=15 tests/ops tests/nn tests/models \
    tests/patching tests/bench/test_timing.py
grep -v "DEBUG" "$OUT/tests-raw.log" > "$OUT/tests.log" && rm "$OUT/tests-raw.log"
tail -30 "$OUT/tests.log"
mkdir -p "$PACK" && tar czf "$PACK/check.tar.gz" -C "$OUT" .
