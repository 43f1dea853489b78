"""``blockfuse bench host``: what a call of each op costs the host.

Every op benchmark declared for ``blockfuse bench ops`` (plus the MLP ops declared here) is called on
its smallest (CPU) shape, where the GPU work is a few microseconds: timed back to back, a call then
costs what the host spends on it. Providers: PyTorch's eager equivalent (``eager``), ``torch.compile``
of the reference (``compile``, default mode: no CUDA graphs), Liger-Kernel where it has the op,
blockfuse eager (``blockfuse``) and blockfuse inside ``torch.compile`` (``blockfuse-compile``, default
mode). Modes: ``fwd`` (inference forward, under ``no_grad``) and ``fwdbwd`` (forward with autograd,
then ``autograd.grad`` of every input), as in ``bench ops``. Each record has the median / p20 / p80
microseconds per call (median of ``samples`` loops of ``calls`` calls between two synchronizations)
and the relative error of the outputs or input gradients against the fp32 reference.

``breakdown`` splits an RMSNorm call's host time into its parts (checks, the launcher's Python, one
launch through blockfuse's ``Kernel`` and through Triton's own ``kernel[grid](...)``, the op dispatcher,
an allocation, an autograd node): what decides ``ops.launch.FAST_LAUNCH`` and why eager calls skip the
dispatcher. ``profile`` writes a cProfile of
blockfuse's eager forward+backward of one op.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from blockfuse.bench import timing, writer
from blockfuse.bench.runner import DTYPES, Case, Reference, Settings, _describe, declared_ops
from blockfuse.bench.spec import OpBenchmark, compiled

PROVIDERS = ("eager", "compile", "liger", "blockfuse", "blockfuse-compile")
MODES = ("fwd", "fwdbwd")
# The targets (never lowered): blockfuse eager against PyTorch eager and Liger, blockfuse
# compiled against torch.compile of the reference. (mode, provider, baseline, at most this ratio).
TARGETS = (
    ("fwd", "blockfuse", "eager", 2.0),
    ("fwd", "blockfuse", "liger", 0.5),
    ("fwdbwd", "blockfuse", "eager", 1.5),
    ("fwd", "blockfuse-compile", "compile", 1.1),
    ("fwdbwd", "blockfuse-compile", "compile", 1.1),
)

# ---------------------------------------------------------------- the MLP ops (host only)

MLP_SHAPE = (64, 256)  # (tokens, d_model); hidden = 2 * d_model


def _mlp_inputs(gated: bool):
    def make(shape, dtype, device):
        tokens, d = shape
        hidden = 2 * d
        out = (2 if gated else 1) * hidden

        def weight(rows, cols):
            return torch.randn(rows, cols, dtype=dtype, device=device) / cols**0.5

        return {"x": torch.randn(tokens, d, dtype=dtype, device=device), "w1": weight(out, d),
                "b1": 0.1 * torch.randn(out, dtype=dtype, device=device), "w2": weight(d, hidden),
                "b2": 0.1 * torch.randn(d, dtype=dtype, device=device)}

    return make


def _linear_act_inputs(shape, dtype, device):
    inputs = _mlp_inputs(False)(shape, dtype, device)
    return {name: inputs[name] for name in ("x", "w1", "b1")}


def _eager_gated_mlp(x, w1, b1, w2, b2):
    gate, up = F.linear(x, w1, b1).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w2, b2)


def _eager_fused_mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def _eager_linear_act(x, w1, b1):
    return F.gelu(F.linear(x, w1, b1), approximate="tanh")


# name -> (blockfuse's op, the activation argument): each called as fn(x, w1, b1, [w2, b2], activation), the
# inputs by name as the harness passes them (Reference and Case call ``fn(**inputs)``)
_MLP_OPS = {"gated_mlp": ("gated_mlp", "swiglu"), "fused_mlp": ("fused_mlp", "gelu_tanh"),
            "linear_act": ("linear_act", "gelu_tanh")}


def _op(name: str, reference: bool) -> Callable:
    import blockfuse

    function, activation = _MLP_OPS[name]
    op = getattr(blockfuse, function + ("_ref" if reference else ""))

    def call(x, w1, b1, w2=None, b2=None):
        return op(x, w1, b1, activation) if w2 is None else op(x, w1, b1, w2, b2, activation)

    return call


def _mlp_benchmark(name: str, make_inputs, eager) -> OpBenchmark:
    return OpBenchmark(
        name=name, make_inputs=make_inputs, outputs=("out",), reference=lambda: _op(name, True),
        providers={"eager": lambda: eager, "compile": compiled(lambda: _op(name, True)),
                   "blockfuse": lambda: _op(name, False)},
        bytes_moved=lambda shape, b: (0, 0), shapes=(), cpu_shapes=(MLP_SHAPE,),
    )


MLP_BENCHMARKS = (
    _mlp_benchmark("gated_mlp", _mlp_inputs(True), _eager_gated_mlp),
    _mlp_benchmark("fused_mlp", _mlp_inputs(False), _eager_fused_mlp),
    _mlp_benchmark("linear_act", _linear_act_inputs, _eager_linear_act),
)


def benchmarks() -> list[OpBenchmark]:
    """Every op the host benchmark covers: the op benchmarks' (every form) and the MLP ops."""
    return [*declared_ops(), *MLP_BENCHMARKS]


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class HostSettings:
    dtype: str
    providers: tuple[str, ...]
    modes: tuple[str, ...]
    device: torch.device
    quick: bool = False


