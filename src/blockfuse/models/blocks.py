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
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import blockfuse.nn
from blockfuse.models.config import BlockConfig
from blockfuse.ops.bias_dropout_add import bias_dropout_add
from blockfuse.ops.mlp import fused_mlp, gated_mlp
from blockfuse.ops.norm import layer_norm, rms_norm
from blockfuse.ops.rotary import rotary
from blockfuse.ops.sharding import is_dtensor, local_shard

IMPLS = ("eager", "fused")


# ----------------------------------------------------------------------------------------
# Shared pieces: rotary tables, attention masks
# ----------------------------------------------------------------------------------------


def rotary_half_tables(head_dim: int, max_seq_len: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos and sin half tables, (max_seq_len, head_dim / 2) fp32.

    NOTE: angles are computed in fp64 and rounded once: an fp32 ``position * inv_freq`` is off by
    up to ~4e-4 rad at position 4096. Eager and fused blocks use the same tables, so they differ
    only by the arithmetic of the ops.
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def rotary_tables(head_dim: int, max_seq_len: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos and sin, (max_seq_len, head_dim) fp32, in the duplicated (rotate-half) form."""
    cos, sin = rotary_half_tables(head_dim, max_seq_len, theta)
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def _rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE on x (batch, heads, seq, head_dim); math in fp32, output in x's dtype."""
    seq = x.shape[-2]
    xf = x.float()
    return (xf * cos[:seq] + _rotate_half(xf) * sin[:seq]).to(x.dtype)


def attention_mask(padding_mask: Optional[Tensor], causal: bool, seq: int) -> Optional[Tensor]:
    """The boolean ``attn_mask`` of ``scaled_dot_product_attention`` (True: attend), or None.

    ``padding_mask`` (batch, seq) bool marks the valid keys (True) of each sequence. Without it, a
    causal block passes ``is_causal=True`` instead (see :func:`_attend`).
    """
    if padding_mask is None:
        return None
    mask = padding_mask[:, None, None, :]  # (batch, 1, 1, seq): keys
    if causal:
        mask = mask & torch.ones(seq, seq, dtype=torch.bool, device=padding_mask.device).tril()
    return mask


def _attend(q: Tensor, k: Tensor, v: Tensor, padding_mask: Optional[Tensor], causal: bool,
            attention: str = "sdpa") -> Tensor:
    """Attention on (batch, heads, seq, head_dim) q and (batch, kv_heads, seq, head_dim) k, v: SDPA, or
    materialized (``attention="eager"``, :func:`attend_materialized`)."""
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each kv head serves a group of q heads
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    if attention == "eager":
        return attend_materialized(q, k, v, padding_mask, causal)
    mask = attention_mask(padding_mask, causal, q.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)


def attend_materialized(q: Tensor, k: Tensor, v: Tensor, padding_mask: Optional[Tensor], causal: bool) -> Tensor:
    """Attention with its (batch, heads, seq, seq) scores in memory, as transformers'
    ``eager_attention_forward`` computes it: ``q @ k^T * head_dim**-0.5``, masked scores set to the
    dtype's most negative value, softmax in fp32 cast back to q's dtype, ``@ v``.

    q, k, v: (batch, heads, seq, head_dim) (GQA's kv heads already repeated); ``padding_mask``
    (batch, seq) bool, True for valid keys; the same masks as :func:`attention_mask`. Rows with no
    key to attend (a causal row before the first valid token, a sequence with none) come out zero,
    as SDPA returns them.
    """
    seq = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # (batch, heads, seq, seq)
    mask = attention_mask(padding_mask, causal, seq)
    if mask is None and causal:
        mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        # NOTE: the dtype's most negative value, not -inf: a row with no key to attend stays finite
        # (a uniform softmax); with -inf its probabilities are NaN, and the backward's probs^T @ d_out
        # makes every key's v gradient NaN, even with that row's output zeroed. Written, not added as
        # transformers adds its float mask: an added fp16 minimum is -inf at a score of -16 or below.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    # NOTE: softmax in fp32 as transformers does (fp64 for fp64 inputs, so an fp64 oracle stays one).
    probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(q.dtype, torch.float32)).to(q.dtype)
    out = torch.matmul(probs, v)  # (batch, heads, seq, head_dim)
    if padding_mask is not None:
        # NOTE: rows with no key to attend set to zero, as SDPA does (CPU, torch 2.13; transformers
        # leaves them at the mean of v): with the uniform softmax, their gradient would reach the
        # valid tokens' v. One pass over the output, not over the scores.
        out = out * mask.any(-1, keepdim=True)  # mask: (batch, 1, 1 or seq, 1)
    return out


def _check_padding_mask(x: Tensor, padding_mask: Optional[Tensor]) -> None:
    if padding_mask is None:
        return
    if not isinstance(padding_mask, Tensor) or padding_mask.dtype != torch.bool:
        raise TypeError("padding_mask: expected a bool tensor (True marks valid tokens), got "
                        f"{padding_mask.dtype if isinstance(padding_mask, Tensor) else type(padding_mask).__name__}")
    if tuple(padding_mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"padding_mask: expected shape (batch, seq) = {tuple(x.shape[:2])}, "
                         f"got {tuple(padding_mask.shape)}")


class _FP32Tables(nn.Module):
    """Holds rotary tables as non-persistent fp32 buffers that survive ``.to(dtype)``."""

    def _make_tables(self) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def _register_tables(self) -> None:
        cos, sin = self._make_tables()
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _apply(self, fn, recurse=True):
        # NOTE: the rotary tables stay fp32 when the module is cast to a low dtype (as in OLMo-2):
        # rebuilt on the new device rather than cast, so no precision is lost to a bf16 round trip.
        super()._apply(fn, recurse)
        if getattr(self, "cos", None) is not None:
            cos, sin = self._make_tables()
            self.cos, self.sin = cos.to(self.cos.device), sin.to(self.sin.device)
        return self

    def _grow_tables(self, seq: int) -> None:
        if self.cos is not None and seq > self.cos.shape[0]:
            self.max_seq_len = max(seq, 2 * self.cos.shape[0])
            device = self.cos.device
            cos, sin = self._make_tables()
            self.cos, self.sin = cos.to(device), sin.to(device)


# ----------------------------------------------------------------------------------------
# Eager (reference) modules
# ----------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """Plain-PyTorch RMSNorm with both rounding conventions (``cast_before_weight``: Llama; else OLMo-2)."""

    def __init__(self, width: int, eps: float, cast_before_weight: bool = False):
        super().__init__()
        self.eps = eps
        self.cast_before_weight = cast_before_weight
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm_eager(x, self.weight, self.eps, self.cast_before_weight)


def rms_norm_eager(x: Tensor, weight: Tensor, eps: float, cast_before_weight: bool) -> Tensor:
    xf = x.float()
    normalized = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if cast_before_weight:
        return weight * normalized.to(x.dtype)
    return (weight * normalized).to(x.dtype)


def layer_norm_eager(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _eager_norm(config: BlockConfig, width: int) -> nn.Module:
    if config.norm == "layer":
        return nn.LayerNorm(width, eps=config.norm_eps, bias=config.bias)
    return RMSNorm(width, config.norm_eps, config.rms_cast_before_weight)


class Attention(_FP32Tables):
    """Multi-head (or grouped-query) attention with separate q, k, v, output projections."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        self.max_seq_len = config.max_seq_len
        d = config.d_model
        self.q_proj = nn.Linear(d, config.q_width, bias=config.bias)
        self.k_proj = nn.Linear(d, config.kv_width, bias=config.bias)
        self.v_proj = nn.Linear(d, config.kv_width, bias=config.bias)
        self.o_proj = nn.Linear(config.q_width, d, bias=config.bias)
        if config.qk_norm:
            self.q_norm = _eager_norm(config, config.q_width)
            self.k_norm = _eager_norm(config, config.kv_width)
        if config.rope:
            self._register_tables()
        else:
            self.cos = self.sin = None
        self.rope = apply_rotary  # an attribute so that surgical compilation can replace it (models/surgical.py)

    def _make_tables(self):
        return rotary_tables(self.config.head_size, self.max_seq_len, self.config.rope_theta)

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:  # x: (batch, seq, d_model)
        cfg = self.config
        batch, seq, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)

        def split(t):  # (batch, seq, heads * head_dim) -> (batch, heads, seq, head_dim)
            return t.view(batch, seq, -1, cfg.head_size).transpose(1, 2)

        q, k, v = split(q), split(k), split(v)
        if cfg.rope:
            self._grow_tables(seq)
            q, k = self.rope(q, self.cos, self.sin), self.rope(k, self.cos, self.sin)
        out = _attend(q, k, v, padding_mask, cfg.causal, cfg.attention)  # (batch, heads, seq, head_dim)
        # -1: this rank's heads under tensor parallelism (blockfuse.distributed), all of them otherwise
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


def swiglu_eager(gate: Tensor, up: Tensor) -> Tensor:
    return F.silu(gate) * up


def geglu_eager(gate: Tensor, up: Tensor) -> Tensor:
    return F.gelu(gate, approximate="tanh") * up


def gelu_tanh_eager(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {"swiglu": swiglu_eager, "geglu": geglu_eager, "gelu_tanh": gelu_tanh_eager}


class FeedForward(nn.Module):
    """SwiGLU / GeGLU (gate, up, down projections) or a two-layer GELU-tanh MLP (fc1, fc2)."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        d, hidden = config.d_model, config.ffn_hidden
        if config.gated:
            self.gate_proj = nn.Linear(d, hidden, bias=config.bias)
            self.up_proj = nn.Linear(d, hidden, bias=config.bias)
            self.down_proj = nn.Linear(hidden, d, bias=config.bias)
        else:
            self.fc1 = nn.Linear(d, hidden, bias=config.bias)
            self.fc2 = nn.Linear(hidden, d, bias=config.bias)
        self.activation = ACTIVATIONS[config.mlp]  # an attribute so that surgical compilation can replace it

    def forward(self, x: Tensor) -> Tensor:
        if self.config.gated:
            return self.down_proj(self.activation(self.gate_proj(x), self.up_proj(x)))
        return self.fc2(self.activation(self.fc1(x)))


# ----------------------------------------------------------------------------------------
# Fused modules: the same parameters in fused form
# ----------------------------------------------------------------------------------------


def _fused_norm(config: BlockConfig, width: int) -> nn.Module:
    if config.norm == "layer":
        return blockfuse.nn.LayerNorm(width, eps=config.norm_eps, bias=config.bias)
    return blockfuse.nn.RMSNorm(width, eps=config.norm_eps, cast_before_weight=config.rms_cast_before_weight)


def _norm(module: nn.Module, x: Tensor, residual: Optional[Tensor] = None, mode: str = "pre", p: float = 0.0,
          training: bool = True):
    """Calls a blockfuse norm module's functional with a residual form chosen per call. Another norm module
    (tensor parallelism's head-sharded QK-norm, blockfuse.distributed) is called as it is, without residual."""
    if isinstance(module, blockfuse.nn.LayerNorm):
        return layer_norm(x, module.weight, module.bias, module.eps, residual=residual, residual_mode=mode,
                          dropout_p=p, training=training)
    if isinstance(module, blockfuse.nn.RMSNorm):
        return rms_norm(x, module.weight, module.eps, residual=residual, residual_mode=mode, dropout_p=p,
                        training=training, cast_before_weight=module.cast_before_weight)
    if residual is not None or p:
        raise TypeError(f"{type(module).__name__}: a norm that is not blockfuse's takes no residual or dropout")
    return module(x)


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
    recomputation."""

    def __init__(self, y: Tensor, recompute):
        storage = y.untyped_storage()
        pointer, size = storage.data_ptr(), storage.nbytes()

        def pack(t: Tensor):
            if is_dtensor(t):  # a DTensor (tensor parallelism, blockfuse.distributed) is never the plain y
                return t.detach()
            kept = t.untyped_storage()
            if kept.data_ptr() != pointer or kept.nbytes() != size:
                # NOTE: detached, not t itself: an op that saves its own output (attention does)
                # would otherwise hold node -> t -> t.grad_fn -> node, a cycle through C++ nodes
                # that Python's collector cannot free (every training forward's graph leaked).
                return t.detach()
            return (t.shape, t.stride(), t.storage_offset())  # no reference to y: it can be freed

        def unpack(packed):
            if isinstance(packed, Tensor):
                return packed
            shape, stride, offset = packed
            with torch.no_grad():
                return recompute().as_strided(shape, stride, offset)

        super().__init__(pack, unpack)


def _recording_eagerly(source: Tensor) -> bool:
    """Autograd records this forward eagerly (not under torch.compile) and ``source`` takes part, as a plain
    tensor (a DTensor of sequence parallelism has no storage of its own to recognize)."""
    return (torch.is_grad_enabled() and not torch.compiler.is_compiling() and source.requires_grad
            and not is_dtensor(source))


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


def _split_rows(t: Tensor, widths: tuple[int, ...], shards: int) -> list[Tensor]:
    """``t.split(widths)`` along the rows; for a fused weight split across ``shards`` ranks (a DTensor
    Shard(0) of the rank-major layout, see :class:`_StackedLinear`) each rank splits its own rows, and
    each part is a DTensor Shard(0) of that part's weight."""
    if shards == 1 or not is_dtensor(t):
        return list(t.split(widths, dim=0))
    from torch.distributed.tensor import DTensor

    parts = t.to_local().split([width // shards for width in widths], dim=0)
    return [DTensor.from_local(part, t.device_mesh, t.placements, run_check=False) for part in parts]


def _join_rows(name: str, parts: list[Tensor], shards: int, current: Optional[Tensor]) -> Tensor:
    """The inverse of :func:`_split_rows`: the parts' rows concatenated. Split across ranks (``current``: the
    fused parameter, a DTensor), each rank's own rows: from parts placed Shard(0) (a sharded state dict), or
    its 1/shards of whole parts (a full one: ``torch.distributed.checkpoint``'s ``full_state_dict`` hands
    these names over as they are, since they are no parameter's)."""
    if shards == 1:
        return torch.cat(parts)
    from torch.distributed.tensor import DTensor, Shard

    mesh = current.device_mesh
    if all(is_dtensor(t) and tuple(t.placements) == (Shard(0),) for t in parts):
        local = [t.to_local() for t in parts]
    elif not any(is_dtensor(t) for t in parts):
        local = [t.chunk(shards, dim=0)[mesh.get_local_rank()] for t in parts]
    else:
        got = [tuple(t.placements) if is_dtensor(t) else "a plain tensor" for t in parts]
        raise ValueError(f"{name}: a tensor-parallel fused weight loads its parts as DTensors placed Shard(0) "
                         f"(the sharded state dict of the same plan) or as whole tensors, got {got}")
    return DTensor.from_local(torch.cat(local), mesh, current.placements, run_check=False)


class _StackedLinear(nn.Module):
    """Mixin: a Linear whose rows are the concatenation of several eager Linears, saved and loaded
    under the eager names (``{prefix}{part}.weight``, ``.bias``).

    Under tensor parallelism (:func:`blockfuse.distributed.tp_plan`) ``shards`` is the number of ranks:
    rank r's rows of the fused Linear are its 1/shards of every part in order ([its q heads | its k
    heads | its v heads], [its gate rows | its up rows]), a DTensor Shard(0) of that rank-major layout.
    Saved, each part is a DTensor Shard(0) of the part's own weight (the eager layout under the same
    plan), and loading takes the same."""

    shards = 1

    def _register_split(self, fused_name: str, parts: tuple[str, ...], widths_of) -> None:
        self._split = (fused_name, parts, widths_of)
        if hasattr(self, "register_state_dict_post_hook"):
            self.register_state_dict_post_hook(self._split_state)
        else:  # torch < 2.5
            self._register_state_dict_hook(self._split_state)
        self.register_load_state_dict_pre_hook(self._join_state)

    @staticmethod
    def _split_state(module, state_dict, prefix, local_metadata):
        fused_name, parts, widths_of = module._split
        for suffix in ("weight", "bias"):
            key = f"{prefix}{fused_name}.{suffix}"
            if key not in state_dict:
                continue
            for part, tensor in zip(parts, _split_rows(state_dict.pop(key), widths_of(module), module.shards)):
                state_dict[f"{prefix}{part}.{suffix}"] = tensor

    @staticmethod
    def _join_state(module, state_dict, prefix, *args):
        fused_name, parts, _ = module._split
        for suffix in ("weight", "bias"):
            keys = [f"{prefix}{part}.{suffix}" for part in parts]
            if all(key in state_dict for key in keys):
                name = f"{prefix}{fused_name}.{suffix}"
                current = getattr(getattr(module, fused_name), suffix)
                state_dict[name] = _join_rows(name, [state_dict.pop(key) for key in keys], module.shards, current)


class FusedAttention(_FP32Tables, _StackedLinear):
    """Attention on one QKV GEMM, fused QK-norm and rotary into the attention layout; always SDPA
    (``config.attention`` is the eager block's choice)."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        self.max_seq_len = config.max_seq_len
        d = config.d_model
        self.qkv_proj = nn.Linear(d, config.q_width + 2 * config.kv_width, bias=config.bias)
        self.o_proj = nn.Linear(config.q_width, d, bias=config.bias)
        if config.qk_norm:
            self.q_norm = _fused_norm(config, config.q_width)
            self.k_norm = _fused_norm(config, config.kv_width)
        if config.rope:
            self._register_tables()
        else:
            self.cos = self.sin = None
        self._register_split("qkv_proj", ("q_proj", "k_proj", "v_proj"),
                             lambda m: (m.config.q_width, m.config.kv_width, m.config.kv_width))

    def _make_tables(self):
        return rotary_half_tables(self.config.head_size, self.max_seq_len, self.config.rope_theta)

    def attend(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:
        """Attention before the output projection: (batch, seq, q_width) for x (batch, seq, d_model)
        (under tensor parallelism, this rank's heads: q_width / shards)."""
        cfg = self.config
        batch, seq, _ = x.shape
        heads, kv_heads = cfg.n_heads // self.shards, cfg.kv_heads // self.shards  # this rank's
        # (batch, seq, q_width), (batch, seq, kv_width) x 2: strided views of one GEMM's output, no copies
        widths = (heads * cfg.head_size, kv_heads * cfg.head_size, kv_heads * cfg.head_size)
        # NOTE: one Linear and a split, whose backward concatenates dq, dk and dv: a backward that takes them
        # separately measured slower and lowered no peak (benchmarks/NOTES.md, "Concatenated gradients").
        q, k, v = self.qkv_proj(x).split(widths, dim=-1)
        if cfg.qk_norm:
            q, k = _norm(self.q_norm, q), _norm(self.k_norm, k)
        q = q.view(batch, seq, heads, cfg.head_size)  # (batch, seq, heads, head_dim)
        k = k.view(batch, seq, kv_heads, cfg.head_size)
        v = v.view(batch, seq, kv_heads, cfg.head_size)
        if cfg.rope:
            self._grow_tables(seq)
            q, k = rotary(q, k, self.cos, self.sin, layout="bshd")  # contiguous (batch, seq, heads, head_dim)
        if cfg.rope and not cfg.qk_norm:
            # NOTE: attention keeps v for its backward; as a view it would keep the whole qkv
            # output alive (3x its size). Copied, qkv is freed after the rotary kernel. With
            # QK-norm the norms keep qkv anyway (they save their inputs), and without RoPE q and
            # k are views of it: no copy there (a copy would keep one more (tokens, kv_width)
            # tensor per layer: 144 MiB a layer for siglip2, seen on an H200).
            v = v.contiguous()
        # NOTE: q, k, v stay (batch, seq, heads, head_dim) in memory and are handed to attention as
        # transposed views: cuDNN and flash attention read them without a copy and write their
        # output in the same layout, so the reshape back to (batch, seq, d) below is a view (with
        # contiguous (batch, heads, seq, head_dim) inputs that reshape was a copy: ~25 us forward
        # at [4, 2048, 1024] on an H200; benchmarks/NOTES.md, "Blocks and memory").
        out = _attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), padding_mask, cfg.causal)
        return out.transpose(1, 2).reshape(batch, seq, widths[0])

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:  # x: (batch, seq, d_model)
        return self.o_proj(self.attend(x, padding_mask))


class FusedFeedForward(_StackedLinear):
    """The MLP on one gate|up GEMM, the packed SwiGLU / GeGLU kernel and the down GEMM (GELU MLP: fc1
    with GELU in its GEMM's epilogue, fc2), the activation recomputed in the backward."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        d, hidden = config.d_model, config.ffn_hidden
        if config.gated:
            self.gate_up_proj = nn.Linear(d, 2 * hidden, bias=config.bias)
            self.down_proj = nn.Linear(hidden, d, bias=config.bias)
            self._register_split("gate_up_proj", ("gate_proj", "up_proj"), lambda m: (hidden, hidden))
        else:
            self.fc1 = nn.Linear(d, hidden, bias=config.bias)
            self.fc2 = nn.Linear(hidden, d, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        inner, outer = (self.gate_up_proj, self.down_proj) if self.config.gated else (self.fc1, self.fc2)
        weights = (inner.weight, inner.bias, outer.weight, outer.bias)
        if self.shards > 1:
            # Tensor parallelism (blockfuse.distributed): the weights are DTensors; the op runs on this rank's
            # shards, and the output projection's bias is left to the plan, which adds it once to the sum of
            # the ranks' partial outputs.
            weights = (local_shard(inner.weight), local_shard(inner.bias), local_shard(outer.weight), None)
        if self.config.gated:
            # NOTE: one op for the whole MLP so the backward recomputes the activation instead of
            # keeping tokens x hidden alive (ops/mlp.py).
            return gated_mlp(x, *weights, self.config.mlp)
        # GELU MLP: the same op with an ungated activation; it keeps only x and the pre-activation, and
        # the backward recomputes the activation (ops/mlp.py).
        return fused_mlp(x, *weights, self.config.mlp)


# ----------------------------------------------------------------------------------------
# Blocks and stacks
# ----------------------------------------------------------------------------------------


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl: expected one of {IMPLS}, got {impl!r}")


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
        if branch is None:
            h0, y = residual, _norm(self.attn_norm, residual)
        else:
            y, h0 = _norm(self.attn_norm, branch, residual, "pre", p, training)
        del residual, branch
        with _without_saved_norm_output(y, self.attn_norm, h0):
            attended = self.attn(y, padding_mask)
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
