"""What runs in place of Hugging Face's code: the rotary function that attention forwards call,
the gated MLP forwards, the copy of a function that sees other globals, and a function set inside
the decorators of another (``wrapped_like``).

Everything here is built once when a model is patched and never changes afterwards: no
global is swapped at call time, so patched and unpatched models can run side by side, in
several threads, and under ``torch.compile`` (the copied functions are plain Python functions
that Dynamo traces like the originals).
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable

import torch
from torch import Tensor, nn

from blockfuse.ops.gated import geglu, swiglu
from blockfuse.ops.mlp import fused_mlp, gated_mlp
from blockfuse.ops.rotary import rotary
from blockfuse.ops.sharding import local_shard

ROTARY_GLOBAL = "apply_rotary_pos_emb"  # the module-level function HF attention forwards call
GATED_MLP_NAMES = frozenset({"gate_proj", "up_proj", "down_proj", "act_fn"})
# Phi-3's MLP: one gate|up projection, split by chunk(2) (the gate's half first), down_proj(up * act(gate)).
PACKED_MLP_NAMES = frozenset({"gate_up_proj", "down_proj", "activation_fn", "chunk"})
FC_MLP_NAMES = frozenset({"fc1", "fc2", "activation_fn"})
MARK = "blockfuse_patch"  # attribute of every function blockfuse installs as an instance forward


class CannotPatch(Exception):
    """A module that blockfuse recognizes but cannot patch safely; the message says why."""


# ----------------------------------------------------------------------------------------
# A copy of a function with other globals
# ----------------------------------------------------------------------------------------


def _function_copy(fn: types.FunctionType, globals_: dict, closure) -> types.FunctionType:
    new = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = copy.copy(fn.__kwdefaults__)
    new.__dict__.update(fn.__dict__)
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    new.__annotations__ = dict(fn.__annotations__)
    return new


def unwrap(fn: Callable) -> tuple[list[types.FunctionType], types.FunctionType]:
    """(the decorator layers of ``fn``, outermost first; the function they wrap). Layers are
    ``functools.wraps`` wrappers (``__wrapped__``), such as transformers' ``deprecate_kwarg``."""
    layers = []
    while hasattr(fn, "__wrapped__"):
        if not isinstance(fn, types.FunctionType):
            raise CannotPatch(f"{getattr(fn, '__qualname__', fn)!r} is wrapped by a {type(fn).__name__}, "
                              f"not a function that blockfuse can copy")
        layers.append(fn)
        fn = fn.__wrapped__
    if not isinstance(fn, types.FunctionType):
        raise CannotPatch(f"{fn!r} is a {type(fn).__name__}, not a Python function that blockfuse can copy")
    return layers, fn


def with_globals(fn: Callable, replacements: dict[str, object]) -> types.FunctionType:
    """A copy of ``fn`` in which the global names of ``replacements`` resolve to the given objects.

    The innermost function is copied with a snapshot of its module's globals, updated with
    ``replacements``; each decorator layer around it is copied with its closure cell that held
    the wrapped function now holding the copy below it, so the decorators still run.

    NOTE: a snapshot, not a view: a module global reassigned after patching (another library
    patching the modeling module) is not seen by the copy; unpatch and patch again to take it.
    """
    layers, inner = unwrap(fn)
    missing = [name for name in replacements if name not in inner.__code__.co_names]
    if missing:
        raise CannotPatch(f"{inner.__qualname__} does not call {', '.join(missing)} (this version of the "
                          f"modeling code is not the one blockfuse knows)")
    # NOTE: without "__name__": Dynamo resolves the globals of an inlined function that has a
    # "__name__" by importing that module (the guards would check HF's apply_rotary_pos_emb, not
    # ours: wrong guards, recompiles); without one it guards this very dict.
    if "__name__" in inner.__code__.co_names:
        raise CannotPatch(f"{inner.__qualname__} reads its module's __name__")
    globals_ = {key: value for key, value in inner.__globals__.items() if key != "__name__"}
    globals_.update(replacements)
    return wrapped_like(fn, _function_copy(inner, globals_, inner.__closure__))


