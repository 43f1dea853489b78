"""Tensor parallelism with QK-norm and on Hugging Face models (blockfuse.distributed.tp_plan): two processes
(tests/multiprocess.py) against one process running the same model on the same batch.

* QK-norm (OLMo-2): the head-sharded RMSNorm (``sharded_rms_norm``) against the RMSNorm of the whole rows, forward
  and backward, both rounding conventions; eager and fused stacks with QK-norm, with and without sequence
  parallelism (the test of tests/test_distributed.py, which also counts the collectives);
* tiny Llama, OLMo-2, Qwen2, Mistral, Qwen3 and Gemma-3 models, ``blockfuse.patch``-ed (OLMo-2 and Mistral also with
  ``loss=True``, Llama also unpatched with tied embeddings), with and without sequence parallelism: the loss and every
  parameter's gradient; Qwen3's replicated per-head QK-norm weights through two optimizer steps.
"""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from tests import multiprocess

# (two processes a minute or more between them: started first, not left to the end of CI's run; tests/conftest.py)
pytestmark = pytest.mark.long
from tests.test_distributed import (
    _case, _collectives, collective_counter, gradient_reductions, references, without_gradient_reductions,
)

# (preset, overrides, sequence_parallel): OLMo-2's block (reordered, RMSNorm with the weight in fp32, QK-norm, no
# biases) and a pre-norm block with Llama's RMSNorm rounding, QK-norm and biases; both GQA (4 heads, 2 kv heads)
QK_CASES = [("olmo2-1b", {}, True), ("olmo2-1b", {}, False),
            ("standard", {"norm": "rms", "rms_cast_before_weight": True, "qk_norm": True}, True)]
LAYERS = 2
VOCAB = 96


def _error(a, b) -> float:
    """Relative to b's largest element, absolute below 1."""
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1.0))


def _sharded_norm_errors(rank, mesh) -> dict:
    """sharded_rms_norm on this rank's columns against the eager RMSNorm of the whole rows: output, dx, dw."""
    from torch.distributed.tensor import DTensor, Shard

    from blockfuse.distributed import HeadShardedRMSNorm
    from blockfuse.models.eager import RMSNorm, rms_norm_eager

    device, tp = multiprocess.device(), multiprocess.WORLD
    errors = {}
    for dtype in (torch.float32, torch.bfloat16):
        for cast_before_weight in (False, True):
            g = torch.Generator().manual_seed(5)
            x = torch.randn(3, 7, 72, generator=g).to(device, dtype)  # 72 columns: 36 a rank
            weight = (1 + 0.3 * torch.randn(72, generator=g)).to(device)
            dy = torch.randn(3, 7, 72, generator=g).to(device, dtype)
            full = x.clone().requires_grad_()
            w = weight.clone().requires_grad_()
            expected = rms_norm_eager(full, w, 1e-6, cast_before_weight)
            expected.backward(dy)
            # the module the plan installs, from an eager RMSNorm holding the same weight
            norm = RMSNorm(72, 1e-6, cast_before_weight).to(device)
            with torch.no_grad():
                norm.weight.copy_(weight)
            sharded = HeadShardedRMSNorm.of(norm, mesh, src_data_rank=0)
            local = x.chunk(tp, dim=-1)[rank].detach().requires_grad_()  # this rank's columns: a strided view
            out = sharded(local)
            out.backward(dy.chunk(tp, dim=-1)[rank])
            dw = sharded.weight.grad
            case = f"{dtype} cast_before_weight={cast_before_weight}"
            columns = slice(rank * 36, (rank + 1) * 36)
            errors[f"{case} output"] = _error(out, expected[..., columns])
            errors[f"{case} dx"] = _error(local.grad, full.grad[..., columns])
            errors[f"{case} dw"] = _error(dw.full_tensor(), w.grad)
            errors[f"{case} dw placement"] = float(not (isinstance(dw, DTensor) and dw.placements == (Shard(0),)))
    return errors


