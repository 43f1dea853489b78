"""``blockfuse bench model hf-llama --family``: the other causal-LM families through the CLI on their tiny
models (one layer), their configs and classes, Liger's function for each asked for and undone, and the
errors of a bad ``--family``."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import math
import re
import sys

import pytest
import torch

pytest.importorskip("transformers")

from blockfuse.bench import hf_families, hf_llama  # noqa: E402
from blockfuse.cli import main  # noqa: E402
from tests.helpers import stand_in_liger  # noqa: E402

CUDA = torch.cuda.is_available()
MODELS = {"phi3": "Phi3Model", "gemma3": "Gemma3TextModel"}  # (Qwen3: built in test_every_family_builds_at_llama_sizes)


def _bench(out, family, *args):
    """(exit code, the JSON document, what it printed) of a quick run of ``family``'s one-layer tiny model on input
    ids (1, 16)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["bench", "model", "hf-llama", "--family", family, "--quick", "--layers", "1", "--shape", "1x16",
                     *args, *(["--tiny"] if CUDA else []), "--out", str(out)])
    return code, json.loads((out / f"model-hf-{family}.json").read_text()), printed.getvalue()


@pytest.mark.parametrize("family", MODELS)
def test_family_step_blockfuse_against_hf_eager(tmp_path, monkeypatch, family):
    built = []
    original = hf_llama.build_base

    def build_base(*args):
        model, ids = original(*args)
        built.append(type(model).__name__)
        return model, ids

    monkeypatch.setattr(hf_llama, "build_base", build_base)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", None)  # as if liger-kernel were not installed
    code, document, printed = _bench(tmp_path, family, "--modes", "fwdbwd", "--providers", "liger,blockfuse,hf-eager")
    assert code == 0
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix != ".png") == [
        f"model-hf-{family}.{suffix}" for suffix in ("csv", "json", "md")]
    workload, meta = document["workload"], document["meta"]
    assert built == [MODELS[family]] == [workload["model"]]  # the class built is the one named
    assert workload["name"] == f"hf-{family}" and workload["family"] == family and workload["head_dim"] == 16
    assert workload["liger"].startswith(hf_families.FAMILIES[family].liger + "(rope=True, rms_norm=True, ")
    assert meta["command"].startswith(f"blockfuse bench model hf-llama --family {family} --layers 1 --shape 1x16 ")
    if not CUDA:
        assert f"no CUDA: the tiny {hf_families.FAMILIES[family].title} config (1 layers" in printed

    records = {r["provider"]: r for r in document["records"]}
    assert list(records) == ["hf-eager", "blockfuse", "liger"]  # Liger's last
    assert "liger-kernel is not installed" in records["liger"]["error"]
    eager, ours = records["hf-eager"], records["blockfuse"]
    for record in (eager, ours):
        assert "error" not in record, record
        assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"]
    assert ours["speedup_vs_hf-eager"] > 0
    for key in ("rel_err_out", "rel_err_grad"):  # the same weights: both near the fp32 step, blockfuse near HF's
        assert math.isfinite(ours[key]) and 0 < ours[key] < 0.1, (key, ours[key])
        assert ours[key] <= 2 * eager[key], (key, ours[key], eager[key])
    markdown = (tmp_path / f"model-hf-{family}.md").read_text()
    assert markdown.startswith(f"# blockfuse model benchmark: hf-{family} (Hugging Face "
                               f"{hf_families.FAMILIES[family].title}: training step)")
    assert f"- training: {MODELS[family]} (vocab 128" in markdown and "| blockfuse |" in markdown


def test_family_generation_matches_hf_tokens(tmp_path):
    """Gemma-2 (eager attention, its own cache layout): generation through the same path as Llama's."""
    code, document, _ = _bench(tmp_path, "gemma2", "--modes", "prefill", "--new-tokens", "2",
                               "--providers", "hf-eager,blockfuse")
    assert code == 0
    assert document["workload"]["generation"]["model"] == "Gemma2ForCausalLM"
    assert document["workload"]["attention"] == "eager"
    for record in document["records"]:
        assert "error" not in record and record["tokens_match_hf"], record


