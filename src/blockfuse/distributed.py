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
(DTensor, ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``); nothing here communicates by itself:

* attention: each rank runs ``heads / tp`` query heads and ``kv_heads / tp`` key/value heads (so both must be
  multiples of tp; GQA keeps its ratio on every rank). The q, k, v projections are column-parallel, the output
  projection row-parallel (its input is this rank's heads; its bias is added once, after the reduction);
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
tensors. The module learns its share through ``shards`` (models/blocks.py): the fused attention splits and views
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

Not covered yet: QK-norm (OLMo-2: it normalizes over all heads, which the ranks split; ``tp_plan`` refuses it by
name), dropout on the sequence-parallel residual stream of a fused block (blockfuse's ops refuse dropout on
DTensors), ``SPLIT_QKV_BACKWARD`` (a tensor-parallel block runs the plain QKV Linear), 2-D meshes (FSDP2 + TP),
and Hugging Face models. For a ``blockfuse.patch``-ed Llama the plan would be the same without any re-layout
(its q / k / v and gate / up projections are separate Linears): q, k, v ``ColwiseParallel``, ``o_proj``
``RowwiseParallel``, the patched norms ``ReplicatedNorm`` on the ``Shard(1)`` stream, ``self_attn``'s
``hidden_states`` all-gathered, the patched RoPE on the local heads with Hugging Face's whole-sequence tables,
``embed_tokens`` ``RowwiseParallel(output_layouts=Shard(1))`` and a vocabulary-sharded ``lm_head``
(``linear_cross_entropy`` takes one). Two pieces are missing: the patched MLP calls ``blockfuse.gated_mlp`` with
the Linears' weights, DTensors under the plan, and ``blockfuse::gated_mlp_down_fwd`` / ``_bwd_`` have no
sharding rule (pre-activations sharded on the hidden dimension, the down weight ``Shard(1)``, a ``Partial()``
output, the bias added after; or a forward on local shards as :class:`FusedFeedForward` has); and OLMo-2's
QK-norm needs a norm rule for an input sharded on the normalized dimension (the sum of squares all-reduced).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel
from torch.distributed.tensor.parallel.style import ParallelStyle

from blockfuse.models.blocks import (
    Attention, FeedForward, FusedAttention, FusedFeedForward, TransformerBlock, TransformerStack,
)
from blockfuse.models.config import BlockConfig

__all__ = ["AttentionParallel", "FeedForwardParallel", "ReplicatedNorm", "SequenceShards", "rank_major_rows",
           "tp_plan"]


def tp_plan(model: nn.Module, *, sequence_parallel: bool = True) -> dict[str, ParallelStyle]:
    """The ``parallelize_module`` plan of ``model`` (a :class:`TransformerStack` or :class:`TransformerBlock`,
    eager or fused): ``parallelize_module(model, mesh, tp_plan(model))`` on a 1-D mesh of the tensor-parallel
    ranks. See the module's notes for the scheme and the state dict. The head counts are checked against the
    mesh when the plan is applied (``heads`` and ``kv_heads`` must be multiples of its size)."""
    if isinstance(model, TransformerStack):
        prefix = "blocks.*."
    elif isinstance(model, TransformerBlock):
        prefix = ""
    else:
        raise TypeError(f"model: expected a blockfuse TransformerStack or TransformerBlock, got {type(model).__name__} "
                        "(Hugging Face models: not yet, see blockfuse.distributed's notes)")
    config = model.config
    if config.qk_norm:
        raise NotImplementedError(
            "qk_norm: QK-norm normalizes each token's q (k) over all heads, and tensor parallelism splits the "
            "heads across ranks; tp_plan does not cover it yet")
    plan: dict[str, ParallelStyle] = {}
    if sequence_parallel:
        plan[""] = SequenceShards()
        plan[f"{prefix}attn_norm"] = ReplicatedNorm()
        plan[f"{prefix}ffn_norm"] = ReplicatedNorm()
    plan[f"{prefix}attn"] = AttentionParallel(sequence_parallel=sequence_parallel)
    plan[f"{prefix}ffn"] = FeedForwardParallel(sequence_parallel=sequence_parallel)
    return plan


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


def _check_heads(config: BlockConfig, tp: int) -> None:
    if config.n_heads % tp or config.kv_heads % tp:
        raise ValueError(f"tensor parallelism over {tp} ranks gives each rank whole attention heads: n_heads="
                         f"{config.n_heads} and n_kv_heads={config.kv_heads} must both be multiples of {tp}")


def _check_hidden(config: BlockConfig, tp: int) -> None:
    if config.ffn_hidden % tp:
        raise ValueError(f"tensor parallelism over {tp} ranks splits the MLP's hidden columns: ffn_hidden="
                         f"{config.ffn_hidden} must be a multiple of {tp}")


def _distribute(module: nn.Module, name: str, mesh, placement, src_data_rank, rows: Optional[torch.Tensor] = None):
    """Replaces parameter ``name`` of ``module`` (if present) by a DTensor placed ``placement``, its rows first
    reordered by ``rows`` (the rank-major layout)."""
    param = getattr(module, name, None)
    if param is None:
        return
    data = param.detach() if rows is None else param.detach()[rows.to(param.device)]
    sharded = distribute_tensor(data, mesh, [placement], src_data_rank=src_data_rank)
    module.register_parameter(name, nn.Parameter(sharded, requires_grad=param.requires_grad))


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
    blockfuse's norm ops on the stream itself, which find the weights replicated."""

    def _replicate_module_fn(self, name: str, module: nn.Module, mesh):
        for param_name, _ in list(module.named_parameters(recurse=False)):
            _distribute(module, param_name, mesh, Replicate(), self.src_data_rank)


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

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts)
        return outputs.to_local() if use_local_output else outputs


