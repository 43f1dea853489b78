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


@pytest.mark.usefixtures("requires_triton")
def test_launches_counts_the_mlp_blocks():
    """--launches: one step's blockfuse launches and ATen GEMM calls; at 2048 tokens the MLP works in two row blocks
    (its 1024-row minimum), and with --mlp-block-bytes past the whole activation (2048 x 128 fp32: 1 MiB) in one:
    one gated forward and one gated backward launch fewer, and one down GEMM and one hidden-gradient GEMM fewer.
    With --rotary-v-in-launch 1, the attention's v and its gradient copied in the rotation's launches: two launches
    fewer, the same GEMMs. Eager launches nothing of blockfuse's."""
    counts = {}
    for block_bytes, in_launch in (("0", "0"), (str(4 << 20), "0"), ("0", "1")):
        result = run("reordered", "--tokens", "2x1024", "--steps", "0", "--launches", "--mlp-block-bytes", block_bytes,
                     "--rotary-v-in-launch", in_launch)
        assert result.returncode == 0, result.stderr
        lines = {line.split()[0]: line for line in result.stdout.splitlines() if "a step:" in line}
        numbers = {label: [int(word) for word in line.replace(",", "").split() if word.isdigit()]
                   for label, line in lines.items()}
        assert numbers["eager"][0] == 0 and numbers["eager"][1] > 0
        assert "whole step" not in result.stdout  # (--steps 0: nothing timed)
        counts[block_bytes, in_launch] = numbers["fused"]
    base, by_bytes, in_launch = counts["0", "0"], counts[str(4 << 20), "0"], counts["0", "1"]
    assert base[0] - by_bytes[0] == 2 and base[1] - by_bytes[1] == 2, counts
    assert base[0] - in_launch[0] == 2 and base[1] == in_launch[1], counts
