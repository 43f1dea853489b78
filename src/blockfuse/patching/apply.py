"""``blockfuse.patch(model)`` and ``blockfuse.unpatch(model)``.

Four kinds of change, each undone exactly by ``unpatch``:

* norms: each RMSNorm / LayerNorm module is swapped in its parent for a ``blockfuse.nn`` one
  that holds the very same ``nn.Parameter`` objects (state dict keys and values unchanged);
* rope: each attention module gets an instance ``forward``: a copy of its class's forward
  whose global ``apply_rotary_pos_emb`` is ``blockfuse.rotary`` (see ``forwards.with_globals``);
* mlp: each MLP gets an instance ``forward``: a gated one (Llama, OLMo-2, Qwen, Gemma, Phi-3's packed) runs as one
  ``blockfuse.gated_mlp``, a plain one (SigLIP, SigLIP-2) as one ``blockfuse.fused_mlp``; projections
  that are not plain ``nn.Linear`` (LoRA, quantized) are called as they are around
  ``blockfuse.swiglu`` / ``geglu``;
* loss (only when asked for): each causal LM gets an instance ``forward`` that, given ``labels``, calls
  its base model and then ``blockfuse.linear_cross_entropy`` on the last hidden states, and returns
  ``logits=None`` (see ``loss.py``).

Only the given model changes: classes and modeling modules are untouched, so another model of
the same class in the same process runs as before.
"""

from __future__ import annotations

import types
import warnings
from dataclasses import dataclass

from torch import nn

from blockfuse.nn.norm import LayerNorm, RMSNorm
from blockfuse.patching.families import (
    FAMILIES, Family, check_transformers_version, family_of, roots, supported_models,
)
from blockfuse.patching.forwards import (
    MARK, ROTARY_GLOBAL, CannotPatch, calls_rotary, fc_mlp_forward, gated_mlp_forward, hf_rotary, unwrap,
    with_globals,
)
from blockfuse.ops.cross_entropy import LOW_MEMORY
from blockfuse.patching.loss import check_loss_module, is_causal_lm, loss_forward
from blockfuse.patching.report import PatchEntry, PatchReport

STATE = "_blockfuse_patch"  # the undo records, kept in the patched model's __dict__


@dataclass
class _Swap:
    """A module replaced in its parent."""

    parent: nn.Module
    name: str
    original: nn.Module
    replacement: nn.Module

    def undo(self) -> None:
        if self.parent._modules.get(self.name) is not self.replacement:
            warnings.warn(f"blockfuse.unpatch: {type(self.parent).__name__}.{self.name} was replaced after "
                          f"blockfuse.patch; left as it is", stacklevel=3)
            return
        # NOTE: the replacement's parameters, not the original's: they are the same objects
        # unless something assigned new ones since (load_state_dict(assign=True), a dtype
        # conversion with torch.__future__'s overwrite_module_params_on_conversion).
        for name, parameter in self.replacement.named_parameters(recurse=False):
            setattr(self.original, name, parameter)
        self.original.train(self.replacement.training)
        setattr(self.parent, self.name, self.original)


@dataclass
class _InstanceForward:
    """A forward set on one module instance (its class's forward is untouched)."""

    module: nn.Module
    forward: types.MethodType

    def undo(self) -> None:
        if vars(self.module).get("forward") is self.forward:
            del self.module.forward


# ----------------------------------------------------------------------------------------
# What each module is
# ----------------------------------------------------------------------------------------


def _kind(module: nn.Module, family: Family) -> str | None:
    cls = type(module)
    if isinstance(module, (RMSNorm, LayerNorm)):
        return "norms"  # patched before
    if family.norm is None and cls is nn.LayerNorm:
        return "norms"
    if family_of(module) is not family:
        return None
    if cls.__name__ == family.norm:
        return "norms"
    if family.has_rope and calls_rotary(cls.forward):
        return "rope"
    if cls.__name__.endswith("MLP"):
        return "mlp"
    return None


def _before(module: nn.Module, kind: str) -> str:
    name = type(module).__name__
    if kind == "rope":
        return f"{name}: {ROTARY_GLOBAL}"
    if kind == "mlp":
        if hasattr(module, "act_fn"):
            return f"{name}: down_proj({type(module.act_fn).__name__}(gate_proj(x)) * up_proj(x))"
        if hasattr(module, "gate_up_proj"):
            act = getattr(module, "activation_fn", None)
            return f"{name}: down_proj(up * {type(act).__name__}(gate)), gate, up = gate_up_proj(x).chunk(2)"
        act = getattr(module, "activation_fn", None)
        return f"{name}: fc2({type(act).__name__}(fc1(x)))" if act is not None else name
    return name


# ----------------------------------------------------------------------------------------
# One patcher a kind: checks, changes the module, returns (what runs now, the undo record)
# ----------------------------------------------------------------------------------------


