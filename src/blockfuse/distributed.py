"""Tensor parallelism (with sequence parallelism) for blockfuse models: the plan of PyTorch's ``parallelize_module``.

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    import blockfuse.distributed

    mesh = init_device_mesh("cuda", (2,))
    parallelize_module(model, mesh, blockfuse.distributed.tp_plan(model))

``tp_plan(model)`` returns ``{module name: ParallelStyle}`` for a :class:`~blockfuse.models.TransformerStack` or
:class:`~blockfuse.models.TransformerBlock`, eager or fused (a block's names lack the ``blocks.*.``)::

    ""                    SequenceShards()       the stack's input split along the sequence, its output gathered
    "blocks.*.attn_norm"  ReplicatedNorm()       PyTorch's SequenceParallel, weights broadcast from one rank
    "blocks.*.attn"       AttentionParallel()    heads split across the ranks
    "blocks.*.ffn_norm"   ReplicatedNorm()
    "blocks.*.ffn"        FeedForwardParallel()  hidden columns split across the ranks

(the ``""`` and norm entries with ``sequence_parallel=True`` only). The scheme is Megatron's, in PyTorch's own terms
(DTensor, ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``); nothing here communicates by itself
but the sharded QK-norm's all-reduce (below):

* attention: each rank runs ``heads / tp`` query heads and ``kv_heads / tp`` key/value heads (so both must be
  multiples of tp; GQA keeps its ratio on every rank). The q, k, v projections are column-parallel, the output
  projection row-parallel (its input is this rank's heads; its bias is added once, after the reduction); QK-norm
  is sharded with the heads (below);
* MLP: the gate and up projections (or fc1) column-parallel, ``ffn_hidden / tp`` columns a rank; the down
  projection (fc2) row-parallel;
* ``sequence_parallel=True``: between those, the residual stream is a DTensor sharded on the sequence
  (``Shard(1)``). The norms run on it where it lies (blockfuse's norm ops have sharding rules for row shards,
  ops/sharding.py: no gather in a norm; their weights are replicated and their gradients each rank's partial
  sums, reduced by DTensor where used). Attention's and the MLP's inputs are all-gathered along the sequence
  as they enter (once each: q, k and v share one), their outputs reduce-scattered back to it (the row-parallel
  projection's ``Shard(1)`` output); the backward mirrors it. The stack's input, a full ``(batch, seq, d)``
  tensor on every rank (or a DTensor), is split along the sequence on the way in (the sequence need not divide
  by tp), its output gathered back to a full plain tensor on the way out. RoPE runs after the gather, on whole
  sequences: positions need no offset;
* ``sequence_parallel=False``: the residual stream and the norms are replicated (plain tensors); the row-parallel
  outputs are all-reduced, and so are the gradients of attention's and the MLP's inputs.

The fused blocks hold packed weights, ``qkv_proj`` ([q | k | v] rows) and ``gate_up_proj`` ([gate | up] rows).
A plain ``Shard(0)`` of those would give rank 0 all of q and rank 1 k and v. They are instead laid out
rank-major before they are sharded: the rows are reordered to [q heads of rank 0 | k heads of rank 0 | v heads
of rank 0 | q heads of rank 1 | ...] (rank r's q heads are ``r * heads / tp`` to ``(r + 1) * heads / tp``, its
kv heads likewise), [gate of rank 0 | up of rank 0 | gate of rank 1 | ...] for the MLP (:func:`rank_major_rows`),
and that layout is placed ``Shard(0)``: each rank's local weight is exactly the packed weight of a block with its
heads (hidden columns), so one GEMM gives its q, k and v (gate and up) and the kernels run unchanged on local
tensors. The module learns its share through ``shards`` (models/fused.py): the fused attention splits and views
its local heads, the fused MLP runs its one op on its local weights and leaves the output bias to
:class:`FeedForwardParallel`, which adds it after the reduction.

State dict: a tensor-parallel block saves what the eager block saves under the same plan: ``attn.q_proj.weight``,
``k_proj``, ``v_proj``, ``ffn.gate_proj``, ``up_proj`` (and biases) each a DTensor ``Shard(0)`` of that
projection's own weight (rank r holding its heads' rows), ``o_proj`` / ``down_proj`` weights ``Shard(1)``, their
biases and the norms' weights ``Replicate()``. So the fused and eager models' sharded state dicts load into each
other, and a full (unsharded) checkpoint loads through ``torch.distributed.checkpoint.state_dict.
set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True))``, each rank taking its rows.
(``get_model_state_dict`` does not take a fused model, sharded or not: it looks its state-dict names up as
attributes.)

QK-norm (OLMo-2: ``q_norm`` over all ``heads * head_dim`` columns of q, ``k_norm`` over k's, before the heads are
split) normalizes over a width that the ranks split: rank r holds its heads' columns only. :class:`AttentionParallel`
replaces each of the two norms by a :class:`HeadShardedRMSNorm` holding the same weight placed ``Shard(0)`` (rank r
the weight entries of its heads' columns; the state dict keeps the name ``q_norm.weight``), which computes, for
each row (token) of the local x, ``width`` being the full width::

    s     = sum of x_j ** 2 over this rank's columns j     (fp32)
    S     = all_reduce(s, SUM)                             (over the tensor-parallel group: all columns)
    rstd  = 1 / sqrt(S / width + eps)
    y_j   = w_j * x_j * rstd                               (the local columns, the local slice of w)

and in the backward, with ``g_j = dy_j * w_j``::

    dx_j  = rstd * g_j - x_j * rstd ** 3 * all_reduce(sum of g_i * x_i over this rank's columns i, SUM) / width
    dw_j  = sum over the rows of dy_j * x_j * rstd         (this rank's entries only: ``Shard(0)`` like w)

(:func:`sharded_rms_norm`, an autograd function; both rounding conventions, Llama's and OLMo-2's, as
:class:`blockfuse.models.eager.RMSNorm`). One all-reduce of a (tokens, 1) fp32 tensor per norm in each direction,
and no gather: q and k come out of the column-parallel projection with every token on every rank (attention's input
is gathered along the sequence first), so the group's sum is the whole row's. The eager attention calls its norm
modules; the fused one calls them through ``models.fused._norm``, which calls a norm module that is not one of
``blockfuse.nn``'s (this one) as a module. QK-norm with LayerNorm (no model has it) is refused.

Hugging Face models (``blockfuse.patch``-ed or not): ``tp_plan`` takes a Llama or OLMo-2 model (``*ForCausalLM``,
the base ``*Model``, or a model holding one). Their attention reshapes q, k, v with ``-1`` heads (transformers 5.x,
as Hugging Face's own ``base_model_tp_plan`` relies on), so it runs on its local heads unchanged; an older attention
that reshapes by the config's head count is refused when the plan is applied. The q, k, v and gate / up projections
are separate Linears: no re-layout. The plan (``model.`` prefixes left out; the norm entries with
``sequence_parallel=True`` only)::

    "embed_tokens"          RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1) | Replicate())
    "layers.*.<each norm>"  ReplicatedNorm()         Llama: input_layernorm, post_attention_layernorm;
                                                     OLMo-2: post_attention_layernorm, post_feedforward_layernorm
    "layers.*.self_attn"    AttentionParallel()      as the eager block's (``hidden_states`` gathered, q, k, v
                                                     colwise, o_proj rowwise), q_norm / k_norm head-sharded
    "layers.*.mlp"          FeedForwardParallel()    as below
    "norm"                  ReplicatedNorm()
    "lm_head"               ColwiseParallel(input_layouts=Shard(1) | Replicate(), output_layouts=Replicate()),
                            or VocabularyShardedHead() for a model patched with loss=True

The embedding is split by vocabulary rows and its output reduce-scattered onto the sequence (all-reduced without
sequence parallelism); the LM head is split by vocabulary rows and its logits gathered whole (Hugging Face's loss
then runs on them as it is). A model patched with ``blockfuse.patch(model, loss=True)`` gets the head split by
vocabulary rows too, without hooks (:class:`VocabularyShardedHead`): its fused loss reads the sharded weight and runs
vocabulary-parallel (each rank its classes' logits, per-token numbers all-reduced: ``ops/cross_entropy_parallel.py``),
the final norm's output gathered whole first. A model whose embedding and head share their weight
(``tie_word_embeddings``) keeps the head replicated (and the embedding too, its output moved onto the sequence shards
without communication); the final norm's output is then gathered to a whole plain tensor, as for a model without an
LM head.

The MLP: a ``blockfuse.patch``-ed gated MLP runs as one ``blockfuse.gated_mlp``, which reads the projections'
weights rather than calling the Linears, so ``ColwiseParallel`` / ``RowwiseParallel`` hooks on them would never run.
:class:`FeedForwardParallel` therefore treats it as the fused block's MLP: ``gate_proj`` and ``up_proj`` weights (and
biases) ``Shard(0)``, ``down_proj``'s weight ``Shard(1)`` and bias ``Replicate()``, the module's ``shards`` set to tp
so that the patched forward (patching/forwards.py) runs the op on the local shards without the down bias; the
style's hooks gather the input (to a plain tensor whose gradient is this rank's partial sum) and reduce the output
(a ``Partial()`` sum: reduce-scattered onto the sequence, or all-reduced), the bias added after. An MLP that is not
patched (or patched around projections that are not plain Linears) gets the eager block's treatment: its Linears
``ColwiseParallel`` / ``RowwiseParallel``, called as modules. Patch before planning (the plan chooses by what
the MLP's forward is), and do not ``blockfuse.unpatch`` a planned model: the MLP's own forward would then meet
weights laid out for the patched one, and ``q_norm`` / ``k_norm`` stay sharded (unpatch warns).

FP8 Linear layers (``blockfuse.fp8.convert``, before planning: it refuses a sharded layer): a
:class:`~blockfuse.nn.fp8.Float8Linear` whose weight the plan shards runs its three GEMMs on the local shards
(``Float8Linear._forward_sharded``), each rank with its own scales and histories, under the same styles (a DTensor
input from ``ColwiseParallel`` / ``RowwiseParallel``, or a fused MLP's plain local input); a fused block's norms then
hand the layers no FP8 output (``models.fused.fp8_input_recipe``).

Not covered yet: dropout on the sequence-parallel residual stream of a fused block (blockfuse's ops refuse dropout
on DTensors), 2-D meshes (FSDP2 + TP), PyTorch's ``loss_parallel`` on an unpatched model's sharded logits
(they are gathered whole), SigLIP / SigLIP-2 models, attention that reshapes by the config's head count
(older transformers), and a rule for ``blockfuse::gated_mlp_down_fwd`` / ``_bwd`` on DTensors (the MLP runs on
local shards instead, see above).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleOutput, RowwiseParallel, SequenceParallel,
)
from torch.distributed.tensor.parallel.style import ParallelStyle

import blockfuse.nn
from blockfuse.models.blocks import TransformerBlock, TransformerStack
from blockfuse.models.eager import Attention, FeedForward
from blockfuse.models.fused import FusedAttention, FusedFeedForward
from blockfuse.ops.sharding import register_sharding_rules
from blockfuse.patching.families import Family, family_of, roots
from blockfuse.patching.forwards import MARK, calls_gated_mlp, unwrap
from blockfuse.runtime import torch_before

# NOTE: the launcher ops' DTensor rules, registered now: eagerly the first DTensor call registers them
# (ops/launch.Launcher), but a stack compiled before any eager call traces its ops on DTensors first, and DTensor
# refused them ("blockfuse.norm_fwd.default does not have a sharding strategy registered": a fused stack under tp_plan
# and torch.compile, CPU, aot_eager). This module imports torch.distributed anyway.
register_sharding_rules()


_BEFORE_2_13 = torch_before(2, 13)


def _gather_contiguous_uneven_shards() -> None:
    """NOTE: torch before 2.13 all-gathers a tensor split unevenly on a dim past the first (a sequence of 9 tokens
    ``Shard(1)`` on 2 ranks) into a padded buffer and returns the narrowed view of it: shape (2, 9, 64), strides
    (640, 64, 1). DTensor's ``linear`` views its input as (18, 64) and fails ("view size is not compatible with input
    tensor's size and stride"; under Dynamo "Cannot view a tensor ... as a tensor with shape (18, 64)"), forward
    and backward (the gradient of a row-parallel output is gathered the same way), in PyTorch's own
    ``ColwiseParallel`` after ``SequenceParallel`` as much as here (pytorch/pytorch#143748). torch 2.13 makes that
    result contiguous (``Shard._maybe_unpad_tensor``); on older versions ``Shard._to_replicate_tensor`` does it here,
    a copy only where the sequence does not divide by the ranks. Found running the tensor-parallel tests on torch
    2.11 (CPU, gloo)."""
    from torch.distributed.tensor import Shard

    gather = Shard._to_replicate_tensor
    if not _BEFORE_2_13 or getattr(gather, "_blockfuse_contiguous", False):
        return

    def _to_replicate_tensor(self, *args, **kwargs):
        return gather(self, *args, **kwargs).contiguous()

    _to_replicate_tensor._blockfuse_contiguous = True
    Shard._to_replicate_tensor = _to_replicate_tensor


_gather_contiguous_uneven_shards()

__all__ = ["AttentionParallel", "FeedForwardParallel", "HeadShardedRMSNorm", "ReplicatedHeadNorm", "ReplicatedNorm",
           "SequenceShards", "VocabularyShardedHead", "rank_major_rows", "sharded_rms_norm", "tp_plan"]

# the Hugging Face families tp_plan takes (decoder LMs of Llama's layout: q / k / v / o and gate / up / down Linears;
# OLMo-2's whole-width QK-norms are sharded with the heads, Qwen3's and Gemma-3's per-head ones replicated). Not
# Phi-3 (its packed q|k|v and gate|up projections).
HUGGING_FACE_FAMILIES = ("Llama", "Mistral", "Qwen2", "Qwen3", "Gemma", "Gemma-2", "Gemma-3", "OLMo-2")


def tp_plan(model: nn.Module, *, sequence_parallel: bool = True) -> dict[str, ParallelStyle]:
    """The ``parallelize_module`` plan of ``model``: a :class:`TransformerStack` or :class:`TransformerBlock`, eager
    or fused, or a Hugging Face model of ``HUGGING_FACE_FAMILIES`` (Llama, Mistral, Qwen2, Qwen3, Gemma 1-3, OLMo-2),
    ``blockfuse.patch``-ed or not (patch before planning).
    ``parallelize_module(model, mesh, tp_plan(model))`` on a 1-D mesh of the tensor-parallel ranks. See the
    module's notes for the scheme and the state dict. The head counts are checked against the mesh when the plan
    is applied (``heads`` and ``kv_heads`` must be multiples of its size)."""
    if isinstance(model, (TransformerStack, TransformerBlock)):
        return _block_plan(model, sequence_parallel)
    found = list(roots(model)) if isinstance(model, nn.Module) else []
    if not found:
        raise TypeError(f"model: expected a blockfuse TransformerStack or TransformerBlock, or a Hugging Face "
                        f"{' or '.join(HUGGING_FACE_FAMILIES)} model, got {type(model).__name__}")
    return _hugging_face_plan(found, sequence_parallel)


def _block_plan(model: nn.Module, sequence_parallel: bool) -> dict[str, ParallelStyle]:
    prefix = "blocks.*." if isinstance(model, TransformerStack) else ""
    config = model.config
    if config.qk_norm and config.norm == "layer":
        raise NotImplementedError("qk_norm with norm='layer': tensor parallelism splits QK-norm's width across the "
                                  "ranks, and blockfuse.distributed shards RMSNorm only (no model has a LayerNorm "
                                  "QK-norm)")
    plan: dict[str, ParallelStyle] = {}
    if sequence_parallel:
        plan[""] = SequenceShards()
        plan[f"{prefix}attn_norm"] = ReplicatedNorm()
        plan[f"{prefix}ffn_norm"] = ReplicatedNorm()
    plan[f"{prefix}attn"] = AttentionParallel(sequence_parallel=sequence_parallel)
    plan[f"{prefix}ffn"] = FeedForwardParallel(sequence_parallel=sequence_parallel)
    return plan


def _hugging_face_plan(found: list, sequence_parallel: bool) -> dict[str, ParallelStyle]:
    """The plan of the one Hugging Face model of HUGGING_FACE_FAMILIES in ``found`` (``roots``' (path, module,
    family))."""
    if len(found) != 1:
        paths = ", ".join(path or "(the model)" for path, _, _ in found)
        raise ValueError(f"model holds {len(found)} Hugging Face models ({paths}): plan each one on its own")
    path, root, family = found[0]
    if family.name not in HUGGING_FACE_FAMILIES:
        raise TypeError(f"model: tp_plan covers Hugging Face {', '.join(HUGGING_FACE_FAMILIES)} models, got "
                        f"{type(root).__name__} ({family.name})")
    inner = getattr(root, "model", None)
    base, base_path = (inner, "model.") if isinstance(inner, nn.Module) else (root, "")
    if not all(isinstance(getattr(base, name, None), nn.Module) for name in ("embed_tokens", "layers", "norm")):
        raise TypeError(f"model: {type(base).__name__} has no embed_tokens, layers and norm as Hugging Face's "
                        f"{family.name} models have")
    outer = f"{path}." if path else ""
    prefix = outer + base_path
    layout = _layout(sequence_parallel)
    head = getattr(root, "lm_head", None)
    tied = isinstance(head, nn.Module) and getattr(head, "weight", None) is base.embed_tokens.weight
    fused_loss = getattr(getattr(vars(root).get("forward"), "__func__", None), MARK, None) == "loss"
    head_sharded = isinstance(head, nn.Linear) and not tied and not fused_loss
    vocabulary_loss = isinstance(head, nn.Linear) and not tied and fused_loss

    plan: dict[str, ParallelStyle] = {}
    if not tied:
        plan[f"{prefix}embed_tokens"] = _RowwiseParallel(input_layouts=Replicate(), output_layouts=layout,
                                                         use_local_output=not sequence_parallel)
    elif sequence_parallel:  # a replicated embedding: its output onto the sequence shards, each rank its chunk
        plan[f"{prefix}embed_tokens"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1),
                                                            use_local_output=False)
    if sequence_parallel:
        for name, child in base.layers[0].named_children():
            if _is_norm(child, family):
                plan[f"{prefix}layers.*.{name}"] = ReplicatedNorm()
    plan[f"{prefix}layers.*.self_attn"] = AttentionParallel(sequence_parallel=sequence_parallel)
    plan[f"{prefix}layers.*.mlp"] = FeedForwardParallel(sequence_parallel=sequence_parallel)
    if sequence_parallel:
        plan[f"{prefix}norm"] = ReplicatedNorm(gather_output=not head_sharded)
    if head_sharded:
        plan[f"{outer}lm_head"] = _ColwiseParallel(input_layouts=layout, output_layouts=Replicate())
    elif vocabulary_loss:
        plan[f"{outer}lm_head"] = VocabularyShardedHead()
    return plan


def _is_norm(module: nn.Module, family: Family) -> bool:
    """A Hugging Face model's norm module, patched (blockfuse's) or not."""
    return isinstance(module, (blockfuse.nn.RMSNorm, blockfuse.nn.LayerNorm)) or type(module).__name__ == family.norm


# ----------------------------------------------------------------------------------------
# Layouts
# ----------------------------------------------------------------------------------------


def rank_major_rows(widths: tuple[int, ...], tp: int) -> torch.Tensor:
    """The row order that lays a packed weight of parts ``widths`` (rows) out rank-major: rank 0's 1/tp of each
    part in order, then rank 1's, ... (``weight[rows]``, then ``Shard(0)``). Each width must divide by tp."""
    starts = [sum(widths[:i]) for i in range(len(widths))]
    order = [torch.arange(start + rank * (width // tp), start + (rank + 1) * (width // tp))
             for rank in range(tp) for start, width in zip(starts, widths)]
    return torch.cat(order)


def _check_heads(heads: int, kv_heads: int, tp: int) -> None:
    if heads % tp or kv_heads % tp:
        raise ValueError(f"tensor parallelism over {tp} ranks gives each rank whole attention heads: n_heads="
                         f"{heads} and n_kv_heads={kv_heads} must both be multiples of {tp}")


def _check_hidden(hidden: int, tp: int) -> None:
    if hidden % tp:
        raise ValueError(f"tensor parallelism over {tp} ranks splits the MLP's hidden columns: ffn_hidden="
                         f"{hidden} must be a multiple of {tp}")


def _distribute(module: nn.Module, name: str, mesh, placement, src_data_rank, rows: Optional[torch.Tensor] = None):
    """Replaces parameter ``name`` of ``module`` (if present) by a DTensor placed ``placement``, its rows first
    reordered by ``rows`` (the rank-major layout)."""
    param = getattr(module, name, None)
    if param is None:
        return
    data = param.detach() if rows is None else param.detach()[rows.to(param.device)]
    sharded = distribute_tensor(data, mesh, [placement], src_data_rank=src_data_rank)
    module.register_parameter(name, _replicated_gradients_reduced(
        nn.Parameter(sharded, requires_grad=param.requires_grad)))


def _replicated_gradients_reduced(param: nn.Parameter) -> nn.Parameter:
    """``param``, whose gradient is reduced in the backward where it comes back ``Partial()`` (torch before 2.13).

    NOTE: a replicated weight's gradient is each rank's share, ``Partial()`` (a norm of the sequence-parallel
    stream sees its rank's tokens only; a per-head QK-norm its rank's heads), and DTensor reduces it where it is
    read. torch 2.11's ``torch._foreach_mul_`` leaves a ``Partial()`` DTensor as it was (x 0.5: the sum still 3.0
    where 2.13 gives 1.5, gloo), so ``clip_grad_norm_`` scaled every other gradient and not these: after two
    clipped SGD steps the norms' weights stood 0.6-2.4e-3 off one process's (`tests/test_distributed_hf.py`'s Qwen3
    steps, torch 2.11 on the CPU). There the gradient is all-reduced as it arrives (a row of floats a norm, a step);
    from 2.13 it stays ``Partial()``."""
    if _BEFORE_2_13 and param.requires_grad and isinstance(param, DTensor) \
            and any(p.is_replicate() for p in param.placements):
        param.register_hook(_partial_reduced)
    return param


def _partial_reduced(grad):
    if isinstance(grad, DTensor) and any(p.is_partial() for p in grad.placements):
        return grad.redistribute(grad.device_mesh, [Replicate() if p.is_partial() else p for p in grad.placements])
    return grad


def _layout(sequence_parallel: bool):
    """Where the residual stream lies between the blocks' attention and MLP."""
    return Shard(1) if sequence_parallel else Replicate()


def _gathered(x, mesh, layout, local: bool):
    """``x`` (a DTensor, or a plain tensor placed ``layout``) all-gathered to a whole replicated tensor: a
    DTensor, or (``local``) its plain local tensor, whose gradient each rank fills with its partial sum
    (the column-parallel GEMMs after it see only this rank's columns)."""
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, [layout], run_check=False)
    x = x.redistribute(mesh, [Replicate()])
    return x.to_local(grad_placements=[Partial()]) if local else x


# ----------------------------------------------------------------------------------------
# RMSNorm over a width split across the ranks (QK-norm)
# ----------------------------------------------------------------------------------------


def _all_reduce_sum(t: Tensor, group) -> Tensor:
    """``t`` summed over ``group`` (a 1-D DeviceMesh or a ProcessGroup), waited for: a plain tensor."""
    import torch.distributed._functional_collectives as funcol

    reduced = funcol.all_reduce(t, "sum", group)
    return reduced.wait() if isinstance(reduced, funcol.AsyncCollectiveTensor) else reduced


class _ShardedRMSNormFunction(torch.autograd.Function):
    """The sharded RMSNorm's forward and backward (the math: the module's notes), one all-reduce in each."""

    @staticmethod
    def forward(ctx, x, weight, eps, width, group, cast_before_weight):
        # x: (..., width / tp) this rank's columns; weight: (width / tp,) their weights
        xf = x.float()
        # NOTE: fp32 statistics, as blockfuse's and Hugging Face's RMSNorms keep them; the all-reduce carries one
        # fp32 number a row.
        rstd = torch.rsqrt(_all_reduce_sum(xf.square().sum(-1, keepdim=True), group) / width + eps)  # (..., 1)
        normalized = xf * rstd
        y = weight * normalized.to(x.dtype) if cast_before_weight else (weight * normalized).to(x.dtype)
        ctx.save_for_backward(x, weight, rstd)
        ctx.width, ctx.group, ctx.cast_before_weight = width, group, cast_before_weight
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        xf, dyf = x.float(), dy.float()
        dx = dweight = None
        if ctx.needs_input_grad[0]:
            g = dyf * weight.float()  # (..., width / tp)
            dot = _all_reduce_sum((g * xf).sum(-1, keepdim=True), ctx.group)  # (..., 1): sum of g * x over the row
            dx = (rstd * g - xf * rstd.pow(3) * (dot / ctx.width)).to(x.dtype)
        if ctx.needs_input_grad[1]:
            normalized = xf * rstd
            seen = normalized.to(x.dtype).float() if ctx.cast_before_weight else normalized
            dweight = (dyf * seen).reshape(-1, weight.shape[-1]).sum(0).to(weight.dtype)
        return dx, dweight, None, None, None, None


def sharded_rms_norm(x: Tensor, weight: Tensor, eps: float, group, *, width: int,
                     cast_before_weight: bool = False) -> Tensor:
    """RMSNorm of rows whose ``width`` columns are split across ``group`` (a 1-D DeviceMesh or a ProcessGroup):
    ``x`` (..., width / ranks) is this rank's columns of every row, ``weight`` (width / ranks,) their weights.
    Each rank's sum of squares is all-reduced, so every rank normalizes by the whole row's RMS (the module notes
    give the math, forward and backward). ``cast_before_weight``: Llama's rounding (normalized cast to x's dtype,
    then the weight); else OLMo-2's (the weight applied in fp32, then the cast). Differentiable in x and weight;
    every rank of the group must call it (it communicates in the forward and in the backward)."""
    ranks = group.size()
    if x.shape[-1] != weight.shape[-1] or x.shape[-1] * ranks != width:
        raise ValueError(f"sharded_rms_norm: x has {x.shape[-1]} columns and weight {weight.shape[-1]}; both must be "
                         f"width / ranks = {width} / {ranks}")
    return _ShardedRMSNormFunction.apply(x, weight, eps, width, group, cast_before_weight)


def _rms_norm_settings(norm: nn.Module) -> tuple[float, bool, float, nn.Parameter]:
    """``(eps, cast_before_weight, weight_offset, weight)`` of RMSNorm module ``norm``: blockfuse's (its attributes),
    the eager block's, or Hugging Face's of a family blockfuse.patch knows (the family's conventions)."""
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
    family = family_of(norm)
    cast_before_weight = getattr(norm, "cast_before_weight", None)
    offset = getattr(norm, "weight_offset", None)
    if family is not None:
        cast_before_weight = family.cast_before_weight if cast_before_weight is None else cast_before_weight
        offset = family.norm_offset if offset is None else offset
    weight = getattr(norm, "weight", None)
    if eps is None or cast_before_weight is None or not isinstance(weight, nn.Parameter) or weight.dim() != 1:
        raise TypeError(f"QK-norm {type(norm).__name__}: expected an RMSNorm with a weight and eps that blockfuse "
                        "knows (blockfuse's, or Hugging Face's of a family blockfuse.patch supports)")
    return eps, cast_before_weight, offset or 0.0, weight


class HeadShardedRMSNorm(nn.Module):
    """QK-norm under tensor parallelism: an RMSNorm over ``heads * head_dim`` columns of which this rank holds
    its heads' (:func:`sharded_rms_norm`). ``weight``: a DTensor ``Shard(0)`` of the whole norm's weight (the
    state dict's ``q_norm.weight``); its input and output are plain local tensors, (..., width / tp)."""

    def __init__(self, weight: nn.Parameter, eps: float, cast_before_weight: bool):
        super().__init__()
        if not isinstance(weight, DTensor) or tuple(weight.placements) != (Shard(0),):
            raise ValueError("HeadShardedRMSNorm: weight must be a DTensor placed (Shard(0),) on a 1-D mesh")
        self.weight = weight
        self.eps = eps
        self.cast_before_weight = cast_before_weight

    @classmethod
    def of(cls, norm: nn.Module, mesh, src_data_rank) -> "HeadShardedRMSNorm":
        """The sharded twin of RMSNorm module ``norm`` (blockfuse's, the eager block's or Hugging Face's), its
        weight distributed ``Shard(0)`` over ``mesh`` from ``src_data_rank``."""
        if isinstance(norm, (nn.LayerNorm, blockfuse.nn.LayerNorm)):
            raise NotImplementedError(f"QK-norm {type(norm).__name__}: tensor parallelism splits its width across the "
                                      "ranks, and blockfuse.distributed shards RMSNorm only")
        eps, cast_before_weight, offset, weight = _rms_norm_settings(norm)
        if offset:
            raise NotImplementedError(f"QK-norm {type(norm).__name__}: a whole-width norm of (offset + weight) is not "
                                      "sharded by blockfuse.distributed")
        tp = mesh.size()
        if weight.shape[0] % tp:
            raise ValueError(f"QK-norm of width {weight.shape[0]}: not a multiple of the {tp} ranks")
        sharded = distribute_tensor(weight.detach(), mesh, [Shard(0)], src_data_rank=src_data_rank)
        module = cls(nn.Parameter(sharded, requires_grad=weight.requires_grad), eps, cast_before_weight)
        return module.train(norm.training)

    def forward(self, x: Tensor) -> Tensor:
        if isinstance(x, DTensor):
            raise TypeError(f"HeadShardedRMSNorm takes this rank's columns as a plain tensor, got a DTensor placed "
                            f"{tuple(x.placements)}")
        weight = self.weight
        return sharded_rms_norm(x, weight.to_local(), self.eps, weight.device_mesh, width=weight.shape[0],
                                cast_before_weight=self.cast_before_weight)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}, cast_before_weight={self.cast_before_weight}, sharded"


