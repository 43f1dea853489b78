"""benchmarks/fuzz_ops.py --summarize: reads shard result files on any machine (no GPU, no interpreter) and reports
each group's worst error ratio to PyTorch's, and for comparisons against a bound (``fp8_linear``: PyTorch's error is
NaN there) the worst fraction of that bound."""
import json
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _comparison(ours, torch_err, tol):
    return dict(name="x", dtype="bf16", ours=ours, torch=torch_err, tol=tol, ok=ours <= tol)


def test_summarize_reports_ratios_and_bounds(tmp_path):
    results = dict(seed=3, cases=[
        dict(group="norm", op="layer_norm", params=dict(n=7), problems=[],
             comparisons=[_comparison(3e-3, 2e-3, 4e-3), _comparison(1e-3, 0.0, 1e-6)]),
        dict(group="linear", op="fp8_linear", params=dict(k=16), problems=[],
             comparisons=[_comparison(0.25, math.nan, 1.0), _comparison(0.5, math.nan, 1.0)]),
        dict(group="linear", op="fp8_linear", params=dict(k=80), problems=["output: rel err 3e-4 (tol 2.4e-4)"],
             comparisons=[_comparison(3e-4, math.nan, 2.4e-4)]),
    ], bad=[dict(name="layer_norm bad weight", type="ValueError", message="weight: expected ...", names_arg=True),
            dict(name="rotary past table", type="None", message="NO ERROR", names_arg=False)])
    path = tmp_path / "s3-0.json"
    path.write_text(json.dumps(results))  # (NaN written as JSON's NaN, as the harness writes it)
    out = subprocess.run([sys.executable, "benchmarks/fuzz_ops.py", "--summarize", str(path)], cwd=ROOT,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")},
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "norm: 1 cases, 0 failing, worst error ratio to PyTorch's 1.50" in lines
    assert "linear: 2 cases, 1 failing, worst fraction of a bound 1.25" in lines
    assert "all: 3 cases, 1 failing; bad calls 2, 1 without an error naming the argument" in lines
    assert any(line.startswith('FAIL linear {"k": 80}') for line in lines)
    assert "bad call rotary past table: None: NO ERROR" in lines