def _check_free(module: nn.Module, swapped: bool) -> None:
    """Raises CannotPatch for a module that something else has changed already."""
    forward = vars(module).get("forward")
    if forward is not None:
        if getattr(getattr(forward, "__func__", None), MARK, None):
            raise CannotPatch("already patched (by an earlier blockfuse.patch)")
        raise CannotPatch("has a forward set on the instance already (an accelerate hook from device_map or "
                          "offloading, or another library's patch): left as is")
    if swapped and any(getattr(module, hooks, None) for hooks in (
            "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")):
        raise CannotPatch("has hooks registered on it, which swapping the module would drop: left as is")


def _patch_norm(model, path, module, family, cache):
    if isinstance(module, (RMSNorm, LayerNorm)):
        raise CannotPatch("already a blockfuse norm (by an earlier blockfuse.patch)")
    _check_free(module, swapped=True)
    if family.norm is not None:
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        if eps is None or getattr(module, "weight", None) is None:
            raise CannotPatch(f"{type(module).__name__} has no weight or eps (variance_epsilon) that blockfuse knows")
        new = RMSNorm(module.weight.shape[-1], eps=eps, cast_before_weight=family.cast_before_weight, device="meta",
                      weight_offset=family.norm_offset)
        new.weight = module.weight
        offset = f", weight_offset={family.norm_offset}" if family.norm_offset else ""
        text = f"blockfuse.nn.RMSNorm(cast_before_weight={family.cast_before_weight}{offset})"
    else:
        if len(module.normalized_shape) != 1:
            raise CannotPatch(f"normalizes over {tuple(module.normalized_shape)}: blockfuse normalizes over the "
                              f"last dimension only")
        new = LayerNorm(module.normalized_shape[0], eps=module.eps, elementwise_affine=module.elementwise_affine,
                        bias=module.bias is not None, device="meta")
        if module.elementwise_affine:
            new.weight = module.weight
            if module.bias is not None:
                new.bias = module.bias
        text = "blockfuse.nn.LayerNorm"
    new.train(module.training)
    parent_path, _, name = path.rpartition(".")
    parent = model.get_submodule(parent_path)
    setattr(parent, name, new)
    return text, _Swap(parent, name, module, new)


def _set_forward(module: nn.Module, function) -> _InstanceForward:
    bound = types.MethodType(function, module)
    module.forward = bound
    return _InstanceForward(module, bound)


def _patch_rope(model, path, module, family, cache):
    _check_free(module, swapped=False)
    class_forward = type(module).forward
    if class_forward not in cache:
        original = unwrap(class_forward)[1].__globals__[ROTARY_GLOBAL]
        function = with_globals(class_forward, {ROTARY_GLOBAL: hf_rotary(original, family.rope_promotes)})
        setattr(function, MARK, "rope")
        cache[class_forward] = function
    record = _set_forward(module, cache[class_forward])
    return 'blockfuse.rotary(layout="bhsd")' + _partial_rotary(module), record


def _partial_rotary(module: nn.Module) -> str:
    """", or the rotary dim of a partial rotary from the config (the kernel reads it off the
    cos / sin tables at each call, as Hugging Face's code does)."""
    config = getattr(module, "config", None)
    factor = getattr(config, "partial_rotary_factor", None)
    parameters = getattr(config, "rope_parameters", None)
    if factor is None and isinstance(parameters, dict):
        factor = parameters.get("partial_rotary_factor")
    head_dim = getattr(module, "head_dim", None)
    if not factor or factor >= 1 or not head_dim:
        return ""
    return f", rotary_dim={int(head_dim * factor)} of head_dim {head_dim}"


def _patch_mlp(model, path, module, family, cache):
    _check_free(module, swapped=False)
    function, description = gated_mlp_forward(module) if family.gated_mlp else fc_mlp_forward(module)
    return description, _set_forward(module, function)


_PATCHERS = {"norms": _patch_norm, "rope": _patch_rope, "mlp": _patch_mlp}


def _loss_forwards(model: nn.Module, found: list, chunk_size) -> dict[str, tuple]:
    """{path: (patched forward, what it computes)} of each causal LM among the models found. Raises
    ValueError when there is none, or one whose forward is not the causal-LM forward blockfuse knows:
    ``loss=True`` asks for the model itself, not for a part blockfuse may leave out."""
    expected = "expected a causal LM such as " + " or ".join(
        name for family in FAMILIES for name in family.models if name.endswith("ForCausalLM"))
    forwards = {}
    for path, root, _ in found:
        if is_causal_lm(root):
            try:
                forwards[path] = loss_forward(type(root), chunk_size)
            except CannotPatch as reason:
                raise ValueError(f"loss=True: {reason}; {expected}, got {type(root).__name__}") from None
    if not forwards:
        raise ValueError(f"loss=True: blockfuse fuses the LM head with the loss of a causal LM of a family it "
                         f"supports; {expected}, got {type(model).__name__}")
    return forwards


