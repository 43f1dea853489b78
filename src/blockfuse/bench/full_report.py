"""``blockfuse report``: the project's main job, one command and one folder.

Four parts, each timed, each reported even when another one fails:

1. ``analyze``: what torch.compile does to the ``reordered`` block, inference and a training step
   (``blockfuse.analyze``; on CUDA with the copy / GEMM ceilings and the profiler);
2. ``block``: the ``reordered`` block with every provider (``blockfuse bench block reordered``;
   ``--fast`` drops the max-autotune providers);
3. ``surgical``: inference of ``te-4layer``, the 4-layer model of the surgical-compilation experiment,
   eager vs torch.compile vs surgical compile vs fused, with the relative error and the max abs
   difference of the output against an fp32 run and against eager, all with the same weights;
4. ``rope``: RoPE alone, eager vs torch.compile vs blockfuse, forward, at one shape
   (``blockfuse bench ops --op rotary``).

Writes ``report.md`` (the four stitched together), ``report.json`` (everything, the parts' results
included) and each part's own files. Without CUDA it runs small shapes on the CPU and says what it
skipped and why.
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from blockfuse.analyze.targets import CPU_SHAPE
from blockfuse.bench.report import card_text, noisy, spread_text
from blockfuse.cliutil import UsageError, default_out

BLOCK = "reordered"
MODEL = "te-4layer"
# te-4layer inference: whole-model compile, surgical compile (where bench.block has it) and fused ops
MODEL_PROVIDERS = ("eager", "compile:default", "surgical:default", "fused")
ROPE_PROVIDERS = ("eager", "compile", "blockfuse")
# the compile-mode table: these providers' compiles are also timed with cold and with warm caches
COMPILE_TABLE = ("eager", "compile:default", "compile:reduce-overhead", "compile:max-autotune")
BLOCKFUSE_PROVIDERS = ("fused", "blockfuse")  # a failure of these (prefixes) makes the exit code 1

TITLES = {
    "analyze": f"compile analysis of `{BLOCK}` (inference + backward)",
    "block": f"`{BLOCK}` block, every provider",
    "surgical": f"`{MODEL}` inference (surgical compilation)",
    "rope": "RoPE alone, forward",
}


def skipped_on_cpu() -> list[str]:
    """What a run without CUDA leaves out, and why."""
    from blockfuse.bench import block

    missing = [p for p in block.PROVIDERS if p not in block.CPU_PROVIDERS]
    graphs = [p for p in missing if "max-autotune" not in p]
    tuned = [p for p in missing if "max-autotune" in p]
    return [
        f"CUDA graphs: {', '.join(graphs) or 'none'} (CUDA graphs need a GPU)",
        f"autotuning: {', '.join(tuned) or 'none'} (they tune GPU kernels)",
        "GPU timing: CUDA events, L2 flushes and CUDA-graph replays; CPU times are wall clock and say nothing "
        "about GPU speed",
        "peak GPU memory and the memory the training forward keeps (block benchmark)",
        "the analysis' copy / GEMM ceilings, profiler and roofline (nothing to measure them on)",
        f"the SPEC shapes: every block runs at {'x'.join(map(str, CPU_SHAPE))} (presets shrunk to width "
        f"{CPU_SHAPE[-1]}, same head size and FFN ratio), RoPE at the op's small CPU shape",
    ]


@dataclass(frozen=True)
class ReportSettings:
    device: torch.device
    out: Path
    fast: bool = False
    quick: bool = False

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """Every block's input shape: None (each preset's own) on CUDA, ``CPU_SHAPE`` on the CPU."""
        return None if self.cuda else CPU_SHAPE


# ---------------------------------------------------------------- command line


def add_report_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="the main job: compile analysis, block and model benchmarks, RoPE, in one report.md",
        description="Analyze the reordered block, benchmark it with every provider, time te-4layer inference "
                    "(eager, torch.compile, surgical, fused; error against fp32) and RoPE alone; write report.md, "
                    "report.json and each part's files. Without CUDA: small shapes on the CPU.",
    )
    parser.add_argument("--fast", action="store_true", help="skip the max-autotune providers (minutes of autotuning)")
    parser.add_argument("--quick", action="store_true", help="short timing (passed to every benchmark)")
    parser.add_argument("--device", choices=("cuda", "cpu"),
                        help="cuda or cpu (default: cuda when available; cpu runs the small shapes)")
    parser.add_argument("--out", type=Path, help="output folder (default: ./blockfuse-results/<date>-<card>-report/)")
    parser.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from blockfuse.bench import runner

    console = Console()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but no CUDA device is available (--device cpu runs small shapes)")
    cuda = torch.cuda.is_available() and args.device != "cpu"
    device = torch.device("cuda" if cuda else "cpu")
    meta = runner.environment(device)
    out = args.out or default_out(meta["card"], "-report")
    out.mkdir(parents=True, exist_ok=True)
    settings = ReportSettings(device=device, out=out, fast=args.fast, quick=args.quick)
    words = ["blockfuse", "report"] + ["--fast"] * args.fast + ["--quick"] * args.quick
    words += ["--device", "cpu"] if args.device == "cpu" else []
    meta["command"] = shlex.join(words + ["--out", str(out)])
    meta["settings"] = {"fast": args.fast, "quick": args.quick,
                        "shape": list(settings.shape) if settings.shape else "each preset's own"}
    skipped = []
    if not cuda:
        interpreted = meta["blockfuse_implementation"] == "triton-interpreter"
        path = ("the fused ops run their Triton kernels in Triton's CPU interpreter" if interpreted else
                "the fused ops run their pure-PyTorch reference (TRITON_INTERPRET=1 runs their Triton kernels)")
        why = "--device cpu" if torch.cuda.is_available() else "no CUDA device"
        skipped = [f"{why}: small shapes on the CPU, the numbers check the harness, not the speed; {path}",
                   *skipped_on_cpu()]
        console.print(f"[bold yellow]{skipped[0]}.[/] Skipped:")
        for line in skipped[1:]:
            console.print(f"  - {line}")
    elif args.fast:
        skipped = ["the max-autotune providers (--fast)"]
    console.print(f"{meta['card']}; torch {meta['torch']}, triton {meta['triton']}; writing {out}")

    document = {"meta": meta, "skipped": skipped, "parts": {}}
    began = time.perf_counter()
    for number, (name, part) in enumerate(parts().items(), start=1):
        console.rule(f"[bold]{number}/{len(TITLES)} {TITLES[name]}")
        entry = {"title": TITLES[name], "status": "running"}
        document["parts"][name] = entry
        part_began = time.perf_counter()
        try:
            entry["result"] = part(settings, meta, console)
            entry["status"] = "ok"
        except Exception as error:  # noqa: BLE001 (a part that fails is reported; the others still run)
            entry["status"] = "failed"
            entry["error"] = f"{type(error).__name__}: {error}".strip()[:500]
            entry["traceback"] = traceback.format_exc()
            torch._dynamo.reset()  # what the part left compiled or allocated is not the next part's
            if cuda:
                torch.cuda.empty_cache()
        entry["elapsed_s"] = round(time.perf_counter() - part_began, 1)
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        if entry["status"] == "ok":
            console.print(f"[green]{name}: done in {entry['elapsed_s']} s")
        else:
            console.print(f"[red]{name}: failed after {entry['elapsed_s']} s: {escape(entry['error'])}")
        write_report(out, document)  # after every part: a run cut short still leaves its report

    failed = blockfuse_failures(document)
    document["blockfuse_failures"] = failed
    write_report(out, document)
    _print_summary(console, document)
    console.print(f"{meta['elapsed_s']} s in all; wrote {out / 'report.md'} and {out / 'report.json'}")
    if failed:
        console.print(f"[red]blockfuse failed: {escape('; '.join(failed))}")
    return 1 if failed else 0


def parts() -> dict:
    """The parts in the order they run (looked up when called, so a test can replace one)."""
    return {"analyze": analyze_part, "block": block_part, "surgical": surgical_part, "rope": rope_part}


def blockfuse_failures(document: dict) -> list[str]:
    """'part provider mode: error' for every record of a blockfuse provider that failed."""
    failed = []
    for name, entry in document["parts"].items():
        result = entry.get("result") or {}
        for record in result.get("records", []):
            if record.get("error") and record["provider"].startswith(BLOCKFUSE_PROVIDERS):
                failed.append(f"{name} {record['provider']} {record['mode']}: {record['error']}")
        for provider, difference in result.get("differences", {}).get("providers", {}).items():
            if difference.get("error") and provider.startswith(BLOCKFUSE_PROVIDERS):
                failed.append(f"{name} {provider} output difference: {difference['error']}")
    return failed


def _print_summary(console, document: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="blockfuse report")
    for column in ("part", "status", "seconds", "headline"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for name, entry in document["parts"].items():
        headline = (entry.get("result") or {}).get("headline") or entry.get("error", "")
        style = "green" if entry["status"] == "ok" else "red"
        table.add_row(name, f"[{style}]{entry['status']}", f"{entry['elapsed_s']:.1f}", escape(headline))
    console.print(table)


# ---------------------------------------------------------------- the parts


def analyze_part(settings: ReportSettings, meta: dict, console) -> dict:
    from blockfuse.analyze.api import analyze
    from blockfuse.analyze.targets import load_target

    module, inputs, label = load_target(BLOCK, settings.shape, torch.bfloat16, settings.device)
    # NOTE: no spinner while a part runs: a display thread disturbs host timings (on a 2-core CPU, OpenMP
    # kernels of Inductor wait for a core it holds: about 20 ms a call).
    console.print(f"analyze {label}: compiling, running" + (" and profiling" if settings.cuda else ""))
    report = analyze(module, *inputs, backward=True, name=label)
    report.meta["command"] = (f"blockfuse analyze {BLOCK}" + (f" --shape {'x'.join(map(str, settings.shape))}"
                              if settings.shape else "") + f" --backward --device {settings.device.type}"
                              f" (part of `{meta['command']}`)")
    written = report.write(settings.out, stem=f"analyze-{BLOCK}")
    passes = {}
    for name, summary in report.passes.items():
        passes[name] = {
            "fused_kernels": summary.fused_kernels, "fused_launches": summary.fused_launches,
            "fused_backend": summary.fused_backend, "gemms": summary.gemms, "attention": len(summary.attention),
            "custom_ops": len(summary.custom_ops), "wrapper_launches": summary.wrapper_launches,
            "device_kernels": summary.device_kernels, "compile_s": summary.compile_s, "pass_ms": summary.pass_ms,
            "headline": summary.headline(),
        }
    breaks = sum(b.count for b in report.graph_breaks)
    inference = passes.get("inference", {})
    return {
        "headline": f"{breaks} graph break(s); inference: {inference.get('fused_kernels')} fused kernels, "
                    f"{inference.get('gemms')} GEMMs, {inference.get('wrapper_launches')} launches",
        "graph_breaks": breaks,
        "graphs": report.graph_count,
        "kernels": len(report.kernels),
        "input_shapes": report.meta["input_shapes"],
        "analysis_s": report.meta["analysis_s"],
        "profiled": report.meta["profiled"],
        "passes": passes,
        "notes": report.notes,
        "files": {kind: path.name for kind, path in written.items()},
        "report": report.to_dict(),
    }


def _block_settings(settings: ReportSettings, name: str, providers, modes, layers, compile_times=()):
    from blockfuse.bench import block
    from blockfuse.models import width_overrides

    shape = settings.shape
    return block.BlockSettings(
        name=name, shape=shape, layers=layers, dtype=torch.bfloat16, providers=tuple(providers),
        modes=tuple(modes), device=settings.device, quick=settings.quick,
        overrides=tuple(width_overrides(name, shape[-1]).items()) if shape else (),
        compile_times=tuple(p for p in compile_times if p in providers and ":" in p),
    )


def _run_block(settings: ReportSettings, meta: dict, kind: str, block_settings) -> dict:
    """``bench.block.run_block`` and the block report's files ``<kind>-<name>.{json,csv,md,png}``."""
    from blockfuse.bench import block_report

    part_meta = dict(meta)
    workload, records, stem, plotted = block_report.run_and_write(kind, block_settings, part_meta, settings.out,
                                                                  show_progress=settings.cuda)
    files = {suffix: stem.with_suffix(f".{suffix}").name for suffix in ("json", "csv", "md")}
    if plotted:
        files["png"] = stem.with_suffix(".png").name
    return {"meta": part_meta, "workload": workload, "records": records, "files": files,
            "targets": block_report.targets(workload, records, settings.device.type),
            "table": block_report.markdown(part_meta, workload, records)}


