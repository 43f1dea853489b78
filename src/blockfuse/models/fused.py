"""The fused block's modules: the eager modules' parameters in fused form (one QKV GEMM, one gate|up GEMM)
running on blockfuse ops, the norm helpers that call the fused norms with a residual form per call, and the
state-dict hooks (:class:`_StackedLinear`) that save and load the fused weights under the eager names: split when
saving, concatenated when loading, each rank's rows under tensor parallelism."""

from __future__ import annotations

import contextlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import blockfuse.nn
from blockfuse.models.config import BlockConfig
from blockfuse.models.eager import _FP32Tables, _attend, rotary_half_tables
from blockfuse.models.saved_hooks import _without_saved_rotated_qk
from blockfuse.nn.fp8 import Float8Linear, plain_module, precastable
from blockfuse.ops.activation import ACTIVATIONS
from blockfuse.ops.fp8 import Recast, heads_transposed_cast
from blockfuse.ops.fp8_weights import cast_weights
from blockfuse.ops.fp8_act import act_fp8_delayed, cast_again, cast_again_quantized, fp8_linear_act, \
    linear_act_fp8_delayed
from blockfuse.ops.gated import geglu, swiglu
from blockfuse.ops.launch import tracing
from blockfuse.ops.mlp import fused_mlp, gated_mlp
from blockfuse.ops.norm import layer_norm, norm_for_fp8_projection, norm_for_tensorwise_projection, rms_norm
from blockfuse.ops.rotary import rotary, rotary_packed
from blockfuse.ops.sharding import is_dtensor, local_shard
from blockfuse.runtime import use_triton


def _fused_norm(config: BlockConfig, width: int) -> nn.Module:
    if config.norm == "layer":
        return blockfuse.nn.LayerNorm(width, eps=config.norm_eps, bias=config.bias)
    return blockfuse.nn.RMSNorm(width, eps=config.norm_eps, cast_before_weight=config.rms_cast_before_weight)


def _norm(module: nn.Module, x: Tensor, residual: Optional[Tensor] = None, mode: str = "pre", p: float = 0.0,
          training: bool = True):
    """Calls a blockfuse norm module's functional with a residual form chosen per call. Another norm module
    (tensor parallelism's head-sharded QK-norm, blockfuse.distributed) is called as it is, without residual."""
    if isinstance(module, blockfuse.nn.LayerNorm):
        return layer_norm(x, module.weight, module.bias, module.eps, residual=residual, residual_mode=mode,
                          dropout_p=p, training=training)
    if isinstance(module, blockfuse.nn.RMSNorm):
        return rms_norm(x, module.multiplier(), module.eps, residual=residual, residual_mode=mode, dropout_p=p,
                        training=training, cast_before_weight=module.cast_before_weight)
    if residual is not None or p:
        raise TypeError(f"{type(module).__name__}: a norm that is not blockfuse's takes no residual or dropout")
    return module(x)


def fp8_input_recipe(consumer: nn.Module, x: Tensor) -> Optional[str]:
    """What the norm before ``consumer`` writes for it, when ``consumer`` is a :class:`Float8Linear` and the norm
    runs its kernels on ``x``: ``"rowwise"``, its output in e4m3 with each row's scale (:func:`_norm_fp8`: no cast
    pass before the GEMM, and in a training step no output in x's dtype); ``"tensorwise"``, its output in x's
    dtype with its amax (:func:`_norm_amax`: the layer's cast reads it once). Else None: the norm writes x's dtype
    and the layer casts it as it would any input.

    NOTE: a tensorwise layer's scale is its own tensor's amax (torchao's recipe), not the norms' delayed-scaling
    FP8 output, which scales by an amax history instead: another recipe's numbers. Under tensor parallelism (the
    layer's weight a DTensor) None: the norm's output is gathered along the sequence on its way to the layer, and
    each rank's layer casts its own input (``Float8Linear._forward_sharded``)."""
    if isinstance(consumer, Float8Linear) and use_triton(x) and not is_dtensor(consumer.weight):
        return consumer.recipe
    return None


