#!/usr/bin/env bash
# The op benchmarks to commit, run on the GPU:  bash scripts/bench_gpu.sh OUT
#   env.log, ops/ops.{json,md,png} (every default op), bench.log, rotary_layout.{json,md} (RoPE + SDPA
#   launches and time per attention call, with and without out_layout)
# Wheels carried in .whl/ (Liger-Kernel) go to /tmp/site; src/ goes on PYTHONPATH. About 7 minutes on an H200.
set -u
OUT=${1:?usage: bash scripts/bench_gpu.sh OUT}
mkdir -p "$OUT/ops"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import importlib.metadata as m; print('liger-kernel', m.version('liger-kernel'))" >> "$OUT/env.log" 2>&1
timeout -s INT 420 python3 -m blockfuse bench ops --out "$OUT/ops" > "$OUT/bench.log" 2>&1
echo "bench exit $?" >> "$OUT/bench.log"
timeout -s INT 120 python3 benchmarks/rotary_layout.py --backward --out "$OUT" > "$OUT/rotary_layout.log" 2>&1
echo "rotary_layout exit $?" >> "$OUT/rotary_layout.log"
tail -5 "$OUT/bench.log" "$OUT/rotary_layout.log"
