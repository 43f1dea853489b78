"""``blockfuse bench host`` through the CLI on the CPU, and its ratios and targets."""

from __future__ import annotations

import json

import pytest

from blockfuse.bench import host
from blockfuse.cli import main


@pytest.mark.usefixtures("few_timed_calls")
def test_bench_host_writes_every_file_and_field(tmp_path):
    code = main(["bench", "host", "--quick", "--op", "rms_norm", "swiglu", "--providers", "eager,blockfuse",
                 "--profile", "rms_norm", "--out", str(tmp_path)])
    assert code == 0
    for name in ("host.json", "host.md", "host.png", "host-profile.txt"):
        assert (tmp_path / name).stat().st_size > 0
    document = json.loads((tmp_path / "host.json").read_text())
    assert document["meta"]["command"].startswith("blockfuse bench host")
    records = document["records"]
    assert {(r["op"], r["provider"], r["mode"]) for r in records} == {
        (op, p, m) for op in ("rms_norm", "swiglu") for p in ("eager", "blockfuse") for m in ("fwd", "fwdbwd")}
    for record in records:
        assert record["error"] is None, record
        assert 0 < record["us_p20"] <= record["us"] <= record["us_p80"]
        # the same function as PyTorch's in bf16: a small error, never 0 (inputs are random)
        assert 0 < record["rel_err"] < 0.02
    assert {t["baseline"] for t in document["targets"]} == {"eager"}
    markdown = (tmp_path / "host.md").read_text()
    assert "Measured on the CPU" in markdown and "| rms_norm |" in markdown
    assert "cProfile" in (tmp_path / "host-profile.txt").read_text()


def test_targets_compare_the_right_pairs():
    records = [{"op": "x", "mode": mode, "provider": provider, "us": us}
               for mode, provider, us in (("fwd", "eager", 10.0), ("fwd", "blockfuse", 15.0), ("fwd", "liger", 40.0),
                                          ("fwdbwd", "eager", 100.0), ("fwdbwd", "blockfuse", 160.0),
                                          ("fwd", "compile", 20.0), ("fwd", "blockfuse-compile", 21.0))]
    checks = {(c["mode"], c["provider"], c["baseline"]): (c["ratio"], c["status"]) for c in host.targets(records)}
    assert checks[("fwd", "blockfuse", "eager")] == (1.5, "met")
    assert checks[("fwd", "blockfuse", "liger")] == (0.375, "met")
    assert checks[("fwdbwd", "blockfuse", "eager")] == (1.6, "missed")
    assert checks[("fwd", "blockfuse-compile", "compile")] == (1.05, "met")
    assert ("fwdbwd", "blockfuse-compile", "compile") not in checks  # not measured: no check


@pytest.mark.usefixtures("few_timed_calls")
def test_every_mlp_op_runs_through_the_harness():
    """The MLP ops are declared in bench/host.py itself (not as op benchmarks): each must run through the
    same harness, its reference and providers called with the inputs by name."""
    import torch

    settings = host.HostSettings(dtype="fp32", providers=("eager", "blockfuse"), modes=("fwd", "fwdbwd"),
                                 device=torch.device("cpu"), quick=True)
    for bench in host.MLP_BENCHMARKS:
        records = host.measure(bench, settings, status=lambda text: None)
        assert len(records) == 4, bench.name
        for record in records:
            assert record["error"] is None, record
            assert record["us"] > 0 and record["rel_err"] < 1e-4, record  # fp32: the eager one may be exact
