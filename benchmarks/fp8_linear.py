"""FP8 linear layers (issue 18): a stack of Linear layers in bf16, blockfuse FP8 and torchao FP8, eager and
compiled: time, peak memory and relative error against fp32.

Run on the GPU (a few minutes on an H100 or H200, most of it compiling):
    PYTHONPATH=src python benchmarks/fp8_linear.py --out benchmarks/results/DIR
Smoke test on CPU (tiny shapes, Triton's interpreter; compiled providers left out unless --providers names them):
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/fp8_linear.py --device cpu --out /tmp/fp8

The model: ``--layers`` (4) x (QKV ``d -> 3d``, out ``d -> d`` on the first third of QKV's output in place
of attention, fc1 ``d -> ffn``, GELU (tanh), fc2 ``ffn -> d``), residual adds, biases; ``--tokens`` (16384)
rows of width ``--d`` (2048), ``--ffn`` 8192. Modes: ``inference`` (a forward under ``torch.no_grad``)
and ``training`` (forward + backward of the input and every parameter, gradients set to None before each
step, no optimizer). Providers (one model's weights, copied):

* ``bf16_eager``, ``bf16_compile``: ``nn.Linear`` in bf16, eager and ``torch.compile`` (default mode);
* ``blockfuse_fp8_{tensorwise,rowwise,delayed}_{eager,compile}``: ``blockfuse.fp8.convert(model, recipe)``
  (delayed: each layer's input and output-gradient scales from its amax history, updated by every call).
  NOTE: eagerly the weight casts are kept while the weights are unchanged (``weight_cache``); in
  ``training`` they are dropped before each step (``clear_weight_cache``), as an optimizer step would
  make them stale, so the figure includes the weight casts as a real step does. In ``inference`` they
  stay cached (what a served model gets). Compiled, the casts are made in the graph on every call;
* ``torchao_{tensorwise,rowwise}_{eager,compile}``: ``torchao.float8.convert_to_float8_training`` with
  ``Float8LinearConfig.from_recipe_name(recipe)``, when ``import torchao`` works.

Timing: ``triton.testing.do_bench`` (CUDA events, warm-up, the L2 flushed before each call; median).
Peak: the most memory one call allocates above what is allocated before it (weights, inputs, and for
blockfuse inference the cached weight casts already there). Relative error: ``||out - ref|| / ||ref||``
against the same model in fp32 on the same (bf16) input and output gradient; for training, the largest
over the input's and the parameters' gradients too.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from blockfuse.bench import timing
from blockfuse.bench.runner import environment, relative_error

MODES = ("inference", "training")
# The targets (issue 18), each (provider, baseline, mode, minimum speed-up of provider over baseline): the
# four speed-ups for tensorwise (eager and compiled) and delayed (eager: scales from the amax history, no amax pass
# before a cast), and tensorwise eager against torchao compiled.
_SPEEDUPS = [("bf16_compile", "inference", 1.4), ("torchao_tensorwise_compile", "inference", 1.1),
             ("bf16_compile", "training", 1.35), ("torchao_tensorwise_compile", "training", 1.1)]
TARGETS = ([(f"blockfuse_fp8_{provider}", *target) for provider in ("tensorwise_eager", "tensorwise_compile")
            for target in _SPEEDUPS]
           + [("blockfuse_fp8_tensorwise_eager", "torchao_tensorwise_compile", "training", 1.0)]
           + [("blockfuse_fp8_delayed_eager", *target) for target in _SPEEDUPS])


class LinearStack(nn.Module):
    """``layers`` x (QKV, out, fc1, GELU, fc2) with residual adds; attention replaced by QKV's first third."""

    def __init__(self, layers: int, d: int, ffn: int):
        super().__init__()
        self.d = d
        self.layers = nn.ModuleList(
            nn.ModuleDict({"qkv": nn.Linear(d, 3 * d), "out": nn.Linear(d, d), "fc1": nn.Linear(d, ffn),
                           "fc2": nn.Linear(ffn, d)}) for _ in range(layers))

    def forward(self, x):  # (tokens, d)
        for layer in self.layers:
            x = x + layer["out"](layer["qkv"](x)[:, : self.d])
            x = x + layer["fc2"](F.gelu(layer["fc1"](x), approximate="tanh"))
        return x


