#!/usr/bin/env bash
# The plain norms' backward past 8192 lanes in two pieces (11008 = 8192 + 4096 lanes, read once) against the padded
# 16384-lane tile read twice (the rule before), one call (one GPU). Prepared 2026-12-01 from the sm_90 builds on the CPU
# and run on an H200 (benchmarks/results/launch-rules/20-wide-pieces-2026-12-01-h200/1-settings/); the rule since
# takes the pieces (the NOTE above norm.BWD_WIDE_PIECES_MAX_LANES), so its first setting, "padded", sets them off:
#
#   bash scripts/issue22_wide_pieces_gpu.sh PACK                            (writes PACK/results.tar.gz)
#
# 1. each setting's gradients on CUDA against the rule's (every form, bf16, within a bf16 rounding);
# 2. benchmarks/norm_tiles.py --bwd-setting, alternating rounds of one process: the padded tile, the pieces on 16
#    warps (768 lanes a warp) and on 8 (1536), at SHAPES.
set -u
PACK=${1:?usage: bash scripts/issue22_wide_pieces_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
WIDE="BWD_PIECES_MAX_LANES=12288,BWD_PIECES_MAX_TAIL=8192"
P16="p16:$WIDE,BWD_PIECE_LANES_PER_WARP=768"
P8="p8:$WIDE,BWD_PIECE_LANES_PER_WARP=1536"
# 0. the norm tests on CUDA (the wide tails' accuracy tests of 2026-12-01 first ran here).
[ -z "${SKIP_TESTS:-}" ] && step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    tests/ops/test_layer_norm_gelu.py
step 120 check python3 - "$P16" "$P8" <<'PY'
import sys, torch
sys.path.insert(0, "benchmarks")
from blockfuse.ops import norm
from norm_tiles import FORMS, _backward, _forward, _inputs, parse_setting, rule_constants
failures = 0
for setting in sys.argv[1:]:
    label, values = parse_setting(setting)
    for n in (10240, 11008, 12288):
        for form, (is_rms, mode) in FORMS.items():
            x, r, w, b = _inputs((64, n), is_rms, mode)
            y, s, mean, rstd = _forward(x, w, b, r, mode, is_rms)
            z = s if mode == "pre" else x
            dy = torch.randn_like(x)
            ds = torch.randn_like(x) if mode == "pre" else None
            ref = _backward(dy, ds, z, w, b, mean, rstd, mode, is_rms)
            with rule_constants(values):
                tile = norm.backward_rule(n, 1 if mode == "gelu" else 0, mode == "pre", is_rms=is_rms)
                out = _backward(dy, ds, z, w, b, mean, rstd, mode, is_rms)
            for name, a, e in zip(("dx", "dres", "dw", "db"), out, ref):
                if e.numel() and not torch.allclose(a.float(), e.float(), rtol=2 ** -7, atol=1e-2 * e.float().abs().max().item()):
                    failures += 1
                    print(f"{label} {n} {form} {name}: max diff {(a.float() - e.float()).abs().max().item():.3e}")
            print(f"{label} {n} {form}: {tile}", flush=True)
print("failures", failures)
sys.exit(1 if failures else 0)
PY
SHAPES=${SHAPES:-16384x11008,32768x11008,4096x11008,16384x12288,16384x10240}
step 300 settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ln,rms,ln-pre,rms-pre,ln-post \
    --fwd "" --bwd "" --no-check --bwd-setting "padded:BWD_WIDE_PIECES_MAX_LANES=0" --bwd-setting "$P16" --bwd-setting "$P8" --setting-rounds 2 \
    --out "$OUT/settings"
pack "$PACK"
