#!/usr/bin/env bash
# (issue 22) The gated ops' forward then backward in one replay, as the sweep's forward + backward cells run them (one
# L2 flush, so the backward finds gate and up in the L2): blockfuse 0.888-0.974x the faster peer at 2048 rows on an
# H100 where the kernels alone tie, and not because of the in-place writes (launch-rules/50-gated-sequence-*). This
# times the backward's tiles in that sequence (seq-tile-E-W: 8 elements a thread, as Liger's one row on 4 warps). The
# shipped backward tile (4096 elements, 512 a warp: 16 a thread on 8 warps) issues half its loads only after the first
# half's math (sm_90 SASS, Triton 3.6 and 3.9: loads at instructions 34-55 and 165-177), two memory round trips a
# thread; 2048:256 and 4096:256 (8 a thread) and 2048:512 (16 a thread on 4 warps) issue all six first. One GPU, one
# call (~3 minutes; carry .whl for Liger-Kernel):
#   1. (tests) tests/bench/test_gated_inplace.py and tests/ops/test_gated.py on CUDA;
#   2. (seq) benchmarks/gated_inplace.py --sequence with the tiles TILES (default 1024:256,2048:256,2048:512,4096:256)
#      at 2048 rows and [8192, 768], 5 alternating rounds.
#
#   [TILES=E:W,...] [SHAPES=MxN,...] [ROUNDS=5] [SEQ_S=240] bash scripts/issue22_gated_seq_gpu.sh PACK
#                                                                                   (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_gated_seq_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
packed 150 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/bench/test_gated_inplace.py \
    tests/ops/test_gated.py
packed "${SEQ_S:-240}" seq python3 benchmarks/gated_inplace.py --rounds "${ROUNDS:-5}" --sequence \
    --tiles "${TILES:-1024:256,2048:256,2048:512,4096:256}" --out "$OUT/seq" \
    --shapes "${SHAPES:-2048x768,2048x1024,2048x1536,2048x2048,2048x2560,2048x4304,8192x768}"
pack "$PACK"
