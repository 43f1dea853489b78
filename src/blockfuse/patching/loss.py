"""``blockfuse.patch(model, loss=True)``: a Hugging Face causal LM's loss through
``blockfuse.linear_cross_entropy``, the LM head and the cross-entropy in one op that never makes the
(tokens, vocab) logits.

The causal LM gets an instance ``forward``. With ``labels``, it calls the base model (``self.model``)
and then the fused loss, and returns the model's own output class with ``logits=None``; without
``labels``, it runs Hugging Face's forward (logits and all). It sits inside copies of the class
forward's decorators (``can_return_tuple``, ``deprecate_kwarg``: see ``forwards.wrapped_like``), so
``return_dict`` and renamed keywords work as before.

Any ``*ForCausalLM`` whose forward has the usual shape is taken: the base model, its
``last_hidden_state`` sliced by ``logits_to_keep``, ``lm_head``, ``self.loss_function`` (and Gemma-2's
``final_logit_softcapping``). blockfuse checks which names the forward reads. A forward that reads
any other name is refused: an MoE's auxiliary loss, Cohere's ``logit_scale``, Granite's
``logits_scaling``.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from blockfuse.ops.cross_entropy import linear_cross_entropy
from blockfuse.ops.sharding import is_dtensor
from blockfuse.patching.forwards import MARK, CannotPatch, has_hooks, unwrap, wrapped_like

SOFTCAP = "final_logit_softcapping"  # the config attribute of Gemma-2's logit softcap
# The names that a causal LM's forward reads (its code's co_names) when it has the shape above:
# transformers 5 (slice_logits_to_keep, cache) and 4.5x (slice / isinstance / int, past_key_values).
FORWARD_NAMES = frozenset({
    "model", "last_hidden_state", "lm_head", "loss_function", "config", "vocab_size",
    "slice_logits_to_keep", "slice", "isinstance", "int", "cache", "past_key_values", "hidden_states",
    "attentions", SOFTCAP, "torch", "tanh",
})
REQUIRED_NAMES = frozenset({"model", "last_hidden_state", "lm_head", "loss_function"})


def is_causal_lm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("ForCausalLM")


# ----------------------------------------------------------------------------------------
# The loss: transformers' ForCausalLMLoss on lm_head(hidden), without the logits
# ----------------------------------------------------------------------------------------


def causal_lm_loss(hidden: Tensor, lm_head: nn.Linear, labels: Tensor, *, num_items_in_batch=None,
                   ignore_index: int = -100, shift_labels: Tensor | None = None,
                   softcap: float | None = None, chunk_size: int | str | None = None) -> Tensor:
    """transformers' ``ForCausalLMLoss(lm_head(hidden), labels, ...)`` without making the logits
    (capped as ``softcap * tanh(logits / softcap)`` first when ``softcap`` is given).

    The LM head is called as a module (its hooks run) when it has hooks or FSDP2 manages it.

    ``hidden``: (batch, seq, d); ``labels``: (batch, seq), shifted here by one position, with
    ``ignore_index`` for the last one, unless ``shift_labels`` (batch, seq) is given already shifted.
    Returns the fp32 mean over the tokens that are not ignored, or the sum divided by
    ``num_items_in_batch`` when that is given.
    """
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]  # token i predicts label i + 1
    target = shift_labels.reshape(-1).to(hidden.device)  # (tokens,)
    # NOTE: "sum" divided by num_items_in_batch when the caller gives it, as transformers does. The
    # Trainer counts the labelled tokens of the whole step (every gradient-accumulation micro-batch,
    # every device), so each micro-batch's loss is its share of the step's mean.
    # (the division inside the op: the gradients it makes in the forward carry it, and loss.backward() leaves them
    # as they are, where a division after it made the backward scale them: a pass over the weight's gradient and
    # a second rounding)
    reduction = "mean" if num_items_in_batch is None else "sum"
    options = dict(ignore_index=ignore_index, softcap=softcap, reduction=reduction, chunk_size=chunk_size,
                   divisor=num_items_in_batch)
    hidden2 = hidden.reshape(-1, hidden.shape[-1])
    if is_fsdp(lm_head) or has_hooks(lm_head):
        return _as_forward_of(lm_head, _fused_head_loss, hidden2, target, options)
    return _fused_head_loss(lm_head, hidden2, target, options)


def _fused_head_loss(head: nn.Linear, hidden: Tensor, target: Tensor, options: dict) -> Tensor:
    weight = head.weight
    if not is_dtensor(weight) or is_dtensor(hidden):
        return linear_cross_entropy(hidden, weight, target, head.bias, **options)
    # Tensor parallelism: the head sharded on the vocabulary (blockfuse.distributed.VocabularyShardedHead), hidden
    # the same tokens on every rank (the plan gathers the final norm's output): the vocabulary-parallel loss.
    from torch.distributed.tensor import DTensor, Replicate

    hidden = DTensor.from_local(hidden, weight.device_mesh, [Replicate()], run_check=False)
    return linear_cross_entropy(hidden, weight, target, head.bias, **options).to_local()


def _as_forward_of(module: nn.Module, function: Callable, *args):
    """``function(module, *args)`` called as ``module``'s forward, so that the hooks on ``module`` run around
    it as around its own forward.

    NOTE: FSDP2 (``fully_shard`` on the LM head) gathers the sharded weight in the head's forward pre-hook and
    reduce-scatters its gradient after the backward from hooks that the head's call installs; reading
    ``lm_head.weight`` outside that call would give the local shard, and the gradient would never be
    reduced."""
    module.forward = types.MethodType(function, module)  # an instance attribute: this call only
    try:
        return module(*args)
    finally:
        del module.forward


def is_fsdp(module: nn.Module) -> bool:
    """True for a module that PyTorch's FSDP2 (``fully_shard``) manages."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a build without distributed
        return False
    return isinstance(module, FSDPModule)


