"""``blockfuse.analyze``: what ``torch.compile`` did to a module, as a :class:`Report`.

One analysis: Dynamo's graph breaks (``explain``, no Inductor); one ``torch.compile`` of the target,
run for inference (under ``no_grad``) and, with ``backward=True``, for a training step (forward, then
backward with a fixed random output gradient), keeping the wrapper code of every graph; on CUDA, the
copy and GEMM ceilings, and per step the kernels a profiler sees (median of ``steps`` runs), reconciled
with the wrapper's launches; optionally, a recompile probe over more input shapes.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time

import torch
from torch import nn

from blockfuse.analyze import ceilings as ceiling_measure
from blockfuse.analyze.capture import CodeCapture, synchronize
from blockfuse.analyze.graph_breaks import find_graph_breaks
from blockfuse.analyze.profiler import Phase, median_step, profile_phase, reconcile, time_phase
from blockfuse.analyze.recompiles import probe
from blockfuse.analyze.report import Report, build_kernels, build_pass
from blockfuse.analyze.wrapper import PASSES, parse_wrapper

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _device_type(fn, inputs) -> str:
    for tensor in _tensors(list(inputs)):
        return tensor.device.type
    if isinstance(fn, nn.Module):
        for parameter in fn.parameters():
            return parameter.device.type
    return "cpu"


def _dtype(fn, inputs) -> torch.dtype:
    for tensor in _tensors(list(inputs)):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def _label(fn) -> str:
    if isinstance(fn, nn.Module):
        return type(fn).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def _check(mode: str, inputs, steps: int) -> None:
    if steps < 1:
        raise ValueError(f"steps: expected at least 1 profiled step, got {steps}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if not inputs:
        raise ValueError("example_inputs: expected at least one input to call the module with, got none")


def _versions(device_type: str) -> dict:
    info = {"torch": torch.__version__, "python": platform.python_version(), "triton": None,
            "cuda": torch.version.cuda, "card": "cpu", "device": device_type}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    if device_type == "cuda":
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
        info["card"] = properties.name
        info["compute_capability"] = f"{properties.major}.{properties.minor}"
        info["sm_count"] = properties.multi_processor_count
    else:
        info["card"] = f"CPU ({platform.machine() or 'unknown'}, {__import__('os').cpu_count()} cores)"
    return info


def _timed_first_call(phase: Phase, device_type: str) -> tuple[float, object]:
    began = time.perf_counter()
    state = phase.prepare()
    output = phase.run(state)
    synchronize(device_type)
    return time.perf_counter() - began, output


def analyze(
    module_or_fn,
    *example_inputs,
    mode: str = "default",
    backward: bool = True,
    dynamic: bool | None = None,
    recompile_inputs: list[tuple] | None = None,
    name: str | None = None,
    profile: bool = True,
    steps: int = 5,
) -> Report:
    """Compile ``module_or_fn`` with ``torch.compile(mode=mode, dynamic=dynamic)`` and report what
    Inductor made of it for ``module_or_fn(*example_inputs)``.

    ``backward``: also compile and measure a training step (floating inputs get ``requires_grad``).
    ``recompile_inputs``: more input tuples to probe recompiles with (the example inputs come first).
    ``profile``: on CUDA, time every kernel with the profiler and measure the copy / GEMM ceilings.
    Resets Dynamo's caches (``torch._dynamo.reset()``) before and after.
    """
    _check(mode, example_inputs, steps)
    began = time.perf_counter()
    device_type = _device_type(module_or_fn, example_inputs)
    dtype = _dtype(module_or_fn, example_inputs)
    notes: list[str] = []

    breaks = find_graph_breaks(module_or_fn, example_inputs)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    compiled = torch.compile(module_or_fn, mode=None if mode == "default" else mode, dynamic=dynamic)

    def infer(_state=None):
        with torch.no_grad():
            return compiled(*example_inputs)

    phases = {"inference": Phase("inference", prepare=lambda: None, run=infer)}
    compile_s: dict[str, float] = {}
    with CodeCapture(device_type) as capture:
        capture.phase = "inference"
        compile_s["inference"], _ = _timed_first_call(phases["inference"], device_type)
        if backward:
            training = _training_phases(compiled, module_or_fn, example_inputs, capture, device_type, compile_s)
            if isinstance(training, str):
                notes.append(training)
            else:
                phases.update(training)

    modules = []
    for record in capture.records:
        try:
            modules.append(parse_wrapper(record.source, phase=record.phase, provenance=record.provenance))
        except ValueError as error:
            notes.append(f"a {record.phase} graph's code was not parsed: {error}")
    if capture.provenance_available and not any(m.provenance for m in modules):
        notes.append("Inductor's provenance tracking gave nothing here: ops come from the wrapper's comments "
                     "or kernel names, and no user source lines are shown")
    passes_modules = {step: [m for m in modules if m.kind == step] for step in PASSES}

    for phase in phases.values():  # warm-up (CUDA graphs record on the first calls of reduce-overhead)
        for _ in range(3):
            phase.once()
    synchronize(device_type)

    ceilings = None
    measured: dict[str, dict] = {}
    if device_type == "cuda" and profile:
        ceilings = ceiling_measure.measure(dtype)
    for step, phase in phases.items():
        launches = [launch for module in passes_modules.get(step, []) for launch in module.launches]
        entry: dict = {}
        if device_type == "cuda" and profile:
            kernels = median_step(profile_phase(phase, steps))
            entry["reconciliation"] = reconcile(launches, kernels)
            entry["kernel_ms"] = sum(k.us for k in kernels) / 1e3
            entry["device_kernels"] = len(kernels)
        times = time_phase(phase, device_type, reps=20 if device_type == "cuda" else 5)
        entry["pass_ms"] = statistics.median(times)
        measured[step] = entry

    recompiles = None
    if recompile_inputs:
        calls = [tuple(example_inputs), *[tuple(c) for c in recompile_inputs]]
        recompiles = probe(module_or_fn, calls, dynamic=dynamic)
    torch._dynamo.reset()

    meta = {
        "target": name or _label(module_or_fn),
        "input_shapes": [list(t.shape) for t in _tensors(list(example_inputs))],
        "dtype": str(dtype).removeprefix("torch."),
        "mode": mode,
        "dynamic": dynamic,
        "backward": backward,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "analysis_s": round(time.perf_counter() - began, 1),
        "profiled": device_type == "cuda" and profile,
        "steps": steps,
        **_versions(device_type),
    }
    kernels = build_kernels(modules, ceilings)
    passes = {
        step: build_pass(step, passes_modules[step], compile_s.get(step), measured.get(step, {}), ceilings)
        for step in PASSES if passes_modules[step] or step in phases
    }
    return Report(
        meta=meta,
        graph_breaks=breaks.breaks,
        graph_count=breaks.graph_count,
        passes=passes,
        kernels=kernels,
        launches=[launch for m in modules for launch in m.launches],
        modules=[{"id": m.id, "kind": m.kind, "phase": m.phase, "device": m.device, "kernels": len(m.kernels),
                  "launches": len(m.launches), "provenance": m.provenance} for m in modules],
        ceilings=ceilings,
        recompiles=recompiles,
        notes=notes,
        sources={m.id: m.source for m in modules},
    )


def _training_phases(compiled, module_or_fn, example_inputs, capture, device_type, compile_s):
    """Compile the training graphs (capture phases "forward", "backward") and return the measured
    phases, or a note saying why there is no backward."""
    train_inputs = tuple(
        t.detach().clone().requires_grad_(True) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
        for t in example_inputs
    )
    leaves = [t for t in train_inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if isinstance(module_or_fn, nn.Module):
        leaves += [p for p in module_or_fn.parameters() if p.requires_grad]

    def zero_grads():
        for leaf in leaves:
            leaf.grad = None  # NOTE: no accumulation kernels: each backward writes fresh gradients

    capture.phase = "forward"
    zero_grads()
    began = time.perf_counter()
    output = compiled(*train_inputs)
    synchronize(device_type)
    compile_s["forward"] = time.perf_counter() - began
    outputs = [t for t in _tensors(output) if t.requires_grad]
    if not outputs:
        return "no backward: no output requires grad (no floating inputs or parameters)"
    generator = torch.Generator(device=outputs[0].device).manual_seed(0)
    grads = [torch.randn(t.shape, generator=generator, device=t.device, dtype=t.dtype) for t in outputs]

    def run_backward(out):
        torch.autograd.backward([t for t in _tensors(out) if t.requires_grad], grads)

    capture.phase = "backward"
    began = time.perf_counter()
    run_backward(output)
    synchronize(device_type)
    compile_s["backward"] = time.perf_counter() - began

    def forward_state():
        zero_grads()

    def backward_state():
        zero_grads()
        return compiled(*train_inputs)

    return {
        "forward": Phase("forward", prepare=forward_state, run=lambda _: compiled(*train_inputs),
                         finish=run_backward),
        "backward": Phase("backward", prepare=backward_state, run=run_backward),
    }
