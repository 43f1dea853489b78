"""The Hugging Face model families that ``blockfuse.patch`` knows, and how to find them in a model.

A family is recognized by the module that defines its classes (``transformers.models.llama.
modeling_llama``, ...), looked up by name on the model's own classes: nothing is imported, and
classes renamed or added between transformers versions (``LlamaSdpaAttention`` in 4.46) are
found by what their forward calls rather than by a list of names.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class Family:
    name: str
    module: str  # the modeling module that defines the family's classes
    models: tuple[str, ...]  # the model classes named in the docs and errors (any head of the family works)
    norm: str | None  # the class name of its RMSNorm; None: torch.nn.LayerNorm
    # RMSNorm: HF Llama returns weight * normalized.to(input_dtype) (cast, then weight);
    # OLMo-2 returns (weight * normalized).to(input_dtype) (weight in fp32, then cast).
    cast_before_weight: bool = False
    # Gemma's RMSNorm multiplies by (1 + weight) in fp32, then casts (blockfuse.nn.RMSNorm(weight_offset=1.0)).
    norm_offset: float = 0.0
    has_rope: bool = True
    # RoPE: Llama's q * cos + rotate_half(q) * sin promotes to the wider of q and cos;
    # OLMo-2 casts the result back to q's dtype.
    rope_promotes: bool = True
    no_rope_reason: str = ""
    gated_mlp: bool = True


def _llama_like(name: str, package: str, prefix: str) -> Family:
    """A family whose norm, rotary embedding and MLP are Llama's (the RMSNorm casts before its weight; the MLP's
    projections gate_proj / up_proj / down_proj, or Phi-3's packed gate_up_proj)."""
    return Family(name, f"transformers.models.{package}.modeling_{package}", (f"{prefix}Model", f"{prefix}ForCausalLM"),
                  norm=f"{prefix}RMSNorm", cast_before_weight=True)


def _gemma(name: str, package: str, prefix: str) -> Family:
    """Gemma 1-3: an RMSNorm of zero-centred weights ((1 + weight) in fp32, then one cast), Llama's rotary (Gemma 3's
    QK-norms are that RMSNorm too), a GeGLU (tanh) MLP."""
    return Family(name, f"transformers.models.{package}.modeling_{package}", (f"{prefix}Model", f"{prefix}ForCausalLM"),
                  norm=f"{prefix}RMSNorm", cast_before_weight=False, norm_offset=1.0)


FAMILIES = (
    Family("Llama", "transformers.models.llama.modeling_llama", ("LlamaModel", "LlamaForCausalLM"),
           norm="LlamaRMSNorm", cast_before_weight=True),
    _llama_like("Mistral", "mistral", "Mistral"),
    _llama_like("Qwen2", "qwen2", "Qwen2"),
    _llama_like("Qwen3", "qwen3", "Qwen3"),
    _llama_like("Phi-3", "phi3", "Phi3"),
    _gemma("Gemma", "gemma", "Gemma"),
    _gemma("Gemma-2", "gemma2", "Gemma2"),
    _gemma("Gemma-3", "gemma3", "Gemma3"),
    Family("OLMo-2", "transformers.models.olmo2.modeling_olmo2", ("Olmo2Model", "Olmo2ForCausalLM"),
           norm="Olmo2RMSNorm", cast_before_weight=False, rope_promotes=False),
    Family("SigLIP", "transformers.models.siglip.modeling_siglip", ("SiglipVisionModel", "SiglipModel"),
           norm=None, has_rope=False, gated_mlp=False,
           no_rope_reason="SigLIP has no rotary embedding (learned absolute position embeddings)"),
    Family("SigLIP-2", "transformers.models.siglip2.modeling_siglip2", ("Siglip2VisionModel", "Siglip2Model"),
           norm=None, has_rope=False, gated_mlp=False,
           no_rope_reason="SigLIP-2 has no rotary embedding (learned position embeddings, resized per image)"),
)

_BY_MODULE = {family.module: family for family in FAMILIES}

# transformers' own floor for this code: the project's test extra (transformers>=4.45).
MIN_TRANSFORMERS = (4, 45)


def supported_models() -> str:
    names = ", ".join(name for family in FAMILIES for name in family.models)
    return f"{names} (and the other heads of these families)"


def family_of(module: nn.Module) -> Family | None:
    """The family whose modeling module defines ``module``'s class, or None."""
    return _BY_MODULE.get(type(module).__module__)


def _is_pretrained_model(module: nn.Module) -> bool:
    modeling_utils = sys.modules.get("transformers.modeling_utils")
    return modeling_utils is not None and isinstance(module, modeling_utils.PreTrainedModel)


def roots(model: nn.Module) -> Iterator[tuple[str, nn.Module, Family]]:
    """(path, module, family) of each outermost Hugging Face model of a known family in ``model``:
    ``model`` itself when it is one, else the ones inside it (a composite model's language
    model or vision tower). Paths are those of ``model.named_modules()``."""
    stack = [("", model)]
    while stack:
        path, module = stack.pop()
        family = family_of(module)
        if family is not None and _is_pretrained_model(module):
            yield path, module, family
            continue
        children = [(f"{path}.{name}" if path else name, child) for name, child in module.named_children()]
        stack.extend(reversed(children))


def check_transformers_version() -> None:
    transformers = sys.modules.get("transformers")
    version = getattr(transformers, "__version__", None)
    if version is None:
        return
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    if tuple(parts) < MIN_TRANSFORMERS:
        raise RuntimeError(f"blockfuse.patch needs transformers>={'.'.join(map(str, MIN_TRANSFORMERS))}, found "
                           f"{version}: upgrade transformers, or use blockfuse's ops and modules directly")
