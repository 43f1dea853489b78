#!/usr/bin/env bash
# `blockfuse report` on the GPU, as a user runs it (no arguments: every provider, max-autotune included),
# timed; then packed for the trip back:
#
#   bash scripts/report_gpu.sh OUT [REPORT ARGS ...]
#
# The report goes to its default folder, blockfuse-results/<date>-<card>-report/ (the path written in
# report.md's command), and is packed into OUT/report.tgz with its log (OUT/report.log, the wall time
# at its end) and OUT/env.log. A run cut short by the limit (LIMIT_S, default 570 s) still leaves the
# parts done so far: report.md is rewritten after every part.
set -u
OUT=${1:?usage: bash scripts/report_gpu.sh OUT [REPORT ARGS ...]}
shift
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -m blockfuse env > "$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.draw --format=csv >> "$OUT/env.log" 2>&1
start=$SECONDS
timeout -s INT "${LIMIT_S:-570}" python3 -m blockfuse report "$@" > "$OUT/report.log" 2>&1
echo "blockfuse report $*: exit $?, $((SECONDS - start)) s wall" | tee -a "$OUT/report.log"
tar czf "$OUT/report.tgz" blockfuse-results/*-report
