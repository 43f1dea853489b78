"""What every ``blockfuse`` command shares: one-line usage errors, one shape syntax, the default output folder.

Imports nothing from the rest of the package (the commands of every layer use it).

* :class:`UsageError`: bad input on the command line. ``blockfuse``'s ``main`` prints it as one line,
  ``blockfuse <command>: <message>``, on stderr and exits 2, with no traceback.
* Shapes: sizes separated by ``x`` or ``,`` (``4x2048x1024`` or ``4,2048,1024``), several shapes as
  separate words (``--shape 1x16x64 2x32x64``). :func:`parse_shape`, :func:`parse_shapes`.
* :func:`default_out`: results go to ``./blockfuse-results/<name>/`` (ignored by git in this repository),
  never into ``benchmarks/results/``, where only committed runs live.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Iterable, Optional

RESULTS_FOLDER = "blockfuse-results"


class UsageError(Exception):
    """Bad input on the command line: the message names the argument and what was expected."""


def parse_shape(text: str, *, option: str = "--shape", dims: Optional[Iterable[int]] = None) -> tuple[int, ...]:
    """``"4x2048x1024"`` or ``"4,2048,1024"`` (spaces ignored) -> ``(4, 2048, 1024)``. ``dims``: the
    numbers of sizes allowed (None: any). Raises :class:`UsageError` naming ``option``."""
    cleaned = str(text).strip().lower().replace(" ", "")
    parts = re.split(r"[x,]", cleaned)
    try:
        shape = tuple(int(part) for part in parts)
    except ValueError:
        raise UsageError(f"{option}: bad shape {text!r}: expected sizes separated by 'x' or ',', "
                         "e.g. 4x2048x1024 or 4,2048,1024") from None
    if min(shape) < 1:
        raise UsageError(f"{option}: bad shape {text!r}: every size must be at least 1")
    allowed = None if dims is None else tuple(dims)
    if allowed is not None and len(shape) not in allowed:
        expected = " or ".join(str(d) for d in allowed)
        raise UsageError(f"{option}: bad shape {text!r}: expected {expected} sizes, got {len(shape)}")
    return shape


def parse_shapes(words: Iterable[str] | str | None, *, option: str = "--shape",
                 dims: Optional[Iterable[int]] = None) -> list[tuple[int, ...]]:
    """Several shapes, one per word. A word that holds commas and ``x`` both is a comma-separated
    list of ``x`` shapes (``16384x4096,2048x1024``, the older list form); otherwise a word is one shape."""
    if words is None:
        return []
    if isinstance(words, str):
        words = words.split()
    shapes = []
    for word in words:
        word = word.strip()
        if not word:
            continue
        items = word.split(",") if ("," in word and "x" in word.lower()) else [word]
        shapes += [parse_shape(item, option=option, dims=dims) for item in items if item.strip()]
    return shapes


def format_shape(shape: Iterable[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "unknown"


def default_out(card: str, suffix: str = "", root: Optional[Path] = None) -> Path:
    """``./blockfuse-results/<date>-<card slug><suffix>``: where a command writes when ``--out`` is not
    given (``root``: instead of the current directory)."""
    name = f"{datetime.date.today().isoformat()}-{slug(card)}{suffix}"
    return (root or Path.cwd()) / RESULTS_FOLDER / name
