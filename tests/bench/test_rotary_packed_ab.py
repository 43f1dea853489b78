"""benchmarks/rotary_packed_ab.py: the packed rotary's v copied in the rotation's launch against apart."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_benchmark


@pytest.mark.usefixtures("requires_triton")
def test_both_settings_timed_in_every_round_and_the_knob_restored(tmp_path):
    """On the CPU, two tiny shapes (the padded kernel at head_dim 16, the flat one at 24): both settings in each of
    two rounds, forward and forward + backward, the knob back at its value after, the files written."""
    import blockfuse.ops.rotary as rotary

    before = rotary.PACKED_COPY_IN_LAUNCH
    result = load_benchmark("rotary_packed_ab").main(["--shapes", "1x8x2x1x16,1x12x2x1x24", "--rounds", "2",
                                                      "--device", "cpu", "--out", str(tmp_path)])
    assert rotary.PACKED_COPY_IN_LAUNCH is before
    assert [row["shape"] for row in result["rows"]] == [[1, 8, 2, 1, 16], [1, 12, 2, 1, 24]]
    for row in result["rows"]:
        for label in ("separate", "in-launch"):
            assert all(len(v) == 2 and min(v) > 0 for v in row[label]["rounds"].values()), row
    assert json.loads((tmp_path / "rotary-packed-ab.json").read_text())["rows"] == result["rows"]
    assert "| [1, 12] 2/1 24 |" in (tmp_path / "rotary-packed-ab.md").read_text()
