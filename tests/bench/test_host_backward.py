"""benchmarks/host_backward.py: a fused op's forward + backward host time, piece by piece."""

from __future__ import annotations

import json

from tests.helpers import load_benchmark


def test_every_row_is_timed_and_written(tmp_path):
    """On the CPU (the reference path): every case timed in each round, the probe tables filled, the files written;
    the backward clock counts time only where a wrapped Function's backward ran, and the launch stub is undone."""
    from blockfuse.ops import launch

    module = load_benchmark("host_backward")
    call = launch.Kernel.__call__
    result = module.main(["--rounds", "2", "--calls", "3", "--shape", "8x32", "--device", "cpu",
                          "--out", str(tmp_path)])
    assert launch.Kernel.__call__ is call
    cases = {row["case"]: row for row in result["rows"]}
    assert {"rms_norm eager fwd+bwd", "rms_norm blockfuse fwd+bwd, one thread", "layer_norm blockfuse no launch",
            "empty Function fwd+bwd", "Function with a blockfuse launch in its backward, fwd+bwd",
            "rms_norm blockfuse fwd+bwd, switch interval 10 us"} <= set(cases)
    for row in result["rows"]:
        assert len(row["rounds"]) == 2 and all(v > 0 for v in row["rounds"]), row
    assert cases["empty Function fwd+bwd"]["backward_python_us"] > 0  # (its backward is wrapped)
    assert cases["Function with an ATen clone in its backward, fwd+bwd"]["backward_python_us"] > 0
    assert cases["rms_norm eager fwd+bwd"]["backward_python_us"] == 0  # (PyTorch's own backward: not a Function)
    assert [t["work"] for t in result["threads"]] == ["F.rms_norm", "blockfuse.rms_norm",
                                                      "blockfuse.rms_norm, no launch", "torch.empty_like"]
    assert all(t["calling_thread_us"] > 0 and t["engine_thread_us"] > 0 for t in result["threads"])
    for spread in result["spread"].values():
        assert 0 < spread["median"] <= spread["p90"] <= spread["max"] and spread["mean"] <= spread["max"]
    assert json.loads((tmp_path / "host-backward.json").read_text())["rows"] == json.loads(json.dumps(result["rows"]))
    text = (tmp_path / "host-backward.md").read_text()
    assert "| rms_norm blockfuse fwd+bwd |" in text and "engine's thread" in text and "| max |" in text
