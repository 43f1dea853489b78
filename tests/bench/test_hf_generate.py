"""End to end: ``blockfuse bench model hf-llama --modes prefill,decode`` (greedy generation) through the
CLI on the tiny Llama, and the pieces it uses."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import re

import pytest
import torch

pytest.importorskip("transformers")

from blockfuse.bench import hf_generate, hf_llama  # noqa: E402
from blockfuse.cli import main  # noqa: E402

CUDA = torch.cuda.is_available()
PROVIDERS = ("hf-eager", "blockfuse", "blockfuse-static-compile", "liger")


def _bench(out, *args):
    return main(["bench", "model", "hf-llama", "--quick", *args, *(["--tiny"] if CUDA else []), "--out", str(out)])


@pytest.fixture(scope="module")
def generation_run(tmp_path_factory):
    """(exit code, output folder, what it printed) of one generation run: eager, patched, patched with a
    static cache under compile, and Liger."""
    out = tmp_path_factory.mktemp("hf-llama-generation")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = _bench(out, "--modes", "prefill,decode", "--providers", ",".join(PROVIDERS))
    return code, out, printed.getvalue()


def test_generation_writes_every_file_and_field(generation_run):
    code, out, printed = generation_run
    assert code == 0  # Liger failing (not installed, or no GPU) is reported, not fatal
    suffixes = ("json", "csv", "md") + (("png",) if importlib.util.find_spec("matplotlib") else ())
    for suffix in suffixes:
        assert (out / f"model-hf-llama.{suffix}").stat().st_size > 0

    document = json.loads((out / "model-hf-llama.json").read_text())
    meta, workload = document["meta"], document["workload"]
    assert {"card", "torch", "triton", "transformers", "blockfuse_implementation"} <= set(meta)
    assert meta["command"].startswith(
        "blockfuse bench model hf-llama --layers 2 --shape 2x32 --dtype bf16 --providers "
        "hf-eager,blockfuse,blockfuse-static-compile,liger --modes prefill,decode --prompt 32 --new-tokens 8")
    assert workload["prompt"] == 32 and workload["new_tokens"] == 8
    assert workload["generation"]["model"] == "LlamaForCausalLM" and workload["generation"]["batch"] == 1
    assert 'CompileConfig(mode="default")' in workload["generation"]["static_compile"]

    records = document["records"]
    assert [(r["provider"], r["mode"]) for r in records] == [(p, m) for p in PROVIDERS for m in ("prefill", "decode")]
    index = {(r["provider"], r["mode"]): r for r in records}
    for provider in PROVIDERS[:3]:
        for mode in ("prefill", "decode"):
            record = index[(provider, mode)]
            assert "error" not in record, record
            assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"]
            assert record["first_call_s"] > 0 and record["speedup_vs_hf-eager"] > 0
            assert isinstance(record["tokens_match_hf"], bool)
            if not record["tokens_match_hf"]:
                assert 0 <= record["first_mismatch_at"] < 8
        # Each whole generate holds its own 7 decode steps, and quantiles keep a per-sample order; a
        # comparison with the separately timed prefill would be a race on a loaded CPU.
        decode = index[(provider, "decode")]
        assert decode["new_tokens"] == 8 and decode["generate_ms"] >= decode["ms"] * 7 * (1 - 1e-9)
    eager = index[("hf-eager", "decode")]
    assert eager["tokens_match_hf"] and eager["first_mismatch_at"] is None
    assert index[("blockfuse-static-compile", "decode")]["graph_breaks"] >= 0
    assert "graph_breaks" not in index[("blockfuse", "decode")]
    if importlib.util.find_spec("liger_kernel") is None:
        assert "liger-kernel is not installed" in index[("liger", "decode")]["error"]

    texts = [t["text"] for t in document["targets"]]
    assert texts[0].startswith("ms per new token: blockfuse / hf-eager") and "(<= 0.9)" in texts[0]
    assert texts[1].startswith("prefill ms: blockfuse / hf-eager") and "(<= 0.9)" in texts[1]
    assert texts[2].startswith("ms per new token, static cache + compile: blockfuse-static-compile / "
                               "hf-static-compile: not measured (hf-static-compile not run)")

    rows = list(csv.DictReader((out / "model-hf-llama.csv").open()))
    assert len(rows) == 8 and {"tokens_match_hf", "first_mismatch_at", "generate_ms", "first_call_s"} <= set(rows[0])
    markdown = (out / "model-hf-llama.md").read_text()
    assert "## Generation" in markdown and "## Training" not in markdown and meta["command"] in markdown
    assert "| blockfuse-static-compile | decode |" in markdown
    assert "## Targets" in printed and "ms per new token" in printed


def test_training_and_generation_in_one_run(tmp_path):
    assert _bench(tmp_path, "--modes", "fwdbwd,decode", "--providers", "hf-eager", "--new-tokens", "3") == 0
    document = json.loads((tmp_path / "model-hf-llama.json").read_text())
    assert [(r["provider"], r["mode"]) for r in document["records"]] == [("hf-eager", "fwdbwd"), ("hf-eager", "decode")]
    step, decode = document["records"]
    assert "rel_err_grad" in step and decode["new_tokens"] == 3 and decode["tokens_match_hf"]
    texts = [t["text"] for t in document["targets"]]
    assert texts[0].startswith("training step: liger ms / blockfuse ms") and "ms per new token" in texts[2]
    markdown = (tmp_path / "model-hf-llama.md").read_text()
    assert "## Training" in markdown and "## Generation" in markdown


def test_default_providers_follow_the_modes():
    assert hf_llama.providers_for(("fwd", "fwdbwd")) == ("hf-eager", "hf-compile", "blockfuse", "blockfuse-compile",
                                                         "liger", "liger-compile")
    assert hf_llama.providers_for(("decode",)) == ("hf-eager", "hf-static-compile", "blockfuse",
                                                   "blockfuse-static-compile", "liger", "liger-static-compile")
    assert hf_llama.in_run_order(("liger-static-compile", "hf-eager", "blockfuse"))[-1] == "liger-static-compile"


def test_compare_names_the_first_differing_new_token():
    reference = torch.tensor([[5, 6, 7, 8]])
    assert hf_generate.compare(reference.clone(), reference) == {"tokens_match_hf": True, "first_mismatch_at": None}
    assert hf_generate.compare(torch.tensor([[5, 6, 9, 1]]), reference) == {"tokens_match_hf": False,
                                                                             "first_mismatch_at": 2}


class _Recorder:
    """A stand-in model whose generate records (its name, max_new_tokens), calls its logits processors once a new
    token (as transformers does), and returns the prompt plus zeros."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls
        self.config = type("Config", (), {"eos_token_id": 1})()

    def generate(self, input_ids, max_new_tokens, logits_processor=(), **_):
        self.calls.append((self.name, max_new_tokens))
        for _ in range(max_new_tokens):
            for processor in logits_processor:
                processor(input_ids, None)
        return torch.cat([input_ids, torch.zeros((1, max_new_tokens), dtype=input_ids.dtype)], 1)


