"""What ``blockfuse analyze BLOCK`` analyzes: a reference block by name, or ``path/to/file.py:factory``
(a function returning ``(module, inputs)``) so users can analyze their own models."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import torch


def _reference_blocks() -> dict:
    from blockfuse.models import REFERENCE_BLOCKS

    return REFERENCE_BLOCKS


def _block_overrides(name: str, shape) -> dict:
    """Config overrides for a width other than the block's own: same head size and FFN ratio."""
    from blockfuse.models import width_overrides

    return width_overrides(name, shape[-1])


def _factory(spec: str):
    path, _, function = spec.rpartition(":")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"BLOCK: no file {path!r} (expected path/to/file.py:factory)")
    module_spec = importlib.util.spec_from_file_location(f"blockfuse_analyze_target_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    factory = getattr(module, function, None)
    if not callable(factory):
        raise ValueError(f"BLOCK: {path} has no function {function!r}")
    return factory


def _call_factory(factory, shape, dtype, device):
    parameters = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    offered = {"shape": shape, "dtype": dtype, "device": device}
    kwargs = {k: v for k, v in offered.items() if (k in parameters or takes_any) and (k != "shape" or v is not None)}
    result = factory(**kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"BLOCK: the factory must return (module, inputs), got {type(result).__name__}")
    module, inputs = result
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    if "device" not in kwargs:
        if isinstance(module, torch.nn.Module):
            module = module.to(device)
        inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
    return module, inputs


def load_target(spec: str, shape=None, dtype: torch.dtype = torch.bfloat16, device="cpu"):
    """``(module, inputs, label)`` for a reference block name or ``path/to/file.py:factory``."""
    if spec in _reference_blocks():
        from blockfuse.models import build_block

        if shape is not None and len(shape) != 3:
            raise ValueError(f"--shape: expected batch x seq x d_model for block {spec!r}, got {shape}")
        overrides = _block_overrides(spec, shape) if shape is not None else {}
        module, inputs = build_block(spec, shape, dtype, device, **overrides)
        return module, inputs, spec
    if ":" in spec and spec.rpartition(":")[0].endswith(".py"):
        module, inputs = _call_factory(_factory(spec), shape, dtype, device)
        return module, inputs, Path(spec.rpartition(":")[0]).stem + "-" + spec.rpartition(":")[2]
    raise ValueError(f"BLOCK: expected one of {', '.join(sorted(_reference_blocks()))} or path/to/file.py:factory, "
                     f"got {spec!r}")


def inputs_for_shape(spec: str, shape, dtype: torch.dtype, device, seed: int = 1) -> tuple:
    """Inputs of another shape for the same target (the recompile probe)."""
    if spec in _reference_blocks():
        from blockfuse.models import build_block

        _, inputs = build_block(spec, shape, dtype, device, seed=seed, **_block_overrides(spec, shape))
        return inputs
    _, inputs = _call_factory(_factory(spec), shape, dtype, device)
    return inputs