def _norm_amax(module: nn.Module, x: Tensor, residual: Optional[Tensor] = None, mode: str = "pre", p: float = 0.0,
               training: bool = True, recast: Optional[list] = None):
    """:func:`_norm` with the output for one tensorwise FP8 projection: ``((y, amax), stream)``
    (:func:`blockfuse.ops.norm.norm_for_tensorwise_projection`; pass ``x_amax=amax`` to the :class:`Float8Linear`).
    ``recast``: a list that a traced call appends the projection's ``x_cast`` to."""
    if isinstance(module, blockfuse.nn.LayerNorm):
        return norm_for_tensorwise_projection(x, module.weight, module.bias, module.eps, residual, mode, p, training,
                                              False, recast=recast)
    if isinstance(module, blockfuse.nn.RMSNorm):
        return norm_for_tensorwise_projection(x, module.multiplier(), None, module.eps, residual, mode, p, training,
                                              True, module.cast_before_weight, recast=recast)
    raise TypeError(f"{type(module).__name__}: a norm that is not blockfuse's folds no amax")


def _tensorwise_pair(inner: nn.Module, outer: nn.Module) -> bool:
    """Both layers of an MLP are tensorwise :class:`Float8Linear` ones (the first then runs with the activation and
    folds the amaxes of the casts, :func:`blockfuse.ops.fp8_act.fp8_linear_act`)."""
    return all(isinstance(layer, Float8Linear) and layer.recipe == "tensorwise" for layer in (inner, outer))


def cast_fp8_weights(block: nn.Module) -> None:
    """Makes the e4m3 weight casts of a fused block's tensorwise and delayed FP8 layers that keep them, in two launches
    (:func:`blockfuse.ops.fp8_weights.cast_weights`), before its first layer runs: each layer then finds its cast
    kept, where it would have made it with two launches of its own (te-4layer's FP8 step: 32 launches -> 8). Layers
    :func:`blockfuse.nn.fp8.precastable` leaves out cast their own, as before."""
    attn, ffn = block.attn, block.ffn
    layers = (getattr(attn, "qkv_proj", None), getattr(attn, "o_proj", None),
              *(getattr(ffn, name, None) for name in ("gate_up_proj", "down_proj", "fc1", "fc2")))
    weights = [layer.weight for layer in layers if precastable(layer)]
    if weights:
        cast_weights(weights)


def _delayed_pair(inner: nn.Module, outer: nn.Module) -> bool:
    """Both layers of an MLP are delayed-scaling :class:`Float8Linear` ones (the activation then writes the down
    projection's input in e4m3 with that layer's x history, :func:`blockfuse.ops.fp8_act.act_fp8_delayed`)."""
    return all(isinstance(layer, Float8Linear) and layer.recipe == "delayed" for layer in (inner, outer))


def _norm_fp8(module: nn.Module, x: Tensor, residual: Optional[Tensor] = None, mode: str = "pre", p: float = 0.0,
              training: bool = True, scaling=None, recast: Optional[list] = None):
    """:func:`_norm` with the output for one rowwise FP8 projection: ``((q, scale, proxy), stream)``
    (:func:`blockfuse.ops.norm.norm_for_fp8_projection`; pass all three to the :class:`Float8Linear`).
    ``scaling``: tensorwise instead, with this delayed-scaling state (a ``"delayed"`` projection's x history);
    ``recast``: a list that a traced call appends the projection's ``x_cast`` to (norm_for_fp8_projection's)."""
    if isinstance(module, blockfuse.nn.LayerNorm):
        return norm_for_fp8_projection(x, module.weight, module.bias, module.eps, residual, mode, p, training, False,
                                       fp8_scaling=scaling, recast=recast)
    if isinstance(module, blockfuse.nn.RMSNorm):
        return norm_for_fp8_projection(x, module.multiplier(), None, module.eps, residual, mode, p, training, True,
                                       module.cast_before_weight, fp8_scaling=scaling, recast=recast)
    raise TypeError(f"{type(module).__name__}: a norm that is not blockfuse's has no FP8 output")


