"""benchmarks/norm_fp8.py without a GPU: the variant columns of its table and its chart over several runs."""

from __future__ import annotations

import json
import sys

import pytest
import torch

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


def test_bench_checks_every_variant(monkeypatch):
    """bench() checks each variant's outputs as it launches them (``check_variants``, by label), the ablations
    excepted; here on the CPU with the timing stubbed (under TRITON_INTERPRET=1 the FP8 kernels run, their tiles
    and settings in force; else the references)."""
    bench = load_benchmark("norm_fp8")
    sys.path.insert(0, str(bench.__file__).rsplit("/", 1)[0])  # (norm_knobs, norm_tiles beside it)
    monkeypatch.setattr(bench, "graph_ms", lambda fn: (fn(), 1.0)[1])
    monkeypatch.setattr(bench, "copy_ms", lambda nbytes: 1.0)
    from blockfuse.ops import norm

    seen, checking = [], []  # the warps of the FP8 launches each check made
    kernel = norm._fwd_fp8_kernel
    monkeypatch.setattr(norm, "_fwd_fp8_kernel", lambda *a, **k: (checking and checking[-1].add(k["num_warps"]),
                                                                    kernel(*a, **k))[1])
    check = bench.check

    def checked(form, op, y_ref):
        checking.append(set())
        result = check(form, op, y_ref)
        seen.append(checking.pop())
        return result

    monkeypatch.setattr(bench, "check", checked)
    setting = bench.parse_setting("pw:FP8_FWD_TAIL_WARPS=False")  # 2880 = 2048 + 1024: the plain 4 warps, not 2
    rows = bench.bench(["ln"], 3, [2880], tiles=[(1, 8)], settings=[setting], ablate=True, device="cpu")
    (row,) = rows
    assert sorted(row["check_variants"]) == ["pw", "t1x8"]
    if norm.use_triton(torch.empty(1)):  # (the interpreter: the kernels launch)
        assert seen == [{2}, {8}, {4}], seen  # the default's check, then each variant's, as it launches them
    for checked in (row["check"], *row["check_variants"].values()):
        assert checked["rowwise"]["max_fp8_steps"] <= 1 and checked["tensorwise"]["max_fp8_steps"] <= 1
        assert checked["rowwise"]["scale_rel_error"] < 1e-5
    assert {"tensorwise_noroll", "tensorwise_nopdl", "rowwise_pw", "rowwise_t1x8"} <= set(row)
