"""Shared test helpers: errors measured against an fp64 oracle, relative to PyTorch's own error.

Every op test follows the same pattern:

1. compute the oracle in float64 (the op's reference, or a PyTorch composition, on ``.double()``
   copies of the inputs);
2. compute what PyTorch itself gives in the low dtype (the "baseline");
3. require the fused op to be at most ``factor`` times as wrong as the baseline, plus a small
   per-dtype floor (see ``ERROR_FLOOR``).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

# NOTE: the floor exists because PyTorch's result may happen to be exact, or much better than its
# dtype's rounding error (an output that is representable, a reduction whose terms cancel
# exactly, a grad that is a plain copy of the incoming grad). ``factor * 0`` would then demand
# bit-exactness from a kernel that merely rounds differently. Each floor sits a little below
# the unit roundoff of its dtype (fp32 6e-8, fp16 4.9e-4, bf16 3.9e-3), scaled for norms of
# many elements, so a kernel that is genuinely worse than one rounding still fails.
ERROR_FLOOR = {
    torch.float64: 1e-12,
    torch.float32: 1e-6,
    torch.float16: 1e-4,
    torch.bfloat16: 1e-3,
}


def error_floor(dtype: torch.dtype) -> float:
    """The absolute floor added to every tolerance for results of ``dtype``."""
    return ERROR_FLOOR[dtype]


def round_interpreted_bf16_to_nearest() -> bool:
    """Makes Triton's interpreter convert fp32 -> bf16 as a GPU does, to nearest even; True once it does.

    NOTE: the interpreter (Triton 3.6-3.9, ``triton/runtime/interpreter.py``) converts fp32 -> bf16 with
    ``_convert_float`` and no rounding mode (``cast_impl``: every ``.to(tl.bfloat16)`` and every store of fp32 into a
    bf16 tensor), which drops the low 16 bits: it rounds toward zero, where sm_80+'s ``cvt.rn.bf16.f32`` rounds to
    nearest even (and its "RTNE" mode rounds half up and loses a carry out of the mantissa). A truncated result has
    about twice the RMS rounding error of a rounded one, so the CPU tests allowed bf16 results 4x PyTorch's error, and
    a kernel's rounding could not be checked there. Installed when this module is imported (every test module, the
    processes the multi-process tests spawn, benchmarks/fuzz_ops.py); an explicit ``fp_downcast_rounding="rtz"`` and
    every other conversion keep the interpreter's own code."""
    try:
        import numpy as np
        import triton.language as tl
        from triton._C.libtriton import ir
        from triton.runtime import interpreter
    except ImportError:  # (no Triton: nothing runs in its interpreter)
        return False
    if not hasattr(interpreter, "_convert_float"):  # (another Triton: the tests then model its truncation, and
        return False                                # tests/test_helpers.py fails to say the patch is gone)
    original = getattr(interpreter._convert_float, "__wrapped__", interpreter._convert_float)

    def convert(input, input_dtype, output_dtype, rounding_mode):
        if (input_dtype == tl.float32 and output_dtype == tl.bfloat16
                and rounding_mode in (None, ir.ROUNDING_MODE.RTNE)):
            values = np.ascontiguousarray(input, dtype=np.float32)
            bits = values.view(np.uint32).astype(np.uint64)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            nan = np.isnan(values)
            rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)  # a quiet NaN, as the GPU's
            return rounded.reshape(np.shape(input))
        return original(input, input_dtype, output_dtype, rounding_mode)

    convert.__wrapped__ = original
    interpreter._convert_float = convert
    return True


INTERPRETER_ROUNDS_BF16 = round_interpreted_bf16_to_nearest()


def interpreter_truncates(dtype: torch.dtype, device: torch.device | str = "cpu") -> bool:
    """True when kernels on ``device`` run in Triton's interpreter, ``dtype`` is bfloat16 and the interpreter's
    conversion to it was not made to round to nearest (:func:`round_interpreted_bf16_to_nearest`, installed when
    this module is imported: so False in the tests, unless Triton is missing)."""
    from blockfuse.runtime import interpreter_enabled

    return (dtype == torch.bfloat16 and torch.device(device).type == "cpu" and interpreter_enabled()
            and not INTERPRETER_ROUNDS_BF16)


