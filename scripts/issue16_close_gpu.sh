#!/usr/bin/env bash
# Issue 16's last checks on the committed code, in one device call (about 8 minutes):
#
#   bash scripts/issue16_close_gpu.sh OUT
#
# 1. the GPU tests of the dispatch rule and of `blockfuse analyze` (Triton kernels launched by Inductor);
# 2. `blockfuse bench host` for every op (eager and compiled, beside PyTorch, compile of the reference, Liger);
# 3. benchmarks/static_decode_rule.py: static-cache decode under transformers' compile, HF against
#    blockfuse.patch with and without runtime.use_triton's small-input rule, two rounds;
# 4. `blockfuse bench model hf-llama --modes prefill,decode`: HF and blockfuse.patch (timed in turns), each
#    also with a static cache under compile.
# Each step has its own timeout and log under OUT; OUT is tarred by the caller.
set -u
OUT=${1:?usage: bash scripts/issue16_close_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$OUT/env.log" 2>&1
step() {
    local seconds=$1 name=$2
    shift 2
    local began=$SECONDS
    timeout -s INT "$seconds" "$@" > "$OUT/$name.log" 2>&1
    echo "$name exit $? after $((SECONDS - began)) s" | tee -a "$OUT/$name.log"
}
step 150 tests python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py tests/analyze/test_api_gpu.py
step 150 host python3 -m blockfuse bench host --quick --profile rms_norm --out "$OUT/host"
step 150 static-rule python3 benchmarks/static_decode_rule.py
step 170 hf-llama python3 -m blockfuse bench model hf-llama --modes prefill,decode \
    --providers hf-eager,blockfuse,hf-static-compile,blockfuse-static-compile --out "$OUT/hf-llama"
