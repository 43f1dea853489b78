"""Reference transformer blocks in plain PyTorch: the workloads of the benchmarks and of ``blockfuse analyze``.

Two norm placements over the same attention and feed-forward layers (see ../shared/SPEC.md):

* ``standard`` (pre-norm):        ``h = x + attn(norm(x));  out = h + ffn(norm(h))``
* ``reordered`` (OLMo-2 style):   ``h = x + norm(attn(x));  out = h + norm(ffn(h))``

Attention uses separate q, k, v and output projections (four GEMMs), rotary embeddings on q and k
(rotate-half convention, tables in fp32) and ``scaled_dot_product_attention``; the feed-forward layer
is SwiGLU (gate and up projections, ``silu(gate) * up``, down projection: three GEMMs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class BlockConfig:
    d_model: int = 1024
    n_heads: int = 16
    ffn_hidden: int = 4096
    norm: str = "layer"  # "layer" or "rms"
    norm_eps: float = 1e-5
    bias: bool = True
    rope_theta: float = 10000.0
    causal: bool = True
    max_seq_len: int = 4096

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model: expected a multiple of n_heads={self.n_heads}, got {self.d_model}")
        if self.head_dim % 2:
            raise ValueError(f"d_model / n_heads: expected an even head_dim for rotary, got {self.head_dim}")
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"norm: expected 'layer' or 'rms', got {self.norm!r}")


def _norm(config: BlockConfig) -> nn.Module:
    if config.norm == "layer":
        return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
    return nn.RMSNorm(config.d_model, eps=config.norm_eps)


def rotary_tables(head_dim: int, max_seq_len: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos and sin, (max_seq_len, head_dim) fp32, in the duplicated (rotate-half) form."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def _rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE on x (batch, heads, seq, head_dim); math in fp32, output in x's dtype."""
    seq = x.shape[-2]
    xf = x.float()
    return (xf * cos[:seq] + _rotate_half(xf) * sin[:seq]).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.q_proj = nn.Linear(d, d, bias=config.bias)
        self.k_proj = nn.Linear(d, d, bias=config.bias)
        self.v_proj = nn.Linear(d, d, bias=config.bias)
        self.o_proj = nn.Linear(d, d, bias=config.bias)
        cos, sin = rotary_tables(config.head_dim, config.max_seq_len, config.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _apply(self, fn, recurse=True):
        # NOTE: the rotary tables stay fp32 when the module is cast to a low dtype (as in OLMo-2):
        # rebuilt on the new device rather than cast, so no precision is lost to a bf16 round trip.
        super()._apply(fn, recurse)
        cos, sin = rotary_tables(self.config.head_dim, self.config.max_seq_len, self.config.rope_theta)
        self.cos, self.sin = cos.to(self.cos.device), sin.to(self.sin.device)
        return self

    def forward(self, x: Tensor) -> Tensor:  # x: (batch, seq, d_model)
        batch, seq, _ = x.shape
        heads, head_dim = self.config.n_heads, self.config.head_dim

        def split(t):  # (batch, seq, d_model) -> (batch, heads, seq, head_dim)
            return t.view(batch, seq, heads, head_dim).transpose(1, 2)

        q = apply_rotary(split(self.q_proj(x)), self.cos, self.sin)
        k = apply_rotary(split(self.k_proj(x)), self.cos, self.sin)
        v = split(self.v_proj(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.config.causal)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class SwiGLU(nn.Module):
    def __init__(self, config: BlockConfig):
        super().__init__()
        d, hidden = config.d_model, config.ffn_hidden
        self.gate_proj = nn.Linear(d, hidden, bias=config.bias)
        self.up_proj = nn.Linear(d, hidden, bias=config.bias)
        self.down_proj = nn.Linear(hidden, d, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerBlock(nn.Module):
    """One block; ``placement`` is ``"standard"`` (pre-norm) or ``"reordered"`` (norm after each branch)."""

    def __init__(self, config: BlockConfig, placement: str):
        super().__init__()
        if placement not in ("standard", "reordered"):
            raise ValueError(f"placement: expected 'standard' or 'reordered', got {placement!r}")
        self.config = config
        self.placement = placement
        self.attn = Attention(config)
        self.ffn = SwiGLU(config)
        self.attn_norm = _norm(config)
        self.ffn_norm = _norm(config)

    def forward(self, x: Tensor) -> Tensor:  # x: (batch, seq, d_model)
        if self.placement == "standard":
            h = x + self.attn(self.attn_norm(x))
            return h + self.ffn(self.ffn_norm(h))
        h = x + self.attn_norm(self.attn(x))
        return h + self.ffn_norm(self.ffn(h))


# The workloads of ../shared/SPEC.md: name -> (placement, config, default input shape).
REFERENCE_BLOCKS = {
    "reordered": ("reordered", BlockConfig(), (4, 2048, 1024)),
    "standard": ("standard", BlockConfig(), (4, 2048, 1024)),
}


def build_block(
    name: str,
    shape: tuple[int, ...] | None = None,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    *,
    seed: int = 0,
    **overrides,
) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """``(module, inputs)`` for a reference block; ``shape`` (batch, seq, d_model) defaults to the SPEC's.

    ``overrides`` replace fields of the block's :class:`BlockConfig` (e.g. ``d_model=64, n_heads=4``
    for a tiny block in tests); a ``shape`` whose last dimension differs from ``d_model`` is an error.
    """
    if name not in REFERENCE_BLOCKS:
        raise ValueError(f"name: expected one of {sorted(REFERENCE_BLOCKS)}, got {name!r}")
    placement, config, default_shape = REFERENCE_BLOCKS[name]
    config = replace(config, **overrides)
    shape = tuple(shape) if shape is not None else (*default_shape[:2], config.d_model)
    if len(shape) != 3 or shape[-1] != config.d_model:
        raise ValueError(f"shape: expected (batch, seq, {config.d_model}), got {shape}")
    if shape[1] > config.max_seq_len:
        config = replace(config, max_seq_len=shape[1])
    generator = torch.Generator().manual_seed(seed)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        module = TransformerBlock(config, placement)
    finally:
        torch.random.set_rng_state(torch_state)
    module = module.to(device=device, dtype=dtype)
    x = torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
    return module, (x,)
