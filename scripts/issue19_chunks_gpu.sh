#!/usr/bin/env bash
# Issue 19: the fused LM-head cross-entropy's chunk size (its memory) against its speed, beside torch.compile of
# Hugging Face's loss, Liger-Kernel's and Cut Cross-Entropy's fused losses timed the same way in the same process
# (`loss.backward()`, bf16). One GPU, 1-3 minutes; carry .whl (Liger, Cut Cross-Entropy):
#
#   bash scripts/issue19_chunks_gpu.sh OUT            (writes OUT/env.log, OUT/chunks.log, OUT/chunks.json)
#
# SHAPES / CHUNKS (tokens, or low-memory) choose the grid (default: the issue's first and third shapes, every
# chunk from Liger's memory to the whole logits); PROFILE=CHUNK adds one step's kernels at that chunk; TESTS=1 first
# runs the op's CUDA tests (OUT/tests.log); ARGS passes more options (e.g. "--both-low-memory-loops").
# LIMIT: the benchmark step's seconds (330).
set -u
OUT=${1:?usage: bash scripts/issue19_chunks_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
python3 -c "import cut_cross_entropy, liger_kernel; print('cut_cross_entropy and liger_kernel importable')" \
    >> "$OUT/env.log" 2>&1
[ "${TESTS:-0}" = 1 ] && step 300 tests python3 -m pytest -q tests/ops/test_cross_entropy.py
# (word splitting of SHAPES and CHUNKS intended)
# shellcheck disable=SC2086
step ${LIMIT:-330} chunks python3 benchmarks/cross_entropy_chunks.py --shapes ${SHAPES:-8192x4096x128256 4096x4096x262144} \
    --chunks ${CHUNKS:-256 1024 2048 4096 8192} --peers ${PROFILE:+--profile $PROFILE} ${ARGS:-} --json "$OUT/chunks.json"