def _qk_norm_worker(rank, impl):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    expected = references(rank, QK_CASES, impl)
    results = {f"{preset} {overrides} sequence_parallel={sp}": _case(rank, mesh, preset, overrides, impl, sp,
                                                                     expected[repr((preset, overrides))])
               for preset, overrides, sp in QK_CASES}
    return results, _sharded_norm_errors(rank, mesh) if impl == "eager" else {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(worker, *args)``: that case's results by rank, from one pair of processes for the file's three (QK-norm
    eager and fused, and the Hugging Face models where transformers is installed; spawning a pair costs CI's two cores
    seconds of imports a time)."""
    cases = [(_qk_norm_worker, ("eager",)), (_qk_norm_worker, ("fused",))]
    if importlib.util.find_spec("transformers") is not None:
        cases.append((_hf_worker, ()))
    return multiprocess.run_each(cases, timeout=600, once=("test_distributed_hf", tmp_path_factory))


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_qk_norm_under_tensor_parallelism_matches_one_process(impl, runs):
    """Output, loss, the input's gradient and every parameter's gradient (the QK-norm weights' included) match one
    process; the communication is the plan's plus one all-reduce per QK-norm (two a layer) in each direction,
    and nothing else (the QK-norm gathers nothing). The sharded norm itself matches the norm of the whole rows
    (fp32 and bf16, both roundings); its weight's gradient is sharded like the weight."""
    for rank, (results, norm_errors) in enumerate(runs(_qk_norm_worker, impl)):
        for case, result in results.items():
            # NOTE: the loss, (out * probe).sum() over 1152 terms of either sign, sums the output's rounding
            # differences (~1e-6 each: the fused reference's QK-norm is the Triton kernel, the sharded one is not)
            errors = {name: error / (10 if name == "loss" else 1) for name, error in result["errors"].items()}
            worst = max(errors, key=errors.get)
            assert errors[worst] < 1e-5, f"rank {rank}, {case}: {worst} {result['errors'][worst]:.2e}"
            assert result["output type"] == "Tensor", (case, result["output type"])
            qk_norms = 2 * LAYERS
            if "sequence_parallel=True" in case:
                expected = {"all_gather": 2 * LAYERS + 1, "reduce_scatter": 2 * LAYERS, "all_reduce": qk_norms}
            else:
                expected = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 2 * LAYERS + qk_norms}
            assert result["collectives"] == {"forward": expected, "backward": expected}, (rank, case, result)
        for name, error in norm_errors.items():
            tolerance = 2e-2 if "bfloat16" in name else 1e-5  # bf16: a rounding of the output (2^-8 relative)
            assert error < tolerance, f"rank {rank}, sharded_rms_norm {name}: {error:.2e}"


# ----------------------------------------------------------------------------------------
# Hugging Face models
# ----------------------------------------------------------------------------------------


def _hf_model(family: str, tied: bool = False):
    import transformers

    common = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                  num_hidden_layers=LAYERS, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
                  eos_token_id=1, tie_word_embeddings=tied, attn_implementation="sdpa")
    if family == "llama":  # with biases: o_proj's and down_proj's are added once, after the reduction
        config = transformers.LlamaConfig(**common, attention_bias=True, mlp_bias=True)
        cls = transformers.LlamaForCausalLM
    elif family == "qwen2":  # biases on q, k, v only
        config, cls = transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM
    elif family == "mistral":  # no biases
        config, cls = transformers.MistralConfig(**common), transformers.MistralForCausalLM
    elif family == "qwen3":  # per-head QK-norms (replicated: each rank normalizes its own heads)
        config, cls = transformers.Qwen3Config(**common, head_dim=16), transformers.Qwen3ForCausalLM
    elif family == "gemma3":  # (1 + w) norms, four a layer and per-head QK-norms; a scaled embedding
        config, cls = transformers.Gemma3TextConfig(**common, head_dim=16), transformers.Gemma3ForCausalLM
    else:
        config, cls = transformers.Olmo2Config(**common, rope_theta=5e5, pad_token_id=2), transformers.Olmo2ForCausalLM
    torch.manual_seed(0)
    model = cls(config)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # norm weights away from ones: a norm weight sharded wrongly shows
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
    return model


def _hf_inputs(family, patch, tied):
    """The case's model (patched as the case says), its input ids and labels."""
    import blockfuse

    device = multiprocess.device()
    model = _hf_model(family, tied).to(device)
    if patch is not None:
        blockfuse.patch(model, loss=patch == "loss")
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(0, VOCAB, (2, 9), generator=g).to(device)  # 9 tokens: sequence shards of 5 and 4
    labels = ids.clone()
    labels[0, :3] = -100
    return model, ids, labels


