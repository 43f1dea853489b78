"""Saved-tensor hooks that the fused modules open themselves (models/fused.py) and that the block's own hooks
(models/recompute.py) build on: whether autograd records a forward eagerly, and :class:`_RecomputedTensors`."""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from blockfuse.ops.fp8 import _top_saved_tensor_hooks
from blockfuse.ops.sharding import is_dtensor


def _recording_eagerly(source: Tensor) -> bool:
    """Autograd records this forward eagerly (not under torch.compile) and ``source`` takes part, as a plain
    tensor (a DTensor of sequence parallelism has no storage of its own to recognize)."""
    return (torch.is_grad_enabled() and not torch.compiler.is_compiling() and source.requires_grad
            and not is_dtensor(source))


class _Outer:
    """A saved tensor as the hooks outside :class:`_RecomputedTensors` packed it (their unpack gets it back)."""

    __slots__ = ("packed",)

    def __init__(self, packed):
        self.packed = packed


class _RecomputedTensors(torch.autograd.graph.saved_tensors_hooks):
    """While active, the tensors ``ys`` (or views of them) that ops save for their backward are not kept: the
    backward rebuilds them all with one ``recompute()``, which returns them in order, from tensors kept anyway. Every
    other saved tensor goes to the saved-tensor hooks in force outside these (a fused pre-norm block's
    :class:`_RecomputedOutput`, whose ``kept_for_free`` must still see what attention keeps), or is kept as it is.

    One use: attention's rotated q and k in a block with QK-norm and RoPE (:meth:`FusedAttention.attend`). The
    QK-norms keep their inputs, q and k as views of the QKV GEMM's output, so the rotated copies attention saves are
    a second (tokens, q_width + kv_width) tensor a layer; the backward normalizes and rotates again (the same kernels
    on the same inputs: the same bits) before attention's backward reads them. The recomputed tensors live while an
    unpacked view of them does: attention's backward."""

    def __init__(self, ys: tuple[Tensor, ...], recompute):
        keys = {(y.untyped_storage().data_ptr(), y.untyped_storage().nbytes()): i for i, y in enumerate(ys)}
        outer = _top_saved_tensor_hooks()
        recomputed: dict = {}  # "ys": the tensors of one backward, while its views are being unpacked
        pending = [0]  # views packed and not yet unpacked in this backward

        def pack(t: Tensor):
            if not is_dtensor(t):
                storage = t.untyped_storage()
                index = keys.get((storage.data_ptr(), storage.nbytes()))
                if index is not None:
                    pending[0] += 1
                    return index, tuple(t.shape), t.stride(), t.storage_offset()  # no reference to the tensor
            return _Outer(outer[0](t) if outer is not None else t.detach())

        def unpack(packed):
            if isinstance(packed, _Outer):
                return outer[1](packed.packed) if outer is not None else packed.packed
            index, shape, stride, offset = packed
            if "ys" not in recomputed:
                with torch.no_grad():
                    recomputed["ys"] = tuple(recompute())
                recomputed["left"] = pending[0]
            view = recomputed["ys"][index].as_strided(shape, stride, offset)
            recomputed["left"] -= 1
            if recomputed["left"] <= 0:  # every view of this backward unpacked: a second backward recomputes again
                recomputed.clear()
            return view

        def kept_for_free(t: Tensor) -> bool:
            check = getattr(outer[0], "kept_for_free", None) if outer is not None else None
            return check is not None and bool(check(t))

        pack.keeps_other_tensors = True
        pack.kept_for_free = kept_for_free
        super().__init__(pack, unpack)


def _without_saved_rotated_qk(q: Tensor, k: Tensor, source: Tensor, recompute):
    """The :class:`_RecomputedTensors` context for attention on the rotated ``q`` and ``k`` of a block with QK-norm
    and RoPE, when autograd records it eagerly; a context that does nothing otherwise. ``source``: the QKV GEMM's
    output, which the QK-norms keep; ``recompute()`` returns (q, k) again from it."""
    if not _recording_eagerly(source):
        return contextlib.nullcontext()
    return _RecomputedTensors((q, k), recompute)
