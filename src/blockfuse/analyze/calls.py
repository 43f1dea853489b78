"""What one call in a wrapper's ``call()`` is: a kernel launch, a library call (GEMM, attention), a custom
op, a fallback to ATen, or bookkeeping that launches nothing; and the FLOPs / bytes of library calls."""

from __future__ import annotations

import re
from dataclasses import dataclass

GEMMS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_int_mm", "_scaled_mm", "_mm_plus_mm", "addmm_activation"})
ATTENTION = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|flex_attention")

# Calls that allocate, reinterpret, check or select a stream: no kernel.
FREE_CALLS = frozenset({
    "empty_strided", "empty_strided_cuda", "empty_strided_cpu", "empty_strided_xpu", "empty_strided_mtia",
    "empty_strided_cpu_pinned", "empty_strided_p2p", "reinterpret_tensor", "assert_size_stride",
    "assert_alignment", "get_raw_stream", "alloc_from_pool", "rand_strided", "as_strided", "len", "print",
    "maybe_profile", "start_graph", "end_graph", "run_intermediate_hooks", "align", "device", "int", "float",
    "torch.empty", "torch.empty_strided", "torch.empty_like", "torch.cuda.set_device",
    "torch.cuda._DeviceGuard", "torch.cuda.current_stream", "torch.cuda.synchronize", "torch.device",
    "torch.ops.inductor._alloc_from_pool", "torch.ops.inductor._reinterpret_tensor",
    "torch.ops.aten.set_.source_Tensor", "torch._check", "torch._check_is_size",
})
# Tensor methods that only reinterpret or describe a tensor.
FREE_METHODS = frozenset({
    "view", "reshape", "as_strided", "t", "permute", "transpose", "expand", "unsqueeze", "squeeze", "narrow",
    "select", "size", "stride", "numel", "dim", "data_ptr", "storage_offset", "untyped_storage", "__getitem__",
    "clear", "append", "get", "record_stream", "is_contiguous", "unflatten", "flatten", "view_as", "expand_as",
    "detach", "resize_", "set_", "element_size", "nbytes",
})


@dataclass(frozen=True)
class TensorInfo:
    """A tensor argument as the wrapper declares it: shape (None where symbolic), dtype name."""

    shape: tuple[int, ...] | None
    dtype: str | None  # "bfloat16"

    @property
    def itemsize(self) -> int:
        import torch

        dtype = getattr(torch, self.dtype or "", None)
        return dtype.itemsize if isinstance(dtype, torch.dtype) else 4

    @property
    def nbytes(self) -> int | None:
        if self.shape is None or self.dtype is None:
            return None
        return _product(self.shape) * self.itemsize

    def text(self) -> str:
        short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64", "int64": "i64",
                 "int32": "i32", "bool": "bool", "int8": "i8", "uint8": "u8"}.get(self.dtype or "", self.dtype or "?")
        dims = ", ".join(str(d) for d in self.shape) if self.shape is not None else "?"
        return f"{short}[{dims}]"


@dataclass(frozen=True)
class CallKind:
    kind: str  # "extern" (a library call or an op outside Inductor) or "wrapper op" (ATen run by the wrapper)
    category: str  # gemm, attention, custom op, fallback, collective, convolution, extern, aten op
    op: str  # "aten.addmm", "aten._scaled_dot_product_cudnn_attention", "blockfuse.layer_norm", ...


def normalize(dotted: str) -> str:
    """Spell wrapper aliases out: ``aten.x`` -> ``torch.ops.aten.x`` (the wrapper defines ``aten``)."""
    for alias, full in (("aten.", "torch.ops.aten."), ("inductor_ops.", "torch.ops.inductor."),
                        ("_quantized.", "torch.ops._quantized."), ("prims.", "torch.ops.prims.")):
        if dotted.startswith(alias):
            return full + dotted[len(alias):]
    return dotted


def attention_backend(op: str) -> str:
    name = op.rsplit(".", 1)[-1] if "." in op else op
    if "cudnn" in name:
        backend = "cuDNN"
    elif "for_cpu" in name:
        backend = "flash (CPU)"
    elif "flash" in name:
        backend = "flash"
    elif "efficient" in name:
        backend = "efficient"
    elif "flex" in name:
        backend = "flex"
    elif "math" in name:
        backend = "math"
    else:
        backend = name
    return backend + (" backward" if "backward" in name else "")


