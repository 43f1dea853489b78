"""Tests of ``blockfuse.patch(model, loss=True)`` on tiny random Hugging Face causal LMs (fp32, CPU).

The patched model's loss and every parameter gradient match an unpatched copy's, computed by
transformers' own ``ForCausalLMLoss`` (shifted labels with ignored tokens, ``num_items_in_batch``,
``shift_labels``, ``ignore_index``, ``logits_to_keep``, an LM head bias, Gemma-2's softcap); with
labels the output's logits are None, without labels the forward is Hugging Face's; ``unpatch``
restores Hugging Face's forward; the patched model compiles with fullgraph=True; the report lists
the loss; a model that is not a causal LM, or a causal LM whose forward does more than the loss, is
refused with a clear error.
"""

from __future__ import annotations

import copy
import inspect
import types

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

import blockfuse  # noqa: E402
from blockfuse.patching import loss as loss_module  # noqa: E402
from blockfuse.patching.apply import STATE  # noqa: E402
from blockfuse.patching.forwards import CannotPatch  # noqa: E402
from tests.helpers import make_generator, relative_error  # noqa: E402

VOCAB = 203  # odd
TOLERANCE = 1e-5  # fp32: relative error of the loss and of each gradient against transformers' fp32 loss
_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
               eos_token_id=1, pad_token_id=2, attn_implementation="sdpa")


# ----------------------------------------------------------------------------------------
# Tiny causal LMs and a batch
# ----------------------------------------------------------------------------------------


def llama(**config):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_CONFIG, **config)).eval()


def llama_with_bias():
    """A Llama whose LM head has a (random) bias and is tied to the input embeddings."""
    model = llama(tie_word_embeddings=True)
    head = nn.Linear(64, VOCAB, bias=True)
    head.weight = model.model.embed_tokens.weight
    with torch.no_grad():
        head.bias.copy_(torch.randn(VOCAB, generator=make_generator(3)))
    model.lm_head = head
    return model


def olmo2():
    if not hasattr(transformers, "Olmo2ForCausalLM"):
        pytest.skip(f"transformers {transformers.__version__} has no Olmo2ForCausalLM")
    torch.manual_seed(0)
    return transformers.Olmo2ForCausalLM(transformers.Olmo2Config(**_CONFIG)).eval()


def _causal_lm(config_name: str, model_name: str, **config):
    def make():
        if not hasattr(transformers, model_name):
            pytest.skip(f"transformers {transformers.__version__} has no {model_name}")
        torch.manual_seed(0)
        return getattr(transformers, model_name)(getattr(transformers, config_name)(**{**_CONFIG, **config})).eval()

    return make


def gemma2(softcap=0.1):
    """Gemma-2 with a logit softcap that matters at this scale (its forward applies it), eager attention (its only
    one)."""
    return _causal_lm("Gemma2Config", "Gemma2ForCausalLM", attn_implementation="eager", head_dim=16,
                      final_logit_softcapping=softcap)()


MODELS = {"llama": llama, "llama-bias-tied": llama_with_bias, "olmo2": olmo2,
          "qwen3": _causal_lm("Qwen3Config", "Qwen3ForCausalLM", head_dim=16),
          "phi3": _causal_lm("Phi3Config", "Phi3ForCausalLM"),
          "gemma3": _causal_lm("Gemma3TextConfig", "Gemma3ForCausalLM", head_dim=16)}


def _batch(batch=2, seq=9):
    """(input ids, labels) with some ignored (-100) labels."""
    ids = torch.randint(3, VOCAB, (batch, seq), generator=make_generator(1))
    labels = ids.clone()
    labels[0, :3] = -100  # a prompt without loss
    labels[-1, seq // 2] = -100
    return ids, labels


def _pair(make, **flags):
    """(patched model, unpatched copy with the same weights, the report)."""
    model = make()
    reference = copy.deepcopy(model)
    return model, reference, blockfuse.patch(model, **{"norms": False, "rope": False, "mlp": False, **flags})


def _assert_same_loss_and_grads(model, reference, **inputs):
    """One forward and backward of each; returns the patched model's output."""
    out, expected = model(**inputs), reference(**inputs)
    out.loss.backward()
    expected.loss.backward()
    assert out.loss.dtype == torch.float32
    assert relative_error(out.loss, expected.loss) <= TOLERANCE, (out.loss.item(), expected.loss.item())
    parameters = dict(reference.named_parameters())
    for name, parameter in getattr(model, "_orig_mod", model).named_parameters():  # compiled or not
        assert parameter.grad is not None, name
        error = relative_error(parameter.grad, parameters[name].grad)
        assert error <= TOLERANCE, f"{name}: relative error {error:.2e}"
    return out


# ----------------------------------------------------------------------------------------
# Numbers: the loss and every gradient are transformers' own
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_items", [None, 13], ids=["mean", "num_items_in_batch"])
@pytest.mark.parametrize("family", MODELS)
def test_loss_and_gradients_match_hugging_face(family, num_items, monkeypatch):
    calls, fused = [], loss_module.linear_cross_entropy

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return fused(*args, **kwargs)

    monkeypatch.setattr(loss_module, "linear_cross_entropy", counted)
    model, reference, _ = _pair(MODELS[family], loss=True)
    ids, labels = _batch()
    num_items_in_batch = None if num_items is None else torch.tensor(num_items)
    out = _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels,
                                      num_items_in_batch=num_items_in_batch)
    assert out.logits is None
    assert [kwargs["reduction"] for kwargs in calls] == ["mean" if num_items is None else "sum"]
    assert calls[0]["softcap"] is None