def _apply_child(style: ParallelStyle, parent: ParallelStyle, module: nn.Module, mesh) -> None:
    style.src_data_rank = parent.src_data_rank
    style._apply(module, mesh)


class AttentionParallel(ParallelStyle):
    """Head-parallel attention (eager :class:`Attention` or :class:`FusedAttention`): each rank its ``heads / tp``
    query heads and ``kv_heads / tp`` key/value heads.

    * eager: the input (``Shard(1)`` under sequence parallelism, else replicated) all-gathered to a replicated
      DTensor as it enters; ``q_proj``, ``k_proj``, ``v_proj`` ``ColwiseParallel`` (plain local outputs, this
      rank's heads); ``o_proj`` ``RowwiseParallel``;
    * fused: ``qkv_proj`` column-parallel in the rank-major layout (its input gathered there: the reordered
      block calls ``attend`` directly), the module's ``shards`` set to tp so that it splits and views its
      local heads; ``o_proj`` ``RowwiseParallel``.

    ``o_proj``'s output: reduce-scattered to a ``Shard(1)`` DTensor under sequence parallelism, else all-reduced
    to a plain replicated tensor."""

    def __init__(self, *, sequence_parallel: bool = True):
        super().__init__()
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        if not isinstance(module, (Attention, FusedAttention)):
            raise TypeError(f"AttentionParallel: expected a blockfuse Attention or FusedAttention, got "
                            f"{type(module).__name__}")
        config, tp = module.config, mesh.size()
        _check_heads(config, tp)
        layout = _layout(self.sequence_parallel)
        if isinstance(module, FusedAttention):
            rows = rank_major_rows((config.q_width, config.kv_width, config.kv_width), tp)
            _apply_child(_RankMajorColwise(rows, input_layouts=layout), self, module.qkv_proj, mesh)
            module.shards = tp
        else:
            module.register_forward_pre_hook(
                lambda _, args: (_gathered(args[0], mesh, layout, local=False), *args[1:]))
            for name in ("q_proj", "k_proj", "v_proj"):
                _apply_child(ColwiseParallel(), self, getattr(module, name), mesh)
        _apply_child(_RowwiseParallel(output_layouts=layout, use_local_output=not self.sequence_parallel), self,
                     module.o_proj, mesh)
        return module


class FeedForwardParallel(ParallelStyle):
    """Column-then-row-parallel MLP (eager :class:`FeedForward` or :class:`FusedFeedForward`): each rank its
    ``ffn_hidden / tp`` hidden columns.

    * eager: the input all-gathered to a replicated DTensor as it enters; ``gate_proj`` and ``up_proj`` (or
      ``fc1``) ``ColwiseParallel``, ``down_proj`` (or ``fc2``) ``RowwiseParallel``;
    * fused: the module runs its one op (``gated_mlp``, ``fused_mlp``) on plain local tensors: its input is
      all-gathered to a local tensor, ``gate_up_proj`` placed ``Shard(0)`` in the rank-major layout (each rank
      [its gate rows | its up rows]) or ``fc1`` ``Shard(0)``, ``down_proj`` / ``fc2`` ``Shard(1)``, and its
      output, this rank's partial sum, becomes a ``Partial()`` DTensor reduced here, the output bias added after.

    The output: reduce-scattered to a ``Shard(1)`` DTensor under sequence parallelism, else all-reduced to a
    plain replicated tensor."""

    def __init__(self, *, sequence_parallel: bool = True):
        super().__init__()
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        if not isinstance(module, (FeedForward, FusedFeedForward)):
            raise TypeError(f"FeedForwardParallel: expected a blockfuse FeedForward or FusedFeedForward, got "
                            f"{type(module).__name__}")
        config, tp = module.config, mesh.size()
        _check_hidden(config, tp)
        layout = _layout(self.sequence_parallel)
        if isinstance(module, FeedForward):
            module.register_forward_pre_hook(lambda _, args: (_gathered(args[0], mesh, layout, local=False),))
            inner = ("gate_proj", "up_proj") if config.gated else ("fc1",)
            for name in inner:
                _apply_child(ColwiseParallel(), self, getattr(module, name), mesh)
            outer = module.down_proj if config.gated else module.fc2
            _apply_child(_RowwiseParallel(output_layouts=layout, use_local_output=not self.sequence_parallel), self,
                         outer, mesh)
            return module
        if config.gated:
            inner, outer = module.gate_up_proj, module.down_proj
            rows = rank_major_rows((config.ffn_hidden, config.ffn_hidden), tp)
        else:
            inner, outer, rows = module.fc1, module.fc2, None
        for name in ("weight", "bias"):
            _distribute(inner, name, mesh, Shard(0), self.src_data_rank, rows)
        _distribute(outer, "weight", mesh, Shard(1), self.src_data_rank)
        _distribute(outer, "bias", mesh, Replicate(), self.src_data_rank)
        module.shards = tp

        def reduce_output(_, args, partial_sum):
            out = DTensor.from_local(partial_sum, mesh, [Partial()], run_check=False).redistribute(mesh, [layout])
            if outer.bias is not None:
                out = out + outer.bias
            return out if self.sequence_parallel else out.to_local()

        module.register_forward_pre_hook(lambda _, args: (_gathered(args[0], mesh, layout, local=True),))
        module.register_forward_hook(reduce_output)
        return module