def wrapped_like(fn: Callable, function: types.FunctionType) -> types.FunctionType:
    """``function`` inside copies of the decorator layers of ``fn`` (see :func:`unwrap`): each layer
    is copied with its closure cell that held the function it wrapped now holding the copy below it,
    so the decorators still run, around ``function`` instead of ``fn``'s own body."""
    layers, inner = unwrap(fn)
    new = function
    for layer in reversed(layers):
        below = new
        cells = layer.__closure__ or ()
        holding = [i for i, cell in enumerate(cells) if cell.cell_contents is layer.__wrapped__]
        if len(holding) != 1:
            raise CannotPatch(f"the decorator around {inner.__qualname__} ({layer.__code__.co_name} in "
                              f"{layer.__module__}) does not hold the function it wraps in one closure cell")
        closure = tuple(types.CellType(below) if i == holding[0] else cell for i, cell in enumerate(cells))
        new = _function_copy(layer, layer.__globals__, closure)
        new.__wrapped__ = below
    return new


# ----------------------------------------------------------------------------------------
# RoPE: the apply_rotary_pos_emb seen by a patched attention forward
# ----------------------------------------------------------------------------------------


def _rotary_function(original: Callable) -> Callable:
    """The Python function behind Hugging Face's ``apply_rotary_pos_emb``: ``original`` itself, or the function a
    ``kernels`` hub module wraps. NOTE: transformers 5.25 with the ``kernels`` package (one of its requirements)
    decorates it with ``use_kernel_forward_from_hub``, which makes it an ``nn.Module`` instance whose class's forward
    (``*args, **kwargs``) calls the function held in its closure as ``func``."""
    original = inspect.unwrap(original)  # (functools.wraps layers, as inspect.signature follows them)
    forward = getattr(type(original), "forward", None)
    code = getattr(forward, "__code__", None)
    if isinstance(original, nn.Module) and code is not None and "func" in code.co_freevars:
        inner = forward.__closure__[code.co_freevars.index("func")].cell_contents
        if isinstance(inner, types.FunctionType):
            return inner
    return original


def hf_rotary(original: Callable, promote: bool) -> Callable:
    """The replacement of Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``
    (in older transformers, 4.46 for one, also an unused ``position_ids`` before ``unsqueeze_dim``).

    ``promote``: the output dtype of the original, ``promote_types(q, cos)`` for Llama's
    ``q * cos + ...``, else q's dtype (OLMo-2 casts back). A call that blockfuse does not cover
    (tables that are not HF's per-token ones, another ``unsqueeze_dim``) runs ``original`` (a ``kernels`` hub
    module too: :func:`_rotary_function`).
    """
    names = list(inspect.signature(_rotary_function(original)).parameters)
    if names[:4] != ["q", "k", "cos", "sin"] or names[4:] not in (["unsqueeze_dim"], ["position_ids", "unsqueeze_dim"]):
        raise CannotPatch(f"{ROTARY_GLOBAL} has parameters {names}, not the (q, k, cos, sin[, position_ids], "
                          f"unsqueeze_dim) that blockfuse knows")

    def rotate(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int):
        # q: (batch, heads, seq, head_dim) with unsqueeze_dim=1, (batch, seq, heads, head_dim) with 2;
        # k likewise with its own heads; cos, sin: (batch or 1, seq, rotary_dim), rotate-half form
        # (the frequencies twice). rotary_dim < head_dim (a partial rotary) passes the rest through.
        if unsqueeze_dim == 1 and q.transpose(1, 2).is_contiguous() and k.transpose(1, 2).is_contiguous():
            # NOTE: Hugging Face's q and k are (batch, heads, seq, head_dim) views of (batch, seq, heads,
            # head_dim) projections. Rotated in that memory layout and handed back as the same kind of
            # views, attention's output comes back in it too, so the model's transpose(1, 2).contiguous()
            # is free and q, k, v reach attention's backward alike; outputs contiguous in "bhsd" cost
            # three strided copies per layer (0.26 ms of a 4-layer Llama step on an H200).
            q_out, k_out = rotary(q.transpose(1, 2), k.transpose(1, 2), cos, sin, layout="bshd")
            q_out, k_out = q_out.transpose(1, 2), k_out.transpose(1, 2)
        else:
            q_out, k_out = rotary(q, k, cos, sin, layout="bhsd" if unsqueeze_dim == 1 else "bshd")
        if promote:
            dtype = torch.promote_types(q.dtype, cos.dtype)
            if dtype != q_out.dtype:
                q_out, k_out = q_out.to(dtype), k_out.to(dtype)
        return q_out, k_out

    def covered(q, k, cos, unsqueeze_dim) -> bool:
        return cos.dim() == 3 and unsqueeze_dim in (1, 2) and q.dtype == k.dtype

    if "position_ids" in names:

        def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
            if not covered(q, k, cos, unsqueeze_dim):
                return original(q, k, cos, sin, position_ids, unsqueeze_dim)
            return rotate(q, k, cos, sin, unsqueeze_dim)
    else:

        def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
            if not covered(q, k, cos, unsqueeze_dim):
                return original(q, k, cos, sin, unsqueeze_dim)
            return rotate(q, k, cos, sin, unsqueeze_dim)

    apply_rotary_pos_emb.__doc__ = "blockfuse.rotary in place of transformers' apply_rotary_pos_emb."
    return apply_rotary_pos_emb