def downcast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor.to(dtype)`` rounded the way a kernel rounds on ``tensor``'s device: toward zero
    for fp32 -> bf16 in Triton's interpreter (see ``interpreter_truncates``), to nearest otherwise."""
    if not interpreter_truncates(dtype, tensor.device):
        return tensor.to(dtype)
    bits = tensor.to(torch.float32).view(torch.int32) & -65536  # keep sign, exponent, 7 mantissa bits
    return bits.view(torch.float32).to(dtype)  # exact: the value is a bf16 value already


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """``||actual - expected|| / ||expected||`` (Frobenius norms) computed in float64.

    Returns ``nan`` when ``actual`` holds NaN/inf, so that no tolerance can accept it. When the
    expected tensor is all zeros the absolute error ``||actual||`` is returned instead.
    """
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    actual64 = actual.detach().to(device="cpu", dtype=torch.float64)
    expected64 = expected.detach().to(device="cpu", dtype=torch.float64)
    if not torch.isfinite(actual64).all():
        return math.nan
    difference = torch.linalg.vector_norm(actual64 - expected64).item()
    scale = torch.linalg.vector_norm(expected64).item()
    return difference / scale if scale > 0 else difference


def reference_tolerance(ours, torch_lowp, reference64, *, factor=2.0, floor=None, rounded_through=None):
    """``(our error, PyTorch's error, factor, floor, tolerance)`` of :func:`assert_close_to_reference`'s rule:
    relative errors against ``reference64``, the factor doubled where Triton's interpreter truncates to bf16,
    the floor ``error_floor(ours.dtype)`` unless given, tolerance ``factor * PyTorch's error + floor``."""
    if floor is None:
        floor = error_floor(ours.dtype)
    if interpreter_truncates(rounded_through or ours.dtype, ours.device):
        factor = 2 * factor
    ours_error = relative_error(ours, reference64)
    torch_error = relative_error(torch_lowp, reference64)
    return ours_error, torch_error, factor, floor, factor * torch_error + floor


def assert_close_to_reference(
    ours: torch.Tensor,
    torch_lowp: torch.Tensor,
    reference64: torch.Tensor,
    *,
    factor: float = 2.0,
    floor: float | None = None,
    rounded_through: torch.dtype | None = None,
    name: str = "output",
) -> None:
    """Assert ``rel_err(ours) <= factor * rel_err(torch_lowp) + floor`` against ``reference64``.

    ``ours``: the fused op's result; ``torch_lowp``: PyTorch's result in the same low dtype;
    ``reference64``: the float64 oracle. ``floor`` defaults to ``ERROR_FLOOR[ours.dtype]``.
    ``rounded_through``: the narrowest dtype the op rounds intermediates to (default
    ``ours.dtype``; e.g. bf16 for an fp32 weight grad computed from a bf16-rounded x-hat). In
    Triton's interpreter, results rounded through bf16 get twice the ``factor`` (see
    ``interpreter_truncates``).
    Fails on NaN/inf in ``ours``, and on a shape or dtype mismatch between ``ours`` and
    ``torch_lowp``; the message shows both errors.
    """
    assert ours.shape == reference64.shape, (
        f"{name}: shape {tuple(ours.shape)} != reference shape {tuple(reference64.shape)}"
    )
    assert ours.dtype == torch_lowp.dtype, f"{name}: dtype {ours.dtype} != PyTorch's {torch_lowp.dtype}"
    ours_error, torch_error, factor, floor, tolerance = reference_tolerance(
        ours, torch_lowp, reference64, factor=factor, floor=floor, rounded_through=rounded_through)
    message = (
        f"{name} ({ours.dtype}, shape {tuple(ours.shape)}): relative error {ours_error:.3e} vs "
        f"PyTorch's {torch_error:.3e} (tolerance {factor:g} * {torch_error:.3e} + {floor:.1e} "
        f"= {tolerance:.3e})"
    )
    assert not math.isnan(ours_error), f"{message}: NaN or inf in the result"
    assert ours_error <= tolerance, message


