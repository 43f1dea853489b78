"""How blockfuse's launcher ops run on DTensors: their sharding rules.

An op called with a DTensor goes through the dispatcher (``launch.Launcher``), where DTensor looks up the op's
rule here, runs the op on each rank's local tensors and wraps the outputs with the placements the rule gives.
Nothing is gathered: a placement no rule accepts is redistributed by DTensor to one that is, and the rules
accept every placement that is exact locally.

* the norms: an input sharded on any dimension but the normalized (last) one, the weight and bias
  replicated. The outputs and statistics are sharded like the input; the weight and bias gradients are each
  rank's partial sums (``Partial()``), reduced by DTensor where they are used;
* the gated activations (SwiGLU, GeGLU): elementwise, so gate and up sharded alike on any dimension, the
  hidden one included (the MLP under tensor parallelism); packed [gate | up] on any but the last;
* bias-dropout-add without dropout: elementwise, the bias replicated or sharded with the last dimension;
* RoPE: q and k sharded on the batch (per-token tables and position ids with them) or on the heads (GQA
  keeps its ratio on each rank); a sequence shard would need its positions' offset and is refused.

Registered once, at the first DTensor call (``register_sharding_rules``), so that ``import blockfuse`` does not
import ``torch.distributed``.
"""

from __future__ import annotations

import functools

import torch

PRE = 1  # ops/norm.py's residual mode with the residual stream as an output


def _rows_dims(spec) -> range:
    """The dimensions of a (..., normalized) input that a norm may be sharded on."""
    return range(spec.ndim - 1)


def _refuse_other_placements(name: str, spec, dims: range, op: str) -> None:
    """A clear error for an input placed where ``op`` would need it gathered (DTensor would otherwise
    redistribute it silently to a placement the rule accepts)."""
    from torch.distributed.tensor import Replicate, Shard

    for placement in spec.placements:
        if isinstance(placement, Replicate) or (isinstance(placement, Shard) and placement.dim % spec.ndim in dims):
            continue
        allowed = ", ".join(f"Shard({d})" for d in dims)
        got = f"Shard({placement.dim % spec.ndim})" if isinstance(placement, Shard) else f"{type(placement).__name__}()"
        raise ValueError(f"{name}: blockfuse's {op} on a DTensor takes Replicate() or {allowed} for a "
                         f"{spec.ndim}-d input, got {got}: it would have to be gathered; shard it "
                         "differently or pass the full tensor")


def _norm_forward_rule(x, weight, bias, residual, seed, eps, mode, dropout_p, is_rms, cast_before_weight,
                       activation, stats):
    """(y, s, mean, rstd): sharded like x; an absent one (an empty tensor) replicated."""
    from torch.distributed.tensor import Replicate, Shard

    _refuse_other_placements("x", x, _rows_dims(x), "norm")
    present = (True, mode == PRE, stats and not is_rms, stats)
    rules = []
    for placement in [Replicate(), *(Shard(d) for d in _rows_dims(x))]:
        outputs = [placement if here else Replicate() for here in present]
        inputs = [placement, None if weight is None else Replicate(), None if bias is None else Replicate(),
                  None if residual is None else placement, None if seed is None else Replicate()]
        rules.append((outputs, inputs + [None] * 7))
    return rules


def _norm_backward_rule(dy, ds, z, weight, bias, has_bias, mean, rstd, seed, mode, dropout_p, is_rms,
                        cast_before_weight, activation):
    """(dx, dres, dweight, dbias): dx and dres sharded like z; the parameters' gradients each rank's partial
    sums (also when absent: an empty tensor, whatever has_bias is)."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    rules = []
    for placement in [Replicate(), *(Shard(d) for d in _rows_dims(z))]:
        reduced = Replicate() if isinstance(placement, Replicate) else Partial()
        dres = placement if mode == PRE and dropout_p > 0 else Replicate()
        inputs = [placement, None if ds is None else placement, placement, None if weight is None else Replicate(),
                  None if bias is None else Replicate(), None, None if mean is None else placement, placement,
                  None if seed is None else Replicate()]
        rules.append(([placement, dres, reduced, reduced], inputs + [None] * 5))
    return rules


def _gated_forward_rule(gate, up, activation):
    """act(gate) * up is elementwise: separate gate and up sharded alike on any dimension (the hidden one
    too: tensor parallelism); a packed [gate | up] on any but the last (each rank must hold both halves)."""
    from torch.distributed.tensor import Replicate, Shard

    dims = range(gate.ndim) if up is not None else range(gate.ndim - 1)
    _refuse_other_placements("gate", gate, dims, "packed gated activation" if up is None else "gated activation")
    return [([p], [p, None if up is None else p, None]) for p in [Replicate(), *(Shard(d) for d in dims)]]


def _gated_backward_rule(dy, gate, up, activation, gate_grad, up_grad):
    """(dgate, dup) sharded like the inputs (both made on DTensors: ops/gated.py); packed, dup is empty."""
    from torch.distributed.tensor import Replicate, Shard

    dims = range(gate.ndim) if up is not None else range(gate.ndim - 1)
    return [([p, Replicate() if up is None else p], [p, p, None if up is None else p, None, None, None])
            for p in [Replicate(), *(Shard(d) for d in dims)]]


def _bias_dropout_add_forward_rule(x, bias, residual, seed, p):
    """residual + (x + bias), elementwise (no dropout on DTensors: ops/bias_dropout_add.py): x and residual
    sharded alike on any dimension; the bias replicated, or sharded with them on the last one."""
    from torch.distributed.tensor import Replicate, Shard

    rules = []
    for placement in [Replicate(), *(Shard(d) for d in range(x.ndim))]:
        on_last = isinstance(placement, Shard) and placement.dim == x.ndim - 1
        bias_placement = None if bias is None else (Shard(0) if on_last else Replicate())
        rules.append(([placement], [placement, bias_placement, placement, None, None]))
    return rules


def _bias_dropout_add_backward_rule(dy, seed, p, bias_dtype, need_dx):
    """(dx, d bias): dx is empty without dropout (replicated); d bias each rank's partial sum over its rows,
    or sharded when the rows' last dimension is."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    rules = []
    for placement in [Replicate(), *(Shard(d) for d in range(dy.ndim))]:
        if isinstance(placement, Replicate):
            dbias = Replicate()
        else:
            dbias = Shard(0) if placement.dim == dy.ndim - 1 else Partial()
        rules.append(([Replicate(), dbias], [placement, None, None, None, None]))
    return rules