def _torchao():
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except Exception as error:  # noqa: BLE001  (any import failure: the providers are left out, with why)
        return None, f"{type(error).__name__}: {error}"
    return (Float8LinearConfig, convert_to_float8_training), None


def providers(base: nn.Module, names, device) -> dict:
    """Name -> a function building the provider's model (built one at a time, freed after)."""
    import blockfuse

    def bf16(compiled):
        def build():
            model = copy.deepcopy(base)
            return torch.compile(model) if compiled else model
        return build

    def blockfuse_fp8(recipe, compiled):
        def build():
            model = blockfuse.fp8.convert(copy.deepcopy(base), recipe=recipe)
            return torch.compile(model) if compiled else model
        return build

    table = {"bf16_eager": bf16(False), "bf16_compile": bf16(True)}
    for recipe in ("tensorwise", "rowwise", "delayed"):
        for compiled in (False, True):
            table[f"blockfuse_fp8_{recipe}_{'compile' if compiled else 'eager'}"] = blockfuse_fp8(recipe, compiled)
    torchao, _ = _torchao()
    if torchao is not None:
        config_class, convert = torchao

        def torchao_fp8(recipe, compiled):
            def build():
                model = convert(copy.deepcopy(base), config=config_class.from_recipe_name(recipe))
                return torch.compile(model) if compiled else model
            return build

        for recipe in ("tensorwise", "rowwise"):
            for compiled in (False, True):
                table[f"torchao_{recipe}_{'compile' if compiled else 'eager'}"] = torchao_fp8(recipe, compiled)
    if names:
        table = {name: build for name, build in table.items() if name in names}
    elif device.type == "cpu":  # compiling on CPU in the interpreter takes minutes: ask for it by name
        table = {name: build for name, build in table.items() if not name.endswith("compile")}
    return table


def _clear_fp8_caches(model: nn.Module) -> None:
    from blockfuse.ops.fp8 import clear_weight_cache

    for parameter in model.parameters():
        clear_weight_cache(parameter)


def _errors(model, x, dy, reference, mode) -> dict:
    out_ref, grads_ref = reference
    if mode == "inference":
        with torch.no_grad():
            return {"rel_error": relative_error(model(x), out_ref)}
    leaf = x.detach().requires_grad_()
    parameters = list(model.parameters())
    out = model(leaf)
    grads = torch.autograd.grad(out, [leaf, *parameters], dy)
    return {"rel_error": relative_error(out, out_ref),
            "grad_rel_error": max(relative_error(g, r) for g, r in zip(grads, grads_ref))}


def _reference(base, x, dy):
    """The fp32 model's output and gradients (input first, then the parameters) on the same bf16 data."""
    model = copy.deepcopy(base).float()
    leaf = x.detach().float().requires_grad_()
    out = model(leaf)
    grads = torch.autograd.grad(out, [leaf, *model.parameters()], dy.float())
    return out.detach(), [g.detach() for g in grads]


def measure(name, build, x, dy, reference, device, quick, profile=False) -> list[dict]:
    rows = []
    try:
        model = build()
    except Exception as error:  # noqa: BLE001  (a provider that cannot be built is recorded; the others run)
        return [{"provider": name, "mode": mode, "error": f"{type(error).__name__}: {error}"[:300]} for mode in MODES]
    fp8_eager = name.startswith("blockfuse") and name.endswith("eager")
    parameters = list(model.parameters())
    train_x = x.detach().requires_grad_()
    for mode in MODES:
        row = {"provider": name, "mode": mode}
        try:
            if mode == "inference":
                def step():
                    with torch.no_grad():
                        model(x)
                before = None
            else:
                def step():
                    model(train_x).backward(dy)

                def before():
                    train_x.grad = None
                    for p in parameters:
                        p.grad = None
                    if fp8_eager:
                        _clear_fp8_caches(model)  # what an optimizer step does to them
            row.update(time_step(step, before, device, quick))
            row.update(_errors(model, x, dy, reference, mode))
            if profile and mode == "training" and device.type == "cuda":
                row["profile"] = profile_step(step, before, device)
                print(f"  {name} training step, GPU ms by kernel class: {row['profile']['gpu_ms_by_class']}")
        except Exception as error:  # noqa: BLE001
            first_line = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
            row["error"] = f"{type(error).__name__}: {first_line}"
        rows.append(row)
        print(format_row(row), flush=True)
    del model, parameters
    return rows


