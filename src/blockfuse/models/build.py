"""Seeded construction of the SPEC workloads: ``build_block`` and ``build_model`` return ``(module, inputs)``."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import torch
from torch import Tensor, nn

from blockfuse.models.blocks import TransformerBlock, TransformerStack
from blockfuse.models.config import Preset, preset


def padding_mask_for(batch: int, seq: int, generator: torch.Generator) -> Tensor:
    """A key-padding mask (batch, seq) bool: sequence i keeps its first n_i tokens, n_i drawn
    in [seq / 2, seq] (the first sequence is full, so the unpadded path is always exercised)."""
    lengths = torch.randint(max(1, seq // 2), seq + 1, (batch,), generator=generator)
    lengths[0] = seq
    return torch.arange(seq)[None, :] < lengths[:, None]


def _seeded(factory, seed: int) -> nn.Module:
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return factory()
    finally:
        torch.random.set_rng_state(state)


def width_overrides(name: str, width: int) -> dict:
    """Config overrides that resize a preset to ``width``: the same head size (fewer heads if it does
    not divide), the same FFN ratio, GQA group kept where it divides. Empty at the preset's width."""
    config = preset(name).config
    if width == config.d_model:
        return {}
    head = config.head_size
    heads = max(1, width // head)
    while width % heads:
        heads -= 1
    overrides = {"d_model": width, "n_heads": heads, "head_dim": None,
                 "ffn_hidden": max(1, round(config.ffn_hidden * width / config.d_model))}
    if config.n_kv_heads is not None:
        group = config.n_heads // config.n_kv_heads
        overrides["n_kv_heads"] = heads // group if heads % group == 0 else heads
    if config.rope and (width // heads) % 2:
        raise ValueError(f"shape: width {width} gives an odd head size {width // heads}; rotary needs an even one")
    return overrides


def _resolve(name: str, shape, overrides: dict) -> tuple[Preset, tuple[int, int, int]]:
    chosen = preset(name)
    config = replace(chosen.config, **overrides)
    shape = tuple(shape) if shape is not None else (*chosen.shape[:2], config.d_model)
    if len(shape) != 3 or shape[-1] != config.d_model:
        raise ValueError(f"shape: expected (batch, seq, {config.d_model}), got {shape}")
    if shape[1] > config.max_seq_len:
        config = replace(config, max_seq_len=shape[1])
    return replace(chosen, config=config), shape


def _inputs(chosen: Preset, shape, dtype, device, generator) -> tuple[Tensor, ...]:
    x = torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
    if not chosen.padding_mask:
        return (x,)
    return (x, padding_mask_for(shape[0], shape[1], generator).to(device))


def build_block(
    name: str,
    shape: Optional[tuple[int, ...]] = None,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    *,
    seed: int = 0,
    impl: str = "eager",
    **overrides,
) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """``(block, inputs)`` for one layer of a preset; ``shape`` (batch, seq, d_model) defaults to the SPEC's.

    ``inputs`` is ``(x,)``, plus a key-padding mask for the encoder presets (``siglip2``).
    ``overrides`` replace fields of the preset's :class:`BlockConfig` (e.g. ``d_model=64, n_heads=4``
    for a tiny block). The same ``seed`` gives the same weights for ``impl="eager"`` and ``"fused"``.
    """
    chosen, shape = _resolve(name, shape, overrides)
    generator = torch.Generator().manual_seed(seed)
    eager = _seeded(lambda: TransformerBlock(chosen.config, "eager"), seed)
    module = eager if impl == "eager" else _with_state(TransformerBlock(chosen.config, impl), eager)
    module = module.to(device=device, dtype=dtype)
    return module, _inputs(chosen, shape, dtype, device, generator)


def build_model(
    name: str,
    shape: Optional[tuple[int, ...]] = None,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    *,
    layers: Optional[int] = None,
    seed: int = 0,
    impl: str = "eager",
    **overrides,
) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """``(stack, inputs)``: ``layers`` blocks of a preset (default: the preset's layer count)."""
    chosen, shape = _resolve(name, shape, overrides)
    layers = chosen.layers if layers is None else layers
    generator = torch.Generator().manual_seed(seed)
    eager = _seeded(lambda: TransformerStack(chosen.config, layers, "eager"), seed)
    module = eager if impl == "eager" else _with_state(TransformerStack(chosen.config, layers, impl), eager)
    module = module.to(device=device, dtype=dtype)
    return module, _inputs(chosen, shape, dtype, device, generator)


def _with_state(module: nn.Module, source: nn.Module) -> nn.Module:
    module.load_state_dict(source.state_dict())
    return module