class ReplicatedHeadNorm(nn.Module):
    """QK-norm over each head's ``head_dim`` columns (Qwen3, Gemma-3) under tensor parallelism: every rank normalizes
    its own heads with the whole weight, a DTensor ``Replicate()`` (the state dict's ``q_norm.weight``), whose
    gradient is the ranks' sum (its local gradient handed back ``Partial()``, reduced where the gradient is read). No
    communication in the forward. Its input and output are plain local tensors, (..., heads / tp, head_dim)."""

    def __init__(self, weight: nn.Parameter, eps: float, cast_before_weight: bool, weight_offset: float = 0.0):
        super().__init__()
        if not isinstance(weight, DTensor) or tuple(weight.placements) != (Replicate(),):
            raise ValueError("ReplicatedHeadNorm: weight must be a DTensor placed (Replicate(),) on a 1-D mesh")
        self.weight = weight
        self.eps = eps
        self.cast_before_weight = cast_before_weight
        self.weight_offset = weight_offset

    @classmethod
    def of(cls, norm: nn.Module, mesh, src_data_rank) -> "ReplicatedHeadNorm":
        """The replicated twin of per-head RMSNorm module ``norm`` (blockfuse's or Hugging Face's), its weight
        broadcast over ``mesh`` from ``src_data_rank``."""
        eps, cast_before_weight, offset, weight = _rms_norm_settings(norm)
        replicated = distribute_tensor(weight.detach(), mesh, [Replicate()], src_data_rank=src_data_rank)
        param = _replicated_gradients_reduced(nn.Parameter(replicated, requires_grad=weight.requires_grad))
        module = cls(param, eps, cast_before_weight, offset)
        return module.train(norm.training)

    def forward(self, x: Tensor) -> Tensor:
        if isinstance(x, DTensor):
            raise TypeError(f"ReplicatedHeadNorm takes this rank's heads as a plain tensor, got a DTensor placed "
                            f"{tuple(x.placements)}")
        weight = self.weight.to_local(grad_placements=[Partial()])
        if self.weight_offset:
            weight = weight.float() + self.weight_offset
        return blockfuse.rms_norm(x, weight, self.eps, cast_before_weight=self.cast_before_weight)

    def extra_repr(self) -> str:
        offset = f", weight_offset={self.weight_offset}" if self.weight_offset else ""
        return (f"{tuple(self.weight.shape)}, eps={self.eps}, cast_before_weight={self.cast_before_weight}{offset}, "
                f"replicated")


