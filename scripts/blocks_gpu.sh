#!/usr/bin/env bash
# The block and model benchmarks of the blocks issue, run on the GPU:
#
#   bash scripts/blocks_gpu.sh OUT [--fast] [PRESET ...]
#
# For each preset (default: reordered standard olmo2-1b as one layer, siglip2 as 4 layers):
# `blockfuse bench block|model` with every provider (--fast: without the max-autotune ones),
# writing OUT/{block,model}-NAME.{json,md,png} and OUT/bench.log; first the GPU tests of the blocks
# (OUT/tests-gpu.log). Wheels carried in .whl/ go to /tmp/site; src/ goes on PYTHONPATH.
set -u
OUT=${1:?usage: bash scripts/blocks_gpu.sh OUT [--fast] [PRESET ...]}
shift
FAST=""
if [ "${1:-}" = "--fast" ]; then FAST="--fast"; shift; fi
PRESETS=${*:-reordered standard olmo2-1b siglip2}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
timeout -s INT 150 python3 -m pytest tests/models -m gpu -q > "$OUT/tests-gpu.log" 2>&1
echo "tests-gpu exit $?" >> "$OUT/tests-gpu.log"
for name in $PRESETS; do
    kind=block
    if [ "$name" = siglip2 ] || [ "$name" = te-4layer ]; then kind=model; fi
    echo "=== $kind $name" >> "$OUT/bench.log"
    timeout -s INT 540 python3 -m blockfuse bench $kind "$name" $FAST --out "$OUT" >> "$OUT/bench.log" 2>&1
    echo "=== $kind $name exit $?" >> "$OUT/bench.log"
done
grep -h -A12 "^## Targets" "$OUT"/*.md | head -80
