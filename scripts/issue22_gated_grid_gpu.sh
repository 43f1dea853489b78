#!/usr/bin/env bash
# (issue 22) The gated ops' small backward: the elementwise passes' 2-D grid (activation.TILES.grid_2d: no integer
# division before a program's first load) and the 8192-element tile on 8 warps, each against the rule's launch and
# the peers, one GPU, one call (~4 minutes; carry .whl for Liger-Kernel):
#   1. (tests) tests/ops/test_gated.py on CUDA: the two grids' values, the CUDA kernels and launches;
#   2. (gated) benchmarks/gated_inplace.py: SwiGLU's backward kernel alone (CUDA-graph replays, the L2 flushed,
#      alternating rounds) at 2048 rows and two larger shapes, the variants fresh (as shipped; the 2-D grid since
#      launch-rules/47-*), grid-1d, grid-2d, the tile TILE (default 8192:1024; on either grid before 47-*), Liger and
#      torch.compile; the forward's launch on either grid beside the peers' forwards;
#   3. (fp8; FP8=1 only) bash scripts/issue22_fp8_rows_gpu.sh's FP8 rows (FP8_WIDTHS, FP8_S as there), on an H200.
#
#   [TILE=8192:1024] [ROUNDS=5] [FP8=1] bash scripts/issue22_gated_grid_gpu.sh PACK     (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_gated_grid_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
packed 150 tests python3 -m pytest -q -rfE -p no:cacheprovider -n 8 tests/ops/test_gated.py
packed 270 gated python3 benchmarks/gated_inplace.py --rounds "${ROUNDS:-5}" --forward \
    --tiles "${TILE:-8192:1024}" --out "$OUT/gated" \
    --shapes 2048x768,2048x1024,2048x1536,2048x2048,2048x2560,2048x4304,8192x768,8192x4096
if [ "${FP8:-0}" = 1 ]; then
    FP8_WIDTHS=${FP8_WIDTHS:-2880,5120,5632,11008} FP8_S=${FP8_S:-150} TESTS=0 \
        bash "$(dirname "$0")/issue22_fp8_rows_gpu.sh" "$OUT/fp8rows" > "$OUT/fp8rows.log" 2>&1
    pack "$PACK"
fi
