#!/usr/bin/env bash
# Probes of the norm kernels' settings, each knob against the shipped rule in one process (norm_tiles.py /
# norm_fp8.py: CUDA-graph replays, L2 flushed, fraction of a device copy timed in the same run):
# 1. rows past 8192 lanes, backward: the pipeline depth (BWD_STAGES 2 / 3), the pre-residual forms in one tile of
#    16384 lanes instead of chunks (BWD_MAX_LANES_PRE), reading each row twice (BWD_RELOAD);
# 2. the forward of rows just past a power of two: the tail-warps rule (TAIL_VECTOR 8) against no cap;
# 3. LayerNorm / RMSNorm + FP8 quantize (issue 18): warps, tiles and register caps of the FP8 forward.
# One GPU, one call (~7 minutes):  bash scripts/probe_norms_gpu.sh PACK   (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/probe_norms_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
TILES=(benchmarks/norm_tiles.py --no-check --fwd '' --bwd '')
step 200 wide-bwd python3 "${TILES[@]}" --forms ln,rms,ln-pre,rms-pre --shapes 8192x11008,8192x14336,4096x16384 \
    --bwd-knob BWD_STAGES=2,3 --bwd-knob BWD_MAX_LANES_PRE=8192,16384 --bwd-knob BWD_RELOAD=False,True \
    --out "$OUT/wide-bwd"
step 90 tail-fwd python3 "${TILES[@]}" --forms ln,rms,ln-post --shapes 8192x9000,8192x9216,8192x10240,8192x11008 \
    --fwd-knob TAIL_VECTOR=8,100000 --out "$OUT/tail-fwd"
step 150 norm-fp8 python3 benchmarks/norm_fp8.py --widths 4096,8192 --forms ln,rms --warps 4,8 --tiles 2x4,2x8 \
    --maxnreg 56,64 --out "$OUT/norm-fp8"
pack "$PACK"