def _factory(bench: OpBenchmark, provider: str):
    if provider == "blockfuse-compile":
        blockfuse = bench.providers["blockfuse"]
        return lambda: torch.compile(blockfuse())
    return bench.providers.get(provider)


def _time_us(call: Callable, clear: Callable, settings: HostSettings) -> timing.Timing:
    if settings.device.type == "cuda":
        t = timing.time_cuda_loop(call, before_each=clear, calls=50 if settings.quick else 200,
                                  samples=5 if settings.quick else 15)
    else:
        def once():
            clear()
            call()

        t = timing.time_cpu(once, warmup=2, rep_ms=20 if settings.quick else 200, max_reps=50 if settings.quick
                            else 500)
    return timing.Timing(t.median * 1e3, t.p20 * 1e3, t.p80 * 1e3)


def measure(bench: OpBenchmark, settings: HostSettings, status: Callable[[str], None] = print) -> list[dict]:
    """One record per provider x mode of ``bench`` at its smallest shape."""
    shape = bench.cpu_shapes[0]
    dtype = DTYPES[settings.dtype]
    torch.manual_seed(0)
    torch.compiler.reset()
    inputs = bench.make_inputs(shape, dtype, settings.device)
    reference = Reference(bench, inputs, dtype)
    run_settings = Settings(dtype=settings.dtype, modes=settings.modes, providers=settings.providers, shapes=None,
                            quick=settings.quick, device=settings.device)
    records = []
    for provider in settings.providers:
        factory = _factory(bench, provider)
        if factory is None:
            continue
        try:
            case, error = Case(bench, factory(), inputs, reference, run_settings), None
        except Exception as failure:  # a missing peer (Liger not installed), say
            case, error = None, _describe(failure)
        for mode in settings.modes:
            status(f"host {bench.name} {provider} {mode}")
            record = {"op": bench.name, "shape": list(shape), "dtype": settings.dtype, "provider": provider,
                      "mode": mode, "us": None, "us_p20": None, "us_p80": None, "rel_err": None, "error": error}
            if case is not None:
                try:
                    errors = case.forward_errors() if mode == "fwd" else case.grad_errors()
                    record["rel_err"] = max(errors.values())
                    setup, call, leaves = case.callable(mode)

                    def clear(leaves=leaves):
                        for tensor in leaves:
                            tensor.grad = None

                    for _ in range(3):  # warm-up: compiles and fills every cache
                        clear()
                        call()
                    t = _time_us(call, clear, settings)
                    record.update(us=t.median, us_p20=t.p20, us_p80=t.p80)
                except Exception as failure:
                    record["error"] = _describe(failure)
            records.append(record)
    return records


