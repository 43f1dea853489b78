"""The one runner: every declared op x shape x provider x mode, timed the same way.

For each op and shape it builds the inputs once (seeded), computes a float32 reference
from the same inputs (forward outputs and input gradients), then for each provider and
mode: checks the provider's numbers against that reference, warms up, measures peak
memory (CUDA) and times it. A provider that raises is recorded with its error and the
others still run. An integer input (class indices) is passed as it is: never cast, never given a gradient.
An op that declares FLOPs (GEMM-bound) also gets TFLOP/s and, on CUDA, the fraction of a large GEMM's
TFLOP/s (``analyze.ceilings.gemm_throughput``, 8192^3) measured once in the same run.
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from blockfuse.bench import timing
from blockfuse.bench.spec import OpBenchmark, Shape, mode_bytes, mode_flops

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class Settings:
    dtype: str  # "bf16", "fp16" or "fp32"
    modes: tuple[str, ...]
    providers: tuple[str, ...]
    shapes: tuple[Shape, ...] | None  # None: each op's own shapes
    quick: bool
    device: torch.device


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||, computed in float64."""
    out, ref = out.detach().double(), ref.detach().double()
    scale = torch.linalg.vector_norm(ref)
    difference = torch.linalg.vector_norm(out - ref)
    return float(difference / scale) if scale > 0 else float(difference)


def _as_tuple(out) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _leaf(tensor: torch.Tensor, grad: bool = True, float32: bool = False) -> torch.Tensor:
    """A fresh leaf of an input, requiring grad if ``grad`` (a float32 copy if ``float32``); an integer input
    (class indices) is returned as it is: it has no gradient and no float value."""
    if not tensor.is_floating_point():
        return tensor.detach()
    copy = tensor.detach().float() if float32 else tensor.detach().clone()
    return copy.requires_grad_(grad)


def _differentiable(leaves: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t for name, t in leaves.items() if t.requires_grad}


def _describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


class Reference:
    """The float32 oracle of one op and shape: outputs, output gradients dy, input gradients."""

    def __init__(self, bench: OpBenchmark, inputs: dict[str, torch.Tensor], dtype: torch.dtype):
        self._reference, self._inputs = bench.reference(), inputs
        leaves = {name: _leaf(t, float32=True) for name, t in inputs.items()}
        outs = _as_tuple(self._reference(**leaves))
        self.outputs = [o.detach() for o in outs]
        # dy for each output, in the benchmark dtype; the reference backpropagates their fp32 copies.
        self.output_grads = [torch.randn_like(o, dtype=dtype) for o in self.outputs]
        wrt = _differentiable(leaves)
        grads = torch.autograd.grad(outs, list(wrt.values()), [g.float() for g in self.output_grads])
        self.input_grads = dict(zip(wrt, grads))

    def evaluate(self, **kwargs) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        """(outputs, input gradients) of the reference called with extra keyword arguments (a
        provider's dropout mask), backpropagating the same dy."""
        leaves = {name: _leaf(t, float32=True) for name, t in self._inputs.items()}
        outs = _as_tuple(self._reference(**leaves, **kwargs))
        wrt = _differentiable(leaves)
        grads = torch.autograd.grad(outs, list(wrt.values()), [g.float() for g in self.output_grads])
        return [o.detach() for o in outs], dict(zip(wrt, grads))


# NOTE: a provider that makes random choices is probed and then checked right after
# torch.manual_seed(PROBE_SEED) both times: the two calls draw the same random numbers.
PROBE_SEED = 1234


