"""FP8 linear layers: ``Float8Linear``, a drop-in ``torch.nn.Linear`` whose GEMMs run in FP8, and
``convert(model)``, which swaps a model's Linear layers for it. Reached as ``blockfuse.fp8``
(``blockfuse.fp8.convert(model)``), with the functionals of ``ops/fp8.py`` beside them.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _module_globals
from torch.nn.utils import parametrize

from blockfuse.ops.fp8 import (
    HISTORY_LEN, LINEAR_RECIPES, RECIPES, Float8Scaling, carry_weight_cache, checked_scaling, clear_weight_cache,
    dequantize, fp8_linear, fp8_linear_quantized, fp8_linear_ref, fp8_supported, quantize, quantize_ref,
)
from blockfuse.ops.fp8_act import fp8_linear_act, fp8_linear_act_ref
from blockfuse.ops.fp8_weights import cast_weights as _cast_weights
from blockfuse.ops.sharding import is_dtensor

__all__ = ["Float8Linear", "Float8Scaling", "convert", "cast_weights", "fp8_linear", "fp8_linear_ref",
           "fp8_linear_act", "fp8_linear_act_ref", "quantize", "quantize_ref", "dequantize", "clear_weight_cache",
           "fp8_supported", "RECIPES", "LINEAR_RECIPES"]

_log = logging.getLogger(__name__)


def _check_recipe(recipe) -> str:
    if recipe not in LINEAR_RECIPES:
        raise ValueError(f"recipe: expected one of {', '.join(map(repr, LINEAR_RECIPES))}, got {recipe!r}")
    return recipe


class Float8Linear(nn.Linear):
    """``torch.nn.Linear`` with its three GEMMs in FP8 (:func:`blockfuse.fp8_linear`): the same
    parameters, state dict and ``isinstance(module, nn.Linear)``. ``forward(x)``, or ``forward(x_fp8,
    x_scale)`` for an input already in e4m3 with its scale (see :func:`blockfuse.fp8.quantize`).

    ``forward(x_fp8, x_scale, proxy)`` (rowwise): in a training step, ``proxy`` stands for the e4m3 input in
    autograd and takes its gradient (:func:`blockfuse.ops.fp8.fp8_linear_quantized`; the fused blocks' norms).
    ``forward(x, x_amax=amax)`` (tensorwise): x's amax, folded by the op that wrote x (the fused MLP's
    activation, :func:`blockfuse.ops.fp8_act.fp8_linear_act`): the cast reads x once.
    ``forward(x, x_amax=amax, x_cast=cast)`` (tensorwise, with or without ``activation``): ``cast()`` makes x^T's
    e4m3 cast again in the backward (:func:`blockfuse.ops.fp8.fp8_linear`), so the layer keeps nothing of x (the
    fused blocks' projections after a norm, and the MLP's down projection).
    ``forward(x, activation=name)`` (tensorwise): ``(act(layer(x)), amax)``, the layer and its activation as
    one op (:func:`blockfuse.ops.fp8_act.fp8_linear_act`), called through the module so that its hooks run (FSDP2).

    ``recipe``: "tensorwise" (one scale a tensor), "rowwise" (a scale a row of each GEMM operand) or "delayed"
    (tensorwise, x's and the output gradient's scales from amax histories the layer keeps: buffers
    ``fp8_x_history`` / ``fp8_grad_history`` of ``history_len`` amaxes, with their ``*_amax`` scratch, left out of
    the state dict; every cast one pass; :func:`blockfuse.fp8_linear`). A delayed layer takes a plain x, or
    ``forward(x_fp8, x_scale, proxy, x_cast=cast)`` for the e4m3 output a fused block's norm wrote with the layer's
    x history (``fp8_scaling()[0]``; :func:`blockfuse.ops.fp8.fp8_linear_quantized`).
    ``weight_cache``: keep the weight's FP8 casts while the weight is unchanged (1 to 2 bytes a
    parameter kept; see :func:`blockfuse.fp8_linear`).
    ``recompute_activation``: with ``activation=``, keep x's e4m3 cast instead of the pre-activation and run the
    GEMM again in the backward (``fp8_linear_act(recompute=True)``: memory for one more GEMM).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 recipe: str = "tensorwise", weight_cache: bool = True, recompute_activation: bool = False,
                 history_len: int = HISTORY_LEN):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.recipe = _check_recipe(recipe)
        self.weight_cache = weight_cache
        self.recompute_activation = recompute_activation
        if self.recipe == "delayed":
            self._new_scaling(history_len, device)

    def _new_scaling(self, history_len: int, device) -> None:
        """Fresh delayed-scaling state (recipe "delayed"): empty histories, not in the state dict."""
        for role in ("x", "grad"):
            history, amax = Float8Scaling.new(history_len, device)
            self.register_buffer(f"fp8_{role}_history", history, persistent=False)
            self.register_buffer(f"fp8_{role}_amax", amax, persistent=False)

    def _apply(self, fn, recurse=True):
        # NOTE: the delayed-scaling buffers stay fp32 when the model is cast (``model.bfloat16()``, ``.half()``,
        # ``.to(dtype)``), which the casts need (an amax history in bf16 would also coarsen every scale): they
        # follow a move to another device, and a dtype change is undone from the fp32 original, not rounded back.
        kept = {name: buffer for name, buffer in self._buffers.items()
                if name.startswith("fp8_") and buffer is not None}
        super()._apply(fn, recurse)
        for name, old in kept.items():
            new = self._buffers[name]
            if new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(device=new.device)
        return self

    def fp8_scaling(self) -> tuple[Float8Scaling, Float8Scaling]:
        """Recipe "delayed": ``(x_state, grad_state)``, the layer's own histories (updated in place by each call)."""
        if self.recipe != "delayed":
            raise ValueError(f"fp8_scaling: only recipe 'delayed' keeps amax histories; this layer's recipe is "
                             f"{self.recipe!r}")
        buffers = self._buffers
        tensors = (buffers["fp8_x_history"], buffers["fp8_x_amax"], buffers["fp8_grad_history"],
                   buffers["fp8_grad_amax"])
        if is_dtensor(tensors[0]):
            # NOTE: PyTorch's parallel styles (distribute_module) make every buffer of a layer they shard a Replicate()
            # DTensor; the histories are this rank's own (each rank scales its own shards: _forward_sharded), and the
            # kernels update their local tensors in place.
            tensors = tuple(t._local_tensor for t in tensors)
        if torch.compiler.is_compiling():
            return Float8Scaling(*tensors[:2]), Float8Scaling(*tensors[2:])
        # NOTE: eagerly the pair is made once and kept while the buffers are the same tensors (a call of a fused block
        # asks for it several times: the host path), checked once (fp8.checked_scaling).
        kept = self.__dict__.get("_fp8_states")
        if kept is None or any(a is not b for a, b in zip(kept[0], tensors)):
            kept = (tensors, (checked_scaling(*tensors[:2]), checked_scaling(*tensors[2:])))
            self.__dict__["_fp8_states"] = kept
        return kept[1]

    def forward(self, x: Tensor, x_scale: Optional[Tensor] = None, proxy: Optional[Tensor] = None, *,
                x_amax: Optional[Tensor] = None, activation: Optional[str] = None,
                x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]] = None):
        if is_dtensor(self.weight):
            return self._forward_sharded(x, x_scale, proxy, x_amax, activation, x_cast)
        return self._forward_on(self.weight, self.bias, x, x_scale, proxy, x_amax, activation, x_cast)

    def _forward_on(self, weight: Tensor, bias: Optional[Tensor], x: Tensor, x_scale: Optional[Tensor],
                    proxy: Optional[Tensor], x_amax: Optional[Tensor], activation: Optional[str],
                    x_cast: Optional[Callable[[], tuple[Tensor, Tensor]]]):
        """:meth:`forward` with ``weight`` and ``bias`` given (the layer's own, or their local shards under tensor
        parallelism: :meth:`_forward_sharded`)."""
        if self.recipe == "delayed":
            if activation is not None:
                raise ValueError("activation: a layer with recipe 'delayed' takes its input as it is (a plain x, "
                                 "or a norm's e4m3 output with its scale), pass activation=None")
            x_state, grad_state = self.fp8_scaling()
            if x_scale is not None:  # the norm before wrote x in e4m3 with x_state's scale (models/blocks.py)
                return fp8_linear_quantized(x, x_scale, proxy, weight, bias, weight_cache=self.weight_cache,
                                            recipe="tensorwise", x_cast=x_cast, grad_scaling=grad_state)
            if proxy is not None:
                raise ValueError("proxy: stands for an e4m3 x with its x_scale; x_scale is None")
            return fp8_linear(x, weight, bias, recipe="delayed", weight_cache=self.weight_cache,
                              x_amax=x_amax, x_cast=x_cast, fp8_scaling=(x_state, grad_state))
        if x_cast is not None and proxy is not None:
            raise ValueError("x_cast: for a tensorwise call (x and its x_amax), not with a quantized input's proxy")
        if activation is not None:
            if self.recipe != "tensorwise" or x_scale is not None or proxy is not None:
                raise ValueError(f"activation: the layer with its activation takes a high-precision x (and its "
                                 f"x_amax), with recipe 'tensorwise'; this layer's recipe is {self.recipe!r}")
            return fp8_linear_act(x, weight, bias, activation, weight_cache=self.weight_cache,
                                  x_amax=x_amax, recompute=self.recompute_activation, x_cast=x_cast)
        if proxy is not None:
            if self.recipe != "rowwise":
                raise ValueError(f"proxy: an input quantized by the op before the layer is rowwise; this layer's "
                                 f"recipe is {self.recipe!r}")
            return fp8_linear_quantized(x, x_scale, proxy, weight, bias, weight_cache=self.weight_cache)
        return fp8_linear(x, weight, bias, x_scale=x_scale, recipe=self.recipe,
                          weight_cache=self.weight_cache, x_amax=x_amax, x_cast=x_cast)

    def _forward_sharded(self, x, x_scale, proxy, x_amax, activation, x_cast):
        """The layer under tensor parallelism: its weight a DTensor on a 1-D mesh, ``Shard(0)`` (column-parallel:
        this rank's output features) or ``Shard(1)`` (row-parallel: its input features). The three GEMMs run on the
        local shards in FP8, each rank with its own scales (see the NOTE below). Two ways in:

        * ``x`` a DTensor (PyTorch's ``ColwiseParallel`` / ``RowwiseParallel`` hooks, as ``blockfuse.distributed``'s
          plans put them on an eager block's and attention's projections): column-parallel, x ``Replicate()`` and the
          output a ``Shard(-1)`` DTensor; row-parallel, x ``Shard(-1)`` and the output a ``Partial()`` DTensor (the
          style's hook reduces it) with the bias, a ``Replicate()`` DTensor, added by DTensor. A plain x only.
        * ``x`` a plain tensor (a fused MLP under ``FeedForwardParallel``, which gathers its input and reduces its
          output itself): this rank's input (replicated for a column-parallel layer, its own features for a
          row-parallel one), and the output this rank's columns, or (row-parallel) its partial sum without the
          bias, which the plan adds once after the reduction. Every form of :meth:`forward` (quantized inputs,
          amaxes, the activation) then takes the local shards.

        NOTE: a rank scales its own shards: a tensorwise weight scale is the amax of the rank's rows (columns), not
        the whole weight's; an input's and a gradient's are those of the rank's part; a delayed layer's histories
        are the rank's. No amax is all-reduced (none of the GEMMs needs another rank's scale: each rank's product
        is a whole GEMM of its own operands). A rank's scales are at most the whole tensor's amax / 448, so each
        shard is quantized at least as finely as one process would; the results match one process within FP8's
        error, not bit for bit (tests/test_distributed_fp8.py)."""
        from torch.distributed.tensor import Shard

        weight = self.weight
        mesh = weight.device_mesh
        placement = weight.placements[0]
        if mesh.ndim != 1 or placement not in (Shard(0), Shard(1)):
            raise NotImplementedError(f"Float8Linear: a weight placed {tuple(weight.placements)} on a {mesh.ndim}-D "
                                      f"mesh; tensor parallelism takes Shard(0) (column-parallel) or Shard(1) "
                                      f"(row-parallel) on a 1-D mesh")
        colwise = placement == Shard(0)
        w = weight.to_local()
        if self.weight_cache and not torch.compiler.is_compiling():
            # (the casts kept on the local tensor, which outlives each call's view w of it: carried there and back)
            carry_weight_cache(weight._local_tensor, w)
            try:
                return self._forward_local_shard(x, w, colwise, x_scale, proxy, x_amax, activation, x_cast)
            finally:
                carry_weight_cache(w, weight._local_tensor)
        return self._forward_local_shard(x, w, colwise, x_scale, proxy, x_amax, activation, x_cast)

    def _forward_local_shard(self, x, w, colwise, x_scale, proxy, x_amax, activation, x_cast):
        """:meth:`_forward_sharded` past its checks, ``w`` the weight's local shard (``colwise``: placed Shard(0))."""
        from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

        weight, bias = self.weight, self.bias
        mesh = weight.device_mesh
        if not fp8_supported(w.shape[1], w.shape[0]):
            raise ValueError(f"Float8Linear: this rank's shard of the weight is {tuple(w.shape)} (the whole "
                             f"{tuple(weight.shape)} over {mesh.size()} ranks); FP8 GEMMs need both sizes multiples "
                             f"of 16")
        if not isinstance(x, DTensor):
            b = None if bias is None or not colwise else bias.to_local()
            return self._forward_on(w, b, x, x_scale, proxy, x_amax, activation, x_cast)
        if any(a is not None for a in (x_scale, proxy, x_amax, activation, x_cast)):
            raise ValueError("Float8Linear: under tensor parallelism with a DTensor input the layer takes x alone "
                             "(no x_scale, proxy, x_amax, activation or x_cast)")
        want = Replicate() if colwise else Shard(x.dim() - 1)
        placed = tuple(x.placements)
        if x.device_mesh != mesh or not (placed == (want,) or not colwise and placed == (Shard(-1),)):
            raise ValueError(f"Float8Linear: a {'column' if colwise else 'row'}-parallel layer takes x placed "
                             f"({want},) on its weight's mesh, got {tuple(x.placements)}")
        if colwise:
            # (x's gradient: this rank's partial sum over its output features, summed by DTensor where it is used)
            out = self._forward_on(w, None if bias is None else bias.to_local(),
                                   x.to_local(grad_placements=[Partial()]), None, None, None, None, None)
            return DTensor.from_local(out, mesh, [Shard(out.dim() - 1)], run_check=False)
        out = DTensor.from_local(self._forward_on(w, None, x.to_local(), None, None, None, None, None), mesh,
                                 [Partial()], run_check=False)
        return out if bias is None else out + bias

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: str = "tensorwise", *, weight_cache: bool = True,
                    recompute_activation: bool = False, history_len: int = HISTORY_LEN) -> "Float8Linear":
        """A Float8Linear holding ``linear``'s own parameters (the same Parameter objects: an optimizer
        built on the model keeps working), in its training mode."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear: expected a torch.nn.Linear, got {type(linear).__name__}")
        with torch.device("meta"):  # no throwaway initialization: the parameters are linear's
            module = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, recipe=recipe,
                         weight_cache=weight_cache, recompute_activation=recompute_activation,
                         history_len=history_len)
        module.weight = linear.weight
        module.bias = linear.bias
        if module.recipe == "delayed":  # (made on the meta device above)
            module._new_scaling(history_len, linear.weight.device)
        module.train(linear.training)
        return module

    def extra_repr(self) -> str:
        extra = ", recompute_activation=True" if self.recompute_activation else ""
        return f"{super().extra_repr()}, recipe={self.recipe!r}{extra}"


def convert(model: nn.Module, recipe: str = "tensorwise", *,
            filter: Optional[Callable[[nn.Module, str], bool]] = None, recompute_activation: bool = False) -> nn.Module:
    """Swaps every ``torch.nn.Linear`` of ``model`` (in place) for a :class:`Float8Linear` holding the
    same parameters, and returns the model (the new module when ``model`` is itself a Linear).

    ``filter(module, name)``: convert only the Linear layers it returns True for (``name``: the layer's
    qualified name in ``model``, as ``named_modules`` gives it). ``recompute_activation``: given to each layer
    (:class:`Float8Linear`): a fused block's tensorwise MLP then keeps no pre-activation (recomputed in the
    backward). Layers whose in_features or out_features is not a multiple of 16 are left as they are
    (``torch._scaled_mm`` cannot take them; an LM head over a vocabulary of 50257, say): they are logged at INFO
    level. Float8Linear layers are left as they are; a
    Linear reached twice (shared) becomes one Float8Linear.

    In blockfuse's fused blocks the converted layers take more than their input: each norm before a projection
    writes its output in e4m3 with the layer's scale (rowwise, delayed) or folds its amax (tensorwise), and the
    MLP's activation does the same for the down projection, so a layer skips its own cast pass
    (``Float8Linear.forward``'s ``x_scale`` / ``proxy`` / ``x_amax``). An FP8 tensor cannot carry a gradient through
    autograd (the engine would cast the gradient to FP8 without a scale), so the norm's Function also returns a
    stand-in of the output's shape and no storage (``proxy``) that takes the projection's input gradient in high
    precision (:func:`blockfuse.ops.fp8.fp8_linear_quantized`).
    """
    _check_recipe(recipe)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")

    def wanted(module: nn.Module, name: str) -> bool:
        if not isinstance(module, nn.Linear) or isinstance(module, Float8Linear):
            return False
        if filter is not None and not filter(module, name):
            return False
        if is_dtensor(module.weight):
            # (the styles' hooks live on the Linear, not on a new module: a swapped layer would run without them)
            raise ValueError(f"blockfuse.fp8.convert: {name or 'the model'}'s weight is a DTensor (tensor parallelism "
                             f"or FSDP2 already applied); convert the model first, then parallelize or shard it")
        if not fp8_supported(module.in_features, module.out_features):
            _log.info("blockfuse.fp8.convert: %s left in high precision: in_features %d and out_features %d must "
                      "be multiples of 16", name or "the model", module.in_features, module.out_features)
            return False
        return True

    if wanted(model, ""):
        return Float8Linear.from_linear(model, recipe, recompute_activation=recompute_activation)
    converted: dict[int, Float8Linear] = {}
    for name, parent in list(model.named_modules(remove_duplicate=False)):
        for child_name, child in list(parent.named_children()):
            qualified = f"{name}.{child_name}" if name else child_name
            if id(child) in converted:
                setattr(parent, child_name, converted[id(child)])
            elif wanted(child, qualified):
                converted[id(child)] = Float8Linear.from_linear(child, recipe,
                                                                recompute_activation=recompute_activation)
                setattr(parent, child_name, converted[id(child)])
    return model


def plain_module(layer: nn.Module) -> bool:
    """No forward hooks on ``layer`` or on every module (FSDP2's ``fully_shard`` of the layer itself gathers its
    weight in one): its parameters, as the module holds them now, are what its call will use."""
    return not (layer._forward_pre_hooks or layer._forward_hooks or _module_globals._global_forward_pre_hooks
                or _module_globals._global_forward_hooks)


def precastable(layer: nn.Module) -> bool:
    """``layer`` is a :class:`Float8Linear` whose weight's cast :func:`cast_weights` may make for it: a tensorwise or
    delayed one that keeps its casts, without hooks (:func:`plain_module`) or parametrizations (a weight made at each
    access)."""
    return (isinstance(layer, Float8Linear) and layer.recipe != "rowwise" and layer.weight_cache
            and plain_module(layer) and not parametrize.is_parametrized(layer))


def cast_weights(model: nn.Module) -> int:
    """Makes the e4m3 weight casts of every tensorwise and delayed :class:`Float8Linear` in ``model`` whose kept cast
    is missing or stale, four weights a pair of launches, where each layer would make its own with two launches and
    its launcher's Python as it runs (:mod:`blockfuse.ops.fp8_weights`; the same casts bit for bit). Returns how many
    were made. Call it after the optimizer step, before the forward; a fused block does it for its own layers
    itself. What the layers must cast themselves is left to them: weights that are DTensors (FSDP2, tensor
    parallelism: gathered only in their module's hooks), layers with hooks or parametrizations, rowwise layers.
    Eager only (nothing while torch.compile traces: the layers cast in the graph). The casts made are kept until an
    optimizer step or an in-place write (1 byte a parameter, as the layers' own)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    return _cast_weights([layer.weight for layer in model.modules() if precastable(layer)])