def run(settings: HostSettings, names: list[str] | None = None, show_progress: bool = True,
        on_update: Callable[[list[dict]], None] | None = None) -> list[dict]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    chosen = [b for b in benchmarks() if names is None or b.name in names]
    records: list[dict] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not show_progress, transient=True) as progress:
        task = progress.add_task("bench host", total=len(chosen))
        for bench in chosen:
            records += measure(bench, settings, lambda text: progress.update(task, description=text))
            progress.advance(task)
            if on_update is not None:
                on_update(records)
    return records


# ---------------------------------------------------------------- where the time goes


class _Identity(torch.autograd.Function):
    """The cheapest autograd node: what any op with a Python autograd.Function pays."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


def breakdown(device: torch.device, calls: int = 2000) -> list[dict]:
    """Where an RMSNorm call's host time goes, on a (64, 256) bf16 input: PyTorch's eager op, blockfuse's
    whole call, and its parts (the argument checks, the launcher's Python called directly and through the
    op dispatcher, one kernel launch through blockfuse's ``Kernel`` and through Triton's
    ``kernel[grid](...)``, one allocation, one Python autograd node). ``us`` per call, back to back."""
    import blockfuse
    from blockfuse.ops import launch, norm
    from blockfuse.runtime import use_triton

    x = torch.randn(64, 256, dtype=torch.bfloat16, device=device)
    if not use_triton(x):
        return []  # no kernels to launch here (a CPU without the interpreter)
    w = torch.randn(256, dtype=torch.bfloat16, device=device)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn_like(x)
    y, rstd = torch.empty_like(x), torch.empty(64, dtype=torch.float32, device=device)
    tuning = norm.TUNING
    tile = norm._tile(256, tuning.fwd_tile_elements, tuning.fwd_elements_per_warp, tuning.fwd_max_lanes,
                      tuning.tail_from_lanes)
    warps = tile.num_warps
    args = (x, None, w, None, y, None, None, rstd, None, 256, 0, 256, 0, 64, 256, 1e-6, 0.0, 1.0)
    constexprs = dict(IS_RMS=True, MODE=0, HAS_W=True, HAS_B=False, HAS_DROPOUT=0, CAST_BEFORE_WEIGHT=False,
                      ACTIVATION=0, STATS=True, **tile.constexprs(256), VEC=1, STAGES=0, EARLY_RESIDUAL=False,
                      WB_EVICT=tuning.fwd_wb_evict, THREADS=0)
    grid = (launch.cdiv(64, tile.block_m),)
    kernel = norm._fwd_kernel
    body_args = (x, w, None, None, None, 1e-6, 0, 0.0, True, False, 0, False)

    def backward(fn):
        def step():
            torch.autograd.grad(fn(), (xg, wg), dy, allow_unused=True)
        return step

    ways = {
        "F.rms_norm, no grad (PyTorch eager)": lambda: F.rms_norm(x, (256,), w, 1e-6),
        "blockfuse.rms_norm, no grad": lambda: blockfuse.rms_norm(x, w, 1e-6),
        "  argument checks": lambda: norm._check_norm_args(x, w, None, 1e-6, None, "pre", 0.0),
        "  launcher's Python, direct": lambda: norm._norm_fwd.body(*body_args),
        "  launcher through the op dispatcher": lambda: torch.ops.blockfuse.norm_fwd(*body_args),
        "  one launch: blockfuse Kernel": lambda: kernel(grid, *args, num_warps=warps, **constexprs),
        "  one launch: triton kernel[grid](...)": lambda: kernel.fn[grid](*args, num_warps=warps, **constexprs),
        "  one allocation: torch.empty_like": lambda: torch.empty_like(x),
        "F.rms_norm fwd+bwd (PyTorch eager)": backward(lambda: F.rms_norm(xg, (256,), wg, 1e-6)),
        "blockfuse.rms_norm fwd+bwd": backward(lambda: blockfuse.rms_norm(xg, wg, 1e-6)),
        "  an identity autograd.Function fwd+bwd (engine + node)": backward(lambda: _Identity.apply(xg)),
    }
    records = []
    for name, fn in ways.items():
        for _ in range(10):
            fn()
        n = calls if "fwd+bwd" not in name else max(1, calls // 4)
        samples = []
        for _ in range(7):
            if device.type == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            for _ in range(n):
                fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            samples.append((time.perf_counter() - began) / n * 1e6)
        t = timing.summarize(samples)
        records.append({"way": name, "us": t.median, "us_p20": t.p20, "us_p80": t.p80,
                        "fast_launch": launch.FAST_LAUNCH})
    return records


def profile(bench: OpBenchmark, settings: HostSettings, calls: int = 500, top: int = 30) -> str:
    """cProfile of blockfuse's eager forward+backward of ``bench`` (``top`` functions by own time)."""
    shape = bench.cpu_shapes[0]
    dtype = DTYPES[settings.dtype]
    inputs = bench.make_inputs(shape, dtype, settings.device)
    reference = Reference(bench, inputs, dtype)
    run_settings = Settings(dtype=settings.dtype, modes=("fwdbwd",), providers=("blockfuse",), shapes=None,
                            quick=True, device=settings.device)
    case = Case(bench, bench.providers["blockfuse"](), inputs, reference, run_settings)
    _, call, leaves = case.callable("fwdbwd")
    for _ in range(5):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        for tensor in leaves:
            tensor.grad = None
        call()
    if settings.device.type == "cuda":
        torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    head = f"# cProfile: blockfuse {bench.name} {list(shape)} {settings.dtype} fwd+bwd, {calls} calls\n"
    return head + text.getvalue()