def _slice_logits_to_keep(hidden: Tensor, logits_to_keep: int | Tensor) -> Tensor:
    """The slicing that transformers 4.5x writes in the forward itself."""
    indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    return hidden[:, indices, :]


# ----------------------------------------------------------------------------------------
# The forward of a causal LM with its loss fused
# ----------------------------------------------------------------------------------------


def _keywords(positional: tuple[str, ...], args: tuple, kwargs: dict) -> dict:
    """The arguments of a call by name (``positional``: the forward's positional parameters)."""
    if len(args) > len(positional):
        raise TypeError(f"forward() takes {len(positional) + 1} positional arguments but {len(args) + 1} "
                        f"were given")
    arguments = dict(zip(positional, args))
    clash = sorted(arguments.keys() & kwargs.keys())
    if clash:
        raise TypeError(f"forward() got multiple values for argument {clash[0]!r}")
    arguments.update(kwargs)
    return arguments


def loss_forward(cls: type, chunk_size: int | str | None = None) -> tuple[types.FunctionType, str]:
    """(the forward that replaces the forward of causal LM class ``cls``, what it computes with labels;
    ``chunk_size``: the fused loss's, e.g. "low-memory"). Raises CannotPatch when ``cls.forward`` does not have
    the shape of Hugging Face's causal LMs."""
    _, original = unwrap(cls.forward)
    names = set(original.__code__.co_names)
    outputs = [original.__globals__.get(name) for name in names - FORWARD_NAMES]
    outputs = [output for output in outputs if isinstance(output, type)
               and {"loss", "logits"} <= set(getattr(output, "__dataclass_fields__", ()))]
    unknown = sorted(names - FORWARD_NAMES - {output.__name__ for output in outputs})
    if not REQUIRED_NAMES <= names or len(outputs) != 1:
        raise CannotPatch(f"{cls.__name__}.forward does not call self.model, lm_head and self.loss_function "
                          f"and return one output with a loss and logits, as Hugging Face's causal LMs do")
    if unknown:
        raise CannotPatch(f"{cls.__name__}.forward also reads {', '.join(unknown)} (an auxiliary loss or a "
                          f"logit scale that blockfuse's loss does not apply)")
    parameters = list(inspect.signature(original).parameters.values())[1:]
    by_name = {parameter.name: parameter for parameter in parameters}
    if "labels" not in by_name or "logits_to_keep" not in by_name or parameters[-1].kind != parameters[-1].VAR_KEYWORD:
        raise CannotPatch(f"{cls.__name__}.forward has parameters {list(by_name)}, without the labels, "
                          f"logits_to_keep and **kwargs that blockfuse knows")
    positional = tuple(p.name for p in parameters if p.kind == p.POSITIONAL_OR_KEYWORD)
    keep_default = by_name["logits_to_keep"].default
    slice_hidden = original.__globals__["slice_logits_to_keep"] if "slice_logits_to_keep" in names \
        else _slice_logits_to_keep
    reads_softcap = SOFTCAP in names
    (output_class,) = outputs
    carried = tuple(name for name in output_class.__dataclass_fields__ if name not in ("loss", "logits"))

    def forward(self, *args, **kwargs):
        arguments = _keywords(positional, args, kwargs)
        labels = arguments.pop("labels", None)
        if labels is None:
            return original(self, **arguments)  # Hugging Face's own forward: the logits as usual
        logits_to_keep = arguments.pop("logits_to_keep", keep_default)
        # NOTE: the other keywords reach the base model and the loss alike, as in Hugging Face's forward
        # (num_items_in_batch, shift_labels and ignore_index are the loss's; the base model ignores them).
        outputs = self.model(**arguments)
        hidden = slice_hidden(outputs.last_hidden_state, logits_to_keep)  # (batch, kept, d)
        loss = causal_lm_loss(hidden, self.lm_head, labels, num_items_in_batch=arguments.get("num_items_in_batch"),
                              ignore_index=arguments.get("ignore_index", -100),
                              shift_labels=arguments.get("shift_labels"),
                              softcap=getattr(self.config, SOFTCAP, None) if reads_softcap else None,
                              chunk_size=chunk_size)
        # NOTE: logits=None: making them is what the fused loss saves (Liger-Kernel's patch does the same).
        return output_class(loss=loss, logits=None, **{name: getattr(outputs, name, None) for name in carried})

    forward.__name__, forward.__qualname__ = "forward", f"{cls.__qualname__}.forward"
    forward.__doc__ = original.__doc__
    # NOTE: the signature of Hugging Face's forward, not (*args, **kwargs): the Trainer reads it to choose
    # the dataset columns it passes and to see whether the model takes num_items_in_batch.
    forward.__signature__ = inspect.signature(original)
    function = wrapped_like(cls.forward, forward)
    setattr(function, MARK, "loss")
    softcap = f", softcap=config.{SOFTCAP}" if reads_softcap else ""
    chunk = f", chunk_size={chunk_size!r}" if chunk_size is not None else ""
    return function, (f"blockfuse.linear_cross_entropy(hidden, lm_head, labels{softcap}{chunk}); logits None with "
                      f"labels")


def check_loss_module(model: nn.Module) -> None:
    """Raises CannotPatch for a causal LM whose loss blockfuse's forward would not reproduce: an LM head
    that is not a plain Linear layer, or another loss_function than transformers' ForCausalLMLoss."""
    head = getattr(model, "lm_head", None)
    plain = type(head) is nn.Linear and not has_hooks(head)
    sharded = isinstance(head, nn.Linear) and is_fsdp(head)  # FSDP2: its hooks run around the fused loss
    if not (plain or sharded) or "forward" in vars(head):
        raise CannotPatch("lm_head is not a plain Linear layer (LoRA, quantized, hooks, an accelerate hook): "
                          "left as is")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if head.out_features != vocab:
        raise CannotPatch(f"lm_head has {head.out_features} outputs but config.vocab_size is {vocab}")
    loss_function: Callable | None = getattr(model, "loss_function", None)
    name = getattr(loss_function, "__name__", type(loss_function).__name__)
    if (name, getattr(loss_function, "__module__", None)) != ("ForCausalLMLoss", "transformers.loss.loss_utils"):
        raise CannotPatch(f"loss_function is {name}, not transformers' ForCausalLMLoss: left as is")
