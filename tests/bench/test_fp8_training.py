"""``benchmarks/fp8_training.py``: the small LM trained in bf16 and FP8 (issue 18), run for two steps at a
tiny size on CPU, its data generator, and the FP8 weight casts refreshed by the run's copy back."""

from __future__ import annotations

import json
import math

import pytest
import torch

import blockfuse.fp8
from tests.helpers import load_benchmark


@pytest.fixture(scope="module")
def script():
    return load_benchmark("fp8_training")


@pytest.mark.slow
def test_two_steps_write_the_record_table_and_plot(script, tmp_path):
    steps = 2
    record = script.main(["--device", "cpu", "--size", "tiny", "--steps", str(steps), "--batch", "2", "--seq", "16",
                          "--runs", "bf16", "fp8-rowwise", "--quiet", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "fp8_training.json").read_text())
    assert written["runs"].keys() == {"bf16", "fp8-rowwise"}
    layers = script.SIZES["tiny"]["layers"]
    for name, run in written["runs"].items():
        assert len(run["losses"]) == steps and all(math.isfinite(v) for v in run["losses"])
        assert [step for step, _ in run["validation"]] == [0, steps]
        assert run["final_train_loss"] == pytest.approx(sum(run["losses"]) / steps)
        assert run["ms_per_step"] > 0 and run["timed_steps"] == 1
    # One initialization and the same batches: the first step's loss agrees to FP8's error, near log(vocab)
    # (the initial logits are small).
    first = [run["losses"][0] for run in written["runs"].values()]
    assert first[1] == pytest.approx(first[0], rel=0.01)
    assert first[0] == pytest.approx(math.log(script.SIZES["tiny"]["vocab"]), rel=0.1)
    # Every projection of every block ran as a Float8Linear (the MLP's too), the head did not.
    fp8 = written["runs"]["fp8-rowwise"]
    expected = {f"stack.blocks.{i}.{name}" for i in range(layers)
                for name in ("attn.qkv_proj", "attn.o_proj", "ffn.gate_up_proj", "ffn.down_proj")}
    assert set(fp8["fp8_layers"]) == expected and fp8["recipe"] == "rowwise"
    assert 0.5 < fp8["fp8_gemm_share"] < 1
    assert written["runs"]["bf16"]["fp8_layers"] == [] and written["runs"]["bf16"]["fp8_gemm_share"] == 0
    comparison = written["comparison"]["fp8-rowwise"]
    assert comparison["train_vs_bf16"] == pytest.approx(fp8["final_train_loss"] / record["runs"]["bf16"]
                                                        ["final_train_loss"] - 1)
    assert comparison["meets_target"] == (abs(comparison["train_vs_bf16"]) <= 0.01)
    table = (tmp_path / "fp8_training.md").read_text()
    assert "| fp8-rowwise | " in table and "within 1% of bf16" in table and written["environment"]["torch"] in table
    pytest.importorskip("matplotlib")
    assert (tmp_path / "fp8_training.png").stat().st_size > 10_000


def test_the_data_is_seeded_and_copies_its_past(script):
    tokens, floor = script.markov_sequences(64, 129, 256, 8, seed=3)
    again, floor_again = script.markov_sequences(64, 129, 256, 8, seed=3)
    other, _ = script.markov_sequences(64, 129, 256, 8, seed=4)
    assert tokens.shape == (64, 129) and tokens.dtype == torch.int64
    assert torch.equal(tokens, again) and floor == floor_again and not torch.equal(tokens, other)
    assert 0 <= int(tokens.min()) and int(tokens.max()) < 256
    # Transitions come from 8 successors a token (copies aside): far fewer distinct pairs than 256 x 256.
    pairs = torch.unique(tokens[:, :-1] * 256 + tokens[:, 1:]).numel()
    assert pairs < 0.25 * 256 * 256
    # The entropy floor lies below a uniform choice among the successors, and above nothing.
    assert 0.5 < floor < math.log(8)


def test_the_copy_back_refreshes_the_fp8_weight_casts(script):
    """The run updates the bf16 weights in place (its fp32 masters copied back) and calls no
    clear_weight_cache: the next forward must use the new weights, not the cached FP8 casts."""
    settings = dict(script.SIZES["tiny"], seq=16)
    torch.manual_seed(0)
    model = script.LanguageModel(script.model_config(settings), 1, settings["vocab"]).to(torch.bfloat16)
    script.to_fp8(model, "tensorwise")
    tokens, _ = script.markov_sequences(2, 17, settings["vocab"], settings["successors"], seed=0)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    with torch.no_grad():
        model(inputs, targets)  # the weight casts are cached now
        parameters = list(model.parameters())
        masters = [2 * p.float() for p in parameters]
        torch._foreach_copy_(parameters, masters)  # as the run copies its masters back
        cached = model(inputs, targets)
        for module in model.modules():
            if isinstance(module, blockfuse.fp8.Float8Linear):
                blockfuse.fp8.clear_weight_cache(module.weight)
        fresh = model(inputs, targets)
    assert torch.equal(cached, fresh)


def test_learning_rate_warms_up_then_decays_to_a_tenth(script):
    rates = [script.learning_rate(step, 100, 1.0, 10) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(rates[9:], rates[10:]))
    assert rates[-1] == pytest.approx(0.1)
