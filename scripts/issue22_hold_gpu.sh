#!/usr/bin/env bash
# The norms' backward holding its bf16 row across the row sums and widening it again (the NOTE above norm._widen_bf16;
# knobs norm.BWD_HOLD: the padded 16384-lane tile instead of its second read, norm.BWD_HOLD_PIECES: rows in pieces
# instead of their fp32 tiles), against the rule, one call:
#
#   bash scripts/issue22_hold_gpu.sh PACK                  (writes PACK/results.tar.gz; run at 20bc5de: knobs off)
#   PHASE=confirm bash scripts/issue22_hold_gpu.sh PACK     (the rule that followed, at the commit that made it)
#   PHASE=sweep bash scripts/issue22_hold_gpu.sh PACK       (the op sweep at the widths the rules change; carry .whl)
#
# explore: 1. on CUDA, every form's backward with the knobs on against off (the largest difference); 2.
# benchmarks/norm_tiles.py, the backward launcher only: each setting in alternating rounds of one process, at SHAPES
# (fraction of a same-size copy).
# confirm: 1. tests/ops/test_norm.py on CUDA; 2. the launcher, the rule against both knobs off and against holding the
# pieces at any lanes a thread, at more widths and forms, and the GELU form's pieces held (norm.ACT_BWD_HOLD 1
# and 2, off).
# sweep: the op sweep (forward and forward + backward as users call it, with the peers) at the widths the rules change.
set -u
PACK=${1:?usage: bash scripts/issue22_hold_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${PHASE:-explore}" = confirm ]; then
    packed 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py
    SHAPES=${SHAPES:-8192x9216,8192x10240,2048x11008,8192x11008,8192x12288,8192x13312,2048x16384,8192x16384,32768x16384}
    packed 200 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "${FORMS:-ln,rms,ln-pre,ln-post}" \
        --fwd "" --bwd "" --no-check --bwd-setting "before:BWD_HOLD=False,BWD_HOLD_PIECES=False" --bwd-setting "rule:" \
        --bwd-setting "any-lanes:BWD_HOLD_PIECES_LANES_PER_THREAD=0" --setting-rounds 2 --out "$OUT/settings"
    GELU_SHAPES=${GELU_SHAPES:-8192x2560,8192x3072,8192x4304,8192x6144,8192x8704,8192x9216,8192x10240,8192x11008}
    packed 120 settings-gelu python3 benchmarks/norm_tiles.py --shapes "$GELU_SHAPES" \
        --forms ln-gelu --fwd "" --bwd "" --no-check --bwd-setting "rule:" --bwd-setting "hold1:ACT_BWD_HOLD=1" \
        --bwd-setting "hold2:ACT_BWD_HOLD=2" \
        --setting-rounds 2 --out "$OUT/settings-gelu"
    exit 0
fi
if [ "${PHASE:-explore}" = sweep ]; then
    packed 280 sweep python3 -m blockfuse bench ops --sweep --op ${SWEEP_OPS:-layer_norm rms_norm add_layer_norm \
        layer_norm_post layer_norm_gelu} --widths "${SWEEP_WIDTHS:-4304,9216,11008,12288,13312,16384}" \
        --rows 2048,8192,32768 --budget "${BUDGET:-250}" --out "$OUT/sweep"
    exit 0
fi
packed 150 check python3 - <<'PY'
import sys

import torch

import blockfuse

sys.path.insert(0, "benchmarks")
from norm_knobs import rule_constants

torch.manual_seed(0)
forms = {
    "ln": lambda x, w, b: blockfuse.layer_norm(x, w, b),
    "ln-gelu": lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b),
    "rms": lambda x, w, b: blockfuse.rms_norm(x, w),
    "ln-pre": lambda x, w, b: blockfuse.layer_norm(x, w, b, residual=x.detach() * 0.5)[0],
    "ln-post": lambda x, w, b: blockfuse.layer_norm(x, w, b, residual=x.detach() * 0.5, residual_mode="post"),
}
worst = 0.0
for n in (2560, 4304, 6144, 11008, 13312, 14336, 16384, 20000):
    for name, fn in forms.items():
        x = (torch.randn(333, n, device="cuda") * 2 + 0.3).bfloat16().requires_grad_()
        w = (torch.randn(n, device="cuda") * 0.5 + 1).bfloat16().requires_grad_()
        b = (torch.randn(n, device="cuda") * 0.1).bfloat16().requires_grad_()
        dy = torch.randn(333, n, device="cuda").bfloat16()
        grads = []
        for hold in (False, True):
            for t in (x, w, b):
                t.grad = None
            with rule_constants({"BWD_HOLD": hold, "BWD_HOLD_PIECES": hold}):
                fn(x, w, b).backward(dy)
            grads.append([t.grad.float() if t.grad is not None else torch.zeros(1, device="cuda") for t in (x, w, b)])
        diff = max((a - c).abs().max().item() for a, c in zip(*grads))
        worst = max(worst, diff)
        print(f"{n} {name}: hold against rule, largest difference {diff:.3g}")
print("largest difference", worst)
PY
SHAPES=${SHAPES:-8192x2560,8192x4304,8192x11008,32768x11008,8192x13312,8192x14336,8192x16384}
SETTINGS=${SETTINGS:-"rule:BWD_HOLD=False,BWD_HOLD_PIECES=False hold:BWD_HOLD=True holdp:BWD_HOLD_PIECES=True"}
settings=()
for setting in $SETTINGS; do settings+=(--bwd-setting "$setting"); done
packed 330 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms "${FORMS:-ln,rms,ln-gelu,ln-pre}" \
    --fwd "" --bwd "" --no-check "${settings[@]}" --setting-rounds 2 --out "$OUT/settings"
