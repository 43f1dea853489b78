"""``blockfuse bench`` as a newcomer on a small CPU box meets it: bad input is one line on stderr naming the
command and the problem (no traceback), a block without ``--shape`` picks a small shape on the CPU and says
so, both shape syntaxes parse, and noisy CPU medians are shown as such rather than as speed-ups."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from blockfuse.bench import block_report, writer
from blockfuse.bench.full_report import parts
from blockfuse.bench.cli import _command
from blockfuse.cli import build_parser
from blockfuse.cliutil import RESULTS_FOLDER, UsageError
from tests.helpers import run_cli_in_process

SOURCE = Path(__file__).resolve().parents[2] / "src"
needs_cpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU defaults")


def _blockfuse(*argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(SOURCE), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, "-m", "blockfuse", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


BAD_INPUTS = [
    (["bench", "block", "nosuch"], "blockfuse bench block:", "unknown preset 'nosuch'"),
    (["bench", "block", "reordered", "--providers", "nosuch"], "blockfuse bench block:", "unknown --providers nosuch"),
    (["bench", "block", "reordered", "--modes", "nope"], "blockfuse bench block:", "unknown --modes nope"),
    (["bench", "block", "reordered", "--shape", "1,2"], "blockfuse bench block:", "--shape: bad shape '1,2'"),
    (["bench", "model", "reordered", "--shape", "1xq"], "blockfuse bench model:", "--shape: bad shape '1xq'"),
    (["bench", "ops", "--shapes", "12q"], "blockfuse bench ops:", "--shapes: bad shape '12q'"),
    (["bench", "ops", "--op", "nosuch"], "blockfuse bench ops:", "unknown --op nosuch"),
    (["bench", "host", "--modes", "nope"], "blockfuse bench host:", "unknown --modes nope"),
]


@pytest.mark.parametrize("argv, label, problem", BAD_INPUTS)
def test_bad_input_is_one_line_naming_the_command(tmp_path, argv, label, problem, monkeypatch, capsys):
    result = run_cli_in_process([*argv, "--out", str(tmp_path / "out")], tmp_path, monkeypatch, capsys)
    _check_bad_input(result, tmp_path, label, problem)


def test_bad_input_from_its_own_process(tmp_path):
    """One bad input as a user's shell runs it: ``python -m blockfuse``, its exit status and stderr."""
    argv, label, problem = BAD_INPUTS[0]
    _check_bad_input(_blockfuse(*argv, "--out", str(tmp_path / "out"), cwd=tmp_path), tmp_path, label, problem)


def _check_bad_input(result, tmp_path, label, problem):
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(label) and problem in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "out").exists()  # nothing written before the input is checked


@needs_cpu
def test_block_without_shape_runs_a_small_cpu_shape_within_a_minute(tmp_path):
    result = _blockfuse("bench", "block", "reordered", "--quick", "--out", str(tmp_path / "out"), cwd=tmp_path,
                        timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "shape: 1x16x64 (no CUDA" in result.stdout
    assert "small shapes" not in result.stdout  # the old CPU message promised small shapes it did not run
    assert "[1/5] reordered: eager" in result.stdout  # a line per step instead of a live bar
    assert "--shape 1x16x64" in (tmp_path / "out" / "block-reordered.md").read_text()
    markdown = (tmp_path / "out" / "block-reordered.md").read_text()
    assert "a CUDA target, n/a on the CPU" in markdown and "**missed**" not in markdown


def test_default_out_is_the_results_folder(tmp_path, monkeypatch):
    """Without --out every command writes under ./blockfuse-results/, never benchmarks/results/."""
    from blockfuse.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["bench", "ops", "--quick", "--op", "rms_norm", "--shapes", "4x64", "--modes", "fwd",
                 "--providers", "eager"])
    assert code == 0
    written = list((tmp_path / RESULTS_FOLDER).glob("*/ops.json"))
    assert len(written) == 1 and not (tmp_path / "benchmarks").exists()
    parser = build_parser()
    for argv in (["bench", "ops"], ["bench", "host"], ["bench", "block"], ["bench", "model"], ["report"]):
        action = next(a for a in _subparser(parser, argv)._actions if "--out" in a.option_strings)
        assert RESULTS_FOLDER in action.help and "benchmarks/results" not in action.help


def _subparser(parser, argv):
    for word in argv:
        choices = next(a for a in parser._actions if getattr(a, "choices", None) and word in a.choices).choices
        parser = choices[word]
    return parser


