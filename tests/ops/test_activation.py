"""The elementwise launch rule the activation / MLP ops share (``blockfuse/ops/activation.py``: ``launch_shape``,
its column block from ``TILES``); the activations' math is tested through the ops that run it (test_gated.py,
test_mlp.py, test_linear_act.py, test_layer_norm_gelu.py)."""

from __future__ import annotations

import dataclasses

from blockfuse.ops import activation


def column_block(n: int) -> int:
    return activation.launch_shape(4, n, 8192, 256)[1]


def test_column_block_wastes_at_most_an_eighth():
    assert [column_block(n) for n in (14336, 4304, 760, 4096, 16384, 100)] == [2048, 512, 256, 4096, 4096, 128]


def test_column_block_follows_the_table(monkeypatch):
    """The cached rule is keyed on TILES' values: a table swapped in (a sweep's) is seen at widths cached before."""
    assert column_block(16384) == 4096 and column_block(4304) == 512
    monkeypatch.setattr(activation, "TILES", dataclasses.replace(activation.TILES, max_block_n=1024))
    assert column_block(16384) == 1024 and column_block(4304) == 512
    monkeypatch.setattr(activation, "TILES", activation.Tiles(min_block_n=1024))
    assert column_block(4304) == 1024  # (none wastes an eighth or less: the least waste of 4096, 2048, 1024)
    monkeypatch.undo()
    assert column_block(16384) == 4096 and column_block(4304) == 512