def _shard_qk_norms(module: nn.Module, mesh, src_data_rank) -> None:
    """``q_norm`` and ``k_norm`` of attention ``module`` (where present) replaced by their tensor-parallel twins: a
    norm over all the heads' columns (OLMo-2) by its head-sharded twin, a norm over each head's (its width the
    module's ``head_dim``: Qwen3, Gemma-3) by its replicated one."""
    head_dim = getattr(module, "head_dim", None)
    for name in ("q_norm", "k_norm"):
        norm = module._modules.get(name)
        if norm is None:
            continue
        weight = getattr(norm, "weight", None)
        per_head = head_dim is not None and weight is not None and weight.shape[-1] == head_dim
        twin = ReplicatedHeadNorm if per_head else HeadShardedRMSNorm
        setattr(module, name, twin.of(norm, mesh, src_data_rank))


# ----------------------------------------------------------------------------------------
# Styles
# ----------------------------------------------------------------------------------------


class SequenceShards(ParallelStyle):
    """The root of a sequence-parallel stack (or block): its input, a full (batch, seq, d) tensor on every rank
    (or a DTensor), is split along the sequence (``Shard(1)``, each rank its chunk: no communication), and its
    output gathered back to a full plain tensor."""

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        def shard_input(_, args):
            x = args[0]
            if not isinstance(x, DTensor):
                x = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
            return (x.redistribute(mesh, [Shard(1)]), *args[1:])

        def gather_output(_, args, out):
            return out.redistribute(mesh, [Replicate()]).to_local() if isinstance(out, DTensor) else out

        module.register_forward_pre_hook(shard_input)
        module.register_forward_hook(gather_output)
        return module


