"""``blockfuse bench``: ``ops`` (each fused op against its peers), ``block`` and ``model`` (every way to run
a block or a stack of blocks; ``model hf-llama``: a Hugging Face Llama training step and generation, HF eager,
torch.compile, Liger-Kernel and ``blockfuse.patch``; ``model hf-siglip2``: a Hugging Face SigLIP-2 vision model,
as built and patched, eager and compiled)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import shlex
import time
from pathlib import Path

from blockfuse.analyze.targets import CPU_SHAPE
from blockfuse.bench.runner import declared_ops
from blockfuse.cliutil import UsageError, default_out, format_shape, parse_shape, parse_shapes

CPU_MESSAGE = (
    "no CUDA: the fused ops run their pure-PyTorch reference on the CPU (TRITON_INTERPRET=1 runs their Triton "
    "kernels in Triton's interpreter instead); the numbers check the harness, not GPU speed"
)
INTERPRETER_MESSAGE = (
    "no CUDA: the fused ops run their Triton kernels in Triton's CPU interpreter; the numbers check the harness, "
    "not the speed"
)
OUT_HELP = "output folder (default: ./blockfuse-results/<date>-<card>{suffix}/)"


def add_bench_parser(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks: speed, memory and numerical error against peers")
    kinds = bench.add_subparsers(dest="bench_command", required=True)
    ops = kinds.add_parser(
        "ops",
        help="time each op against PyTorch eager, torch.compile and Liger-Kernel",
        description="Time ops x shapes x providers x modes; write ops.json, ops.md and ops.png.",
    )
    ops.add_argument(
        "--op",
        dest="ops",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="ops to run (default: every op declared default; --list shows them all)",
    )
    ops.add_argument("--shapes", nargs="+", metavar="SHAPE",
                     help="shapes, sizes separated by 'x' or ',', e.g. 16384x4096 2048,1024 (the older "
                     "16384x4096,2048x1024 also works; default: each op's own, small ones on the CPU)")
    ops.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    ops.add_argument("--modes", help="comma-separated from fwd,bwd,fwdbwd (default: all; --sweep: fwd,fwdbwd)")
    ops.add_argument(
        "--providers",
        help="comma-separated from eager,reference,compile,liger,blockfuse "
        "(default: eager,compile,liger,blockfuse on CUDA, --sweep: compile,liger,blockfuse; eager,reference,blockfuse "
        "on CPU)",
    )
    ops.add_argument("--out", type=Path, help=OUT_HELP.format(suffix=""))
    ops.add_argument("--quick", action="store_true",
                     help="the first shape of each op only, short timing (--sweep: its quick grid)")
    ops.add_argument("--list", action="store_true",
                     help="list the declared ops, their shapes (without CUDA: the small CPU ones) and providers, "
                     "and exit (with --sweep: the sweep's grid and cells)")
    ops.add_argument("--sweep", action="store_true",
                     help="every op over the widths and head sizes real models use (--list shows the grid): "
                     "sweep.json, sweep.md and a heat map per op; --quick: a smaller grid, short timing, a budget")
    from blockfuse.bench import sweep

    for option, what in (("--widths", "row widths (hidden sizes)"), ("--rows", "row counts"),
                         ("--head-dims", "RoPE head sizes"), ("--seqs", "RoPE sequence lengths")):
        ops.add_argument(option, metavar="N,N,...",
                         help=f"--sweep: these {what}, comma-separated, in place of the grid's (shapes off the grid: "
                         "e.g. --widths 1280,2304,5504 --rows 16384)")
    ops.add_argument("--budget", type=float, metavar="SECONDS",
                     help="--sweep: start no cell after this many seconds, shared among the ops (default: "
                     f"{sweep.QUICK_BUDGET_S:g} with --quick, none otherwise; inf: none)")
    ops.add_argument("--warm-jobs", type=int, default=0, metavar="N",
                     help="before measuring, N spawned processes call every provider of every cell (--sweep; "
                     "without it every op and shape) once in each mode, untimed, filling the on-disk compile "
                     "caches; the measuring, one cell at a time as without, then hits them (default: 0, off). "
                     "Measured on an H200 (--sweep --quick, rms_norm and layer_norm, 14 cells, empty caches): "
                     "69.8 s without; with N=8 a 37 s warm-up, then 19 s measuring (benchmarks/results/sweep/"
                     "2026-11-28-h200-warm-up)")
    ops.set_defaults(func=run_ops)

    host = kinds.add_parser(
        "host",
        help="host time per call of every op (tiny inputs): eager and inside torch.compile, against PyTorch, "
        "torch.compile of the reference and Liger-Kernel",
        description="Time each op's calls on tiny inputs, where the host's time is the cost; write host.json, "
        "host.md, host.png (and with --profile a cProfile of one op).",
    )
    host.add_argument("--op", dest="ops", action="extend", nargs="+", metavar="NAME",
                      help="ops to run (default: every op)")
    host.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    host.add_argument("--modes", default="fwd,fwdbwd", help="comma-separated from fwd,fwdbwd")
    host.add_argument("--providers", help="comma-separated from eager,compile,liger,blockfuse,blockfuse-compile "
                      "(default: all)")
    host.add_argument("--profile", metavar="OP", help="also write a cProfile of blockfuse's eager fwd+bwd of OP")
    host.add_argument("--quick", action="store_true", help="short timing")
    host.add_argument("--out", type=Path, help=OUT_HELP.format(suffix="-host"))
    host.set_defaults(func=run_host)

    from blockfuse.bench import block, distributed, hf_families, hf_llama, hf_siglip2

    for kind, text in (("block", "one layer of a preset"), ("model", "a stack of a preset's layers")):
        model = kind == "model"
        parser = kinds.add_parser(
            kind,
            help=f"{text}: eager (SDPA, and attention materialized as Hugging Face's eager attention), each "
            "torch.compile mode, surgical compile, fused, fused + torch.compile"
            + ("; or hf-llama: a Hugging Face Llama training step and generation against Liger-Kernel; or "
               "hf-siglip2: a Hugging Face SigLIP-2 vision model" if model else ""),
            description=f"Time {text} with every provider (same weights); write {kind}-NAME.json, .csv, .md, .png."
            + (" NAME hf-llama: a Hugging Face LlamaModel training step (HF eager, torch.compile, Liger-Kernel and "
               "blockfuse.patch, each also compiled); with --modes loss, LlamaForCausalLM's training step with the LM "
               "head and loss (vocab 128256; Liger with its fused linear cross-entropy, blockfuse.patch with "
               "loss=True); with --modes prefill,decode, LlamaForCausalLM's greedy generation (each also with a "
               "static KV cache under torch.compile); with --family, another causal-LM family in Llama's place; "
               "NAME hf-siglip2: a Hugging Face "
               "Siglip2VisionModel as built and patched, each also compiled; without CUDA tiny models."
               if model else ""),
        )
        parser.add_argument("name", help="preset: reordered, standard, olmo2-1b, siglip2, te-4layer"
                            + ("; or hf-llama, hf-siglip2" if model else ""))
        parser.add_argument("--shape", help="batch x seq x d_model, e.g. 4x2048x1024 or 4,2048,1024 (default: the "
                            f"preset's on CUDA, {format_shape(CPU_SHAPE)} on the CPU: the preset shrunk to "
                            f"width {CPU_SHAPE[-1]})"
                            + ("; hf-llama: batch x seq (default: 2x4096; tiny: 2x32); hf-siglip2: batch x patches "
                               "(patches a square; default: 64x256; tiny: 3x16)" if model else ""))
        parser.add_argument("--layers", type=int, help="layers (block: 1; model: the preset's"
                            + ("; hf-llama, hf-siglip2: 4, tiny: 2)" if model else ")"))
        parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
        parser.add_argument("--providers", help=f"comma-separated from {','.join(block.PROVIDERS)} (default: all on "
                            f"CUDA, {','.join(block.CPU_PROVIDERS)} on the CPU; --fast drops max-autotune; "
                            f"{block.MATERIALIZED_ATTENTION}: eager with attention materialized, HF eager style)"
                            + (f"; hf-llama: from {','.join(hf_llama.PROVIDERS)} (default: all that run a mode "
                               f"of --modes); hf-siglip2: from {','.join(hf_siglip2.PROVIDERS)} (default: all); "
                               f"with --parallel: from {','.join(distributed.PROVIDERS)} (default: all on CUDA, "
                               f"{','.join(distributed.CPU_PROVIDERS)} on the CPU)" if model else ""))
        parser.add_argument("--modes", help="comma-separated from infer,fwd,bwd,fwdbwd (default: infer,fwd,fwdbwd)"
                            + (f"; hf-llama: from {','.join(hf_llama.MODES)} (default: "
                               f"{','.join(hf_llama.DEFAULT_MODES)}); hf-siglip2: from {','.join(hf_siglip2.MODES)} "
                               "(default: all)" if model else ""))
        parser.add_argument("--fast", action="store_true",
                            help="skip the max-autotune providers (minutes of autotuning)")
        parser.add_argument("--quick", action="store_true", help="short timing")
        parser.add_argument("--compile-times", nargs="?", const="all", metavar="PROVIDERS",
                            help="also time each compiled provider's (or these comma-separated ones') first call "
                            "with cold and with warm caches")
        parser.add_argument("--linear", default="bf16", metavar="KIND",
                            help="the Linear layers: bf16 (default), fp8 (tensorwise) or fp8:rowwise / fp8:tensorwise "
                            "(blockfuse.fp8.convert on every provider's copy, before any compile; "
                            "fp8:tensorwise+recompute: the MLP's pre-activation recomputed, not kept; "
                            "fp8:delayed: tensorwise with x's and the gradient's scales from amax histories), or "
                            "torchao:tensorwise / torchao:rowwise (torchao's float8 training, the baseline; "
                            "eager, compile and surgical providers)")
        if model:
            parser.add_argument("--tiny", action="store_true",
                                help="hf-llama, hf-siglip2 only: the tiny model (2 layers, hidden 64), as without CUDA")
            parser.add_argument("--family", metavar="FAMILY",
                                help=f"hf-llama only: the causal-LM family built in Llama's place, at the same sizes, "
                                f"one of {','.join(hf_families.FAMILIES)} (default: llama; gemma3: its text model); "
                                "writes model-hf-FAMILY.*")
            parser.add_argument("--prompt", type=int, help=f"hf-llama generation: prompt tokens (default: "
                                f"{hf_llama.FULL.prompt}; tiny: {hf_llama.TINY.prompt})")
            parser.add_argument("--new-tokens", type=int, help=f"hf-llama generation: new tokens, at least 2 "
                                f"(default: {hf_llama.FULL.new_tokens}; tiny: {hf_llama.TINY.new_tokens})")
            distributed.add_arguments(parser)  # --nproc N --parallel fsdp|tp|fsdp+tp: the multi-GPU training step
        parser.add_argument("--out", type=Path, help=OUT_HELP.format(suffix=""))
        parser.set_defaults(func=run_block, bench_kind=kind)


def _parse_list(text: str, allowed: tuple[str, ...], option: str) -> tuple[str, ...]:
    """Comma-separated names, each one of ``allowed``; raises :class:`UsageError` naming ``option``."""
    items = tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    unknown = [item for item in items if item not in allowed]
    if unknown:
        raise UsageError(f"unknown {option} {','.join(unknown)}; choose from {','.join(allowed)}")
    if not items:
        raise UsageError(f"{option}: expected comma-separated names from {','.join(allowed)}, got {text!r}")
    return items


def run_ops(args: argparse.Namespace) -> int:
    import torch

    from blockfuse.bench import report, runner, timing
    from blockfuse.bench.spec import CPU_PROVIDERS, CUDA_PROVIDERS, MODES, PROVIDERS

    declared = {b.name: b for b in declared_ops()}
    if args.warm_jobs < 0:
        raise UsageError(f"--warm-jobs: expected 0 (off) or more processes, got {args.warm_jobs}")
    if args.sweep:
        return run_sweep(args, declared)
    if args.budget is not None:
        raise UsageError("--budget is for --sweep")
    for option, field in GRID_OPTIONS.items():
        if getattr(args, field) is not None:
            raise UsageError(f"{option} is for --sweep (the op benchmark takes --shapes)")
    if args.list:
        cuda = torch.cuda.is_available()
        for bench in declared.values():
            shapes = ", ".join(format_shape(shape) for shape in (bench.shapes if cuda else bench.cpu_shapes))
            flag = "" if bench.default else "  (only with --op)"
            print(f"{bench.name:<18} {shapes:<40} {' '.join(bench.providers)}{flag}")
        return 0
    names = list(dict.fromkeys(args.ops or [n for n, b in declared.items() if b.default]))
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise UsageError(f"unknown --op {' '.join(unknown)}; choose from {' '.join(declared)}")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    default_providers = ",".join(CUDA_PROVIDERS if cuda else CPU_PROVIDERS)
    settings = runner.Settings(
        dtype=args.dtype,
        modes=_parse_list(args.modes or ",".join(MODES), MODES, "--modes"),
        providers=_parse_list(args.providers or default_providers, PROVIDERS, "--providers"),
        shapes=tuple(parse_shapes(args.shapes, option="--shapes")) or None,
        quick=args.quick,
        device=device,
    )

    meta = runner.environment(device)
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        print(INTERPRETER_MESSAGE if interpreted else CPU_MESSAGE)
        if settings.shapes is None:
            print("shapes: each op's small CPU shapes (--list shows them; --shapes picks others)")
    out = args.out or default_out(meta["card"])
    out.mkdir(parents=True, exist_ok=True)
    meta["command"] = _command(args, names, settings, out, warm_jobs=args.warm_jobs)
    meta["settings"] = {
        "ops": names,
        "dtype": settings.dtype,
        "modes": list(settings.modes),
        "providers": list(settings.providers),
        "shapes": [list(s) for s in settings.shapes] if settings.shapes else None,
        "quick": settings.quick,
    }

    began = time.perf_counter()
    copy = None
    if cuda:
        copy = timing.copy_bandwidth(warmup_ms=5 if args.quick else 25, rep_ms=20 if args.quick else 100)
        print(f"{meta['card']}: device-to-device copy {copy['gbps']:.0f} GB/s")

    def write(records):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        report.write_json(out / "ops.json", meta, copy, records)
        report.write_markdown(out / "ops.md", meta, copy, records)

    benchmarks = [declared[n] for n in names]
    meta["warm_up"] = None
    if args.warm_jobs:
        cells = [(bench.name, shape) for bench in benchmarks for shape in runner.shapes_of(bench, settings)]
        meta["warm_up"] = runner.warm_up(cells, settings, args.warm_jobs)
    before = runner.cache_counts()
    records = runner.run(benchmarks, settings, copy["gbps"] if copy else None, on_update=write)
    meta["compile_cache"] = {name: count - before[name] for name, count in runner.cache_counts().items()}
    write(records)
    report.write_plot(out / "ops.png", meta, copy, records)
    report.print_table(records, copy)
    for target in report.targets(records, device.type):
        print(f"{target['status']:>6}: {target['text']}")
    failed = [r for r in records if r.get("error")]
    _print_compile_caches(meta)
    print(
        f"{len(records)} measurements, {len(failed)} failed, {meta['elapsed_s']} s; wrote {out}/ops.{{json,md,png}}"
    )
    # Exit 1 when blockfuse itself failed somewhere; a peer that fails (say, Liger missing) is only reported.
    return 1 if any(r["provider"] == "blockfuse" for r in failed) else 0


# The sweep's grid options: each replaces one field of the grid (bench.sweep.Grid).
GRID_OPTIONS = {"--widths": "widths", "--rows": "rows", "--head-dims": "head_dims", "--seqs": "seqs"}


def _grid_sizes(option: str, text: str) -> tuple[int, ...]:
    """``text`` of a grid option as positive sizes; the error names the option."""
    try:
        sizes = tuple(int(word) for word in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise UsageError(f"{option}: expected comma-separated sizes of 1 or more (e.g. 1280,2304), got {text!r}")
    return tuple(dict.fromkeys(sizes))


def _grid_fields(args) -> dict[str, tuple[int, ...]]:
    """The grid options given, parsed: grid field -> sizes."""
    return {field: _grid_sizes(option, getattr(args, field))
            for option, field in GRID_OPTIONS.items() if getattr(args, field) is not None}


def _sweep_grid(args, grid):
    """``grid`` with the fields that the grid options give replaced."""
    import dataclasses

    return dataclasses.replace(grid, **_grid_fields(args))


def _grid_words(args) -> list[str]:
    """The grid options as given, for the command that reproduces a sweep."""
    options = {field: option for option, field in GRID_OPTIONS.items()}
    return [word for field, sizes in _grid_fields(args).items() for word in (options[field], ",".join(map(str, sizes)))]


def _command(args, names, settings, out, *, sweep=False, budget_s=None, warm_jobs=0, grid=()) -> str:
    """The command that reproduces this run (``sweep``: a sweep's, with its budget), every choice spelled out."""
    words = ["blockfuse", "bench", "ops"] + ["--sweep"] * sweep + ["--op", *names]
    if settings.shapes:
        words += ["--shapes", *(format_shape(shape) for shape in settings.shapes)]
    words += ["--dtype", settings.dtype, "--modes", ",".join(settings.modes)]
    words += ["--providers", ",".join(settings.providers)]
    if settings.quick:
        words.append("--quick")
    words += list(grid)
    if sweep:
        words += ["--budget", "inf" if budget_s is None else f"{budget_s:g}"]
    if warm_jobs:
        words += ["--warm-jobs", str(warm_jobs)]
    words += ["--out", str(out)]
    return shlex.join(words)


def _print_compile_caches(meta: dict) -> None:
    """The log lines of the warm-up (``--warm-jobs``) and of the compile caches while measuring."""
    warm = meta.get("warm_up")
    if warm:
        too_large = f", {warm['too_large']} too large for a worker" if "too_large" in warm else ""
        print(f"warm-up: {warm['jobs']} jobs, {warm['warmed']}/{warm['cells']} cells warmed{too_large}, "
              f"{len(warm['failures'])} failures, {warm['elapsed_s']} s")
    counts = meta["compile_cache"]
    print(f"compile caches while measuring: FX graph {counts['fxgraph_cache_hit']} hits, "
          f"{counts['fxgraph_cache_miss']} misses; AOTAutograd {counts['autograd_cache_hit']} hits, "
          f"{counts['autograd_cache_miss']} misses")


def run_sweep(args: argparse.Namespace, declared: dict) -> int:
    """``blockfuse bench ops --sweep``: every op over the widths and head sizes real models use (``bench.sweep``)."""
    import math

    import torch

    from blockfuse.bench import runner, sweep
    from blockfuse.bench.spec import CPU_PROVIDERS, MODES, PROVIDERS

    swept = {name: bench for name, bench in declared.items() if sweep.kind_of(bench)}
    if args.list:
        print(sweep.plan_text(list(declared.values())))
        if _grid_words(args):  # (the grid options' grid, for the ops named or every swept one)
            grid = _sweep_grid(args, sweep.grid_for(torch.cuda.is_available(), args.quick))
            chosen = [swept[name] for name in dict.fromkeys(args.ops or swept) if name in swept]
            cells = sum(len(sweep.cells_of(bench, grid)) for bench in chosen)
            print(f"with {' '.join(_grid_words(args))}: {sweep.describe(grid)}; {cells} cells of "
                  f"{', '.join(bench.name for bench in chosen)}")
        return 0
    if args.shapes:
        raise UsageError("--sweep runs its own grid (--sweep --list shows it); --shapes is for the op benchmark")
    names = list(dict.fromkeys(args.ops or swept))
    unknown = [n for n in names if n not in swept]
    if unknown:
        raise UsageError(f"--sweep: unknown or not swept --op {' '.join(unknown)}; choose from {' '.join(swept)}")
    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget: expected seconds above 0 (inf: none), got {args.budget:g}")
    budget = args.budget if args.budget is not None else (sweep.QUICK_BUDGET_S if args.quick else None)
    budget = None if budget is not None and math.isinf(budget) else budget
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    settings = runner.Settings(
        dtype=args.dtype,
        modes=_parse_list(args.modes or ",".join(sweep.DEFAULT_MODES), MODES, "--modes"),
        providers=_parse_list(args.providers or ",".join(sweep.CUDA_PROVIDERS if cuda else CPU_PROVIDERS),
                              PROVIDERS, "--providers"),
        shapes=None,
        quick=args.quick,
        device=device,
    )
    grid = _sweep_grid(args, sweep.grid_for(cuda, args.quick))
    meta = runner.environment(device)
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        print(INTERPRETER_MESSAGE if interpreted else CPU_MESSAGE)
    out = args.out or default_out(meta["card"], "-sweep")
    out.mkdir(parents=True, exist_ok=True)
    meta["command"] = _command(args, names, settings, out, sweep=True, budget_s=budget, warm_jobs=args.warm_jobs,
                               grid=_grid_words(args))
    meta["settings"] = {"ops": names, "dtype": settings.dtype, "modes": list(settings.modes),
                        "providers": list(settings.providers), "quick": settings.quick}
    benchmarks = [swept[n] for n in names]
    total = sum(len(sweep.cells_of(bench, grid)) for bench in benchmarks)
    print(f"sweep: {len(benchmarks)} ops, {total} cells; {sweep.describe(grid)}"
          + (f"; budget {budget:g} s" if budget is not None else ""))
    # NOTE: no progress bar on the CPU: its refresh thread holds one of the cores the timed code needs.
    cells, files = sweep.run_and_write(benchmarks, settings, grid, meta, out, budget_s=budget,
                                       warm_jobs=args.warm_jobs, show_progress=cuda)
    for check in sweep.targets(cells, device.type):
        if check["op"] == "all":  # each op's verdict is in sweep.md
            print(f"{check['status']:>6}: {check['passed']}/{check['evaluated']} cell-modes pass: {check['text']}")
    skipped = sum(1 for cell in cells if cell["skipped"])
    failed = [cell for cell in cells if any(entry.get("error") for m in cell["modes"].values()
                                            for entry in m["providers"].values())]
    maps = sum(1 for path in files if path.suffix == ".png")
    _print_compile_caches(meta)
    print(f"{len(cells)} cells, {skipped} skipped, {len(failed)} with a failed provider, {meta['elapsed_s']} s; "
          f"wrote {out}/sweep.{{json,md}} and {maps} heat maps (sweep-OP.png)")
    # Exit 1 when blockfuse itself failed somewhere; a peer that fails (say, Liger missing) is only reported.
    return 1 if any(m["providers"].get("blockfuse", {}).get("error") for cell in cells
                    for m in cell["modes"].values()) else 0


def _parse_dims(text: str, names: tuple[str, ...], example: str) -> tuple[int, ...]:
    """``--shape`` of ``len(names)`` sizes; the error names them and gives ``example``."""
    try:
        return parse_shape(text, option="--shape", dims=(len(names),))
    except UsageError as error:
        raise UsageError(f"{error} ({' x '.join(names)}, e.g. {example})") from None


def _compile_times(value: str | None, providers) -> tuple[str, ...]:
    """The providers whose compile is also timed cold and warm: none, every compiled one (the bare
    ``--compile-times``), or the compiled ones named."""
    compiled = tuple(p for p in providers if ":" in p)
    if not value:
        return ()
    names = compiled if value == "all" else _parse_list(value, compiled, "--compile-times")
    return tuple(p for p in compiled if p in names)


def run_block(args: argparse.Namespace) -> int:
    import torch

    from blockfuse.bench import block, block_report, distributed, hf_llama, hf_siglip2, runner
    from blockfuse.bench.runner import DTYPES
    from blockfuse.models import PRESETS, width_overrides

    if getattr(args, "family", None) is not None and args.name != hf_llama.NAME:
        raise UsageError(f"--family is for hf-llama (blockfuse bench model hf-llama --family FAMILY), not {args.name}")
    if args.bench_kind == "model" and distributed.wanted(args):  # --nproc / --parallel: bench.distributed
        return distributed.main(args)
    hf_models = {hf_llama.NAME: run_hf_llama, hf_siglip2.NAME: run_hf_siglip2}
    if args.name in hf_models:  # the model benchmarks that are not presets
        if args.bench_kind == "block":
            raise UsageError(f"{args.name} is a whole model: blockfuse bench model {args.name}")
        return hf_models[args.name](args)
    if getattr(args, "tiny", False):
        raise UsageError("--tiny is for hf-llama and hf-siglip2; a preset takes --shape")
    for flag in ("prompt", "new_tokens"):
        if getattr(args, flag, None) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} is for hf-llama")
    if args.name not in PRESETS:
        also = f" (or {' '.join(hf_models)})" if args.bench_kind == "model" else ""
        raise UsageError(f"unknown preset {args.name!r}; choose from {' '.join(PRESETS)}{also}")
    if args.layers is not None and args.layers < 1:
        raise UsageError(f"--layers: expected at least 1, got {args.layers}")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    default = block.PROVIDERS if cuda else block.CPU_PROVIDERS
    if args.fast:
        default = tuple(p for p in default if p not in block.SLOW_PROVIDERS)
    providers = _parse_list(args.providers, block.PROVIDERS, "--providers") if args.providers else default
    modes = _parse_list(args.modes or ",".join(block.DEFAULT_MODES), block.MODES, "--modes")
    compile_times = _compile_times(args.compile_times, providers)
    shape = _parse_dims(args.shape, ("batch", "seq", "d_model"), "4x2048x1024") if args.shape else None
    # NOTE: without CUDA the preset's own shape (4x2048x1024 and up) takes many minutes on a small CPU:
    # the default there is CPU_SHAPE, the preset shrunk to its width (as `blockfuse report` runs it).
    chosen_for_cpu = shape is None and not cuda
    if chosen_for_cpu:
        shape = CPU_SHAPE
    try:
        overrides = tuple(width_overrides(args.name, shape[-1]).items()) if shape else ()
    except ValueError as error:
        raise UsageError(f"--shape {format_shape(shape)}: {error}") from None
    layers = args.layers if args.layers is not None else (1 if args.bench_kind == "block" else None)
    try:
        linear = block.parse_linear(args.linear)
    except ValueError as error:
        raise UsageError(f"--linear: {error}") from None
    settings = block.BlockSettings(
        name=args.name,
        shape=shape,
        layers=layers,
        dtype=DTYPES[args.dtype],
        providers=tuple(providers),
        modes=modes,
        device=device,
        quick=args.quick,
        overrides=overrides,
        compile_times=compile_times,
        linear=linear,
    )
    meta = runner.environment(device)
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        print(INTERPRETER_MESSAGE if interpreted else CPU_MESSAGE)
        skipped = [p for p in block.PROVIDERS if p not in providers]
        if skipped:
            print(f"skipped without CUDA: {', '.join(skipped)} (CUDA graphs and autotuning need a GPU)")
    if chosen_for_cpu:
        print(f"shape: {format_shape(shape)} (no CUDA: {args.name} shrunk to width {shape[-1]}, same head size and "
              "FFN ratio; --shape picks another)")
    else:
        print("shape: " + (format_shape(shape) if shape else f"{args.name}'s own"))
    out = args.out or default_out(meta["card"])
    out.mkdir(parents=True, exist_ok=True)
    # NOTE: on the CPU one line per provider instead of a live bar: the bar's refresh thread holds one of
    # the few cores the timed code needs.
    workload, records, stem, _ = block_report.run_and_write(
        args.bench_kind, settings, meta, out, show_progress=cuda, say=None if cuda else _say)
    print(block_report.markdown(meta, workload, records))
    failed = [r for r in records if r.get("error")]
    print(f"{len(records)} measurements, {len(failed)} failed, {meta['elapsed_s']} s; wrote {stem}.{{json,csv,md,png}}")
    return 1 if any(r["provider"].startswith("fused") for r in failed) else 0


