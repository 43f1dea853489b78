"""Blocks and models measured every way they can run: eager, each torch.compile mode, surgical compile
(only the elementwise pieces compiled), fused, fused + torch.compile. One process, one card, the same
weights for every provider.

Per provider and mode (``infer``: forward under no_grad; ``fwd``: training forward; ``fwdbwd``: forward
and backward of a fixed output gradient) it records the median / p20 / p80 time (CUDA events after
warm-up, L2 flushed before each call), peak memory of the training step above what is allocated
before it, the time of the first call (compile time for the compiled providers), and the relative
error of the output and of all gradients (input and parameters) against an fp32 run of the eager
module with the same weights. A provider that fails is recorded with its error; the rest still run.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from blockfuse.bench import timing
from blockfuse.bench.runner import _describe, relative_error
from blockfuse.models import build_model, convert, named_gradients
from blockfuse.models.surgical import compile_surgically

MODES = ("infer", "fwd", "fwdbwd")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
PROVIDERS = (
    "eager",
    *(f"compile:{m}" for m in COMPILE_MODES),
    "surgical:default",
    "surgical:reduce-overhead",
    "fused",
    "fused+compile:default",
    "fused+compile:reduce-overhead",
    "fused+compile:max-autotune-no-cudagraphs",
)
SLOW_PROVIDERS = tuple(p for p in PROVIDERS if "max-autotune" in p)  # minutes of autotuning each
CPU_PROVIDERS = ("eager", "compile:default", "surgical:default", "fused")


@dataclass(frozen=True)
class BlockSettings:
    name: str
    shape: Optional[tuple[int, int, int]]
    layers: Optional[int]
    dtype: torch.dtype
    providers: tuple[str, ...]
    modes: tuple[str, ...]
    device: torch.device
    quick: bool = False
    overrides: tuple = ()
    compile_times: bool = False  # also time each compiled provider's compile, cold and warm (compiles twice more)


def _compile_mode(provider: str) -> Optional[str]:
    return provider.split(":", 1)[1] if ":" in provider else None


def _uses_cudagraphs(provider: str) -> bool:
    mode = _compile_mode(provider)
    return mode in ("reduce-overhead", "max-autotune")


def _total_relative_error(tensors: dict[str, Tensor], reference: dict[str, Tensor]) -> float:
    """||a - b|| / ||b|| over every tensor at once (fp64)."""
    difference = sum(float((tensors[k].double() - reference[k].double()).square().sum()) for k in reference)
    scale = sum(float(reference[k].double().square().sum()) for k in reference)
    return (difference / scale) ** 0.5 if scale > 0 else difference**0.5


class _Workload:
    """The module (bf16 eager weights), its inputs, the output gradient and the fp32 oracle."""

    def __init__(self, settings: BlockSettings):
        self.settings = settings
        overrides = dict(settings.overrides)
        module, inputs = build_model(settings.name, settings.shape, settings.dtype, settings.device,
                                     layers=settings.layers, **overrides)
        self.eager = module
        self.inputs = inputs
        self.x = inputs[0]
        generator = torch.Generator().manual_seed(1)
        self.dy = torch.randn(self.x.shape, generator=generator).to(self.x.device, self.x.dtype)
        self.flops = _flops(module, self.x)

        oracle = copy.deepcopy(module).float()
        x32 = self.x.detach().float().requires_grad_()
        out = oracle(x32, *inputs[1:])
        out.backward(self.dy.float())
        self.out32 = out.detach()
        self.grads32 = {"x": x32.grad.detach(), **named_gradients(oracle)}
        del oracle
        with torch.no_grad():
            self.out_eager = module(self.x, *inputs[1:]).float()  # the max-abs-difference baseline

    def provider_module(self, provider: str) -> Callable:
        impl = "fused" if provider.startswith("fused") else "eager"
        module = convert(self.eager, impl) if impl == "fused" else copy.deepcopy(self.eager)
        mode = _compile_mode(provider)
        if mode is None:
            return module, module
        if provider.startswith("surgical"):
            # only RoPE, the activation and the norms compiled (outputs cloned in CUDA-graph modes:
            # models/surgical.py says why)
            return module, compile_surgically(module, mode)
        options = {"mode": mode} if mode != "default" else {}
        return module, torch.compile(module, **options)


def _flops(module: nn.Module, x: Tensor) -> float:
    """Forward FLOPs of the GEMMs and attention (2 per multiply-add), from the config."""
    config = getattr(module, "config", None)
    if config is None:
        return float("nan")
    layers = len(module.blocks) if hasattr(module, "blocks") else 1
    batch, seq, d = x.shape
    tokens = batch * seq
    linear = d * (config.q_width + 2 * config.kv_width) + config.q_width * d
    linear += d * config.ffn_hidden * (3 if config.gated else 2)
    attention = 2 * seq * config.q_width * (0.5 if config.causal else 1.0)  # q k^T and p v per token
    return 2.0 * tokens * (linear + attention) * layers


def _output_errors(out: Tensor, work: _Workload) -> dict:
    """Relative error and max abs difference of an output against the fp32 run, and its max abs
    difference against the eager output in the benchmark dtype (the source documents' measure)."""
    out = out.detach().float()
    return {"rel_err_out": relative_error(out, work.out32),
            "max_abs_out": float((out - work.out32).abs().max()),
            "max_abs_vs_eager": float((out - work.out_eager).abs().max())}


def _time(fn: Callable, settings: BlockSettings, clear: Callable) -> timing.Timing:
    if settings.device.type == "cuda":  # time_cuda flushes the L2 after each setup
        return timing.time_cuda(lambda _: fn(), setup=clear, warmup_ms=25 if settings.quick else 100,
                                rep_ms=50 if settings.quick else 400)
    return timing.time_cpu(lambda _: fn(), setup=clear, warmup=1, rep_ms=50 if settings.quick else 500,
                           max_reps=20)


def _measure_provider(work: _Workload, provider: str) -> list[dict]:
    settings = work.settings
    cuda = settings.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        memory_before_build = torch.cuda.memory_allocated()
    torch._dynamo.reset()
    try:
        module, run = work.provider_module(provider)
    except Exception as error:  # noqa: BLE001 (a provider that cannot be built is reported like one that fails)
        return [{"provider": provider, "mode": mode, "error": _describe(error)} for mode in settings.modes]
    extra = work.inputs[1:]
    leaf = work.x.detach().clone().requires_grad_()
    parameters = list(module.parameters())
    mark_step = torch.compiler.cudagraph_mark_step_begin if _uses_cudagraphs(provider) else (lambda: None)

    def clear():
        leaf.grad = None
        for p in parameters:
            p.grad = None

    def infer():
        mark_step()
        with torch.no_grad():
            return run(work.x, *extra)

    def forward():
        mark_step()
        return run(leaf, *extra)

    def step():
        mark_step()
        run(leaf, *extra).backward(work.dy)

    calls = {"infer": infer, "fwd": forward, "fwdbwd": step}
    records = []
    errors: dict = {}
    for mode in settings.modes:
        record = {"provider": provider, "mode": mode}
        try:
            clear()
            began = time.perf_counter()
            out = calls[mode]()
            if cuda:
                torch.cuda.synchronize()
            record["first_call_s"] = round(time.perf_counter() - began, 3)
            if mode == "infer":
                errors.update(_output_errors(out, work))
            if mode == "fwdbwd":
                grads = {"x": leaf.grad.detach().clone(), **named_gradients(module)}
                errors["rel_err_grad"] = _total_relative_error(grads, work.grads32)
                errors["rel_err_dx"] = relative_error(grads["x"], work.grads32["x"])
            del out
            result = _time(calls[mode], settings, clear)
            record.update(ms=result.median, p20=result.p20, p80=result.p80)
            if mode == "fwdbwd":
                record["gemm_tflops"] = 3 * work.flops / (result.median * 1e-3) / 1e12
            elif mode in ("infer", "fwd"):
                record["gemm_tflops"] = work.flops / (result.median * 1e-3) / 1e12
            if cuda and mode == "fwd" and not _uses_cudagraphs(provider):
                # what the training forward keeps for the backward (its output included)
                clear()
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                kept = [forward()]  # the output holds the graph and its saved tensors until cleared
                torch.cuda.synchronize()
                record["saved_mib"] = (torch.cuda.memory_allocated() - before) / 2**20
                kept.clear()
            if cuda and mode == "fwdbwd":
                clear()
                if _uses_cudagraphs(provider):
                    # NOTE: CUDA-graph modes keep their memory in a pool allocated when the graph is
                    # recorded: count everything allocated since the module was built.
                    torch.cuda.synchronize()
                    record["peak_mib"] = (torch.cuda.max_memory_allocated() - memory_before_build) / 2**20
                    record["peak_note"] = "since build, CUDA-graph pool included"
                else:
                    record["peak_mib"] = timing.peak_memory_mib(step)
        except Exception as error:  # noqa: BLE001 (a failing provider is reported, the rest still run)
            record["error"] = _describe(error)
        records.append(record)
    if "infer" not in settings.modes and "rel_err_out" not in errors:
        try:
            with torch.no_grad():
                mark_step()
                errors.update(_output_errors(run(work.x, *extra), work))
        except Exception as error:  # noqa: BLE001
            errors.setdefault("error", _describe(error))
    for record in records:
        record.update({k: v for k, v in errors.items() if k != "error"})
    return records


def compile_times(work: _Workload, provider: str) -> dict:
    """Seconds of a compiled provider's first inference call: cold (Inductor's and Triton's caches
    empty, in a fresh folder) and warm (compiled again after ``torch.compiler.reset()``, the on-disk
    caches that the cold call filled still there, as in a second run of the same program)."""
    import os
    import tempfile

    from torch._inductor.codecache import PyCodeCache

    x, extra = work.x, work.inputs[1:]
    cuda = work.x.device.type == "cuda"
    seconds = []
    with tempfile.TemporaryDirectory(prefix="blockfuse-compile-") as folder:
        caches = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(folder, "inductor"),
                  "TRITON_CACHE_DIR": os.path.join(folder, "triton")}
        saved = {name: os.environ.get(name) for name in caches}
        os.environ.update(caches)
        try:
            for _ in range(2):
                torch.compiler.reset()
                if hasattr(PyCodeCache, "cache_clear"):
                    PyCodeCache.cache_clear()  # the in-memory modules too: "warm" means on disk only
                module, run = work.provider_module(provider)
                if _uses_cudagraphs(provider):
                    torch.compiler.cudagraph_mark_step_begin()
                began = time.perf_counter()
                with torch.no_grad():
                    run(x, *extra)
                if cuda:
                    torch.cuda.synchronize()
                seconds.append(time.perf_counter() - began)
                del module, run
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            torch.compiler.reset()
    return {"compile_cold_s": round(seconds[0], 3), "compile_warm_s": round(seconds[1], 3)}


