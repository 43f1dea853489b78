"""Saved-tensor hooks of the fused block: a tensor that its ops would keep for the backward (a pre-norm's
output, a reordered block's attention output projection) is not kept, and the backward recomputes it from
tensors kept anyway. Eager autograd only."""

from __future__ import annotations

import contextlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from blockfuse.models.fused import _norm
from blockfuse.models.saved_hooks import _recording_eagerly
from blockfuse.ops.sharding import is_dtensor


class _RecomputedOutput(torch.autograd.graph.saved_tensors_hooks):
    """While active, a tensor ``y`` that the ops of the block save for their backward is not kept:
    the backward rebuilds it with ``recompute()`` from tensors that are kept anyway. Two uses:

    * a pre-norm's output (the QKV GEMM's input, the MLP's input), recomputed from the norm's input
      ``s``, which the norm keeps: one (tokens, d_model) tensor less per norm, for one more norm
      forward in the backward. The recomputation normalizes ``s`` as rounded to its dtype (the
      fused add + norm kernel normalized the fp32 sum): the same rounding the norm's own backward
      works with.
    * a reordered block's attention output projection (the post-norm's input, which that norm
      saves), recomputed from the attention output, which the projection keeps for its weight's
      gradient: one (tokens, d_model) tensor less through the MLP's backward, where the block's
      peak is, for one (tokens, q_width) x (q_width, d_model) GEMM more. The same cuBLAS call on the
      same operands gives the same numbers.

    Views of ``y`` (a GEMM saves its input reshaped to 2-D) are rebuilt on the recomputed tensor.
    Eager only: under torch.compile the hooks would cost graph breaks, and Inductor plans its own
    recomputation.

    ``pack.kept_for_free(t)``: saving ``t`` costs no memory under these hooks, because its storage is y's
    (recomputed) or one an op under them saved already (attention keeps its output): a tensorwise FP8 layer then
    keeps its input, not a cast of it (``ops/fp8.py``, ``_kept_for_free``). A storage saved and then freed within the
    hooks' life (a graph dropped during the forward) could be taken for a kept one at the same address: a
    tensor kept that was not free, never a wrong value."""

    def __init__(self, y: Tensor, recompute):
        storage = y.untyped_storage()
        pointer, size = storage.data_ptr(), storage.nbytes()
        saved = set()  # (pointer, size) of the storages the ops under these hooks keep

        def pack(t: Tensor):
            if is_dtensor(t):  # a DTensor (tensor parallelism, blockfuse.distributed) is never the plain y
                return t.detach()
            kept = t.untyped_storage()
            if kept.data_ptr() != pointer or kept.nbytes() != size:
                saved.add((kept.data_ptr(), kept.nbytes()))
                # NOTE: detached, not t itself: an op that saves its own output (attention does)
                # would otherwise hold node -> t -> t.grad_fn -> node, a cycle through C++ nodes
                # that Python's collector cannot free (every training forward's graph leaked).
                return t.detach()
            return (t.shape, t.stride(), t.storage_offset())  # no reference to y: it can be freed

        def kept_for_free(t: Tensor) -> bool:
            if is_dtensor(t):
                return False
            kept = t.untyped_storage()
            key = (kept.data_ptr(), kept.nbytes())
            return key == (pointer, size) or key in saved

        def unpack(packed):
            if isinstance(packed, Tensor):
                return packed
            shape, stride, offset = packed
            with torch.no_grad():
                return recompute().as_strided(shape, stride, offset)

        pack.keeps_other_tensors = True  # (ops/fp8_act.py: a tensor kept on an autograd ctx is no different here)
        pack.kept_for_free = kept_for_free
        super().__init__(pack, unpack)


def _without_saved_norm_output(y: Tensor, norm: nn.Module, s: Tensor):
    """The ``_RecomputedOutput`` context for ``y = norm(s)`` when autograd records the block
    eagerly; a context that does nothing otherwise."""
    if not _recording_eagerly(s):
        return contextlib.nullcontext()
    # NOTE: the hook holds s detached, for the same reason as pack's detach (no cycle through
    # s.grad_fn); s's storage then lives as long as the hook, as the norm's own saved s does.
    source = s.detach()
    return _RecomputedOutput(y, lambda: _norm(norm, source))


def _without_saved_projection(y: Tensor, linear: nn.Linear, a: Tensor):
    """The ``_RecomputedOutput`` context for ``y = linear(a)`` when autograd records the block
    eagerly; a context that does nothing otherwise. ``a`` and the weights are held detached (the
    projection keeps the same storages for its own backward)."""
    if not _recording_eagerly(a) or is_dtensor(linear.weight):
        # a row-parallel projection (blockfuse.distributed): y is the ranks' reduced sum, not linear(a)
        return contextlib.nullcontext()
    source, weight = a.detach(), linear.weight.detach()
    bias = None if linear.bias is None else linear.bias.detach()
    return _RecomputedOutput(y, lambda: F.linear(source, weight, bias))



def _with_kept_storages(q: Tensor, proxy: Optional[Tensor]):
    """blockfuse's saved-tensor hooks around the ops that read ``q``, a norm's e4m3 output (``proxy`` its stand-in
    in autograd), when autograd records eagerly: they recompute nothing (no op under them saves q: its layer casts
    q^T again from the norm's input) but know which storages those ops keep (``pack.kept_for_free``), so that the
    attention's output projection keeps that output, which attention keeps anyway, not a cast of it."""
    if proxy is None or not _recording_eagerly(proxy):
        return contextlib.nullcontext()

    def unreachable():
        raise RuntimeError("a norm's e4m3 output was saved under blockfuse's hooks, which do not recompute it")

    return _RecomputedOutput(q, unreachable)
