"""Transformer blocks that run as plain PyTorch (``impl="eager"``) or on blockfuse ops (``impl="fused"``).

The eager block is the reference, written the way real models are: separate q, k, v and output
projections, separate gate / up / down projections, rotary embeddings on (batch, heads, seq,
head_dim) with duplicated fp32 tables, ``scaled_dot_product_attention`` (or, with
``config.attention="eager"``, the scores materialized as transformers' eager attention computes
them), ``nn.LayerNorm`` or an explicit RMSNorm. The fused block holds the same parameters in fused
form and runs:

* one QKV GEMM; q, k, v are strided views of its output (no copies);
* QK-norm (OLMo-2) on those views, rotary embedding writing q and k as (batch, seq, heads,
  head_dim), the layout attention reads as transposed views without a copy and writes its output in
  (so neither q, k nor the output is ever transposed in memory);
* one gate|up GEMM feeding the packed SwiGLU / GeGLU kernel;
* every residual add fused into a norm: ``"post"`` form for the reordered placement, ``"pre"``
  form for pre-norm (the second norm adds the attention branch; in a :class:`TransformerStack` the
  next block's first norm adds the previous MLP branch), with seeded dropout in the same kernels.

Both load the same state dict (the eager layout: ``attn.q_proj.weight``, ...): the fused block splits
its fused weights when saving and concatenates when loading, so one checkpoint runs both ways, and
:func:`convert` turns one into the other.

The pieces live beside this file, one job each: the eager modules and their helpers in models/eager.py, the
fused modules and their state-dict hooks in models/fused.py, the fused block's saved-tensor recomputation in
models/recompute.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from blockfuse.models.config import BlockConfig
from blockfuse.models.eager import Attention, FeedForward, _eager_norm
from blockfuse.models.fused import (
    FusedAttention, FusedFeedForward, _fused_norm, _norm, _norm_amax, _norm_fp8, cast_fp8_weights, fp8_input_recipe,
)
from blockfuse.models.recompute import _with_kept_storages, _without_saved_norm_output, _without_saved_projection
from blockfuse.ops import fp8_history
from blockfuse.ops.bias_dropout_add import bias_dropout_add
from blockfuse.ops.norm import cast_again, cast_again_quantized

IMPLS = ("eager", "fused")


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl: expected one of {IMPLS}, got {impl!r}")


def _check_padding_mask(x: Tensor, padding_mask: Optional[Tensor]) -> None:
    if padding_mask is None:
        return
    if not isinstance(padding_mask, Tensor) or padding_mask.dtype != torch.bool:
        raise TypeError("padding_mask: expected a bool tensor (True marks valid tokens), got "
                        f"{padding_mask.dtype if isinstance(padding_mask, Tensor) else type(padding_mask).__name__}")
    if tuple(padding_mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"padding_mask: expected shape (batch, seq) = {tuple(x.shape[:2])}, "
                         f"got {tuple(padding_mask.shape)}")


class TransformerBlock(nn.Module):
    """One block. ``config.placement`` is ``"pre"`` or ``"reordered"``; ``impl`` is ``"eager"``
    (plain PyTorch) or ``"fused"`` (blockfuse ops). ``forward(x, padding_mask=None)``: x (batch, seq,
    d_model); padding_mask (batch, seq) bool, True for valid tokens (keys that may be attended)."""

    def __init__(self, config: BlockConfig, impl: str = "eager"):
        super().__init__()
        _check_impl(impl)
        self.config = config
        self.impl = impl
        fused = impl == "fused"
        self.attn = FusedAttention(config) if fused else Attention(config)
        self.ffn = FusedFeedForward(config) if fused else FeedForward(config)
        make_norm = _fused_norm if fused else _eager_norm
        self.attn_norm = make_norm(config, config.d_model)
        self.ffn_norm = make_norm(config, config.d_model)

    @property
    def placement(self) -> str:
        return self.config.placement

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:
        if self.impl == "fused" and fp8_history.can_defer():
            # NOTE: the delayed-scaling casts of the block's forward (its FP8 projections' inputs) roll their
            # histories in one launch at the end, not one launch each (ops/fp8_history.py).
            with fp8_history.deferred_rolls():
                return self._forward(x, padding_mask)
        return self._forward(x, padding_mask)

    def _forward(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        if self.impl == "fused":
            cast_fp8_weights(self)  # (FP8 layers: their weights' casts in two launches, where they keep them)
        if isinstance(x, list):
            # A fused pre-norm stack's form: [residual, branch] in (emptied), (residual, branch) out. Through
            # the module's call, so that hooks on the block run: FSDP2's gather its parameters there.
            if self.impl != "fused" or self.config.placement != "pre":
                raise ValueError("x: a [residual, branch] list is the input of a fused pre-norm block only")
            return self._forward_pre_owned(x, padding_mask)
        _check_padding_mask(x, padding_mask)
        if self.impl == "eager":
            return self._forward_eager(x, padding_mask)
        if self.config.placement == "reordered":
            return self._forward_fused_reordered(x, padding_mask)
        residual, branch = self.forward_pre_parts(x, None, padding_mask)
        return bias_dropout_add(branch, None, residual, self.config.dropout, self.training)

    def _forward_eager(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        p = self.config.dropout if self.training else 0.0
        if self.config.placement == "pre":
            h = x + F.dropout(self.attn(self.attn_norm(x), padding_mask), p)
            return h + F.dropout(self.ffn(self.ffn_norm(h)), p)
        h = x + F.dropout(self.attn_norm(self.attn(x, padding_mask)), p)
        return h + F.dropout(self.ffn_norm(self.ffn(h)), p)

    def _forward_fused_reordered(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        p, training = self.config.dropout, self.training
        attended = self.attn.attend(x, padding_mask)
        o = self.attn.o_proj(attended)
        # NOTE: the post-norm keeps its input o for its backward; recomputed from `attended` instead,
        # o is not alive through the MLP's backward, where the block's peak is (16 of the reordered
        # block's 297 MiB on an H200, benchmarks/memory_block.py).
        with _without_saved_projection(o, self.attn.o_proj, attended):
            h = _norm(self.attn_norm, o, x, "post", p, training)  # x + dropout(norm(o))
        return _norm(self.ffn_norm, self.ffn(h), h, "post", p, training)

    def forward_pre_parts(self, residual: Tensor, branch: Optional[Tensor],
                          padding_mask: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """Fused pre-norm block on an input given as ``residual + dropout(branch)`` (branch None: the
        input is ``residual``); returns the output in the same form, so the add is fused into the
        next norm. Each norm adds the branch before it: ``s = residual + dropout(branch)``,
        ``y = norm(s)`` in one kernel."""
        return self._forward_pre_owned([residual, branch], padding_mask)

    def _forward_pre_owned(self, parts: list, padding_mask: Optional[Tensor]) -> tuple[Tensor, Tensor]:
        """:meth:`forward_pre_parts` on ``parts = [residual, branch]``, which it empties: a caller that
        passes its only references lets the branch be freed as soon as the first norm has added it.

        NOTE: tensors held by a caller's variables stay alive through the whole call. A stack's
        forward peaks in its last MLP, and there the previous block's MLP output (held by the
        loop) and this block's attention branch (held by this frame) were 288 MiB of the siglip2
        encoder's peak on an H200 (benchmarks/memory_block.py); both are dead by then."""
        residual, branch = parts
        parts.clear()
        p, training = self.config.dropout, self.training
        # NOTE: in front of rowwise FP8 projections each norm writes its output in e4m3 with the rows' scales and
        # the projection takes them as they are: no cast pass, and in training no output in x's dtype at all
        # (the projection keeps its FP8 input for the weight gradient; the norm, its input and statistics).
        # (a module swapped in for the fused attention or MLP, a benchmark's say, takes its input as it is)
        # In front of tensorwise ones each norm writes its output in x's dtype and folds its amax, which the
        # projection's cast then skips (one pass over the output instead of two). In front of delayed ones
        # (recipe "delayed": the scale from the projection's x history) each norm writes e4m3 with that scale, and
        # the projection's weight gradient casts y^T again from the norm's input (norm.cast_again_quantized).
        fp8 = isinstance(self.attn, FusedAttention) and fp8_input_recipe(self.attn.qkv_proj, residual)
        if fp8 == "delayed":
            state, recast = self.attn.qkv_proj.fp8_scaling()[0], []  # (recast: the traced x_cast, if any)
            if branch is None:
                h0, ((q, scale, proxy), _) = residual, _norm_fp8(self.attn_norm, residual, scaling=state,
                                                                 recast=recast)
            else:
                (q, scale, proxy), h0 = _norm_fp8(self.attn_norm, branch, residual, "pre", p, training, state,
                                                  recast)
            del residual, branch
            x_cast = recast[0] if recast else None if proxy is None else cast_again_quantized(
                proxy, scale, getattr(self.attn_norm, "bias", None))
            with _with_kept_storages(q, proxy):  # (the output projection then keeps attention's output)
                attended = self.attn(q, padding_mask, scale, proxy, x_cast=x_cast)
            del q, proxy, x_cast
        elif fp8 == "rowwise":
            if branch is None:
                h0, (normed, _) = residual, _norm_fp8(self.attn_norm, residual)
            else:
                normed, h0 = _norm_fp8(self.attn_norm, branch, residual, "pre", p, training)
            del residual, branch
            attended = self.attn(normed[0], padding_mask, *normed[1:])
            del normed
        else:
            amax, recast = None, []  # (recast: the traced x_cast, if any)
            if fp8 == "tensorwise":
                if branch is None:
                    h0, ((y, amax), _) = residual, _norm_amax(self.attn_norm, residual, recast=recast)
                else:
                    (y, amax), h0 = _norm_amax(self.attn_norm, branch, residual, "pre", p, training, recast)
            elif branch is None:
                h0, y = residual, _norm(self.attn_norm, residual)
            else:
                y, h0 = _norm(self.attn_norm, branch, residual, "pre", p, training)
            del residual, branch
            with _without_saved_norm_output(y, self.attn_norm, h0):
                if amax is None:
                    attended = self.attn(y, padding_mask)
                else:  # (the QKV layer's weight gradient casts y again from the norm's input: norm.cast_again)
                    x_cast = recast[0] if recast else cast_again(y, amax, getattr(self.attn_norm, "bias", None))
                    attended = self.attn(y, padding_mask, x_amax=amax, x_cast=x_cast)
                    del x_cast
            del y
        fp8 = isinstance(self.ffn, FusedFeedForward) and fp8_input_recipe(
            self.ffn.gate_up_proj if self.config.gated else self.ffn.fc1, h0)
        if fp8 == "rowwise":
            normed, h = _norm_fp8(self.ffn_norm, attended, h0, "pre", p, training)
            del attended, h0
            return h, self.ffn(*normed)
        if fp8 == "delayed":
            inner, recast = self.ffn.gate_up_proj if self.config.gated else self.ffn.fc1, []
            (q, scale, proxy), h = _norm_fp8(self.ffn_norm, attended, h0, "pre", p, training,
                                             inner.fp8_scaling()[0], recast)
            del attended, h0
            x_cast = recast[0] if recast else None if proxy is None else cast_again_quantized(
                proxy, scale, getattr(self.ffn_norm, "bias", None))
            return h, self.ffn(q, scale, proxy, x_cast=x_cast)
        if fp8 == "tensorwise":
            recast = []  # (the traced x_cast, if any)
            (y, amax), h = _norm_amax(self.ffn_norm, attended, h0, "pre", p, training, recast)
            del attended, h0
            x_cast = recast[0] if recast else cast_again(y, amax, getattr(self.ffn_norm, "bias", None))
            with _without_saved_norm_output(y, self.ffn_norm, h):
                return h, self.ffn(y, x_amax=amax, x_cast=x_cast)
        y, h = _norm(self.ffn_norm, attended, h0, "pre", p, training)
        del attended, h0  # the norm keeps h, not the branch; h0 is kept by the first norm if needed
        with _without_saved_norm_output(y, self.ffn_norm, h):
            return h, self.ffn(y)