def _hf_step(m, ids, labels):
    """(loss, logits or None, the collectives run forward and backward) of one step of ``m``."""
    forward, backward = collective_counter(), collective_counter()
    with forward:
        out = m(input_ids=ids, labels=labels)
    with backward:
        out.loss.backward()
    collectives = {"forward": _collectives(forward.counts), "backward": _collectives(backward.counts)}
    return out.loss.detach(), None if out.logits is None else out.logits.detach(), collectives


def _hf_reference(family, patch, tied) -> tuple:
    """One process's step of the case's model (the same with or without sequence parallelism): (loss, logits or
    None, every parameter's gradient by name)."""
    model, ids, labels = _hf_inputs(family, patch, tied)
    loss, logits, _ = _hf_step(model, ids, labels)
    return loss, logits, {name: p.grad for name, p in model.named_parameters()}


def _hf_case(rank, mesh, family, patch, tied, sequence_parallel, reference) -> dict:
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import HeadShardedRMSNorm, ReplicatedHeadNorm, tp_plan

    model, ids, labels = _hf_inputs(family, patch, tied)
    expected_loss, expected_logits, expected_grads = reference
    sharded = copy.deepcopy(model)
    with gradient_reductions() as counted:
        parallelize_module(sharded, mesh, tp_plan(sharded, sequence_parallel=sequence_parallel))
        loss, logits, collectives = _hf_step(sharded, ids, labels)
    collectives = without_gradient_reductions(collectives, counted)
    errors = {"loss": _error(loss, expected_loss)}
    if expected_logits is not None:
        errors["logits"] = _error(logits, expected_logits)
    sharded_names = []
    for name, p in sharded.named_parameters():
        grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        errors[name] = _error(grad, expected_grads[name])
        if isinstance(p, DTensor) and p.placements[0].is_shard():
            sharded_names.append(name)
    qk_norms = sum(isinstance(m, HeadShardedRMSNorm) for m in sharded.modules())
    per_head_norms = sum(isinstance(m, ReplicatedHeadNorm) for m in sharded.modules())
    return {"errors": errors, "sharded": sorted(sharded_names), "qk norms": qk_norms, "per-head norms": per_head_norms,
            "collectives": collectives,
            "same names": sorted(expected_grads) == sorted(n for n, _ in sharded.named_parameters())}


# (family, blockfuse.patch: None (not patched), "patch", "loss" (patch(model, loss=True)), tie_word_embeddings,
# sequence_parallel)
HF_CASES = [("llama", "patch", False, True), ("olmo2", "patch", False, True), ("olmo2", "patch", False, False),
            ("olmo2", "loss", False, True), ("llama", None, True, True), ("llama", None, True, False),
            ("qwen2", "patch", False, True), ("mistral", "loss", False, False), ("qwen3", "patch", False, True),
            ("gemma3", "patch", False, True)]
# the column-parallel projections' biases, sharded with their rows (o_proj's and down_proj's are replicated)
SHARDED_BIASES = {"llama": ["q_proj.bias", "k_proj.bias", "v_proj.bias", "gate_proj.bias", "up_proj.bias"],
                  "qwen2": ["q_proj.bias", "k_proj.bias", "v_proj.bias"], "mistral": [], "olmo2": [], "qwen3": [],
                  "gemma3": []}


def _hf_worker(rank):
    """(each HF_CASES case's results, Qwen3's two optimizer steps: :func:`_qwen3_steps`), in one pair of processes."""
    from torch.distributed.device_mesh import init_device_mesh

    import blockfuse.distributed as distributed

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    # each model's one-process step on one rank, once for both layouts of the residual stream, and Qwen3's two
    # one-process steps on one rank, once for both of _qwen3_steps' runs (multiprocess.split)
    expected = multiprocess.split(rank, {"qwen3 steps": _qwen3_one_process,
                                         **{case[:3]: lambda case=case: _hf_reference(*case[:3]) for case in HF_CASES}})
    steps = _qwen3_steps(mesh, expected["qwen3 steps"])
    # torch before 2.13 (the lent GPU's 2.11): the replicated weights' gradients reduced in the backward
    # (distributed._replicated_gradients_reduced); forced here so that CI's torch runs that path too
    before, distributed._BEFORE_2_13 = distributed._BEFORE_2_13, True
    try:
        reduced_steps = _qwen3_steps(mesh, expected["qwen3 steps"])
    finally:
        distributed._BEFORE_2_13 = before
    return [_hf_case(rank, mesh, *case, expected[case[:3]]) for case in HF_CASES], steps, reduced_steps, before


