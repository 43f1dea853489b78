"""Figures written as PNGs of a small palette, for every benchmark and analysis that draws one."""

from __future__ import annotations

import io
from pathlib import Path

# NOTE: matplotlib writes RGBA PNGs; a chart of a few hundred colours (a heat map a few thousand, in gradients)
# loses nothing readable in a palette of 256 without dithering, at about a third of the bytes (the sweep's heat map
# of swiglu 143 -> 50 KB, the op benchmark's bars 315 -> 117 KB). The results folder is committed and travels with
# every call of the lent GPU, whose working tree is limited (64 MiB; 2026-12-04: 50 MiB tracked, 26 of it PNGs).
PNG_COLORS = 256


def write_png(figure, path, dpi: int = 110) -> None:
    """``figure`` as a PNG of at most PNG_COLORS colours at ``dpi`` (the NOTE above); as matplotlib writes it where
    Pillow (matplotlib's own dependency) cannot be imported."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    try:
        from PIL import Image
    except ImportError:
        Path(path).write_bytes(buffer.getvalue())
        return
    buffer.seek(0)
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(colors=PNG_COLORS, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
    palette.save(path, format="PNG", optimize=True)
