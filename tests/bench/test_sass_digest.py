"""benchmarks/sass_digest.py: the sm_90 machine code of the ops' launches, hashed, and two runs compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_benchmark_main

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, interpret: str = "1") -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "BLOCKFUSE_SM90_TRITONS"}
    env.update(TRITON_INTERPRET=interpret, PYTHONPATH=str(REPO_ROOT / "src"))
    return subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "sass_digest.py"), *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)


def test_compare_names_the_launches_whose_code_changed(tmp_path):
    launch = {"kernel": "_k", "constexprs": {"BLOCK": 64}, "signature": {"X": "*bf16"}}
    key, other = json.dumps(launch), json.dumps({**launch, "constexprs": {"BLOCK": 128}})
    before, same, changed = tmp_path / "before.json", tmp_path / "same.json", tmp_path / "changed.json"
    before.write_text(json.dumps({"3.9.0": {key: "aaaa", other: "bbbb"}}))
    same.write_text(json.dumps({"3.9.0": {key: "aaaa", other: "bbbb"}}))
    changed.write_text(json.dumps({"3.9.0": {key: "aaaa", other: "cccc"}}))
    result = run("--compare", str(before), str(same))
    assert result.returncode == 0 and "0 with other code" in result.stdout, result.stdout + result.stderr
    result = run("--compare", str(before), str(changed))
    assert result.returncode == 1 and "1 with other code" in result.stdout and "'BLOCK': 128" in result.stdout


def test_compare_matches_launches_across_an_added_constexpr(tmp_path):
    """--added NAME=DEFAULT: a launch with the added constexpr at its default is the old launch (same code: 0 with
    other code), one with another value a new launch; without --added every launch is in one file only."""
    launch = {"kernel": "_k", "constexprs": {"BLOCK": 64}, "signature": {"X": "*bf16"}}
    at_default = {"kernel": "_k", "constexprs": {"BLOCK": 64, "THREADS": 0}, "signature": {"X": "*bf16"}}
    other = {"kernel": "_k", "constexprs": {"BLOCK": 64, "THREADS": 256}, "signature": {"X": "*bf16"}}
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"3.9.0": {json.dumps(launch): "aaaa"}}))
    after.write_text(json.dumps({"3.9.0": {json.dumps(at_default): "aaaa", json.dumps(other): "bbbb"}}))
    result = run("--compare", str(before), str(after), "--added", "THREADS=0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 with other code, 0 in one file only; 1 new launches" in result.stdout, result.stdout
    after.write_text(json.dumps({"3.9.0": {json.dumps(at_default): "cccc"}}))
    result = run("--compare", str(before), str(after), "--added", "THREADS=0")
    assert result.returncode == 1 and "1 with other code" in result.stdout, result.stdout
    assert "2 in one file only" in run("--compare", str(before), str(after)).stdout


@pytest.mark.usefixtures("requires_triton")
def test_digests_the_launches_of_a_kernel(tmp_path, monkeypatch, every_op_recorded):
    """One small kernel's recorded launches built for sm_90 with this machine's Triton: a digest each, and the SASS
    it hashed (instructions, no addresses). NOTE: the script's ``main`` in this process, its recording the one the
    sm_90 tests made in this worker (``every_op_recorded``, the same ``_record_launches`` over the same
    ``_exercise_every_op``): a process of its own ran the whole exercise again, about 13 s of CI's time."""
    from tests.ops import test_sm90_compile

    launches, _ = every_op_recorded
    monkeypatch.setattr(test_sm90_compile, "_record_launches", lambda _: dict(launches))
    monkeypatch.setattr(test_sm90_compile, "_exercise_every_op", lambda device: None)
    monkeypatch.setattr(test_sm90_compile, "OTHER_TRITONS", [])  # (this machine's Triton only, as run() leaves it)
    out, dump = tmp_path / "digests.json", tmp_path / "sass"
    run_benchmark_main(monkeypatch, "sass_digest", "--kernels", "_transpose_bytes_kernel", "--out", str(out),
                       "--dump", str(dump))
    (version, digests), = json.loads(out.read_text()).items()
    assert digests and all(json.loads(key)["kernel"] == "_transpose_bytes_kernel" for key in digests)
    files = sorted(dump.iterdir())
    assert {f.name for f in files} == {f"_transpose_bytes_kernel-{d}.sass" for d in digests.values()}
    sass = files[0].read_text()
    assert "EXIT" in sass and "/*0" not in sass


def test_refuses_to_record_without_the_interpreter():
    result = run("--kernels", "_transpose_bytes_kernel", interpret="0")
    assert result.returncode != 0 and "set TRITON_INTERPRET=1" in result.stderr