def _expected_hf_collectives(family, patch, tied, sequence_parallel) -> dict:
    """Per layer: attention's and the MLP's inputs gathered, their outputs reduced (reduce-scatter onto the sequence,
    or all-reduce), OLMo-2's two QK-norm all-reduces; the vocabulary-sharded embedding's output reduced; the LM head
    (vocabulary-sharded: its input gathered and its logits) or else the final norm's output gathered. Backward: each
    of those mirrored (a gather's backward a reduce-scatter, a reduction's a gather; a split is local)."""
    import blockfuse.distributed as distributed

    layers, qk = 2 * LAYERS, (2 * LAYERS if family == "olmo2" else 0)
    embedding, head = not tied, not tied and patch != "loss"
    if sequence_parallel:
        forward = {"all_gather": layers + (2 if head else 1), "reduce_scatter": layers + embedding, "all_reduce": qk}
        backward = {"all_gather": layers + 1, "reduce_scatter": layers + head, "all_reduce": qk}
    else:
        forward = {"all_gather": int(head), "reduce_scatter": 0, "all_reduce": layers + embedding + qk}
        backward = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": layers + head + qk}
    # (the fused loss with the head sharded on the vocabulary (patch "loss", not tied) all-reduces per-token numbers and
    # d hidden with torch.distributed calls on the group, which this counter does not see; what it would see, the
    # head's weight or the logits gathered through DTensor's collectives, does not happen: no count changes)
    if family == "gemma3" and embedding and sequence_parallel and not distributed._BEFORE_2_13:
        # Gemma's embedding scales its output by a buffer (embed_scale): DTensor (torch 2.13) reduces the partial sums
        # before the product (an all-reduce), and the sequence shard is then taken locally, where a plain embedding's
        # partial sums are reduce-scattered (half the bytes; torch 2.11 reduce-scatters Gemma's too). The same numbers.
        forward["reduce_scatter"] -= 1
        forward["all_reduce"] += 1
    return {"forward": forward, "backward": backward}


def test_hugging_face_models_under_tensor_parallelism_match_one_process(runs):
    """The loss, the logits (where made) and every parameter's gradient match one process. Sharded: the
    attention and MLP projections (q, k, v, gate, up on their rows, o and down on their columns), OLMo-2's
    QK-norm weights, and the embedding and LM head on the vocabulary unless tied (or the head fused with the loss).
    The communication is the plan's and no more (the norms gather nothing). And Qwen3's replicated per-head QK-norm
    weights through two optimizer steps (:func:`_qwen3_steps`)."""
    pytest.importorskip("transformers")
    for rank, (results, steps, reduced_steps, before_2_13) in enumerate(runs(_hf_worker)):
        # Qwen3's per-head QK-norm weights stay whole on every rank; their gradient comes back Partial (each rank's
        # heads' share) and the optimizer step and the gradient clipping reduce it: every weight after two steps as
        # one process's (a gradient left unreduced would be a rank's share: errors of the size of a step). Before
        # torch 2.13 the gradient is reduced in the backward (2.11's clipping leaves a Partial one unscaled:
        # the norms' weights 1e-3 off); both ways on every torch
        for (placements, step_errors), expected in ((steps, "(Replicate(),)" if before_2_13 else "(Partial(sum),)"),
                                                    (reduced_steps, "(Replicate(),)")):
            assert placements == expected, (rank, placements)
            worst = max(step_errors, key=step_errors.get)
            assert step_errors[worst] < 1e-5, f"rank {rank}, two steps ({placements}): {worst} {step_errors[worst]:.2e}"
        for (family, patch, tied, sp), result in zip(HF_CASES, results):
            case = f"rank {rank}: {family} patch={patch} tied={tied} sequence_parallel={sp}"
            worst = max(result["errors"], key=result["errors"].get)
            assert result["errors"][worst] < 1e-5, f"{case}: {worst} {result['errors'][worst]:.2e}"
            assert result["same names"], case
            sharded = result["sharded"]
            per_layer = ["q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight",
                         "up_proj.weight", "down_proj.weight"]
            if family == "olmo2":
                per_layer += ["q_norm.weight", "k_norm.weight"]
            per_layer += SHARDED_BIASES[family]
            for suffix in per_layer:
                assert sum(name.endswith(suffix) for name in sharded) == LAYERS, (case, suffix, sharded)
            assert result["qk norms"] == (2 * LAYERS if family == "olmo2" else 0), case
            assert result["per-head norms"] == (2 * LAYERS if family in ("qwen3", "gemma3") else 0), case
            assert ("model.embed_tokens.weight" in sharded) == (not tied), (case, sharded)
            assert ("lm_head.weight" in sharded) == (not tied), (case, sharded)  # (with loss=True: the loss's)
            vocabulary = 2 * (not tied)
            assert len(sharded) == LAYERS * len(per_layer) + vocabulary, (case, sharded)
            expected = _expected_hf_collectives(family, patch, tied, sp)
            assert result["collectives"] == expected, (case, result["collectives"])