def run_host(args: argparse.Namespace) -> int:
    """``blockfuse bench host``: host time per call of every op (``bench.host``)."""
    import torch

    from blockfuse.bench import host, runner

    declared = {b.name: b for b in host.benchmarks()}
    names = list(dict.fromkeys(args.ops or declared))
    unknown = [n for n in names + ([args.profile] if args.profile else []) if n not in declared]
    if unknown:
        raise UsageError(f"unknown --op {' '.join(unknown)}; choose from {' '.join(declared)}")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    settings = host.HostSettings(
        dtype=args.dtype,
        providers=_parse_list(args.providers or ",".join(host.PROVIDERS), host.PROVIDERS, "--providers"),
        modes=_parse_list(args.modes, host.MODES, "--modes"),
        device=device,
        quick=args.quick,
    )
    meta = runner.environment(device)
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        print("no CUDA: host times of the " + ("Triton interpreter" if interpreted else "reference")
              + " path on the CPU (they check the harness, not blockfuse's GPU op path)")
    out = args.out or default_out(meta["card"], "-host")
    out.mkdir(parents=True, exist_ok=True)
    command = ["blockfuse", "bench", "host", "--dtype", args.dtype, "--modes", ",".join(settings.modes),
               "--providers", ",".join(settings.providers), "--out", str(out)]
    if args.ops:
        command += ["--op", *names]
    if args.profile:
        command += ["--profile", args.profile]
    if args.quick:
        command.append("--quick")
    meta["command"] = shlex.join(command)
    began = time.perf_counter()
    # NOTE: a few calls without CUDA: there the kernels run in Triton's interpreter (milliseconds a launch).
    launches = host.breakdown(device, calls=(200 if args.quick else 2000) if cuda else 3)

    def write(records):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        host.write_json(out / "host.json", meta, records, launches)
        (out / "host.md").write_text(host.markdown(meta, records, launches))

    records = host.run(settings, names, show_progress=cuda, on_update=write)
    write(records)
    host.write_plot(out / "host.png", meta, records)
    if args.profile:
        (out / "host-profile.txt").write_text(host.profile(declared[args.profile], settings, calls=500 if cuda else 10))
    print(host.markdown(meta, records, launches))
    failed = [r for r in records if r.get("error")]
    print(f"{len(records)} measurements, {len(failed)} failed, {meta['elapsed_s']} s; wrote {out}/host.{{json,md,png}}")
    return 1 if any(r["provider"].startswith("blockfuse") for r in failed) else 0


