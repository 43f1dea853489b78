"""``blockfuse report``: the project's main job, one command and one folder.

Runs the four parts of ``full_report.parts`` in turn, each timed, each reported even when another one fails, and
writes ``report.md`` (``full_report.markdown``: the parts stitched together, then the verdict for this card of
``full_report.verdict``), ``report.json`` (everything, the parts' results included) and each part's own files.
Without CUDA it runs small shapes on the CPU and says what it skipped and why. The project's own targets are in
the JSON; ``--targets`` shows them in the Markdown and the terminal too.
"""

from __future__ import annotations

import argparse
import shlex
import time
import traceback
from pathlib import Path

import torch

from blockfuse.bench.full_report import markdown, parts, verdict
from blockfuse.cliutil import UsageError, default_out

BLOCKFUSE_PROVIDERS = ("fused", "blockfuse")  # a failure of these (prefixes) makes the exit code 1


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
        f"the SPEC shapes: every block runs at {'x'.join(map(str, parts.CPU_SHAPE))} (presets shrunk to width "
        f"{parts.CPU_SHAPE[-1]}, same head size and FFN ratio), RoPE at the op's small CPU shape",
    ]


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
    parser.add_argument("--targets", action="store_true",
                        help="also show this project's own speed, memory and error targets (report.md, the parts' "
                        "Markdown, the terminal); report.json holds them either way")
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
    settings = parts.ReportSettings(device=device, out=out, fast=args.fast, quick=args.quick, targets=args.targets)
    words = ["blockfuse", "report"] + ["--fast"] * args.fast + ["--quick"] * args.quick + ["--targets"] * args.targets
    words += ["--device", "cpu"] if args.device == "cpu" else []
    meta["command"] = shlex.join(words + ["--out", str(out)])
    meta["settings"] = {"fast": args.fast, "quick": args.quick, "targets": args.targets,
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

    document = {"meta": meta, "skipped": skipped, "parts": {}, "targets_shown": args.targets}
    began = time.perf_counter()
    for number, (name, part) in enumerate(parts.runners().items(), start=1):
        console.rule(f"[bold]{number}/{len(parts.TITLES)} {parts.TITLES[name]}")
        entry = {"title": parts.TITLES[name], "status": "running"}
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
        markdown.write_report(out, document)  # after every part: a run cut short still leaves its report

    failed = blockfuse_failures(document)
    document["blockfuse_failures"] = failed
    document["verdict"] = verdict.verdict(document)
    markdown.write_report(out, document)
    _print_summary(console, document)
    console.print(f"{meta['elapsed_s']} s in all; wrote {out / 'report.md'} and {out / 'report.json'}")
    if failed:
        console.print(f"[red]blockfuse failed: {escape('; '.join(failed))}")
    return 1 if failed else 0


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
    if document["targets_shown"]:
        for name, entry in document["parts"].items():
            for check in (entry.get("result") or {}).get("targets", []):
                console.print(f"target, {name}: {check['status']}: {escape(check['text'])}")
    found = document["verdict"]
    if found["answers"]:
        table = Table(title="verdict for this card" + (" (CPU: checks the harness, not a GPU verdict)"
                                                      if found["cpu"] else ""))
        for column in verdict.HEADER:
            table.add_column(column)
        for row in verdict.rows(found):
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
