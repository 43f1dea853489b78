"""``linear_cross_entropy`` with the LM head sharded on the vocabulary across a tensor-parallel group.

The weight is a DTensor ``Shard(0)`` on a 1-D device mesh (``ColwiseParallel`` of the LM head); the hidden
states are a DTensor ``Replicate()`` on the same mesh (the same tokens on every rank). Each rank makes
the logits of its own classes only, chunk by chunk as on one device, and the ranks exchange per token
numbers, never the weight or the logits:

* a chunk's log-sum-exp: each rank's over its classes (the row kernel, ``PARTIAL``), then one all-reduce of
  the maximum and one of the rescaled sums;
* the loss terms linear in the logits (the target's logit, which one rank holds, and the sum of the
  logits for label smoothing): in the second all-reduce;
* d hidden: each rank's ``dlogits @ W_shard``, summed by one all-reduce at the end; d weight and d bias stay
  sharded like the weight.

Runs eagerly (the all-reduces are ``torch.distributed`` calls on the group); the result is replicated.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from blockfuse.ops.cross_entropy import (
    add_chunk_gradients, claim_first_backward, combined_loss, full_precision_reductions, is_dtensor, launch_rows,
    logits_buffer, logits_into, loss_scale, scale_gradients,
)
from blockfuse.ops.launch import empty_if_none


def _vocab_shard(weight) -> tuple[int, int]:
    """(first class of this rank's shard, classes in all) of a ``Shard(0)`` DTensor weight."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    _, offset = compute_local_shape_and_global_offset(weight.shape, weight.device_mesh, weight.placements)
    return int(offset[0]), int(weight.shape[0])


def check_vocab_parallel(hidden, weight, target, bias) -> None:
    """Clear errors for sharded inputs this path does not take."""
    from torch.distributed.tensor import Replicate, Shard

    mesh = weight.device_mesh
    if mesh.ndim != 1 or tuple(weight.placements) != (Shard(0),):
        raise ValueError(f"weight: a DTensor weight must be sharded on the vocabulary, Shard(0) on a 1-D mesh "
                         f"(the LM head under tensor parallelism), got {tuple(weight.placements)} on a "
                         f"{mesh.ndim}-D mesh. Under FSDP2 call the loss inside the head's forward, where "
                         "fully_shard has gathered the weight (blockfuse.patch(model, loss=True) does)")
    if not is_dtensor(hidden):
        raise ValueError("hidden: with a DTensor weight, hidden must be a DTensor Replicate() on the weight's mesh "
                         "(vocabulary parallelism: every rank holds the same tokens). A plain tensor would be "
                         "ambiguous: under FSDP2 each rank holds different tokens and the weight must be gathered "
                         "first (call the loss inside the head's forward: blockfuse.patch(model, loss=True) does)")
    for name, t, placement in (("hidden", hidden, Replicate()), ("target", target, Replicate()),
                               ("bias", bias, Shard(0))):
        if is_dtensor(t) and (t.device_mesh != mesh or tuple(t.placements) != (placement,)):
            raise ValueError(f"{name}: expected a DTensor {placement} on the weight's mesh (or a plain tensor), "
                             f"got {tuple(t.placements)}")
    if bias is not None and not is_dtensor(bias):
        raise ValueError("bias: with a sharded weight the bias must be a DTensor Shard(0) like it")


def _all_reduce(t: Tensor, op, group) -> Tensor:
    dist.all_reduce(t, op=op, group=group)
    return t


def _combine(lse: Tensor, linear: Tensor, target: Tensor, ignore_index: int, z_loss: float, group):
    """Every rank's per-row log-sum-exp and linear loss terms -> the whole vocabulary's (lse, loss)."""
    top = _all_reduce(lse.clone(), dist.ReduceOp.MAX, group)
    # NOTE: one all-reduce carries both sums (the rescaled exponentials and the linear terms).
    sums = _all_reduce(torch.stack([torch.exp(lse - top), linear]), dist.ReduceOp.SUM, group)
    lse_all = top + torch.log(sums[0])
    return lse_all, combined_loss(lse_all, sums[1], target, ignore_index, z_loss)


def _chunks(h2, weight, bias, target, scale, config, shard, group, *, forward: bool, lse_all=None,
            grad_hidden: bool, grad_weight: bool, grad_bias: bool):
    """The chunk loop on this rank's classes. forward: (loss, lse, dh, dw, db) with the loss of the whole
    vocabulary; otherwise (the backward of reduction "none": ``lse_all`` given, ``scale`` per row) the
    gradients only. dh is summed over the ranks; dw and db are this rank's shard."""
    ignore_index, smoothing, softcap, z_loss, _, chunk = config
    tokens, vocab = h2.shape[0], weight.shape[0]
    write_grad = grad_hidden or grad_weight or grad_bias
    dh = torch.zeros_like(h2) if grad_hidden else None
    dw = torch.zeros_like(weight, memory_format=torch.contiguous_format) if grad_weight else None
    db = torch.zeros((vocab,), dtype=torch.float32, device=h2.device) if grad_bias else None
    loss = h2.new_zeros((tokens,), dtype=torch.float32) if forward else None
    lse = h2.new_zeros((tokens,), dtype=torch.float32) if forward else lse_all
    z_buffer = logits_buffer(h2, min(chunk, max(tokens, 1)), vocab)
    rows_scale = scale
    with full_precision_reductions():
        for i, start in enumerate(range(0, tokens, chunk)):
            rows = slice(start, min(start + chunk, tokens))
            h_rows, t_rows = h2[rows], target[rows]
            z = z_buffer[: h_rows.shape[0]]
            logits_into(h_rows, weight, bias, z)
            if forward:
                linear = torch.empty_like(lse[rows])
                local_lse = torch.empty_like(linear)
                launch_rows(z, t_rows, linear, local_lse, None, ignore_index, smoothing, softcap, z_loss,
                             lse_given=False, write_grad=False, scale_per_row=False, shard=shard, partial=True,
                             padded=True)
                lse[rows], loss[rows] = _combine(local_lse, linear, t_rows, ignore_index, z_loss, group)
            if not write_grad:
                continue
            if not forward:
                rows_scale = scale[rows]
            launch_rows(z, t_rows, None, lse[rows], rows_scale, ignore_index, smoothing, softcap, z_loss,
                         lse_given=True, write_grad=True, scale_per_row=not forward, shard=shard, padded=True)
            add_chunk_gradients(z, h_rows, weight, rows, i == 0, dh, dw, db)  # dh: this rank's classes' share
    if dh is not None:
        _all_reduce(dh, dist.ReduceOp.SUM, group)
    return loss, lse, dh, dw, db


class _VocabParallelFunction(torch.autograd.Function):
    """As ``cross_entropy._LinearCrossEntropyFunction``, on this rank's block of classes; ``parallel``:
    (vocab_start, vocab_total, process group)."""

    @staticmethod
    def forward(ctx, h2, weight, bias, target, config, parallel):
        ignore_index, smoothing, softcap, z_loss, reduction, chunk = config
        vocab_start, vocab_total, group = parallel
        shard = (vocab_start, vocab_total)
        grads = ctx.needs_input_grad[:3] if reduction != "none" else (False, False, False)
        count, scale = loss_scale(target, ignore_index, reduction)
        loss, lse, dh, dw, db = _chunks(h2, weight, bias, target, scale, config, shard, group, forward=True,
                                        grad_hidden=grads[0], grad_weight=grads[1], grad_bias=grads[2])
        if reduction == "none":
            ctx.save_for_backward(h2, weight, bias, target, lse)
        else:
            loss = loss.sum() / count if reduction == "mean" else loss.sum()
            ctx.save_for_backward(*(empty_if_none(t, h2) for t in (dh, dw, db)))
        ctx.config, ctx.parallel = config, parallel
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.scaled = False
        ctx.mark_non_differentiable(lse)
        return loss, lse

    @staticmethod
    def backward(ctx, dloss, dlse):
        config = ctx.config
        vocab_start, vocab_total, group = ctx.parallel
        grad_hidden, grad_weight, grad_bias = ctx.needs_input_grad[:3]
        if config[4] == "none":
            h2, weight, bias, target, lse = ctx.saved_tensors
            _, _, dh, dw, db = _chunks(h2, weight, bias, target, dloss.float().contiguous(), config,
                                       (vocab_start, vocab_total), group, forward=False, lse_all=lse,
                                       grad_hidden=grad_hidden, grad_weight=grad_weight, grad_bias=grad_bias)
        else:
            claim_first_backward(ctx)
            dh, dw, db = ctx.saved_tensors
            scale_gradients(dh, dw, db, dloss.float())
        return (dh if grad_hidden else None, dw if grad_weight else None,
                db.to(ctx.bias_dtype) if grad_bias else None, None, None, None)


def vocab_parallel_linear_cross_entropy(hidden, weight, target, bias, config, return_lse: bool):
    """The loss (a DTensor ``Replicate()``) and, with ``return_lse``, the per-token log-sum-exp. ``config`` as
    ``_LinearCrossEntropyFunction``'s, the chunk chosen from this rank's classes."""
    from torch.distributed.tensor import DTensor, Replicate

    check_vocab_parallel(hidden, weight, target, bias)
    mesh = weight.device_mesh
    h = hidden.to_local()
    t = target.to_local() if is_dtensor(target) else target
    d = h.shape[-1]
    h2 = h.reshape(-1, d)
    if h2.stride(-1) != 1 or (h2.shape[0] > 1 and h2.stride(0) != d):
        h2 = h2.contiguous()
    vocab_start, vocab_total = _vocab_shard(weight)
    local_weight = weight.to_local()
    local_bias = None if bias is None else bias.to_local()
    loss, lse = _VocabParallelFunction.apply(h2, local_weight, local_bias, t.reshape(-1), config,
                                             (vocab_start, vocab_total, mesh.get_group()))
    lead = h.shape[:-1]
    if config[4] == "none":
        loss = loss.view(lead)
    lse = lse.view(lead)
    loss = DTensor.from_local(loss, mesh, [Replicate()], run_check=False)
    lse = DTensor.from_local(lse, mesh, [Replicate()], run_check=False)
    return (loss, lse) if return_lse else loss