class ReplicatedNorm(SequenceParallel):
    """PyTorch's ``SequenceParallel`` for a norm of the sequence-parallel residual stream, its weights broadcast
    from ``src_data_rank`` like every other parameter of the plan (``SequenceParallel`` assumes they are equal
    on every rank). An eager norm module runs on its ``Shard(1)`` input through its hooks; a fused block calls
    blockfuse's norm ops on the stream itself, which find the weights replicated. ``gather_output``: the output
    all-gathered to a whole plain tensor (a Hugging Face model's final norm, when what follows is replicated)."""

    def __init__(self, *, gather_output: bool = False):
        super().__init__()
        self.gather_output = gather_output

    def _replicate_module_fn(self, name: str, module: nn.Module, mesh):
        for param_name, _ in list(module.named_parameters(recurse=False)):
            _distribute(module, param_name, mesh, Replicate(), self.src_data_rank)

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        module = super()._apply(module, mesh)
        if self.gather_output:
            module.register_forward_hook(lambda _, args, out: out.redistribute(mesh, [Replicate()]).to_local())
        return module


class _RankMajorColwise(ColwiseParallel):
    """``ColwiseParallel`` for a packed Linear: its weight and bias reordered rank-major (``rows``) before they
    are placed ``Shard(0)``, so each rank's output columns are [its q heads | its k heads | its v heads]."""

    def __init__(self, rows: torch.Tensor, **kwargs):
        super().__init__(**kwargs)
        self.rows = rows

    def _partition_linear_fn(self, name, module, mesh):
        for param_name in ("weight", "bias"):
            _distribute(module, param_name, mesh, Shard(0), self.src_data_rank, self.rows)


