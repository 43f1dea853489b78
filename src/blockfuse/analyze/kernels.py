"""One generated kernel's definition, as Inductor wrote it into a wrapper module (Triton or C++).

Triton kernels are defined as ``name = async_compile.triton('name', '''<source>''', ...)`` with a
``@triton_heuristics.<kind>(...)`` decorator whose ``inductor_meta`` holds counts (``num_load``,
``num_store``, ``num_reduction``) and, when ``benchmark_kernel`` is on, ``kernel_num_gb`` /
``kernel_flop``. C++ kernels are ``name = async_compile.cpp_pybinding([arg types], r'''<source>''')``
(``async_compile.cpp('''...''')`` in older versions). The comment block above a definition names the
source nodes and the original ATen ops (Triton only in torch 2.13; C++ kernels carry none there).

A user-written Triton kernel that a traced op launched (``torch.library.triton_op`` + ``wrap_triton``)
is emitted by ``define_user_defined_triton_kernel``: ``<fn>_<i> = async_compile.triton('<fn>', '''...''',
device_str='cuda')`` with a ``@triton_heuristics.user_autotune`` decorator, its jitted function under its
author's name (``<fn>_<i>`` with ``unique_user_kernel_names``), then the helpers it calls; the wrapper
launches it as ``<fn>_<i>.run(<args>, <grid x, y, z>, stream=stream0)``, constexpr arguments left out and
a None argument passed as ``-1``. Where ``<fn>`` is one of blockfuse's kernels
(``blockfuse.ops.launch.KERNEL_NAMES``) the kernel is labelled as blockfuse's.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from blockfuse.analyze.fusion import describe, ops_from_kernel_name, post_grad_op

TRITON_KINDS = {
    "pointwise": "pointwise",
    "reduction": "reduction",
    "persistent_reduction": "persistent reduction",
    "cooperative_reduction": "cooperative reduction",
    "split_scan": "scan",
    "template": "template",
    "user_autotune": "user Triton kernel",
    "foreach": "foreach",
    "fixed_config": "fixed-config",
}
_PREFIX_KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
                 "for": "foreach", "spl": "scan", "coo": "cooperative reduction"}


@dataclass
class Param:
    """One kernel parameter: ``role`` is in / out / inout (pointers, by Inductor's naming) or scalar."""

    name: str
    role: str
    dtype: str | None = None


@dataclass
class KernelDef:
    name: str
    backend: str  # "triton" or "cpp"
    kind: str
    params: list[Param]
    aten_ops: list[str] = field(default_factory=list)  # original ATen ops (before decomposition)
    post_grad_nodes: list[str] = field(default_factory=list)  # nodes of the post-grad graph it computes
    source_nodes: list[str] = field(default_factory=list)  # nodes of Dynamo's graph (user-level names)
    ops_source: str = "kernel name"  # where aten_ops came from: "comments" or "kernel name"
    num_load: int | None = None
    num_store: int | None = None
    num_reduction: int | None = None
    numel: dict[str, int | str] = field(default_factory=dict)  # {"x": 8388608, "r0_": 1024}
    num_gb: float | None = None  # Inductor's own estimate of the bytes one launch moves, in GB
    flop: float | None = None
    mutated_args: list[str] = field(default_factory=list)
    source_lines: int = 0
    jit_name: str | None = None  # the @triton.jit function's name: what a profiler shows
    owner: str | None = None  # "blockfuse" for blockfuse's own kernels (user kernels of its ops)
    source_name: str | None = None  # a user kernel's Triton function as its author named it

    @property
    def total_numel(self) -> int | None:
        values = list(self.numel.values())
        if not values or not all(isinstance(v, int) for v in values):
            return None
        product = 1
        for value in values:
            product *= value
        return product

    @property
    def post_grad_ops(self) -> list[str]:
        return sorted({post_grad_op(n) for n in self.post_grad_nodes})

    def description(self, feeds: frozenset[str] | set[str] = frozenset()) -> str:
        """What it computes; ``feeds``: ops its graph runs as library / custom-op calls (see ``describe``)."""
        if self.owner == "blockfuse":
            return f"blockfuse {self.source_name}"
        return describe(self.aten_ops or self.post_grad_ops, feeds=feeds)


# ---------------------------------------------------------------- comments above a definition


@dataclass
class NodeComment:
    """What ``get_kernel_metadata`` writes above a kernel or an extern call."""

    source_nodes: list[str] = field(default_factory=list)
    aten_ops: list[str] = field(default_factory=list)
    post_grad_nodes: list[str] = field(default_factory=list)
    fragment_targets: list[str] = field(default_factory=list)
    provenance_handle: str | None = None


def _bracket_list(text: str, label: str) -> list[str]:
    match = re.search(re.escape(label) + r": \[([^\]]*)\]", text)
    if match is None:
        return []
    return [item.strip() for item in match.group(1).split(",") if item.strip()]


def parse_comment(lines: list[str]) -> NodeComment:
    """Parse the comment lines (``#`` included) above a definition or a call."""
    comment = NodeComment()
    mapping = False
    for line in lines:
        text = line.strip().lstrip("#").rstrip()
        if "Source Nodes:" in text:
            comment.source_nodes = _bracket_list(text, "Source Nodes")
            comment.aten_ops = _bracket_list(text, "Original ATen")
        elif "Source node to ATen node mapping" in text:
            mapping = True
            continue
        elif text.strip().startswith("Graph fragment") or "kernel path:" in text:
            mapping = False
        elif "[Provenance debug handles]" in text:
            comment.provenance_handle = text.split("]", 1)[1].strip()
            continue
        if mapping and "=>" in text:
            comment.post_grad_nodes += [n.strip() for n in text.split("=>", 1)[1].split(",") if n.strip()]
        for target in re.findall(r"target=torch\.ops\.(\w+\.\w+)", text):
            if target not in comment.fragment_targets:
                comment.fragment_targets.append(target)
    comment.post_grad_nodes = list(dict.fromkeys(comment.post_grad_nodes))
    return comment


# ---------------------------------------------------------------- Triton


def _meta_int(text: str, key: str) -> int | None:
    match = re.search(rf"'{key}':\s*(\d+)", text)
    return int(match.group(1)) if match else None


def _meta_float(text: str, key: str) -> float | None:
    match = re.search(rf"'{key}':\s*([0-9.eE+-]+)", text)
    try:
        return float(match.group(1)) if match else None
    except ValueError:
        return None


def _role(name: str, dtype: str | None) -> str:
    if name.startswith("in_out_ptr"):
        return "inout"
    if name.startswith("out_ptr"):
        return "out"
    if name.startswith("in_ptr"):
        return "in"
    if name.startswith(("ws_ptr", "workspace")):
        return "workspace"
    if dtype is not None and (dtype.startswith("*") or dtype.endswith("*")):
        return "ptr"  # a user kernel's pointer: direction unknown
    return "scalar"


def parse_triton(name: str, source: str, comment: NodeComment, triton_name: str | None = None) -> KernelDef:
    """``name``: the wrapper's variable; ``triton_name``: the name string ``async_compile.triton`` got."""
    decorator = re.search(r"@triton_heuristics\.(\w+)\(", source)
    if decorator is not None:
        kind = TRITON_KINDS.get(decorator.group(1), decorator.group(1))
    else:
        prefix = re.match(r"triton_([a-z]+)_", name)
        kind = _PREFIX_KINDS.get(prefix.group(1), "user Triton kernel") if prefix else "user Triton kernel"
    user = kind == "user Triton kernel"
    signature = {}
    block = re.search(r"'signature':\s*\{([^}]*)\}", source)
    if block is not None:
        signature = dict(re.findall(r"'(\w+)':\s*'([^']*)'", block.group(1)))
    params = []
    # The jitted function: named like the kernel for Inductor's kernels, by its author for user kernels.
    definition = re.search(r"@triton\.jit\s*\ndef (\w+)\((.*?)\)\s*:", source, re.DOTALL) or \
        re.search(rf"def ({re.escape(name)})\((.*?)\)\s*:", source, re.DOTALL)
    jit_name = definition.group(1) if definition is not None else name
    # NOTE: a user kernel's signature may hold comments, so it is read with ``ast``. Inductor passes
    # every argument its author did not declare constexpr, in order: a None pointer (``'constexpr'``
    # in the signature) as -1, an int equal to 1 as 1. Those stay here, as scalars, so that the
    # launch's arguments line up with the parameters.
    declared = _user_signature(source) if user else None
    if declared is not None:
        jit_name = declared[0]
        for param, annotation in declared[1]:
            if "constexpr" in annotation:
                continue
            dtype = signature.get(param)
            params.append(Param(param, "scalar" if dtype == "constexpr" else _role(param, dtype), dtype))
    elif definition is not None:
        for raw in definition.group(2).split(","):
            param, _, annotation = raw.partition(":")
            param = param.strip()
            if not param or "constexpr" in annotation or signature.get(param) == "constexpr":
                continue
            dtype = signature.get(param)
            params.append(Param(param, _role(param, dtype), dtype))
    meta = source[source.find("inductor_meta"):] if "inductor_meta" in source else ""
    mutated = re.search(r"'mutated_arg_names':\s*\[([^\]]*)\]", meta)
    numel = {}
    for axis, value in re.findall(r"^\s*(x|y|z|r0_|r1_|r)numel = (\S+)\s*$", source, re.MULTILINE):
        if not value.endswith("numel"):  # ``rnumel = r0_numel`` is an alias, not an axis
            numel[axis] = int(value) if value.isdigit() else value
    if not numel:
        hints = re.search(r"size_hints=\{([^}]*)\}", source)
        if hints is not None:
            numel = {k: int(v) for k, v in re.findall(r"'(\w+)':\s*(\d+)", hints.group(1))}
    kernel = KernelDef(
        name=name,
        backend="triton",
        kind=kind,
        params=params,
        num_load=_meta_int(meta, "num_load"),
        num_store=_meta_int(meta, "num_store"),
        num_reduction=_meta_int(meta, "num_reduction"),
        numel=numel,
        num_gb=_meta_float(meta, "kernel_num_gb"),
        flop=_meta_float(meta, "kernel_flop"),
        mutated_args=re.findall(r"'(\w+)'", mutated.group(1)) if mutated else [],
        source_lines=source.count("\n"),
        jit_name=jit_name,
    )
    if user:  # its names follow no convention: the pointers it mutates (or, not listed, stores to) are outputs
        written = set(kernel.mutated_args) or set(re.findall(r"\btl\.(?:store|atomic_\w+)\(\s*(\w+)\b", source))
        for param in kernel.params:
            if param.role != "scalar":
                param.role = "out" if param.name in written else "in"
        owned = blockfuse_kernel_name(jit_name, triton_name, name)
        if owned is not None:
            kernel.owner, kernel.kind, kernel.source_name = "blockfuse", "blockfuse", owned
        else:
            kernel.source_name = jit_name
    if kernel.num_load is None:  # a user kernel, or a version without the counts: count in the source
        kernel.num_load = len(re.findall(r"\btl\.load\(", source))
        kernel.num_store = len(re.findall(r"\btl\.(?:store|atomic_\w+)\(", source))
        kernel.num_reduction = len(re.findall(r"\b(?:tl\.(?:sum|max|min|reduce)|triton_helpers\.\w+)\(", source))
    _apply_comment(kernel, comment)
    return kernel


def _user_signature(source: str) -> tuple[str, list[tuple[str, str]]] | None:
    """The first ``@triton.jit`` function of a user kernel's source: its name and (parameter,
    annotation) pairs; None where the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            return node.name, [(a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in arguments]
    return None


@functools.lru_cache(maxsize=1)
def blockfuse_kernel_names() -> frozenset[str]:
    """The names of every Triton kernel blockfuse launches (``blockfuse.ops.launch.KERNEL_NAMES``, filled
    by importing each module of ``blockfuse.ops``); empty where the ops cannot be imported (no Triton)."""
    import importlib
    import pkgutil

    try:
        import blockfuse.ops
        from blockfuse.ops.launch import KERNEL_NAMES

        for module in pkgutil.iter_modules(blockfuse.ops.__path__):
            importlib.import_module(f"blockfuse.ops.{module.name}")
    except ImportError:
        return frozenset()
    return frozenset(KERNEL_NAMES)


def blockfuse_kernel_name(*names: str | None) -> str | None:
    """The blockfuse kernel a user kernel is, from its names in the wrapper (the jitted function, the
    name given to ``async_compile.triton``, the variable): the first that is one of blockfuse's, else the
    first that is one once Inductor's ``_<i>`` suffix is taken off; None for any other kernel."""
    known = blockfuse_kernel_names()
    candidates = [n for n in names if n]
    for candidate in [*candidates, *(re.sub(r"_\d+$", "", n) for n in candidates)]:
        if candidate in known:
            return candidate
    return None


# ---------------------------------------------------------------- C++


def parse_cpp(name: str, source: str, arg_types: list[str] | None, comment: NodeComment) -> KernelDef:
    names = []
    signature = re.search(r"\bvoid\s+kernel\s*\((.*?)\)", source, re.DOTALL)
    if signature is not None:
        for raw in signature.group(1).split(","):
            words = raw.replace("*", " * ").split()
            if words:
                names.append(words[-1])
    types = list(arg_types or [])
    params = []
    for index, param in enumerate(names):
        dtype = types[index] if index < len(types) else None
        params.append(Param(param, _role(param, dtype), dtype))
    if re.search(r"micro_?gemm|CppMicroGemm|cpp_CppMicroGemm", source):
        kind = "C++ GEMM template"
    elif re.search(r"[Ww]elford|tmp_acc\d|omp declare reduction", source):
        kind = "C++ reduction"
    else:
        kind = "C++ pointwise"
    kernel = KernelDef(
        name=name,
        backend="cpp",
        kind=kind,
        params=params,
        num_load=len(re.findall(r"\bloadu\(|\bin(?:_out)?_ptr\d+\[", source)),
        num_store=len(re.findall(r"\.store\(|\bout_ptr\d+\[[^\]]*\]\s*=|\bin_out_ptr\d+\[[^\]]*\]\s*=", source)),
        num_reduction=len(re.findall(r"tmp_acc\d+\s*=|welford_combine|reduction\(", source)),
        source_lines=source.count("\n"),
    )
    _apply_comment(kernel, comment)
    return kernel


def _apply_comment(kernel: KernelDef, comment: NodeComment) -> None:
    kernel.source_nodes = comment.source_nodes
    kernel.post_grad_nodes = comment.post_grad_nodes
    if comment.aten_ops:
        kernel.aten_ops = comment.aten_ops
        kernel.ops_source = "comments"
    else:
        kernel.aten_ops = [f"aten.{op}" for op in ops_from_kernel_name(kernel.name)]
        kernel.ops_source = "kernel name"
