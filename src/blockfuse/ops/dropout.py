"""Seeded dropout shared by every fused op.

The mask is never stored: a kernel draws ``keep = uniform(seed, i) >= p`` from Triton's
Philox stream, where ``i`` is the flat index of the element in the contiguous logical
tensor, and the backward kernel draws the same bits again from the same seed.

The seed is a one-element int64 tensor on the op's device, drawn with torch's generator,
so ``torch.manual_seed`` makes runs reproducible and drawing it stays inside a compiled
graph (no ``.item()``, no host sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# NOTE: 2**31 - 1 keeps the seed a non-negative int32 value; Philox mixes it with the
# element index, so nothing is gained by a wider seed and nothing overflows.
_SEED_HIGH = 2**31 - 1


@triton.jit
def dropout_keep(seed, offsets, p):
    """True where the element with flat index ``offsets`` survives dropout with probability ``p``."""
    return tl.rand(seed, offsets) >= p


@triton.jit
def _keep_mask_kernel(
    SEED,  # int64 [1]: the dropout seed
    MASK,  # bool as int8 [numel]: 1 where kept
    numel,
    p,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(SEED)
    keep = dropout_keep(seed, offsets, p)
    tl.store(MASK + offsets, keep.to(tl.int8), mask=offsets < numel)


def draw_seed(device: torch.device | str) -> torch.Tensor:
    """A fresh dropout seed: an int64 tensor of shape (1,) on ``device``."""
    return torch.randint(0, _SEED_HIGH, (1,), dtype=torch.int64, device=device)


def keep_mask(seed: torch.Tensor, numel: int, p: float) -> torch.Tensor:
    """The keep-mask (bool, shape ``(numel,)``) that the kernels draw for ``seed`` and ``p``.

    For tests and debugging: it runs the same Philox helper as the fused kernels.
    """
    mask = torch.empty(numel, dtype=torch.int8, device=seed.device)
    block = 1024
    _keep_mask_kernel[(triton.cdiv(numel, block),)](seed, mask, numel, float(p), BLOCK=block)
    return mask.bool()
