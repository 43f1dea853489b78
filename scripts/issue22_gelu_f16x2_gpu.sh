#!/usr/bin/env bash
# LayerNorm + GELU's backward with the tanh-form derivative in packed fp16 (activation.gelu_tanh_grad_f16x2, bf16
# only) against the fp32 derivative, plus issue 19's fused loss traced and a Qwen3 step profiled; one call (one GPU,
# ~11 minutes: PART=1 then PART=2 in two calls; carry .whl for Liger-Kernel):
#   bash scripts/issue22_gelu_f16x2_gpu.sh PACK        (writes PACK/results.tar.gz)
# 1. the GELU form's CUDA tests (tests/ops/test_norm.py -k gelu) with the packed derivative on;
# 2. benchmarks/norm_tiles.py, the backward launcher as the rule tiles it, BLOCKFUSE_GELU_GRAD_F16X2=1 and =0 in
#    alternating processes (the switch is read at import), two rounds, at SHAPES;
# 3. the op benchmark (time, error against fp32, the peers), forward + backward, both ways;
# 4. cross_entropy_chunks.py at [8192, 4096, 128256]: three interleaved rounds of chunk 1024 / 8192 (fp32 and
#    dtype reductions) and the peers, each step profiled with the host's ops (Chrome traces, trace_gaps.py);
# 5. RMSNorm at QK-norm shapes (rows of one head, 64-256 wide) against torch.compile and Liger;
# 6. benchmarks/profile_hf_llama.py --family qwen3 --mode fwdbwd: wall and kernel time of HF eager, blockfuse, Liger.
set -u
PACK=${1:?usage: bash scripts/issue22_gelu_f16x2_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
PART=${PART:-all}  # 1: steps 1-3, 2: steps 4-6 (each under the device's 10 minutes), all: both; short: see below
if [ "$PART" = short ]; then
    # one call of about 5 minutes: the tests, the A/B in three processes (1, 0, 1), the op benchmark both ways at
    # three shapes, the QK-norm shapes
    step 100 tests env BLOCKFUSE_GELU_GRAD_F16X2=1 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 \
        tests/ops/test_norm.py -k "gelu"
    SHAPES=16384x1152,16384x4096,16384x4304,16384x5120,8192x11008,8192x14336
    for run in 1-1 0-1 1-2; do
        step 60 "ab-$run" env BLOCKFUSE_GELU_GRAD_F16X2=${run%-*} python3 benchmarks/norm_tiles.py --shapes "$SHAPES" \
            --forms ln-gelu --fwd "" --bwd "" --no-check --out "$OUT/ab-$run"
    done
    OPS=(--op layer_norm_gelu --shapes 16384x4096 16384x4304 8192x14336 --modes fwdbwd --quick --warm-jobs 8)
    for v in 1 0; do
        step 60 "ops-$v" env BLOCKFUSE_GELU_GRAD_F16X2=$v python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-$v"
    done
    step 60 qk-norms python3 -m blockfuse bench ops --op rms_norm --shapes 262144x64 262144x128 131072x256 \
        --modes fwd,fwdbwd --quick --warm-jobs 8 --out "$OUT/qk-norms"
    pack "$PACK"
    exit 0
fi
if [ "$PART" != 2 ]; then
step 100 tests env BLOCKFUSE_GELU_GRAD_F16X2=1 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py -k "gelu"
SHAPES=${SHAPES:-16384x1152,16384x2560,16384x4096,16384x4304,16384x5120,8192x11008,8192x14336,2048x3072,32768x768}
for round in 1 2; do
    for v in 1 0; do
        step 70 "ab-$v-$round" env BLOCKFUSE_GELU_GRAD_F16X2=$v python3 benchmarks/norm_tiles.py --shapes "$SHAPES" \
            --forms ln-gelu --fwd "" --bwd "" --no-check --out "$OUT/ab-$v-$round"
    done
done
OPS=(--op layer_norm_gelu --shapes 16384x4096 16384x4304 16384x1152 8192x14336 --modes fwdbwd --quick --warm-jobs 8)
for v in 1 0; do
    step 80 "ops-$v" env BLOCKFUSE_GELU_GRAD_F16X2=$v python3 -m blockfuse bench ops "${OPS[@]}" --out "$OUT/ops-$v"
done
fi
if [ "$PART" != 1 ]; then
# QK-norm rows (Qwen3, Gemma-3, OLMo-2: RMSNorm over each head, 64-256 wide, tokens x heads rows), never swept
step 120 qk-norms python3 -m blockfuse bench ops --op rms_norm --shapes 262144x64 262144x128 131072x256 65536x128 \
    --modes fwd,fwdbwd --quick --warm-jobs 8 --out "$OUT/qk-norms"
mkdir -p "$OUT/ce"
step 200 ce python3 benchmarks/cross_entropy_chunks.py --shapes 8192x4096x128256 --chunks 1024 8192 --peers \
    --dtype-reductions --rounds 3 --profile 1024 8192 --profile-peers --trace "$OUT/ce/trace" --json "$OUT/ce/ce.json"
rm -f "$OUT"/ce/*cce*.json
for f in "$OUT"/ce/trace-*.json; do
    python3 benchmarks/trace_gaps.py "$f" > "${f%.json}.gaps.txt" 2>&1
    gzip "$f"
done
step 150 qwen3-profile python3 benchmarks/profile_hf_llama.py --family qwen3 --mode fwdbwd \
    --providers hf-eager blockfuse liger --top 16
fi
pack "$PACK"