def _patch_loss(module: nn.Module, forward: tuple) -> tuple[str, _InstanceForward]:
    _check_free(module, swapped=False)
    check_loss_module(module)
    function, description = forward
    return description, _set_forward(module, function)


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------


def patch(model: nn.Module, norms: bool = True, rope: bool = True, mlp: bool = True,
          loss: bool | str = False) -> PatchReport:
    """Swaps blockfuse's fused ops into a Hugging Face model in place; returns what it did.

    ``norms``: RMSNorm / LayerNorm modules -> ``blockfuse.nn.RMSNorm`` / ``LayerNorm`` sharing
    the same parameters; ``rope``: attention forwards call ``blockfuse.rotary``; ``mlp``: gated
    MLPs run as ``blockfuse.gated_mlp``, plain ones as ``blockfuse.fused_mlp`` (``swiglu`` / ``geglu``
    between projections that are not plain Linear layers). Works on Llama, Mistral, Qwen2, Qwen3,
    Phi-3, Gemma (1-3), OLMo-2, SigLIP and SigLIP-2 models (any head), alone or inside a larger model.
    Patching again changes nothing more than what the new flags add (what is patched already is
    reported as skipped). Undo with :func:`unpatch`.

    ``loss``: a causal LM of those families (``LlamaForCausalLM``, ``Qwen3ForCausalLM``, ...) called
    with ``labels`` computes Hugging Face's loss (shifted labels or ``shift_labels``, ``ignore_index``,
    ``num_items_in_batch``, the LM head's bias, ``final_logit_softcapping``) with
    ``blockfuse.linear_cross_entropy``, and the output's ``logits`` is None: the logits are never made. Without
    ``labels`` the forward is Hugging Face's own, logits and all. Raises ValueError when the model holds no causal LM.
    ``loss="low-memory"``: the same, the fused loss holding no more than Liger-Kernel's does
    (``linear_cross_entropy(chunk_size="low-memory")``; ``True``: its default chunks, faster, more memory).

    NOTE: ``loss`` is off by default, and not reported as skipped when off: ``logits=None`` changes
    what the model returns, so a caller asks for it.

    NOTE: pickling the whole patched module (``torch.save(model)``) is not supported: save its
    state dict (or ``save_pretrained``), which patching leaves unchanged.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not (loss is False or loss is True or loss == LOW_MEMORY):
        raise ValueError(f"loss: expected True, False or {LOW_MEMORY!r}, got {loss!r}")
    check_transformers_version()
    found = list(roots(model))
    chunk_size = LOW_MEMORY if loss == LOW_MEMORY else None
    loss_forwards = _loss_forwards(model, found, chunk_size) if loss else {}  # raises before anything changes
    if not found:
        raise ValueError(f"blockfuse.patch does not support {type(model).__name__} "
                         f"({type(model).__module__}): supported are {supported_models()}")
    report = PatchReport(type(model).__name__, tuple(dict.fromkeys(family.name for _, _, family in found)))
    wanted = {"norms": norms, "rope": rope, "mlp": mlp}
    records = vars(model).setdefault(STATE, [])
    for root_path, root, family in found:
        if not family.has_rope:
            report.skipped.append(PatchEntry("rope", root_path, type(root).__name__, reason=family.no_rope_reason))
        cache: dict = {}  # a class's forward -> its patched copy, shared by the family's modules
        for path, module in list(root.named_modules(prefix=root_path)):
            kind = _kind(module, family)
            if kind is None:
                continue
            before = _before(module, kind)
            if not wanted[kind]:
                report.skipped.append(PatchEntry(kind, path, before, reason=f"not asked for ({kind}=False)"))
                continue
            try:
                after, record = _PATCHERS[kind](model, path, module, family, cache)
            except CannotPatch as reason:
                report.skipped.append(PatchEntry(kind, path, before, reason=str(reason)))
                continue
            records.append(record)
            report.replaced.append(PatchEntry(kind, path, before, after))
        if root_path in loss_forwards:
            before = f"{type(root).__name__}: loss_function(lm_head(hidden), labels)"
            try:
                after, record = _patch_loss(root, loss_forwards[root_path])
            except CannotPatch as reason:
                report.skipped.append(PatchEntry("loss", root_path, before, reason=str(reason)))
            else:
                records.append(record)
                report.replaced.append(PatchEntry("loss", root_path, before, after))
    if not records:
        del vars(model)[STATE]
    return report


def unpatch(model: nn.Module) -> int:
    """Undoes every :func:`patch` of ``model``: the original modules back in place (holding the
    model's current parameters), instance forwards removed. Returns how many changes it undid
    (0 for a model that is not patched)."""
    records = vars(model).pop(STATE, None) or []
    for record in reversed(records):
        record.undo()
    return len(records)
