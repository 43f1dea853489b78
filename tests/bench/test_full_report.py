"""End to end: ``blockfuse report`` on the CPU (tiny shapes): every part, its files and report.md; a part
that fails is reported while the others still run; a failing blockfuse provider makes the exit code 1."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from blockfuse.bench import block, full_report
from blockfuse.cli import main


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["report", "--quick", "--device", "cpu", "--out", str(out)])
    return code, out, printed.getvalue()


@pytest.fixture
def cheap(monkeypatch):
    """Only the providers that compile nothing: a whole report in a few seconds."""
    monkeypatch.setattr(block, "CPU_PROVIDERS", ("eager", "fused"))
    monkeypatch.setattr(full_report, "MODEL_PROVIDERS", ("eager", "fused"))
    monkeypatch.setattr(full_report, "ROPE_PROVIDERS", ("eager", "blockfuse"))


def test_report_writes_every_part(full_run):
    code, out, printed = full_run
    assert code == 0, printed
    for name in ("report.md", "report.json", "analyze-reordered.json", "analyze-reordered.md", "block-reordered.json",
                 "block-reordered.md", "block-reordered.png", "model-te-4layer.json", "model-te-4layer.md",
                 "ops-rotary.json", "ops-rotary.md"):
        assert (out / name).stat().st_size > 0, name
    document = json.loads((out / "report.json").read_text())
    meta = document["meta"]
    assert {"card", "torch", "triton", "date", "source_digest", "elapsed_s"} <= set(meta)
    assert meta["command"] == f"blockfuse report --quick --device cpu --out {out}"
    parts = document["parts"]
    assert list(parts) == ["analyze", "block", "surgical", "rope"]
    for name, entry in parts.items():
        assert entry["status"] == "ok", (name, entry.get("traceback"))
        assert entry["elapsed_s"] > 0 and entry["result"]["headline"]
    assert document["blockfuse_failures"] == []

    analysis = parts["analyze"]["result"]
    assert analysis["graph_breaks"] == 0 and analysis["kernels"] > 0
    assert list(analysis["passes"]) == ["inference", "forward", "backward"]
    assert analysis["passes"]["inference"]["gemms"] == 7 and analysis["report"]["meta"]["target"] == "reordered"

    blocks = parts["block"]["result"]
    assert blocks["workload"]["shape"] == list(full_report.CPU_SHAPE)
    assert {r["provider"] for r in blocks["records"]} == set(block.CPU_PROVIDERS)
    assert {r["mode"] for r in blocks["records"]} == set(block.MODES)
    assert all("error" not in r and r["ms"] > 0 for r in blocks["records"])
    timed = {r["provider"] for r in blocks["records"] if "compile_cold_s" in r}
    assert timed == {"compile:default"}  # the compile-mode table's compiled providers that run on the CPU
    assert "--compile-times compile:default" in blocks["meta"]["command"]

    surgical = parts["surgical"]["result"]
    assert surgical["workload"]["layers"] == 4 and {r["mode"] for r in surgical["records"]} == {"infer"}
    providers = [p for p in full_report.MODEL_PROVIDERS if p in block.PROVIDERS]
    differences = surgical["differences"]["providers"]
    assert list(differences) == providers
    assert differences["eager"]["max_abs_vs_eager"] == 0
    for provider, difference in differences.items():
        # the same weights and input as the timed run: bf16 against fp32 is close, but not exact
        assert 0 < difference["max_abs_vs_fp32"] < 0.5 and 0 < difference["rel_err_vs_fp32"] < 0.05, provider

    rope = parts["rope"]["result"]
    assert [r["provider"] for r in rope["records"]] == list(full_report.ROPE_PROVIDERS)
    assert all(r["error"] is None and r["mode"] == "fwd" for r in rope["records"])


def test_report_markdown_stitches_the_parts(full_run):
    _, out, _ = full_run
    markdown = (out / "report.md").read_text()
    for text in ("# blockfuse report", "- card: **CPU", "torch ", "triton ", "- command: `blockfuse report --quick",
                 "## Parts", "## 1. compile analysis of `reordered`", "graph breaks: **0**",
                 "| inference |", "## 2. `reordered` block, every provider", "### Results", "| fused |",
                 "max-autotune: not run", "## 3. `te-4layer` inference", "max abs diff vs fp32",
                 "### Compile modes", "| compile:default | ",
                 "## 4. RoPE alone, forward", "RoPE q, k [", "(block-reordered.json)", "(block-reordered.png)",
                 "(model-te-4layer.json)", "(analyze-reordered.md)", "(ops-rotary.json)"):
        assert text in markdown, text
    assert "**failed**" not in markdown and "blockfuse failed" not in markdown


def test_report_says_what_the_cpu_skips(full_run):
    _, out, printed = full_run
    markdown = (out / "report.md").read_text()
    document = json.loads((out / "report.json").read_text())
    assert "## Skipped" in markdown and document["skipped"]
    for text in ("small shapes on the CPU", "CUDA graphs", "autotuning", "GPU timing"):
        assert text in markdown and text in printed, text
    assert "compile:reduce-overhead" in markdown and "compile:max-autotune" in markdown


def test_a_failing_part_is_reported_and_the_others_still_run(tmp_path, monkeypatch, cheap):
    def broken(*args):
        raise RuntimeError("the analysis [broke]")

    monkeypatch.setattr(full_report, "analyze_part", broken)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["report", "--quick", "--device", "cpu", "--out", str(tmp_path)])
    assert code == 0  # no blockfuse provider failed
    parts = json.loads((tmp_path / "report.json").read_text())["parts"]
    assert parts["analyze"]["status"] == "failed" and "RuntimeError: the analysis [broke]" in parts["analyze"]["error"]
    assert "broken" in parts["analyze"]["traceback"]
    assert [parts[name]["status"] for name in ("block", "surgical", "rope")] == ["ok"] * 3
    markdown = (tmp_path / "report.md").read_text()
    assert "| **failed** |" in markdown and "RuntimeError: the analysis [broke]" in markdown
    assert "## 4. RoPE alone, forward" in markdown and "| fused |" in markdown
    assert "the analysis [broke]" in printed.getvalue()


def test_a_failing_blockfuse_provider_makes_the_exit_code_1(tmp_path, monkeypatch, cheap):
    original = block._Workload.provider_module

    def broken(self, provider):
        if provider == "fused":
            raise RuntimeError("fused is broken")
        return original(self, provider)

    monkeypatch.setattr(block._Workload, "provider_module", broken)
    monkeypatch.setattr(full_report, "analyze_part", lambda *args: 1 / 0)
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["report", "--quick", "--device", "cpu", "--out", str(tmp_path)])
    assert code == 1
    document = json.loads((tmp_path / "report.json").read_text())
    failures = document["blockfuse_failures"]
    assert any(f.startswith("block fused infer: RuntimeError: fused is broken") for f in failures)
    assert any(f.startswith("surgical fused output difference") for f in failures)
    assert document["parts"]["rope"]["status"] == "ok"
    markdown = (tmp_path / "report.md").read_text()
    assert "**blockfuse failed** (exit code 1)" in markdown and "fused output difference: `RuntimeError" in markdown
