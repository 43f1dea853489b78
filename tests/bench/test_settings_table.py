"""benchmarks/settings_table.py: two norm_tiles.py settings over several runs, one table and a plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import load_benchmark


def _run(path: Path, times: dict) -> Path:
    """A norm_tiles.py JSON: ``times`` (shape, setting) -> [ms a round]; fraction = 0.1 / ms."""
    rows = [{"shape": list(shape), "op": "ln", "mode": "none", "pass_": "bwd-setting", "setting": setting,
             "ms": ms, "frac": 0.1 / ms, "round": i}
            for (shape, setting), rounds in times.items() for i, ms in enumerate(rounds)]
    rows.append({"shape": [1, 1], "op": "ln", "mode": "none", "pass_": "bwd-setting", "setting": "other", "ms": 1.0,
                 "frac": 0.1, "round": 0})
    path.write_text(json.dumps({"device": "test", "rows": rows}))
    return path


def test_speedups_per_run_and_means(tmp_path):
    table_tool = load_benchmark("settings_table")
    one = _run(tmp_path / "one.json", {((8, 16), "old"): [2.0, 2.2], ((8, 16), "new"): [1.0, 1.1],
                                       ((4, 16), "old"): [1.0], ((4, 16), "new"): [1.0]})
    two = _run(tmp_path / "two.json", {((8, 16), "old"): [3.0], ((8, 16), "new"): [2.0]})  # (no (4, 16): dropped)
    table = table_tool.cells([one, two], "old", "new")
    assert len(table) == 1
    cell = table[0]
    assert cell["shape"] == [8, 16] and cell["speedups"] == pytest.approx([2.0, 1.5])
    assert cell["old_ms"] == pytest.approx((2.0 + 2.2 + 3.0) / 3) and cell["new_ms"] == pytest.approx(4.1 / 3)
    text = table_tool.markdown(table, "old", "new")
    assert "| 8 x 16 | ln | bwd |" in text and "2.000x / 1.500x" in text


def test_cli_writes_the_plot_and_names_missing_settings(tmp_path, capsys):
    table_tool = load_benchmark("settings_table")
    one = _run(tmp_path / "one.json", {((8, 16), "old"): [2.0], ((8, 16), "new"): [1.0]})
    assert table_tool.main([str(one), "--old", "old", "--new", "new", "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert "2.000x" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        table_tool.main([str(one), "--old", "old", "--new", "absent"])
    assert "'absent'" in capsys.readouterr().err