def _say(text: str) -> None:
    print(text, flush=True)


def _hf_model_device(args: argparse.Namespace):
    """(device, tiny) of a Hugging Face model benchmark, after the checks of the arguments they share."""
    import torch

    for flag, given in (("--fast", args.fast), ("--compile-times", args.compile_times)):
        if given:
            raise UsageError(f"{args.name}: {flag} is for the presets")
    if importlib.util.find_spec("transformers") is None:
        raise UsageError(f"{args.name} needs transformers: pip install transformers")
    if args.layers is not None and args.layers < 1:
        raise UsageError(f"{args.name}: --layers: expected at least 1, got {args.layers}")
    cuda = torch.cuda.is_available()
    return torch.device("cuda" if cuda else "cpu"), args.tiny or not cuda


def _run_hf_model(args: argparse.Namespace, module, settings, tiny_note: str) -> int:
    """Runs ``module`` (``bench.hf_llama`` or ``hf_siglip2``) with ``settings``, writes its files, prints its
    Markdown. Exit 1 when blockfuse itself failed; a peer that fails (say, Liger missing) is only reported."""
    from blockfuse.bench import hf_harness, runner

    cuda = settings.device.type == "cuda"
    meta = runner.environment(settings.device)
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        print(INTERPRETER_MESSAGE if interpreted else CPU_MESSAGE)
        print(f"no CUDA: {tiny_note}")
    out = args.out or default_out(meta["card"])
    out.mkdir(parents=True, exist_ok=True)
    # NOTE: no progress bar on the CPU: its refresh thread holds one of the cores the timed code needs.
    workload, records, stem, _ = hf_harness.run_and_write(module, settings, meta, out, show_progress=cuda)
    print(module.markdown(meta, workload, records))
    failed = [r for r in records if r.get("error")]
    print(f"{len(records)} measurements, {len(failed)} failed, {meta['elapsed_s']} s; wrote {stem}.{{json,csv,md,png}}")
    return 1 if any(r["provider"].startswith("blockfuse") for r in failed) else 0


