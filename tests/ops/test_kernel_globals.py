"""Kernels name what they call by its own name: never through a module (``fp8.to_e4m3``), never renamed.

Under ``torch.compile`` Inductor writes each user kernel's source into its own code, with the ``@triton.jit``
functions and ``tl.constexpr`` globals it refers to copied in by name; a call through a module alias is not
followed, and the kernel fails to compile there (``NameError: fp8 is not defined``: the delayed recipe's
activation kernels, found on the H200 on 2026-12-02). The interpreter and an eager launch resolve the module and
run, so only a traced GPU compile would see it: this test reads the kernels' source instead.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap

import triton
from triton.runtime.jit import KernelInterface

import blockfuse.ops

# Modules a kernel may reach through: Inductor's generated code imports these itself.
ALLOWED_MODULES = {"triton", "triton.language"}


def _jit_functions():
    """``(module, name, function)``: the Python function of every jit function and kernel of ``blockfuse.ops``
    (the compiled one's and the interpreter's)."""
    for info in pkgutil.iter_modules(blockfuse.ops.__path__):
        module = importlib.import_module(f"blockfuse.ops.{info.name}")
        for name, value in vars(module).items():
            jitted = False
            for _ in range(3):  # (launch.Kernel wraps an Autotuner or a jit function; an Autotuner a jit function)
                jitted = jitted or isinstance(value, KernelInterface)
                value = getattr(value, "fn", None)
                if inspect.isfunction(value):
                    break
            if jitted and inspect.isfunction(value) and value.__module__ == module.__name__:
                yield module, name, value


def _body_nodes(source: str):
    """Every AST node of a jit function's body (its decorators and signature left out)."""
    tree = ast.parse(textwrap.dedent(source))
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    for statement in function.body:
        yield from ast.walk(statement)


def module_references(source: str, namespace: dict) -> list[str]:
    """``alias.attribute`` expressions in a jit function's body whose alias is a module of ``namespace`` (the
    kernel's globals) other than Triton's own."""
    return [ast.unparse(node) for node in _body_nodes(source)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and inspect.ismodule(value := namespace.get(node.value.id)) and value.__name__ not in ALLOWED_MODULES]


def renamed_references(source: str, namespace: dict) -> list[str]:
    """Names in a jit function's body bound to another jit function under a name not its own (``from m import f as
    g``): Inductor writes ``def f`` into its code, and a call of ``g`` there finds nothing."""
    return [f"{node.id} (def {inner.__name__})" for node in _body_nodes(source)
            if isinstance(node, ast.Name) and isinstance(namespace.get(node.id), KernelInterface)
            and inspect.isfunction(inner := getattr(namespace[node.id], "fn", None)) and inner.__name__ != node.id]


def _is_literal(node: ast.expr) -> bool:
    """A constant, or ``tl.constexpr(constant)``: what a default may be in Inductor's copy of a kernel."""
    if isinstance(node, ast.Constant):
        return True
    return (isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.constexpr", "triton.language.constexpr")
            and not node.keywords and all(isinstance(arg, ast.Constant) for arg in node.args))


def non_literal_defaults(source: str) -> list[str]:
    """The parameter defaults of a jit function that are not literals (a global's name, an expression)."""
    tree = ast.parse(textwrap.dedent(source))
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    defaults = list(function.args.defaults) + [node for node in function.args.kw_defaults if node is not None]
    return [ast.unparse(node) for node in defaults if not _is_literal(node)]


def test_the_checks_find_a_call_through_a_module_and_a_renamed_call():
    import blockfuse.ops.fp8 as fp8

    source = "def kernel(X):\n    y = fp8.to_e4m3(tl.load(X), 1.0, X)\n    tl.store(X, y)\n"
    assert module_references(source, {"fp8": fp8, "tl": triton.language}) == ["fp8.to_e4m3"]
    assert module_references(source.replace("fp8.", ""), {"fp8": fp8, "tl": triton.language}) == []
    renamed = source.replace("fp8.to_e4m3", "cast")
    assert renamed_references(renamed, {"cast": fp8.to_e4m3, "tl": triton.language}) == ["cast (def to_e4m3)"]
    assert renamed_references(source.replace("fp8.", ""), {"to_e4m3": fp8.to_e4m3}) == []


def test_no_kernel_calls_through_a_module():
    kernels = list(_jit_functions())
    assert len(kernels) > 50, "expected blockfuse.ops's kernels and helpers"
    offenders = {f"{module.__name__}.{name}": found for module, name, fn in kernels
                 if (found := module_references(inspect.getsource(fn), fn.__globals__))}
    assert not offenders, f"kernels calling through a module, which Inductor cannot compile: {offenders}"


def test_no_kernel_calls_a_jit_function_by_another_name():
    offenders = {f"{module.__name__}.{name}": found for module, name, fn in _jit_functions()
                 if (found := renamed_references(inspect.getsource(fn), fn.__globals__))}
    assert not offenders, f"kernels calling a jit function by another name, which Inductor cannot compile: {offenders}"


def test_the_default_check_finds_a_global_and_passes_literals():
    source = ('def body(X, A: tl.constexpr = NO_HINT, B: tl.constexpr = tl.constexpr(""), C=None,\n'
              '         D: tl.constexpr = 2):\n')
    assert non_literal_defaults(source + "    pass\n") == ["NO_HINT"]
    assert non_literal_defaults(source.replace("NO_HINT", "False") + "    pass\n") == []


def test_no_kernel_default_names_a_global():
    offenders = {f"{module.__name__}.{name}": found for module, name, fn in _jit_functions()
                 if (found := non_literal_defaults(inspect.getsource(fn)))}
    assert not offenders, f"jit functions whose defaults Inductor's copy cannot resolve: {offenders}"