# Kernel classes of a profiled step, first match wins (lower-case substrings of the kernel's name).
KERNEL_CLASSES = (
    ("fp8 GEMM", ("e4m3", "e5m2", "f8", "fp8_gemm", "scaled_mm")),
    ("GEMM", ("gemm", "nvjet", "cutlass", "sm90_xmma", "cublas")),
    ("quantize / amax", ("quant", "amax", "scale", "_cast")),
    ("GELU", ("gelu",)),
    ("reduction (bias grad)", ("reduce", "sum")),
    ("copy / transpose", ("copy", "transpose", "clone")),
)


def kernel_class(name: str) -> str:
    lowered = name.lower()
    for label, needles in KERNEL_CLASSES:
        if any(n in lowered for n in needles):
            return label
    return "other"


def profile_step(step, before, device) -> dict:
    """One training step under torch.profiler (after the timed ones): GPU time per kernel class and the top
    kernels, so a step's time can be split into GEMMs and the passes around them."""
    from torch.profiler import ProfilerActivity, profile

    before()
    step()
    torch.cuda.synchronize(device)
    before()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize(device)
    classes, kernels = {}, {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = event.time_range.elapsed_us()
        label = kernel_class(event.name)
        classes[label] = classes.get(label, 0.0) + us / 1e3
        kernels[event.name] = kernels.get(event.name, 0.0) + us / 1e3
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:12]
    return {"gpu_ms_by_class": {k: round(v, 3) for k, v in sorted(classes.items(), key=lambda kv: -kv[1])},
            "top_kernels": [{"name": k[:120], "class": kernel_class(k), "ms": round(v, 3)} for k, v in top]}


def time_step(step, before, device, quick) -> dict:
    warmup_ms, rep_ms = (50, 200) if quick else (200, 1000)
    if device.type != "cuda":
        def once():
            if before is not None:
                before()
            step()
        return {"ms": round(timing.time_cpu(once, warmup=1, rep_ms=rep_ms, min_reps=2, max_reps=5).median, 3)}
    if before is None:
        measured = timing.time_cuda(step, warmup_ms=warmup_ms, rep_ms=rep_ms)
    else:
        # The untimed setup before each timed step (gradients to None, stale FP8 casts dropped).
        measured = timing.time_cuda(lambda state: step(), setup=before, warmup_ms=warmup_ms, rep_ms=rep_ms)
    if before is not None:
        before()
    peak = timing.peak_memory_mib(step)
    return {"ms": round(measured.median, 3), "p20_ms": round(measured.p20, 3), "p80_ms": round(measured.p80, 3),
            "peak_mib": round(peak, 1)}


def format_row(row) -> str:
    if "error" in row:
        return f"{row['provider']:34} {row['mode']:9} ERROR {row['error']}"
    grad = f" grad_err={row['grad_rel_error']:.2e}" if "grad_rel_error" in row else ""
    peak = f" peak={row['peak_mib']} MiB" if "peak_mib" in row else ""
    return f"{row['provider']:34} {row['mode']:9} {row['ms']:9.3f} ms err={row['rel_error']:.2e}{grad}{peak}"