class Case:
    """One provider on one op and shape: its callable, its inputs, its errors, its timers."""

    def __init__(self, bench, fn, inputs, reference: Reference, settings: Settings):
        self.bench, self.fn, self.inputs, self.reference, self.settings = bench, fn, inputs, reference, settings
        self._grad_errors: dict[str, float] | None = None

    def _call(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The provider on ``inputs``, right after ``torch.manual_seed(PROBE_SEED)`` for an op
        that declares a probe."""
        if self.bench.probe is not None:
            torch.manual_seed(PROBE_SEED)
        return _as_tuple(self.fn(**inputs))

    def _expected(self, grad: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        """The reference (outputs, input gradients) this provider is checked against: the shared
        one, or for an op with a probe, the one with the random choices that this provider makes
        in this grad mode (the probe call mirrors the checked call: leaves that require grad, or
        no_grad)."""
        probe = self.bench.probe
        if probe is None:
            return self.reference.outputs, self.reference.input_grads
        probe_inputs = probe.inputs(self.inputs)
        with torch.set_grad_enabled(grad):
            outs = self._call({name: _leaf(t, grad) for name, t in probe_inputs.items()})
        return self.reference.evaluate(**probe.reference_kwargs(tuple(o.detach() for o in outs)))

    def forward_errors(self) -> dict[str, float]:
        expected, _ = self._expected(grad=False)
        with torch.no_grad():
            outs = self._call({name: t.detach() for name, t in self.inputs.items()})
        return {name: relative_error(o, r) for name, o, r in zip(self.bench.outputs, outs, expected)}

    def grad_errors(self) -> dict[str, float]:
        if self._grad_errors is None:
            _, expected = self._expected(grad=True)
            leaves = {name: _leaf(t) for name, t in self.inputs.items()}
            outs = self._call(leaves)
            # clones: a provider may write its input gradient into dy (Liger's in_place=True).
            dys = [g.clone() for g in self.reference.output_grads]
            wrt = _differentiable(leaves)
            grads = torch.autograd.grad(outs, list(wrt.values()), dys, allow_unused=True)
            self._grad_errors = {
                f"d{name}": relative_error(g, expected[name]) if g is not None else float("nan")
                for name, g in zip(wrt, grads)
            }
        return self._grad_errors

    def callable(self, mode: str) -> tuple[Callable | None, Callable, list[torch.Tensor]]:
        """(setup, call, leaves) of ``mode``: ``call()``, or ``call(setup())`` with an untimed
        setup; ``leaves`` are the tensors whose .grad is cleared between calls."""
        # own copies of dy: a provider may write its input gradient into dy (Liger's in_place=True)
        fn, dys = self.fn, [g.clone() for g in self.reference.output_grads]
        if mode == "fwd":
            plain = {name: t.detach() for name, t in self.inputs.items()}

            def forward():
                with torch.no_grad():
                    fn(**plain)

            return None, forward, []
        leaves = {name: _leaf(t) for name, t in self.inputs.items()}
        inputs = list(_differentiable(leaves).values())

        # NOTE: gradients are returned (autograd.grad), not accumulated into .grad: a leaf's
        # AccumulateGrad copies an incoming gradient that is still referenced elsewhere, so an op
        # whose input gradient is dy itself (a residual add) would be charged a copy that no
        # real model pays (the residual stream is not a leaf).
        def backward(outs):
            torch.autograd.grad(outs, inputs, dys, allow_unused=True)

        if mode == "bwd":
            # NOTE: a fresh forward before each timed backward, not backward(retain_graph=True):
            # torch.compile donates the saved buffers to its backward, which then refuses retain_graph.
            return (lambda: _as_tuple(fn(**leaves))), backward, inputs
        return None, (lambda: backward(_as_tuple(fn(**leaves)))), inputs

    @staticmethod
    def _time_graph(setup, call, clear_grads, quick):
        """CUDA-graph time of ``call`` (after ``setup``, whose own time is subtracted)."""
        flush = timing.l2_flush()
        if setup is None:
            def body():
                flush()
                clear_grads()
                call()
            baseline = flush
        else:
            def body():
                flush()
                clear_grads()
                call(setup())

            def baseline():
                flush()
                clear_grads()
                setup()
        return timing.time_cuda_graph(body, baseline, reps=5 if quick else 10, samples=5 if quick else 15)

    def measure(self, mode: str, timed: bool = True) -> dict:
        """The record of ``mode``: errors against the reference, then (``timed``) peak memory and times; untimed,
        the provider is only called as the timing would call it first (``warm``)."""
        record: dict = {}
        if mode == "fwd":
            errors = self.forward_errors()
            record["rel_err_out"] = max(errors.values())
        else:
            errors = self.grad_errors()
            record["rel_err_grad"] = errors[f"d{self.bench.grad_of}"]
        record["rel_err"] = errors
        setup, call, leaves = self.callable(mode)

        def clear_grads():
            for tensor in leaves:
                tensor.grad = None

        clear_grads()
        call(setup()) if setup is not None else call()  # warm-up: compiles, autotunes, fills caches
        clear_grads()
        if not timed:
            return record
        quick = self.settings.quick
        if self.settings.device.type == "cuda":
            state = setup() if setup is not None else None  # bwd: the forward is not counted
            record["peak_mib"] = timing.peak_memory_mib((lambda: call(state)) if setup is not None else call)
            del state
            clear_grads()
            if setup is None:  # back-to-back calls: host overhead counts, as in an eager loop
                t = timing.time_cuda_loop(call, before_each=clear_grads, calls=10 if quick else 50,
                                          samples=3 if quick else 9)
            else:  # backward only: a fresh forward before each timed backward (do_bench's loop)
                t = timing.time_cuda(
                    call, setup=setup, grad_to_none=leaves, warmup_ms=5 if quick else 25, rep_ms=20 if quick else 100
                )
            record.update(ms_eager=t.median, ms_eager_p20=t.p20, ms_eager_p80=t.p80)
            try:
                t = self._time_graph(setup, call, clear_grads, quick)
                record["timing"] = "cuda-graph"
            except Exception as error:  # capture failed: keep the eager-call time, say why
                record["timing"] = "eager-call"
                record["graph_error"] = _describe(error)
                torch.cuda.synchronize()
        else:

            def clear_then_call(*state):
                clear_grads()
                call(*state)

            t = timing.time_cpu(
                clear_then_call,
                setup=setup,
                warmup=1 if quick else 2,
                rep_ms=20 if quick else 200,
                max_reps=20 if quick else 200,
            )
        record.update(ms=t.median, ms_p20=t.p20, ms_p80=t.p80)
        return record


def declared_ops() -> list[OpBenchmark]:
    """Every declared op benchmark. A new op adds its module's BENCHMARKS here."""
    from blockfuse.bench import bias_dropout_add, cross_entropy, gated, mlp, norm, rotary

    return [*norm.BENCHMARKS, *rotary.BENCHMARKS, *gated.BENCHMARKS, *bias_dropout_add.BENCHMARKS,
            *cross_entropy.BENCHMARKS, *mlp.BENCHMARKS]


def shapes_of(bench: OpBenchmark, settings: Settings) -> tuple[Shape, ...]:
    if settings.shapes is not None:
        return settings.shapes
    shapes = bench.shapes if settings.device.type == "cuda" else bench.cpu_shapes
    return shapes[:1] if settings.quick else shapes


def run(
    benchmarks: list[OpBenchmark],
    settings: Settings,
    copy_gbps: float | None,
    *,
    on_update: Callable[[list[dict]], None] | None = None,
    show_progress: bool = True,
    gemm_tflops: float | None = None,
) -> list[dict]:
    """Time every op x shape x provider x mode; one record each. ``on_update`` gets the
    records so far after each op and shape (to write partial results). ``gemm_tflops``: a large
    GEMM's TFLOP/s, the ceiling of the ops that declare FLOPs (None: measured here on CUDA when one
    of them runs)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if gemm_tflops is None and settings.device.type == "cuda" and any(b.flops for b in benchmarks):
        from blockfuse.analyze.ceilings import gemm_throughput

        gemm_tflops = gemm_throughput(DTYPES[settings.dtype])["tflops"]

    records: list[dict] = []
    total = sum(
        len(shapes_of(b, settings)) * len(settings.modes) * sum(p in b.providers for p in settings.providers)
        for b in benchmarks
    )
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not show_progress, transient=True) as progress:
        task = progress.add_task("bench ops", total=total)
        for bench in benchmarks:
            began, before = time.perf_counter(), len(records)
            for shape in shapes_of(bench, settings):
                measured = _measure_shape(
                    bench, shape, settings, copy_gbps, lambda text: progress.update(task, description=text),
                    gemm_tflops,
                )
                records += measured
                progress.advance(task, len(measured))
                if on_update is not None:
                    on_update(records)
            failed = sum(1 for r in records[before:] if r["error"])
            elapsed = time.perf_counter() - began
            progress.console.print(
                f"{bench.name}: {len(records) - before} measurements, {failed} failed, {elapsed:.1f} s"
            )
    return records


def _measure_shape(
    bench: OpBenchmark, shape: Shape, settings: Settings, copy_gbps, status, gemm_tflops: float | None = None,
    timed: bool = True,
) -> list[dict]:
    """Every provider x mode of one op and shape; ``status(text)`` says which is running; ``timed`` False: only
    the checks and the first call (``Case.measure``)."""
    dtype = DTYPES[settings.dtype]
    itemsize = torch.empty((), dtype=dtype).element_size()
    cuda = settings.device.type == "cuda"
    torch.manual_seed(0)
    torch.compiler.reset()  # NOTE: a fresh, static-shape compile per shape, as a user with one shape gets
    if cuda:
        torch.cuda.empty_cache()
    inputs = bench.make_inputs(shape, dtype, settings.device)
    try:
        reference, reference_error = Reference(bench, inputs, dtype), None
    except Exception as error:  # the oracle itself failed: no provider can be checked
        reference, reference_error = None, f"reference: {_describe(error)}"
    records = []
    for provider in settings.providers:
        if provider not in bench.providers:
            continue
        case, setup_error = None, reference_error
        if reference is not None:
            try:
                case = Case(bench, bench.providers[provider](), inputs, reference, settings)
            except Exception as error:
                setup_error = _describe(error)
        for mode in settings.modes:
            status(f"{bench.name} {'x'.join(map(str, shape))} {provider} {mode}")
            moved = mode_bytes(bench, shape, itemsize, mode)
            record = {
                "op": bench.name,
                "shape": list(shape),
                "dtype": settings.dtype,
                "mode": mode,
                "provider": provider,
                "bytes": moved,
                "ms": None,
                "ms_p20": None,
                "ms_p80": None,
                "ms_eager": None,
                "ms_eager_p20": None,
                "ms_eager_p80": None,
                "timing": None,
                "gbps": None,
                "frac_copy": None,
                "peak_mib": None,
                "rel_err_out": None,
                "rel_err_grad": None,
                "rel_err": {},
                "error": setup_error,
            }
            flops = mode_flops(bench, shape, mode)
            if flops is not None:  # a GEMM-bound op: its rate against the GEMM ceiling
                record.update(flops=flops, tflops=None, frac_gemm=None, gemm_ceiling_tflops=gemm_tflops)
            if case is not None:
                try:
                    record.update(case.measure(mode, timed))
                except Exception as error:
                    record["error"] = _describe(error)
                    if cuda:
                        torch.cuda.empty_cache()
            if record["ms"]:
                record["gbps"] = moved / record["ms"] / 1e6
                if copy_gbps:
                    record["frac_copy"] = record["gbps"] / copy_gbps
                if flops is not None:
                    record["tflops"] = flops / record["ms"] / 1e9
                    if gemm_tflops:
                        record["frac_gemm"] = record["tflops"] / gemm_tflops
            records.append(record)
    return records


# ---------------------------------------------------------------- warming the compile caches

# The compile cache counters in ``torch._dynamo.utils.counters``: name -> its group.
CACHE_COUNTERS = {"fxgraph_cache_hit": "inductor", "fxgraph_cache_miss": "inductor",
                  "autograd_cache_hit": "aot_autograd", "autograd_cache_miss": "aot_autograd"}


def cache_counts() -> dict[str, int]:
    """This process's FX graph and AOTAutograd cache hits and misses so far."""
    from torch._dynamo.utils import counters

    return {name: counters[group][name] for name, group in CACHE_COUNTERS.items()}


def compile_caches_on() -> dict:
    """Turns on Inductor's FX graph cache and the AOTAutograd cache (on by default in torch 2.11-2.13; an
    environment variable may have turned them off) and puts Inductor's cache folder (the default one where
    TORCHINDUCTOR_CACHE_DIR is unset) into the environment, which processes spawned from here inherit.
    Returns what is in effect."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    inductor_config.fx_graph_cache = True
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = True
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir()
    return {"dir": os.environ["TORCHINDUCTOR_CACHE_DIR"], "fx_graph_cache": inductor_config.fx_graph_cache,
            "autograd_cache": getattr(functorch_config, "enable_autograd_cache", None),
            "force_disable_caches": getattr(inductor_config, "force_disable_caches", False)}


def warm(bench: OpBenchmark, shape: Shape, settings: Settings) -> list[str]:
    """Every provider x mode of one op and shape built and called as ``run`` does (the same inputs, checks
    and ``torch.compiler.reset()``), untimed: fills the on-disk compile caches. The errors, ``provider mode:
    error``."""
    records = _measure_shape(bench, shape, settings, None, lambda text: None, timed=False)
    return [f"{r['provider']} {r['mode']}: {r['error']}" for r in records if r["error"]]


def _start_worker(memory_fraction: float | None) -> None:
    compile_caches_on()
    import torch._inductor.config as inductor_config

    # NOTE: the kernel configs Inductor picks by timing them at a first launch are not cached from here:
    # timed beside the other workers they may be the wrong ones; the measuring process picks its own.
    inductor_config.autotune_local_cache = False
    if memory_fraction is not None:
        torch.cuda.set_per_process_memory_fraction(memory_fraction)


def _warm_cell(name: str, shape: Shape, settings: Settings) -> list[str]:
    try:
        return warm({b.name: b for b in declared_ops()}[name], shape, settings)
    finally:  # nothing of this cell stays on the device while the next one runs
        gc.collect()
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()


def warm_up(cells: list[tuple[str, Shape]], settings: Settings, jobs: int, *, show_progress: bool = True) -> dict:
    """``warm`` each (op name, shape) of ``cells`` in ``jobs`` spawned processes, so that the compiles of a
    later ``run`` here are cache hits; returns when every worker is done. On CUDA each worker may hold
    1 / ``jobs`` of the memory free now. A cell that fails, or whose worker dies, is reported, not raised.
    Returns {jobs, cells, warmed (run through in a worker), failures ("op shape provider mode: error"),
    elapsed_s, caches (``compile_caches_on``)}. Spawned: a script that calls this needs its
    ``if __name__ == "__main__":`` guard."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    caches = compile_caches_on()
    fraction = None
    if settings.device.type == "cuda":
        free, total = torch.cuda.mem_get_info(settings.device)
        fraction = free / total / jobs
    began, warmed, failures, printed = time.perf_counter(), 0, [], set()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_start_worker,
                              initargs=(fraction,)) as pool,
          Progress(*columns, disable=not show_progress, transient=True) as progress):
        task = progress.add_task(f"warm-up ({jobs} jobs)", total=len(cells))
        futures = {pool.submit(_warm_cell, name, shape, settings): (name, shape) for name, shape in cells}
        for future in as_completed(futures):
            name, shape = futures[future]
            try:
                errors = future.result()
                warmed += 1
            except Exception as error:  # the cell could not be built, or its worker died
                errors = [_describe(error)]
            for error in errors:
                failures.append(f"{name} {'x'.join(map(str, shape))} {error}")
                if error not in printed:  # once each: a missing package fails every cell alike
                    printed.add(error)
                    progress.console.print(f"warm-up failed: {failures[-1]}")
            progress.advance(task)
    return {"jobs": jobs, "cells": len(cells), "warmed": warmed, "failures": failures,
            "elapsed_s": round(time.perf_counter() - began, 1), "caches": caches}


