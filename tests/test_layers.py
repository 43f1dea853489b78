"""Imports run one way (STYLE.md, "The house"): ``runtime`` <- ``ops`` <- ``nn`` <- ``models`` /
``patching`` <- ``distributed`` <- ``analyze`` <- ``bench`` <- ``cli``, each layer importing only the layers below it.

Every module under ``src/blockfuse`` is parsed with ``ast``; every import counts, wherever it sits (module
level, inside a function, under ``if TYPE_CHECKING``), ``import x`` and ``from x import y`` alike, relative
imports resolved, ``importlib.import_module("blockfuse...")`` too: a function-level import may delay an
import, never hide one that goes the wrong way.

A module's layer is its first package component under ``blockfuse`` (``blockfuse/ops/norm.py``: ``ops``);
the top-level modules are placed in :data:`TOP_LEVEL`:

* ``runtime.py`` is the ``runtime`` layer; ``envinfo.py`` (``blockfuse env``: versions, the device, where
  each op runs) reads only ``runtime`` and torch, so it sits there too;
* ``cliutil.py`` (usage errors, the shape syntax, the output folder of every command) is used by the
  commands of ``analyze``, ``bench`` and ``cli``: it sits in the lowest layer that has a command,
  ``analyze``, so a kernel or a model never raises a command-line error;
* ``distributed.py`` (``tp_plan``: the tensor-parallel plans of the models) builds on ``models`` (and, for
  patched Hugging Face models, ``patching``): a layer of its own just above them;
* ``fp8.py`` re-exports ``nn/fp8.py`` (so ``import blockfuse.fp8`` works): the ``nn`` layer;
* ``cli.py`` and ``__main__.py`` are the ``cli`` layer;
* ``__init__.py`` is the package's public face (``blockfuse.rms_norm``, ``blockfuse.patch``,
  ``blockfuse.analyze(...)``): a layer of its own between ``analyze`` and ``bench``. It may import every
  layer up to ``analyze`` (``analyze`` only on first use, through its module ``__getattr__``: ``import
  blockfuse`` stays light, see :func:`test_import_blockfuse_is_light`), and only ``bench`` and ``cli``
  may import it (``import blockfuse``, ``from blockfuse import rms_norm``); ``from blockfuse import nn``
  imports the module ``blockfuse.nn``, whose layer counts.

``models`` and ``patching`` are one layer and import neither each other: both build on ``nn`` and ``ops``.
Within a layer, modules import each other freely as long as no cycle forms (:func:`test_no_cycle_within_a_layer`).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "blockfuse"

# Lowest first; one rank may hold several layers, which may not import each other.
RANKS = (("runtime",), ("ops",), ("nn",), ("models", "patching"), ("distributed",), ("analyze",), ("blockfuse",),
         ("bench",), ("cli",))
RANK = {layer: rank for rank, layers in enumerate(RANKS) for layer in layers}
# The layer of each module directly under src/blockfuse (packages take their own name).
TOP_LEVEL = {
    "blockfuse": "blockfuse",  # __init__.py, the public face
    "blockfuse.runtime": "runtime",
    "blockfuse.envinfo": "runtime",
    "blockfuse.fp8": "nn",  # the public face of nn/fp8.py (``import blockfuse.fp8``)
    "blockfuse.cliutil": "analyze",
    "blockfuse.distributed": "distributed",
    "blockfuse.cli": "cli",
    "blockfuse.__main__": "cli",
}
LAYER_NAMES = {"blockfuse": "blockfuse (the public face, __init__.py)"}
# The function-level imports allowed to close a cycle within a layer, each with its reason.
CYCLE_EXCEPTIONS = {
    ("blockfuse.ops.cross_entropy", "blockfuse.ops.cross_entropy_parallel"):
        "one op in two files: the public linear_cross_entropy sends a DTensor weight to the vocabulary-parallel "
        "path, which runs the op's own kernels and launchers from cross_entropy.py; splitting those out would "
        "break the op's one-file layout (STYLE.md), and only a sharded call imports the parallel file",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


FILES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return parts[1]
    if module not in TOP_LEVEL:
        raise AssertionError(f"{module}: a new top-level module; give it a layer in tests/test_layers.py TOP_LEVEL")
    return TOP_LEVEL[module]


def _name(layer: str) -> str:
    return LAYER_NAMES.get(layer, layer)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a module of blockfuse)
    line: int
    where: str  # "module" (runs on import), "function" (runs when called) or "typing" (never runs)

    @property
    def path(self) -> str:
        return str(FILES[self.source].relative_to(SRC.parent))


def _target(name: str) -> str:
    """The module of blockfuse that ``name`` (a module or a name in one) is: its longest existing prefix."""
    parts = name.split(".")
    while parts and ".".join(parts) not in FILES:
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imported(module: str, node: ast.AST) -> list[str]:
    """The blockfuse modules one import statement (or ``importlib.import_module`` call) loads."""
    if isinstance(node, ast.Import):
        return [_target(alias.name) for alias in node.names if alias.name.split(".")[0] == "blockfuse"]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            package = module.split(".") if FILES[module].name == "__init__.py" else module.split(".")[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if base.split(".")[0] != "blockfuse":
            return []
        # ``from package import name``: the submodule ``package.name`` where there is one, else the package.
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in FILES else _target(base) for alias in node.names]
    # importlib.import_module("blockfuse.x") or f"blockfuse.ops.{name}": the constant prefix names the module
    # (or, cut at a placeholder, its package).
    argument = node.args[0] if node.args else None
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        text = argument.value
    elif isinstance(argument, ast.JoinedStr) and argument.values and isinstance(argument.values[0], ast.Constant):
        text = str(argument.values[0].value).rstrip(".")
    else:
        return []
    return [_target(text)] if text.split(".")[0] == "blockfuse" else []


def _is_import_module(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
        or isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))


def imports_of(module: str) -> list[Import]:
    found = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _is_import_module(node):
            found.extend(Import(module, target, node.lineno, where) for target in _imported(module, node))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "typing")
            for child in node.orelse:
                visit(child, where)
            return
        inner = "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
            and where == "module" else where
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(FILES[module].read_text(), filename=str(FILES[module])), "module")
    return found


IMPORTS = [imported for module in FILES for imported in imports_of(module)]


def test_the_parser_sees_every_kind_of_import():
    """The rules below are only as good as the imports they see: check a few known ones."""
    seen = {(i.source, i.target, i.where) for i in IMPORTS}
    assert ("blockfuse.ops.norm", "blockfuse.ops.launch", "module") in seen  # from x import y
    assert ("blockfuse.envinfo", "blockfuse.runtime", "module") in seen  # from blockfuse import <module>
    assert ("blockfuse.models.fused", "blockfuse.nn", "module") in seen  # import x.y
    assert ("blockfuse.cli", "blockfuse.envinfo", "function") in seen  # inside a function
    assert ("blockfuse.analyze.kernels", "blockfuse.ops", "function") in seen  # importlib.import_module(f"...")
    assert ("blockfuse.bench.norm", "blockfuse", "function") in seen  # the public face
    assert len(FILES) > 50 and all(i.target in FILES for i in IMPORTS)


def test_every_module_has_a_layer():
    for module in FILES:
        assert layer_of(module) in RANK, module


def test_imports_go_only_downward():
    wrong = []
    for i in IMPORTS:
        low, high = layer_of(i.source), layer_of(i.target)
        if RANK[high] > RANK[low] or (RANK[high] == RANK[low] and high != low):
            relation = "a higher layer" if RANK[high] > RANK[low] else "a layer beside it"
            wrong.append(f"{i.path}:{i.line}: {_name(low)} imports {_name(high)} ({i.target}, {i.where} level), "
                         f"{relation}")
    assert not wrong, "imports against the layers (runtime <- ops <- nn <- models / patching <- distributed <- " \
                      "analyze <- bench <- cli):\n" + "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return components


def test_no_cycle_within_a_layer():
    """No modules of one layer import each other in a circle, through imports that run: at module level,
    or inside a function (a circle closed by a function-level import is still a circle, only hidden).
    Imports under ``if TYPE_CHECKING`` never run and do not count. A package's own ``__init__`` importing
    its modules is not a circle unless one of them imports the package back."""
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], list[Import]] = {}
    for i in IMPORTS:
        excepted = i.where == "function" and (i.source, i.target) in CYCLE_EXCEPTIONS
        if i.where != "typing" and not excepted and i.source != i.target and \
                layer_of(i.source) == layer_of(i.target):
            edges.setdefault(i.source, set()).add(i.target)
            lines.setdefault((i.source, i.target), []).append(i)
    messages = []
    for component in _cycles(edges):
        members = set(component)
        detail = [f"  {i.path}:{i.line} imports {i.target} ({i.where} level)"
                  for (source, target), found in sorted(lines.items()) if source in members and target in members
                  for i in found[:1]]
        messages.append(f"{layer_of(component[0])}: {' <-> '.join(component)}\n" + "\n".join(detail))
    assert not messages, "import cycles (move what both need into one module both import):\n" + "\n".join(messages)


def test_cycle_exceptions_are_still_needed():
    """Each exception names a function-level import that exists and closes a cycle that still exists."""
    running = {(i.source, i.target, i.where) for i in IMPORTS}
    for source, target in CYCLE_EXCEPTIONS:
        assert (source, target, "function") in running, (source, target)
        assert (target, source, "module") in running or (target, source, "function") in running, (source, target)


def test_import_blockfuse_is_light():
    """``import blockfuse`` loads the ops, ``nn`` and ``patching`` (``blockfuse.patch``), never ``analyze``,
    ``bench`` or the command line; ``blockfuse.analyze`` loads the analysis on first use, and is callable."""
    code = (
        "import sys, blockfuse\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('blockfuse.')}))\n"
        "print(callable(blockfuse.analyze), 'blockfuse.analyze.api' in sys.modules, "
        "blockfuse.analyze.compare.__module__, callable(blockfuse.patch))\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    loaded, used = result.stdout.splitlines()[-2:]
    assert set(ast.literal_eval(loaded)) <= {"ops", "nn", "patching", "runtime"}, loaded
    assert used == "True True blockfuse.analyze.compare True"

