#!/usr/bin/env bash
# Tile sweeps and GPU tests of the issue-3 op kernels, run on the GPU:
#   bash scripts/ops_tune_gpu.sh OUT [tests|sweeps|bench]...   (default: tests sweeps)
#   tests:  the op tests of the kernels the sweeps tune (tests/ops, gpu and CPU-side cases) -> tests.log
#   sweeps: benchmarks/{rotary,norm}_tiles.py -> *_tiles.json, sweeps.log (default: rotary; SWEEPS="rotary norm"
#           picks; the LayerNorm + GELU, gated and bias-dropout-add sweeps are removed: benchmarks/NOTES.md)
#   bench:  blockfuse bench ops for RoPE, SwiGLU / GeGLU, LayerNorm + GELU, bias-dropout-add and the norms
#           (whose backward kernel they share) -> ops/, bench.log
# Wheels carried in .whl/ (Liger-Kernel) go to /tmp/site; src/ goes on PYTHONPATH.
set -u
OUT=${1:?usage: bash scripts/ops_tune_gpu.sh OUT [tests|sweeps|bench]...}
shift
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(tests sweeps)
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
for part in "${PARTS[@]}"; do
    case $part in
        tests)
            timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_layer_norm_gelu.py \
                tests/ops/test_gated.py tests/ops/test_rotary.py tests/ops/test_launch.py > "$OUT/tests.log" 2>&1
            echo "tests exit $?" >> "$OUT/tests.log"
            tail -3 "$OUT/tests.log" ;;
        sweeps)
            for sweep in ${SWEEPS:-rotary}; do
                timeout -s INT 240 python3 "benchmarks/${sweep}_tiles.py" --out "$OUT" >> "$OUT/sweeps.log" 2>&1
                echo "$sweep exit $?" >> "$OUT/sweeps.log"
            done
            grep exit "$OUT/sweeps.log" ;;
        bench)
            timeout -s INT 420 python3 -m blockfuse bench ops --op rotary swiglu geglu swiglu_packed \
                layer_norm_gelu bias_dropout_add layer_norm rms_norm --out "$OUT/ops" > "$OUT/bench.log" 2>&1
            echo "bench exit $?" >> "$OUT/bench.log"
            tail -25 "$OUT/bench.log" ;;
        *) echo "unknown part: $part" >&2; exit 2 ;;
    esac
done