# ---------------------------------------------------------------- the machine


def environment(device: torch.device) -> dict:
    """What the figures were measured on: card, versions, and which path blockfuse takes."""

    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    try:
        from blockfuse.runtime import implementation

        path = implementation(device)
    except Exception as error:
        path = f"unknown ({_describe(error)})"
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.type,
        "card": f"CPU ({platform.machine() or 'unknown'})",
        "compute_capability": None,
        "sm_count": None,
        "memory_gib": None,
        "torch": torch.__version__,
        "triton": triton_version,
        "liger_kernel": version("liger-kernel"),
        "cut_cross_entropy": version("cut-cross-entropy"),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "blockfuse_implementation": path,
        "git_commit": _git_commit(),
        "source_digest": source_digest(),
    }
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update(
            card=properties.name,
            compute_capability=f"{properties.major}.{properties.minor}",
            sm_count=properties.multi_processor_count,
            memory_gib=round(properties.total_memory / 2**30, 1),
        )
    return info


def _git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        return done.stdout.strip() or None if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def source_digest() -> str:
    """The first 12 hex digits of a SHA-256 over the blockfuse package's Python sources (path and
    bytes of each file, in path order): names the code that ran even where the checkout's git
    HEAD is stale or missing (a copied working tree, an installed wheel)."""
    import hashlib

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
