#!/usr/bin/env bash
# Issue 22's whole sweep grid (not --quick: 14 widths x 3 row counts, RoPE 6 head dims x 3 GQA ratios x 2 lengths),
# in calls of under 10 minutes each, every cell's compiles made first by 8 processes (--warm-jobs 8: about 1.4 s a
# cell measuring on an H200, benchmarks/results/sweep/README.md). One GPU a call; carry .whl for Liger-Kernel.
#
#   bash scripts/sweep_full_gpu.sh PACK norms        # rms_norm layer_norm add_rms_norm add_layer_norm: 168 cells
#   bash scripts/sweep_full_gpu.sh PACK more-norms   # layer_norm_gelu layer_norm_post rotary: 120 cells
#   bash scripts/sweep_full_gpu.sh PACK elementwise  # swiglu geglu swiglu_packed bias_dropout_add: 168 cells
#
# Each writes PACK/results.tar.gz (the sweep's JSON, Markdown and heat maps, and its log).
set -u
USAGE="usage: bash scripts/sweep_full_gpu.sh PACK norms|more-norms|elementwise"
PACK=${1:?$USAGE}
case "${2:?$USAGE}" in
    norms) OPS=(rms_norm layer_norm add_rms_norm add_layer_norm) ;;
    more-norms) OPS=(layer_norm_gelu layer_norm_post rotary) ;;
    elementwise) OPS=(swiglu geglu swiglu_packed bias_dropout_add) ;;
    *) echo "$USAGE; got $2" >&2; exit 2 ;;
esac
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 560 sweep python3 -m blockfuse bench ops --sweep --op "${OPS[@]}" --budget 480 --warm-jobs 8 --out "$OUT/sweep-$2"
pack "$PACK"
