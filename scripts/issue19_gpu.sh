#!/usr/bin/env bash
# Issue 19, the fused LM head + cross-entropy against its peers on the GPU, within 7 minutes:
#
#   bash scripts/issue19_gpu.sh OUT
#
# `blockfuse bench ops --op linear_cross_entropy` at every declared CUDA shape (tokens x d x vocab:
# 8192x4096x128256, 16384x2048x32000, 4096x4096x262144), bf16, providers eager (Hugging Face's loss),
# compile (torch.compile of it), liger (Liger-Kernel's fused linear cross-entropy), cce (Apple's Cut
# Cross-Entropy) and blockfuse; modes fwd and fwdbwd (bwd alone is not comparable here: blockfuse and Liger
# make the gradients in their forward). Each record: median ms, TFLOP/s of the three GEMMs' floor and its
# fraction of an 8192^3 GEMM measured in the same run, peak memory, relative errors of the loss and the
# gradients against fp32. Writes OUT/env.log, OUT/ops/ops.{json,md,png}, OUT/bench.log, and prints a summary
# table last. Wheels carried in .whl/ (Liger-Kernel, Cut Cross-Entropy) go to /tmp/site; src/ goes on
# PYTHONPATH.
#
# NOTE: --quick with the shapes named: the three shapes at --quick's shorter timing (3 loops of 10 calls, 5 x 5
# graph replays). Full timing repeats each 15-60 ms call about 600 times a provider and mode: about 11 minutes.
# The JSON and Markdown are written after each shape, so a run stopped by its timeout keeps what it measured.
set -u
OUT=${1:?usage: bash scripts/issue19_gpu.sh OUT}
mkdir -p "$OUT/ops"
source "$(dirname "$0")/device_python.sh"
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import importlib.metadata as m; [print(p, m.version(p)) for p in ('liger-kernel', 'cut-cross-entropy')]" \
    >> "$OUT/env.log" 2>&1
SHAPES=$(python3 -c "from blockfuse.bench.cross_entropy import SHAPES; print(' '.join('x'.join(map(str, s)) for s in SHAPES))")

timeout -s INT "${BENCH_TIMEOUT:-400}" python3 -m blockfuse bench ops --op linear_cross_entropy --shapes $SHAPES --modes fwd,fwdbwd \
    --providers eager,compile,liger,cce,blockfuse --quick --out "$OUT/ops" > "$OUT/bench.log" 2>&1
echo "bench exit $?" >> "$OUT/bench.log"
tail -3 "$OUT/bench.log"

python3 - "$OUT" <<'EOF'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
path = out / "ops" / "ops.json"
if not path.exists():
    sys.exit(f"no results (see {out}/bench.log)")
document = json.loads(path.read_text())
meta, records = document["meta"], document["records"]
ceiling = next((r["gemm_ceiling_tflops"] for r in records if r.get("gemm_ceiling_tflops")), None)
print(f"\n{meta['card']}, torch {meta['torch']}, triton {meta['triton']}, Liger-Kernel {meta.get('liger_kernel')}, "
      f"Cut Cross-Entropy {meta.get('cut_cross_entropy')}, {meta.get('elapsed_s')} s; GEMM 8192^3 "
      + (f"{ceiling:.0f} TFLOP/s" if ceiling else "not measured"))
for target in document["targets"]:
    print(f"  {target['status']:>6}: {target['text']}")
print(f"\n{'shape':<18} {'mode':<7} {'provider':<10} {'ms':>9} {'TFLOP/s':>8} {'of GEMM':>7} {'x eager':>7} "
      f"{'peak MiB':>9} {'err':>8}  timing")


def cell(value, width, form):
    return format(value, f">{width}{form}") if isinstance(value, (int, float)) else f"{value or '':>{width}}"


eager = {(tuple(r["shape"]), r["mode"]): r["ms"] for r in records if r["provider"] == "eager" and r.get("ms")}
for r in records:
    shape = "x".join(map(str, r["shape"]))
    if r.get("error"):
        print(f"{shape:<18} {r['mode']:<7} {r['provider']:<10} failed: {r['error'][:80]}")
        continue
    base = eager.get((tuple(r["shape"]), r["mode"]))
    error = r["rel_err_out"] if r["mode"] == "fwd" else r["rel_err_grad"]
    cells = [cell(r["ms"], 9, ".3f"), cell(r.get("tflops"), 8, ".3g"), cell(r.get("frac_gemm"), 7, ".2f"),
             cell(base / r["ms"] if base else None, 7, ".2f"), cell(r.get("peak_mib"), 9, ".0f"), cell(error, 8, ".1e")]
    print(f"{shape:<18} {r['mode']:<7} {r['provider']:<10} " + " ".join(cells) + f"  {r.get('timing')}")
EOF
