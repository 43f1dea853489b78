#!/usr/bin/env bash
# One GPU job: environment, GPU tests, the op benchmark, then the whole test suite.
#
#   bash scripts/gpu_check.sh OUT_DIR
#
# Run from the repository root on the GPU machine (no network, no install of the project:
# src/ goes on PYTHONPATH; the wheels carried in .whl/, e.g. Liger-Kernel, go to /tmp/site).
# Writes 7 files, at most one folder below OUT_DIR:
#   env.log tests-gpu.log bench.log tests-all.log  ops/ops.json ops/ops.md ops/ops.png
# Each step has its own time limit so the whole job stays under about 9 minutes; the
# benchmark writes ops.json and ops.md after each op, so a cut-off run still leaves results.
set -u
OUT_DIR=${1:?usage: bash scripts/gpu_check.sh OUT_DIR}
mkdir -p "$OUT_DIR/ops"
BEGAN=$SECONDS

source "$(dirname "$0")/device_python.sh"

# step NAME LIMIT_S LOG COMMAND...: run COMMAND under a time limit (SIGINT first, so pytest and the
# benchmark still write what they have), tee its output into LOG, remember its exit code.
STATUS=""
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    echo "=== $name (limit ${limit}s): $*" | tee -a "$log"
    timeout -s INT -k 15 "$limit" "$@" 2>&1 | tee -a "$log"
    local code=${PIPESTATUS[0]}
    echo "=== $name: exit $code after $((SECONDS - BEGAN)) s in all" | tee -a "$log"
    STATUS="$STATUS $name=$code"
}

step env 60 "$OUT_DIR/env.log" python3 -m blockfuse env
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
    2>&1 | tee -a "$OUT_DIR/env.log"
python3 -c "import liger_kernel, importlib.metadata as m; print('liger-kernel', m.version('liger-kernel'))" \
    2>&1 | tee -a "$OUT_DIR/env.log"

# pytest exits 5 when no test is marked gpu: that is no failure.
step tests-gpu 120 "$OUT_DIR/tests-gpu.log" bash -c 'python3 -m pytest tests -m gpu -q; code=$?; exit $((code == 5 ? 0 : code))'
step bench 330 "$OUT_DIR/bench.log" python3 -m blockfuse bench ops --out "$OUT_DIR/ops"
# The whole suite on CUDA, in what is left of about 9 minutes.
step tests-all $((540 - (SECONDS - BEGAN) > 30 ? 540 - (SECONDS - BEGAN) : 30)) "$OUT_DIR/tests-all.log" \
    python3 -m pytest tests -q -x

echo "gpu_check:$STATUS ($((SECONDS - BEGAN)) s)" | tee -a "$OUT_DIR/bench.log"
case "$STATUS" in *=[1-9]*) exit 1 ;; esac
