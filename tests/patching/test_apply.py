"""Tests of ``blockfuse.patch`` / ``blockfuse.unpatch`` on tiny random Hugging Face models.

For each family (Llama, OLMo-2, SigLIP, SigLIP-2; Mistral, Qwen2, Qwen3, Phi-3, Gemma 1-3 as
one-layer causal LMs, whose code differs from Llama's in the norm, the QK-norms or the MLP's
packing): the patched model's outputs and every parameter gradient match the unpatched model's
within 2x of the unpatched model's own error against a float64 run with the same weights; patching
adds no graph break under torch.compile (and compiles with fullgraph=True, without recompiling,
where the unpatched model does; COMPILED_FAMILIES); the weights, the state dict and
``save_pretrained`` are unchanged; ``unpatch`` restores the original modules exactly; a second
model of the same class is left alone.
"""

from __future__ import annotations

import copy
import functools
import types

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

import blockfuse  # noqa: E402
from blockfuse.patching.apply import STATE  # noqa: E402
from blockfuse.patching.forwards import CannotPatch, hf_rotary  # noqa: E402
from tests.helpers import (  # noqa: E402
    assert_all_close_to_reference, grads, make_generator, random_tensor, relative_error,
)

VOCAB = 96
DTYPES = [torch.float32, torch.bfloat16]


# ----------------------------------------------------------------------------------------
# Tiny models: (model, inputs, outputs) where outputs(model(**inputs)) lists the tensors checked
# ----------------------------------------------------------------------------------------


