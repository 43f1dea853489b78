"""Block configuration and the presets of the workloads in ../shared/SPEC.md.

A :class:`BlockConfig` describes one transformer layer; a :class:`Preset` adds the number of layers
and the default input shape of a workload. ``PRESETS`` holds every workload of the SPEC:

============  ==========================================================================================
``reordered``  OLMo-2 style norm placement, d 1024, 16 heads, SwiGLU 4096, LayerNorm, RoPE, bias, causal
``standard``   the same layer with pre-norm placement
``olmo2-1b``   the OLMo-2 1B layer: d 2048, 16 heads, SwiGLU 8192, RMSNorm (eps 1e-6, weight in fp32),
               QK-norm, no bias, RoPE theta 5e5, reordered
``siglip2``    the SigLIP-2 so400m vision layer: d 1152, 16 heads of 72, GELU-tanh MLP 4304, LayerNorm
               eps 1e-6, bias, no RoPE, non-causal with a key-padding mask, pre-norm
``te-4layer``  4 pre-norm layers of d 2048, 16 heads, FFN 4096 (SwiGLU, LayerNorm, RoPE, bias, causal)
============  ==========================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

PLACEMENTS = ("pre", "reordered")
NORMS = ("layer", "rms")
MLPS = ("swiglu", "geglu", "gelu_tanh")
ATTENTIONS = ("sdpa", "eager")


@dataclass(frozen=True)
class BlockConfig:
    """One transformer layer.

    ``placement``: ``"pre"`` (``h = x + attn(norm(x)); out = h + mlp(norm(h))``) or ``"reordered"``
    (OLMo-2: ``h = x + norm(attn(x)); out = h + norm(mlp(h))``). ``norm``: ``"layer"`` or ``"rms"``;
    ``rms_cast_before_weight`` picks RMSNorm's rounding (False: weight multiplied in fp32, OLMo-2;
    True: normalized row cast first, Llama). ``mlp``: ``"swiglu"``, ``"geglu"`` (gate and up
    projections) or ``"gelu_tanh"`` (two-layer MLP). ``n_kv_heads`` below ``n_heads`` is grouped-query
    attention; ``head_dim`` defaults to ``d_model // n_heads`` (:attr:`head_size` is the resolved
    value). ``qk_norm`` normalizes the q and k projections (OLMo-2). ``dropout`` is applied to each
    branch's output before the residual add; ``causal=False`` with a key-padding mask is an encoder.
    ``attention`` picks how the eager block (``impl="eager"``) computes attention: ``"sdpa"``
    (``scaled_dot_product_attention``) or ``"eager"`` (the (batch, heads, seq, seq) scores materialized,
    as transformers' ``attn_implementation="eager"`` does; the benchmarks' second eager baseline). The
    fused block runs SDPA whatever it says (a converted block keeps the field, so converting back
    restores it).
    """

    d_model: int = 1024
    n_heads: int = 16
    n_kv_heads: Optional[int] = None
    head_dim: Optional[int] = None
    ffn_hidden: int = 4096
    mlp: str = "swiglu"
    placement: str = "reordered"
    norm: str = "layer"
    norm_eps: float = 1e-5
    rms_cast_before_weight: bool = False
    qk_norm: bool = False
    bias: bool = True
    rope: bool = True
    rope_theta: float = 10000.0
    causal: bool = True
    dropout: float = 0.0
    max_seq_len: int = 4096
    attention: str = "sdpa"

    def __post_init__(self):
        for name in ("d_model", "n_heads", "ffn_hidden", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model: expected a multiple of n_heads={self.n_heads} (or pass head_dim), "
                             f"got {self.d_model}")
        if self.head_dim is not None and (not isinstance(self.head_dim, int) or self.head_dim <= 0):
            raise ValueError(f"head_dim: expected a positive int or None, got {self.head_dim!r}")
        if self.n_kv_heads is not None and (not isinstance(self.n_kv_heads, int) or self.n_kv_heads <= 0
                                            or self.n_heads % self.n_kv_heads):
            raise ValueError(f"n_kv_heads: expected a positive divisor of n_heads={self.n_heads}, "
                             f"got {self.n_kv_heads!r}")
        if self.rope and self.head_size % 2:
            raise ValueError(f"head_dim: expected an even head_dim for rotary, got {self.head_size}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {self.placement!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm: expected one of {NORMS}, got {self.norm!r}")
        if self.mlp not in MLPS:
            raise ValueError(f"mlp: expected one of {MLPS}, got {self.mlp!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {self.dropout!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention: expected one of {ATTENTIONS}, got {self.attention!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps: expected a positive float, got {self.norm_eps!r}")

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def q_width(self) -> int:
        return self.n_heads * self.head_size

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_size

    @property
    def gated(self) -> bool:
        return self.mlp in ("swiglu", "geglu")


@dataclass(frozen=True)
class Preset:
    """A workload: the layer, how many layers, and the default input shape (batch, seq, d_model)."""

    config: BlockConfig
    shape: tuple[int, int, int]
    layers: int = 1
    padding_mask: bool = False  # inputs include a key-padding mask (the encoder workloads)
    notes: str = ""


_BASE = BlockConfig()
PRESETS: dict[str, Preset] = {
    "reordered": Preset(_BASE, (4, 2048, 1024), notes="OLMo-2 style norm placement (SPEC)"),
    "standard": Preset(replace(_BASE, placement="pre"), (4, 2048, 1024), notes="pre-norm (SPEC)"),
    "olmo2-1b": Preset(
        BlockConfig(d_model=2048, n_heads=16, ffn_hidden=8192, norm="rms", norm_eps=1e-6, qk_norm=True,
                    bias=False, rope_theta=500000.0, placement="reordered"),
        (2, 4096, 2048), notes="the OLMo-2 1B layer (RMSNorm and weight multiply in fp32, QK-norm)"),
    "siglip2": Preset(
        BlockConfig(d_model=1152, n_heads=16, head_dim=72, ffn_hidden=4304, mlp="gelu_tanh", placement="pre",
                    norm="layer", norm_eps=1e-6, bias=True, rope=False, causal=False),
        (256, 256, 1152), layers=4, padding_mask=True, notes="SigLIP-2 so400m vision encoder layer"),
    "te-4layer": Preset(replace(_BASE, d_model=2048, n_heads=16, ffn_hidden=4096, placement="pre"),
                        (8, 2048, 2048), layers=4,
                        notes="the 4-layer model of the surgical-compilation experiment"),
}


def preset(name: str) -> Preset:
    """The preset called ``name`` (a clear error lists the others)."""
    if name not in PRESETS:
        raise ValueError(f"name: expected one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]
