"""Parse one generated wrapper module (Inductor's ``output_code.py``): its kernels and every launch of
one call, in order.

The wrapper is Python, so it is read with ``ast``: kernel definitions at module level, the ``call``
function (``Runner.call`` in torch 2.11+, a plain function before; graph partitions are inlined),
and ``get_args`` for the shapes and dtypes of the inputs. Each statement of ``call`` is either
bookkeeping (allocations, reinterpretations, asserts), a kernel launch (``<triton kernel>.run(...)``:
Inductor's own kernels and the user kernels of traced ops, blockfuse's among them; ``<cpp kernel>(...)``),
a library or op call (``extern_kernels.mm``, ``torch.ops.aten.*``, ``torch.ops.<ns>.*``: a custom op that
Inductor calls as it is), or an ATen op run by the wrapper itself (``buf.zero_()``, ``x.sum(dim=0)``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from blockfuse.analyze.calls import TensorInfo, attention_backend, attention_cost, classify, gemm_cost, schema_names
from blockfuse.analyze.kernels import KernelDef, NodeComment, parse_comment, parse_cpp, parse_triton

_ROOTS = frozenset({"torch", "aten", "extern_kernels", "inductor_ops", "_quantized", "prims", "triton", "math"})
_STREAM = re.compile(r"^\s*stream\d+\s*=\s*get_raw_stream\(")
# The steps a compiled graph belongs to (a WrapperModule's kind), in the order they run, and their titles.
PASSES = ("inference", "forward", "backward")
PASS_TITLES = {"inference": "inference forward", "forward": "training forward", "backward": "backward"}


@dataclass
class Launch:
    """One launch (or library call) in a wrapper's ``call()``, in program order."""

    module: str
    index: int
    kind: str  # "triton", "cpp", "extern" or "wrapper op"
    target: str  # the kernel's name, or the op ("aten.addmm", "blockfuse.layer_norm")
    category: str  # "fused kernel", "gemm", "attention", "custom op", "fallback", "aten op", ...
    args: list[str] = field(default_factory=list)  # tensor arguments, "bf16[8192, 1024]"
    numel: int | None = None
    bytes: float | None = None
    bytes_source: str | None = None  # "inductor" (kernel_num_gb) or "estimate" (argument sizes)
    flops: float | None = None
    attention: str | None = None  # backend of an attention call: cuDNN, flash, efficient, ...
    source_nodes: list[str] = field(default_factory=list)
    aten_ops: list[str] = field(default_factory=list)
    user_lines: list[str] = field(default_factory=list)
    provenance: str | None = None  # "name:handle" of Inductor's provenance tracking
    line: int = 0  # line in the wrapper source
    device_name: str | None = None  # a Triton kernel's jitted function name, as the profiler shows it
    owner: str | None = None  # "blockfuse" for a launch of one of blockfuse's own kernels
    # Filled by the profiler on CUDA: the device kernels this launch ran and their median time.
    device_kernels: list[str] = field(default_factory=list)
    time_us: float | None = None


@dataclass
class WrapperModule:
    id: str  # Inductor's AOT id: "0_inference", "1_forward", "1_backward"
    kind: str  # "inference", "forward" or "backward"
    device: str
    kernels: dict[str, KernelDef]
    launches: list[Launch]
    source: str = field(repr=False, default="")
    phase: str | None = None  # which step of the analysis compiled it
    provenance: bool = False  # whether Inductor's provenance tracking filled the ops and user lines

    def called_ops(self) -> frozenset[str]:
        """Bare names of the attention and custom ops this graph calls (what its kernels may feed)."""
        return frozenset(launch.target.split(".")[-1] for launch in self.launches
                         if launch.category in ("attention", "custom op", "fallback"))

    def description(self, kernel_name: str) -> str:
        return self.kernels[kernel_name].description(self.called_ops())


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _comment_above(lines: list[str], lineno: int) -> list[str]:
    """The ``#`` lines right above 1-based line ``lineno`` (skipping ``stream0 = get_raw_stream(0)``)."""
    found = []
    index = lineno - 2
    while index >= 0:
        text = lines[index].strip()
        if text.startswith("#"):
            found.append(text)
        elif not _STREAM.match(lines[index]):
            break
        index -= 1
    return list(reversed(found))


def _user_frames(traces: list[str]) -> list[str]:
    """The innermost user frame of each provenance stack trace: ``blocks.py:70 apply_rotary: <code>``."""
    lines = []
    for trace in traces:
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
        if not frames:
            continue
        path, line, function, code = frames[-1]
        text = f"{path.rsplit('/', 1)[-1]}:{line} {function}: {code.strip()}"
        if text not in lines:
            lines.append(text)
    return lines


