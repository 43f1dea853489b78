"""``blockfuse analyze BLOCK``: the command line of the compile analysis."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from blockfuse.cliutil import UsageError, default_out, format_shape, parse_shapes

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def add_analyze_parser(subparsers) -> None:
    from blockfuse.analyze.api import MODES

    parser = subparsers.add_parser(
        "analyze",
        help="what torch.compile did to a block: graph breaks, fused kernels, launches, roofline",
        description="Compile BLOCK with torch.compile and report graph breaks, the kernels Inductor generated "
                    "and what each fuses, library calls, launches per step (wrapper code and profiler), and on "
                    "CUDA each kernel's time against the copy and GEMM ceilings. Writes <name>.md, <name>.json, "
                    "<name>.png and the generated code. On the CPU, a reference block without --shape runs at "
                    "1x16x64 (the preset shrunk), not at its GPU shape.",
    )
    parser.add_argument("block", metavar="BLOCK",
                        help="a reference block (reordered, standard, ...) or path/to/file.py:factory returning "
                             "(module, inputs)")
    parser.add_argument("--shape", "--shapes", dest="shapes", nargs="+", metavar="SHAPE",
                        help="input shape(s) such as 4x2048x1024 or 4,2048,1024 (default: the block's own on "
                             "CUDA, 1x16x64 on the CPU); with several, the first is analyzed and all of them "
                             "probe recompiles")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    parser.add_argument("--mode", choices=MODES, default="default")
    parser.add_argument("--backward", action="store_true", help="also compile and measure a training step")
    parser.add_argument("--dynamic", choices=("auto", "true", "false"), default="auto",
                        help="torch.compile's dynamic= (auto: None)")
    parser.add_argument("--compare", metavar="OTHER_BLOCK", help="analyze OTHER_BLOCK too and compare the two")
    parser.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps per kind of step (default 5)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiler, the ceilings and the plot")
    parser.add_argument("--out", type=Path,
                        help="output folder (default: ./blockfuse-results/<date>-<card>/analyze)")
    parser.set_defaults(func=run_analyze)


def _device(text: str | None) -> str:
    import torch

    if text is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cuda", "cpu"):
        raise UsageError(f"--device: expected cuda or cpu, got {text!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {text}: no CUDA device is available (use --device cpu)")
    return text


def _command(args: argparse.Namespace, shapes, device: str) -> str:
    """The command that reproduces this run, shapes in the ``x`` form."""
    words = ["blockfuse", "analyze", args.block]
    if shapes:
        words += ["--shape", *(format_shape(s) for s in shapes)]
    words += ["--dtype", args.dtype, "--mode", args.mode, "--device", device]
    words += (["--backward"] if args.backward else []) + (["--compare", args.compare] if args.compare else [])
    if args.dynamic != "auto":
        words += ["--dynamic", args.dynamic]
    if args.no_profile:
        words.append("--no-profile")
    return shlex.join(words)


def _load(spec: str, shapes, dtype, device) -> dict:
    """Build the target and the recompile probe's inputs (bad input fails here, before any compile)."""
    from blockfuse.analyze.targets import inputs_for_shape, load_target

    module, inputs, label = load_target(spec, shapes[0] if shapes else None, dtype, device)
    more = [inputs_for_shape(spec, shape, dtype, device, seed=i + 1) for i, shape in enumerate(shapes[1:])]
    return {"module": module, "inputs": inputs, "label": label, "more": more}


def _analyze_one(target: dict, args, command: str, console):
    from blockfuse.analyze.api import analyze

    steps = "the inference step" + (" and a training step" if args.backward else "")
    shapes = ", ".join(format_shape(t.shape) for t in target["inputs"] if hasattr(t, "shape"))
    # NOTE: one printed line per stage, no spinner: a display thread disturbs host timings (on a 2-core CPU,
    # Inductor's OpenMP kernels wait for the core it holds), as in `blockfuse report`.
    console.print(f"analyze {target['label']} ({shapes}): graph breaks, then compiling, running and timing "
                  f"{steps}" + (f", then {len(target['more'])} recompile probe(s)" if target["more"] else "")
                  + " ...", soft_wrap=True)
    began = time.perf_counter()
    dynamic = {"auto": None, "true": True, "false": False}[args.dynamic]
    report = analyze(target["module"], *target["inputs"], mode=args.mode, backward=args.backward, dynamic=dynamic,
                     recompile_inputs=target["more"] or None, name=target["label"], profile=not args.no_profile,
                     steps=args.steps)
    report.meta["command"] = command
    console.print(f"analyze {target['label']}: done in {time.perf_counter() - began:.1f} s", soft_wrap=True)
    return report


def run_analyze(args: argparse.Namespace) -> int:
    import torch

    if args.steps < 1:
        raise UsageError(f"--steps: expected at least 1 profiled step, got {args.steps}")
    device = _device(args.device)
    dtype = getattr(torch, DTYPES[args.dtype])
    shapes = parse_shapes(args.shapes)

    from rich.console import Console

    from blockfuse.analyze.targets import default_shape

    console = Console(width=160)
    specs = [args.block] + ([args.compare] if args.compare else [])
    chosen = {spec: shapes for spec in specs}
    if not shapes:
        for spec in specs:
            shape, why = default_shape(spec, device)
            if shape is not None:
                chosen[spec] = [shape]
                console.print(why + "; pass --shape to choose", soft_wrap=True)
    # the recorded command names the chosen shape where every target runs at it
    same = all(chosen[spec] == chosen[args.block] for spec in specs)
    command = _command(args, chosen[args.block] if same else shapes, device)
    out = args.out
    if out is None:
        card = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
        out = default_out(card) / "analyze"

    targets = [_load(spec, chosen[spec], dtype, device) for spec in specs]
    reports = []
    for target in targets:
        report = _analyze_one(target, args, command, console)
        report.print_summary(console)
        written = report.write(out)
        console.print(f"wrote {', '.join(str(p) for p in written.values())}")
        reports.append(report)
    if args.compare:
        from blockfuse.analyze.compare import compare

        comparison = compare(*reports)
        comparison.print_summary(console)
        written = comparison.write(out)
        console.print(f"wrote {', '.join(str(p) for p in written.values())}")
    return 0