def assert_all_close_to_reference(
    ours: Sequence[torch.Tensor | None],
    torch_lowp: Sequence[torch.Tensor | None],
    reference64: Sequence[torch.Tensor | None],
    names: Sequence[str],
    **kwargs,
) -> None:
    """``assert_close_to_reference`` over matching lists (e.g. several grads); checks all, then
    reports every failure at once. An entry that is None in the reference must be None in ours."""
    failures = []
    for mine, baseline, expected, name in zip(ours, torch_lowp, reference64, names, strict=True):
        if expected is None:
            if mine is not None:
                failures.append(f"{name}: expected no gradient, got one")
            continue
        if mine is None:
            failures.append(f"{name}: missing (None)")
            continue
        try:
            assert_close_to_reference(mine, baseline, expected, name=name, **kwargs)
        except AssertionError as error:
            failures.append(str(error))
    assert not failures, "\n".join(failures)


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def random_tensor(
    shape: Sequence[int],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    *,
    seed: int = 0,
    scale: float = 1.0,
    offset: float = 0.0,
    layout: str = "contiguous",
) -> torch.Tensor:
    """``randn(shape) * scale + offset`` from a fixed generator, rounded to ``dtype``.

    ``layout`` picks the memory layout of the returned tensor (the values do not depend on it):
    ``"contiguous"``; ``"transposed"`` (the last two dims swapped in memory, so the last dim has
    a stride > 1); ``"strided"`` (a view taking every other element of the last dim of a buffer
    twice as wide, and whose rows are padded).
    """
    generator = make_generator(seed)
    values = torch.randn(tuple(shape), generator=generator, dtype=torch.float32) * scale + offset
    values = values.to(dtype)
    return as_layout(values, layout).to(device)


def as_layout(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """A copy of ``tensor`` with the same values in the memory layout ``layout``
    (see ``random_tensor``). The result is a view into a larger or permuted buffer."""
    if layout == "contiguous":
        return tensor.contiguous()
    if layout == "transposed":
        if tensor.dim() < 2:
            raise ValueError("a transposed layout needs at least 2 dims")
        result = tensor.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "strided":
        padded_shape = (*tensor.shape[:-1], 2 * tensor.shape[-1] + 3)
        buffer = torch.full(padded_shape, float("nan"), dtype=tensor.dtype, device=tensor.device)
        result = buffer[..., : 2 * tensor.shape[-1] : 2]
        result.copy_(tensor)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    if tensor.numel() > 1 and tensor.shape[-1] > 1:
        assert not result.is_contiguous()
    return result


def as_double(*tensors: torch.Tensor | None, requires_grad: bool = False) -> list[torch.Tensor | None]:
    """Detached float64 copies (leaves) of ``tensors``; None stays None."""
    return [
        None if t is None else t.detach().double().requires_grad_(requires_grad and t.requires_grad) for t in tensors
    ]


def leaves(*tensors: torch.Tensor | None, dtype: torch.dtype | None = None) -> list[torch.Tensor | None]:
    """Detached copies that require grad (optionally cast to ``dtype``, keeping their layout
    when no cast is needed); None stays None."""
    result = []
    for t in tensors:
        if t is None:
            result.append(None)
            continue
        copy = t.detach() if dtype is None or dtype == t.dtype else t.detach().to(dtype)
        result.append(copy.requires_grad_(True))
    return result


def grads(
    outputs: torch.Tensor | Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor | None],
    grad_outputs: torch.Tensor | Sequence[torch.Tensor],
) -> list[torch.Tensor | None]:
    """``torch.autograd.grad`` that accepts None entries in ``inputs`` (returned as None) and casts
    each incoming grad to its output's dtype."""
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    if isinstance(grad_outputs, torch.Tensor):
        grad_outputs = [grad_outputs]
    grad_outputs = [g.to(o.dtype) for o, g in zip(outputs, grad_outputs, strict=True)]
    present = [t for t in inputs if t is not None]
    computed = iter(torch.autograd.grad(outputs, present, grad_outputs, allow_unused=True))
    return [None if t is None else next(computed) for t in inputs]