class _Walker:
    def __init__(self, module: str, kernels: dict[str, KernelDef], functions: dict, lines: list[str],
                 provenance: dict | None):
        self.module = module
        self.kernels = kernels
        self.functions = functions
        self.lines = lines
        self.provenance = provenance or {}
        self.tensors: dict[str, TensorInfo] = {}
        self.ints: dict[str, int] = {}
        self.launches: list[Launch] = []
        self.inlined: set[str] = set()

    # ---- values

    def integer(self, node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            return self.ints.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.integer(node.operand)
            return None if value is None else -value
        if isinstance(node, ast.BinOp):
            left, right = self.integer(node.left), self.integer(node.right)
            if left is None or right is None:
                return None
            operations = {ast.Add: lambda: left + right, ast.Sub: lambda: left - right,
                          ast.Mult: lambda: left * right, ast.FloorDiv: lambda: left // right if right else None,
                          ast.Mod: lambda: left % right if right else None}
            operation = operations.get(type(node.op))
            return operation() if operation else None
        return None

    def shape(self, node: ast.AST) -> tuple[int, ...] | None:
        if not isinstance(node, (ast.Tuple, ast.List)):
            return None
        dims = [self.integer(e) for e in node.elts]
        return None if any(d is None for d in dims) else tuple(dims)

    @staticmethod
    def dtype(node: ast.AST | None) -> str | None:
        name = _dotted(node) if node is not None else None
        return name.split(".")[-1] if name and name.startswith("torch.") else None

    def tensor(self, node: ast.AST) -> TensorInfo | None:
        if isinstance(node, ast.Name):
            return self.tensors.get(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            index = node.slice
            if isinstance(index, ast.Constant):
                return self.tensors.get(f"{node.value.id}[{index.value}]")
            return self.tensors.get(node.value.id)
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == "reinterpret_tensor" and len(node.args) >= 2:
                base = self.tensor(node.args[0])
                return TensorInfo(self.shape(node.args[1]), base.dtype if base else None)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args:
                base = self.tensor(node.func.value)
                return TensorInfo(base.shape if base else None, self.dtype(node.args[0]))
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("view", "reshape"):
                base = self.tensor(node.func.value)
                dims = node.args[0] if len(node.args) == 1 else ast.Tuple(elts=list(node.args))
                return TensorInfo(self.shape(dims), base.dtype if base else None)
        return None

    def allocation(self, call: ast.Call) -> TensorInfo | None:
        name = _dotted(call.func) or ""
        keywords = {k.arg: k.value for k in call.keywords}
        if name.startswith("empty_strided") or name in ("torch.empty_strided", "rand_strided"):
            dtype = keywords.get("dtype", call.args[2] if len(call.args) > 2 and name != "rand_strided" else None)
            return TensorInfo(self.shape(call.args[0]) if call.args else None, self.dtype(dtype))
        if name == "reinterpret_tensor":
            return self.tensor(call)
        return None

    # ---- statements

    def walk(self, body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
                self.walk(statement.body)
                self.walk(getattr(statement, "orelse", []) or [])
                continue
            if isinstance(statement, ast.Assign):
                self.assign(statement)
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                self.expression(statement.value, statement.lineno)

    def assign(self, statement: ast.Assign) -> None:
        target, value = statement.targets[0], statement.value
        name = target.id if isinstance(target, ast.Name) else None
        if isinstance(value, ast.Call):
            allocated = self.allocation(value)
            if allocated is not None:
                if name:
                    self.tensors[name] = allocated
                return
            self.call(value, statement.lineno)
            if name:
                operands = [value.func.value] if isinstance(value.func, ast.Attribute) else []
                first = next((t for t in (self.tensor(a) for a in [*operands, *value.args]) if t is not None), None)
                result = TensorInfo(None, first.dtype if first else None)
                self.tensors[name] = self.tensor(value) or result
                for index in range(8):  # a tuple result: its items keep the dtype
                    self.tensors.setdefault(f"{name}[{index}]", result)
            return
        if name is None:
            return
        if isinstance(value, ast.Name):
            if value.id in self.tensors:
                self.tensors[name] = self.tensors[value.id]
            elif value.id in self.ints:
                self.ints[name] = self.ints[value.id]
        elif isinstance(value, ast.Subscript):
            found = self.tensor(value)
            if found is not None:
                self.tensors[name] = found
        else:
            number = self.integer(value)
            if number is not None:
                self.ints[name] = number

    def expression(self, call: ast.Call, lineno: int) -> None:
        name = _dotted(call.func)
        if name == "assert_size_stride" and len(call.args) >= 2 and isinstance(call.args[0], ast.Name):
            known = self.tensors.get(call.args[0].id)
            shape = self.shape(call.args[1])
            if shape is not None and (known is None or known.shape is None):
                self.tensors[call.args[0].id] = TensorInfo(shape, known.dtype if known else None)
            return
        self.call(call, lineno)

    def call(self, call: ast.Call, lineno: int) -> None:
        func = call.func
        # Graph partitions (torch 2.8+): ``self.partitions[i](args)`` runs ``partition_i``.
        partitions = isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute)
        if partitions and func.value.attr == "partitions":
            index = func.slice.value if isinstance(func.slice, ast.Constant) else None
            self.inline(f"partition_{index}")
            return
        if isinstance(func, ast.Name) and func.id.startswith("partition_") and func.id in self.functions:
            self.inline(func.id)
            return
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name) \
                and func.value.id in self.kernels:
            self.kernel_launch(self.kernels[func.value.id], call, lineno)
            return
        if isinstance(func, ast.Name) and func.id in self.kernels:
            self.kernel_launch(self.kernels[func.id], call, lineno)
            return
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if isinstance(receiver, ast.Call):
            self.call(receiver, lineno)  # a method chain runs left to right: ``x.sum(dim=0).to(torch.bfloat16)``
        dotted = _dotted(func)
        if dotted is not None and dotted.split(".")[0] not in _ROOTS and isinstance(func, ast.Attribute):
            dotted = None  # a method on a buffer: ``buf3.zero_()``
        elif dotted is not None and "." not in dotted:
            return  # a plain helper function of the wrapper
        method = func.attr if isinstance(func, ast.Attribute) else None
        kind = classify(dotted, method)
        if kind is None:
            return
        comment = parse_comment(_comment_above(self.lines, lineno))
        tensors = [self.tensor(a) for a in call.args]
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        out = self.tensor(keywords["out"]) if "out" in keywords else None
        launch = self.new_launch("extern" if kind.kind == "extern" else "wrapper op", kind.op, kind.category,
                                 comment, lineno)
        launch.args = [t.text() for t in tensors if t is not None] + ([f"out={out.text()}"] if out else [])
        if kind.kind == "wrapper op" and dotted is None:
            source = self.tensor(receiver) if receiver is not None else None
            if source is not None:
                launch.args.insert(0, source.text())
                launch.bytes = float(source.nbytes) if source.nbytes is not None else None  # its input, read once
        if kind.category == "gemm":
            launch.flops, launch.bytes = gemm_cost(kind.op, tensors, out)
        elif kind.category == "attention":
            launch.attention = attention_backend(kind.op)
            names = schema_names(kind.op, len(call.args), list(keywords)) or (
                ["grad_out", "query", "key", "value"] if "backward" in kind.op else ["query", "key", "value"])
            named: dict = {}
            for arg_name, node in zip(names, call.args, strict=False):  # schema may be longer
                named[arg_name] = self.tensor(node) or (node.value if isinstance(node, ast.Constant) else None)
            for key, node in keywords.items():
                named[key] = self.tensor(node) or (node.value if isinstance(node, ast.Constant) else None)
            launch.flops, launch.bytes = attention_cost(kind.op, named, [t for t in tensors if t is not None])
        if launch.bytes is not None:
            launch.bytes_source = "estimate"
        self.launches.append(launch)

    def inline(self, name: str) -> None:
        function = self.functions.get(name)
        if function is not None and name not in self.inlined:
            self.inlined.add(name)
            self.walk(function.body)

    def new_launch(self, kind: str, target: str, category: str, comment: NodeComment, lineno: int) -> Launch:
        launch = Launch(module=self.module, index=len(self.launches), kind=kind, target=target, category=category,
                        source_nodes=comment.source_nodes, aten_ops=comment.aten_ops, line=lineno)
        if comment.provenance_handle:
            launch.provenance = comment.provenance_handle
            launch.user_lines = _user_frames(self.provenance.get("stack_traces", {}).get(comment.provenance_handle, []))
        return launch

    def kernel_launch(self, kernel: KernelDef, call: ast.Call, lineno: int) -> None:
        comment = parse_comment(_comment_above(self.lines, lineno))
        launch = self.new_launch(kernel.backend, kernel.name, "fused kernel", comment, lineno)
        launch.device_name = kernel.jit_name
        launch.owner = kernel.owner
        if not launch.aten_ops:
            launch.aten_ops = kernel.aten_ops
        nbytes, known, numels, largest = 0.0, True, [], None
        for param, node in zip(kernel.params, call.args, strict=False):  # older: extra grid args
            if param.role == "scalar":
                value = self.integer(node)
                if param.name.endswith("numel") and value is not None:
                    numels.append(value)
                continue
            info = self.tensor(node)
            if info is not None:
                launch.args.append(info.text())
                if info.shape is not None and param.role in ("out", "inout"):
                    count = 1
                    for dim in info.shape:
                        count *= dim
                    largest = max(largest or 0, count)
            size = info.nbytes if info is not None else None
            if param.role == "workspace":
                continue
            if size is None:
                known = False
                continue
            nbytes += size * (2 if param.role == "inout" else 1)
        if numels:
            launch.numel = 1
            for value in numels:
                launch.numel *= value
        else:
            launch.numel = kernel.total_numel or largest
        if kernel.num_gb is not None:
            launch.bytes, launch.bytes_source = kernel.num_gb * 1e9, "inductor"
        elif known and nbytes:
            launch.bytes, launch.bytes_source = nbytes, "estimate"
        launch.flops = kernel.flop if kernel.flop else None
        self.launches.append(launch)


def _module_kind(module_id: str, source: str) -> str:
    for kind in PASSES:
        if module_id.endswith(kind):
            return kind
    if "tangents_" in source:
        return "backward"
    return "forward" if "primals_" in source else "inference"


def _device(source: str) -> str:
    """The device of the inputs (``get_args``) or, failing that, of the allocations in ``call``."""
    found = re.search(r"device='(\w+)", source) or re.search(r"= empty_strided_(\w+)\(", source)
    return found.group(1) if found else "unknown"


def _kernel_definition(node: ast.stmt, lines: list[str]) -> KernelDef | None:
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and isinstance(node.targets[0], ast.Name)):
        return None
    name = node.targets[0].id
    called = _dotted(node.value.func) or ""
    args = node.value.args
    strings = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    comment = parse_comment(_comment_above(lines, node.lineno))
    if called == "async_compile.triton" and len(strings) >= 2:
        kernel = parse_triton(name, strings[1], comment, triton_name=strings[0])
    elif called in ("async_compile.cpp_pybinding", "async_compile.cpp") and strings:
        types = None
        if args and isinstance(args[0], ast.List):
            types = [e.value for e in args[0].elts if isinstance(e, ast.Constant)]
        kernel = parse_cpp(name, strings[-1], types, comment)
    else:
        return None
    return kernel