def test_providers_measured_together_take_turns():
    calls: list = []
    models = {"a": _Recorder("a", calls), "b": _Recorder("b", calls)}
    ids = torch.ones((1, 4), dtype=torch.long)
    records = hf_generate.measure_together(models, ids, 3, torch.zeros((1, 3), dtype=torch.long),
                                           ("prefill", "decode"), torch.device("cpu"), quick=True)
    # each: first call, warm-ups (3 then 1 new tokens); then 3 repetitions (CPU, quick) of (1, 3), in turns
    setup = [("a", 3), ("a", 3), ("a", 1), ("b", 3), ("b", 3), ("b", 1)]
    assert calls == setup + [("a", 1), ("a", 3), ("b", 1), ("b", 3)] * 3
    assert [(r["provider"], r["mode"]) for r in records] == [("a", "prefill"), ("a", "decode"), ("b", "prefill"),
                                                             ("b", "decode")]
    assert all(r["tokens_match_hf"] for r in records) and all(r["ms"] == r["ms"] for r in records)  # not NaN
    assert all(r["ms"] >= 0 for r in records)  # decode: the steps between the first token's stamp and the last's


def test_generation_targets():
    records = [
        {"provider": "hf-eager", "mode": "decode", "ms": 10.0},
        {"provider": "hf-eager", "mode": "prefill", "ms": 20.0},
        {"provider": "blockfuse", "mode": "decode", "ms": 8.0},
        {"provider": "blockfuse", "mode": "prefill", "ms": 19.0},
        {"provider": "hf-static-compile", "mode": "decode", "ms": 4.0},
        {"provider": "blockfuse-static-compile", "mode": "decode", "error": "boom"},
    ]
    checks = hf_generate.targets(records)
    assert [c["status"] for c in checks] == ["met", "missed", "n/a"]
    assert checks[0]["value"] == pytest.approx(0.8) and checks[1]["value"] == pytest.approx(0.95)
    assert "blockfuse-static-compile failed" in checks[2]["text"]
    assert len(hf_generate.targets(records[:4])) == 2  # no static provider ran: no static target
    assert (hf_generate.DECODE_TARGET, hf_generate.PREFILL_TARGET, hf_generate.STATIC_DECODE_TARGET) == (0.9, 0.9, 1.0)


@pytest.mark.parametrize("argv, message", [
    (["--modes", "decode", "--providers", "hf-compile"], "run none of --modes"),
    (["--modes", "fwd", "--providers", "hf-static-compile"], "run none of --modes"),
    (["--modes", "decode", "--new-tokens", "1"], "bad --new-tokens"),
    (["--modes", "fwd", "--prompt", "8"], "bad --prompt"),
    (["--modes", "decode,sample"], "unknown --modes"),
])
def test_bad_generation_arguments_are_clear_errors(tmp_path, capsys, argv, message):
    assert main(["bench", "model", "hf-llama", *argv, "--out", str(tmp_path)]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_presets_take_no_generation_flags(tmp_path, capsys):
    assert main(["bench", "model", "reordered", "--new-tokens", "4", "--out", str(tmp_path)]) == 2
    assert "--new-tokens is for hf-llama" in capsys.readouterr().err