@pytest.mark.parametrize("family", hf_families.FAMILIES.values(), ids=list(hf_families.FAMILIES))
def test_every_family_builds_at_llama_sizes(family):
    shape = dataclasses.replace(hf_llama.TINY, layers=1)
    config = hf_llama.model_config(shape, family)
    assert config.head_dim == shape.hidden // shape.heads and config.pad_token_id is None
    assert config._attn_implementation == ("eager" if family.name == "gemma2" else "sdpa")
    assert getattr(config, "query_pre_attn_scalar", config.head_dim) == config.head_dim
    model, ids = hf_llama.build_base(shape, torch.float32, torch.device("cpu"), family)
    assert type(model).__name__ == family.model and tuple(ids.shape) == (shape.batch, shape.seq)
    attention, head_dim = model.layers[0].self_attn, config.head_dim
    if family.name == "phi3":  # (q|k|v in one projection)
        assert attention.qkv_proj.out_features == (shape.heads + 2 * shape.kv_heads) * head_dim
    else:
        assert attention.q_proj.out_features == shape.heads * head_dim
        assert attention.k_proj.out_features == shape.kv_heads * head_dim
    assert hf_families.family_of_model(model) is family


def test_liger_gets_the_family_function_and_its_module_is_put_back(tmp_path, monkeypatch):
    """A stand-in for Liger-Kernel's Gemma-3 function that, as Liger does without a model, assigns a global of
    modeling_gemma3 and Gemma3ForCausalLM.forward: the liger provider calls it with the GeGLU keyword, and
    both come back after it."""
    modeling = importlib.import_module("transformers.models.gemma3.modeling_gemma3")
    forward, norm = modeling.Gemma3ForCausalLM.forward, modeling.Gemma3RMSNorm
    calls = stand_in_liger(monkeypatch, modeling, "Gemma3ForCausalLM", "Gemma3RMSNorm",
                           "apply_liger_kernel_to_gemma3_text")
    code, document, _ = _bench(tmp_path, "gemma3", "--modes", "fwd", "--providers", "liger,hf-eager")
    assert code == 0 and not any(r.get("error") for r in document["records"])
    assert len(calls) == 1 and isinstance(calls[0].pop("model"), modeling.Gemma3TextModel)
    assert calls[0] == {"rope": True, "rms_norm": True, "geglu": True, "cross_entropy": False,
                        "fused_linear_cross_entropy": False}
    assert modeling.Gemma3ForCausalLM.forward is forward and modeling.Gemma3RMSNorm is norm


def test_a_family_liger_does_not_cover_gets_no_liger_providers(tmp_path, capsys, monkeypatch):
    uncovered = dataclasses.replace(hf_families.FAMILIES["phi3"], liger=None, no_liger_reason="no such function")
    monkeypatch.setitem(hf_families.FAMILIES, "phi3", uncovered)
    assert not any(p.startswith("liger") for p in hf_llama.providers_for(("fwdbwd", "loss"), uncovered))
    assert "liger-compile" in hf_llama.providers_for(("fwdbwd",))
    settings = hf_llama.Settings(shape=hf_llama.TINY, dtype="bf16", providers=("hf-eager",), modes=("fwdbwd",),
                                 device=torch.device("cpu"), family="phi3")
    assert hf_llama.workload_of(settings)["liger"] == "none: no such function"
    assert main(["bench", "model", "hf-llama", "--family", "phi3", "--providers", "hf-eager,liger",
                 "--out", str(tmp_path)]) == 2
    assert re.search("--providers liger: Liger-Kernel does not cover Phi-3 \\(no such function\\)",
                     capsys.readouterr().err)


@pytest.mark.parametrize("argv, message", [
    (["hf-llama", "--family", "llama3"],
     "unknown --family 'llama3'; choose from llama,mistral,qwen2,qwen3,phi3,gemma,gemma2,gemma3"),
    (["hf-llama", "--family", ""], "unknown --family ''; choose from llama,"),
    (["hf-siglip2", "--family", "qwen3"], "--family is for hf-llama"),
    (["reordered", "--family", "qwen3"], "--family is for hf-llama"),
])
def test_a_bad_family_is_a_clear_error(tmp_path, capsys, argv, message):
    assert main(["bench", "model", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
