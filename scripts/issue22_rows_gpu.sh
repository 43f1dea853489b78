#!/usr/bin/env bash
# Issue 22, the norms' forward at a few thousand rows: rows a program from the row count (ops/norm.py,
# FWD_MIN_PROGRAMS_PER_SM), one GPU, one call (~5 minutes; carry .whl for Liger-Kernel):
#   1. the forward launcher alone (norm_tiles.py, CUDA-graph replays, L2 flushed) with the rule off (0) and at 2,
#      4, 8 and 16 programs a multiprocessor, at the sweep's small cells;
#   2. the op benchmark's forward at the same cells: torch.compile, Liger and blockfuse (the rule's default), and
#      the code before (_gpu/old) in the same call.
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue22_rows_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_rows_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
SHAPES=(2048x768 2048x1024 2048x1152 2048x2048 2048x3072 2048x4096 2048x5120 8192x768 8192x1024)
step 150 knob python3 benchmarks/norm_tiles.py --no-check --bwd '' --fwd '' --forms ln,rms,rms-pre \
    --shapes "$(IFS=,; echo "${SHAPES[*]}")" --fwd-knob FWD_MIN_PROGRAMS_PER_SM=0,2,4,8,16 --out "$OUT/knob"
OPS=(-m blockfuse bench ops --op rms_norm layer_norm add_rms_norm add_layer_norm --modes fwd --shapes "${SHAPES[@]}")
step 200 ops-new python3 "${OPS[@]}" --providers compile,liger,blockfuse --warm-jobs 8 --out "$OUT/ops-new"
[ ${#OLD[@]} -gt 0 ] && step 100 ops-old "${OLD[@]}" python3 "${OPS[@]}" --providers blockfuse --out "$OUT/ops-old"
pack "$PACK"
