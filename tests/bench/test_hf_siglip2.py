"""End to end: ``blockfuse bench model hf-siglip2`` through the CLI on the tiny SigLIP-2 vision model, and
the pieces it uses."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import re
import math

import pytest
import torch

pytest.importorskip("transformers")

from blockfuse.bench import hf_siglip2  # noqa: E402
from blockfuse.cli import main  # noqa: E402
from tests.helpers import use_few_timed_calls  # noqa: E402

CUDA = torch.cuda.is_available()
PROVIDERS = ("hf-eager", "blockfuse", "blockfuse-compile")
MODES = ("infer", "fwd", "fwdbwd")


def _bench(out, *args):
    return main(["bench", "model", "hf-siglip2", "--quick", *args, *(["--tiny"] if CUDA else []), "--out", str(out)])


@pytest.fixture(scope="module")
def siglip_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf-siglip2")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as monkeypatch:
        use_few_timed_calls(monkeypatch)
        code = _bench(out, "--providers", ",".join(PROVIDERS))
    return code, out, printed.getvalue()


def test_bench_model_hf_siglip2_writes_every_file_and_field(siglip_run):
    code, out, printed = siglip_run
    assert code == 0
    suffixes = ("json", "csv", "md") + (("png",) if importlib.util.find_spec("matplotlib") else ())
    for suffix in suffixes:
        assert (out / f"model-hf-siglip2.{suffix}").stat().st_size > 0
    if not CUDA:
        assert "no CUDA: the tiny SigLIP-2 config (2 layers, hidden 64" in printed

    document = json.loads((out / "model-hf-siglip2.json").read_text())
    meta, workload = document["meta"], document["workload"]
    assert {"card", "torch", "triton", "transformers", "blockfuse_implementation"} <= set(meta)
    assert meta["command"].startswith("blockfuse bench model hf-siglip2 --layers 2 --shape 3x16 --dtype bf16 "
                                      "--providers hf-eager,blockfuse,blockfuse-compile --modes infer,fwd,fwdbwd")
    assert "--tiny" in meta["command"] and meta["command"].endswith(str(out))
    assert workload["model"] == "Siglip2VisionModel" and workload["tiny"] and workload["image_patches"] == [4, 4]

    records = document["records"]
    assert [(r["provider"], r["mode"]) for r in records] == [(p, m) for p in PROVIDERS for m in MODES]
    index = {(r["provider"], r["mode"]): r for r in records}
    for record in records:
        assert "error" not in record, record
        assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"]
        assert record["speedup_vs_hf-eager"] > 0 and record["first_call_s"] >= 0
        assert (record["peak_mib"] is not None) == CUDA
        assert ("rel_err_grad" in record) == (record["mode"] == "fwdbwd")
        assert ("graph_breaks" in record) == record["provider"].endswith("-compile")

    # the same weights everywhere: errors against the fp32 step are small, blockfuse's near HF eager's
    for mode, key in (("infer", "rel_err_out"), ("fwdbwd", "rel_err_out"), ("fwdbwd", "rel_err_grad")):
        eager = index[("hf-eager", mode)][key]
        for provider in ("blockfuse", "blockfuse-compile"):
            value = index[(provider, mode)][key]
            assert math.isfinite(value) and 0 < value < 0.05, (provider, mode, key, value)
            assert value <= 2 * eager, (provider, mode, key, value, eager)
    for provider in PROVIDERS:
        step = index[(provider, "fwdbwd")]
        assert step["rel_err_grad_worst"] < 0.1 and not step["grad_worst_parameter"].endswith("k_proj.bias")

    texts = [t["text"] for t in document["targets"]]
    assert texts == [t for t in texts if "(>= 1.0)" in t or "not measured" in t] and len(texts) == 4
    assert texts[0].startswith("training step: hf-eager ms / blockfuse ms")
    assert texts[1].startswith("inference: hf-eager ms / blockfuse ms")
    assert texts[2] == "training step: hf-compile ms / blockfuse-compile ms: not measured (hf-compile not run)"

    rows = list(csv.DictReader((out / "model-hf-siglip2.csv").open()))
    assert len(rows) == 9 and {"speedup_vs_hf-compile", "peak_mib", "rel_err_grad", "first_call_s"} <= set(rows[0])
    markdown = (out / "model-hf-siglip2.md").read_text()
    assert meta["card"] in markdown and meta["command"] in markdown and "transformers " in markdown
    assert "## Targets" in markdown and "| blockfuse-compile | fwdbwd |" in markdown
    assert "## Targets" in printed


@pytest.mark.usefixtures("few_timed_calls")
def test_a_failing_blockfuse_is_reported_and_fails_the_run(tmp_path, monkeypatch):
    original = hf_siglip2.make_provider

    def make_provider(name, base):
        if name == "blockfuse":
            raise RuntimeError("this provider is broken")
        return original(name, base)

    monkeypatch.setattr(hf_siglip2, "make_provider", make_provider)
    assert _bench(tmp_path, "--providers", "blockfuse,hf-eager", "--modes", "infer") == 1
    records = json.loads((tmp_path / "model-hf-siglip2.json").read_text())["records"]
    assert [r["provider"] for r in records] == ["hf-eager", "blockfuse"]
    assert "this provider is broken" in records[1]["error"] and records[0]["ms"] > 0
    assert "this provider is broken" in (tmp_path / "model-hf-siglip2.md").read_text()


def test_targets_pair_each_blockfuse_provider_with_hf_run_the_same_way():
    records = [
        {"provider": "hf-eager", "mode": "fwdbwd", "ms": 12.0},
        {"provider": "hf-eager", "mode": "infer", "ms": 4.0},
        {"provider": "blockfuse", "mode": "fwdbwd", "ms": 10.0},
        {"provider": "blockfuse", "mode": "infer", "ms": 5.0},
        {"provider": "blockfuse-compile", "mode": "fwdbwd", "error": "boom"},
        {"provider": "blockfuse-compile", "mode": "infer", "error": "boom"},
    ]
    checks = hf_siglip2.targets(records)
    assert [c["status"] for c in checks] == ["met", "missed", "n/a", "n/a"]
    assert checks[0]["value"] == pytest.approx(1.2) and checks[1]["value"] == pytest.approx(0.8)
    assert "hf-compile not run" in checks[2]["text"]
    assert len(hf_siglip2.targets(records[:4])) == 2 and hf_siglip2.SPEEDUP_TARGET == 1.0


@pytest.mark.parametrize("argv, message", [
    (["block", "hf-siglip2"], "bench model hf-siglip2"),
    (["model", "hf-siglip2", "--shape", "4,15"], "no square"),
    (["model", "hf-siglip2", "--shape", "4"], "batch x patches"),
    (["model", "hf-siglip2", "--prompt", "8"], "--prompt is for hf-llama"),
    (["model", "hf-siglip2", "--modes", "bwd"], "unknown --modes"),
    (["model", "hf-siglip2", "--providers", "liger"], "unknown --providers"),
])
def test_bad_arguments_are_clear_errors(tmp_path, capsys, argv, message):
    assert main(["bench", *argv, "--out", str(tmp_path)]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_inputs_are_the_flattened_patches_siglip2_takes():
    model, inputs, loss = hf_siglip2.build_base(hf_siglip2.TINY, torch.float32, torch.device("cpu"))
    assert inputs["pixel_values"].shape == (3, 16, 48) and inputs["pixel_attention_mask"].all()
    assert inputs["spatial_shapes"].tolist() == [[4, 4]] * 3
    assert not model.config.vision_use_head and model.config.layer_norm_eps == 1e-6
    hidden = model(**inputs).last_hidden_state
    assert hidden.shape == (3, 16, 64)
    # the loss reaches the first layer (the mean square after a fresh LayerNorm would not)
    loss(hidden).backward()
    first = model.encoder.layers[0].mlp.fc1.weight.grad
    assert first.norm() > 1e-3 * model.post_layernorm.weight.grad.norm()