def block_part(settings: ReportSettings, meta: dict, console) -> dict:
    from blockfuse.bench import block

    providers = block.PROVIDERS if settings.cuda else block.CPU_PROVIDERS
    if settings.fast:
        providers = tuple(p for p in providers if p not in block.SLOW_PROVIDERS)
    result = _run_block(settings, meta, "block",
                        _block_settings(settings, BLOCK, providers, block.MODES, 1, compile_times=COMPILE_TABLE))
    records = result["records"]
    result["max_autotune_first_call_s"] = {
        r["provider"] + " " + r["mode"]: r.get("first_call_s") for r in records if "max-autotune" in r["provider"]}
    failed = sum(1 for r in records if r.get("error"))
    checked = [t for t in result["targets"] if t["status"] != "n/a"]
    met = sum(t["status"] == "met" for t in checked)
    headline = f"{len(providers)} providers, {len(records)} measurements, {failed} failed; "
    if settings.cuda:
        headline += f"targets met {met}/{len(result['targets'])}"
    else:
        headline += f"error checks met {met}/{len(checked)}; speed and memory targets are for CUDA (n/a on CPU)"
    result["headline"] = headline
    return result


def surgical_part(settings: ReportSettings, meta: dict, console) -> dict:
    from blockfuse.bench import block
    from blockfuse.models import preset

    layers = preset(MODEL).layers
    providers = [p for p in MODEL_PROVIDERS if p in block.PROVIDERS]
    block_settings = _block_settings(settings, MODEL, providers, ("infer",), layers)
    result = _run_block(settings, meta, "model", block_settings)
    result["differences"] = output_differences(result["workload"], result["records"])
    by_provider = {r["provider"]: r for r in result["records"]}
    eager, compiled = by_provider.get("eager", {}), by_provider.get("compile:default", {})
    difference = result["differences"]["providers"].get("compile:default", {}).get("max_abs_vs_eager")
    if noisy(eager) or noisy(compiled):
        speed = "compile:default vs eager: noisy timings (p80 > 2x p20), no speed-up"
    else:
        speedup = eager["ms"] / compiled["ms"] if eager.get("ms") and compiled.get("ms") else None
        speed = f"compile:default {_number(speedup, '.2f')}x eager"
    result["headline"] = f"{speed}, max abs difference {_number(difference, '.3g')} vs eager"
    return result


