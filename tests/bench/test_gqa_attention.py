"""benchmarks/gqa_attention.py: grouped-query heads handed to SDPA as they are against repeated first."""

from __future__ import annotations

import re

import pytest

from tests.helpers import run_benchmark_main


@pytest.mark.usefixtures("requires_triton")
def test_smoke_run_reports_both_ways_with_the_same_errors(monkeypatch, capsys):
    """--smoke (CPU, tiny shapes, errors only): each workload both ways, and the two ways' errors against fp32
    within a few percent of each other (the same attention, computed without the repeated copies). NOTE: the tool's
    main in this process (a process of its own spent 3-4 s of CI's time importing torch and blockfuse); the switches
    it sets are put back after it (monkeypatch)."""
    from blockfuse.models import eager as eager_module
    from blockfuse.models import fused as fused_module

    monkeypatch.setattr(eager_module, "sdpa_takes_grouped_heads", eager_module.sdpa_takes_grouped_heads)
    monkeypatch.setattr(fused_module, "NATIVE_GQA", fused_module.NATIVE_GQA)
    run_benchmark_main(monkeypatch, "gqa_attention", "--smoke", "--rounds", "1")
    stdout = capsys.readouterr().out
    errors = {}
    for workload, way, out, dx in re.findall(r"^(.+?): (repeated|native): rel err out (\S+) dx (\S+)$",
                                             stdout, re.M):
        errors[(workload, way)] = (float(out), float(dx))
    workloads = {workload for workload, _ in errors}
    assert len(workloads) == 2, stdout
    for workload in workloads:
        repeated, native = errors[(workload, "repeated")], errors[(workload, "native")]
        assert all(0 < r < 5e-2 for r in repeated)
        assert all(abs(n - r) <= 0.05 * r for n, r in zip(native, repeated))