def markdown(record) -> str:
    env, shape = record["environment"], record["shape"]
    rows = [r for r in record["rows"] if "ms" in r]
    ms = {(r["provider"], r["mode"]): r["ms"] for r in rows}
    lines = [f"# FP8 linear stack: {shape['layers']} x (QKV, out, fc1, GELU, fc2), bf16 data", "",
             f"Shape: {shape['tokens']} tokens, d {shape['d']}, FFN {shape['ffn']}. Card: {env['card']} (compute "
             f"capability {env['compute_capability']}), torch {env['torch']}, triton {env['triton']}, CUDA "
             f"{env['cuda']}, torchao {record['torchao'] or 'not importable: ' + str(record['torchao_error'])}, "
             f"commit {env['git_commit']} (sources {env['source_digest']}), {env['date']}.", "",
             f"Command: `{record['command']}`", "",
             "ms: median of do_bench (CUDA events, L2 flushed). vs bf16 compile / vs torchao: the baseline's time "
             "over this one (above 1 is faster), same mode, same process and card. peak: MiB one call allocates "
             "above what is allocated before it. rel err: against the fp32 model on the same inputs (training: "
             "output / the largest gradient error).", "",
             "| provider | mode | ms | vs bf16 compile | vs torchao tensorwise compile | peak MiB | rel err | "
             "grad rel err |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in record["rows"]:
        if "error" in r:
            lines.append(f"| {r['provider']} | {r['mode']} | error: {r['error']} | | | | | |")
            continue
        ratios = []
        for baseline in ("bf16_compile", "torchao_tensorwise_compile"):
            base = ms.get((baseline, r["mode"]))
            ratios.append(f"{base / r['ms']:.2f}x" if base else "")
        grad = f"{r['grad_rel_error']:.2e}" if "grad_rel_error" in r else ""
        lines.append(f"| {r['provider']} | {r['mode']} | {r['ms']:.3f} | {ratios[0]} | {ratios[1]} | "
                     f"{r.get('peak_mib', '')} | {r['rel_error']:.2e} | {grad} |")
    lines += ["", "## The issue's targets", "", "| provider | over | mode | target | measured | met |",
              "| --- | --- | --- | --- | --- | --- |"]
    for provider, baseline, mode, target in TARGETS:
        mine, base = ms.get((provider, mode)), ms.get((baseline, mode))
        if mine is None or base is None:
            lines.append(f"| {provider} | {baseline} | {mode} | {target}x | not measured | |")
            continue
        lines.append(f"| {provider} | {baseline} | {mode} | {target}x | {base / mine:.2f}x | "
                     f"{'yes' if base / mine >= target else 'no'} |")
    peaks = {(r["provider"], r["mode"]): r.get("peak_mib") for r in rows}
    for provider in dict.fromkeys(target[0] for target in TARGETS):  # (each target's provider, in order)
        mine, base = peaks.get((provider, "training")), peaks.get(("torchao_tensorwise_compile", "training"))
        if mine is not None and base is not None:
            lines.append(f"| {provider} peak MiB | torchao_tensorwise_compile | training | <= | {mine} vs {base} | "
                         f"{'yes' if mine <= base else 'no'} |")
    return "\n".join(lines) + "\n"


def run(args) -> dict:
    device = torch.device(args.device)
    cpu = device.type == "cpu"
    tokens, d, ffn, layers = (64, 64, 128, 2) if cpu else (args.tokens, args.d, args.ffn, args.layers)
    torch.manual_seed(0)
    base = LinearStack(layers, d, ffn).to(device=device, dtype=torch.bfloat16)
    generator = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(tokens, d, generator=generator).to(device=device, dtype=torch.bfloat16)
    dy = torch.randn(tokens, d, generator=generator).to(device=device, dtype=torch.bfloat16)
    reference = _reference(base, x, dy)
    began = time.perf_counter()
    rows = []
    for name, build in providers(base, args.providers, device).items():
        rows += measure(name, build, x, dy, reference, device, args.quick, args.profile)
        torch._dynamo.reset()
        if not cpu:
            torch.cuda.empty_cache()
    torchao, torchao_error = _torchao()
    torchao_version = None
    if torchao is not None:
        import torchao as torchao_module

        torchao_version = getattr(torchao_module, "__version__", "unknown")
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    return {"environment": environment(device), "command": command,
            "shape": {"tokens": tokens, "d": d, "ffn": ffn, "layers": layers}, "dtype": "bf16",
            "torchao": torchao_version, "torchao_error": torchao_error,
            "seconds": round(time.perf_counter() - began, 1), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke test, tiny shapes)")
    parser.add_argument("--out", type=Path, required=True, help="folder for fp8_linear.json and fp8_linear.md")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--d", type=int, default=2048)
    parser.add_argument("--ffn", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--providers", nargs="*", help="only these providers (see the module docstring)")
    parser.add_argument("--quick", action="store_true", help="shorter timing loops")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one training step of each provider: GPU time by kernel class")
    args = parser.parse_args()
    record = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fp8_linear.json").write_text(json.dumps(record, indent=1) + "\n")
    (args.out / "fp8_linear.md").write_text(markdown(record))
    print(f"wrote {args.out / 'fp8_linear.json'} and {args.out / 'fp8_linear.md'}")


if __name__ == "__main__":
    main()
