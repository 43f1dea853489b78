"""benchmarks/gqa_attention.py: grouped-query heads handed to SDPA as they are against repeated first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("requires_triton")
def test_smoke_run_reports_both_ways_with_the_same_errors():
    """--smoke (CPU, tiny shapes, errors only): each workload both ways, and the two ways' errors against fp32
    within a few percent of each other (the same attention, computed without the repeated copies)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT / "src")}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "gqa_attention.py"), "--smoke",
                             "--rounds", "1"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    errors = {}
    for workload, way, out, dx in re.findall(r"^(.+?): (repeated|native): rel err out (\S+) dx (\S+)$",
                                             result.stdout, re.M):
        errors[(workload, way)] = (float(out), float(dx))
    workloads = {workload for workload, _ in errors}
    assert len(workloads) == 2, result.stdout
    for workload in workloads:
        repeated, native = errors[(workload, "repeated")], errors[(workload, "native")]
        assert all(0 < r < 5e-2 for r in repeated)
        assert all(abs(n - r) <= 0.05 * r for n, r in zip(native, repeated))
