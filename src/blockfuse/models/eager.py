"""The eager (reference) block's pieces in plain PyTorch, written the way real models are: rotary tables and
rotate-half RoPE, attention (SDPA, or the scores materialized as transformers' eager attention computes them),
RMSNorm, the MLP activations, and the :class:`Attention` and :class:`FeedForward` modules. The fused modules
(models/fused.py) use the same rotary tables and attention call."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from blockfuse.models.config import BlockConfig


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
            attention: str = "sdpa", native_gqa: bool = False) -> Tensor:
    """Attention on (batch, heads, seq, head_dim) q and (batch, kv_heads, seq, head_dim) k, v: SDPA, or
    materialized (``attention="eager"``, :func:`attend_materialized`). ``native_gqa``: grouped-query heads go to
    SDPA as they are (:func:`sdpa_takes_grouped_heads` says where), not repeated first."""
    if (k.shape[1] != q.shape[1] and attention == "sdpa" and native_gqa
            and sdpa_takes_grouped_heads(q, padding_mask is not None)):
        # NOTE: no repeat_interleave: attention keeps k and v at kv_heads for its backward, not the repeated copies
        # (heads / kv_heads times their size), and neither the copies nor their backward's sums over the groups run.
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each kv head serves a group of q heads
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    if attention == "eager":
        return attend_materialized(q, k, v, padding_mask, causal)
    mask = attention_mask(padding_mask, causal, q.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)


def sdpa_takes_grouped_heads(q: Tensor, masked: bool) -> bool:
    """Whether SDPA's fused kernels take grouped-query k and v as they are (``enable_gqa``) for ``q``: 16-bit CUDA
    tensors without an ``attn_mask`` (cuDNN attention and flash attention do; the memory-efficient kernel, which
    fp32 and masked calls may need, does not, and SDPA would fall back to its math path: the scores in memory),
    at head sizes flash attention takes (multiples of 8 up to 256; past them the fallback would again be the math
    path). Everywhere else the heads are repeated first, as before."""
    head_dim = q.shape[-1]
    return (q.is_cuda and q.dtype in (torch.bfloat16, torch.float16) and not masked and head_dim % 8 == 0
            and head_dim <= 256)


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
