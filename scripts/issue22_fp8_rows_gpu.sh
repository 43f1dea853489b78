#!/usr/bin/env bash
# (issue 22) The norms' forward into FP8 on the plain forward's rows (norm_tuning.FP8_FWD_PLAIN_ROWS: forward_rule's
# vector tails and wide tails, LayerNorm's rows where RMSNorm's plain rows are chunks) against its own rows, and with
# its own warps for them (FP8_FWD_TAIL_WARPS, on since its CUDA tests ran: fp8/38-plain-rows-2026-12-07-h100/),
# one GPU, one call (~5 minutes; carry .whl for Liger-Kernel):
#   1. (fp8) benchmarks/norm_fp8.py at FP8_WIDTHS x FP8_FORMS: the default and each of SETTINGS, in two alternating
#      rounds of one process (CUDA-graph replays, the L2 flushed; a same-size copy timed in the same run; every
#      variant's outputs checked too);
#   2. (tests; TESTS=0: none) tests/ops/test_norm_fp8.py on CUDA (its test_both_rows_rules runs both rows rules), with
#      TESTS_KNOBS ("name=VALUE ...", fields of norm_tuning.NormTuning) written into the defaults of this call's copy
#      of src/blockfuse/ops/norm_tuning.py first (the device works on a copy of the checkout).
#
#   [FP8_WIDTHS=2304,...] [FP8_FORMS=rms,ln,rms-pre,ln-post] [SETTINGS="LABEL:NAME=V,... ..."] \
#       [TESTS=0] [TESTS_KNOBS="fp8_fwd_tail_warps=False"] bash scripts/issue22_fp8_rows_gpu.sh PACK
#                                                                                   (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_fp8_rows_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SETTINGS=${SETTINGS:-"own:FP8_FWD_PLAIN_ROWS=False pw:FP8_FWD_TAIL_WARPS=False"}
ARGS=()
for setting in $SETTINGS; do ARGS+=(--setting "$setting"); done
WIDTHS=${FP8_WIDTHS:-2304,2880,4304,5120,6144,8192,11008,14336}
packed "${FP8_S:-330}" fp8 python3 benchmarks/norm_fp8.py --widths "$WIDTHS" \
    --forms "${FP8_FORMS:-rms,ln,rms-pre,ln-post}" "${ARGS[@]}" --rounds 2 --out "$OUT/fp8"
if [ "${TESTS:-1}" != 0 ]; then
    for knob in ${TESTS_KNOBS:-}; do  # the field's default in this copy: "    name: type = VALUE"
        sed -i -E "s/^(    ${knob%%=*}: [^=]+= ).*/\1${knob#*=}/" src/blockfuse/ops/norm_tuning.py
        grep -E "^    ${knob%%=*}:" src/blockfuse/ops/norm_tuning.py >> "$OUT/tests-knobs.log"
    done
    packed 200 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_norm_fp8.py
fi
pack "$PACK"
