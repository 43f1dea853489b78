#!/usr/bin/env bash
# The rotated q and k made again in attention's backward (models/fused.py RECOMPUTE_ROTATED_QK, branch
# lead/qk-recompute) against keeping them, on a GPU: the new tests on CUDA, then the olmo2-1b block (QK-norm + RoPE)
# and an 8-layer olmo2-1b stack, fused and fused + compile (compile keeps its own plan: its rows should not move),
# training step time and peak, the knob off and on alternating in separate processes, ROUNDS (3) rounds; and what is
# alive at the fused block's peak both ways (benchmarks/memory_block.py). One GPU, ~6 minutes:
#
#   bash scripts/qk_recompute_gpu.sh PACK                  (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/qk_recompute_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE tests/models/test_recompute_qk.py
KNOB='import sys, runpy; import blockfuse.models.fused as f; f.RECOMPUTE_ROTATED_QK = sys.argv.pop(1) == "1"; '
KNOB+='sys.argv[0] = "blockfuse"; runpy.run_module("blockfuse", run_name="__main__")'
for round in $(seq 1 "${ROUNDS:-3}"); do
    for on in 0 1; do
        step 90 "block-$on-$round" python3 -c "$KNOB" "$on" bench block olmo2-1b --modes fwdbwd --quick \
            --providers fused,fused+compile:default --out "$OUT/block-$on-$round"
        step 120 "stack-$on-$round" python3 -c "$KNOB" "$on" bench model olmo2-1b --layers 8 --modes fwdbwd --quick \
            --providers fused --out "$OUT/stack-$on-$round"
    done
done
MEM='import sys, runpy; import blockfuse.models.fused as f; f.RECOMPUTE_ROTATED_QK = sys.argv.pop(1) == "1"; '
MEM+='sys.path.insert(0, "benchmarks"); sys.argv[0] = "memory_block"; runpy.run_path("benchmarks/memory_block.py", run_name="__main__")'
for on in 0 1; do
    step 60 "memory-$on" python3 -c "$MEM" "$on" olmo2-1b --impl fused --top 20
done
grep -h "^| fused" "$OUT"/block-*.log "$OUT"/stack-*.log
pack "$PACK"
