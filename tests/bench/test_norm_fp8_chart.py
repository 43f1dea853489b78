"""benchmarks/norm_fp8.py without a GPU: the variant columns of its table and its chart over several runs."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers import load_benchmark


def _payload(pieces_ms: float) -> dict:
    """A norm-fp8.json of one run: rowwise / tensorwise and their ``pieces`` variant at one cell, a cell without."""
    def timed(ms):
        return {"ms": ms, "fraction": 0.01 / ms}

    with_variant = {"rows": 16384, "width": 4304, "form": "ln", "check": {}, "rowwise": timed(0.1),
                    "tensorwise": timed(0.1), "rowwise_pieces": timed(pieces_ms), "tensorwise_pieces": timed(0.2)}
    without = {"rows": 16384, "width": 4304, "form": "swiglu", "check": {}, "rowwise": timed(0.1)}
    return {"card": "test card", "torch": "t", "triton": "t", "command": "c", "rows": [with_variant, without]}


def test_variants_are_the_calls_beside_the_providers():
    bench = load_benchmark("norm_fp8")
    assert bench.variants(_payload(0.05)["rows"]) == ["rowwise_pieces", "tensorwise_pieces"]
    assert bench.variants([{"rows": 1, "width": 2, "form": "ln", "check": {}, "rowwise": {"ms": 1.0}}]) == []


def test_chart_from_runs_draws_the_speedups(tmp_path, monkeypatch):
    bench = load_benchmark("norm_fp8")
    paths = []
    for k, ms in enumerate((0.05, 0.08)):
        paths.append(tmp_path / f"run{k}.json")
        paths[-1].write_text(json.dumps(_payload(ms)))
    monkeypatch.setattr(sys, "argv", ["norm_fp8.py", "--chart-from", *map(str, paths), "--out", str(tmp_path / "o")])
    bench.main()
    assert (tmp_path / "o" / "norm-fp8-variants.png").stat().st_size > 1000
    plain = _payload(0.05)
    for row in plain["rows"]:
        row.pop("rowwise_pieces", None), row.pop("tensorwise_pieces", None)
    with pytest.raises(ValueError, match="no rowwise_LABEL"):
        bench.variants_chart([plain], tmp_path / "none.png")


def test_chart_by_width_draws_each_form_and_variant(tmp_path, monkeypatch):
    """--by-width: one point a (variant, form, width) and recipe, the speed-ups those of the JSON."""
    bench = load_benchmark("norm_fp8")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_payload(0.05)))
    drawn = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot",
                        lambda self, xs, ys, *a, **k: drawn.append(list(ys)) or original(self, xs, ys, *a, **k))
    monkeypatch.setattr(sys, "argv", ["norm_fp8.py", "--chart-from", str(path), "--by-width", "--out",
                                      str(tmp_path / "o")])
    bench.main()
    assert (tmp_path / "o" / "norm-fp8-widths.png").stat().st_size > 1000
    assert drawn == [[pytest.approx(2.0)], [pytest.approx(0.5)]]  # rowwise 0.1 / 0.05, tensorwise 0.1 / 0.2
    with pytest.raises(ValueError, match="no rowwise_LABEL"):
        bench.width_chart([{"card": "c", "torch": "t", "triton": "t", "rows": []}], tmp_path / "none.png")
