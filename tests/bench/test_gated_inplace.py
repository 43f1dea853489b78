"""benchmarks/gated_inplace.py: SwiGLU's backward into fresh outputs against over its inputs."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_benchmark


@pytest.mark.usefixtures("requires_triton")
def test_both_variants_checked_and_timed_in_every_round(tmp_path, device):
    """Two odd shapes on the session's device (the CPU: under the interpreter, wall time; a GPU: the peers too):
    each variant's gradients within bf16's rounding of float64 math (so an in-place launch that read an element
    after writing it, or a forward + backward sequence whose forward wrote over an operand, would fail here), every
    variant timed in each of two rounds, the files written."""
    result = load_benchmark("gated_inplace").main(["--shapes", "8x24,5x40", "--rounds", "2", "--device", device,
                                                   "--tiles", "1024:256", "--flat", "--forward", "--sequence",
                                                   "--out", str(tmp_path)])
    assert [row["shape"] for row in result["rows"]] == [[8, 24], [5, 40]]
    for row in result["rows"]:
        assert {"fresh", "in-place", "tile-1024-256", "grid-1d", "grid-2d", "grid-2d-1024-256", "flat",
                "flat-1024-256", "fwd", "fwd-grid-1d", "fwd-grid-2d", "seq-fresh", "seq-in-place",
                "seq-tile-1024-256"} <= set(row["us"]), row
        assert (device == "cpu") == (len(row["us"]) == 14), row
        assert all(0 < error < 8e-3 for error in row["error"].values()), row["error"]
        assert all(len(times) == 2 and min(times) > 0 for times in row["rounds"].values()), row
    assert json.loads((tmp_path / "gated-inplace.json").read_text())["rows"] == result["rows"]
    assert "| [5, 40] |" in (tmp_path / "gated-inplace.md").read_text()
