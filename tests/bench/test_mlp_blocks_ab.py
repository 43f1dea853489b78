"""benchmarks/mlp_blocks_ab.py: the gated MLP's blocks, fixed against by the activation's bytes, in one process."""

from __future__ import annotations

import json

from tests.helpers import load_benchmark


def test_both_settings_timed_and_the_knob_restored(tmp_path):
    """On the CPU, a shrunk `reordered`: the fused provider timed under both settings in every round, eager once a
    round; the gradients of both settings compared (equal here: one block either way at 16 tokens); the knob back
    at its default after; the files written."""
    import blockfuse.ops.mlp as mlp

    before = mlp.BLOCKS
    result = load_benchmark("mlp_blocks_ab").main(["reordered", "--shape", "1x16x64", "--providers", "eager,fused", "--rounds", "2",
                             "--steps", "2", "--device", "cpu", "--out", str(tmp_path)])
    assert mlp.BLOCKS is before
    assert [(r["provider"], r["setting"]) for r in result["rows"]] == [
        ("eager", "-"), ("fused", "fixed"), ("fused", "by-bytes")]
    assert all(len(r["rounds"]) == 2 and min(r["rounds"]) > 0 for r in result["rows"])
    assert result["blocks"] == {"fixed": 1, "by-bytes": 1} and result["gradient_difference"] == {"fused": 0.0}
    assert json.loads((tmp_path / "mlp-blocks-reordered.json").read_text())["rows"] == result["rows"]
    assert "| fused | by-bytes |" in (tmp_path / "mlp-blocks-reordered.md").read_text()


def test_the_rotary_knob_timed_both_ways_and_restored(tmp_path):
    """``--knob rotary-v-copy``: the fused provider under both settings of ``rotary.PACKED_COPY_IN_LAUNCH``, the same
    gradients (the same kernels' bits; on the CPU both take the reference), the knob back after, its own files."""
    import blockfuse.ops.rotary as rotary

    before = rotary.PACKED_COPY_IN_LAUNCH
    result = load_benchmark("mlp_blocks_ab").main(["reordered", "--knob", "rotary-v-copy", "--shape", "1x16x64",
                                                    "--providers", "fused", "--rounds", "2", "--steps", "1",
                                                    "--device", "cpu", "--out", str(tmp_path)])
    assert rotary.PACKED_COPY_IN_LAUNCH is before
    assert [(r["provider"], r["setting"]) for r in result["rows"]] == [("fused", "separate"), ("fused", "in-launch")]
    assert result["knob"] == "rotary-v-copy" and result["gradient_difference"] == {"fused": 0.0}
    assert "| fused | in-launch |" in (tmp_path / "rotary-v-copy-reordered.md").read_text()
