"""End to end: ``blockfuse bench model hf-llama`` through the CLI on the tiny Llama, and the pieces it uses."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import math
import re
import sys

import pytest
import torch

pytest.importorskip("transformers")

from blockfuse.bench import hf_llama  # noqa: E402
from blockfuse.cli import main  # noqa: E402
from tests.helpers import use_few_timed_calls  # noqa: E402

CUDA = torch.cuda.is_available()
PROVIDERS = ("hf-eager", "blockfuse", "blockfuse-compile", "liger")


def _bench(out, *args):
    # without CUDA the tiny model comes by itself (which the first test checks); with CUDA, ask for it
    return main(["bench", "model", "hf-llama", "--quick", *args, *(["--tiny"] if CUDA else []), "--out", str(out)])


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """(exit code, output folder, what it printed) of one run with an eager, a compiled and a Liger provider."""
    out = tmp_path_factory.mktemp("hf-llama")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as monkeypatch:
        use_few_timed_calls(monkeypatch)
        code = _bench(out, "--providers", ",".join(PROVIDERS))
    return code, out, printed.getvalue()


def test_bench_model_hf_llama_writes_every_file_and_field(cpu_run):
    code, out, printed = cpu_run
    assert code == 0  # Liger failing (not installed, or no GPU) is reported, not fatal
    suffixes = ("json", "csv", "md") + (("png",) if importlib.util.find_spec("matplotlib") else ())
    for suffix in suffixes:
        assert (out / f"model-hf-llama.{suffix}").stat().st_size > 0
    if not CUDA:
        assert "no CUDA: the tiny Llama config (2 layers, hidden 64" in printed

    document = json.loads((out / "model-hf-llama.json").read_text())
    meta = document["meta"]
    assert {"card", "torch", "triton", "transformers", "liger_kernel", "blockfuse_implementation"} <= set(meta)
    assert meta["command"].startswith("blockfuse bench model hf-llama --layers 2 --shape 2x32 --dtype bf16 "
                                      "--providers hf-eager,blockfuse,blockfuse-compile,liger --modes fwd,fwdbwd")
    assert "--tiny" in meta["command"] and meta["command"].endswith(str(out)) and "--family" not in meta["command"]
    assert document["workload"]["tiny"] and document["workload"]["hidden"] == 64
    # Llama's workload as before --family: no field of another family's
    assert list(document["workload"]) == ["name", "model", "attention", "layers", "hidden", "heads", "kv_heads",
                                          "ffn", "vocab", "batch", "seq", "prompt", "new_tokens", "loss_vocab", "dtype",
                                          "tiny", "loss"]
    assert document["workload"]["name"] == "hf-llama" and document["workload"]["model"] == "LlamaModel"
    records = document["records"]
    assert [(r["provider"], r["mode"]) for r in records] == [(p, m) for p in PROVIDERS for m in ("fwd", "fwdbwd")]
    by_provider = {r["provider"]: r for r in records if r["mode"] == "fwdbwd"}
    for provider in ("hf-eager", "blockfuse", "blockfuse-compile"):
        record = by_provider[provider]
        assert "error" not in record, record
        assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"]
        assert record["speedup_vs_hf-eager"] > 0 and record["first_step_s"] >= 0
        assert ("peak_mib" in record) == CUDA
    assert by_provider["hf-eager"]["speedup_vs_hf-eager"] == 1.0
    assert by_provider["blockfuse-compile"]["graph_breaks"] >= 0 and "graph_breaks" not in by_provider["blockfuse"]

    # the same weights everywhere: errors against the fp32 step are small, blockfuse's near HF eager's
    eager = by_provider["hf-eager"]
    for provider in ("blockfuse", "blockfuse-compile"):
        for key in ("rel_err_out", "rel_err_grad"):
            value = by_provider[provider][key]
            assert math.isfinite(value) and 0 < value < 0.05, (provider, key, value)
            assert value <= 2 * eager[key], (provider, key, value, eager[key])

    liger = by_provider["liger"]
    if importlib.util.find_spec("liger_kernel") is None:
        assert "liger-kernel is not installed" in liger["error"]
    elif not CUDA:
        assert liger["error"]  # installed, but its kernels need a GPU
    texts = [t["text"] for t in document["targets"]]
    assert texts[0].startswith("training step: liger ms / blockfuse ms")
    assert texts[1].startswith("peak training-step memory: blockfuse / liger")

    rows = list(csv.DictReader((out / "model-hf-llama.csv").open()))
    assert len(rows) == 8 and {"graph_breaks", "peak_mib", "rel_err_grad", "error"} <= set(rows[0])
    assert float(rows[0]["ms"]) > 0 and all(row["error"] for row in rows if row["provider"] == "liger") != CUDA

    markdown = (out / "model-hf-llama.md").read_text()
    assert meta["card"] in markdown and meta["command"] in markdown and "transformers " in markdown
    assert "## Targets" in markdown and "| blockfuse-compile |" in markdown
    assert "## Targets" in printed


@pytest.mark.usefixtures("few_timed_calls")
@pytest.mark.parametrize("broken, code", [("hf-compile", 0), ("blockfuse", 1)])
def test_a_provider_that_raises_is_reported_not_fatal(tmp_path, monkeypatch, broken, code):
    original = hf_llama.make_provider

    def make_provider(name, base):
        if name == broken:
            raise RuntimeError("this provider is broken")
        return original(name, base)

    monkeypatch.setattr(hf_llama, "make_provider", make_provider)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", None)  # as if liger-kernel were not installed
    assert _bench(tmp_path, "--providers", f"liger,{broken},hf-eager", "--modes", "fwdbwd") == code
    records = json.loads((tmp_path / "model-hf-llama.json").read_text())["records"]
    assert [r["provider"] for r in records] == ["hf-eager", broken, "liger"]  # Liger's always last
    by_provider = {r["provider"]: r for r in records}
    assert "this provider is broken" in by_provider[broken]["error"]
    assert "liger-kernel is not installed" in by_provider["liger"]["error"]
    assert "error" not in by_provider["hf-eager"] and by_provider["hf-eager"]["ms"] > 0
    assert "this provider is broken" in (tmp_path / "model-hf-llama.md").read_text()


def test_targets_pair_each_blockfuse_provider_with_the_same_liger_provider():
    records = [
        {"provider": "blockfuse", "mode": "fwdbwd", "ms": 10.0, "peak_mib": 100.0},
        {"provider": "liger", "mode": "fwdbwd", "ms": 12.0, "peak_mib": 120.0},
        {"provider": "blockfuse-compile", "mode": "fwdbwd", "ms": 9.0, "peak_mib": 100.0},
        {"provider": "liger-compile", "mode": "fwdbwd", "error": "boom"},
    ]
    checks = hf_llama.targets(records)
    assert [c["status"] for c in checks] == ["met", "met", "n/a", "n/a"]
    assert checks[0]["value"] == pytest.approx(1.2) and checks[1]["value"] == pytest.approx(100 / 120)
    assert "liger-compile failed" in checks[2]["text"]
    records[1]["ms"] = 10.5  # 1.05x: short of 1.1x
    assert hf_llama.targets(records)[0]["status"] == "missed"
    only_eager = hf_llama.targets([{"provider": "hf-eager", "mode": "fwdbwd", "ms": 1.0}])
    assert len(only_eager) == 2 and all("blockfuse not run" in c["text"] for c in only_eager)


@pytest.mark.parametrize("argv, message", [
    (["block", "hf-llama"], "bench model hf-llama"),
    (["model", "reordered", "--tiny"], "--tiny is for hf-llama"),
    (["model", "hf-llama", "--shape", "2,32,64"], "batch x seq"),
    (["model", "hf-llama", "--fast"], "--fast is for the presets"),
    (["model", "hf-llama", "--providers", "hf-eager,eager"], "unknown --providers"),
    (["model", "hf-llama", "--modes", "infer"], "unknown --modes"),
])
def test_bad_arguments_are_clear_errors(tmp_path, capsys, argv, message):
    assert main(["bench", *argv, "--out", str(tmp_path)]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_help_names_hf_llama(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "model", "--help"])
    assert "hf-llama" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "hf-llama" in capsys.readouterr().out
