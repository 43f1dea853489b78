#!/usr/bin/env bash
# The op-path issue's "nothing lost where the GPU work dominates" check: a commit's code (OLD_SRC, its src/
# folder, e.g. the issue's c5d8122) against the working tree's, in one call on one machine.
#
#   git archive c5d8122 src | (mkdir -p .old && tar -x -C .old)      # here; carry .old (and .whl)
#   bash scripts/issue16_ab_gpu.sh OUT .old/src ops reordered        # on the GPU
#   bash scripts/issue16_ab_gpu.sh OUT .old/src standard olmo2-1b
#
# Parts: `ops`: every op at its largest declared shape, blockfuse only (CUDA-graph replay, L2 flushed), old
# then new; a preset name: its block, fused (eager: peak memory) and fused + torch.compile reduce-overhead
# (CUDA graphs), inference and training step, old then new; `nocg-PRESET`: the same without CUDA graphs,
# torch.compile default of the eager block beside fused and fused + compile default. Then benchmarks/ab_compare.py pairs the
# records: OUT/ab.md. Everything goes into OUT/results.tgz.
set -u
OUT=${1:?usage: bash scripts/issue16_ab_gpu.sh OUT OLD_SRC PART...}
OLD_SRC=$(realpath "${2:?usage: bash scripts/issue16_ab_gpu.sh OUT OLD_SRC PART...}")
shift 2
RES=/tmp/issue16-ab
rm -rf "$RES" && mkdir -p "$RES/old" "$RES/new" "$OUT"
source "$(dirname "$0")/device_python.sh"
NEW_PATH=$PYTHONPATH
OLD_PATH=${PYTHONPATH/$PWD\/src/$OLD_SRC}
export PYTHONUNBUFFERED=1
BEGAN=$SECONDS

pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
both() {  # both NAME LIMIT ARGS...: `python3 -m blockfuse ARGS --out RES/{old,new}/NAME` with each code
    local name=$1 limit=$2
    shift 2
    for side in old new; do
        local path=$NEW_PATH
        [ "$side" = old ] && path=$OLD_PATH
        echo "=== $side $name (at $((SECONDS - BEGAN)) s)"
        PYTHONPATH=$path timeout -s INT -k 10 "$limit" python3 -m blockfuse "$@" --out "$RES/$side/$name" \
            > "$RES/$side/$name.log" 2>&1
        echo "=== $side $name: exit $? after $((SECONDS - BEGAN)) s"
        tail -n 4 "$RES/$side/$name.log"
    done
    pack
}

{ python3 -m blockfuse env; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; } > "$RES/env.txt" 2>&1
PYTHONPATH=$OLD_PATH python3 -c "import blockfuse, sys; print('old code:', blockfuse.__file__)" >> "$RES/env.txt" 2>&1
for part in "$@"; do
    if [ "$part" = ops ]; then
        both ops-norms 120 bench ops --providers blockfuse --shapes 16384x4096 \
            --op rms_norm layer_norm add_rms_norm add_layer_norm layer_norm_gelu bias_dropout_add
        both ops-gated 90 bench ops --providers blockfuse --shapes 8192x14336 --op swiglu geglu swiglu_packed
        both ops-rotary 60 bench ops --providers blockfuse --shapes 8x4096x32x8x128 --op rotary
    elif [ "${part#nocg-}" != "$part" ]; then
        both "block-$part" 200 bench block "${part#nocg-}" --quick --modes infer,fwdbwd \
            --providers compile:default,fused,fused+compile:default
    else
        both "block-$part" 200 bench block "$part" --quick --modes infer,fwdbwd \
            --providers fused,fused+compile:reduce-overhead
    fi
done
python3 benchmarks/ab_compare.py "$RES/old" "$RES/new" --out "$RES/ab.md"
pack
echo "=== done in $((SECONDS - BEGAN)) s"
