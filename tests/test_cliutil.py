"""What every command shares (``blockfuse.cliutil``): one shape syntax, one-line usage errors, the
default output folder; and the top-level ``blockfuse`` command around them."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blockfuse import cli
from blockfuse.cliutil import RESULTS_FOLDER, UsageError, default_out, format_shape, parse_shape, parse_shapes

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text", ["4x2048x1024", "4,2048,1024", " 4 X 2048 x 1024 ", "4, 2048, 1024"])
def test_both_separators_give_one_shape(text):
    assert parse_shape(text) == (4, 2048, 1024)
    assert format_shape(parse_shape(text)) == "4x2048x1024"


@pytest.mark.parametrize("text, message", [
    ("4x2048xq", "--shape: bad shape '4x2048xq': expected sizes separated by 'x' or ','"),
    ("4,0,8", "every size must be at least 1"),
    ("4,,8", "expected sizes separated"),
    ("1,2", "expected 3 sizes, got 2"),
])
def test_bad_shapes_name_the_option_and_what_was_expected(text, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_shape(text, dims=(3,))


def test_several_shapes():
    assert parse_shapes(["1x16x64", "2,32,64"]) == [(1, 16, 64), (2, 32, 64)]
    assert parse_shapes("16384x4096,2048x1024") == [(16384, 4096), (2048, 1024)]  # the older list form
    assert parse_shapes("8,1024") == [(8, 1024)]  # commas alone: one shape
    assert parse_shapes(None) == []


def test_results_go_to_a_folder_of_the_current_directory(tmp_path):
    out = default_out("NVIDIA H200", "-host", root=tmp_path)
    assert out == tmp_path / RESULTS_FOLDER / f"{datetime.date.today().isoformat()}-nvidia-h200-host"
    assert (ROOT / ".gitignore").read_text().count(f"{RESULTS_FOLDER}/") == 1


def test_a_usage_error_is_one_line_and_exit_status_2(monkeypatch, capsys):
    def bad(args):
        raise UsageError("--thing: expected a thing, got 'nothing'")

    monkeypatch.setattr(cli, "_cmd_env", bad)
    assert cli.main(["env"]) == 2
    err = capsys.readouterr().err
    assert err == "blockfuse env: --thing: expected a thing, got 'nothing'\n"


def test_help_reads_as_prose():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "blockfuse", "--help"], capture_output=True, text=True, env=env,
                            timeout=120, check=True)
    assert "``" not in result.stdout and "blockfuse: fused Triton kernels" in result.stdout