def assert_compiles_like_eager(
    fn: Callable,
    run: Callable[[Callable], Sequence[torch.Tensor | None]],
    names: Sequence[str],
    *,
    backend: str,
    rtol: float | Sequence[float],
    atol: float | Sequence[float],
    exact: bool = False,
    explain_args: Sequence | None = None,
    **compile_options,
) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
    """``torch.compile(fn, backend=backend, fullgraph=True, **compile_options)`` gives eager's results.

    1. with ``explain_args``: Dynamo's ``explain`` of ``fn`` on them finds no graph break and one graph;
    2. ``run(compiled)`` (the test's forward and backward, returning the tensors to compare, one per name
       in ``names``) counts no graph break in Dynamo's counters;
    3. ``run(fn)`` eagerly; each compiled result must equal eager's bit for bit when ``exact`` (``aot_eager``
       runs the same kernels on the same inputs), else be ``torch.testing.assert_close`` to it with ``rtol``
       and ``atol`` (each one value, or one per name). A None result (an absent gradient) must be None both
       ways. Every mismatch is reported at once.

    Dynamo is reset before and after, also when an assertion fails. Returns (compiled, eager) results for
    the test's own further checks.
    """
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    try:
        if explain_args is not None:
            explanation = torch._dynamo.explain(fn)(*explain_args)
            assert explanation.graph_break_count == 0, explanation.break_reasons
            assert explanation.graph_count == 1
            torch._dynamo.reset()
        counters.clear()
        compiled = list(run(torch.compile(fn, backend=backend, fullgraph=True, **compile_options)))
        assert not counters["graph_break"], dict(counters["graph_break"])
        eager = list(run(fn))
    finally:
        torch._dynamo.reset()
    rtols = [rtol] * len(names) if isinstance(rtol, (int, float)) else list(rtol)
    atols = [atol] * len(names) if isinstance(atol, (int, float)) else list(atol)
    failures = []
    for name, mine, theirs, rtol_, atol_ in zip(names, compiled, eager, rtols, atols, strict=True):
        if mine is None or theirs is None:
            if (mine is None) != (theirs is None):
                failures.append(f"{name}: {'compiled' if mine is None else 'eager'} gave None, the other a tensor")
        elif exact:
            if not torch.equal(mine, theirs):
                failures.append(f"{name}: compiled differs from eager by {relative_error(mine, theirs):.3e} (relative)")
        else:
            try:
                torch.testing.assert_close(mine, theirs, rtol=rtol_, atol=atol_)
            except AssertionError as error:
                failures.append(f"{name}: {error}")
    assert not failures, f"torch.compile(backend={backend!r}) against eager:\n" + "\n".join(failures)
    return compiled, eager


def run_cli_in_process(argv: Sequence[str], cwd, monkeypatch, capsys):
    """``blockfuse ARGV`` as ``python -m blockfuse`` runs it (``sys.exit(main(argv))``), in this process, from ``cwd``:
    a ``subprocess.CompletedProcess`` of its exit status, stdout and stderr. For the command-line tests that check
    what main() prints and returns, where a process each costs 4-5 s of ``import torch`` on CI's machine (each
    such test file still runs one case as its own process)."""
    import subprocess

    from blockfuse.cli import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as error:  # argparse's own errors
        code = error.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["blockfuse", *argv], code, out, err)


# A Python without TRITON_INTERPRET that runs the scripts of assert_runs_without_interpreter one after another, each
# in a namespace of its own, answering each with a JSON line [ok, output].
_RUNNER_CODE = r"""
import contextlib, io, json, sys, traceback
for line in sys.stdin:
    out = io.StringIO()
    ok = True
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(json.loads(line), "<script>", "exec"), {"__name__": "__main__"})
    except BaseException:
        ok = False
        out.write(traceback.format_exc())
    sys.__stdout__.write(json.dumps([ok, out.getvalue()]) + "\n")
    sys.__stdout__.flush()
"""
_runner = None


def assert_runs_without_interpreter(script: str, timeout: float = 300) -> None:
    """Run ``script`` in a Python without ``TRITON_INTERPRET`` (so CPU tensors take the pure-PyTorch references)
    from the repository root; it must finish without an exception and print ``reference fallback ok``.

    NOTE: one such Python a test process, started at the first call and kept for the next ones: each start costs
    ``import blockfuse`` without the interpreter (8-12 s on CI's machine: its op registrations import
    ``torch._inductor``), which the seven ops' fallback tests paid each. Each script runs in a namespace of its
    own; a runner that died or timed out is replaced."""
    import atexit
    import json
    import os
    import selectors
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    global _runner
    if _runner is None or _runner.poll() is not None:
        env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        errors = tempfile.TemporaryFile(mode="w+")
        _runner = subprocess.Popen([sys.executable, "-c", _RUNNER_CODE], env=env,
                                   cwd=Path(__file__).resolve().parents[1], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=errors, text=True)
        _runner.errors = errors
        atexit.register(_runner.kill)
    runner = _runner
    runner.stdin.write(json.dumps(script) + "\n")
    runner.stdin.flush()
    with selectors.DefaultSelector() as selector:
        selector.register(runner.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout)
    line = runner.stdout.readline() if ready else ""
    if not line:
        runner.kill()
        runner.wait()
        _runner = None
        runner.errors.seek(0)
        raise AssertionError(f"the script {'timed out' if not ready else 'ended its Python'}: "
                             f"{runner.errors.read()[-4000:]}")
    ok, output = json.loads(line)
    assert ok, output
    assert "reference fallback ok" in output, output