def run_hf_llama(args: argparse.Namespace) -> int:
    """``blockfuse bench model hf-llama``: the Hugging Face Llama (or, with ``--family``, another causal-LM family)
    training step and generation (``bench.hf_llama``)."""
    from blockfuse.bench import hf_llama
    from blockfuse.bench.hf_families import FAMILIES, LLAMA

    family = FAMILIES.get(LLAMA.name if args.family is None else args.family)
    if family is None:
        raise UsageError(f"unknown --family {args.family!r}; choose from {','.join(FAMILIES)}")
    device, tiny = _hf_model_device(args)
    shape = hf_llama.TINY if tiny else hf_llama.FULL
    if args.shape:
        batch, seq = _parse_dims(args.shape, ("batch", "seq"), "2x4096")
        shape = dataclasses.replace(shape, batch=batch, seq=seq)
    if args.layers is not None:
        shape = dataclasses.replace(shape, layers=args.layers)
    modes = _parse_list(args.modes or ",".join(hf_llama.DEFAULT_MODES), hf_llama.MODES, "--modes")
    for flag, value, least in (("prompt", args.prompt, 1), ("new_tokens", args.new_tokens, 2)):
        if value is None:
            continue
        if value < least or not set(modes) & {"prefill", "decode"}:
            raise UsageError(f"hf-llama: bad --{flag.replace('_', '-')} {value} (at least {least}, with --modes "
                             "prefill and / or decode)")
        shape = dataclasses.replace(shape, **{flag: value})
    providers = _parse_list(args.providers or ",".join(hf_llama.providers_for(modes, family)), hf_llama.PROVIDERS,
                            "--providers")
    uncovered = [p for p in providers if p.startswith("liger")] if family.liger is None else []
    if uncovered:
        raise UsageError(f"hf-llama --family {family.name}: --providers {','.join(uncovered)}: Liger-Kernel does not "
                         f"cover {family.title} ({family.no_liger_reason})")
    idle = [p for p in providers if not set(hf_llama.modes_of(p)) & set(modes)]
    if idle:
        raise UsageError(f"hf-llama: --providers {','.join(idle)} run none of --modes {','.join(modes)} "
                         "(*-compile: fwd,fwdbwd,loss; *-static-compile: prefill,decode)")
    settings = hf_llama.Settings(shape=shape, dtype=args.dtype, providers=providers, modes=modes, device=device,
                                 quick=args.quick, tiny=tiny, family=family.name)
    return _run_hf_model(args, hf_llama, settings,
                         f"the tiny {family.title} config ({shape.layers} layers, hidden {shape.hidden}, "
                         f"{shape.heads} / {shape.kv_heads} heads, FFN {shape.ffn}; input ids ({shape.batch}, "
                         f"{shape.seq}); with the LM head and loss: vocab {shape.loss_vocab}; "
                         f"generation: prompt {shape.prompt}, {shape.new_tokens} new tokens), not the "
                         f"{hf_llama.FULL.layers}-layer hidden-{hf_llama.FULL.hidden} one")


