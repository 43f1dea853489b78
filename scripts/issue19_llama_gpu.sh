#!/usr/bin/env bash
# Issue 19 on a whole model: the Hugging Face Llama training step with the LM head and loss, on the GPU, within
# 7 minutes:
#
#   bash scripts/issue19_llama_gpu.sh OUT
#
# `blockfuse bench model hf-llama --modes loss`: LlamaForCausalLM (4 layers, hidden 2048, 32 / 8 heads, FFN 8192,
# vocab 128256, bf16), input ids (2, 4096), labels the ids with 1 in 32 positions -100; the step
# `model(input_ids=ids, labels=labels).loss.backward()`. Providers: hf-eager (the logits made, then transformers'
# loss), hf-compile (torch.compile of it), liger (apply_liger_kernel_to_llama with its fused linear
# cross-entropy), blockfuse (blockfuse.patch(model, loss=True)), blockfuse-compile. Each record: median ms
# (p20-p80), peak memory of a step, relative errors of the loss and the gradients against an fp32 eager step,
# first step seconds, graph breaks. Targets: blockfuse's step >= 1.1x Liger's speed, its peak <= 0.85x Liger's.
# Writes OUT/env.log, OUT/llama-loss/model-hf-llama.{json,csv,md,png}, OUT/bench.log, and prints a summary last.
# Wheels carried in .whl/ (Liger-Kernel) go to /tmp/site; src/ goes on PYTHONPATH.
#
# NOTE: full timings, not --quick (do_bench 2 s a provider instead of 0.4 s): the compiles, not the timing,
# take most of the time. The JSON and Markdown are written after each provider, so a run stopped by its
# timeout (BENCH_TIMEOUT, default 400 s) keeps what it measured.
set -u
OUT=${1:?usage: bash scripts/issue19_llama_gpu.sh OUT}
mkdir -p "$OUT/llama-loss"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import importlib.metadata as m; [print(p, m.version(p)) for p in ('transformers', 'liger-kernel')]" \
    >> "$OUT/env.log" 2>&1

timeout -s INT "${BENCH_TIMEOUT:-400}" python3 -m blockfuse bench model hf-llama --modes loss \
    --providers hf-eager,hf-compile,liger,blockfuse,blockfuse-compile --out "$OUT/llama-loss" > "$OUT/bench.log" 2>&1
echo "bench exit $?" >> "$OUT/bench.log"
tail -3 "$OUT/bench.log"

python3 - "$OUT" <<'EOF'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
path = out / "llama-loss" / "model-hf-llama.json"
if not path.exists():
    sys.exit(f"no results (see {out}/bench.log)")
document = json.loads(path.read_text())
meta, workload = document["meta"], document["workload"]
print(f"\n{meta['card']}, torch {meta['torch']}, triton {meta['triton']}, transformers {meta.get('transformers')}, "
      f"Liger-Kernel {meta.get('liger_kernel')}, {meta.get('elapsed_s')} s; LlamaForCausalLM {workload['layers']} "
      f"layers, hidden {workload['hidden']}, vocab {workload['loss_vocab']}, ids ({workload['batch']}, "
      f"{workload['seq']}), {workload['dtype']}")
for target in document["targets"]:
    print(f"  {target['status']:>6}: {target['text']}")


def cell(value, width, form):
    return format(value, f">{width}{form}") if isinstance(value, (int, float)) else f"{value or '-':>{width}}"


print(f"\n{'provider':<18} {'ms':>9} {'p20-p80':>17} {'x eager':>7} {'x liger':>7} {'peak MiB':>9} {'loss err':>8} "
      f"{'grad err':>8} {'worst':>8} {'logits':>6} {'breaks':>6} {'first s':>7}")
for r in document["records"]:
    if r.get("error"):
        print(f"{r['provider']:<18} failed: {r['error'][:100]}")
        continue
    spread = f"{r['p20']:.2f}-{r['p80']:.2f}"
    cells = [cell(r["ms"], 9, ".2f"), f"{spread:>17}", cell(r.get("speedup_vs_hf-eager"), 7, ".2f"),
             cell(r.get("speedup_vs_liger"), 7, ".2f"), cell(r.get("peak_mib"), 9, ".0f"),
             cell(r.get("rel_err_loss"), 8, ".1e"), cell(r.get("rel_err_grad"), 8, ".1e"),
             cell(r.get("rel_err_grad_worst"), 8, ".1e"), f"{'yes' if r.get('logits_materialized') else 'no':>6}",
             cell(r.get("graph_breaks"), 6, "d"), cell(r.get("first_step_s"), 7, ".1f")]
    print(f"{r['provider']:<18} " + " ".join(cells) + f"  (worst: {r.get('grad_worst_parameter')})")
EOF