@pytest.mark.parametrize("family", MODELS)
def test_low_memory_loss_matches_hugging_face(family, monkeypatch):
    """loss="low-memory": the fused loss called with chunk_size="low-memory", transformers' numbers."""
    calls, fused = [], loss_module.linear_cross_entropy

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return fused(*args, **kwargs)

    monkeypatch.setattr(loss_module, "linear_cross_entropy", counted)
    model, reference, report = _pair(MODELS[family], loss="low-memory")
    assert "chunk_size='low-memory'" in report.replaced[0].new
    ids, labels = _batch()
    assert _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels).logits is None
    assert [kwargs["chunk_size"] for kwargs in calls] == ["low-memory"]


def test_loss_flag_refuses_other_values():
    with pytest.raises(ValueError, match="loss: expected True, False or 'low-memory', got 'low'"):
        blockfuse.patch(MODELS["llama"](), loss="low")


@pytest.mark.parametrize("family", ["llama", "olmo2", "qwen3", "phi3", "gemma3"])
def test_with_every_patch_at_once(family):
    model, reference, report = _pair(MODELS[family], norms=True, rope=True, mlp=True, loss=True)
    assert {entry.kind for entry in report.replaced} == {"norms", "rope", "mlp", "loss"}
    ids, labels = _batch()
    out = _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels)
    assert out.logits is None


def test_shift_labels_ignore_index_and_logits_to_keep():
    """The keywords that transformers' loss reads: shift_labels (already shifted), ignore_index
    (another one than -100), logits_to_keep with labels of the kept positions."""
    model, reference, _ = _pair(llama, loss=True)
    ids, labels = _batch()
    shift_labels = torch.cat([labels[:, 1:], torch.full((2, 1), -100)], dim=1)
    shift_labels[1, 0] = -100
    _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels, shift_labels=shift_labels)
    model.zero_grad(), reference.zero_grad()
    _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels.masked_fill(labels == -100, -1),
                                ignore_index=-1)
    model.zero_grad(), reference.zero_grad()
    out = _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels[:, -4:], logits_to_keep=4)
    assert out.logits is None
    # and not the same numbers whatever the labels: each keyword changes the loss
    plain = model(input_ids=ids, labels=labels).loss
    assert abs(plain - model(input_ids=ids, labels=labels, shift_labels=shift_labels).loss) > 1e-3
    assert abs(plain - model(input_ids=ids, labels=labels, num_items_in_batch=torch.tensor(5)).loss) > 1e-3


def test_positional_arguments_and_return_dict():
    model, reference, _ = _pair(llama, loss=True)
    ids, labels = _batch()
    out = model(ids, None, None, None, None, labels, return_dict=False)
    expected = reference(ids, labels=labels)
    assert isinstance(out, tuple) and len(out) == 2  # (loss, cache): to_tuple() drops the None logits
    assert relative_error(out[0], expected.loss) <= TOLERANCE
    with pytest.raises(TypeError, match="multiple values"):
        model(ids, input_ids=ids, labels=labels)
    # the Trainer picks the dataset columns from this signature
    assert inspect.signature(model.forward) == inspect.signature(reference.forward)
    assert "labels" in inspect.signature(model.forward).parameters


def test_without_labels_the_logits_are_hugging_face_s():
    model, reference, _ = _pair(olmo2, loss=True)
    ids, _ = _batch()
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)
        kept = model(input_ids=ids, logits_to_keep=1).logits
        assert kept.shape == (2, 1, VOCAB) and torch.equal(kept, reference(input_ids=ids, logits_to_keep=1).logits)


def test_compiles_with_fullgraph():
    """aot_eager with fullgraph=True: the patched forward adds no graph break; compiled once for two
    calls with labels; the same loss and gradients as eagerly."""
    from torch._dynamo.testing import CompileCounterWithBackend

    model, reference, _ = _pair(llama, loss=True)
    ids, labels = _batch()
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    num_items_in_batch = torch.tensor(13)
    out = _assert_same_loss_and_grads(compiled, reference, input_ids=ids, labels=labels,
                                      num_items_in_batch=num_items_in_batch)
    assert out.logits is None
    compiled(input_ids=ids, labels=labels, num_items_in_batch=num_items_in_batch)
    assert counter.frame_count == 1
    torch._dynamo.reset()