def calls_rotary(forward: Callable) -> bool:
    """True when ``forward`` (a class's forward, decorators looked through) calls the module-level
    ``apply_rotary_pos_emb``."""
    try:
        _, inner = unwrap(forward)
    except CannotPatch:
        return False
    return ROTARY_GLOBAL in inner.__code__.co_names


# ----------------------------------------------------------------------------------------
# Gated MLP: down_proj(act(gate_proj(x)) * up_proj(x)) with one fused activation-and-product
# ----------------------------------------------------------------------------------------


def _mlp(self, x: Tensor, activation: str) -> Tensor:
    # x: (..., hidden) -> gate and up (..., intermediate) -> (..., hidden), in one op whose backward
    # recomputes the activation (blockfuse.gated_mlp with the separate gate and up weights)
    gate, up, down = self.gate_proj, self.up_proj, self.down_proj
    if vars(self).get("shards", 1) > 1:
        # Tensor parallelism (blockfuse.distributed's FeedForwardParallel, which sets shards): the weights are
        # DTensors, this rank's hidden columns; the op runs on the local shards and returns this rank's partial
        # sum, which the plan's hook on this module reduces and adds down_proj's bias to.
        return gated_mlp(x, local_shard(gate.weight), local_shard(gate.bias), local_shard(down.weight), None,
                         activation, up_weight=local_shard(up.weight), up_bias=local_shard(up.bias))
    return gated_mlp(x, gate.weight, gate.bias, down.weight, down.bias, activation, up_weight=up.weight,
                     up_bias=up.bias)


def swiglu_mlp_forward(self, x: Tensor) -> Tensor:
    return _mlp(self, x, "swiglu")


def geglu_tanh_mlp_forward(self, x: Tensor) -> Tensor:
    return _mlp(self, x, "geglu")


def geglu_mlp_forward(self, x: Tensor) -> Tensor:
    return _mlp(self, x, "geglu_erf")


def swiglu_modules_forward(self, x: Tensor) -> Tensor:
    # the projections are not plain Linear layers (LoRA, quantized, ...): call them as they are
    return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


def geglu_tanh_modules_forward(self, x: Tensor) -> Tensor:
    return self.down_proj(geglu(self.gate_proj(x), self.up_proj(x), approximate="tanh"))


def geglu_modules_forward(self, x: Tensor) -> Tensor:
    return self.down_proj(geglu(self.gate_proj(x), self.up_proj(x), approximate="none"))


for _forward in (swiglu_mlp_forward, geglu_tanh_mlp_forward, geglu_mlp_forward, swiglu_modules_forward,
                 geglu_tanh_modules_forward, geglu_modules_forward):
    setattr(_forward, MARK, "mlp")


def _packed_mlp(self, x: Tensor, activation: str) -> Tensor:
    # Phi-3's x -> gate_up_proj (..., 2 intermediate: the gate's half, then the up half) -> (..., hidden), as one
    # op (blockfuse.gated_mlp's packed weights: the same layout)
    if vars(self).get("shards", 1) > 1:
        raise NotImplementedError("tensor parallelism of a packed gate|up projection (Phi-3) is not supported")
    gate_up, down = self.gate_up_proj, self.down_proj
    return gated_mlp(x, gate_up.weight, gate_up.bias, down.weight, down.bias, activation)


def swiglu_packed_mlp_forward(self, x: Tensor) -> Tensor:
    return _packed_mlp(self, x, "swiglu")


def geglu_tanh_packed_mlp_forward(self, x: Tensor) -> Tensor:
    return _packed_mlp(self, x, "geglu")


def geglu_packed_mlp_forward(self, x: Tensor) -> Tensor:
    return _packed_mlp(self, x, "geglu_erf")