def run_block(settings: BlockSettings, on_update: Callable | None = None,
              show_progress: bool = True) -> tuple[dict, list[dict]]:
    """(workload description, records) for every provider of ``settings``. ``show_progress=False``
    hides the progress bar (its refresh thread skews CPU timings on a small machine)."""
    from rich.progress import Progress

    work = _Workload(settings)
    config = work.eager.config
    workload = {
        "name": settings.name,
        "shape": list(work.x.shape),
        "layers": len(work.eager.blocks),
        "dtype": str(settings.dtype).replace("torch.", ""),
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "padding_mask": len(work.inputs) > 1,
        "forward_gflop": work.flops / 1e9,
        "output_fp32_max_abs": float(work.out32.abs().max()),
        "output_fp32_rms": float(work.out32.double().square().mean().sqrt()),
    }
    records: list[dict] = []
    with Progress(transient=True, disable=not show_progress) as progress:
        task = progress.add_task(f"{settings.name}", total=len(settings.providers))
        for provider in settings.providers:
            progress.update(task, description=f"{settings.name}: {provider}")
            measured = _measure_provider(work, provider)
            torch._dynamo.reset()  # the provider's graphs (and CUDA-graph pools) go with it
            if settings.device.type == "cuda":
                torch.cuda.empty_cache()
            if settings.compile_times and _compile_mode(provider) is not None:
                try:
                    times = compile_times(work, provider)
                except Exception as error:  # noqa: BLE001
                    times = {"compile_error": _describe(error)}
                for record in measured:
                    record.update(times)
            records.extend(measured)
            if on_update is not None:
                on_update(workload, records)
            progress.advance(task)
    return workload, records