@pytest.mark.parametrize("text", ["2x8x64", "2,8,64", "2, 8, 64"])
def test_block_shape_takes_either_syntax(tmp_path, text, monkeypatch):
    from blockfuse.bench import cli

    seen = {}

    def run_and_write(kind, settings, meta, out, **_):  # records the settings, runs nothing
        seen["settings"] = settings
        meta["elapsed_s"] = 0.0
        return {}, [], out / "block-standard", False

    monkeypatch.setattr(block_report, "run_and_write", run_and_write)
    monkeypatch.setattr(block_report, "markdown", lambda *_: "")
    args = build_parser().parse_args(["bench", "block", "standard", "--shape", text, "--providers", "eager",
                                      "--out", str(tmp_path)])
    assert cli.run_block(args) == 0 and seen["settings"].shape == (2, 8, 64)
    assert dict(seen["settings"].overrides)["d_model"] == 64
    assert block_report.command("block", seen["settings"], tmp_path).startswith(
        "blockfuse bench block standard --shape 2x8x64 ")


def test_ops_shapes_take_either_syntax_and_the_old_list():
    from blockfuse.bench import runner
    from blockfuse.cliutil import parse_shapes

    parser = build_parser()
    for words, expected in ((["16384x4096", "2048,1024"], [(16384, 4096), (2048, 1024)]),
                            (["16384x4096,2048x1024"], [(16384, 4096), (2048, 1024)]),
                            (["8,256"], [(8, 256)])):
        args = parser.parse_args(["bench", "ops", "--shapes", *words])
        assert parse_shapes(args.shapes, option="--shapes") == expected
    settings = runner.Settings(dtype="bf16", modes=("fwd",), providers=("eager",), shapes=((8, 256), (2, 3, 4)),
                               quick=True, device=torch.device("cpu"))
    command = _command(None, ["rms_norm"], settings, Path("out"))
    assert "--shapes 8x256 2x3x4 " in command
    with pytest.raises(UsageError, match="--shapes: bad shape '8x'"):
        parse_shapes(["8x"], option="--shapes")


def test_noisy_medians_are_not_headline_ratios():
    steady = {"provider": "eager", "mode": "fwd", "ms": 1.0, "p20": 0.9, "p80": 1.1}
    wide = {"provider": "fused", "mode": "fwd", "ms": 0.35, "p20": 0.3, "p80": 40.2}
    assert writer.noisy(wide) and not writer.noisy(steady)
    assert block_report.time_cell(wide, steady) == "0.350 (noisy: p20-p80 0.3-40.2 ms)"
    assert block_report.time_cell(steady, wide) == "1.000 (eager noisy)"
    assert block_report.time_cell(steady, steady) == "1.000 (1.00x)"
    # a backward alone slower than forward + backward is marked, not presented as a plain figure
    records = [{"provider": "fused", "mode": "bwd", "ms": 59.4, "p20": 50.0, "p80": 60.0},
               {"provider": "fused", "mode": "fwdbwd", "ms": 23.5, "p20": 20.0, "p80": 25.0},
               {"provider": "eager", "mode": "bwd", "ms": 30.0, "p20": 29.0, "p80": 31.0},
               {"provider": "eager", "mode": "fwdbwd", "ms": 40.0, "p20": 39.0, "p80": 41.0}]
    meta = {"card": "CPU", "torch": "t", "triton": "t", "cuda": None, "python": "3", "date": "d", "command": "c",
            "device": "cpu"}
    workload = {"name": "reordered", "shape": [1, 16, 64], "layers": 1, "dtype": "bfloat16", "forward_gflop": 0.0}
    markdown = block_report.markdown(meta, workload, records)
    assert "59.400 (0.51x) (noisy: bwd > fwdbwd)" in markdown
    assert "not measured on the CPU" in markdown
    # the RoPE line of `blockfuse report`: a noisy median is given with its spread and takes part in no ratio
    rope = {"shape": [1, 16, 4, 2, 32], "records": [
        {"provider": "eager", "ms": 0.5, "ms_p20": 0.45, "ms_p80": 0.55},
        {"provider": "compile", "ms": 29.25, "ms_p20": 0.72, "ms_p80": 40.2},
        {"provider": "blockfuse", "ms": 0.3475, "ms_p20": 0.33, "ms_p80": 0.36}]}
    line = parts.rope_line(rope)
    assert "compile 29.25 ms (noisy: p20-p80 0.72-40.2 ms)" in line
    assert "x compile" not in line and "blockfuse 0.3475 ms (1.44x eager)" in line


def test_block_targets_are_not_met_or_missed_on_the_cpu():
    records = [{"provider": "compile:default", "mode": "fwd", "ms": 2.0},
               {"provider": "fused", "mode": "fwd", "ms": 1.0}]
    on_cuda = block_report.targets({"name": "reordered"}, records, "cuda")
    on_cpu = block_report.targets({"name": "reordered"}, records, "cpu")
    assert any(t["status"] == "met" for t in on_cuda)
    assert {t["status"] for t in on_cpu} == {"n/a"} and all("n/a on the CPU" in t["text"] for t in on_cpu)