def test_unsupported_models_raise():
    from blockfuse.distributed import tp_plan
    from blockfuse.models import TransformerBlock
    from blockfuse.models.config import BlockConfig

    with pytest.raises(NotImplementedError, match="qk_norm with norm='layer'"):
        tp_plan(TransformerBlock(BlockConfig(d_model=64, n_heads=4, ffn_hidden=96, qk_norm=True), "fused"))
    transformers = pytest.importorskip("transformers")
    config = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=72, num_hidden_layers=1,
                                             num_attention_heads=2, patch_size=4, image_size=16)
    with pytest.raises(TypeError, match="Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma-2, Gemma-3, OLMo-2 models, got "
                                        "SiglipVisionModel"):
        tp_plan(transformers.SiglipVisionModel(config))
    phi3 = transformers.Phi3Config(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                                   intermediate_size=64, num_hidden_layers=1, vocab_size=VOCAB, pad_token_id=None)
    with pytest.raises(TypeError, match="OLMo-2 models, got Phi3ForCausalLM"):  # (its packed projections)
        tp_plan(transformers.Phi3ForCausalLM(phi3))


def _qwen3_model():
    """The patched Qwen3 of :func:`_qwen3_steps` and its input ids."""
    import blockfuse

    model = _hf_model("qwen3").to(multiprocess.device())
    blockfuse.patch(model)
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1)).to(multiprocess.device())
    return model, ids


def _two_steps(m, ids):
    """Two SGD steps with momentum (gradients clipped) of ``m``: every parameter after them (whole), and the first
    QK-norm weight's gradient placements (a DTensor's) at the last step."""
    from torch.distributed.tensor import DTensor

    optimizer = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    placements = None
    for _ in range(2):
        m(input_ids=ids, labels=ids).loss.backward()
        grad = m.model.layers[0].self_attn.q_norm.weight.grad
        placements = str(grad.placements) if isinstance(grad, DTensor) else None
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach() for n, p in m.named_parameters()}, placements


def _qwen3_one_process():
    """One process's :func:`_two_steps` of the Qwen3 (the same whatever ``distributed._BEFORE_2_13``: it acts on
    the sharded parameters only): every parameter after them."""
    return _two_steps(*_qwen3_model())[0]


def _qwen3_steps(mesh, one_process):
    """Two SGD steps with momentum (gradients clipped) of a patched Qwen3 planned over the ranks against one
    process's (``one_process``: :func:`_qwen3_one_process`'s). (Not Adam: it scales each element's step by its own
    gradient's size, so rounding noise in the tiniest gradients moves a weight by a visible part of a step.)"""
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    sharded, ids = _qwen3_model()
    parallelize_module(sharded, mesh, tp_plan(sharded))
    weights, placements = _two_steps(sharded, ids)
    return placements, {n: _error(weights[n], one_process[n]) for n in one_process}

