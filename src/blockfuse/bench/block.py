"""Blocks and models measured every way they can run: eager, eager with materialized attention (as
transformers' ``attn_implementation="eager"``: the second baseline), each torch.compile mode, surgical
compile (only the elementwise pieces compiled), fused, fused + torch.compile. One process, one card, the
same weights for every provider.

Per provider and mode (``infer``: forward under no_grad; ``fwd``: training forward; ``bwd``: the
backward alone, its forward run untimed before each call; ``fwdbwd``: forward and backward of a fixed
output gradient) it records the median / p20 / p80 time (CUDA events after warm-up, L2 flushed before
each call), the GEMM + attention TFLOP/s that time means and its fraction of a large GEMM's TFLOP/s
measured in the same run (CUDA), peak memory of the training step above what is allocated before
it, the time of the first call (compile time for the compiled providers), and the relative error of
the output and of all gradients (input and parameters) against an fp32 run of the eager module with
the same weights. A provider that fails is recorded with its error; the rest still run.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from blockfuse.bench import timing
from blockfuse.bench.memory import release_provider
from blockfuse.bench.runner import _describe, relative_error
from blockfuse.models import build_model, convert, named_gradients
from blockfuse.models.surgical import compile_surgically
from blockfuse.nn.fp8 import clear_weight_cache
from blockfuse.nn.fp8 import convert as convert_to_fp8

MODES = ("infer", "fwd", "bwd", "fwdbwd")
DEFAULT_MODES = ("infer", "fwd", "fwdbwd")  # bwd is about fwdbwd - fwd: asked for by name
FLOP_FACTOR = {"infer": 1, "fwd": 1, "bwd": 2, "fwdbwd": 3}  # backward GEMMs: twice the forward's
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# The eager module with attention computed as Hugging Face's eager attention does (scores materialized);
# no ":" in the name, which would read as a torch.compile mode.
MATERIALIZED_ATTENTION = "eager-materialized-attention"
PROVIDERS = (
    "eager",
    MATERIALIZED_ATTENTION,
    *(f"compile:{m}" for m in COMPILE_MODES),
    "surgical:default",
    "surgical:reduce-overhead",
    "fused",
    "fused+compile:default",
    "fused+compile:reduce-overhead",
    "fused+compile:max-autotune-no-cudagraphs",
)
SLOW_PROVIDERS = tuple(p for p in PROVIDERS if "max-autotune" in p)  # minutes of autotuning each
CPU_PROVIDERS = ("eager", MATERIALIZED_ATTENTION, "compile:default", "surgical:default", "fused")
# How the reports name the two eager baselines (they give every provider's speed-up against both).
LABELS = {
    "eager": "eager, SDPA attention (scaled_dot_product_attention)",
    MATERIALIZED_ATTENTION: "eager, materialized attention (HF eager style)",
}


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
    # compiled providers whose first call is also timed with cold and with warm caches (two more compiles each)
    compile_times: tuple[str, ...] = ()
    # the Linear layers: "bf16" (as built), "fp8:tensorwise" / "fp8:rowwise" / "fp8:delayed" (blockfuse.fp8.convert
    # on every provider's copy, before it is compiled; "fp8:tensorwise+recompute": with recompute_activation) or
    # "torchao:tensorwise" / "torchao:rowwise" (torchao's float8 training, the FP8 baseline a PyTorch user picks;
    # not for the fused providers)
    linear: str = "bf16"


LINEAR_CHOICES = ("bf16", "fp8:tensorwise", "fp8:rowwise", "fp8:tensorwise+recompute", "fp8:delayed",
                  "torchao:tensorwise", "torchao:rowwise")


def parse_linear(text: str) -> str:
    """``bf16``, ``fp8`` (tensorwise), ``fp8:RECIPE`` or ``torchao:RECIPE``, as BlockSettings.linear spells it."""
    value = "fp8:tensorwise" if text == "fp8" else text
    if value not in LINEAR_CHOICES:
        raise ValueError(f"linear: expected bf16, fp8 or one of {LINEAR_CHOICES[1:]}, got {text!r}")
    return value


def _torchao_float8(module: nn.Module, recipe: str, provider: str) -> nn.Module:
    """``module`` with its Linear layers swapped by ``torchao.float8.convert_to_float8_training`` (``recipe``:
    torchao's recipe name). The fused providers run their projections through blockfuse's own layers (their MLP
    calls its GEMMs inside one op), so torchao's would not see them: refused."""
    if provider.startswith("fused"):
        raise ValueError(f"linear torchao:{recipe}: the fused providers take blockfuse's FP8 layers "
                         f"(fp8:{recipe}); torchao's compare with eager, compile and surgical")
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as error:
        raise RuntimeError(f"linear torchao:{recipe} needs torchao (pip install torchao): {error}") from None
    return convert_to_float8_training(module, config=Float8LinearConfig.from_recipe_name(recipe))


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
        self.gemm_ceiling = None  # {shape, dtype, ms, tflops} of a large GEMM on this card (CUDA only)
        if settings.device.type == "cuda":
            from blockfuse.analyze.ceilings import gemm_throughput

            self.gemm_ceiling = gemm_throughput(settings.dtype)

        oracle = copy.deepcopy(module).float()
        x32 = self.x.detach().float().requires_grad_()
        out = oracle(x32, *inputs[1:])
        out.backward(self.dy.float())
        self.out32 = out.detach()
        self.grads32 = {"x": x32.grad.detach(), **named_gradients(oracle)}
        del oracle
        with torch.no_grad():
            self.out_eager = module(self.x, *inputs[1:]).float()  # the max-abs-difference baseline

    def provider_module(self, provider: str) -> tuple[nn.Module, Callable]:
        return provider_module(self.eager, provider, self.settings.linear)


def provider_module(eager: nn.Module, provider: str, linear: str = "bf16") -> tuple[nn.Module, Callable]:
    """(the provider's module, what to call): a copy of ``eager`` converted and compiled as ``provider`` says,
    its Linear layers in FP8 when ``linear`` says so (``fp8:RECIPE``, or torchao's: ``torchao:RECIPE``)."""
    if provider == MATERIALIZED_ATTENTION:
        module = convert(eager, "eager", attention="eager")  # every block's config says so
    elif provider.startswith("fused"):
        module = convert(eager, "fused")
    else:
        module = copy.deepcopy(eager)
    kind, _, recipe = parse_linear(linear).partition(":")
    if kind == "fp8":
        recipe, _, recompute = recipe.partition("+")
        module = convert_to_fp8(module, recipe=recipe, recompute_activation=recompute == "recompute")
    elif kind == "torchao":
        module = _torchao_float8(module, recipe, provider)
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


# Timed calls of a measurement at least, and warm-up calls before them, on CUDA (timing.time_cuda's NOTE).
MIN_REPS = 7
MIN_WARMUP = 3


def _time(fn: Callable, settings: BlockSettings, setup: Callable) -> timing.Timing:
    """``fn(setup())`` timed, ``setup`` untimed before each call (the L2 flushed after it on CUDA)."""
    if settings.device.type == "cuda":
        # (at least MIN_WARMUP / MIN_REPS calls: a long step was timed twice under --quick's budgets)
        return timing.time_cuda(fn, setup=setup, warmup_ms=25 if settings.quick else 100,
                                rep_ms=50 if settings.quick else 400, min_warmup=MIN_WARMUP, min_reps=MIN_REPS)
    return timing.time_cpu(fn, setup=setup, warmup=1, rep_ms=50 if settings.quick else 500, max_reps=20)


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

    fp8 = settings.linear != "bf16"

    def clear(training: bool = True):
        leaf.grad = None
        for p in parameters:
            p.grad = None
        if fp8 and training:  # an optimizer step would make the cached weight casts stale: a step makes its own
            for p in parameters:
                clear_weight_cache(p)

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

    def cleared_forward():  # the bwd mode's untimed setup
        clear()
        return forward()

    calls = {"infer": infer, "fwd": forward, "bwd": lambda: cleared_forward().backward(work.dy), "fwdbwd": step}
    timed = {mode: (clear, lambda _, call=call: call()) for mode, call in calls.items()}
    timed["infer"] = (lambda: clear(training=False), timed["infer"][1])  # inference keeps its weight casts
    timed["bwd"] = (cleared_forward, lambda out: out.backward(work.dy))
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
            if mode in ("bwd", "fwdbwd") and "rel_err_grad" not in errors:
                grads = {"x": leaf.grad.detach().clone(), **named_gradients(module)}
                errors["rel_err_grad"] = _total_relative_error(grads, work.grads32)
                errors["rel_err_dx"] = relative_error(grads["x"], work.grads32["x"])
            del out
            setup, call = timed[mode]
            result = _time(call, settings, setup)
            record.update(ms=result.median, p20=result.p20, p80=result.p80)
            record["gemm_tflops"] = FLOP_FACTOR[mode] * work.flops / (result.median * 1e-3) / 1e12
            if work.gemm_ceiling:
                record["gemm_fraction"] = record["gemm_tflops"] / work.gemm_ceiling["tflops"]
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


def compile_times(settings: BlockSettings, provider: str) -> dict:
    """Seconds of a compiled provider's first inference call in a new Python process, as a user's
    program meets it: cold (Inductor's and Triton's caches in an empty folder), then warm (a second
    process on the caches the first one filled). A fresh process each time, since compiled graphs,
    kernels and autotuning results also stay cached in memory."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    import blockfuse

    probe = {"name": settings.name, "shape": settings.shape, "layers": settings.layers,
             "dtype": str(settings.dtype).removeprefix("torch."), "overrides": dict(settings.overrides),
             "provider": provider, "device": str(settings.device)}
    source = str(Path(blockfuse.__file__).resolve().parents[1])
    seconds = []
    with tempfile.TemporaryDirectory(prefix="blockfuse-compile-") as folder:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(folder, "inductor"),
               "TRITON_CACHE_DIR": os.path.join(folder, "triton"),
               "PYTHONPATH": os.pathsep.join(filter(None, (source, os.environ.get("PYTHONPATH"))))}
        for _ in range(2):
            # its own session, ended with whatever it started (Inductor's compile workers)
            process = subprocess.Popen([sys.executable, "-m", "blockfuse.bench.block", json.dumps(probe)], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       start_new_session=True)
            try:
                stdout, stderr = process.communicate(timeout=1800)
            finally:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                process.wait()
            lines = stdout.strip().splitlines()
            if process.returncode != 0 or not lines:
                raise RuntimeError(f"compile-time probe of {provider} exited {process.returncode}: "
                                   f"{(stderr.strip().splitlines() or [''])[-1][:300]}")
            seconds.append(json.loads(lines[-1])["first_call_s"])
    return {"compile_cold_s": round(seconds[0], 3), "compile_warm_s": round(seconds[1], 3)}


def _first_call(probe: dict) -> float:
    """The compile-time probe (run by :func:`compile_times` in its own process): builds the block
    of ``probe`` and times the provider's first inference call."""
    device = torch.device(probe["device"])
    shape = tuple(probe["shape"]) if probe["shape"] else None
    eager, inputs = build_model(probe["name"], shape, getattr(torch, probe["dtype"]), device,
                                layers=probe["layers"], **probe["overrides"])
    _, run = provider_module(eager, probe["provider"])
    if _uses_cudagraphs(probe["provider"]):
        torch.compiler.cudagraph_mark_step_begin()
    began = time.perf_counter()
    with torch.no_grad():
        run(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - began


def run_block(settings: BlockSettings, on_update: Callable | None = None, show_progress: bool = True,
              say: Callable[[str], None] | None = None) -> tuple[dict, list[dict]]:
    """(workload description, records) for every provider of ``settings``. ``show_progress=False``
    hides the progress bar (its refresh thread skews CPU timings on a small machine); ``say``, when
    given, is called with one line before each step (and after the last) instead."""
    from rich.progress import Progress

    work = _Workload(settings)
    config = work.eager.config
    workload = {
        "name": settings.name,
        "shape": list(work.x.shape),
        "layers": len(work.eager.blocks),
        "dtype": str(settings.dtype).replace("torch.", ""),
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "labels": {p: LABELS[p] for p in settings.providers if p in LABELS},
        "padding_mask": len(work.inputs) > 1,
        "linear": settings.linear,
        "forward_gflop": work.flops / 1e9,
        "gemm_ceiling": work.gemm_ceiling,
        "output_fp32_max_abs": float(work.out32.abs().max()),
        "output_fp32_rms": float(work.out32.double().square().mean().sqrt()),
    }
    records: list[dict] = []
    # NOTE: the compile-time probes run after every provider is timed: a probe process and the
    # compile workers it starts compete for the host, and in a report run that timed providers
    # after the probes, the host-bound ones read from 25% up to 2.8x slower than in a run without
    # probes (H200 machine, 16 cores).
    probed = [p for p in settings.providers if p in settings.compile_times and _compile_mode(p) is not None]
    steps = len(settings.providers) + len(probed)
    began = time.perf_counter()

    def tell(step: int, what: str) -> None:
        if say is not None:
            say(f"[{step}/{steps}] {settings.name}: {what} ({time.perf_counter() - began:.0f} s so far)")

    with Progress(transient=True, disable=not show_progress) as progress:
        task = progress.add_task(f"{settings.name}", total=steps)
        for step, provider in enumerate(settings.providers, start=1):
            tell(step, f"{provider}, modes {','.join(settings.modes)}")
            progress.update(task, description=f"{settings.name}: {provider}")
            records.extend(_measure_provider(work, provider))
            release_provider(settings.device.type == "cuda")  # its graphs, CUDA-graph pools and modules go
            if on_update is not None:
                on_update(workload, records)
            progress.advance(task)
        for step, provider in enumerate(probed, start=len(settings.providers) + 1):
            tell(step, f"{provider} compile, cold and warm (two new processes)")
            progress.update(task, description=f"{settings.name}: {provider} compile, cold and warm")
            try:
                times = compile_times(settings, provider)
            except Exception as error:  # noqa: BLE001
                times = {"compile_error": _describe(error)}
            for record in records:
                if record["provider"] == provider:
                    record.update(times)
            if on_update is not None:
                on_update(workload, records)
            progress.advance(task)
    if say is not None:
        say(f"{settings.name}: {steps} steps done in {time.perf_counter() - began:.0f} s")
    return workload, records


if __name__ == "__main__":  # the compile-time probe: python -m blockfuse.bench.block '<probe JSON>'
    import json
    import sys

    print(json.dumps({"first_call_s": _first_call(json.loads(sys.argv[1]))}))