# ---------------------------------------------------------------- report


def _index(records):
    return {(r["op"], r["mode"], r["provider"]): r for r in records}


def ratio(index, op, mode, provider, baseline) -> float | None:
    """``provider``'s us over ``baseline``'s (below 1: less host time)."""
    a, b = index.get((op, mode, provider)), index.get((op, mode, baseline))
    if not a or not b or a.get("us") is None or b.get("us") is None:
        return None
    return a["us"] / b["us"]


def targets(records: list[dict]) -> list[dict]:
    index = _index(records)
    checks = []
    for op in dict.fromkeys(r["op"] for r in records):
        for mode, provider, baseline, bound in TARGETS:
            value = ratio(index, op, mode, provider, baseline)
            if value is None:
                continue
            checks.append({"op": op, "mode": mode, "provider": provider, "baseline": baseline, "bound": bound,
                           "ratio": value, "status": "met" if value <= bound else "missed"})
    return checks


def _cell(record) -> str:
    if record is None:
        return "-"
    if record.get("error"):
        return "error"
    err = f" ({record['rel_err']:.1e})" if record.get("rel_err") is not None else ""
    return f"{record['us']:.1f} [{record['us_p20']:.1f}-{record['us_p80']:.1f}]{err}"


def markdown(meta: dict, records: list[dict], launches: list[dict] | None = None) -> str:
    device = meta.get("device")
    lines = [f"# Host time per call: {meta['card']}", "",
             f"torch {meta['torch']}, triton {meta['triton']}, Liger-Kernel {meta.get('liger_kernel')}, "
             f"{records[0]['dtype'] if records else ''}; blockfuse path: {meta['blockfuse_implementation']}; "
             f"git {meta.get('git_commit')}, source {meta.get('source_digest')}.", "",
             f"Command: `{meta.get('command', '')}`", ""]
    if device != "cuda":
        lines += ["**Measured on the CPU**: no GPU, so these are host times of the "
                  + ("Triton interpreter path" if meta["blockfuse_implementation"] == "triton-interpreter"
                     else "reference path (blockfuse's ops fall back to it)")
                  + "; they check the harness, not the GPU op path.", ""]
    lines += ["Microseconds per call, median [p20-p80] of back-to-back loops on the op's smallest shape (the GPU "
              "work is a few microseconds), and the relative error against the fp32 reference in parentheses "
              "(fwd: outputs; fwdbwd: input gradients). `compile` is torch.compile of the reference; "
              "`blockfuse-compile` is blockfuse's op inside torch.compile (default mode, no CUDA graphs).", ""]
    index = _index(records)
    providers = [p for p in PROVIDERS if any(r["provider"] == p for r in records)]
    for mode in MODES:
        rows = [op for op in dict.fromkeys(r["op"] for r in records) if any(k[0] == op and k[1] == mode
                                                                            for k in index)]
        if not rows:
            continue
        lines += [f"## {'forward (no grad)' if mode == 'fwd' else 'forward + backward'}", "",
                  "| op | shape | " + " | ".join(providers) + " | blockfuse / eager | blockfuse-compile / compile |",
                  "| --- | --- | " + " | ".join("---" for _ in providers) + " | --- | --- |"]
        for op in rows:
            shape = "x".join(map(str, next(r["shape"] for r in records if r["op"] == op)))
            cells = [_cell(index.get((op, mode, p))) for p in providers]
            eager = ratio(index, op, mode, "blockfuse", "eager")
            comp = ratio(index, op, mode, "blockfuse-compile", "compile")
            lines.append(f"| {op} | {shape} | " + " | ".join(cells) + f" | {_fmt(eager)} | {_fmt(comp)} |")
        lines.append("")
    checks = targets(records)
    if checks:
        met = sum(c["status"] == "met" for c in checks)
        lines += [f"## Targets ({met} of {len(checks)} met" + ("" if device == "cuda" else "; CPU: not meaningful")
                  + ")", "", "| op | mode | ratio | bound | status |", "| --- | --- | --- | --- | --- |"]
        for c in checks:
            lines.append(f"| {c['op']} | {c['mode']} | {c['provider']} / {c['baseline']} = {c['ratio']:.2f}x | "
                         f"<= {c['bound']}x | {c['status']} |")
        lines.append("")
    if launches:
        lines += ["## Where an RMSNorm call's host time goes ((64, 256) bf16)", "", "| what | us per call |",
                  "| --- | --- |"]
        for r in launches:
            lines.append(f"| {r['way']} | {r['us']:.2f} [{r['us_p20']:.2f}-{r['us_p80']:.2f}] |")
        lines += ["", f"`FAST_LAUNCH` (blockfuse's cached launch) is {'on' if launches[0]['fast_launch'] else 'off'} "
                  f"for triton {meta['triton']}.", ""]
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def write_plot(path: Path, meta: dict, records: list[dict]) -> bool:
    plt = writer.pyplot()
    if plt is None:
        return False
    index = _index(records)
    ops = list(dict.fromkeys(r["op"] for r in records))
    providers = [p for p in PROVIDERS if any(r["provider"] == p for r in records)]
    fig, axes = plt.subplots(1, len(MODES), figsize=(7 * len(MODES), 0.45 * len(ops) + 2), squeeze=False)
    width = 0.8 / max(1, len(providers))
    for ax, mode in zip(axes[0], MODES):
        for i, provider in enumerate(providers):
            values = [(index.get((op, mode, provider)) or {}).get("us") or 0.0 for op in ops]
            ax.barh([j + i * width for j in range(len(ops))], values, height=width, label=provider)
        ax.set_yticks([j + 0.4 - width / 2 for j in range(len(ops))], ops)
        ax.invert_yaxis()
        ax.set_xlabel("host us per call")
        ax.set_title(f"{'forward (no grad)' if mode == 'fwd' else 'forward + backward'}")
    axes[0][0].legend(loc="lower right", fontsize=8)
    return writer.save(fig, path, f"Host time per call, {writer.versions_title(meta)}")


def write_json(path: Path, meta: dict, records: list[dict], launches: list[dict] | None) -> None:
    writer.write_json(path, {"meta": meta, "records": records, "targets": targets(records), "launch": launches})