def output_differences(workload: dict, records: list[dict]) -> dict:
    """Per provider, from the block benchmark's records (its inference forward on the seeded weights):
    relative error and max abs difference against the fp32 run of the eager module, and max abs
    difference against the eager output in the benchmark dtype; a provider that failed gets its error."""
    result = {"reference": {"max_abs": workload.get("output_fp32_max_abs"), "rms": workload.get("output_fp32_rms")},
              "providers": {}}
    for record in records:
        if record["mode"] != "infer":
            continue
        if record.get("error"):
            result["providers"][record["provider"]] = {"error": record["error"]}
            continue
        result["providers"][record["provider"]] = {
            "rel_err_vs_fp32": record.get("rel_err_out"),
            "max_abs_vs_fp32": record.get("max_abs_out"),
            "max_abs_vs_eager": record.get("max_abs_vs_eager"),
        }
    return result


def rope_part(settings: ReportSettings, meta: dict, console) -> dict:
    from blockfuse.bench import report, rotary, runner, timing

    shape = rotary.SHAPES[0] if settings.cuda else rotary.CPU_SHAPES[0]  # (batch, seq, q_heads, kv_heads, d)
    op_settings = runner.Settings(dtype="bf16", modes=("fwd",), providers=ROPE_PROVIDERS, shapes=(shape,),
                                  quick=settings.quick, device=settings.device)
    copy_ceiling = None
    if settings.cuda:  # the same ceiling settings as blockfuse bench ops
        copy_ceiling = timing.copy_bandwidth(warmup_ms=5 if settings.quick else 25,
                                             rep_ms=20 if settings.quick else 100)
    words = ["blockfuse", "bench", "ops", "--op", "rotary", "--shapes", "x".join(map(str, shape)),
             "--dtype", "bf16", "--modes", "fwd", "--providers", ",".join(ROPE_PROVIDERS)]
    part_meta = {**meta, "command": shlex.join(words + ["--quick"] * settings.quick + ["--out", str(settings.out)])}
    benchmarks = [b for b in rotary.BENCHMARKS if b.name == "rotary"]
    # NOTE: no progress bar on the CPU: its refresh thread holds one of the cores that Inductor's OpenMP
    # kernels wait for (tens of ms a call on a 2-core machine).
    records = runner.run(benchmarks, op_settings, copy_ceiling["gbps"] if copy_ceiling else None,
                         show_progress=settings.cuda)
    files = {"json": "ops-rotary.json", "markdown": "ops-rotary.md"}
    report.write_json(settings.out / files["json"], part_meta, copy_ceiling, records)
    report.write_markdown(settings.out / files["markdown"], part_meta, copy_ceiling, records)
    if report.write_plot(settings.out / "ops-rotary.png", part_meta, copy_ceiling, records):
        files["png"] = "ops-rotary.png"
    result = {"meta": part_meta, "shape": list(shape), "copy": copy_ceiling, "records": records, "files": files}
    result["headline"] = rope_line(result)
    return result


