#!/usr/bin/env bash
# The Hugging Face model benchmarks at full size on the GPU, within 8 minutes (each run has its timeout):
#
#   bash scripts/hf_models_gpu.sh OUT
#
# 1. `blockfuse bench model hf-llama --modes prefill,decode`: LlamaForCausalLM's greedy generation (prompt 512,
#    64 new tokens), HF eager, Liger-Kernel and blockfuse.patch, each also with a static KV cache under
#    transformers' compile (default mode);
# 2. `blockfuse bench model hf-siglip2`: Siglip2VisionModel (4 layers of so400m, 64 images of 256 patches),
#    HF eager and blockfuse.patch, each also under torch.compile; inference, training forward, training step.
# Writes OUT/model-hf-llama.{json,csv,md,png}, OUT/model-hf-siglip2.{json,csv,md,png}, OUT/*.log, and prints
# each benchmark's targets and a summary table last. Wheels carried in .whl/ (Liger-Kernel) go to /tmp/site;
# src/ goes on PYTHONPATH.
set -u
OUT=${1:?usage: bash scripts/hf_models_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import importlib.metadata as m; print('transformers', m.version('transformers'))" >> "$OUT/env.log" 2>&1

# (seconds, name, arguments): each run writes its JSON and Markdown after every provider, so a run stopped by
# its timeout keeps what it measured. NOTE: full timings, not --quick: with --quick the whole script took 182 s on
# an H200 (torch 2.11, hf-siglip2's blockfuse-compile failing), and full timings only repeat the measurements
# longer (do_bench 2 s instead of 0.4 s a measurement, 10 generations instead of 5), not the compiles.
run() {
    local seconds=$1 name=$2
    shift 2
    timeout -s INT "$seconds" python3 -m blockfuse bench model "$name" "$@" --out "$OUT" > "$OUT/$name.log" 2>&1
    echo "$name exit $?" >> "$OUT/$name.log"
    tail -2 "$OUT/$name.log"
}
run 260 hf-llama --modes prefill,decode
run 240 hf-siglip2

python3 - "$OUT" <<'EOF'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
for name in ("hf-llama", "hf-siglip2"):
    path = out / f"model-{name}.json"
    if not path.exists():
        print(f"\n{name}: no results (see {out}/{name}.log)")
        continue
    document = json.loads(path.read_text())
    meta = document["meta"]
    print(f"\n{name}: {meta['card']}, torch {meta['torch']}, triton {meta['triton']}, "
          f"transformers {meta.get('transformers')}, {meta.get('elapsed_s')} s")
    for target in document["targets"]:
        print(f"  {target['status']:>6}: {target['text']}")
    print(f"  {'provider':<26} {'mode':<8} {'ms':>9} {'x hf-eager':>10}  notes")
    for r in document["records"]:
        if r.get("error"):
            print(f"  {r['provider']:<26} {r['mode']:<8} failed: {r['error'][:70]}")
            continue
        notes = []
        if "tokens_match_hf" in r:
            notes.append("tokens = HF" if r["tokens_match_hf"] else f"tokens differ from {r['first_mismatch_at']}")
        if r.get("peak_mib") is not None:
            notes.append(f"peak {r['peak_mib']:.0f} MiB")
        if "rel_err_grad" in r:
            notes.append(f"grad err {r['rel_err_grad']:.1e}")
        speedup = r.get("speedup_vs_hf-eager")
        print(f"  {r['provider']:<26} {r['mode']:<8} {r['ms']:>9.3f} {speedup or 0:>10.2f}  {', '.join(notes)}")
EOF