class _RowwiseParallel(RowwiseParallel):
    """``RowwiseParallel`` whose output reduction is waited for before the output leaves.

    NOTE: PyTorch's reduces asynchronously, and a plain output (``use_local_output``) is then an
    ``AsyncCollectiveTensor``; a blockfuse op's autograd node saves it as it is, and its backward hands the
    kernels a tensor without a storage of its own (the fused reordered block's post-norm failed so). The next
    op needs the reduced output at once anyway: nothing to overlap."""

    def _partition_linear_fn(self, name, module, mesh):
        super()._partition_linear_fn(name, module, mesh)
        if isinstance(module.bias, nn.Parameter):  # replicated (see _replicated_gradients_reduced)
            _replicated_gradients_reduced(module.bias)

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts)
        return outputs.to_local() if use_local_output else outputs


class _ColwiseParallel(ColwiseParallel):
    """``ColwiseParallel`` whose output redistribution is waited for (as :class:`_RowwiseParallel`'s)."""

    _prepare_output_fn = staticmethod(_RowwiseParallel._prepare_output_fn)


class VocabularyShardedHead(ParallelStyle):
    """The LM head of a model patched with ``blockfuse.patch(model, loss=True)``: its weight (and bias) ``Shard(0)``
    on the vocabulary, no hooks. The fused loss reads the weight as that DTensor and runs vocabulary-parallel
    (``ops/cross_entropy_parallel.py``: each rank its own classes' logits, per-token numbers all-reduced, never the
    weight or the logits gathered), the final norm's output whole on every rank (``patching/loss.py`` hands it over
    as a ``Replicate()`` DTensor)."""

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        for name in ("weight", "bias"):
            _distribute(module, name, mesh, Shard(0), self.src_data_rank)
        return module