def swiglu_packed_modules_forward(self, x: Tensor) -> Tensor:
    # the projections are not plain Linear layers (LoRA, quantized, ...): called as they are
    return self.down_proj(swiglu(self.gate_up_proj(x)))


def geglu_tanh_packed_modules_forward(self, x: Tensor) -> Tensor:
    return self.down_proj(geglu(self.gate_up_proj(x), approximate="tanh"))


def geglu_packed_modules_forward(self, x: Tensor) -> Tensor:
    return self.down_proj(geglu(self.gate_up_proj(x), approximate="none"))


for _forward in (swiglu_packed_mlp_forward, geglu_tanh_packed_mlp_forward, geglu_packed_mlp_forward,
                 swiglu_packed_modules_forward, geglu_tanh_packed_modules_forward, geglu_packed_modules_forward):
    setattr(_forward, MARK, "mlp")


def calls_gated_mlp(mlp: nn.Module) -> bool:
    """True for an MLP whose forward is blockfuse's one ``gated_mlp`` on its projections' weights (the
    projections' own forwards, and any hooks on them, do not run)."""
    forward = getattr(vars(mlp).get("forward"), "__func__", None)
    return forward in (swiglu_mlp_forward, geglu_tanh_mlp_forward, geglu_mlp_forward, swiglu_packed_mlp_forward,
                       geglu_tanh_packed_mlp_forward, geglu_packed_mlp_forward)


# Activation classes by name (their names and modules moved between transformers versions).
_SILU = ("SiLU", "SiLUActivation")
_GELU_TANH = ("GELUTanh", "PytorchGELUTanh", "NewGELUActivation", "FastGELUActivation")
_GELU = ("GELUActivation",)


def _gated_kind(act: nn.Module) -> str:
    """"swiglu", "geglu_tanh" or "geglu" for a gated MLP's activation module; raises CannotPatch for another."""
    name = type(act).__name__
    if name in _SILU:
        return "swiglu"
    if isinstance(act, nn.GELU):
        return "geglu_tanh" if act.approximate == "tanh" else "geglu"
    if name in _GELU_TANH or name in _GELU:
        return "geglu_tanh" if name in _GELU_TANH else "geglu"
    raise CannotPatch(f"activation {name}: blockfuse fuses SiLU (swiglu) and GELU (geglu) only")


def _plain_linears(mlp: nn.Module, names) -> bool:
    return all(type(getattr(mlp, n)) is nn.Linear and not has_hooks(getattr(mlp, n)) for n in names)


def gated_mlp_forward(mlp: nn.Module) -> tuple[Callable, str]:
    """(the forward that replaces ``mlp``'s, what it computes) for a gated MLP, from the class of
    its activation; raises CannotPatch for an MLP of another form or another activation. Two forms:
    ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` (Llama and most), and Phi-3's packed
    ``gate, up = gate_up_proj(x).chunk(2, dim=-1)``, ``down_proj(up * activation_fn(gate))``."""
    _, inner = unwrap(type(mlp).forward)
    names = set(inner.__code__.co_names)
    if PACKED_MLP_NAMES <= names and all(isinstance(getattr(mlp, name, None), nn.Module)
                                         for name in PACKED_MLP_NAMES - {"chunk"}):
        return _packed_gated_mlp_forward(mlp)
    if not GATED_MLP_NAMES <= names or not all(
            isinstance(getattr(mlp, name, None), nn.Module) for name in GATED_MLP_NAMES):
        raise CannotPatch(f"{type(mlp).__name__} is not down_proj(act_fn(gate_proj(x)) * up_proj(x))")
    kind = _gated_kind(mlp.act_fn)
    # NOTE: plain Linear projections (without hooks) run as one blockfuse.gated_mlp, whose backward
    # recomputes the activation instead of keeping it (tokens x intermediate less memory per layer);
    # other projection modules are called as they are, around the fused activation alone.
    if _plain_linears(mlp, ("gate_proj", "up_proj", "down_proj")):
        forwards = {kind_: (forward, f'blockfuse.gated_mlp(x, gate_proj, up_proj, down_proj, "{activation}")')
                    for kind_, forward, activation in (("swiglu", swiglu_mlp_forward, "swiglu"),
                                                       ("geglu_tanh", geglu_tanh_mlp_forward, "geglu"),
                                                       ("geglu", geglu_mlp_forward, "geglu_erf"))}
    else:
        forwards = {kind_: (forward, f"down_proj(blockfuse.{op}(gate_proj(x), up_proj(x)))")
                    for kind_, forward, op in (("swiglu", swiglu_modules_forward, "swiglu"),
                                               ("geglu_tanh", geglu_tanh_modules_forward, 'geglu(approximate="tanh")'),
                                               ("geglu", geglu_modules_forward, 'geglu(approximate="none")'))}
    return forwards[kind]


