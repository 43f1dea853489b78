"""benchmarks/launch_cost.py: each kernel launch of a block's step timed on the host, by kernel."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_benchmark_main


@pytest.mark.usefixtures("requires_triton")
def test_times_every_launch_both_ways(tmp_path, monkeypatch, capsys):
    """On the CPU under the interpreter (the tool's smoke test): both passes printed, blockfuse's kernels listed by
    name with a count a step, and the timed calls never more than the host's step (they are part of it). NOTE: the
    tool's main in this process (a process of its own spent 3-4 s of CI's time importing torch and blockfuse); what
    it wraps for its timings is put back after it (monkeypatch)."""
    import torch

    from blockfuse.ops import launch

    for owner, name in ((launch.Kernel, "__call__"), (torch, "_scaled_mm"),
                        (torch.nn.functional, "scaled_dot_product_attention")):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    run_benchmark_main(monkeypatch, "launch_cost", "reordered", "--shape", "1x8x1024", "--steps", "1", "--device",
                       "cpu", "--json", str(tmp_path / "launch.json"))
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("reordered x1 bf16")]
    assert len(headers) == 2 and "as it runs" in headers[0] and "synchronized before each call" in headers[1]
    for header in headers:
        host = float(header.split("host ")[1].split(" ms")[0])
        timed = float(header.split("the timed calls ")[1].split(" ms")[0])
        assert 0 < timed <= host
    for name in ("_norm_fwd_kernel", "_norm_bwd_kernel", "_rotary_kernel", "sdpa"):
        assert out.count(name) == 2, name
    record = json.loads((tmp_path / "launch.json").read_text())
    assert [p["synchronized"] for p in record["passes"]] == [False, True]
    for p in record["passes"]:
        assert p["calls"]["_norm_fwd_kernel"]["per_step"] == 2  # the block's two norms
        assert abs(sum(c["ms_per_step"] for c in p["calls"].values()) - p["timed_ms"]) < 1e-6
