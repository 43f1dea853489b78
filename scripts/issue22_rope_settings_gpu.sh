#!/usr/bin/env bash
# (issue 22) RoPE's launch settings on the card in hand, against torch.compile (one GPU, one call, ~4 minutes):
# the H100 missed "RoPE >= compile" at head_dim 64-80 with as many kv heads as heads (sweep/2026-12-07-h100-*:
# 0.95x at 72 32/32 seq 1024), where the H200 held it at every cell; two heads a flat program took 72 / 80
# to 1.00-1.03x there (launch-rules/45-rope-settings-2026-12-07-h100/; h4 is the rule before it).
# benchmarks/rotary_head_dims.py at HEAD_DIMS x (heads, kv heads)
# {32/32, 32/8, 16/4} x SEQS: the launcher as shipped, each SETTINGS variant (fields of
# ops/rotary.py's TILES changed: the flat kernel's heads a program, programs a multiprocessor, tile; the padded
# kernel's tile, which head_dim 64 takes), and torch.compile, in one process per seq; every variant checked within
# 1 bf16 ulp.
#
#   [HEAD_DIMS=64,72,80] [SEQS="1024 4096"] [SETTINGS="LABEL:NAME=V,... ..."] [TESTS=0] \
#       bash scripts/issue22_rope_settings_gpu.sh PACK                                   (writes PACK/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_rope_settings_gpu.sh PACK}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
SETTINGS=${SETTINGS:-"h4:TILES.flat_heads_per_program=4 h8:TILES.flat_heads_per_program=8
    p32:TILES.flat_programs_per_sm=32 t2048:TILES.flat_tile=2048 t512:TILES.flat_tile=512 pt512:TILES.tile_elements=512
    pt2048:TILES.tile_elements=2048"}
ARGS=()
for setting in $SETTINGS; do ARGS+=(--setting "$setting"); done
[ "${TESTS:-1}" = 0 ] || packed 120 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_rotary.py
for seq in ${SEQS:-1024 4096}; do
    packed 200 "rope-$seq" python3 benchmarks/rotary_head_dims.py --head-dims "${HEAD_DIMS:-64,72,80}" --seq "$seq" \
        --variants new,compile "${ARGS[@]}" --out "$OUT/rope-$seq"
done
pack "$PACK"