class FreeHooks(torch.autograd.graph.saved_tensors_hooks):
    """Saved-tensor hooks that say every tensor is kept for free (as models/recompute.py's do of a recomputed or
    already saved storage: ``pack.kept_for_free``) and keep each one as it is, noting ``(shape, dtype)`` of each in
    ``packed``."""

    def __init__(self):
        self.packed = []

        def pack(t):
            self.packed.append((tuple(t.shape), t.dtype))
            return t

        pack.kept_for_free = lambda t: True
        super().__init__(pack, lambda t: t)


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module (the benchmark scripts are files, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "benchmarks"
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_benchmark_main(monkeypatch, name: str, *argv: str, reset_dynamo: bool = False):
    """``benchmarks/<name>.py``'s ``main()`` in this process with ``argv`` as its command line (a process of its own
    spends 3-4 s of CI's time importing torch and blockfuse); ``reset_dynamo``: Dynamo's caches cleared before and
    after (a tool that compiles). Returns what ``main`` returns."""
    import sys

    module = load_benchmark(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    if reset_dynamo:
        torch._dynamo.reset()
    try:
        return module.main()
    finally:
        if reset_dynamo:
            torch._dynamo.reset()


class CastProbe:
    """Wraps ``ops.fp8._weight_operands`` (every FP8 layer's weight casts, kept between calls while the weight is
    unchanged) and checks each cast it hands out against a fresh cast of the weight as it is at that call:
    ``calls`` and ``stale`` count them. ``restore()`` puts the original back (a test in this process)."""

    def __init__(self):
        import blockfuse.ops.fp8 as fp8

        self.fp8, self.original, self.calls, self.stale = fp8, fp8._weight_operands, 0, 0
        fp8._weight_operands = self

    def __call__(self, weight, rowwise, dgrad, cache, known=None):
        operands = self.original(weight, rowwise, dgrad, cache, known)
        fresh = self.original(weight, rowwise, False, False)
        self.calls += 1
        self.stale += not (torch.equal(operands[0].view(torch.uint8), fresh[0].view(torch.uint8))
                           and torch.equal(operands[1], fresh[1]))
        return operands

    def restore(self) -> None:
        self.fp8._weight_operands = self.original


def stand_in_liger(monkeypatch, modeling, causal_lm: str, norm: str, function: str) -> list:
    """Installs a stand-in ``liger_kernel.transformers`` whose ``function`` does what Liger-Kernel's does given no
    model: assigns the global ``norm`` of the modeling module ``modeling`` and ``causal_lm``'s forward (both put
    back by ``monkeypatch`` whatever happens). Returns the list each call's keywords go to."""
    import sys
    import types

    cls = getattr(modeling, causal_lm)
    forward, original_norm = cls.forward, getattr(modeling, norm)
    monkeypatch.setattr(cls, "forward", forward)
    monkeypatch.setattr(modeling, norm, original_norm)
    calls = []

    def apply(**kwargs):
        calls.append(kwargs)
        setattr(modeling, norm, None)
        cls.forward = lambda self, *args, **kw: forward(self, *args, **kw)

    package = types.ModuleType("liger_kernel")
    package.__path__ = []
    liger = types.ModuleType("liger_kernel.transformers")
    setattr(liger, function, apply)
    monkeypatch.setitem(sys.modules, "liger_kernel", package)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", liger)
    return calls


def record_results(monkeypatch, module, name: str) -> list:
    """Wraps ``module.<name>`` (a launch rule, called positionally) so that each call's result is appended to the
    returned list, and returned as before."""
    function, results = getattr(module, name), []
    monkeypatch.setattr(module, name, lambda *args: results.append(function(*args)) or results[-1])
    return results


def use_few_timed_calls(monkeypatch, calls: int = 2) -> None:
    """CPU timings of ``calls`` calls each, no warm-up (``bench.timing.time_cpu``, which every benchmark times the
    CPU through): for the end-to-end benchmark tests, whose point is the records, files and errors, not the times.
    Under ``--quick`` a measurement is a warm-up and at least three calls (up to 20 of a cheap one), each running a
    tiny model's kernels in the interpreter; a mode's first call (compile, errors) runs before its timing, as
    before. Two calls still give a median between a distinct p20 and p80. ``tests/bench/test_timing.py`` checks
    ``time_cpu``'s own warm-up and call counts."""
    from blockfuse.bench import timing

    real = timing.time_cpu

    def time_cpu(fn, *, warmup, rep_ms, min_reps=3, max_reps=200, setup=None):
        return real(fn, warmup=0, rep_ms=0.0, min_reps=calls, max_reps=calls, setup=setup)

    monkeypatch.setattr(timing, "time_cpu", time_cpu)
