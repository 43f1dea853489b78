"""``blockfuse analyze`` as a newcomer on a small CPU box meets it: bad input is one line on stderr (no
traceback), a reference block without --shape runs at a small shape and says so, both shape syntaxes
parse, and the comparison names its blocks. The commands run in a subprocess, as a user runs them; the bad-input
cases in this process through the same ``main``, one of them as its own process too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import run_cli_in_process

SRC = Path(__file__).resolve().parents[2] / "src"

FACTORIES = '''
import torch


def make(shape=(4, 8)):
    return torch.nn.Linear(shape[-1], shape[-1]), torch.randn(shape)


def make_one():
    return torch.nn.Linear(8, 8)


def make_three(shape=(4, 8)):
    return torch.nn.Linear(8, 8), torch.randn(shape), "extra"


def make_fixed():
    return torch.nn.Linear(8, 8), torch.randn(4, 8)
'''


def blockfuse_command(*words: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "blockfuse", "analyze", *words], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def factory_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("factories") / "factories.py"
    path.write_text(FACTORIES)
    return path


BAD_INPUTS = {
    "unknown block": (["nosuch"], "BLOCK: expected one of"),
    "missing file": (["nonexistent.py:factory"], "BLOCK: no file 'nonexistent.py'"),
    "missing function": (["{factories}:nosuch"], "has no function 'nosuch'"),
    "factory returns a module alone": (["{factories}:make_one"], "must return (module, inputs), got Linear"),
    "factory returns three things": (["{factories}:make_three"], "must return (module, inputs), got a tuple of 3"),
    "factory takes no shape": (["{factories}:make_fixed", "--shape", "4x8"], "--shape: the factory 'make_fixed'"),
    "two sizes for a block": (["reordered", "--shape", "4x64"], "--shape: expected batch x seq x d_model"),
    "a width with an odd head size": (["reordered", "--shape", "1,16,65"], "--shape 1x16x65: width 65"),
    "not a shape": (["reordered", "--shape", "four"], "--shape: bad shape 'four'"),
    "a size of 0": (["reordered", "--shape", "1x0x64"], "every size must be at least 1"),
    "unknown device": (["reordered", "--device", "mps"], "--device: expected cuda or cpu"),
    "no profiled step": (["reordered", "--steps", "0"], "--steps: expected at least 1"),
    "unknown compare block": (["reordered", "--compare", "nosuch"], "BLOCK: expected one of"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_without_a_traceback(case, factory_file, tmp_path, monkeypatch, capsys):
    words, expected = BAD_INPUTS[case]
    words = [w.format(factories=factory_file) for w in words]
    result = run_cli_in_process(["analyze", *words, "--out", str(tmp_path / "out")], tmp_path, monkeypatch, capsys)
    _check_bad_input(result, tmp_path, expected)


def test_bad_input_from_its_own_process(factory_file, tmp_path):
    """One bad input as a user's shell runs it: ``python -m blockfuse analyze``, its exit status and stderr."""
    words, expected = BAD_INPUTS["missing function"]
    words = [w.format(factories=factory_file) for w in words]
    _check_bad_input(blockfuse_command(*words, "--out", str(tmp_path / "out"), cwd=tmp_path), tmp_path, expected)


def _check_bad_input(result, tmp_path, expected):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blockfuse analyze: "), result.stderr
    assert expected in lines[0]
    assert not (tmp_path / "out").exists()  # bad input fails before any analysis (--compare included)


def test_cpu_without_a_shape_runs_small_and_says_so(tmp_path):
    out = tmp_path / "out"
    result = blockfuse_command("reordered", "--no-profile", "--device", "cpu", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("no --shape on the CPU: reordered at 1x16x64") and "4x2048x1024" in first
    assert "analyze reordered (1x16x64): " in result.stdout and "analyze reordered: done in" in result.stdout
    document = json.loads((out / "reordered.json").read_text())
    assert document["meta"]["input_shapes"] == [[1, 16, 64]]
    assert "--shape 1x16x64" in document["meta"]["command"]


class FakeReport:
    """What the command line reads of a report: records the inputs it was analyzed with."""

    def __init__(self, module, *inputs, name=None, **_):
        self.inputs = inputs
        self.meta = {"target": name}

    def print_summary(self, console):
        pass

    def write(self, out):
        return {}


@pytest.mark.parametrize("text", ["1x16x64", "1,16,64", " 1 , 16 , 64 "])
def test_both_shape_syntaxes(text, monkeypatch, tmp_path):
    import blockfuse.analyze.api
    from blockfuse.cli import main

    reports = []

    def analyze(*args, **kwargs):
        reports.append(FakeReport(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(blockfuse.analyze.api, "analyze", analyze)
    code = main(["analyze", "reordered", "--shape", text, "--device", "cpu", "--out", str(tmp_path)])
    assert code == 0
    assert tuple(reports[0].inputs[0].shape) == (1, 16, 64)
    assert " --shape 1x16x64 " in reports[0].meta["command"]  # recorded in the x form


def test_several_shapes_in_either_syntax(monkeypatch, tmp_path):
    import blockfuse.analyze.api
    from blockfuse.cli import main

    calls = []

    def analyze(*args, **kwargs):
        calls.append(kwargs)
        return FakeReport(*args, **kwargs)

    monkeypatch.setattr(blockfuse.analyze.api, "analyze", analyze)
    main(["analyze", "reordered", "--shape", "1,16,64", "2x8x64", "--device", "cpu", "--out", str(tmp_path)])
    assert [tuple(x.shape) for (x,) in calls[0]["recompile_inputs"]] == [(2, 8, 64)]


def test_default_out_is_outside_the_checkout(monkeypatch, tmp_path):
    import blockfuse.analyze.api
    from blockfuse.cli import main

    monkeypatch.chdir(tmp_path)
    written = []

    class Writing(FakeReport):
        def write(self, out):
            written.append(Path(out))
            return {}

    monkeypatch.setattr(blockfuse.analyze.api, "analyze", Writing)
    main(["analyze", "reordered", "--device", "cpu"])
    assert written[0].parent.parent == tmp_path / "blockfuse-results" and written[0].name == "analyze"
    assert written[0].parent.name.endswith("-cpu")


def test_the_comparison_names_both_blocks():
    from blockfuse.analyze.compare import compare

    def report(name, launches, ms):
        step = SimpleNamespace(wrapper_launches=launches, fused=["LayerNorm"], pass_ms=ms)
        return SimpleNamespace(meta={"target": name}, passes={"inference": step})

    sentence = compare(report("reordered", 12, 0.665), report("standard", 13, 1.162)).sentence("inference")
    assert "step time standard 1.162 ms against reordered 0.665 ms (standard / reordered = 1.75x)" in sentence
