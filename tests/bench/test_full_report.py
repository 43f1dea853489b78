"""End to end: ``blockfuse report`` on the CPU (tiny shapes): every part, its files and report.md; a part
that fails is reported while the others still run; a failing blockfuse provider makes the exit code 1."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from blockfuse.bench import block
from blockfuse.bench.full_report import parts as report_parts
from blockfuse.cli import main
from tests.helpers import use_few_timed_calls


# What the stand-in compile-time probe of ``full_run`` answers (seconds), to find in the report.
PROBED_TIMES = {"compile_cold_s": 12.5, "compile_warm_s": 2.5}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """(exit code, output folder, what it printed, the compile-time probes asked for as (block settings, provider)).
    NOTE: the compile-time probe (``block.compile_times``: two new processes compiling the block, about 28 s on CI) is
    a stand-in that notes its call and answers PROBED_TIMES: tests/bench/test_block.py's
    test_compile_times_cold_and_warm_of_chosen_providers runs the real one; here the point is which providers the
    report probes and where their times land."""
    out = tmp_path_factory.mktemp("report")
    printed, probed = io.StringIO(), []

    def compile_times(settings, provider):
        probed.append((settings, provider))
        return dict(PROBED_TIMES)

    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as monkeypatch:
        use_few_timed_calls(monkeypatch)
        monkeypatch.setattr(block, "compile_times", compile_times)
        code = main(["report", "--quick", "--device", "cpu", "--out", str(out)])
    return code, out, printed.getvalue(), probed


def _cheap(monkeypatch):
    """Only the providers that compile nothing, each timing two calls: a whole report in a few seconds."""
    monkeypatch.setattr(block, "CPU_PROVIDERS", ("eager", "fused"))
    monkeypatch.setattr(report_parts, "MODEL_PROVIDERS", ("eager", "fused"))
    monkeypatch.setattr(report_parts, "ROPE_PROVIDERS", ("eager", "blockfuse"))
    use_few_timed_calls(monkeypatch)


@pytest.fixture
def cheap(monkeypatch):
    _cheap(monkeypatch)


@pytest.fixture(scope="module")
def broken_analysis_run(tmp_path_factory):
    """(exit code, output folder, what it printed) of one cheap report with ``--targets`` whose analysis part
    raises: the run of both tests below (the targets shown; a failing part reported while the others still run).
    NOTE: one run where there were two (about 14 s each on CI): ``--targets`` only adds the Targets sections
    (full_report/markdown.py, command.py), and a failing part is rendered the same with or without them."""
    out = tmp_path_factory.mktemp("report-broken-analysis")

    def broken(*args):
        raise RuntimeError("the analysis [broke]")

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as monkeypatch:
        _cheap(monkeypatch)
        monkeypatch.setattr(report_parts, "analyze_part", broken)
        code = main(["report", "--quick", "--device", "cpu", "--targets", "--out", str(out)])
    return code, out, printed.getvalue()


def test_report_writes_every_part(full_run):
    code, out, printed, probed = full_run
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
    assert blocks["workload"]["shape"] == list(report_parts.CPU_SHAPE)
    assert {r["provider"] for r in blocks["records"]} == set(block.CPU_PROVIDERS)
    assert {r["mode"] for r in blocks["records"]} == set(block.MODES)
    assert all("error" not in r and r["ms"] > 0 for r in blocks["records"])
    timed = {r["provider"] for r in blocks["records"] if "compile_cold_s" in r}
    assert timed == {"compile:default"}  # the compile-mode table's compiled providers that run on the CPU
    assert [provider for _, provider in probed] == ["compile:default"]  # once, after the timings
    settings = probed[0][0]
    assert (settings.name, settings.shape, settings.layers) == ("reordered", report_parts.CPU_SHAPE, 1)
    assert all(r[key] == value for r in blocks["records"] if r["provider"] == "compile:default"
               for key, value in PROBED_TIMES.items())
    assert "--compile-times compile:default" in blocks["meta"]["command"]

    surgical = parts["surgical"]["result"]
    assert surgical["workload"]["layers"] == 4 and {r["mode"] for r in surgical["records"]} == {"infer"}
    providers = [p for p in report_parts.MODEL_PROVIDERS if p in block.PROVIDERS]
    differences = surgical["differences"]["providers"]
    assert list(differences) == providers
    assert differences["eager"]["max_abs_vs_eager"] == 0
    for provider, difference in differences.items():
        # the same weights and input as the timed run: bf16 against fp32 is close, but not exact
        assert 0 < difference["max_abs_vs_fp32"] < 0.5 and 0 < difference["rel_err_vs_fp32"] < 0.05, provider

    rope = parts["rope"]["result"]
    assert [r["provider"] for r in rope["records"]] == list(report_parts.ROPE_PROVIDERS)
    assert all(r["error"] is None and r["mode"] == "fwd" for r in rope["records"])


def test_report_ends_with_a_verdict_and_keeps_the_targets_in_the_json(full_run):
    _, out, printed, _ = full_run
    markdown = (out / "report.md").read_text()
    document = json.loads((out / "report.json").read_text())
    sections = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert sections[-1] == "## Verdict for this card"  # the last word
    verdict = markdown[markdown.index("## Verdict for this card"):]
    for question in ("training (forward + backward)", "inference (forward, no grad)", "inference of the 4-layer model",
                     "memory (peak of a training step)", "RoPE alone (forward)", "error vs fp32", "**On the CPU**"):
        assert question in verdict, question
    answers = document["verdict"]["answers"]
    for key in ("training", "inference", "model_inference", "rope"):
        answer = answers[key]
        if answer["provider"] is None:  # every timing of the question noisy on a busy CPU
            assert answer["why"] == "noisy timings only" and answer["noisy"], (key, answer)
            continue
        records = document["parts"][{"training": "block", "inference": "block", "model_inference": "surgical",
                                     "rope": "rope"}[key]]["result"]["records"]
        assert answer["value"] == min(r["ms"] for r in records if r["provider"] not in answer["noisy"]
                                      and r["mode"] == {"training": "fwdbwd", "rope": "fwd"}.get(key, "infer"))
        assert answer["error"] > 0 and f"**{answer['provider']}**" in verdict, (key, answer)
    assert answers["memory"]["why"] == "CUDA memory: not measured on the CPU"
    assert "verdict for this card" in printed
    # the project's targets: in the JSON for the GPU scripts, not in what a user reads
    assert document["parts"]["block"]["result"]["targets"] and not document["targets_shown"]
    for text in ("## Targets", "n/a on the CPU", "**met**", "**missed**", "targets met"):
        assert text not in markdown and text not in printed, text
    for name in ("block-reordered.md", "model-te-4layer.md", "ops-rotary.md"):
        assert "## Targets" not in (out / name).read_text(), name


def test_targets_are_shown_when_asked_for(broken_analysis_run):
    code, out, printed = broken_analysis_run  # (its analysis part broken: not what this test is about)
    assert code == 0
    markdown = (out / "report.md").read_text()
    assert "## Targets" in markdown and "a CUDA target, n/a on the CPU" in markdown
    assert markdown.index("## Targets") < markdown.index("## Verdict for this card")
    assert "## Targets" in (out / "block-reordered.md").read_text()
    assert "target, block: n/a:" in printed
    assert json.loads((out / "report.json").read_text())["meta"]["command"].startswith(
        "blockfuse report --quick --targets --device cpu")


def test_report_markdown_stitches_the_parts(full_run):
    _, out, _, _ = full_run
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
    compile_modes = markdown[markdown.index("### Compile modes"):]
    row = next(line for line in compile_modes.splitlines() if line.startswith("| compile:default | "))
    assert row.endswith("| 12.5 | 2.5 |"), row  # the probe's cold and warm seconds (PROBED_TIMES)


def test_report_says_what_the_cpu_skips(full_run):
    _, out, printed, _ = full_run
    markdown = (out / "report.md").read_text()
    document = json.loads((out / "report.json").read_text())
    assert "## Skipped" in markdown and document["skipped"]
    for text in ("small shapes on the CPU", "CUDA graphs", "autotuning", "GPU timing"):
        assert text in markdown and text in printed, text
    assert "compile:reduce-overhead" in markdown and "compile:max-autotune" in markdown


def test_a_failing_part_is_reported_and_the_others_still_run(broken_analysis_run):
    code, out, printed = broken_analysis_run
    assert code == 0  # no blockfuse provider failed
    parts = json.loads((out / "report.json").read_text())["parts"]
    assert parts["analyze"]["status"] == "failed" and "RuntimeError: the analysis [broke]" in parts["analyze"]["error"]
    assert "broken" in parts["analyze"]["traceback"]
    assert [parts[name]["status"] for name in ("block", "surgical", "rope")] == ["ok"] * 3
    markdown = (out / "report.md").read_text()
    assert "| **failed** |" in markdown and "RuntimeError: the analysis [broke]" in markdown
    assert "## 4. RoPE alone, forward" in markdown and "| fused |" in markdown
    assert "the analysis [broke]" in printed


def test_a_failing_blockfuse_provider_makes_the_exit_code_1(tmp_path, monkeypatch, cheap):
    original = block._Workload.provider_module

    def broken(self, provider):
        if provider == "fused":
            raise RuntimeError("fused is broken")
        return original(self, provider)

    monkeypatch.setattr(block._Workload, "provider_module", broken)
    monkeypatch.setattr(report_parts, "analyze_part", lambda *args: 1 / 0)
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


def test_the_verdict_picks_the_smallest_steady_figure_with_its_error():
    """On synthetic CUDA records: the fastest step, forward and RoPE, the leanest peak; a noisy median is left
    out rather than crowned; a failed part gives no answer."""
    from blockfuse.bench.full_report import verdict

    def step(provider, ms, peak, err, p80=None):
        return {"provider": provider, "mode": "fwdbwd", "ms": ms, "p20": ms, "p80": p80 or ms, "peak_mib": peak,
                "rel_err_grad": err}

    block_records = [step("eager", 10.0, 900.0, 1e-3), step("compile:default", 8.0, 700.0, 2e-3),
                     step("fused", 6.0, 800.0, 3e-3), step("compile:max-autotune", 1.0, 600.0, 1e-3, p80=9.0),
                     {"provider": "fused+compile:default", "mode": "fwdbwd", "error": "RuntimeError: no"},
                     {"provider": "eager", "mode": "infer", "ms": 4.0, "rel_err_out": 1e-3},
                     {"provider": "fused", "mode": "infer", "ms": 5.0, "rel_err_out": 2e-3}]
    rope_records = [{"provider": "eager", "mode": "fwd", "ms": 0.3, "rel_err_out": 1e-3},
                    {"provider": "blockfuse", "mode": "fwd", "ms": 0.1, "rel_err_out": 2e-3}]
    document = {"meta": {"device": "cuda"}, "parts": {
        "block": {"status": "ok", "result": {"records": block_records}},
        "surgical": {"status": "failed", "error": "x"},
        "rope": {"status": "ok", "result": {"records": rope_records}}}}
    found = verdict.verdict(document)
    answers = found["answers"]
    assert not found["cpu"] and "model_inference" not in answers
    training = answers["training"]
    assert (training["provider"], training["value"], training["error"]) == ("fused", 6.0, 3e-3)
    assert training["vs_eager"] == pytest.approx(10 / 6) and training["noisy"] == ["compile:max-autotune"]
    assert training["runner_up"] == {"provider": "compile:default", "value": 8.0, "error": 2e-3}
    assert (answers["inference"]["provider"], answers["inference"]["error"]) == ("eager", 1e-3)
    memory = answers["memory"]  # a peak is no timing: the noisy run's memory counts
    assert (memory["provider"], memory["value"], memory["error_of"]) == ("compile:max-autotune", 600.0, "gradients")
    assert answers["rope"]["provider"] == "blockfuse" and answers["rope"]["vs_eager"] == pytest.approx(3)
    text = "\n".join(verdict.markdown_lines(found))
    assert "| training (forward + backward) | **fused** | 6 ms (1.67x eager) | 3.00e-03 (gradients) | " \
           "compile:default: 8 ms, error 2.00e-03 |" in text
    assert "On the CPU" not in text and "Left out as noisy (p80 > 2x p20) in some question: compile:max-autotune" in text
