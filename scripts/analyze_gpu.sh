#!/usr/bin/env bash
# The compile analyses to commit, run on the GPU:  bash scripts/analyze_gpu.sh OUT   (PYTHONPATH=src set by the caller)
#   1. reordered and standard blocks at [4, 2048, 1024] bf16, forward and backward, and their comparison
#      -> OUT/reordered.{md,json,png}, OUT/standard.{md,json,png}, OUT/compare-reordered-standard.{md,json},
#         OUT/<block>-code/ (the generated wrappers)
#   2. recompiles of the reordered block over three input shapes -> OUT/recompiles/reordered.{md,json,png}
# About 4-6 minutes on an H200; each analysis prints its own time (meta.analysis_s in the JSON).
set -euo pipefail
OUT=${1:?usage: bash scripts/analyze_gpu.sh OUT}
mkdir -p "$OUT"
python -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/env.log" 2>&1 || true
start=$SECONDS
python -m blockfuse analyze reordered --backward --compare standard --out "$OUT" 2>&1 | tee "$OUT/analyze.log"
echo "blocks: $((SECONDS - start)) s" | tee -a "$OUT/analyze.log"
start=$SECONDS
python -m blockfuse analyze reordered --shape 4x2048x1024 4x1024x1024 2x4096x1024 --out "$OUT/recompiles" \
    2>&1 | tee "$OUT/recompiles.log"
echo "recompiles: $((SECONDS - start)) s" | tee -a "$OUT/recompiles.log"
