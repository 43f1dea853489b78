#!/usr/bin/env bash
# Where te-4layer's FP8 tensorwise fused training step leaves the GPU idle (issue 18: its wall time is ~1.9 ms above
# its kernels' time), beside bf16 compile's step (one GPU, ~2 minutes):
#
#   bash scripts/fp8_trace_gpu.sh PACK        (writes PACK/results.tar.gz)
#
# `benchmarks/profile_block.py --trace`: three steps back to back, a Chrome trace of the GPU alone and one with the
# host; then `benchmarks/trace_gaps.py` on them: the GPU's idle gaps, where they fall, and the runtime calls that wait
# on the GPU.
# Then `benchmarks/host_slack.py`, unprofiled: each step with a GPU spin of 1, 2 and 4 ms queued first, which hides
# any wait of the GPU on the host up to the spin's length. SLACK_ONLY=1: that alone.
set -u
PACK=${1:?usage: bash scripts/fp8_trace_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
if [ "${SLACK_ONLY:-0}" != 1 ]; then
    PROFILE=(benchmarks/profile_block.py te-4layer --layers 4 --mode fwdbwd --top 10 --trace "$OUT/traces")
    step 60 trace-fused python3 "${PROFILE[@]}" --providers fused --linear fp8:tensorwise
    step 90 trace-compile python3 "${PROFILE[@]}" --providers compile:default
    step 60 gaps python3 benchmarks/trace_gaps.py "$OUT"/traces/*-gpu.json "$OUT"/traces/*-host.json --top 15 \
        --json "$OUT/gaps.json"
    cat "$OUT/gaps.log"
    gzip "$OUT"/traces/*.json
fi
SLACK=(benchmarks/host_slack.py te-4layer --layers 4 --sleep-ms 1 2 4)
step 90 slack-fp8 python3 "${SLACK[@]}" --providers fused --linear fp8:tensorwise --json "$OUT/slack-fp8.json"
step 120 slack-bf16 python3 "${SLACK[@]}" --providers compile:default --json "$OUT/slack-bf16.json"
cat "$OUT"/slack-*.log
pack "$PACK"
