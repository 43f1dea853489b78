"""The report as Markdown, and as the short summary printed in the terminal (rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from blockfuse.analyze.ceilings import rates
from blockfuse.analyze.fusion import LAYOUT_OPS, short_op
from blockfuse.analyze.wrapper import PASS_TITLES

if TYPE_CHECKING:  # report.py imports this module to write a Report
    from blockfuse.analyze.report import Report


def _number(value, digits: int = 3) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def _fraction(value) -> str:
    return "" if value is None else f"{value:.2f}"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ops(ops: list[str]) -> str:
    names = [short_op(op) for op in ops]
    shown = [n for n in names if n not in LAYOUT_OPS] or names
    return ", ".join(dict.fromkeys(shown))


def _header(report: Report) -> list[str]:
    meta = report.meta
    shapes = ", ".join("x".join(str(d) for d in shape) for shape in meta["input_shapes"])
    card = f"{meta['card']}"
    if meta.get("compute_capability"):
        card += f" (compute capability {meta['compute_capability']}, {meta['sm_count']} SMs)"
    lines = [
        f"# torch.compile analysis: {meta['target']}",
        "",
        f"- input {shapes} {meta['dtype']}; `torch.compile(mode={meta['mode']!r}, dynamic={meta['dynamic']})`"
        f"{', with backward' if meta['backward'] else ', forward only'}",
        f"- {card}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, python {meta['python']}",
        f"- {meta['date']}; the analysis took {meta['analysis_s']} s",
    ]
    if meta.get("command"):
        lines.append(f"- command: `{meta['command']}`")
    if report.ceilings:
        copy, gemm = report.ceilings["copy"], report.ceilings["gemm"]
        lines.append(
            f"- ceilings measured in this run: device-to-device copy {copy['gbps']:.0f} GB/s; "
            f"{gemm['dtype']} {'x'.join(map(str, gemm['shape']))} GEMM {gemm['tflops']:.0f} TFLOP/s")
    else:
        lines.append("- ceilings and per-kernel times: not measured (they need CUDA and `profile=True`)")
    return lines


def _summary(report: Report) -> list[str]:
    lines = ["", "## Summary", ""]
    for name, summary in report.passes.items():
        lines.append(f"- **{PASS_TITLES[name]}**: {summary.headline()}.")
    lines += ["", "| step | graphs | fused kernels (launches) | GEMMs | attention | custom ops | wrapper launches "
                  "| GPU kernels (profiler) | kernel time ms | step ms | first call s (compile) |",
              "| --- " * 11 + "|"]
    for name, s in report.passes.items():
        lines.append(
            f"| {PASS_TITLES[name]} | {len(s.modules)} | {s.fused_kernels} ({s.fused_launches}) | {s.gemms} "
            f"| {len(s.attention)} | {len(s.custom_ops)} | {s.wrapper_launches} | {_number(s.device_kernels)} "
            f"| {_number(s.kernel_ms)} | {_number(s.pass_ms)} | {_number(s.compile_s)} |")
    return lines


def _graph_breaks(report: Report) -> list[str]:
    count = sum(b.count for b in report.graph_breaks)
    lines = ["", "## Graph breaks", "",
             f"{count} graph break{'s' if count != 1 else ''}; Dynamo captured {report.graph_count} "
             f"graph{'s' if report.graph_count != 1 else ''} (from `torch._dynamo.explain` and Dynamo's counters)."]
    if report.graph_breaks:
        lines += ["", "| # | where | code | reason | id | count | suggestion |", "| --- " * 7 + "|"]
        for index, item in enumerate(report.graph_breaks):
            suggestion = item.suggestion or "; ".join(item.hints) or ""
            lines.append(f"| {index} | {_cell(item.where)} | `{_cell(item.code or '')}` | {_cell(item.reason)} "
                         f"| {item.gb_id or ''} | {item.count} | {_cell(suggestion)} |")
    return lines


def _modules(report: Report) -> list[str]:
    lines = ["", "## Graphs", "", "| module | step | device | generated kernels | launches | provenance |",
             "| --- " * 6 + "|"]
    for m in report.modules:
        lines.append(f"| {m['id']} | {m['kind']} | {m['device']} | {m['kernels']} | {m['launches']} "
                     f"| {'yes' if m['provenance'] else 'no'} |")
    return lines


def _kernels(report: Report) -> list[str]:
    lines = ["", "## Generated kernels", ""]
    timed = report.meta.get("profiled")
    for name in report.passes:
        records = [k for k in report.kernels if k.phase == name]
        if not records:
            continue
        lines += [f"### {PASS_TITLES[name]}", "",
                  "| module | kernel | kind | what it does | fuses (ATen) | loads / stores / reductions | numel "
                  "| launches | MB moved | time us | GB/s | of copy |", "| --- " * 12 + "|"]
        for k in records:
            counts = "/".join("?" if v is None else str(v) for v in (k.loads, k.stores, k.reductions))
            megabytes = "" if k.bytes is None else f"{k.bytes / 1e6:.3g}"
            megabytes += "*" if megabytes and k.bytes_source != "inductor" else ""
            lines.append(
                f"| {k.module} | `{k.name}` | {k.kind} | {_cell(k.description)} | {_cell(_ops(k.aten_ops))} "
                f"| {counts} | {_number(k.numel)} | {k.launches} | {megabytes} | {_number(k.time_us)} "
                f"| {_number(k.gbps, 4)} | {_fraction(k.frac_copy)} |")
        sources = [(k, line) for k in records for line in k.user_lines[:3]]
        if sources:
            lines += ["", "User code behind each kernel (Inductor's provenance tracking, innermost frame):", ""]
            for k, line in sources:
                lines.append(f"- `{k.name}`: `{line}`")
        lines.append("")
    if any(k.owner == "blockfuse" for k in report.kernels):
        lines.append("Kind `blockfuse`: one of blockfuse's own Triton kernels (`blockfuse.ops`), which Inductor "
                     "emitted into the wrapper and launches like its own; the kernel column gives Inductor's name "
                     "for it, what it does the kernel's own name.")
        lines.append("")
    lines.append("MB moved: Inductor's own estimate (`kernel_num_gb`) where given; * marks an estimate from "
                 "the sizes of the kernel's arguments (each read or written once)."
                 + ("" if timed else " Times need CUDA."))
    return lines


def _calls(report: Report) -> list[str]:
    calls = [launch for launch in report.launches if launch.kind in ("extern", "wrapper op")]
    lines = ["", "## Library and op calls", ""]
    if not calls:
        return lines + ["None."]
    lines += ["| module | # | call | category | operands | from | GFLOP | time us | TFLOP/s | of GEMM | GPU kernels |",
              "| --- " * 11 + "|"]
    for launch in calls:
        measured = rates(launch.bytes, launch.flops, launch.time_us, report.ceilings)
        category = launch.category + (f" ({launch.attention})" if launch.attention else "")
        gflop = "" if not launch.flops else f"{launch.flops / 1e9:.3g}"
        device = ", ".join(dict.fromkeys(_short_kernel(k) for k in launch.device_kernels))
        origin = launch.user_lines[0] if launch.user_lines else ", ".join(launch.source_nodes[:4])
        lines.append(f"| {launch.module} | {launch.index} | `{launch.target}` | {category} "
                     f"| {_cell(', '.join(launch.args))} | {_cell(origin)} | {gflop} | {_number(launch.time_us)} "
                     f"| {_number(measured['tflops'])} | {_fraction(measured['frac_gemm'])} | {_cell(device)} |")
    return lines


def _short_kernel(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _reconciliation(report: Report) -> list[str]:
    lines = ["", "## Launches: wrapper code vs profiler", ""]
    for name, s in report.passes.items():
        if s.reconciliation is None:
            lines.append(f"- **{PASS_TITLES[name]}**: {s.wrapper_launches} launches in the wrapper code "
                         "(no profiler on this device).")
            continue
        lines.append(f"- **{PASS_TITLES[name]}**: {s.reconciliation}.")
        if s.time_ms:
            parts = ", ".join(f"{key} {value:.3f} ms" for key, value in s.time_ms.items())
            gap = "" if s.pass_ms is None or s.kernel_ms is None else \
                f"; the step takes {s.pass_ms:.3f} ms on the GPU clock, {s.pass_ms - s.kernel_ms:.3f} ms of it idle"
            lines.append(f"  Kernel time {s.kernel_ms:.3f} ms: {parts}{gap}.")
    return lines


def _recompiles(report: Report) -> list[str]:
    if report.recompiles is None:
        return []
    r = report.recompiles
    lines = ["", "## Recompiles", "", f"Probe backend `{r.backend}`; input shapes "
             + ", ".join(" / ".join("x".join(map(str, s)) for s in call) for call in r.shapes) + ".", "",
             r.verdict() + ".", ""]
    for variant in r.variants:
        lines.append(f"- {variant.name}: {variant.compiles} compile(s)"
                     + (f"; error: {variant.error}" if variant.error else ""))
        for failure in variant.guard_failures:
            lines.append(f"  - guard failed: `{_cell(failure)}`")
    return lines


def _notes(report: Report, plot: str | None) -> list[str]:
    lines = []
    if plot:
        lines += ["", "## Roofline", "", f"![roofline]({plot})", "",
                  "Left: kernels with a FLOP count against the measured GEMM and copy ceilings. Right: the "
                  "memory-bound kernels' achieved bandwidth against the copy ceiling."]
    lines += ["", "## How this was measured", "",
              "- Kernels and launches: parsed from the wrapper modules Inductor generated (kept beside this "
              "report under `<name>-code/`); ops from Inductor's provenance tracking where it ran, else from "
              "the comments above each kernel, else from the kernel's name.",
              "- Graph breaks: `torch._dynamo.explain` plus `torch._dynamo.utils.counters['graph_break']`.",
              ]
    if report.meta.get("profiled"):
        lines += [f"- Per-kernel times: `torch.profiler` CUDA kernels, median over {report.meta['steps']} warm steps "
                  "of each kind, L2 not flushed between kernels (as inside a real step: a kernel that reads what "
                  "the previous one wrote may beat the copy ceiling, measured cold). Step time: CUDA events "
                  "around the step, median of 20; the idle part is launch overhead and gaps between kernels.",
                  "- Backward step: the forward runs untimed before it; gradients are set to None first, so no "
                  "gradient-accumulation kernels run."]
    lines += [f"- {note}" for note in report.notes]
    return lines


def report_markdown(report: Report, plot: str | None = None) -> str:
    lines = (_header(report) + _summary(report) + _graph_breaks(report) + _modules(report) + _kernels(report)
             + _calls(report) + _reconciliation(report) + _recompiles(report) + _notes(report, plot))
    return "\n".join(lines) + "\n"


def summary_renderable(report: Report):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    meta = report.meta
    title = (f"{meta['target']} {', '.join('x'.join(map(str, s)) for s in meta['input_shapes'])} {meta['dtype']} "
             f"on {meta['card']}, mode {meta['mode']}: {sum(b.count for b in report.graph_breaks)} graph breaks, "
             f"{report.graph_count} graph(s)")
    items = [Text(title, style="bold")]
    for name, summary in report.passes.items():
        items.append(Text(f"{PASS_TITLES[name]}: {summary.headline()}"))
        if summary.reconciliation:
            items.append(Text(f"  profiler: {summary.reconciliation}", style="dim"))
    table = Table(title="generated kernels")
    for column in ("step", "kernel", "kind", "what it does", "launches", "time us", "GB/s", "of copy"):
        table.add_column(column, justify="right" if column in ("launches", "time us", "GB/s", "of copy") else "left")
    for k in report.kernels:
        table.add_row(k.phase, k.name if len(k.name) <= 50 else k.name[:47] + "...", k.kind, k.description,
                      str(k.launches), _number(k.time_us), _number(k.gbps, 4), _fraction(k.frac_copy))
    items.append(table)
    return Group(*items)