def parse_wrapper(source: str, *, module_id: str | None = None, phase: str | None = None,
                  provenance: dict | None = None) -> WrapperModule:
    """Parse a wrapper module's source. ``provenance``: ``{"post_grad": {handle: [nodes]},
    "stack_traces": {handle: [traces]}}`` from Inductor's provenance tracking, where it ran."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:  # e.g. a C++ wrapper (``cpp_wrapper=True``): not Python
        raise ValueError(f"source: expected Inductor's Python wrapper module, got unparsable code ({error})") from None
    lines = source.splitlines()
    aot = re.search(r"# AOT ID: \['([^']+)'\]", source)
    module_id = module_id or (aot.group(1) if aot else "module")
    provenance = provenance or {}
    kernels: dict[str, KernelDef] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        kernel = _kernel_definition(node, lines)
        if kernel is not None:
            kernels[kernel.name] = kernel
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    functions.setdefault(item.name, item)
    walker = _Walker(module_id, kernels, functions, lines, provenance)
    if "get_args" in functions:  # the inputs' shapes and dtypes, and the values of symbolic sizes
        walker.walk(functions["get_args"].body)
        walker.launches = []
    walker.inline("call")
    _apply_provenance(kernels, walker.launches, provenance)
    return WrapperModule(id=module_id, kind=_module_kind(module_id, source), device=_device(source),
                         kernels=kernels, launches=walker.launches, source=source, phase=phase,
                         provenance=bool(provenance.get("post_grad") or provenance.get("stack_traces")))


def _apply_provenance(kernels: dict[str, KernelDef], launches: list[Launch], provenance: dict) -> None:
    """Where provenance tracking ran, its post-grad nodes replace those read from comments."""
    post_grad = provenance.get("post_grad") or {}
    for launch in launches:
        kernel = kernels.get(launch.target)
        if kernel is None or launch.provenance is None:
            continue
        nodes = post_grad.get(launch.provenance)
        if nodes:
            if kernel.ops_source != "provenance":
                kernel.post_grad_nodes = []
            kernel.post_grad_nodes = list(dict.fromkeys([*kernel.post_grad_nodes, *nodes]))
            kernel.ops_source = "provenance"
