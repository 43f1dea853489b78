"""What a fused kernel does, in words: the ATen ops behind a kernel name, and a short description.

Inductor names a fused kernel after the ATen ops it fuses (``triton_per_fused_add_native_layer_norm_view_1``,
``cpp_fused_mul_silu_view_3``): the original ops, sorted, joined with ``_``. Where the wrapper carries no
comment (the C++ kernels of torch 2.13), the ops are recovered from the name by splitting it into known op
names. ``describe`` turns a list of ops into the phrase an engineer would write ("LayerNorm + residual add").
"""

from __future__ import annotations

import functools
import re

# Ops that only move or reinterpret data: left out of descriptions.
LAYOUT_OPS = frozenset({
    "view", "reshape", "_unsafe_view", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze",
    "slice", "select", "split", "split_with_sizes", "unbind", "alias", "as_strided", "clone", "_to_copy",
    "convert_element_type", "copy", "copy_", "detach", "getitem", "full", "empty", "zeros", "ones",
})

_FALLBACK_VOCABULARY = (
    "add", "sub", "mul", "div", "neg", "exp", "log", "pow", "sqrt", "rsqrt", "sum", "mean", "var_mean",
    "cat", "silu", "gelu", "tanh", "sigmoid", "relu", "native_layer_norm", "native_layer_norm_backward",
    "_fused_rms_norm", "silu_backward", "gelu_backward", "_softmax", "_safe_softmax", "addmm", "mm", "bmm",
    "clone", "_to_copy", "view", "permute", "transpose", "slice", "split", "expand", "where", "native_dropout",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
)


@functools.lru_cache(maxsize=1)
def op_vocabulary() -> frozenset[str]:
    """Names of every registered op, ATen and custom (``add``, ``native_layer_norm``, ``rms_norm``, ...)."""
    names = set(_FALLBACK_VOCABULARY)
    try:
        import torch

        for qualified in torch._C._dispatch_get_all_op_names():  # "aten::add.Tensor", "blockfuse::rms_norm"
            names.add(qualified.partition("::")[2].split(".")[0])
    except Exception:  # an older or stripped torch: the built-in list is enough for the common ops
        pass
    return frozenset(names)


def ops_from_kernel_name(name: str) -> list[str]:
    """The ATen ops named in a fused kernel's name, e.g. ``cpp_fused_mul_silu_view_3`` -> mul, silu, view.

    The name is split into the fewest known op names (longest match); words that match no op are
    kept as they are, so nothing is silently dropped. Returns ``[]`` for a name without ``fused``.
    """
    match = re.match(r"^(?:triton|cpp)_(?:[a-z]+_)?fused_(.*)$", name)
    if match is None:
        return []
    words = re.sub(r"(^|_)\d+$", "", match.group(1)).split("_")
    if words == [""]:
        return []
    vocabulary = op_vocabulary()
    count = len(words)
    # best[i]: (segments, unknown words) for words[i:]; fewer unknown words first, then fewer segments.
    best: list[tuple[int, int, list[str]] | None] = [None] * (count + 1)
    best[count] = (0, 0, [])
    for start in range(count - 1, -1, -1):
        candidates = []
        for end in range(start + 1, count + 1):
            piece = "_".join(words[start:end])
            rest = best[end]
            if rest is None:
                continue
            unknown = 0 if piece in vocabulary else end - start
            if unknown and end - start > 1:
                continue  # an unknown piece is kept one word at a time
            candidates.append((rest[0] + unknown, rest[1] + 1, [piece, *rest[2]]))
        best[start] = min(candidates, key=lambda c: (c[0], c[1])) if candidates else None
    result = best[0][2] if best[0] else words
    return [piece for piece in result if piece]


def short_op(op: str) -> str:
    """``aten.native_layer_norm`` / ``torch.ops.aten.add.Tensor`` / ``add`` -> the bare op name."""
    op = op.strip().removeprefix("torch.ops.")
    parts = op.split(".")
    return parts[1] if len(parts) >= 2 else parts[0]


def post_grad_op(node_name: str) -> str:
    """A post-grad FX node name (``convert_element_type_16``, ``var_mean``) -> its op (FX names nodes
    after their target, with a numeric suffix for repeats)."""
    return re.sub(r"_\d+$", "", node_name)


def describe(ops: list[str], *, feeds: frozenset[str] | set[str] = frozenset()) -> str:
    """A short phrase for what a fused kernel computes, from the ops it fuses (ATen or post-grad).

    ``feeds``: ops the same graph runs as library or custom-op calls. Inductor names a kernel after
    every origin of its nodes, so a kernel that prepares an attention or custom op's input carries
    that op's name without computing it: such ops are named as what the kernel feeds.
    """
    names = {short_op(op) for op in ops}
    fed = sorted(names & set(feeds))
    names -= set(fed)
    text = _describe(names)
    fed = list(dict.fromkeys("attention" if "attention" in name else name for name in fed))
    return text + (f" (feeds {', '.join(fed)})" if fed else "")


def _describe(names: set[str]) -> str:
    parts: list[str] = []
    backward = {n for n in names if n.endswith("_backward")}

    def has(*candidates: str) -> bool:
        return any(c in names for c in candidates)

    layer = has("native_layer_norm", "layer_norm") or (has("var_mean") and has("rsqrt"))
    rms = has("_fused_rms_norm", "rms_norm") or (has("rsqrt") and has("mean", "pow") and not layer)
    if has("native_layer_norm_backward", "layer_norm_backward"):
        parts.append("LayerNorm backward")
    elif layer:
        parts.append("LayerNorm")
    if has("_fused_rms_norm_backward", "rms_norm_backward"):
        parts.append("RMSNorm backward")
    elif rms:
        parts.append("RMSNorm")
    rotary = has("cat") and has("neg") and has("mul")
    if rotary:
        parts.append("rotary (RoPE)")
    if has("silu_backward"):
        parts.append("SiLU backward")
    elif has("silu"):
        parts.append("SiLU * up (SwiGLU)" if has("mul") else "SiLU")
    if has("gelu_backward"):
        parts.append("GELU backward")
    elif has("gelu"):
        parts.append("GELU * up (GeGLU)" if has("mul") else "GELU")
    if has("_softmax", "softmax", "_safe_softmax"):
        parts.append("softmax")
    if has("native_dropout", "dropout", "bernoulli", "inductor_random"):
        parts.append("dropout")
    norm_named = any("Norm" in p for p in parts)
    if has("add") and norm_named:
        parts.append("residual add")
    if has("sum") and (norm_named or backward or has("silu")):
        parts.append("sum over rows (parameter grads)")
    if parts:
        return " + ".join(parts)
    # NOTE: a kernel that writes an attention input carries the attention op in its name; it does not run it.
    feeds_attention = any("attention" in n for n in names)
    arithmetic = sorted(n for n in names if n not in LAYOUT_OPS and "attention" not in n)
    if not arithmetic:
        text = "copy / layout change" if names else "unknown"
    elif arithmetic == ["sum"]:
        text = "sum (reduction)"
    elif {"cat", "neg"} <= set(arithmetic):
        text = "rotate-half (neg, cat)"
    else:
        text = ", ".join(arithmetic)
    return text + (" (writes attention inputs)" if feeds_attention else "")
