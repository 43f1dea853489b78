#!/usr/bin/env bash
# Rows of 12289-14336 lanes in the backward: three pieces (8192 + 4096 + 1024 / 2048, 16 warps, each row read once)
# against the padded 16384-lane tile that reads each row twice (the NOTE above norm.BWD_THREE_PIECES_MAX_LANES).
# One call (one GPU; carry .whl for Liger-Kernel):
#   bash scripts/issue22_three_pieces_gpu.sh PACK                      (writes PACK/results.tar.gz)
# benchmarks/norm_tiles.py --bwd-setting, the backward launcher in alternating rounds of one process: "old" (the
# padded tile), "p3" (three pieces, unpipelined), "p3s" (pipelined by the depth rule), "p3w" (the weight read again
# each row: RELOAD in pieces), "p3ws" (both); the GELU form the same with ACT_BWD_THREE_PIECES; then the op benchmark
# at 14336 wide (forward + backward, the peers) on this checkout. TESTS=1: the pieces' CUDA tests first.
set -u
PACK=${1:?usage: bash scripts/issue22_three_pieces_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
[ -n "${TESTS:-}" ] && step 200 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
    -k "pieces or reload or wide"
SHAPES=${SHAPES:-16384x14336,4096x14336,32768x14336,16384x13312,16384x12800}
PIPE="BWD_PIPELINE_MAX_LANES=14336"
[ -z "${ROUND2:-}${ROUND3:-}${ROUND4:-}" ] && step ${LIMIT:-240} settings python3 benchmarks/norm_tiles.py --shapes "$SHAPES" --forms ${FORMS:-ln,rms,ln-pre,rms-pre,ln-post} \
    --fwd "" --bwd "" --no-check --bwd-setting "old:BWD_THREE_PIECES_MAX_LANES=0" --bwd-setting "p3:" \
    --bwd-setting "p3s:$PIPE" --bwd-setting "p3w:BWD_RELOAD=True" --bwd-setting "p3ws:$PIPE,BWD_RELOAD=True" \
    --setting-rounds 2 --out "$OUT/settings"
G="ACT_BWD_THREE_PIECES=True"
[ -z "${ROUND2:-}${ROUND3:-}${ROUND4:-}" ] && step ${GELU_LIMIT:-120} gelu python3 benchmarks/norm_tiles.py --shapes "${GELU_SHAPES:-16384x14336,16384x13312,4096x14336}" \
    --forms ln-gelu --fwd "" --bwd "" --no-check --bwd-setting "old:" --bwd-setting "p3:$G" \
    --bwd-setting "p3s:$G,$PIPE" --bwd-setting "p3w:$G,BWD_RELOAD=True" --setting-rounds 2 --out "$OUT/gelu"
# ROUND2=1: the second probe instead of the above: the plain forms with the weight read each row and the pipeline's
# third stage past BWD_SMEM_BYTES (three stages of a 14336-lane row: 168 KiB); then the two pieces (9216-12288) on the
# code before (_gpu/old: `git archive bfaadd3 src | tar x -C _gpu/old`) and on this checkout, each in a process of its
# own (EARLY_ACC, a module constant, cannot change within one): the weight / bias gradients accumulated before the row
# sums rather than after the stores.
if [ -n "${ROUND2:-}" ]; then
    old_code
    S3="BWD_SMEM_BYTES=180000"
    step 230 round2 python3 benchmarks/norm_tiles.py --forms ln,rms,ln-post --fwd "" --bwd "" --no-check \
        --shapes "${SHAPES2:-16384x14336,4096x14336,32768x14336,16384x13312,16384x12800}" \
        --bwd-setting "old:BWD_THREE_PIECES_MAX_LANES=0" --bwd-setting "rule:" --bwd-setting "s3:$S3" \
        --bwd-setting "s3-late:$S3,BWD_RELOAD=False" --setting-rounds 2 \
        --out "$OUT/round2"
    TWO=(--shapes 16384x9216,16384x11008,16384x12288,4096x11008 --forms ln,rms,ln-pre,ln-post,ln-gelu --fwd "" --bwd ""
         --no-check --bwd-setting "rule:" --bwd-setting "w:BWD_RELOAD=True" --setting-rounds 2)
    for round in 1 2; do
        step 60 "two-new-$round" python3 benchmarks/norm_tiles.py "${TWO[@]}" --out "$OUT/two-new-$round"
        [ ${#OLD[@]} -gt 0 ] && step 60 "two-old-$round" "${OLD[@]}" python3 benchmarks/norm_tiles.py "${TWO[@]}" \
            --out "$OUT/two-old-$round"
    done
    pack "$PACK"
    exit 0
fi
# ROUND3=1: the third call: the norm tests on CUDA (pieces, reload, wide rows, the accumulators' order, fp32 without
# a floor), the accumulators' order (BWD_EARLY_ACC forced off / the rule / forced on) over the narrow, wide and three
# pieces, then the op benchmark (forward + backward, the peers) at 11008 and 13312 wide.
if [ -n "${ROUND3:-}" ]; then
    step 170 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_norm.py \
        -k "pieces or reload or wide or early or three or fp32_within or persistent"
    step 220 early python3 benchmarks/norm_tiles.py --forms ln,rms,ln-pre,ln-post,ln-gelu --fwd "" --bwd "" --no-check \
        --shapes "${SHAPES3:-16384x4304,16384x9216,16384x11008,16384x12288,2048x11008,16384x13312,16384x12800}" \
        --bwd-setting "late:BWD_EARLY_ACC=False" --bwd-setting "rule:" --bwd-setting "early:BWD_EARLY_ACC=True" \
        --setting-rounds 2 --out "$OUT/early"
    step 120 ops python3 -m blockfuse bench ops --op layer_norm rms_norm add_layer_norm layer_norm_post layer_norm_gelu \
        --shapes 8192x11008 2048x11008 32768x11008 8192x13312 --modes fwdbwd --quick --warm-jobs 8 --out "$OUT/ops"
    pack "$PACK"
    exit 0
fi
# ROUND4=1: the GELU form's narrower pieces (one row of 2048-8704 lanes) with the accumulators forced before the row
# sums, and the op benchmark of ROUND3 again (fewer files: the device returns a few).
if [ -n "${ROUND4:-}" ]; then
    step 90 early4 python3 benchmarks/norm_tiles.py --forms ln-gelu --fwd "" --bwd "" --no-check \
        --shapes "${SHAPES4:-16384x2304,16384x2880,16384x3072,16384x4304,16384x5120,16384x6144,16384x8704,32768x3072,2048x3072}" \
        --bwd-setting "rule:" --bwd-setting "early:BWD_EARLY_ACC=True" --setting-rounds 2 --out "$OUT/early4"
    step 120 ops python3 -m blockfuse bench ops --op layer_norm rms_norm add_layer_norm layer_norm_post layer_norm_gelu \
        --shapes 8192x11008 2048x11008 32768x11008 8192x13312 --modes fwdbwd --quick --warm-jobs 8 --out "$OUT/ops"
    rm -f "$OUT/ops/ops.png"
    pack "$PACK"
    exit 0
fi
[ -n "${OPS:-}" ] && step 150 ops python3 -m blockfuse bench ops --op layer_norm rms_norm add_layer_norm \
    layer_norm_post layer_norm_gelu --shapes 8192x14336 2048x14336 32768x14336 --modes fwdbwd --quick --warm-jobs 8 \
    --out "$OUT/ops"
pack "$PACK"