def _apply_child(style: ParallelStyle, parent: ParallelStyle, module: nn.Module, mesh) -> None:
    style.src_data_rank = parent.src_data_rank
    style._apply(module, mesh)


def _is_hugging_face(module: nn.Module, names: tuple[str, ...]) -> bool:
    """A module of a Hugging Face family that tp_plan takes, with Linear children ``names``."""
    family = family_of(module)
    return (family is not None and family.name in HUGGING_FACE_FAMILIES
            and all(isinstance(module._modules.get(name), nn.Linear) for name in names))


_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")


def _head_counts(module: nn.Module) -> tuple[int, int]:
    """(query heads, key/value heads) of a blockfuse or Hugging Face attention module."""
    config = module.config
    if isinstance(module, (Attention, FusedAttention)):
        return config.n_heads, config.kv_heads
    _, forward = unwrap(type(module).forward)
    if "num_heads" in forward.__code__.co_names:
        raise NotImplementedError(f"{type(module).__name__}: this transformers version reshapes q, k and v by the "
                                  "config's head count; tensor parallelism needs an attention that reshapes with "
                                  "-1 heads (each rank runs its own heads): upgrade transformers")
    heads = config.num_attention_heads
    return heads, getattr(config, "num_key_value_heads", None) or heads


class AttentionParallel(ParallelStyle):
    """Head-parallel attention (eager :class:`Attention`, :class:`FusedAttention`, or a Hugging Face Llama /
    OLMo-2 attention): each rank its ``heads / tp`` query heads and ``kv_heads / tp`` key/value heads.

    * eager and Hugging Face: the input (``Shard(1)`` under sequence parallelism, else replicated; Hugging Face's
      ``hidden_states`` keyword) all-gathered to a replicated DTensor as it enters; ``q_proj``, ``k_proj``,
      ``v_proj`` ``ColwiseParallel`` (plain local outputs, this rank's heads); ``o_proj`` ``RowwiseParallel``;
    * fused: ``qkv_proj`` column-parallel in the rank-major layout (its input gathered there: the reordered
      block calls ``attend`` directly), the module's ``shards`` set to tp so that it splits and views its
      local heads; ``o_proj`` ``RowwiseParallel``;
    * QK-norm: ``q_norm`` and ``k_norm`` replaced by :class:`HeadShardedRMSNorm` (their weights ``Shard(0)``).

    ``o_proj``'s output: reduce-scattered to a ``Shard(1)`` DTensor under sequence parallelism, else all-reduced
    to a plain replicated tensor."""

    def __init__(self, *, sequence_parallel: bool = True):
        super().__init__()
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        if not isinstance(module, (Attention, FusedAttention)) and not _is_hugging_face(module, _PROJECTIONS):
            raise TypeError(f"AttentionParallel: expected a blockfuse Attention or FusedAttention or a Hugging Face "
                            f"{' / '.join(HUGGING_FACE_FAMILIES)} attention, got {type(module).__name__}")
        tp = mesh.size()
        _check_heads(*_head_counts(module), tp)
        layout = _layout(self.sequence_parallel)
        if isinstance(module, FusedAttention):
            config = module.config
            rows = rank_major_rows((config.q_width, config.kv_width, config.kv_width), tp)
            _apply_child(_RankMajorColwise(rows, input_layouts=layout), self, module.qkv_proj, mesh)
            module.shards = tp
        else:
            def gather_input(_, args, kwargs):
                if args:
                    return (_gathered(args[0], mesh, layout, local=False), *args[1:]), kwargs
                return args, {**kwargs, "hidden_states": _gathered(kwargs["hidden_states"], mesh, layout, local=False)}

            module.register_forward_pre_hook(gather_input, with_kwargs=True)
            for name in ("q_proj", "k_proj", "v_proj"):
                _apply_child(ColwiseParallel(), self, getattr(module, name), mesh)
        _shard_qk_norms(module, mesh, self.src_data_rank)
        _apply_child(_RowwiseParallel(output_layouts=layout, use_local_output=not self.sequence_parallel), self,
                     module.o_proj, mesh)
        return module


