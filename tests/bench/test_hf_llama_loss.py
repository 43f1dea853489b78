"""``blockfuse bench model hf-llama --modes loss``: the Llama training step with the LM head and loss, through
the CLI on the tiny causal LM (vocab 251), its targets, and Liger's fused linear cross-entropy asked for and
undone."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
import torch

pytest.importorskip("transformers")

from blockfuse.bench import hf_llama  # noqa: E402
from blockfuse.cli import main  # noqa: E402
from tests.helpers import stand_in_liger  # noqa: E402

CUDA = torch.cuda.is_available()


def _bench(out, *args):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["bench", "model", "hf-llama", "--quick", *args, *(["--tiny"] if CUDA else []), "--out", str(out)])
    return code, json.loads((out / "model-hf-llama.json").read_text()), printed.getvalue()


@pytest.mark.usefixtures("few_timed_calls")
def test_loss_mode_alone_records_every_field_and_small_errors(tmp_path):
    code, document, printed = _bench(tmp_path, "--modes", "loss", "--providers", "hf-eager,blockfuse")
    assert code == 0
    workload, records = document["workload"], document["records"]
    assert workload["loss_vocab"] == 251 and workload["lm_loss"]["model"] == "LlamaForCausalLM"
    assert "--modes loss" in document["meta"]["command"]
    assert [(r["provider"], r["mode"]) for r in records] == [("hf-eager", "loss"), ("blockfuse", "loss")]
    eager, ours = records
    for record in records:
        assert "error" not in record, record
        assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"] and record["first_step_s"] >= 0
        assert ("peak_mib" in record) == CUDA and "graph_breaks" not in record
        assert record["rel_err_loss"] < 1e-3 and 0 < record["rel_err_grad"] < 0.05, record
        assert record["grad_worst_parameter"] and record["rel_err_grad_worst"] >= record["rel_err_grad"] / 10
    assert eager["logits_materialized"] and not ours["logits_materialized"]  # blockfuse's loss makes no logits
    # NOTE: 3x, not the ops' 2x: the fused loss, norms, rope and MLP add up over a whole (tiny, bf16) model
    assert ours["rel_err_grad"] <= 3 * eager["rel_err_grad"]
    assert ours["speedup_vs_hf-eager"] > 0 and eager["speedup_vs_hf-eager"] == 1.0

    texts = [(t["status"], t["text"]) for t in document["targets"]]
    assert texts == [("n/a", "training step with the LM head and loss: liger ms / blockfuse ms: not measured "
                             "(liger not run)"),
                     ("n/a", "peak memory, training step with the LM head and loss: blockfuse / liger: not measured "
                             "(liger not run)")]
    markdown = (tmp_path / "model-hf-llama.md").read_text()
    assert "## Training step with the LM head and loss" in markdown and "vocab 251" in markdown
    assert "| blockfuse | loss |" in markdown and "## Training\n" not in markdown
    assert "## Targets" in printed


@pytest.mark.usefixtures("few_timed_calls")
def test_every_training_mode_together_builds_both_models(tmp_path, monkeypatch):
    built = []
    for builder in ("build_base", "build_causal_lm"):
        original = getattr(hf_llama, builder)
        monkeypatch.setattr(hf_llama, builder,
                            lambda *args, _original=original, _name=builder: built.append(_name) or _original(*args))
    code, document, _ = _bench(tmp_path, "--modes", "fwd,fwdbwd,loss", "--providers", "hf-eager")
    assert code == 0 and built == ["build_base", "build_causal_lm"]
    records = document["records"]
    assert [r["mode"] for r in records] == ["fwd", "fwdbwd", "loss"] and not any(r.get("error") for r in records)
    assert "rel_err_out" in records[1] and "rel_err_loss" not in records[1]
    assert math.isfinite(records[2]["rel_err_loss"]) and "rel_err_out" not in records[2]
    texts = [t["text"] for t in document["targets"]]
    assert texts[0].startswith("training step: liger ms / blockfuse ms") and len(texts) == 4
    assert texts[2].startswith("training step with the LM head and loss: liger ms / blockfuse ms")
    markdown = (tmp_path / "model-hf-llama.md").read_text()
    assert "## Training\n" in markdown and "## Training step with the LM head and loss" in markdown


@pytest.mark.usefixtures("few_timed_calls")
def test_liger_gets_its_fused_linear_cross_entropy_and_modeling_llama_is_put_back(tmp_path, monkeypatch):
    """A stand-in for Liger-Kernel that, as Liger does without a model, assigns LlamaForCausalLM.forward (and a
    module global): the liger provider asks for the fused linear cross-entropy, and both come back after it."""
    from transformers.models.llama import modeling_llama

    forward, norm = modeling_llama.LlamaForCausalLM.forward, modeling_llama.LlamaRMSNorm
    calls = stand_in_liger(monkeypatch, modeling_llama, "LlamaForCausalLM", "LlamaRMSNorm",
                           "apply_liger_kernel_to_llama")
    code, document, _ = _bench(tmp_path, "--modes", "loss", "--providers", "liger,hf-eager")
    assert code == 0 and not any(r.get("error") for r in document["records"])
    assert [c["fused_linear_cross_entropy"] for c in calls] == [True] and calls[0]["cross_entropy"] is False
    assert modeling_llama.LlamaForCausalLM.forward is forward and modeling_llama.LlamaRMSNorm is norm


def _loss_records(blockfuse_ms=10.0, liger_ms=12.0, blockfuse_peak=80.0, liger_peak=100.0):
    return [
        {"provider": "hf-eager", "mode": "loss", "ms": 20.0, "peak_mib": 400.0},
        {"provider": "blockfuse", "mode": "loss", "ms": blockfuse_ms, "peak_mib": blockfuse_peak},
        {"provider": "liger", "mode": "loss", "ms": liger_ms, "peak_mib": liger_peak},
    ]


def test_loss_targets_met_missed_and_not_measured():
    checks = hf_llama.targets(_loss_records())
    assert [c["status"] for c in checks] == ["met", "met"]  # (no compiled pair: neither ran)
    assert checks[0]["value"] == pytest.approx(1.2) and checks[0]["bound"] == hf_llama.LOSS_STEP_TARGET == 1.1
    assert checks[1]["value"] == pytest.approx(0.8) and checks[1]["bound"] == hf_llama.LOSS_MEMORY_TARGET == 0.85
    assert checks[0]["text"].startswith("training step with the LM head and loss: liger ms / blockfuse ms: 1.20")

    missed = hf_llama.targets(_loss_records(liger_ms=10.5, blockfuse_peak=90.0))  # 1.05x, 0.9x
    assert [c["status"] for c in missed] == ["missed", "missed"]

    no_peak = [{k: v for k, v in r.items() if k != "peak_mib"} for r in _loss_records()]
    assert "measured on CUDA only" in hf_llama.targets(no_peak)[1]["text"]

    compiled = _loss_records() + [{"provider": "blockfuse-compile", "mode": "loss", "ms": 8.0, "peak_mib": 70.0},
                                  {"provider": "liger-compile", "mode": "loss", "error": "boom"}]
    checks = hf_llama.targets(compiled)
    assert [c["status"] for c in checks] == ["met", "met", "n/a", "n/a"]
    assert all("liger-compile failed" in c["text"] for c in checks[2:])
    compiled[4] = {"provider": "liger-compile", "mode": "loss", "ms": 8.5, "peak_mib": 100.0}
    assert [c["status"] for c in hf_llama.targets(compiled)] == ["met", "met", "missed", "met"]  # 8.5 / 8 < 1.1
    assert len(hf_llama.targets(compiled[:4])) == 2  # the compiled pair only when both ran

    # the training-step targets (mode fwdbwd) do not read the loss records, nor these theirs
    mixed = _loss_records() + [{"provider": "blockfuse", "mode": "fwdbwd", "ms": 10.0, "peak_mib": 150.0},
                               {"provider": "liger", "mode": "fwdbwd", "ms": 10.0, "peak_mib": 100.0}]
    assert [c["status"] for c in hf_llama.targets(mixed)] == ["missed", "missed", "met", "met"]


def test_compiled_providers_run_the_loss_mode_and_static_ones_do_not():
    assert "loss" in hf_llama.modes_of("hf-compile") and "loss" in hf_llama.modes_of("liger")
    assert "loss" not in hf_llama.modes_of("blockfuse" + hf_llama.STATIC_COMPILE)
    assert hf_llama.providers_for(("loss",)) == ("hf-eager", "hf-compile", "blockfuse", "blockfuse-compile", "liger",
                                                  "liger-compile")
    assert hf_llama.DEFAULT_MODES == ("fwd", "fwdbwd")
