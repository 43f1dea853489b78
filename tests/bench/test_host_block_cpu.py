"""benchmarks/host_block_cpu.py: a block step's host cost with the kernel launches stubbed out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, interpret: str = "1") -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": interpret, "PYTHONPATH": str(REPO_ROOT / "src")}
    return subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "host_block_cpu.py"), *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.usefixtures("requires_triton")
def test_times_both_blocks_and_profiles_the_fused_one():
    """In a process of its own (the stub replaces every launch there). Both blocks timed, forward and backward,
    a ratio; the profile lists blockfuse's own functions (the launchers ran, their kernels did not)."""
    result = run("reordered", "--steps", "3", "--profile", "40")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for label in ("eager", "fused"):
        line = next(line for line in out.splitlines() if line.strip().startswith(label))
        numbers = [float(word) for word in line.split() if word.replace(".", "").isdigit()]
        assert len(numbers) == 3 and all(n > 0 for n in numbers) and abs(numbers[0] + numbers[1] - numbers[2]) <= 2
    assert "fused / eager, whole step:" in out and "blockfuse/ops/" in out


def test_refuses_to_run_without_the_interpreter():
    result = run("reordered", "--steps", "1", interpret="0")
    assert result.returncode != 0 and "set TRITON_INTERPRET=1" in result.stderr


@pytest.mark.usefixtures("requires_triton")
def test_stub_fp8_gemm_takes_every_fp8_gemm():
    """--stub-fp8-gemm: every torch._scaled_mm of the FP8 layers goes to the stub (the profile lists it and not the
    built-in), and the steps still run forward and backward."""
    result = run("te-4layer", "--linear", "fp8:delayed", "--stub-fp8-gemm", "--steps", "3", "--profile", "400")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "(_empty_scaled_mm)" in out and "torch._scaled_mm}" not in out
    assert "fused / eager, whole step:" in out
