#!/usr/bin/env bash
# The block and model benchmarks of the blocks issue, run on the GPU:
#
#   bash scripts/blocks_gpu.sh OUT [ITEM ...]
#
# ITEM is a preset name, optionally with ":fast" (skip the max-autotune providers), or "tests"
# (the blocks, MLP, linear_act and patching tests on CUDA), "linear-act" (benchmarks/linear_act.py) or "hf-llama" (`blockfuse bench model hf-llama`).
# Default: tests reordered standard:fast olmo2-1b:fast siglip2:fast hf-llama. siglip2 and te-4layer
# run as stacks of the preset's layers (`bench model`), the others as one block (`bench block`).
# Writes OUT/{block,model}-NAME.{json,csv,md,png} (hf-llama: OUT/model-hf-llama.*), OUT/*.log. Wheels carried
# in .whl/ (Liger-Kernel) go to /tmp/site; src/ goes on PYTHONPATH.
set -u
OUT=${1:?usage: bash scripts/blocks_gpu.sh OUT [ITEM ...]}
shift
ITEMS=${*:-tests reordered standard:fast olmo2-1b:fast siglip2:fast hf-llama}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import importlib.metadata as m; print('transformers', m.version('transformers'))" >> "$OUT/env.log" 2>&1
for item in $ITEMS; do
    name=${item%%:*}
    flags=""
    if [ "$item" != "$name" ]; then flags="--${item#*:}"; fi
    case "$name" in
    tests)
        timeout -s INT 330 python3 -m pytest tests/models tests/ops/test_mlp.py tests/patching/test_apply.py \
            tests/nn/test_mlp.py tests/ops/test_linear_act.py -q \
            > "$OUT/tests-gpu.log" 2>&1
        echo "tests exit $?" >> "$OUT/tests-gpu.log"
        tail -3 "$OUT/tests-gpu.log" ;;
    linear-act)
        timeout -s INT 240 python3 benchmarks/linear_act.py --out "$OUT" > "$OUT/linear-act.log" 2>&1
        echo "linear_act exit $?" >> "$OUT/linear-act.log"
        tail -1 "$OUT/linear-act.log" ;;
    hf-llama)
        timeout -s INT 300 python3 -m blockfuse bench model hf-llama --out "$OUT" > "$OUT/hf-llama.log" 2>&1
        echo "hf-llama exit $?" >> "$OUT/hf-llama.log"
        tail -1 "$OUT/hf-llama.log"
        grep -A6 "^## Targets" "$OUT/model-hf-llama.md" ;;
    *)
        kind=block
        if [ "$name" = siglip2 ] || [ "$name" = te-4layer ]; then kind=model; fi
        echo "=== $kind $name $flags" >> "$OUT/bench.log"
        timeout -s INT 400 python3 -m blockfuse bench $kind "$name" $flags --out "$OUT" >> "$OUT/bench.log" 2>&1
        echo "=== $kind $name exit $?" >> "$OUT/bench.log"
        grep -A8 "^## Targets" "$OUT/$kind-$name.md" ;;
    esac
done