def _perturb(model: nn.Module) -> nn.Module:
    """Random 1-D parameters (norm weights and biases), so that every one of them matters."""
    generator = make_generator(7)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(0.2 * torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
    return model.eval()


def _require(name: str):
    """transformers.<name>, or skip: OLMo-2 came in transformers 4.47, SigLIP-2 in 4.49."""
    if not hasattr(transformers, name):
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    return getattr(transformers, name)


def _ids(batch, seq, device, seed=1):
    return torch.randint(0, VOCAB, (batch, seq), generator=make_generator(seed)).to(device)


def llama(device="cpu", hidden_act="silu", layers=2):
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        num_hidden_layers=layers, vocab_size=VOCAB, max_position_embeddings=64, hidden_act=hidden_act,
        bos_token_id=0, eos_token_id=1, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = _perturb(transformers.LlamaForCausalLM(config)).to(device)
    return model, {"input_ids": _ids(2, 12, device)}, lambda out: [out.logits]


def olmo2(device="cpu"):
    config = _require("Olmo2Config")(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, num_hidden_layers=2,
        vocab_size=VOCAB, max_position_embeddings=64, rope_theta=5e5, bos_token_id=0, eos_token_id=1,
        pad_token_id=2, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = _perturb(_require("Olmo2Model")(config)).to(device)
    return model, {"input_ids": _ids(2, 12, device)}, lambda out: [out.last_hidden_state]


_SIGLIP_TEXT = dict(hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=2,
                    vocab_size=VOCAB, max_position_embeddings=8, bos_token_id=0, eos_token_id=1, pad_token_id=2)
_SIGLIP_VISION = dict(hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=2,
                      patch_size=4, num_channels=3)


def siglip(device="cpu"):
    """SiglipModel: the vision tower and the text tower."""
    config = transformers.SiglipConfig(text_config=_SIGLIP_TEXT, vision_config=dict(_SIGLIP_VISION, image_size=16))
    torch.manual_seed(0)
    model = _perturb(transformers.SiglipModel(config)).to(device)
    inputs = {"input_ids": _ids(2, 8, device), "pixel_values": random_tensor((2, 3, 16, 16), device=device, seed=2)}
    return model, inputs, lambda out: [out.vision_model_output.last_hidden_state,
                                       out.vision_model_output.pooler_output, out.text_model_output.last_hidden_state]


def siglip2(device="cpu"):
    """Siglip2VisionModel with two images of different sizes (the second one padded)."""
    config = _require("Siglip2VisionConfig")(**_SIGLIP_VISION, num_patches=16)
    torch.manual_seed(0)
    model = _perturb(_require("Siglip2VisionModel")(config)).to(device)
    mask = torch.ones(2, 16, dtype=torch.long, device=device)
    mask[1, 12:] = 0
    inputs = {"pixel_values": random_tensor((2, 16, 48), device=device, seed=2), "pixel_attention_mask": mask,
              "spatial_shapes": torch.tensor([[4, 4], [3, 4]], device=device)}
    return model, inputs, lambda out: [out.last_hidden_state, out.pooler_output]


def _causal_lm(config_name: str, model_name: str, **extra):
    """A one-layer causal LM of a Llama-like family (the others' code differs in one module or two: the first
    layer shows it). head_dim 16 (Gemma's default is 256); Gemma-2 only runs its eager attention."""

    def build(device="cpu"):
        config = _require(config_name)(
            hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, num_hidden_layers=1,
            vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=2,
            **{"attn_implementation": "sdpa", **extra})
        torch.manual_seed(0)
        model = _perturb(_require(model_name)(config)).to(device)
        return model, {"input_ids": _ids(2, 12, device)}, lambda out: [out.logits]

    return build


# (name: what it adds over Llama)
MORE_FAMILIES = {
    "mistral": _causal_lm("MistralConfig", "MistralForCausalLM"),
    "qwen2": _causal_lm("Qwen2Config", "Qwen2ForCausalLM"),  # biases on q, k, v
    "qwen3": _causal_lm("Qwen3Config", "Qwen3ForCausalLM", head_dim=16),  # per-head QK-norms before the rotary
    # packed QKV (q and k strided views) and gate|up, a partial rotary
    "phi3": _causal_lm("Phi3Config", "Phi3ForCausalLM", partial_rotary_factor=0.5),
    "gemma": _causal_lm("GemmaConfig", "GemmaForCausalLM", head_dim=16),  # (1 + w) norms, GeGLU (tanh)
    "gemma2": _causal_lm("Gemma2Config", "Gemma2ForCausalLM", head_dim=16, attn_implementation="eager",
                         final_logit_softcapping=30.0),  # four norms a layer, a logit softcap
    "gemma3": _causal_lm("Gemma3TextConfig", "Gemma3ForCausalLM", head_dim=16),  # + (1 + w) QK-norms
}
FAMILIES = {"llama": llama, "olmo2": olmo2, "siglip": siglip, "siglip2": siglip2, **MORE_FAMILIES}
# graph breaks under torch.compile: the families whose patched modules differ from Llama's (~7 s each on a CPU)
COMPILED_FAMILIES = ["llama", "olmo2", "siglip", "siglip2", "qwen3", "phi3", "gemma3"]


def _run(model, inputs, outputs, dtype, seed=11):
    """(outputs, parameter gradients) of one forward and backward with fixed output gradients
    (float inputs, the pixels, cast to ``dtype``: SigLIP in transformers 4.46 does not)."""
    inputs = {key: value.to(dtype) if value.is_floating_point() else value for key, value in inputs.items()}
    results = outputs(model(**inputs))
    parameters = [p for _, p in _checked_parameters(model)]
    grad_outputs = [random_tensor(t.shape, torch.float32, t.device, seed=seed + i).to(dtype)
                    for i, t in enumerate(results)]
    return [t.detach() for t in results], grads(results, parameters, grad_outputs)


def _checked_parameters(model):
    """The parameters whose gradients the tests compare.

    NOTE: not the key biases: softmax ignores a shift that is the same for every key, so their
    exact gradient is zero and any computed one is rounding noise (relative errors of 1 between
    two correct runs)."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad and not name.endswith("k_proj.bias")]


def _assert_same_results(got, expected, tolerance: float):
    """Outputs and grads of two runs in the same dtype match, each within ``tolerance`` relative
    error; a parameter without a grad in one run (unused: SigLIP's logit_scale without the loss)
    has zeros or none in the other."""
    for i, (a, b) in enumerate(zip([*got[0], *got[1]], [*expected[0], *expected[1]], strict=True)):
        if a is None or b is None:
            assert not (a if a is not None else b if b is not None else torch.zeros(1)).any()
            continue
        assert relative_error(a, b) <= tolerance, f"result {i}: relative error {relative_error(a, b):.2e}"


# ----------------------------------------------------------------------------------------
# Numbers: patched == unpatched within the unpatched model's own error
# ----------------------------------------------------------------------------------------


# (Mistral and Qwen2 run Llama's code under other names: fp32 shows they are found and patched)
MATCH_CASES = [(family, dtype) for family in FAMILIES for dtype in DTYPES
               if not (family in ("mistral", "qwen2") and dtype != torch.float32)]


@pytest.mark.parametrize("family, dtype", MATCH_CASES, ids=[f"{f}-{'fp32' if d == torch.float32 else 'bf16'}"
                                                            for f, d in MATCH_CASES])
def test_patched_matches_unpatched(family, dtype, device):
    """Outputs and all parameter gradients of the patched model are at most 2x as far from the
    float64 unpatched model as the unpatched model in the same dtype."""
    base, inputs, outputs = FAMILIES[family](device)
    oracle = copy.deepcopy(base).double()
    theirs = copy.deepcopy(base).to(dtype)
    ours = copy.deepcopy(base).to(dtype)
    report = blockfuse.patch(ours)
    assert report.replaced
    names = [f"output {i}" for i in range(len(outputs(base(**inputs))))]
    names += [name for name, _ in _checked_parameters(base)]
    mine, baseline, expected = ([*outputs_, *grads_] for outputs_, grads_ in (
        _run(model, inputs, outputs, model_dtype)
        for model, model_dtype in ((ours, dtype), (theirs, dtype), (oracle, torch.float64))))
    assert_all_close_to_reference(mine, baseline, expected, names)


@pytest.mark.parametrize("hidden_act, activation", [("gelu_pytorch_tanh", "geglu"), ("gelu", "geglu_erf")])
def test_gelu_mlp_uses_geglu(hidden_act, activation):
    """A gated MLP with a GELU activation gets gated_mlp's GeGLU in the matching form, with HF's numbers."""
    base, inputs, outputs = llama(hidden_act=hidden_act, layers=1)
    ours = copy.deepcopy(base)
    report = blockfuse.patch(ours, norms=False, rope=False)
    assert [entry.new for entry in report.replaced] == [
        f'blockfuse.gated_mlp(x, gate_proj, up_proj, down_proj, "{activation}")']
    expected, mine = _run(base, inputs, outputs, torch.float32), _run(ours, inputs, outputs, torch.float32)
    _assert_same_results(mine, expected, tolerance=1e-5)


def test_other_activation_is_skipped_with_reason():
    model, _, _ = llama(hidden_act="relu", layers=1)
    report = blockfuse.patch(model)
    (entry,) = [entry for entry in report.skipped if entry.kind == "mlp"]
    assert entry.path == "model.layers.0.mlp" and "ReLU" in entry.reason and "swiglu" in entry.reason
    assert "forward" not in vars(model.model.layers[0].mlp)


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_rotary_replacement_matches_hugging_face(rotary_dim, unsqueeze_dim):
    """The apply_rotary_pos_emb of a patched attention == HF's formula on q and k in both layouts,
    with a partial rotary (tables narrower than head_dim: the rest passes through), forward and
    backward; other tables go to the original function."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as original

    def reference(q, k, cos, sin):  # HF's partial-rotary form (as in GPT-NeoX, Phi)
        rotated = original(q[..., :rotary_dim], k[..., :rotary_dim], cos, sin, unsqueeze_dim=unsqueeze_dim)
        return tuple(torch.cat((r, t[..., rotary_dim:]), dim=-1) for r, t in zip(rotated, (q, k)))

    heads_first = unsqueeze_dim == 1
    q = random_tensor((2, 4, 6, 16) if heads_first else (2, 6, 4, 16), seed=1).requires_grad_()
    k = random_tensor((2, 2, 6, 16) if heads_first else (2, 6, 2, 16), seed=2).requires_grad_()
    angles = random_tensor((1, 6, rotary_dim // 2), seed=3)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    replacement = hf_rotary(original, promote=True)
    grad_outputs = [random_tensor(t.shape, seed=4 + i) for i, t in enumerate((q, k))]
    for a, b in zip(replacement(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim), reference(q, k, cos, sin)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    ours = grads(replacement(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim), [q, k], grad_outputs)
    theirs = grads(reference(q, k, cos, sin), [q, k], grad_outputs)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    if rotary_dim == 16:  # 2-D tables are not HF's per-token ones: the original runs
        calls = []
        counting = functools.wraps(original)(lambda *args: calls.append(args) or args[:2])
        hf_rotary(counting, promote=True)(q, k, cos[0], sin[0], unsqueeze_dim=unsqueeze_dim)
        assert len(calls) == 1


def _hub_module(func):
    """A function as the ``kernels`` package's ``use_kernel_forward_from_hub`` makes it (transformers 5.25): an
    ``nn.Module`` instance whose class's forward takes ``*args, **kwargs`` and calls ``func`` from its closure."""

    class Func(nn.Module):
        def forward(self, *args, **kwargs):
            return func(*args, **kwargs)

    return Func()


def test_rotary_replacement_sees_through_a_hub_kernel_module():
    """Hugging Face's apply_rotary_pos_emb wrapped as a hub-kernel module (and that module wrapped by
    functools.wraps) is recognized by the function inside; calls blockfuse does not cover still go to the module."""

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        calls.append(unsqueeze_dim)
        return q, k

    calls = []
    module = _hub_module(apply_rotary_pos_emb)
    for original in (module, functools.wraps(module)(lambda *args, **kwargs: module(*args, **kwargs))):
        replacement = hf_rotary(original, promote=True)
        q, k = random_tensor((2, 4, 6, 16), seed=1), random_tensor((2, 2, 6, 16), seed=2)
        cos = sin = random_tensor((6, 16), seed=3)  # 2-D tables: not HF's per-token ones, the original runs
        replacement(q, k, cos, sin)
    assert calls == [1, 1]
    with pytest.raises(CannotPatch, match=r"\['args', 'kwargs'\]"):
        hf_rotary(_hub_module(lambda *args, **kwargs: None), promote=True)


def test_rotary_replacement_keeps_hugging_face_memory_layout():
    """HF's q and k are (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim) projections:
    the replacement hands back the same kind of views (so attention's output transpose is free), with
    HF's values and gradients."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as original

    q_proj = random_tensor((2, 6, 4 * 16), seed=1).requires_grad_()  # (batch, seq, heads * head_dim)
    k_proj = random_tensor((2, 6, 2 * 16), seed=2).requires_grad_()
    angles = random_tensor((1, 6, 8), seed=3)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    replacement = hf_rotary(original, promote=True)

    def run(fn):
        q = q_proj.view(2, 6, 4, 16).transpose(1, 2)
        k = k_proj.view(2, 6, 2, 16).transpose(1, 2)
        q_out, k_out = fn(q, k, cos, sin, unsqueeze_dim=1)
        return q, k, q_out, k_out

    q, k, q_out, k_out = run(replacement)
    assert q_out.stride() == q.stride() and k_out.stride() == k.stride(), (q_out.stride(), q.stride())
    _, _, q_ref, k_ref = run(original)
    torch.testing.assert_close(q_out, q_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(k_out, k_ref, rtol=1e-5, atol=1e-6)
    grad_outputs = [random_tensor(t.shape, seed=4 + i) for i, t in enumerate((q_out, k_out))]
    ours = grads((q_out, k_out), [q_proj, k_proj], grad_outputs)
    theirs = grads((q_ref, k_ref), [q_proj, k_proj], grad_outputs)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------
# torch.compile: no graph break added, fullgraph where HF compiles fullgraph, no recompiles
# ----------------------------------------------------------------------------------------


def _graph_breaks(model, inputs) -> int:
    torch._dynamo.reset()
    return torch._dynamo.explain(model)(**inputs).graph_break_count


@pytest.mark.parametrize("family", COMPILED_FAMILIES)
def test_compile_adds_no_graph_break(family, device):
    """aot_eager: as many graph breaks patched as unpatched; when HF's model compiles with
    fullgraph=True, so does the patched one, forward and backward as eager, compiled once for
    two calls (the patched forwards are guarded correctly)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    base, inputs, outputs = FAMILIES[family](device)
    patched = copy.deepcopy(base)
    blockfuse.patch(patched)
    unpatched_breaks = _graph_breaks(base, inputs)
    if unpatched_breaks:  # SigLIP-2: HF's own breaks (Tensor.item() in its checks)
        assert _graph_breaks(patched, inputs) == unpatched_breaks
        torch._dynamo.reset()
        return
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(patched, backend=counter, fullgraph=True)
    # NOTE: not bitwise: compiled, HF passes SDPA an explicit causal mask (eager: is_causal=True),
    # which may pick another attention kernel (elements 5e-5 apart in fp32 on an H200).
    first = _run(compiled, inputs, outputs, torch.float32)
    _assert_same_results(first, _run(patched, inputs, outputs, torch.float32), tolerance=1e-5)
    compiled(**inputs)
    assert counter.frame_count == 1
    torch._dynamo.reset()


@pytest.mark.slow
def test_compile_inductor_fullgraph(device):
    """One Inductor case (a one-layer Llama; ~10 s of C++ compiles on 2 CPU cores)."""
    base, inputs, outputs = llama(device, layers=1)
    patched = copy.deepcopy(base)
    blockfuse.patch(patched)
    torch._dynamo.reset()
    compiled = torch.compile(patched, backend="inductor", fullgraph=True)
    got, expected = _run(compiled, inputs, outputs, torch.float32), _run(base, inputs, outputs, torch.float32)
    _assert_same_results(got, expected, tolerance=1e-5)
    torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
def test_patched_model_runs_the_kernels(device):
    """The Triton kernels run: eagerly (their autograd nodes in the backward graph) and compiled
    (blockfuse's launcher ops in Dynamo's graph, in its autograd Functions' forward and backward)."""
    model, inputs, outputs = olmo2(device)
    blockfuse.patch(model)
    hidden = outputs(model(**inputs))[0]  # (alive: it holds the backward graph)
    seen, stack = set(), [hidden.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    nodes = {type(node).__name__ for node in seen}
    assert {"_NormFunctionBackward", "_RotaryFunctionBackward", "_DownFunctionBackward", "_GateUpFunctionBackward"} <= nodes, nodes
    graphs = []

    def capture(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    torch.compile(model, backend=capture, fullgraph=True)(**inputs)
    # The launcher ops sit in the subgraphs of the ops' autograd Functions (forward and backward).
    ops = {str(node.target) for graph in graphs for module in graph.modules()
           if isinstance(module, torch.fx.GraphModule) for node in module.graph.nodes if node.op == "call_function"}
    assert {"blockfuse.norm_fwd.default", "blockfuse.norm_bwd.default", "blockfuse.rotary_fwd.default",
            "blockfuse.rotary_bwd.default", "blockfuse.gated_mlp_down_fwd.default",
            "blockfuse.gated_mlp_down_bwd_.default"} <= ops, ops
    torch._dynamo.reset()


# ----------------------------------------------------------------------------------------
# Weights, state dict, unpatch, idempotence, other models
# ----------------------------------------------------------------------------------------


def _modules(model):
    return [(name, id(module), type(module)) for name, module in model.named_modules()]


@pytest.mark.parametrize("family", FAMILIES)
def test_weights_and_state_dict_unchanged(family):
    model, _, _ = FAMILIES[family]()
    before = model.state_dict()
    parameters = [(name, id(p)) for name, p in model.named_parameters()]
    blockfuse.patch(model)
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[key], before[key]) for key in before)
    assert all(after[key].data_ptr() == before[key].data_ptr() for key in before)
    assert [(name, id(p)) for name, p in model.named_parameters()] == parameters


@pytest.mark.parametrize("family", FAMILIES)
def test_unpatch_restores_exactly(family):
    model, inputs, outputs = FAMILIES[family]()
    modules, expected = _modules(model), outputs(model(**inputs))
    report = blockfuse.patch(model)
    assert STATE in vars(model)
    assert blockfuse.unpatch(model) == len(report.replaced)
    assert _modules(model) == modules
    assert all("forward" not in vars(module) for module in model.modules())
    assert STATE not in vars(model)
    for a, b in zip(outputs(model(**inputs)), expected):
        assert torch.equal(a, b)
    assert blockfuse.unpatch(model) == 0


def test_patch_twice_is_a_no_op_and_flags_add_up():
    model, inputs, outputs = llama()
    modules = _modules(model)
    first = blockfuse.patch(model, rope=False, mlp=False)
    assert {entry.kind for entry in first.replaced} == {"norms"}
    assert {entry.reason for entry in first.skipped} == {"not asked for (rope=False)", "not asked for (mlp=False)"}
    second = blockfuse.patch(model)
    assert {entry.kind for entry in second.replaced} == {"rope", "mlp"}
    assert {(entry.kind, entry.reason) for entry in second.skipped} == {
        ("norms", "already a blockfuse norm (by an earlier blockfuse.patch)")}
    patched_modules, expected = _modules(model), outputs(model(**inputs))
    third = blockfuse.patch(model)
    assert not third.replaced and len(third.skipped) == len(first.replaced) + len(second.replaced)
    assert all("already" in entry.reason for entry in third.skipped)
    assert _modules(model) == patched_modules
    assert torch.equal(outputs(model(**inputs))[0], expected[0])
    blockfuse.unpatch(model)
    assert _modules(model) == modules and all("forward" not in vars(m) for m in model.modules())


def test_report_lists_replaced_and_skipped():
    model, _, _ = llama()
    report = blockfuse.patch(model)
    by_kind = {kind: [entry for entry in report.replaced if entry.kind == kind] for kind in ("norms", "rope", "mlp")}
    assert [entry.path for entry in by_kind["norms"]] == [
        "model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
        "model.layers.1.input_layernorm", "model.layers.1.post_attention_layernorm", "model.norm"]
    assert {(entry.old, entry.new) for entry in by_kind["norms"]} == {
        ("LlamaRMSNorm", "blockfuse.nn.RMSNorm(cast_before_weight=True)")}
    assert [entry.path for entry in by_kind["rope"]] == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert [entry.path for entry in by_kind["mlp"]] == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert report.model == "LlamaForCausalLM" and report.families == ("Llama",) and not report.skipped
    text, markdown = str(report), report.to_markdown()
    assert "9 replaced, 0 skipped" in text and "5 x LlamaRMSNorm" in text
    assert markdown.count("| replaced |") == 9
    assert report.to_dict()["replaced"][0]["kind"] == "rope"

    olmo, _, _ = olmo2()
    norms = [entry for entry in blockfuse.patch(olmo).replaced if entry.kind == "norms"]
    assert len(norms) == 9 and {entry.new for entry in norms} == {"blockfuse.nn.RMSNorm(cast_before_weight=False)"}
    assert {"layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"} <= {entry.path for entry in norms}

    vision, _, _ = siglip2()
    report = blockfuse.patch(vision)
    assert {(entry.kind, entry.new) for entry in report.replaced} == {
        ("norms", "blockfuse.nn.LayerNorm"), ("mlp", 'blockfuse.fused_mlp(x, fc1, fc2, "gelu_tanh")')}
    (rope,) = [entry for entry in report.skipped if entry.kind == "rope"]
    assert "no rotary embedding" in rope.reason
    mlps = [entry for entry in report.replaced if entry.kind == "mlp"]
    assert len(mlps) == 3 and all(entry.path.endswith(".mlp") for entry in mlps)
    assert not [entry for entry in report.skipped if entry.kind == "mlp"]


def test_siglip_mlp_of_another_activation_or_projection_is_left_alone():
    """fused_mlp takes a GELU MLP with plain Linear layers; anything else is reported, not changed."""
    vision, _, _ = siglip2()
    (first_path, first), (second_path, second) = [(path, module) for path, module in vision.named_modules()
                                                   if type(module).__name__.endswith("MLP")][:2]
    first.activation_fn = nn.ReLU()
    second.fc1.register_forward_hook(lambda *args: None)
    report = blockfuse.patch(vision)
    reasons = {entry.path: entry.reason for entry in report.skipped if entry.kind == "mlp"}
    assert reasons.keys() == {first_path, second_path}, reasons
    assert "ReLU" in reasons[first_path] and "plain Linear" in reasons[second_path], reasons
    assert "forward" not in vars(first) and "forward" not in vars(second)


def test_unsupported_model_raises():
    config = transformers.StableLmConfig(hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                         intermediate_size=64, num_hidden_layers=1, vocab_size=VOCAB)
    for model in (transformers.StableLmModel(config), nn.Linear(4, 4)):  # (a family blockfuse does not know)
        with pytest.raises(ValueError, match=type(model).__name__) as error:
            blockfuse.patch(model)
        assert all(name in str(error.value) for name in ("LlamaModel", "Qwen3ForCausalLM", "Siglip2VisionModel"))
    with pytest.raises(TypeError, match="nn.Module"):
        blockfuse.patch("not a model")


def test_other_model_of_the_same_class_is_left_alone():
    from transformers.models.llama import modeling_llama

    a, inputs, outputs = llama()
    b = copy.deepcopy(a)
    modules, expected = _modules(b), outputs(b(**inputs))[0]
    class_forwards = (modeling_llama.LlamaAttention.forward, modeling_llama.LlamaMLP.forward)
    module_rotary = modeling_llama.apply_rotary_pos_emb
    blockfuse.patch(a)
    assert _modules(b) == modules and all("forward" not in vars(module) for module in b.modules())
    assert (modeling_llama.LlamaAttention.forward, modeling_llama.LlamaMLP.forward) == class_forwards
    assert modeling_llama.apply_rotary_pos_emb is module_rotary
    assert torch.equal(outputs(b(**inputs))[0], expected)
    copied = copy.deepcopy(a)  # a copy of a patched model is patched, and unpatches on its own
    assert blockfuse.unpatch(copied) == blockfuse.unpatch(copy.deepcopy(a)) > 0
    assert STATE in vars(a) and "forward" in vars(a.model.layers[0].self_attn)


def test_save_and_load_as_before(tmp_path):
    """save_pretrained of a patched model loads into an unpatched one; load_state_dict into a
    patched model (also with assign=True) reaches the original modules after unpatch."""
    model, inputs, outputs = llama()
    blockfuse.patch(model)
    model.save_pretrained(tmp_path)
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path)
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    other, _, _ = llama()
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.mul_(1.5)
    for assign in (False, True):
        model.load_state_dict(other.state_dict(), assign=assign)
        blockfuse.unpatch(model)
        for key, value in other.state_dict().items():
            assert torch.equal(model.state_dict()[key], value), key
        assert torch.equal(outputs(model(**inputs))[0], outputs(other(**inputs))[0])
        blockfuse.patch(model)


def test_composite_and_hooked_models():
    """A model inside a larger module is found; a module with an instance forward (an accelerate
    hook) or hooks is left alone and reported."""
    language, _, _ = llama(layers=1)
    vision, _, _ = siglip2()
    attention = language.model.layers[0].self_attn
    attention.forward = functools.partial(type(attention).forward, attention)
    language.model.norm.register_forward_hook(lambda module, args, output: None)
    composite = nn.ModuleDict({"language": language, "vision": vision})
    report = blockfuse.patch(composite)
    assert report.model == "ModuleDict" and report.families == ("Llama", "SigLIP-2")
    skipped = {entry.path: entry.reason for entry in report.skipped}
    assert "accelerate" in skipped["language.model.layers.0.self_attn"]
    assert "hooks" in skipped["language.model.norm"]
    assert isinstance(language.model.norm, transformers.models.llama.modeling_llama.LlamaRMSNorm)
    post_layernorm = next(name for name, _ in vision.named_modules() if name.endswith("post_layernorm"))
    assert isinstance(vision.get_submodule(post_layernorm), blockfuse.nn.LayerNorm)
    assert isinstance(attention.forward, functools.partial)
    blockfuse.unpatch(composite)
    assert type(vision.get_submodule(post_layernorm)) is nn.LayerNorm
    assert isinstance(attention.forward, functools.partial)


def test_decorated_forward_keeps_its_decorator():
    """The copied attention forward still runs transformers' decorator (deprecate_kwarg renames
    an old keyword), now around the copy that calls blockfuse.rotary."""
    model, _, _ = llama(layers=1)
    blockfuse.patch(model, norms=False, mlp=False)
    forward = model.model.layers[0].self_attn.forward
    assert isinstance(forward, types.MethodType)
    layers, function = [], forward.__func__
    while hasattr(function, "__wrapped__"):
        layers.append(function)
        function = function.__wrapped__
    assert layers == [] or layers[0].__code__ is type(model.model.layers[0].self_attn).forward.__code__
    assert function.__globals__["apply_rotary_pos_emb"].__module__ == "blockfuse.patching.forwards"
    assert "__name__" not in function.__globals__


def test_mlp_with_other_projection_modules_keeps_them():
    """Projections that are not plain Linear layers (here: one with a forward hook, as LoRA or a
    quantizer would be) are called as they are, around the fused activation."""
    base, inputs, outputs = llama(layers=1)
    ours = copy.deepcopy(base)
    calls = []
    ours.model.layers[0].mlp.up_proj.register_forward_hook(lambda *args: calls.append(1))
    report = blockfuse.patch(ours, norms=False, rope=False)
    assert [entry.new for entry in report.replaced] == ["down_proj(blockfuse.swiglu(gate_proj(x), up_proj(x)))"]
    expected, mine = _run(base, inputs, outputs, torch.float32), _run(ours, inputs, outputs, torch.float32)
    _assert_same_results(mine, expected, tolerance=1e-5)
    assert calls
