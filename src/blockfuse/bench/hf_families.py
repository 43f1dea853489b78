"""The causal-LM families of ``blockfuse bench model hf-llama --family``: where transformers defines each,
the classes the benchmark builds, what its config needs beyond Llama's, and Liger-Kernel's function for it.

``bench.hf_llama`` builds every family at Llama's sizes (``FULL`` / ``TINY``), head_dim = hidden / heads,
with the family's own activation (its config's default: SiLU, Gemma's tanh GELU) and its own defaults
otherwise (Qwen2's q/k/v biases, Gemma's tied embeddings and scaled input embeddings, Mistral's and
Gemma-2/3's sliding windows of 4096, Gemma-2's attention and logit softcaps).

Liger-Kernel (0.8.5) covers each family with ``apply_liger_kernel_to_<family>`` (Gemma-3's text model:
``apply_liger_kernel_to_gemma3_text``), all of the same keywords: ``rope``, ``rms_norm``, the MLP (``swiglu``;
Gemma's GeGLU: ``geglu``; Phi-3's packed gate|up projection: ``swiglu`` too, its own SwiGLU module),
``cross_entropy``, ``fused_linear_cross_entropy`` and ``model``. Each assigns module globals of the family's
modeling module (``apply_rotary_pos_emb``, the RMSNorm and MLP classes) and, given no model, its causal
LM's ``forward``: :func:`modeling_globals_restored` puts them back.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class CausalLMFamily:
    name: str  # the value of --family
    title: str  # as the reports write it
    package: str  # transformers.models.<package>.modeling_<package>
    config: str  # the class names the benchmark builds, all defined in (or imported by) that module
    model: str  # the decoder alone (modes fwd, fwdbwd)
    causal_lm: str  # with the LM head (mode loss, generation)
    liger: str | None  # Liger-Kernel's function (liger_kernel.transformers.<liger>); None: Liger does not cover it
    no_liger_reason: str = ""
    liger_mlp: str = "swiglu"  # the keyword of Liger's MLP for the family
    attention: str = "sdpa"  # attn_implementation
    # NOTE: Gemma-2 and -3 scale the queries by query_pre_attn_scalar ** -0.5 (default 256, the default
    # head_dim): given the head_dim here, the usual 1 / sqrt(head_dim) of Gemma-2 2B / 9B and Gemma-3 1B-12B,
    # rather than 256 with a head_dim of 64.
    query_scale_by_head_dim: bool = False

    @property
    def module(self) -> str:
        return f"transformers.models.{self.package}.modeling_{self.package}"

    def classes(self) -> tuple[type, type, type]:
        """(config, model, causal LM) classes, imported."""
        modeling = importlib.import_module(self.module)
        return getattr(modeling, self.config), getattr(modeling, self.model), getattr(modeling, self.causal_lm)

    def config_options(self, head_dim: int) -> dict:
        """The config's keywords beyond the sizes and token ids: the head size, the attention, the query scale."""
        options = {"head_dim": head_dim, "attn_implementation": self.attention}
        if self.query_scale_by_head_dim:
            options["query_pre_attn_scalar"] = head_dim
        return options


def _family(name: str, title: str, package: str, prefix: str, **options) -> CausalLMFamily:
    return CausalLMFamily(name, title, package, f"{prefix}Config", f"{prefix}Model", f"{prefix}ForCausalLM",
                          liger=f"apply_liger_kernel_to_{package}", **options)


FAMILIES = {family.name: family for family in (
    _family("llama", "Llama", "llama", "Llama"),
    _family("mistral", "Mistral", "mistral", "Mistral"),
    _family("qwen2", "Qwen2", "qwen2", "Qwen2"),
    _family("qwen3", "Qwen3", "qwen3", "Qwen3"),
    _family("phi3", "Phi-3", "phi3", "Phi3"),
    _family("gemma", "Gemma", "gemma", "Gemma", liger_mlp="geglu"),
    # NOTE: eager attention: transformers' Gemma-2 refuses SDPA, which has no softcap of the attention logits
    # (attn_logit_softcapping).
    _family("gemma2", "Gemma-2", "gemma2", "Gemma2", liger_mlp="geglu", attention="eager",
            query_scale_by_head_dim=True),
    CausalLMFamily("gemma3", "Gemma-3", "gemma3", "Gemma3TextConfig", "Gemma3TextModel", "Gemma3ForCausalLM",
                   liger="apply_liger_kernel_to_gemma3_text", liger_mlp="geglu", query_scale_by_head_dim=True),
)}
LLAMA = FAMILIES["llama"]


def family_of_model(model: nn.Module) -> CausalLMFamily:
    """The family whose modeling module defines ``model``'s class."""
    module = type(model).__module__
    family = next((f for f in FAMILIES.values() if f.module == module), None)
    if family is None:
        raise ValueError(f"{type(model).__name__} ({module}) is none of the families {', '.join(FAMILIES)}")
    return family


def liger_call(family: CausalLMFamily) -> str:
    """Liger's call on a model of ``family`` (:func:`apply_liger`'s), as the reports write it."""
    return (f"{family.liger}(rope=True, rms_norm=True, {family.liger_mlp}=True, cross_entropy=False, "
            "fused_linear_cross_entropy=<mode loss>, model=model)")


def apply_liger(model: nn.Module, loss: bool = False) -> None:
    """Liger's rope, RMSNorm and MLP on ``model`` (of a family of FAMILIES) and, with ``loss``, its fused linear
    cross-entropy (``model``'s forward skips the logits when given labels in training mode)."""
    family = family_of_model(model)
    if family.liger is None:
        raise RuntimeError(f"Liger-Kernel does not cover {family.title}: {family.no_liger_reason}")
    try:
        liger = importlib.import_module("liger_kernel.transformers")
    except ImportError as error:
        raise RuntimeError(f"liger-kernel is not installed ({error}); pip install liger-kernel") from error
    apply = getattr(liger, family.liger, None)
    if apply is None:
        raise RuntimeError(f"this liger-kernel has no {family.liger} ({family.title}); liger-kernel 0.8.5 has it")
    apply(rope=True, rms_norm=True, **{family.liger_mlp: True}, cross_entropy=False, fused_linear_cross_entropy=loss,
          model=model)


@contextlib.contextmanager
def modeling_globals_restored(family: CausalLMFamily = LLAMA):
    """Puts back the module globals of ``family``'s modeling module that Liger assigns, and the attributes of
    the classes it defines (Liger's fused linear cross-entropy, given no model, assigns the causal LM's
    ``forward``)."""
    modeling = importlib.import_module(family.module)
    saved = dict(vars(modeling))
    classes = {value: dict(vars(value)) for value in saved.values()
               if isinstance(value, type) and value.__module__ == modeling.__name__}
    try:
        yield
    finally:
        for name in [name for name in vars(modeling) if name not in saved]:
            delattr(modeling, name)
        for name, value in saved.items():
            if getattr(modeling, name, None) is not value:
                setattr(modeling, name, value)
        # (changed attributes only: transformers caches values on its classes as it goes, added ones stay)
        for cls, attributes in classes.items():
            for name, value in attributes.items():
                if vars(cls).get(name) is not value:
                    setattr(cls, name, value)
