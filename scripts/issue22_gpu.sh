#!/usr/bin/env bash
# Issue 22's kernel changes on one GPU in one call (about 7 minutes):
#
#   bash scripts/issue22_gpu.sh OUT
#
# 1. the norms in every form and dtype at widths of every tile form against float64 (benchmarks/norm_tiles.py);
# 2. the norm launch rule against the power-of-two tile it replaced, forward and backward, with a same-size copy
#    (benchmarks/norm_rule.py);
# 3. RoPE's tile rule against the padded block and torch.compile at head_dim 64-256 (benchmarks/rotary_head_dims.py,
#    which also checks each variant against the fp32 reference);
# 4. the FP8 linear's tests on CUDA.
set -u
OUT=${1:?usage: bash scripts/issue22_gpu.sh OUT}
mkdir -p "$OUT"
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
python3 -m blockfuse env > "$OUT/env.log" 2>&1
step 60 norm-check python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import norm_tiles as t; f = t.check_correctness(); print('failures', len(f), *f, sep='\n'); sys.exit(bool(f))"
step 130 norm-rule python3 benchmarks/norm_rule.py --out "$OUT" --widths 1152,2880,4304,5120,11008,14336 --forms ln,rms,ln-pre
step 40 norm-rule-gelu python3 benchmarks/norm_rule.py --out "$OUT/gelu" --widths 1152,4304 --forms ln-gelu,ln-post
step 120 rotary python3 benchmarks/rotary_head_dims.py --out "$OUT"
step 70 fp8-tests python3 -m pytest -q -p no:cacheprovider -rfE tests/ops/test_fp8.py tests/nn/test_fp8.py
