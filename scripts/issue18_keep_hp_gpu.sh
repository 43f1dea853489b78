#!/usr/bin/env bash
# Issue 18, a tensorwise FP8 layer keeps its input (recomputed by the block's hooks, or kept by attention) instead of
# its transposed e4m3 cast (ops/fp8.py, _kept_for_free; models/recompute.py): one GPU, one call (~8 minutes; carry
# .whl with torchao's wheel):
#   1. the FP8 and block tests on CUDA, and the reference-cycle test right after a compile test in one process (the
#      order that failed in benchmarks/results/session-check/2026-11-28-h200-c/);
#   2. te-4layer (4 layers, [8, 2048, 2048]) training step: bf16 compile and torchao tensorwise compiled (the
#      targets' baselines), blockfuse's fused FP8 tensorwise block new and old, default and +recompute.
#
#   git archive <commit before> src | tar x -C _gpu/old    # the code before (untracked: it travels)
#   bash scripts/issue18_keep_hp_gpu.sh OUT        (writes OUT/results.tar.gz)
# (scripts/issue18_weight_t_gpu.sh with the block tests and the cycle tests added)
EXTRA_TESTS=tests/models/test_blocks.py CYCLES=1 exec bash "$(dirname "$0")/issue18_weight_t_gpu.sh" "$@"
