import io

import pytest

from blockfuse.analyze import png
from blockfuse.bench import writer

plt = pytest.importorskip("matplotlib.pyplot")
Image = pytest.importorskip("PIL.Image")


def _figure():
    """A heat map (a gradient of thousands of colours) with its numbers written in, as the sweep draws one."""
    import numpy as np

    figure, axis = plt.subplots(figsize=(4, 3))
    values = np.linspace(0.3, 1.2, 60).reshape(6, 10)
    axis.imshow(values, cmap="RdYlGn", vmin=0.3, vmax=1.2)
    for (i, j), value in np.ndenumerate(values):
        axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=5)
    return figure


def test_write_png_is_a_palette_of_at_most_256_colours_smaller_than_matplotlibs(tmp_path):
    """The NOTE above png.PNG_COLORS: a palette PNG, the same size in pixels as matplotlib's RGBA one, fewer
    bytes, and every pixel within a few levels of matplotlib's (no dithering noise, no colour far off)."""
    import numpy as np

    figure = _figure()
    plain = io.BytesIO()
    figure.savefig(plain, format="png", dpi=110)
    path = tmp_path / "map.png"
    png.write_png(figure, path)
    plt.close(figure)
    with Image.open(path) as written, Image.open(plain) as original:
        assert written.mode == "P" and len(written.getcolors(1 << 16)) <= png.PNG_COLORS
        assert written.size == original.size
        ours, theirs = np.asarray(written.convert("RGB"), dtype=int), np.asarray(original.convert("RGB"), dtype=int)
    assert len(np.unique(theirs.reshape(-1, 3), axis=0)) > png.PNG_COLORS  # (the figure needed the palette)
    assert path.stat().st_size < 0.6 * len(plain.getvalue())
    difference = np.abs(ours - theirs).max(axis=-1)
    assert np.percentile(difference, 99) <= 16 and difference.mean() < 2


def test_save_writes_through_write_png(tmp_path):
    path = tmp_path / "bars.png"
    assert writer.save(_figure(), path, title="a title")
    with Image.open(path) as written:
        assert written.mode == "P"
