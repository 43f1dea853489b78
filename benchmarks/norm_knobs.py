"""ops/norm.py's tuning knobs as the benchmark tools name them (``NAME=V``: the names their results record): checked,
read and set through the table (``norm.TUNING``, ``norm.tuned``), or, on code from before the table (an A/B's old
side, PYTHONPATH at an older src/), as the module constants that code had.
"""

from __future__ import annotations

import contextlib
import dataclasses

from blockfuse.ops import norm


def has_knob(name: str) -> bool:
    """Whether this code has the knob ``name`` (older code lacks the newer knobs)."""
    if hasattr(norm, "TUNING"):
        return name.lower() in {field.name for field in dataclasses.fields(norm.TUNING)}
    return hasattr(norm, name)


def knob(name: str):
    """The value of the knob ``name`` in force."""
    if hasattr(norm, "TUNING"):
        return getattr(norm.TUNING, name.lower())
    return getattr(norm, name)


@contextlib.contextmanager
def rule_constants(values: dict):
    """The knobs ``values`` (name -> value) set together for the block and restored after it, the rules' caches
    cleared on both sides (``norm.tuned``)."""
    if hasattr(norm, "tuned"):
        with norm.tuned(**values):
            yield
        return
    saved = {name: getattr(norm, name) for name in values}  # (code from before the table)
    try:
        for name, value in values.items():
            setattr(norm, name, value)
        _clear_caches()
        yield
    finally:
        for name, value in saved.items():
            setattr(norm, name, value)
        _clear_caches()


def _clear_caches() -> None:
    """The launch rules' caches of code from before the table (they read module constants, not only arguments)."""
    for cached in vars(norm).values():
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