# ----------------------------------------------------------------------------------------
# Softcap: passed where the forward applies it (Gemma-2), not where the config merely has it
# ----------------------------------------------------------------------------------------


def test_softcap_of_a_forward_that_applies_it():
    """Gemma-2's forward caps its logits: the fused loss is told the cap, with every patch at once."""
    model, reference, report = _pair(gemma2, norms=True, rope=True, mlp=True, loss=True)
    assert "softcap=config.final_logit_softcapping" in next(e.new for e in report.replaced if e.kind == "loss")
    ids, labels = _batch()
    out = _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels)
    assert out.logits is None
    reference.config.final_logit_softcapping = None  # the cap matters at this scale
    assert relative_error(out.loss, reference(input_ids=ids, labels=labels).loss) > 100 * TOLERANCE


def test_softcap_in_the_config_of_a_forward_that_ignores_it():
    model, reference, report = _pair(lambda: llama(final_logit_softcapping=0.1), loss=True)
    assert "softcap" not in next(entry.new for entry in report.replaced if entry.kind == "loss")
    ids, labels = _batch()
    _assert_same_loss_and_grads(model, reference, input_ids=ids, labels=labels)


# ----------------------------------------------------------------------------------------
# Report, unpatch, patching twice, what is left alone, what is refused
# ----------------------------------------------------------------------------------------


def test_report_unpatch_and_patch_twice():
    model = llama()
    ids, labels = _batch()
    expected = model(input_ids=ids, labels=labels)
    default = blockfuse.patch(model)  # loss=False: neither patched nor reported
    assert "loss" not in {entry.kind for entry in [*default.replaced, *default.skipped]}
    assert "forward" not in vars(model)
    report = blockfuse.patch(model, loss=True)
    (entry,) = report.replaced
    assert (entry.kind, entry.path) == ("loss", "")
    assert entry.old == "LlamaForCausalLM: loss_function(lm_head(hidden), labels)"
    assert entry.new.startswith("blockfuse.linear_cross_entropy(") and "1 x LlamaForCausalLM" in str(report)
    again = blockfuse.patch(model, loss=True)
    assert [entry.reason for entry in again.skipped if entry.kind == "loss"] == [
        "already patched (by an earlier blockfuse.patch)"]
    assert model(input_ids=ids, labels=labels).logits is None
    assert blockfuse.unpatch(model) == 10  # 5 norms, 2 rope, 2 mlp, the loss
    assert "forward" not in vars(model) and STATE not in vars(model)
    out = model(input_ids=ids, labels=labels)
    assert out.logits is not None and torch.equal(out.logits, expected.logits) and torch.equal(out.loss, expected.loss)


def test_lm_head_with_a_hook_is_left_alone():
    model = llama()
    model.lm_head.register_forward_hook(lambda *args: None)
    report = blockfuse.patch(model, norms=False, rope=False, mlp=False, loss=True)
    assert not report.replaced
    (entry,) = [entry for entry in report.skipped if entry.kind == "loss"]
    assert "plain Linear" in entry.reason
    ids, labels = _batch()
    assert "forward" not in vars(model) and model(input_ids=ids, labels=labels).logits is not None


def test_not_a_causal_lm_raises():
    # (a causal LM of a family blockfuse.patch does not know)
    other = transformers.StableLmForCausalLM(transformers.StableLmConfig(**_CONFIG))
    siglip = transformers.SiglipVisionModel(transformers.SiglipVisionConfig(
        hidden_size=32, intermediate_size=72, num_hidden_layers=1, num_attention_heads=2, patch_size=4, image_size=16))
    for model in (llama().model, siglip, other, nn.Linear(4, 4)):
        name = type(model).__name__
        with pytest.raises(ValueError, match=f"^loss=True: .*expected a causal LM such as LlamaForCausalLM.*, "
                                             f"got {name}$"):
            blockfuse.patch(model, loss=True)
        # raised before anything changed: no other part was patched either
        assert STATE not in vars(model)
        assert not any("forward" in vars(m) or type(m).__module__.startswith("blockfuse") for m in model.modules())


@pytest.mark.parametrize("name, reads", [("CohereForCausalLM", "logit_scale"), ("GraniteForCausalLM", "logits_scaling"),
                                         ("MixtralForCausalLM", "router_logits")])
def test_forward_that_does_more_than_the_loss_is_refused(name, reads):
    """The pattern check, on forwards of other shapes (an auxiliary loss, scaled logits)."""
    if not hasattr(transformers, name):
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    with pytest.raises(CannotPatch, match=reads):
        loss_module.loss_forward(getattr(transformers, name))
    for same_shape in ("MistralForCausalLM", "Qwen2ForCausalLM"):
        function, _ = loss_module.loss_forward(getattr(transformers, same_shape))
        assert callable(function)