def _packed_gated_mlp_forward(mlp: nn.Module) -> tuple[Callable, str]:
    """:func:`gated_mlp_forward` of Phi-3's packed form (the gate's half of ``gate_up_proj``'s output first, as
    blockfuse's packed gate|up weights)."""
    kind = _gated_kind(mlp.activation_fn)
    if _plain_linears(mlp, ("gate_up_proj", "down_proj")):
        forwards = {kind_: (forward, f'blockfuse.gated_mlp(x, gate_up_proj, down_proj, "{activation}")')
                    for kind_, forward, activation in (("swiglu", swiglu_packed_mlp_forward, "swiglu"),
                                                       ("geglu_tanh", geglu_tanh_packed_mlp_forward, "geglu"),
                                                       ("geglu", geglu_packed_mlp_forward, "geglu_erf"))}
    else:
        forwards = {kind_: (forward, f"down_proj(blockfuse.{op}(gate_up_proj(x)))")
                    for kind_, forward, op in (("swiglu", swiglu_packed_modules_forward, "swiglu"),
                                               ("geglu_tanh", geglu_tanh_packed_modules_forward,
                                                'geglu(approximate="tanh")'),
                                               ("geglu", geglu_packed_modules_forward, 'geglu(approximate="none")'))}
    return forwards[kind]


# ----------------------------------------------------------------------------------------
# Two-layer MLP: fc2(act(fc1(x))) (SigLIP, SigLIP-2) as one blockfuse.fused_mlp
# ----------------------------------------------------------------------------------------


def _fc_mlp(self, x: Tensor, activation: str) -> Tensor:
    # x: (..., hidden) -> (..., intermediate) -> (..., hidden), in one op that keeps the pre-activation
    # only and recomputes the activation in its backward
    return fused_mlp(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, activation)


def gelu_tanh_fc_mlp_forward(self, x: Tensor) -> Tensor:
    return _fc_mlp(self, x, "gelu_tanh")


def gelu_fc_mlp_forward(self, x: Tensor) -> Tensor:
    return _fc_mlp(self, x, "gelu")


for _forward in (gelu_tanh_fc_mlp_forward, gelu_fc_mlp_forward):
    setattr(_forward, MARK, "mlp")


def fc_mlp_forward(mlp: nn.Module) -> tuple[Callable, str]:
    """(the forward that replaces ``mlp``'s, what it computes) for ``fc2(activation_fn(fc1(x)))`` with
    plain Linear layers and a GELU; raises CannotPatch for anything else."""
    _, inner = unwrap(type(mlp).forward)
    if not FC_MLP_NAMES <= set(inner.__code__.co_names) or not all(
            isinstance(getattr(mlp, name, None), nn.Module) for name in FC_MLP_NAMES):
        raise CannotPatch(f"{type(mlp).__name__} is not fc2(activation_fn(fc1(x)))")
    if not all(type(getattr(mlp, n)) is nn.Linear and not has_hooks(getattr(mlp, n)) for n in ("fc1", "fc2")):
        raise CannotPatch("fc1 / fc2 are not plain Linear layers (LoRA, quantized, hooks): left as is")
    act = mlp.activation_fn
    name = type(act).__name__
    if (isinstance(act, nn.GELU) and act.approximate == "tanh") or name in _GELU_TANH:
        return gelu_tanh_fc_mlp_forward, 'blockfuse.fused_mlp(x, fc1, fc2, "gelu_tanh")'
    if isinstance(act, nn.GELU) or name in _GELU:
        return gelu_fc_mlp_forward, 'blockfuse.fused_mlp(x, fc1, fc2, "gelu")'
    raise CannotPatch(f"activation {name}: blockfuse fuses GELU (tanh or erf) two-layer MLPs only")


def has_hooks(module: nn.Module) -> bool:
    """True when ``module`` has forward (pre-)hooks or backward hooks registered on it."""
    return bool(module._forward_hooks or module._forward_pre_hooks or getattr(module, "_backward_hooks", None))
