#!/usr/bin/env bash
# FP8 Linear layers under tensor parallelism and FSDP2 on a 2-GPU machine (NCCL, NVLink multicast off), within about
# 8 minutes:
#
#   bash scripts/fp8_tp_gpu.sh OUT
#
#   1. tests: tests/test_distributed_fp8.py on two GPUs (each rank's FP8 GEMMs bit for bit fp8_linear's on its
#      shards; eager and fused stacks, every recipe, as close to fp32 as one process) and the FSDP2 / TP tests of
#      the bf16 path beside them (tests/test_distributed.py, tests/models/test_fsdp.py).
#   2. te-4layer (4 layers, [8, 2048] per GPU, d 2048) training steps, `blockfuse bench model te-4layer --nproc 2
#      --parallel tp,fsdp --providers eager,fused`: bf16 Linear layers, then `--linear fp8:delayed` and
#      `--linear fp8:tensorwise`, each against one GPU on the global batch (rank 0), in one call so the ratios
#      compare one machine's runs.
#
# Each step has its own timeout (TESTS_TIMEOUT, BENCH_TIMEOUT seconds) and log; the JSON and Markdown are written after
# each provider, so a step stopped by its timeout keeps what it measured. Writes OUT/env.log, OUT/tests.log,
# OUT/{bf16,fp8-delayed,fp8-tensorwise}.log and folders, and prints a summary last.
set -u
OUT=${1:?usage: bash scripts/fp8_tp_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1

echo "== tests (timeout ${TESTS_TIMEOUT:-180} s)"
timeout -k 20 -s INT "${TESTS_TIMEOUT:-180}" python3 -m pytest -q -p no:cacheprovider tests/test_distributed_fp8.py \
    tests/test_distributed.py tests/models/test_fsdp.py > "$OUT/tests.log" 2>&1
echo "tests exit $?" | tee -a "$OUT/tests.log"
tail -3 "$OUT/tests.log"

run() {  # run NAME ARGS...: one benchmark, its own log and timeout (SIGINT, then SIGKILL 20 s later)
    local name=$1
    shift
    echo "== $name: blockfuse bench model $* --out $OUT/$name (timeout ${BENCH_TIMEOUT:-120} s)"
    timeout -k 20 -s INT "${BENCH_TIMEOUT:-120}" python3 -m blockfuse bench model "$@" --out "$OUT/$name" \
        > "$OUT/$name.log" 2>&1
    echo "$name exit $?" | tee -a "$OUT/$name.log"
    tail -2 "$OUT/$name.log"
}

COMMON=(te-4layer --nproc 2 --parallel tp,fsdp --providers eager,fused --steps 12 --warmup 3)
run bf16 "${COMMON[@]}"
run fp8-delayed "${COMMON[@]}" --linear fp8:delayed
run fp8-tensorwise "${COMMON[@]}" --linear fp8:tensorwise

echo "== summary (ms a step, the slowest rank; tokens/s; peak MiB; loss vs one GPU)"
python3 - "$OUT" <<'SUMMARY'
import json
import sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).glob("*/model-*.json")):
    document = json.loads(path.read_text())
    for r in document["records"]:
        if r.get("error"):
            print(f"{path.parent.name:15s} {r['parallel']:5s} {r['provider']:6s} error: {r['error'][:120]}")
            continue
        print(f"{path.parent.name:15s} {r['parallel']:5s} {r['provider']:6s} {r['ms']:8.2f} ms "
              f"{r['tokens_per_s']:10.0f} tok/s peak {r['peak_mib']} MiB loss diff {r['loss_rel_diff_max']:.1e}")
SUMMARY
