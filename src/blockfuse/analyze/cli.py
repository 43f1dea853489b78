"""``blockfuse analyze BLOCK``: the command line of the compile analysis."""

from __future__ import annotations

import argparse
import datetime
import re
import shlex
from pathlib import Path

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def add_analyze_parser(subparsers) -> None:
    from blockfuse.analyze.api import MODES

    parser = subparsers.add_parser(
        "analyze",
        help="what torch.compile did to a block: graph breaks, fused kernels, launches, roofline",
        description="Compile BLOCK with torch.compile and report graph breaks, the kernels Inductor generated "
                    "and what each fuses, library calls, launches per step (wrapper code and profiler), and on "
                    "CUDA each kernel's time against the copy and GEMM ceilings. Writes <name>.md, <name>.json, "
                    "<name>.png and the generated code.",
    )
    parser.add_argument("block", metavar="BLOCK",
                        help="a reference block (reordered, standard, ...) or path/to/file.py:factory returning "
                             "(module, inputs)")
    parser.add_argument("--shape", "--shapes", dest="shapes", nargs="+", metavar="SHAPE",
                        help="input shape(s) such as 4x2048x1024 (default: the block's own); with several, "
                             "the first is analyzed and all of them probe recompiles")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    parser.add_argument("--mode", choices=MODES, default="default")
    parser.add_argument("--backward", action="store_true", help="also compile and measure a training step")
    parser.add_argument("--dynamic", choices=("auto", "true", "false"), default="auto",
                        help="torch.compile's dynamic= (auto: None)")
    parser.add_argument("--compare", metavar="OTHER_BLOCK", help="analyze OTHER_BLOCK too and compare the two")
    parser.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps per kind of step (default 5)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiler, the ceilings and the plot")
    parser.add_argument("--out", type=Path, help="output folder (default: benchmarks/results/<date>-<card>/analyze)")
    parser.set_defaults(func=run_analyze)


def parse_shapes(items: list[str] | None) -> list[tuple[int, ...]]:
    shapes = []
    for item in items or []:
        for text in item.split(","):
            if not text.strip():
                continue
            try:
                shape = tuple(int(d) for d in text.strip().lower().split("x"))
            except ValueError:
                raise SystemExit(f"blockfuse analyze: bad --shape {text!r}: expected e.g. 4x2048x1024") from None
            if not shape or min(shape) < 1:
                raise SystemExit(f"blockfuse analyze: bad --shape {text!r}: every size must be at least 1")
            shapes.append(shape)
    return shapes


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _analyze_one(spec: str, args, shapes, dtype, device, command: str):
    from blockfuse.analyze.api import analyze
    from blockfuse.analyze.targets import inputs_for_shape, load_target

    module, inputs, label = load_target(spec, shapes[0] if shapes else None, dtype, device)
    more = [inputs_for_shape(spec, shape, dtype, device, seed=i + 1) for i, shape in enumerate(shapes[1:])]
    dynamic = {"auto": None, "true": True, "false": False}[args.dynamic]
    report = analyze(module, *inputs, mode=args.mode, backward=args.backward, dynamic=dynamic,
                     recompile_inputs=more or None, name=label, profile=not args.no_profile, steps=args.steps)
    report.meta["command"] = command
    return report


def run_analyze(args: argparse.Namespace) -> int:
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("blockfuse analyze: --device cuda, but no CUDA device is available")
    dtype = getattr(torch, DTYPES[args.dtype])
    shapes = parse_shapes(args.shapes)
    words = ["blockfuse", "analyze", args.block]
    if shapes:
        words += ["--shape", *("x".join(map(str, s)) for s in shapes)]
    words += ["--dtype", args.dtype, "--mode", args.mode, "--device", device]
    words += (["--backward"] if args.backward else []) + (["--compare", args.compare] if args.compare else [])
    if args.dynamic != "auto":
        words += ["--dynamic", args.dynamic]
    if args.no_profile:
        words.append("--no-profile")
    command = shlex.join(words)
    out = args.out
    if out is None:
        card = torch.cuda.get_device_name() if device == "cuda" else "cpu"
        out = Path("benchmarks/results") / f"{datetime.date.today().isoformat()}-{_slug(card)}" / "analyze"

    from rich.console import Console

    console = Console(width=160)
    report = _analyze_one(args.block, args, shapes, dtype, device, command)
    report.print_summary(console)
    written = report.write(out)
    console.print(f"wrote {', '.join(str(p) for p in written.values())}")
    if args.compare:
        from blockfuse.analyze.compare import compare

        other = _analyze_one(args.compare, args, shapes, dtype, device, command)
        other.print_summary(console)
        written = other.write(out)
        console.print(f"wrote {', '.join(str(p) for p in written.values())}")
        comparison = compare(report, other)
        comparison.print_summary(console)
        written = comparison.write(out)
        console.print(f"wrote {', '.join(str(p) for p in written.values())}")
    return 0
