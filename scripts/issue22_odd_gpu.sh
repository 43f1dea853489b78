#!/usr/bin/env bash
# Issue 22 follow-ups at widths that are not multiples of 16, one GPU, one call (~5 minutes; carry .whl for
# Liger-Kernel):
#   * the norms' forward at 9000 / 4300 / 1128 wide with 16, 8 and 4 warps a row (norm_tiles.py --fwd);
#   * the fused LM head + cross-entropy at a vocabulary of 50257 (GPT-2's) against 50264, fwd+bwd, and
#     torch.compile of HF's loss at both, the code before (_gpu/old) and the new; the cross-entropy tests on CUDA.
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   [SKIP_TESTS=1] bash scripts/issue22_odd_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue22_odd_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 120 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_cross_entropy.py
step 100 fwd-warps python3 benchmarks/norm_tiles.py --no-check --bwd '' --fwd '4096;1024,2048,4096' --forms ln,rms,ln-post \
    --shapes 8192x9000,8192x4300,16384x1128,8192x11008 --out "$OUT/fwd-warps"
CE=(-m blockfuse bench ops --op linear_cross_entropy --shapes 8192x4096x50257 8192x4096x50264 --modes fwdbwd
    --providers compile,blockfuse)
step 150 ce-new python3 "${CE[@]}" --out "$OUT/ce-new"
[ ${#OLD[@]} -gt 0 ] && step 120 ce-old "${OLD[@]}" python3 "${CE[@]}" --out "$OUT/ce-old"
pack "$PACK"