_GATED = ("gate_proj", "up_proj", "down_proj")


class FeedForwardParallel(ParallelStyle):
    """Column-then-row-parallel MLP (eager :class:`FeedForward`, :class:`FusedFeedForward`, or a Hugging Face
    Llama / OLMo-2 MLP): each rank its ``ffn_hidden / tp`` hidden columns.

    * eager, and a Hugging Face MLP that calls its Linears (not patched, or patched around projections that are
      not plain Linears): the input all-gathered to a replicated DTensor as it enters; ``gate_proj`` and
      ``up_proj`` (or ``fc1``) ``ColwiseParallel``, ``down_proj`` (or ``fc2``) ``RowwiseParallel``;
    * fused, and a ``blockfuse.patch``-ed Hugging Face MLP (one ``blockfuse.gated_mlp`` on the Linears' weights):
      the module runs its one op on plain local tensors: its input is all-gathered to a local tensor,
      ``gate_up_proj`` placed ``Shard(0)`` in the rank-major layout (each rank [its gate rows | its up rows]), or
      ``gate_proj`` and ``up_proj`` (``fc1``) ``Shard(0)``, ``down_proj`` / ``fc2`` ``Shard(1)``, the module's
      ``shards`` set to tp, and its output, this rank's partial sum, becomes a ``Partial()`` DTensor reduced here,
      the output bias added after.

    The output: reduce-scattered to a ``Shard(1)`` DTensor under sequence parallelism, else all-reduced to a
    plain replicated tensor."""

    def __init__(self, *, sequence_parallel: bool = True):
        super().__init__()
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        hugging_face = not isinstance(module, (FeedForward, FusedFeedForward))
        if hugging_face and not _is_hugging_face(module, _GATED):
            raise TypeError(f"FeedForwardParallel: expected a blockfuse FeedForward or FusedFeedForward or a Hugging "
                            f"Face {' / '.join(HUGGING_FACE_FAMILIES)} MLP, got {type(module).__name__}")
        tp = mesh.size()
        _check_hidden(module.gate_proj.out_features if hugging_face else module.config.ffn_hidden, tp)
        layout = _layout(self.sequence_parallel)
        if isinstance(module, FeedForward) or (hugging_face and not calls_gated_mlp(module)):
            gated = hugging_face or module.config.gated
            module.register_forward_pre_hook(
                lambda _, args: (_gathered(args[0], mesh, layout, local=False), *args[1:]))
            for name in ("gate_proj", "up_proj") if gated else ("fc1",):
                _apply_child(ColwiseParallel(), self, getattr(module, name), mesh)
            _apply_child(_RowwiseParallel(output_layouts=layout, use_local_output=not self.sequence_parallel), self,
                         module.down_proj if gated else module.fc2, mesh)
            return module
        if hugging_face:
            inner, outer = [(module.gate_proj, None), (module.up_proj, None)], module.down_proj
        elif module.config.gated:
            rows = rank_major_rows((module.config.ffn_hidden, module.config.ffn_hidden), tp)
            inner, outer = [(module.gate_up_proj, rows)], module.down_proj
        else:
            inner, outer = [(module.fc1, None)], module.fc2
        for linear, rows in inner:
            for name in ("weight", "bias"):
                _distribute(linear, name, mesh, Shard(0), self.src_data_rank, rows)
        _distribute(outer, "weight", mesh, Shard(1), self.src_data_rank)
        _distribute(outer, "bias", mesh, Replicate(), self.src_data_rank)
        module.shards = tp

        def reduce_output(_, args, partial_sum):
            out = DTensor.from_local(partial_sum, mesh, [Partial()], run_check=False).redistribute(mesh, [layout])
            if outer.bias is not None:
                out = out + outer.bias
            return out if self.sequence_parallel else out.to_local()

        module.register_forward_pre_hook(lambda _, args: (_gathered(args[0], mesh, layout, local=True), *args[1:]))
        module.register_forward_hook(reduce_output)
        return module