# ---------------------------------------------------------------- report.md and report.json


def write_report(out: Path, document: dict) -> None:
    from blockfuse.bench.report import _finite

    (out / "report.json").write_text(json.dumps(_finite(document), indent=1, default=str) + "\n")
    (out / "report.md").write_text(markdown(document))


def _number(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _links(files: dict) -> str:
    return ", ".join(f"[{name}]({name})" for name in files.values())


def markdown(document: dict) -> str:
    meta = document["meta"]
    card = card_text(meta, memory=True)
    lines = [
        "# blockfuse report",
        "",
        f"- card: {card}",
        f"- torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, python {meta['python']}; "
        f"blockfuse path: {meta['blockfuse_implementation']}",
        f"- commit {meta.get('git_commit')}, source digest {meta.get('source_digest')}; date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- elapsed: {_number(meta.get('elapsed_s'), '.1f')} s in all",
        "",
    ]
    if document["skipped"]:
        lines += ["## Skipped", ""] + [f"- {line}" for line in document["skipped"]] + [""]
    lines += ["## Parts", "", "| part | status | elapsed s | files |", "| --- | --- | --- | --- |"]
    for name, entry in document["parts"].items():
        result = entry.get("result") or {}
        status = entry["status"] if entry["status"] != "failed" else "**failed**"
        lines.append(f"| {entry['title']} | {status} | {_number(entry.get('elapsed_s'), '.1f')} | "
                     f"{_links(result.get('files', {}))} |")
    if document.get("blockfuse_failures"):
        lines += ["", "**blockfuse failed** (exit code 1):", ""]
        lines += [f"- `{line}`" for line in document["blockfuse_failures"]]
    sections = {"analyze": _analyze_markdown, "block": _block_markdown, "surgical": _surgical_markdown,
                "rope": _rope_markdown}
    for number, (name, entry) in enumerate(document["parts"].items(), start=1):
        lines += ["", f"## {number}. {entry['title']}", ""]
        if entry["status"] == "failed":
            lines += [f"**Failed** after {entry['elapsed_s']} s; the other parts still ran.", "",
                      "```", entry["error"], "```"]
        elif entry["status"] == "ok":
            lines += sections[name](entry["result"], meta)
        else:
            lines.append("(still running, or the run was cut short here)")
    return "\n".join(lines) + "\n"


def _analyze_markdown(result: dict, meta: dict) -> list[str]:
    shapes = ", ".join("x".join(map(str, s)) for s in result["input_shapes"])
    lines = [
        f"`torch.compile` (mode default) of one `{BLOCK}` layer on {shapes} bf16, inference and a training step "
        f"({result['analysis_s']} s); details in {_links(result['files'])}.",
        "",
        f"- graph breaks: **{result['graph_breaks']}** ({result['graphs']} graph(s)); generated kernels: "
        f"**{result['kernels']}** in all steps",
    ]
    if not result["profiled"]:
        lines.append("- no profiler, no ceilings, no roofline: not on CUDA (launch counts come from the generated "
                     "code; times are wall clock)")
    lines += ["", "| step | fused kernels (launches) | GEMMs | attention | custom ops | launches (generated code) | "
              "GPU kernels (profiler) | compile s | ms per step |", "| --- " * 9 + "|"]
    for name, step in result["passes"].items():
        lines.append(
            f"| {name} | {step['fused_kernels']} ({step['fused_launches']}, {step['fused_backend']}) | "
            f"{step['gemms']} | {step['attention']} | {step['custom_ops']} | {step['wrapper_launches']} | "
            f"{_number(step['device_kernels'], 'd')} | {_number(step['compile_s'], '.1f')} | "
            f"{_number(step['pass_ms'], '.3f')} |")
    lines.append("")
    lines += [f"- {name}: {step['headline']}" for name, step in result["passes"].items()]
    lines += [f"- note: {note}" for note in result["notes"]]
    return lines


def _demoted(table: str) -> list[str]:
    """The block report's markdown from its Targets section on, headings one level down."""
    lines = table.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## ")), 0)
    return [("#" + line) if line.startswith("## ") else line for line in lines[start:]]


def _timing_text(meta: dict) -> str:
    if meta["device"] == "cuda":
        return ("Times: median ms of CUDA events after warm-up, L2 flushed before each call; peak: memory of one "
                "training step above what was allocated before it (`*`: CUDA-graph pool included); errors: "
                "||out - ref|| / ||ref|| against an fp32 eager run with the same weights; first call: seconds, "
                "compile included.")
    return ("Times: median ms of wall clock on the CPU (small shapes: they check the harness, not the speed); "
            "errors: ||out - ref|| / ||ref|| against an fp32 eager run with the same weights; first call: "
            "seconds, compile included.")


def _block_markdown(result: dict, meta: dict) -> list[str]:
    workload = result["workload"]
    shape = "x".join(map(str, workload["shape"]))
    lines = [f"{workload['layers']} layer, input {shape} {workload['dtype']}, "
             f"{workload['forward_gflop']:.1f} GFLOP forward; files: {_links(result['files'])}; "
             f"reproduce alone: `{result['meta']['command']}` ({result['meta']['elapsed_s']} s here).", "",
             _timing_text(meta), ""]
    first_calls = result["max_autotune_first_call_s"]
    if first_calls:
        spent = sum(v for v in first_calls.values() if v)
        slowest = max(first_calls.items(), key=lambda item: item[1] or 0)
        lines += [f"max-autotune's first calls (compile + autotuning) took {spent:.1f} s in all, the longest "
                  f"{_number(slowest[1], '.1f')} s ({slowest[0]}): "
                  + ", ".join(f"{k} {_number(v, '.1f')} s" for k, v in first_calls.items()) + ".", ""]
    elif meta["device"] == "cuda":
        lines += ["max-autotune: not run (`--fast`).", ""]
    else:
        lines += ["max-autotune: not run (no GPU to autotune on).", ""]
    return lines + _compile_mode_table(result["records"]) + _demoted(result["table"])


def _compile_mode_table(records: list[dict]) -> list[str]:
    """Eager and the torch.compile modes of ``COMPILE_TABLE``: time per mode against eager, and the
    compile's cost: the first call of each mode in the benchmark, and the first inference call with
    cold and with warm Inductor / Triton caches."""
    from blockfuse.bench.block_report import time_cell

    index = {(r["provider"], r["mode"]): r for r in records}
    present = [p for p in COMPILE_TABLE if any(r["provider"] == p for r in records)]
    modes = [m for m in ("infer", "fwd", "bwd", "fwdbwd") if any(r["mode"] == m for r in records)]
    if len(present) < 2:
        return []
    lines = ["### Compile modes", "",
             "The first call of each mode includes its compile (and autotuning); `cold` / `warm`: a first inference "
             "call in a fresh cache folder, then again after `torch.compiler.reset()` with the on-disk caches "
             "filled (a second run of the same program).", "",
             "| provider | " + " | ".join(f"{m} ms (x eager)" for m in modes)
             + " | first calls s | compile cold s | compile warm s |",
             "| --- " * (len(modes) + 4) + "|"]
    for provider in present:
        cells = [provider]
        cells += [time_cell(index.get((provider, mode), {}), index.get(("eager", mode))) for mode in modes]
        rows = [index.get((provider, m), {}) for m in modes]
        cells.append(" / ".join(_number(r.get("first_call_s"), ".1f") for r in rows))
        timed = next((r for r in rows if "compile_cold_s" in r or "compile_error" in r), {})
        if timed.get("compile_error"):
            cells += [f"error: `{timed['compile_error'][:120]}`", ""]
        else:
            cells += [_number(timed.get("compile_cold_s"), ".1f"), _number(timed.get("compile_warm_s"), ".1f")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _surgical_markdown(result: dict, meta: dict) -> list[str]:
    workload = result["workload"]
    shape = "x".join(map(str, workload["shape"]))
    differences = result["differences"]
    reference = differences["reference"]
    from blockfuse.bench.block_report import time_cell

    by_provider = {r["provider"]: r for r in result["records"]}
    lines = [
        f"{workload['layers']} layers, input {shape} {workload['dtype']}, inference forward under no_grad; files: "
        f"{_links(result['files'])}; reproduce alone: `{result['meta']['command']}` "
        f"({result['meta']['elapsed_s']} s here).",
        "",
        _timing_text(meta) + " Max abs difference: the largest |out - ref| of one element, against the fp32 run "
        f"(its output: max |y| {reference['max_abs']:.3g}, RMS {reference['rms']:.3g}) and against the eager "
        "bf16 output, computed in a second forward of each provider with the same weights and input.",
        "",
        "| provider | infer ms (x eager) | first call s | rel. error vs fp32 | max abs diff vs fp32 | "
        "max abs diff vs eager |",
        "| --- " * 6 + "|",
    ]
    for provider in dict.fromkeys([*by_provider, *differences["providers"]]):
        record = by_provider.get(provider, {})
        difference = differences["providers"].get(provider, {})
        timed = time_cell(record, by_provider.get("eager"))
        error = record.get("rel_err_out", difference.get("rel_err_vs_fp32"))
        lines.append(f"| {provider} | {timed} | {_number(record.get('first_call_s'), '.1f')} | "
                     f"{_number(error, '.2e')} | {_number(difference.get('max_abs_vs_fp32'), '.3g')} | "
                     f"{_number(difference.get('max_abs_vs_eager'), '.3g')} |")
    errors = [(provider, what, text) for provider in dict.fromkeys([*by_provider, *differences["providers"]])
              for what, text in (("timing", (by_provider.get(provider) or {}).get("error")),
                                 ("output difference", differences["providers"].get(provider, {}).get("error")))
              if text]
    if errors:
        lines += [""] + [f"- {provider} {what}: `{text}`" for provider, what, text in errors]
    return lines


def rope_line(result: dict) -> str:
    """One line: each provider's forward ms, its speed-up over eager (and blockfuse's over compile); a
    noisy median (``report.noisy``) is given with its spread and takes part in no ratio."""
    records = {r["provider"]: r for r in result["records"]}
    batch, seq, q_heads, kv_heads, head_dim = result["shape"]

    def ms(provider):
        record = records.get(provider)
        return None if record is None or record.get("error") else record.get("ms")

    parts = []
    for provider in ROPE_PROVIDERS:
        if ms(provider) is None:
            parts.append(f"{provider} error" if provider in records else f"{provider} n/a")
            continue
        text = f"{provider} {ms(provider):.4g} ms"
        if noisy(records[provider]):
            # a noisy median gives no ratio, and is given with its spread
            parts.append(f"{text} ({spread_text(records[provider])})")
            continue
        ratios = [f"{ms(peer) / ms(provider):.2f}x {peer}" for peer in ("eager", "compile")
                  if peer != provider and ms(peer) and not noisy(records[peer])
                  and (peer == "eager" or provider == "blockfuse")]
        parts.append(text + (f" ({', '.join(ratios)})" if ratios else ""))
    return (f"RoPE q, k [{batch}, {q_heads} (kv {kv_heads}), {seq}, {head_dim}] bf16 forward: " + ", ".join(parts))


def _rope_markdown(result: dict, meta: dict) -> list[str]:
    records = {r["provider"]: r for r in result["records"]}
    cuda = meta["device"] == "cuda"
    timing = ("median of CUDA-graph replays, L2 flushed (the kernels' own time); host ms: back-to-back eager "
              "calls, host overhead included" if cuda else "wall clock on the CPU")
    lines = [f"**{rope_line(result)}**", "",
             f"Timing: {timing}. Files: {_links(result['files'])}; reproduce alone: `{result['meta']['command']}`.",
             "", "| provider | ms | " + ("host ms | of copy bandwidth | " if cuda else "") + "rel. error vs fp32 |",
             "| --- " * (5 if cuda else 3) + "|"]
    for provider in ROPE_PROVIDERS:
        record = records.get(provider)
        if record is None:
            continue
        if record.get("error"):
            lines.append(f"| {provider} | error: `{record['error']}` |" + " |" * (3 if cuda else 1))
            continue
        cells = [provider, _number(record["ms"], ".4g") + (f" ({spread_text(record)})" if noisy(record) else "")]
        if cuda:
            cells += [_number(record.get("ms_eager"), ".4g"), _number(record.get("frac_copy"), ".2f")]
        lines.append("| " + " | ".join(cells + [_number(record.get("rel_err_out"), ".2e")]) + " |")
    return lines