def classify(dotted: str | None, method: str | None = None) -> CallKind | None:
    """``dotted``: the called name (``extern_kernels.mm``, ``torch.ops.aten.x.default``); ``method``: the
    attribute name when a method is called on an expression. None when the call launches nothing."""
    if dotted is None:
        if method is None or method in FREE_METHODS:
            return None
        return CallKind("wrapper op", "aten op", f"aten.{method}")
    dotted = normalize(dotted)
    if dotted in FREE_CALLS or dotted.startswith(("torch.cuda.", "torch._C.", "torch._dynamo.")):
        return None
    if dotted.startswith("extern_kernels."):
        op = dotted.split(".", 1)[1]
        if op in GEMMS:
            return CallKind("extern", "gemm", f"aten.{op}")
        if op == "convolution":
            return CallKind("extern", "convolution", "aten.convolution")
        return CallKind("extern", "extern", f"extern.{op}")
    if dotted.startswith("torch.ops."):
        parts = dotted.split(".")
        if len(parts) < 4:
            return None
        namespace, op = parts[2], parts[3]
        if namespace in ("aten", "prims"):
            if ATTENTION.search(op):
                return CallKind("extern", "attention", f"aten.{op}")
            if op in GEMMS:
                return CallKind("extern", "gemm", f"aten.{op}")
            return CallKind("extern", "fallback", f"{namespace}.{op}")
        if namespace in ("_c10d_functional", "c10d_functional", "c10d", "_dtensor"):
            return CallKind("extern", "collective", f"{namespace}.{op}")
        if namespace == "inductor":
            if op.startswith(("_alloc", "_reinterpret")):
                return None
            return CallKind("extern", "fallback", f"inductor.{op}")
        if namespace == "higher_order":
            return CallKind("extern", "fallback", f"higher_order.{op}")
        return CallKind("extern", "custom op", f"{namespace}.{op}")
    if dotted.startswith("torch."):
        name = dotted.split(".", 1)[1]
        if name.startswith(("empty", "_check", "device", "Size")):
            return None
        return CallKind("wrapper op", "aten op", f"aten.{name}")
    return None


# ---------------------------------------------------------------- FLOPs and bytes of library calls


def _product(values) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def gemm_cost(op: str, tensors: list, out) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of ``op`` from its operands' shapes: 2*M*N*K per matrix (times the batch);
    bytes: each operand read once, the output written once. ``tensors``: the positional tensor
    arguments (``TensorInfo`` or None), ``out``: the ``out=`` tensor or None."""
    name = op.split(".")[-1]
    operands = tensors[1:3] if name in ("addmm", "baddbmm", "addmm_activation") else tensors[:2]
    if len(operands) < 2 or any(t is None or t.shape is None or len(t.shape) < 2 for t in operands):
        return None, None
    a, b = operands
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    batch = _product(a.shape[:-2])
    flops = 2.0 * batch * m * n * k
    nbytes = sum(t.nbytes for t in tensors if t is not None and t.nbytes is not None)
    nbytes += out.nbytes if out is not None and out.nbytes is not None else batch * m * n * a.itemsize
    return flops, float(nbytes)


def attention_cost(op: str, named: dict, tensors: list) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of an attention call: 4*B*H*Sq*Sk*D forward (QK^T and PV), half when causal,
    2.5x that backward (the recomputed QK^T, then dV, dP, dQ, dK). Bytes: every tensor argument read
    once, plus the output (forward) or the q, k, v gradients (backward) written once."""
    query, key = named.get("query"), named.get("key")
    if query is None or key is None or query.shape is None or key.shape is None or len(query.shape) < 3:
        return None, None
    *batch_heads, seq_q, head_dim = query.shape
    seq_k = key.shape[-2]
    value = named.get("value")
    value_dim = value.shape[-1] if value is not None and value.shape else head_dim
    flops = 2.0 * _product(batch_heads) * seq_q * seq_k * (head_dim + value_dim)
    if named.get("is_causal") is True:
        flops *= 0.5
    backward = "backward" in op
    if backward:
        flops *= 2.5
    known = [t for t in tensors if t is not None and t.nbytes is not None]
    nbytes = float(sum(t.nbytes for t in known))
    if backward:
        nbytes += sum(t.nbytes for t in (query, key, value) if t is not None and t.nbytes is not None)
    elif query.nbytes is not None:
        nbytes += query.nbytes * value_dim / head_dim
    return flops, nbytes


def schema_names(op: str, positional: int, keywords: list[str]) -> list[str] | None:
    """The schema's argument names for the first ``positional`` arguments of ``torch.ops.<op>``
    (``aten._scaled_dot_product_cudnn_attention``); None when the op is not registered here."""
    try:
        import torch

        namespace, name = op.split(".", 1)
        packet = getattr(getattr(torch.ops, namespace), name)
        overload = packet.default if "default" in packet.overloads() else getattr(packet, packet.overloads()[0])
        arguments = [a.name for a in overload._schema.arguments if not a.kwarg_only]
    except Exception:
        return None
    return arguments[:positional]
