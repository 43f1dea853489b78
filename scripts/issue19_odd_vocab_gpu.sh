#!/usr/bin/env bash
# The fused LM head + cross-entropy at a vocabulary that is not a multiple of 16 (GPT-2's 50257) against 50264: the
# op and torch.compile of HF's loss, the code before (_gpu/old) and the new (logits rows padded to 16, the GEMMs split
# at 50256); a chunk's three GEMMs whole and split; the cross-entropy tests on CUDA. One GPU, one call (~5 minutes):
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   [SKIP_TESTS=1] bash scripts/issue19_odd_vocab_gpu.sh OUT        (writes OUT/results.tar.gz)
set -u
PACK=${1:?usage: bash scripts/issue19_odd_vocab_gpu.sh OUT}
OUT=$(mktemp -d)
source "$(dirname "$0")/device_python.sh"
export PYTHONUNBUFFERED=1
write_env
old_code
[ -z "${SKIP_TESTS:-}" ] && step 100 tests python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/ops/test_cross_entropy.py
step 40 gemms python3 benchmarks/cross_entropy_odd_vocab.py
CE=(-m blockfuse bench ops --op linear_cross_entropy --shapes 8192x4096x50257 8192x4096x50264 --modes fwdbwd
    --providers compile,blockfuse)
step 150 ce-new python3 "${CE[@]}" --out "$OUT/ce-new"
[ ${#OLD[@]} -gt 0 ] && step 130 ce-old "${OLD[@]}" python3 "${CE[@]}" --out "$OUT/ce-old"
pack "$PACK"
