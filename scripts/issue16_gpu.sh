#!/usr/bin/env bash
# The op-path issue's GPU run, in one call of under 10 minutes:
#
#   bash scripts/issue16_gpu.sh OUT
#
# 1. what Inductor generates for blockfuse ops (benchmarks/inductor_op_code.py);
# 2. `blockfuse bench host` (host time per call, eager and under torch.compile, and where it goes);
# 3. the `reordered` block at [4, 2048, 1024] and [1, 512, 1024], training step and inference, eager /
#    torch.compile default / fused / fused + torch.compile default (no CUDA graphs);
# 4. Hugging Face Llama greedy generation (HF, Liger-Kernel, blockfuse.patch);
# 5. the GPU tests of the op path (cached launch, Inductor launching blockfuse kernels, compiled gated MLP).
# Each step has its own time limit; everything goes into OUT/results.tgz (repacked after each step, so a
# stopped run keeps what it measured). Wheels carried in .whl/ (Liger-Kernel) go to /tmp/site.
set -u
OUT=${1:?usage: bash scripts/issue16_gpu.sh OUT}
RES=/tmp/issue16
rm -rf "$RES" && mkdir -p "$RES" "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
BEGAN=$SECONDS

pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
step() {
    local limit=$1 name=$2
    shift 2
    echo "=== $name (limit ${limit} s, at $((SECONDS - BEGAN)) s): $*"
    timeout -s INT -k 10 "$limit" "$@" > "$RES/$name.log" 2>&1
    echo "=== $name: exit $? after $((SECONDS - BEGAN)) s"
    tail -n "${TAIL:-12}" "$RES/$name.log"
    pack
}

{
    python3 -m blockfuse env
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    python3 -c "import importlib.metadata as m; print('transformers', m.version('transformers')); print('liger-kernel', m.version('liger-kernel'))"
} > "$RES/env.txt" 2>&1
step 40 inductor python3 benchmarks/inductor_op_code.py "$RES/inductor-code.py"
TAIL=40 step 170 host python3 -m blockfuse bench host --quick --profile rms_norm --out "$RES/host" \
    --op rms_norm add_layer_norm layer_norm_gelu rotary swiglu_packed bias_dropout_add gated_mlp fused_mlp
TAIL=20 step 150 block python3 -m blockfuse bench block reordered --quick --modes infer,fwdbwd \
    --providers eager,compile:default,fused,fused+compile:default --out "$RES/block"
TAIL=20 step 85 block-small python3 -m blockfuse bench block reordered --quick --shape 1,512,1024 \
    --modes fwdbwd --providers eager,compile:default,fused,fused+compile:default --out "$RES/block-small"
TAIL=20 step 50 generate python3 -m blockfuse bench model hf-llama --modes prefill,decode \
    --providers hf-eager,blockfuse,liger --quick --out "$RES/generate"
TAIL=25 step 90 tests python3 -m pytest -q -p no:cacheprovider tests/ops/test_launch.py \
    "tests/ops/test_mlp.py::test_compiles_fullgraph" "tests/analyze/test_api_gpu.py" -k "not sm90 and (inductor or cached or blockfuse or stream)"
echo "=== done in $((SECONDS - BEGAN)) s"