class TransformerStack(nn.Module):
    """``layers`` blocks of one config; fused pre-norm stacks fuse each residual add into the next norm."""

    def __init__(self, config: BlockConfig, layers: int, impl: str = "eager"):
        super().__init__()
        _check_impl(impl)
        if not isinstance(layers, int) or layers <= 0:
            raise ValueError(f"layers: expected a positive int, got {layers!r}")
        self.config = config
        self.impl = impl
        self.blocks = nn.ModuleList(TransformerBlock(config, impl) for _ in range(layers))

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:
        _check_padding_mask(x, padding_mask)
        if self.impl == "fused" and self.config.placement == "pre":
            residual, branch = self.forward_pre_parts(x, padding_mask)
            return bias_dropout_add(branch, None, residual, self.config.dropout, self.training)
        for block in self.blocks:
            x = block(x, padding_mask)
        return x


    def forward_pre_parts(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """Fused pre-norm stack: the output as ``(residual, branch)``, output = residual + dropout(branch),
        the last add left to the caller (to fuse into whatever norm comes next)."""
        residual, branch = x, None
        for block in self.blocks:
            parts = [residual, branch]
            residual = branch = None  # the block empties parts: its input branch is freed once added
            residual, branch = block(parts, padding_mask)
        return residual, branch


def convert(module: nn.Module, impl: str, attention: Optional[str] = None) -> nn.Module:
    """A new block or stack running as ``impl`` with a copy of ``module``'s weights (same device,
    dtype and training mode). ``convert(block, "fused")`` and back gives the original weights.
    ``attention`` (``"sdpa"`` or ``"eager"``) replaces the config's (None: kept): e.g.
    ``convert(block, "eager", attention="eager")`` is a copy with materialized attention."""
    _check_impl(impl)
    if not isinstance(module, (TransformerBlock, TransformerStack)):
        raise TypeError(f"module: expected a TransformerBlock or TransformerStack, got {type(module).__name__}")
    config = module.config if attention is None else replace(module.config, attention=attention)
    if isinstance(module, TransformerStack):
        new = TransformerStack(config, len(module.blocks), impl)
    else:
        new = TransformerBlock(config, impl)
    reference = next(module.parameters())
    new = new.to(device=reference.device, dtype=reference.dtype)
    new.load_state_dict(module.state_dict())
    return new.train(module.training)


def named_gradients(module: nn.Module) -> dict[str, Tensor]:
    """The parameter gradients of ``module`` under its state-dict names: for a fused block, the eager
    names (its state-dict hooks split fused gradients the way they split fused weights), so the
    gradients of an eager and a fused module compare key by key. A missing gradient reads NaN."""
    parameters = dict(module.named_parameters())
    saved = {name: p.data for name, p in parameters.items()}
    try:
        for p in parameters.values():
            p.data = p.grad if p.grad is not None else torch.full_like(p.data, float("nan"))
        return {name: t.detach().clone() for name, t in module.state_dict().items() if t.is_floating_point()}
    finally:
        for name, p in parameters.items():
            p.data = saved[name]
