#!/usr/bin/env bash
# Issue 17, the multi-GPU training step on a 2-GPU machine (NCCL, NVLink multicast off), within about 8 minutes:
#
#   bash scripts/issue17_gpu.sh OUT
#
# `blockfuse bench model ... --nproc N --parallel ...` (src/blockfuse/bench/distributed/), providers eager,
# compile (each block under torch.compile), fused, fused+compile; a step is zero grad + forward + MSE loss +
# backward + AdamW step, bf16 compute, fp32 parameters and optimizer state, 20 steps (3 untimed) unless said:
#
#   1. fsdp:    olmo2-1b, 8 layers, [2, 4096] per GPU, 2 GPUs, FSDP2 (fully_shard per block and the stack,
#               bf16 params, fp32 reduce); rank 0 also trains each provider unsharded on the global batch
#               [4, 4096] (the loss after 20 steps against one GPU); --profile: NCCL kernels of one step.
#   2. one-gpu: the same model and batch per GPU on 1 GPU under FSDP2 (no communication), no one-GPU reference:
#               the scaling baseline (2-GPU tokens/s over this one's, printed last).
#   3. tp:      tensor + sequence parallelism over 2 GPUs, 8 layers, [2, 4096] on every GPU, 10 steps; --profile
#               shows the plan's all-gathers and no more (none in a norm). olmo2-1b when blockfuse.distributed.tp_plan
#               takes its QK-norm (checked first, on a tiny config); where it still refuses it, the `reordered`
#               preset at olmo2-1b's width instead (d 2048, SwiGLU 8192, reordered norms, but LayerNorm with bias,
#               32 heads of 64, no QK-norm). OUT/tp-preset.txt and the summary say which ran.
#
# Each step has its own timeout (FSDP_TIMEOUT, ONE_GPU_TIMEOUT, TP_TIMEOUT seconds) and log; the JSON and Markdown
# are written after each provider, so a step stopped by its timeout keeps what it measured. Writes OUT/env.log,
# OUT/{fsdp,one-gpu,tp}.log and folders, and OUT/issue17-results.tar.gz with all of them (profiler traces
# included), and prints a summary last.
set -u
OUT=${1:?usage: bash scripts/issue17_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export NCCL_NVLS_ENABLE=0
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
nvidia-smi topo -m >> "$OUT/env.log" 2>&1

run() {  # run NAME SECONDS ARGS...: one step, its own log and timeout (SIGINT, then SIGKILL 20 s later)
    local name=$1 seconds=$2
    shift 2
    echo "== $name: blockfuse bench model $* --out $OUT/$name (timeout $seconds s)"
    timeout -k 20 -s INT "$seconds" python3 -m blockfuse bench model "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo "$name exit $?" | tee -a "$OUT/$name.log"
    tail -2 "$OUT/$name.log"
}

run fsdp "${FSDP_TIMEOUT:-250}" olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 2 --parallel fsdp --profile
run one-gpu "${ONE_GPU_TIMEOUT:-90}" olmo2-1b --layers 8 --shape 2x4096x2048 --nproc 1 --parallel fsdp --no-reference
TP_PRESET=$(python3 - 2>> "$OUT/tp-preset.txt" <<'PLAN'
from dataclasses import replace

from blockfuse.distributed import tp_plan
from blockfuse.models import PRESETS, TransformerBlock

try:  # the plan's checks only, on a tiny block of olmo2-1b's kind (RMSNorm, QK-norm)
    tp_plan(TransformerBlock(replace(PRESETS["olmo2-1b"].config, d_model=256, n_heads=2, ffn_hidden=512), "fused"))
    print("olmo2-1b")
except NotImplementedError as refusal:
    import sys

    print(f"tp_plan refuses olmo2-1b ({refusal}): the reordered preset at its width instead", file=sys.stderr)
    print("reordered")
PLAN
)
echo "tp preset: ${TP_PRESET:=reordered}" | tee -a "$OUT/tp-preset.txt"
run tp "${TP_TIMEOUT:-170}" "$TP_PRESET" --layers 8 --shape 2x4096x2048 --nproc 2 --parallel tp --steps 10 --profile

tar czf "$OUT/issue17-results.tar.gz" -C "$OUT" env.log tp-preset.txt fsdp.log one-gpu.log tp.log fsdp one-gpu tp \
    2> /dev/null
ls -la "$OUT/issue17-results.tar.gz"

python3 - "$OUT" <<'EOF'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])


def load(name):
    found = sorted((out / name).glob("model-*.json"))
    return json.loads(found[0].read_text()) if found else None


runs = {name: load(name) for name in ("fsdp", "one-gpu", "tp")}
one = {r["provider"]: r for r in (runs["one-gpu"] or {}).get("records", []) if not r.get("error")}
for name, document in runs.items():
    if document is None:
        print(f"\n{name}: no results (see {out}/{name}.log)")
        continue
    meta, workload = document["meta"], document["workload"]
    print(f"\n{name}: {workload['name']} {workload['layers']} layers {'x'.join(map(str, workload['shape_per_rank']))} "
          f"per rank, {workload['nproc']} x {meta['card']}, torch {meta['torch']}, triton {meta['triton']}, "
          f"{meta.get('elapsed_s')} s\n  {meta['command']}")
    for target in document["targets"]:
        print(f"  {target['status']:>6}: {target['text']}")
    print(f"  {'parallel':<8} {'provider':<14} {'step ms':>8} {'tokens/s':>9} {'peak MiB':>9} {'loss diff':>9} "
          f"{'x 1-GPU fsdp':>12}  communication")
    for r in document["records"]:
        if r.get("error"):
            print(f"  {r['parallel']:<8} {r['provider']:<14} failed: {r['error'][:100]}")
            continue
        scaling = r["tokens_per_s"] / one[r["provider"]]["tokens_per_s"] \
            if name == "fsdp" and r["provider"] in one else None
        comm = {}
        for event in r.get("communication", []):
            count, ms = comm.get(event["kind"], (0, 0.0))
            comm[event["kind"]] = (count + event["count"], ms + event["ms"])
        text = ", ".join(f"{k} {c}x {ms:.1f} ms" for k, (c, ms) in comm.items())
        if r.get("planned_collectives"):
            text += f" (plan: all_gather {r['planned_collectives']['all_gather']}x)"
        diff = r.get("loss_rel_diff")
        print(f"  {r['parallel']:<8} {r['provider']:<14} {r['ms']:>8.1f} {r['tokens_per_s']:>9.0f} "
              f"{r['peak_mib'] or 0:>9.0f} {'' if diff is None else format(diff, '.2e'):>9} "
              f"{'' if scaling is None else format(scaling, '.2f'):>12}  {text}")
EOF