def run_hf_siglip2(args: argparse.Namespace) -> int:
    """``blockfuse bench model hf-siglip2``: the Hugging Face SigLIP-2 vision model (``bench.hf_siglip2``)."""
    from blockfuse.bench import hf_siglip2

    for flag in ("prompt", "new_tokens"):
        if getattr(args, flag) is not None:
            raise UsageError(f"hf-siglip2: --{flag.replace('_', '-')} is for hf-llama")
    device, tiny = _hf_model_device(args)
    shape = hf_siglip2.TINY if tiny else hf_siglip2.FULL
    if args.shape:
        batch, patches = _parse_dims(args.shape, ("batch", "patches"), "64x256")
        try:
            hf_siglip2.side(patches)
        except ValueError as error:
            raise UsageError(f"hf-siglip2: bad --shape {args.shape!r}: {error}") from None
        shape = dataclasses.replace(shape, batch=batch, patches=patches)
    if args.layers is not None:
        shape = dataclasses.replace(shape, layers=args.layers)
    settings = hf_siglip2.Settings(
        shape=shape,
        dtype=args.dtype,
        providers=_parse_list(args.providers or ",".join(hf_siglip2.PROVIDERS), hf_siglip2.PROVIDERS, "--providers"),
        modes=_parse_list(args.modes or ",".join(hf_siglip2.MODES), hf_siglip2.MODES, "--modes"),
        device=device,
        quick=args.quick,
        tiny=tiny,
    )
    return _run_hf_model(args, hf_siglip2, settings,
                         f"the tiny SigLIP-2 config ({shape.layers} layers, hidden {shape.hidden}, MLP "
                         f"{shape.intermediate}, {shape.heads} heads, patch {shape.patch_size}; {shape.batch} images "
                         f"of {shape.patches} patches), not the {hf_siglip2.FULL.layers}-layer hidden-"
                         f"{hf_siglip2.FULL.hidden} one")