def _split_rows(t: Tensor, widths: tuple[int, ...], shards: int) -> list[Tensor]:
    """``t.split(widths)`` along the rows; for a fused weight split across ``shards`` ranks (a DTensor
    Shard(0) of the rank-major layout, see :class:`_StackedLinear`) each rank splits its own rows, and
    each part is a DTensor Shard(0) of that part's weight."""
    if shards == 1 or not is_dtensor(t):
        return list(t.split(widths, dim=0))
    from torch.distributed.tensor import DTensor

    parts = t.to_local().split([width // shards for width in widths], dim=0)
    return [DTensor.from_local(part, t.device_mesh, t.placements, run_check=False) for part in parts]


def _join_rows(name: str, parts: list[Tensor], shards: int, current: Optional[Tensor]) -> Tensor:
    """The inverse of :func:`_split_rows`: the parts' rows concatenated. Split across ranks (``current``: the
    fused parameter, a DTensor), each rank's own rows: from parts placed Shard(0) (a sharded state dict), or
    its 1/shards of whole parts (a full one: ``torch.distributed.checkpoint``'s ``full_state_dict`` hands
    these names over as they are, since they are no parameter's)."""
    if shards == 1:
        return torch.cat(parts)
    from torch.distributed.tensor import DTensor, Shard

    mesh = current.device_mesh
    if all(is_dtensor(t) and tuple(t.placements) == (Shard(0),) for t in parts):
        local = [t.to_local() for t in parts]
    elif not any(is_dtensor(t) for t in parts):
        local = [t.chunk(shards, dim=0)[mesh.get_local_rank()] for t in parts]
    else:
        got = [tuple(t.placements) if is_dtensor(t) else "a plain tensor" for t in parts]
        raise ValueError(f"{name}: a tensor-parallel fused weight loads its parts as DTensors placed Shard(0) "
                         f"(the sharded state dict of the same plan) or as whole tensors, got {got}")
    return DTensor.from_local(torch.cat(local), mesh, current.placements, run_check=False)


class _StackedLinear(nn.Module):
    """Mixin: a Linear whose rows are the concatenation of several eager Linears, saved and loaded
    under the eager names (``{prefix}{part}.weight``, ``.bias``).

    Under tensor parallelism (:func:`blockfuse.distributed.tp_plan`) ``shards`` is the number of ranks:
    rank r's rows of the fused Linear are its 1/shards of every part in order ([its q heads | its k
    heads | its v heads], [its gate rows | its up rows]), a DTensor Shard(0) of that rank-major layout.
    Saved, each part is a DTensor Shard(0) of the part's own weight (the eager layout under the same
    plan), and loading takes the same."""

    shards = 1

    def _register_split(self, fused_name: str, parts: tuple[str, ...], widths_of) -> None:
        self._split = (fused_name, parts, widths_of)
        if hasattr(self, "register_state_dict_post_hook"):
            self.register_state_dict_post_hook(self._split_state)
        else:  # torch < 2.5
            self._register_state_dict_hook(self._split_state)
        self.register_load_state_dict_pre_hook(self._join_state)

    @staticmethod
    def _split_state(module, state_dict, prefix, local_metadata):
        fused_name, parts, widths_of = module._split
        for suffix in ("weight", "bias"):
            key = f"{prefix}{fused_name}.{suffix}"
            if key not in state_dict:
                continue
            for part, tensor in zip(parts, _split_rows(state_dict.pop(key), widths_of(module), module.shards)):
                state_dict[f"{prefix}{part}.{suffix}"] = tensor

    @staticmethod
    def _join_state(module, state_dict, prefix, *args):
        fused_name, parts, _ = module._split
        for suffix in ("weight", "bias"):
            keys = [f"{prefix}{part}.{suffix}" for part in parts]
            if all(key in state_dict for key in keys):
                name = f"{prefix}{fused_name}.{suffix}"
                current = getattr(getattr(module, fused_name), suffix)
                state_dict[name] = _join_rows(name, [state_dict.pop(key) for key in keys], module.shards, current)


# A block with QK-norm and RoPE keeps no rotated q and k for attention's backward: they are made again there
# (FusedAttention.attend). False keeps them (an A/B knob for the benchmarks and tests).
RECOMPUTE_ROTATED_QK = True
# Grouped-query heads go to SDPA as they are where its fused kernels take them (eager.sdpa_takes_grouped_heads), not
# repeated first. False repeats them everywhere (an A/B knob for the benchmarks and tests).
NATIVE_GQA = True


class FusedAttention(_FP32Tables, _StackedLinear):
    """Attention on one QKV GEMM, fused QK-norm and rotary into the attention layout; always SDPA
    (``config.attention`` is the eager block's choice)."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        self.max_seq_len = config.max_seq_len
        d = config.d_model
        self.qkv_proj = nn.Linear(d, config.q_width + 2 * config.kv_width, bias=config.bias)
        self.o_proj = nn.Linear(config.q_width, d, bias=config.bias)
        if config.qk_norm:
            self.q_norm = _fused_norm(config, config.q_width)
            self.k_norm = _fused_norm(config, config.kv_width)
        if config.rope:
            self._register_tables()
        else:
            self.cos = self.sin = None
        self._register_split("qkv_proj", ("q_proj", "k_proj", "v_proj"),
                             lambda m: (m.config.q_width, m.config.kv_width, m.config.kv_width))

    def _make_tables(self):
        return rotary_half_tables(self.config.head_size, self.max_seq_len, self.config.rope_theta)

    def attend(self, x: Tensor, padding_mask: Optional[Tensor] = None, x_scale: Optional[Tensor] = None,
               x_proxy: Optional[Tensor] = None, x_amax: Optional[Tensor] = None, x_cast=None,
               heads_out: Optional[list] = None) -> Tensor:
        """Attention before the output projection: (batch, seq, q_width) for x (batch, seq, d_model)
        (under tensor parallelism, this rank's heads: q_width / shards). ``x_scale`` / ``x_proxy``: x is the
        e4m3 output of the norm before it with these rowwise scales and its stand-in for autograd
        (:func:`_norm_fp8`), for an FP8 QKV projection; ``x_amax``: x's amax, folded by the norm before it
        (:func:`_norm_amax`), for a tensorwise one, and ``x_cast`` the function that makes x^T's cast again for its
        weight gradient (``blockfuse.ops.norm.cast_again``). ``heads_out``: a list to which attention's output is
        appended as attention returned it, (batch, heads, seq, head_dim)."""
        cfg = self.config
        batch, seq, _ = x.shape
        heads, kv_heads = cfg.n_heads // self.shards, cfg.kv_heads // self.shards  # this rank's
        # (batch, seq, q_width), (batch, seq, kv_width) x 2: strided views of one GEMM's output, no copies
        widths = (heads * cfg.head_size, kv_heads * cfg.head_size, kv_heads * cfg.head_size)
        # NOTE: one Linear and a split, whose backward concatenates dq, dk and dv (with RoPE and no QK-norm,
        # rotary_packed below writes that gradient whole instead): a backward that takes them separately measured
        # slower and lowered no peak (benchmarks/NOTES.md, "Concatenated gradients").
        if x_amax is not None:
            qkv = self.qkv_proj(x, x_amax=x_amax, x_cast=x_cast)
        elif x_cast is not None:  # (a delayed layer's e4m3 input: its transpose made again for the weight gradient)
            qkv = self.qkv_proj(x, x_scale, x_proxy, x_cast=x_cast)
        else:
            qkv = self.qkv_proj(x) if x_scale is None else self.qkv_proj(x, x_scale, x_proxy)
        saving = contextlib.nullcontext()  # (the saved-tensor hooks attention runs under, below)
        if cfg.rope and not cfg.qk_norm:
            # NOTE: attention keeps v for its backward; as a view it would keep the whole qkv
            # output alive (3x its size). Copied, qkv is freed after the rotary kernel. With
            # QK-norm the norms keep qkv anyway (they save their inputs), and without RoPE q and
            # k are views of it: no copy there (a copy would keep one more (tokens, kv_width)
            # tensor per layer: 144 MiB a layer for siglip2, seen on an H200). The copy is made
            # by the rotary op, in its Function (ops/copy.py: Tensor.contiguous's strided copy ran
            # at a third of the bandwidth, and a Function of its own cost the host more), whose
            # backward writes qkv's gradient whole (no concatenation of dq, dk and dv).
            self._grow_tables(seq)
            q, k, v = rotary_packed(qkv, heads, kv_heads, cfg.head_size, self.cos, self.sin, heads_first=True,
                                    sole_consumer=True)
        else:
            q, k, v = qkv.split(widths, dim=-1)
            v = v.view(batch, seq, kv_heads, cfg.head_size).transpose(1, 2)
            q, k = self._normed_rotated(q, k, batch, seq, heads, kv_heads)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            if cfg.qk_norm and cfg.rope and RECOMPUTE_ROTATED_QK and self._own_qk_norms():
                # NOTE: the QK-norms keep q and k (views of qkv) for their backward; the rotated copies attention
                # would keep are made again in its backward from them (models/saved_hooks.py, _RecomputedTensors):
                # one (tokens, q_width + kv_width) tensor less a layer, for two norms and a rotary forward more.
                # (A context that does nothing where autograd does not record eagerly: no grad, torch.compile.)
                source = qkv.detach()  # (qkv's storage: the norms keep it anyway)

                def again():
                    q2, k2, _ = source.split(widths, dim=-1)
                    return self._normed_rotated(q2, k2, batch, seq, heads, kv_heads)

                saving = _without_saved_rotated_qk(q, k, qkv, again)
        # NOTE: q, k, v stay (batch, seq, heads, head_dim) in memory and are handed to attention as
        # transposed views: cuDNN and flash attention read them without a copy and write their
        # output in the same layout, so the reshape back to (batch, seq, d) below is a view (with
        # contiguous (batch, heads, seq, head_dim) inputs that reshape was a copy: ~25 us forward
        # at [4, 2048, 1024] on an H200; benchmarks/NOTES.md, "Blocks and memory").
        with saving:  # (q, k, v: (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim) memory)
            out = _attend(q, k, v, padding_mask, cfg.causal, native_gqa=NATIVE_GQA)
        if heads_out is not None:
            heads_out.append(out)
        return out.transpose(1, 2).reshape(batch, seq, widths[0])

    def _own_qk_norms(self) -> bool:
        """The QK-norms are blockfuse's own modules on one rank (a tensor-parallel norm, blockfuse.distributed, may
        reduce across ranks: not run again inside a backward)."""
        return (self.shards == 1 and isinstance(self.q_norm, (blockfuse.nn.RMSNorm, blockfuse.nn.LayerNorm))
                and isinstance(self.k_norm, (blockfuse.nn.RMSNorm, blockfuse.nn.LayerNorm)))

    def _normed_rotated(self, q: Tensor, k: Tensor, batch: int, seq: int, heads: int,
                        kv_heads: int) -> tuple[Tensor, Tensor]:
        """q and k (views of the QKV output) through the QK-norms and RoPE where the block has them, as
        (batch, seq, heads, head_dim) tensors."""
        cfg = self.config
        if cfg.qk_norm:
            q, k = _norm(self.q_norm, q), _norm(self.k_norm, k)
        q = q.view(batch, seq, heads, cfg.head_size)  # (batch, seq, heads, head_dim)
        k = k.view(batch, seq, kv_heads, cfg.head_size)
        if cfg.rope:
            self._grow_tables(seq)
            q, k = rotary(q, k, self.cos, self.sin, layout="bshd")  # contiguous (batch, seq, heads, head_dim)
        return q, k

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None, x_scale: Optional[Tensor] = None,
                x_proxy: Optional[Tensor] = None, x_amax: Optional[Tensor] = None,
                x_cast=None) -> Tensor:  # x: (batch, seq, d)
        if (torch.compiler.is_compiling() and isinstance(self.o_proj, Float8Linear)
                and self.o_proj.recipe in ("delayed", "tensorwise") and not is_dtensor(self.o_proj.weight)):
            # Traced, the output projection keeps nothing of its input but its 0-d scale: its weight gradient casts
            # attention's output (which attention keeps for its backward) again with it, as eagerly (fp8.Recast;
            # eagerly blockfuse's saved-tensor hooks tell the layer that its input is kept anyway).
            heads = []
            attended = self.attend(x, padding_mask, x_scale, x_proxy, x_amax, x_cast, heads)
            return self.o_proj(attended, x_cast=Recast(heads_transposed_cast, (), (heads[0],)))
        return self.o_proj(self.attend(x, padding_mask, x_scale, x_proxy, x_amax, x_cast))


class FusedFeedForward(_StackedLinear):
    """The MLP on one gate|up GEMM, the packed SwiGLU / GeGLU kernel and the down GEMM (GELU MLP: fc1
    with GELU in its GEMM's epilogue, fc2), the activation recomputed in the backward. With FP8 Linear
    layers (``blockfuse.fp8.convert``) the GEMMs run through them instead (:meth:`_forward_fp8`)."""

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        d, hidden = config.d_model, config.ffn_hidden
        if config.gated:
            self.gate_up_proj = nn.Linear(d, 2 * hidden, bias=config.bias)
            self.down_proj = nn.Linear(hidden, d, bias=config.bias)
            self._register_split("gate_up_proj", ("gate_proj", "up_proj"), lambda m: (hidden, hidden))
        else:
            self.fc1 = nn.Linear(d, hidden, bias=config.bias)
            self.fc2 = nn.Linear(hidden, d, bias=config.bias)

    def forward(self, x: Tensor, x_scale: Optional[Tensor] = None, x_proxy: Optional[Tensor] = None,
                x_amax: Optional[Tensor] = None, x_cast=None) -> Tensor:
        """``x_scale`` / ``x_proxy``: x is the e4m3 output of the norm before it with these rowwise scales and
        its stand-in for autograd (:func:`_norm_fp8`), for an FP8 first projection; ``x_amax``: x's amax, folded
        by the norm before it (:func:`_norm_amax`), for a tensorwise one, and ``x_cast`` the function that makes
        x^T's cast again for its weight gradient (``blockfuse.ops.norm.cast_again``)."""
        inner, outer = (self.gate_up_proj, self.down_proj) if self.config.gated else (self.fc1, self.fc2)
        if isinstance(inner, Float8Linear) or isinstance(outer, Float8Linear):
            return self._forward_fp8(x, inner, outer, x_scale, x_proxy, x_amax, x_cast)
        if x_scale is not None or x_amax is not None:
            raise ValueError("x_scale / x_amax: an FP8 input needs FP8 Linear layers (blockfuse.fp8.convert)")
        weights = (inner.weight, inner.bias, outer.weight, outer.bias)
        if self.shards > 1:
            # Tensor parallelism (blockfuse.distributed): the weights are DTensors; the op runs on this rank's
            # shards, and the output projection's bias is left to the plan, which adds it once to the sum of
            # the ranks' partial outputs.
            weights = (local_shard(inner.weight), local_shard(inner.bias), local_shard(outer.weight), None)
        if self.config.gated:
            # NOTE: one op for the whole MLP so the backward recomputes the activation instead of
            # keeping tokens x hidden alive (ops/mlp.py).
            return gated_mlp(x, *weights, self.config.mlp)
        # GELU MLP: the same op with an ungated activation; it keeps only x and the pre-activation, and
        # the backward recomputes the activation (ops/mlp.py).
        return fused_mlp(x, *weights, self.config.mlp)

    def _forward_fp8(self, x: Tensor, inner: nn.Module, outer: nn.Module, x_scale: Optional[Tensor] = None,
                     x_proxy: Optional[Tensor] = None, x_amax: Optional[Tensor] = None, x_cast=None) -> Tensor:
        """The MLP with FP8 Linear layers (``blockfuse.fp8.convert``): both GEMMs through the layers as modules
        (their casts and cached weight casts, FP8 dgrad and wgrad), the activation kernel between them. Both
        tensorwise: the first layer and the activation as one op whose kernels fold the amaxes of the casts on
        either side (:func:`blockfuse.ops.fp8_act.fp8_linear_act`). Without gradients and with a rowwise FP8
        down projection, the gated kernel writes its output in e4m3 with each row's scale in the same pass and
        the down projection takes it as it is (no cast pass).

        NOTE: not ``gated_mlp``, whose GEMMs are bf16 cuBLAS calls inside one op: here autograd keeps the
        activation's output for the down projection's backward (tokens x hidden, as eager does), so the FP8
        MLP trades the fused MLP's recomputation (its memory saving) for FP8 GEMMs."""
        mlp = self.config.mlp
        # (traced, the forms below that read a layer's weight themselves; not under tensor parallelism, where the layers
        # run their GEMMs on their local shards: Float8Linear._forward_sharded)
        traced = (torch.compiler.is_compiling() or tracing()) and not is_dtensor(inner.weight)
        if x_scale is None and _tensorwise_pair(inner, outer) and use_triton(x):
            # Both layers tensorwise: the activation kernels fold the amaxes their casts need (ops/fp8_act.py):
            # the activation's, for the down projection's cast, and in the backward the pre-activation
            # gradient's, with its column sums (the bias gradient), for this layer's: one pass each.
            pre = []
            if traced and plain_module(inner):
                # (traced: the layer hands out the pre-activation its node saves, for the Recast below)
                act, amax = fp8_linear_act(x, inner.weight, inner.bias, mlp, weight_cache=inner.weight_cache,
                                           x_amax=x_amax, recompute=inner.recompute_activation, x_cast=x_cast,
                                           pre_out=pre)
            else:
                act, amax = inner(x, activation=mlp, x_amax=x_amax, x_cast=x_cast)
            # (the down projection keeps nothing of act: its backward casts act^T again from the pre-activation
            # the first layer keeps, in one pass; eagerly read from that layer's node, traced a Recast of it)
            return outer(act, x_amax=amax, x_cast=cast_again(act, amax, *pre[:1], mlp if pre else None))
        if x_amax is None and _delayed_pair(inner, outer) and mlp in ACTIVATIONS and traced and plain_module(inner):
            # Traced, both layers delayed: the first layer and the activation as one node, whose backward writes
            # the first layer's e5m2 gradient operands in the activation's pass (eagerly the activation's node
            # hands them to the layer's: ops/fp8_act.py). None: no gradient to take, the two as below.
            fused = linear_act_fp8_delayed(inner, x, x_scale, x_proxy, x_cast, mlp, outer.fp8_scaling()[0])
            if fused is not None:
                q, scale, proxy, pre = fused
                return outer(q, scale, proxy, x_cast=cast_again_quantized(proxy, scale, pre, mlp))
        if x_amax is not None:
            pre = inner(x, x_amax=x_amax, x_cast=x_cast)
        elif x_cast is not None:  # (a delayed layer's e4m3 input, as in attend)
            pre = inner(x, x_scale, x_proxy, x_cast=x_cast)
        else:
            pre = inner(x) if x_scale is None else inner(x, x_scale, x_proxy)
        if _delayed_pair(inner, outer) and use_triton(pre) and mlp in ACTIVATIONS:
            # Both layers delayed: the activation writes the down projection's input in e4m3 with that layer's x
            # history, and (eagerly) the down projection's weight gradient casts act^T again from pre.
            q, scale, proxy = act_fp8_delayed(pre, mlp, outer.fp8_scaling()[0], sole_consumer=True)
            x_cast = None if proxy is None else cast_again_quantized(proxy, scale, pre, mlp)
            return outer(q, scale, proxy, x_cast=x_cast)
        if mlp == "gelu_tanh":
            return outer(F.gelu(pre, approximate="tanh"))
        gated = swiglu if mlp == "swiglu" else geglu
        needs_grad = torch.is_grad_enabled() and (pre.requires_grad or outer.weight.requires_grad)
        if not needs_grad and isinstance(outer, Float8Linear) and outer.recipe == "rowwise":
            q, scale = gated(pre, fp8="rowwise")
            return outer(q, scale)
        return outer(gated(pre))

