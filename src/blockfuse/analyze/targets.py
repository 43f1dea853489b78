"""What ``blockfuse analyze BLOCK`` analyzes: a reference block by name, or ``path/to/file.py:factory``
(a function returning ``(module, inputs)``) so users can analyze their own models.

Bad input (an unknown name, a missing file or function, a factory that returns something else, a shape
the block cannot take) raises :class:`TargetError`: a ``ValueError`` to callers, a one-line usage error
on the command line. The factory's own exceptions pass through untouched."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import torch

from blockfuse.cliutil import UsageError, format_shape

# NOTE: a reference block's input on the CPU when no shape is given: batch 1, 16 tokens, the preset
# shrunk to width 64 (same head size and FFN ratio). The presets' own shapes are GPU workloads that take
# minutes to compile and time on a small CPU; this one takes seconds and shows the same fusions.
CPU_SHAPE = (1, 16, 64)  # (batch, seq, d_model)


class TargetError(UsageError, ValueError):
    """A BLOCK or a shape that names nothing the analysis can build."""


def _reference_blocks() -> dict:
    from blockfuse.models import REFERENCE_BLOCKS

    return REFERENCE_BLOCKS


def is_reference_block(spec: str) -> bool:
    return spec in _reference_blocks()


def default_shape(spec: str, device) -> tuple[tuple[int, ...] | None, str]:
    """The shape to analyze ``spec`` at when none is given, and one line saying why.
    ``(None, "")`` where the target's own shape stands (CUDA, or a factory)."""
    if torch.device(device).type != "cpu" or not is_reference_block(spec):
        return None, ""
    own = format_shape(_reference_blocks()[spec].shape)
    return CPU_SHAPE, (f"no --shape on the CPU: {spec} at {format_shape(CPU_SHAPE)} (batch {CPU_SHAPE[0]}, "
                       f"{CPU_SHAPE[1]} tokens, the preset shrunk to width {CPU_SHAPE[2]}, same head size and "
                       f"FFN ratio), not its GPU shape {own} (minutes here)")


def _block_overrides(name: str, shape) -> dict:
    """Config overrides for a width other than the block's own: same head size and FFN ratio."""
    from blockfuse.models import width_overrides

    if len(shape) != 3:
        raise TargetError(f"--shape: expected batch x seq x d_model (3 sizes) for block {name!r}, "
                          f"got {format_shape(shape)}")
    try:
        return width_overrides(name, shape[-1])
    except ValueError as error:  # a width the preset cannot be resized to
        raise TargetError(f"--shape {format_shape(shape)}: {str(error).removeprefix('shape: ')}") from None


def _factory(spec: str):
    path, _, function = spec.rpartition(":")
    file = Path(path)
    if not file.is_file():
        raise TargetError(f"BLOCK: no file {path!r} (expected path/to/file.py:factory)")
    module_spec = importlib.util.spec_from_file_location(f"blockfuse_analyze_target_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    factory = getattr(module, function, None)
    if not callable(factory):
        functions = sorted(name for name, value in vars(module).items()
                           if inspect.isfunction(value) and not name.startswith("_"))
        raise TargetError(f"BLOCK: {path} has no function {function!r} (functions there: "
                          f"{', '.join(functions) or 'none'})")
    return factory


def _call_factory(factory, shape, dtype, device):
    parameters = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if shape is not None and "shape" not in parameters and not takes_any:
        raise TargetError(f"--shape: the factory {factory.__name__!r} takes no shape argument "
                          "(expected a parameter named shape)")
    offered = {"shape": shape, "dtype": dtype, "device": device}
    kwargs = {k: v for k, v in offered.items() if (k in parameters or takes_any) and (k != "shape" or v is not None)}
    result = factory(**kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise TargetError(f"BLOCK: the factory {factory.__name__!r} must return (module, inputs), got {got}")
    module, inputs = result
    if not callable(module):
        raise TargetError(f"BLOCK: the factory {factory.__name__!r} must return (module, inputs) with a callable "
                          f"module, got {type(module).__name__}")
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    if "device" not in kwargs:
        if isinstance(module, torch.nn.Module):
            module = module.to(device)
        inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
    return module, inputs


def _is_factory(spec: str) -> bool:
    return ":" in spec and spec.rpartition(":")[0].endswith(".py")


def load_target(spec: str, shape=None, dtype: torch.dtype = torch.bfloat16, device="cpu"):
    """``(module, inputs, label)`` for a reference block name or ``path/to/file.py:factory``."""
    if is_reference_block(spec):
        from blockfuse.models import build_block

        overrides = _block_overrides(spec, shape) if shape is not None else {}
        module, inputs = build_block(spec, shape, dtype, device, **overrides)
        return module, inputs, spec
    if _is_factory(spec):
        module, inputs = _call_factory(_factory(spec), shape, dtype, device)
        return module, inputs, Path(spec.rpartition(":")[0]).stem + "-" + spec.rpartition(":")[2]
    raise TargetError(f"BLOCK: expected one of {', '.join(sorted(_reference_blocks()))} or path/to/file.py:factory, "
                      f"got {spec!r}")


def inputs_for_shape(spec: str, shape, dtype: torch.dtype, device, seed: int = 1) -> tuple:
    """Inputs of another shape for the same target (the recompile probe)."""
    if is_reference_block(spec):
        from blockfuse.models import build_block

        _, inputs = build_block(spec, shape, dtype, device, seed=seed, **_block_overrides(spec, shape))
        return inputs
    _, inputs = _call_factory(_factory(spec), shape, dtype, device)
    return inputs
