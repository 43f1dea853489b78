#!/usr/bin/env bash
# The norm forward's rows a program and warps (issue 22), one call (one GPU; carry .whl for Liger-Kernel):
#
#   [FORMS=...] [WIDTHS=...] [WARPS_ARGS=...] [ROUND2_ARGS=...] [SWEEP=0] [BUDGET=300]
#       bash scripts/issue22_forward_warps_gpu.sh PACK      (writes PACK/results.tar.gz)
#
# 1. benchmarks/norm_forward_warps.py: the forward launcher on the rule's tile and on other rows a program and warps,
#    every form x rows {2048, 8192, 32768} x the sweep's widths up to 8192 (WARPS_ARGS: more arguments, e.g.
#    "--no-tiles --peers --setting early:FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES=0"); with ROUND2_ARGS, a second round
#    with those arguments (e.g. the same settings in the reverse order) into warps-2/;
# 2. the sweep's forward cells of the five norm ops with the peers (SWEEP=0: not), within BUDGET seconds.
set -u
PACK=${1:?usage: bash scripts/issue22_forward_warps_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
step 330 warps python3 benchmarks/norm_forward_warps.py --out "$OUT/warps" ${FORMS:+--forms "$FORMS"} \
    ${WIDTHS:+--widths "$WIDTHS"} ${WARPS_ARGS:-}
[ -z "${ROUND2_ARGS:-}" ] || step 330 warps-2 python3 benchmarks/norm_forward_warps.py --out "$OUT/warps-2" \
    ${FORMS:+--forms "$FORMS"} ${WIDTHS:+--widths "$WIDTHS"} ${ROUND2_ARGS}
[ "${SWEEP:-1}" = 0 ] || step $((${BUDGET:-300} + 150)) sweep python3 -m blockfuse bench ops --sweep --modes fwd \
    --op rms_norm layer_norm add_layer_norm layer_norm_post add_rms_norm --budget "${BUDGET:-300}" --warm-jobs 8 \
    --out "$OUT/sweep"
pack "$PACK"