def _heads_dim(layout: str) -> int:
    return 2 if layout == "bshd" else 1  # (batch, seq, heads, dim) or (batch, heads, seq, dim)


def _rotary_placements(q, cos, position_ids, layout):
    """(q / k placement, table placement, position ids placement) for each way RoPE runs locally: the
    batch (the tables too when they are per token), or the heads (tables and positions replicated)."""
    from torch.distributed.tensor import Replicate, Shard

    heads = _heads_dim(layout)
    _refuse_other_placements("q", q, (0, heads), "rotary (a sequence shard would need its position offset)")
    batch_table = Shard(0) if cos.ndim == 3 else Replicate()  # Hugging Face's per-token (batch, seq, width)
    batch_positions = None if position_ids is None else (Shard(0) if position_ids.ndim == 2 else Replicate())
    replicated_positions = None if position_ids is None else Replicate()
    return [(Replicate(), Replicate(), replicated_positions), (Shard(0), batch_table, batch_positions),
            (Shard(heads), Replicate(), replicated_positions)]


def _out_placement(placement, layout: str, out_layout: str):
    from torch.distributed.tensor import Shard

    if isinstance(placement, Shard) and placement.dim == _heads_dim(layout):
        return Shard(_heads_dim(out_layout))
    return placement


def _rotary_forward_rule(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout, out_layout):
    rules = []
    for placement, table, positions in _rotary_placements(q, cos, position_ids, layout):
        out = _out_placement(placement, layout, out_layout)
        rules.append(([out, out], [placement, placement, table, table, positions] + [None] * 5))
    return rules


def _rotary_inplace_rule(q, k, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout):
    return [([], [placement, placement, table, table, positions] + [None] * 4)
            for placement, table, positions in _rotary_placements(q, cos, position_ids, layout)]


def _rotary_backward_rule(dq_out, dk_out, cos, sin, position_ids, seq_offset, rotary_dim, interleaved, layout,
                          out_layout, q_strides, k_strides):
    """(dq, dk) placed like q and k from output gradients placed like the outputs; an absent one (None in,
    an empty tensor out) replicated."""
    from torch.distributed.tensor import Replicate

    present = dq_out if dq_out is not None else dk_out
    rules = []
    for placement, table, positions in _rotary_placements(_AsInputSpec(present, out_layout, layout), cos,
                                                           position_ids, layout):
        out = _out_placement(placement, layout, out_layout)
        outputs = [placement if g is not None else Replicate() for g in (dq_out, dk_out)]
        inputs = [None if g is None else out for g in (dq_out, dk_out)]
        rules.append((outputs, inputs + [table, table, positions] + [None] * 7))
    return rules


class _AsInputSpec:
    """An output gradient's spec seen as the input's (heads moved back from out_layout to layout), for
    :func:`_rotary_placements`' check of its placements."""

    def __init__(self, spec, out_layout: str, layout: str):
        from torch.distributed.tensor import Shard

        self.ndim = spec.ndim
        self.placements = tuple(Shard(_heads_dim(layout)) if isinstance(p, Shard) and p.dim == _heads_dim(out_layout)
                                else p for p in spec.placements)


@functools.lru_cache(maxsize=None)
def register_sharding_rules() -> None:
    """Registers the rule of every launcher op that has one with DTensor (once; a launcher's module has
    registered its op by the time the launcher runs)."""
    from torch.distributed.tensor.experimental import register_sharding

    ops = torch.ops.blockfuse
    register_sharding(ops.norm_fwd.default)(_norm_forward_rule)
    register_sharding(ops.norm_bwd.default)(_norm_backward_rule)
    register_sharding(ops.gated_fwd.default)(_gated_forward_rule)
    register_sharding(ops.gated_bwd.default)(_gated_backward_rule)
    register_sharding(ops.bias_dropout_add_fwd.default)(_bias_dropout_add_forward_rule)
    register_sharding(ops.bias_dropout_add_bwd.default)(_bias_dropout_add_backward_rule)
    register_sharding(ops.rotary_fwd.default)(_rotary_forward_rule)
    register_sharding(ops.rotary_fwd_.default)(_rotary_inplace_rule)
    register_sharding(ops.rotary_bwd.default)(_rotary_backward_rule)


def is_dtensor(t) -> bool:
    """True for a DTensor, without importing torch.distributed."""
    return t is not None and type(t).__name__ == "DTensor" and hasattr(t, "device_mesh")


def local_shard(t):
    """A DTensor's local shard (differentiable: its gradient reaches the DTensor), else ``t`` as it is."""
    return t.to_local() if is_dtensor(t) else t
