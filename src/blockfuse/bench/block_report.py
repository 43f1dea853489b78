"""Tables, targets and plots of the block benchmark (``blockfuse bench block`` / ``model``)."""

from __future__ import annotations

from pathlib import Path

from blockfuse.bench import checks as checks_module, writer
from blockfuse.bench.checks import CPU_TARGET_TEXT
from blockfuse.bench.block import LABELS, MATERIALIZED_ATTENTION
from blockfuse.bench.writer import NOISE_NOTE, noisy, number, pyplot, spread_text

MODE_TITLES = {"infer": "inference forward", "fwd": "training forward", "bwd": "backward",
               "fwdbwd": "forward + backward"}


def _index(records) -> dict:
    return {(r["provider"], r["mode"]): r for r in records}


def _ms(record):
    return None if record is None or record.get("error") else record.get("ms")


def _providers(records) -> list[str]:
    return list(dict.fromkeys(r["provider"] for r in records))


def best(records, mode: str, prefix: str, key: str = "ms") -> tuple[float | None, str | None]:
    """The smallest ``key`` in ``mode`` among providers whose name starts with ``prefix``."""
    found = [(r[key], r["provider"]) for r in records
             if r["mode"] == mode and r["provider"].startswith(prefix) and not r.get("error")
             and r.get(key) is not None]
    return min(found) if found else (None, None)


# Issue targets: name -> (forward speed-up, forward+backward speed-up, memory ratio) against the
# fastest torch.compile mode; None: no target.
TARGETS = {
    "reordered": (1.1, 1.2, 0.75),
    "standard": (1.1, 1.2, 0.75),
    "olmo2-1b": (None, 1.05, 0.75),
}
# The fused-MLP issue's SigLIP-2 targets: name -> (forward speed-up, forward+backward speed-up) against
# the faster of eager and the fastest torch.compile mode, and the fused peak over eager's and over
# the smallest torch.compile peak.
TARGETS_VS_EAGER_OR_COMPILE = {"siglip2": (1.15, 1.2, 0.65, 0.7)}
ERROR_RATIO = 1.5  # fused bf16 error at most this many times the eager bf16 error (both against fp32)


def targets(workload: dict, records: list[dict], device: str = "cuda") -> list[dict]:
    """Each target of the blocks issue that applies to this workload, with status met / missed / n/a.
    Off CUDA the speed and memory targets are n/a (they are about a GPU); the error checks still count."""
    checks = []

    def check(text, value, bound, higher_is_better=True, speed=True):
        checks.append(checks_module.check(text, value, bound, higher_is_better, cuda_only=speed, device=device))

    goals = TARGETS.get(workload["name"])
    if goals is not None:
        forward_goal, step_goal, memory_goal = goals
        for mode, goal in (("fwd", forward_goal), ("fwdbwd", step_goal)):
            if goal is None:
                continue
            compiled, which = best(records, mode, "compile:")
            fused, fused_which = best(records, mode, "fused")
            ratio = compiled / fused if compiled and fused else None
            check(f"{MODE_TITLES[mode]}: fastest compile ({which}) / fastest fused ({fused_which})", ratio, goal)
        compiled_memory, which = best(records, "fwdbwd", "compile:", "peak_mib")
        fused_memory, fused_which = best(records, "fwdbwd", "fused", "peak_mib")
        ratio = fused_memory / compiled_memory if compiled_memory and fused_memory else None
        check(f"peak training memory: fused ({fused_which}) / compile ({which})", ratio, memory_goal, False)
    eager = next((r for r in records if r["provider"] == "eager" and not r.get("error")), None)
    goals = TARGETS_VS_EAGER_OR_COMPILE.get(workload["name"])
    if goals is not None:
        forward_goal, step_goal, eager_memory_goal, compile_memory_goal = goals
        for mode, goal in (("fwd", forward_goal), ("fwdbwd", step_goal)):
            candidates = [best(records, mode, "compile:"), (_ms(_index(records).get(("eager", mode))), "eager")]
            candidates = [c for c in candidates if c[0] is not None]
            baseline, which = min(candidates) if candidates else (None, None)
            fused, fused_which = best(records, mode, "fused")
            ratio = baseline / fused if baseline and fused else None
            check(f"{MODE_TITLES[mode]}: faster of eager and compile ({which}) / fastest fused ({fused_which})",
                  ratio, goal)
        fused_memory, fused_which = best(records, "fwdbwd", "fused", "peak_mib")
        eager_memory = next((r.get("peak_mib") for r in records if r["provider"] == "eager"
                             and r["mode"] == "fwdbwd" and not r.get("error")), None)
        compiled_memory, which = best(records, "fwdbwd", "compile:", "peak_mib")
        for baseline, label, goal in ((eager_memory, "eager", eager_memory_goal),
                                      (compiled_memory, f"compile ({which})", compile_memory_goal)):
            ratio = fused_memory / baseline if baseline and fused_memory else None
            check(f"peak training memory: fused ({fused_which}) / {label}", ratio, goal, False)
    for provider in ("fused", "fused+compile:default"):
        fused = next((r for r in records if r["provider"] == provider and not r.get("error")), None)
        for key, what in (("rel_err_out", "output"), ("rel_err_grad", "gradients")):
            if eager is None or fused is None or eager.get(key) is None or fused.get(key) is None:
                continue
            check(f"{provider} {what} error / eager {what} error (both vs fp32)",
                  fused[key] / eager[key] if eager[key] else None, ERROR_RATIO, False, speed=False)
    return checks


def targets_lines(workload: dict, records: list[dict], device: str) -> list[str]:
    """The Markdown lines of ``targets``: a check a line, after a word on the CPU."""
    checks = targets(workload, records, device)
    lines = []
    if device != "cuda" and any(CPU_TARGET_TEXT in t["text"] for t in checks):
        lines += ["The speed and memory targets are for CUDA: n/a on the CPU (only the error checks count here).",
                  ""]
    return lines + writer.checks_lines(checks)


CSV_FIELDS = ("provider", "mode", "ms", "p20", "p80", "gemm_tflops", "gemm_fraction", "peak_mib", "saved_mib",
              "rel_err_out", "max_abs_out", "max_abs_vs_eager", "rel_err_grad", "rel_err_dx", "first_call_s",
              "compile_cold_s", "compile_warm_s", "error")


def write_csv(path: Path, records: list[dict]) -> None:
    """One row per provider and mode, the fields of ``CSV_FIELDS`` (empty where not measured)."""
    writer.write_csv(path, records, CSV_FIELDS)


def against(records: list[dict], baseline: str) -> dict:
    """Per provider other than ``baseline``: each mode's speed-up over it (its ms / the provider's ms)
    and ``peak_ratio``, the provider's peak training memory over its; None where either is missing or
    either median is noisy (``writer.noisy``)."""
    index = _index(records)
    modes = [m for m in MODE_TITLES if any(r["mode"] == m for r in records)]
    base_peak = (index.get((baseline, "fwdbwd")) or {}).get("peak_mib")
    result = {}
    for provider in _providers(records):
        if provider == baseline:
            continue
        row = {}
        for mode in modes:
            base, ms = _ms(index.get((baseline, mode))), _ms(index.get((provider, mode)))
            shaky = noisy(index.get((baseline, mode))) or noisy(index.get((provider, mode)))
            row[mode] = base / ms if base and ms and not shaky else None
        peak = (index.get((provider, "fwdbwd")) or {}).get("peak_mib")
        row["peak_ratio"] = peak / base_peak if peak and base_peak else None
        result[provider] = row
    return result


def comparisons(records: list[dict]) -> dict:
    """The providers against eager with materialized attention (HF eager style), when it ran."""
    if not any(r["provider"] == MATERIALIZED_ATTENTION and _ms(r) for r in records):
        return {}
    return {MATERIALIZED_ATTENTION: {"label": LABELS[MATERIALIZED_ATTENTION],
                                     "providers": against(records, MATERIALIZED_ATTENTION)}}


def write_json(path: Path, meta: dict, workload: dict, records: list[dict]) -> None:
    writer.write_json(path, {"meta": meta, "workload": workload,
                             "targets": targets(workload, records, meta.get("device", "cuda")),
                             "comparisons": comparisons(records), "records": records})


def time_cell(record: dict, eager: dict | None) -> str:
    """A table cell: "error", "" (not timed), "ms (speed-up against the ``eager`` record)", or, where either
    median is noisy (``writer.noisy``), the ms with its spread and no speed-up."""
    if record.get("error"):
        return "error"
    if record.get("ms") is None:
        return ""
    if noisy(record):
        return f"{record['ms']:.3f} ({spread_text(record)})"
    if noisy(eager):
        return f"{record['ms']:.3f} (eager noisy)"
    eager_ms = _ms(eager)
    speedup = eager_ms / record["ms"] if eager_ms else None
    return f"{record['ms']:.3f} ({number(speedup, '.2f')}x)"


def backward_above_step(index: dict, provider: str) -> bool:
    """True when the provider's backward alone reads slower than its forward + backward: noise, not a figure."""
    backward, step = _ms(index.get((provider, "bwd"))), _ms(index.get((provider, "fwdbwd")))
    return backward is not None and step is not None and backward > step


def markdown(meta: dict, workload: dict, records: list[dict], with_targets: bool = True) -> str:
    """The run's Markdown: versions and command, how it was measured, (``with_targets``) the project's
    targets, the results table and the comparison with materialized attention."""
    index = _index(records)
    providers = _providers(records)
    modes = [m for m in MODE_TITLES if any(r["mode"] == m for r in records)]
    eager = {m: index.get(("eager", m)) for m in modes}
    shape = "x".join(map(str, workload["shape"]))
    device = meta.get("device", "cuda")
    lines = [
        f"# blockfuse block benchmark: {workload['name']}",
        "",
        f"- card: **{meta['card']}**; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"python {meta['python']}",
        f"- blockfuse source digest {meta.get('source_digest')}, date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- workload: {workload['layers']} layer(s), input {shape} {workload['dtype']}"
        + (", key-padding mask" if workload.get("padding_mask") else "")
        + (f", Linear layers {workload['linear']} ("
           + ("torchao.float8" if workload["linear"].startswith("torchao") else "blockfuse.fp8.convert") + ")"
           if workload.get("linear", "bf16") != "bf16" else "")
        + f"; {workload['forward_gflop']:.1f} GFLOP forward (GEMMs + attention)",
        "",
        ("Times: median ms of CUDA events (p20-p80 in the JSON), L2 flushed and gradients cleared before each"
         " call." if meta.get("device") == "cuda" else
         "Times: median ms of the CPU wall clock (p20-p80 in the JSON), gradients cleared before each call.") +
        " `infer`: forward under no_grad; `fwd`: training forward; `bwd`: the backward alone (its forward run"
        " untimed before each call); `fwdbwd`: forward + backward of a fixed output gradient. TFLOP/s: the"
        " GEMMs' and attention's FLOPs over the time" + _ceiling_text(workload) + ". Peak: memory allocated during"
        " one training step above what was allocated before it."
        " Errors: ||out - ref|| / ||ref|| against an fp32 eager run with the same weights (grad: every"
        " parameter gradient and the input gradient together). First call: seconds, compile included.",
        "",
    ]
    if with_targets:
        lines += ["## Targets", "", *targets_lines(workload, records, device), ""]
    lines += ["## Results", ""]
    rate_mode = next((m for m in ("fwdbwd", "fwd", "infer", "bwd") if m in modes), None)
    header = (["provider"] + [f"{m} ms (x eager)" for m in modes]
              + ([f"{rate_mode} TFLOP/s" + (" (of GEMM)" if workload.get("gemm_ceiling") else "")] if rate_mode else [])
              + ["peak MiB", "saved MiB", "err out", "err grad", "first call s"])
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| --- " * len(header) + "|")
    for provider in providers:
        row = [provider]
        failed = None
        for mode in modes:
            record = index.get((provider, mode))
            if record is None:
                row.append("")
            else:
                cell = time_cell(record, eager[mode])
                if mode in ("bwd", "fwdbwd") and backward_above_step(index, provider):
                    cell += " (noisy: bwd > fwdbwd)"
                row.append(cell)
                failed = record.get("error") or failed
        if rate_mode:
            rated = index.get((provider, rate_mode)) or {}
            rate = number(rated.get("gemm_tflops"), ".3g")
            if rated.get("gemm_fraction") is not None:
                rate += f" ({rated['gemm_fraction']:.0%})"
            row.append("" if rated.get("error") else rate)
        step = index.get((provider, "fwdbwd")) or next((r for r in records if r["provider"] == provider), {})
        peak = number(step.get("peak_mib"), ".0f") + ("*" if step.get("peak_note") else "")
        first = "/".join(number(index.get((provider, m), {}).get("first_call_s"), ".1f") for m in modes)
        if step.get("compile_cold_s") is not None:
            first += f" (compile cold {step['compile_cold_s']:.1f}, warm {step['compile_warm_s']:.1f})"
        saved = number(index.get((provider, "fwd"), {}).get("saved_mib"), ".0f")
        row += [peak, saved, number(step.get("rel_err_out"), ".2e"), number(step.get("rel_err_grad"), ".2e"), first]
        lines.append("| " + " | ".join(row) + " |")
        if failed:
            lines.append(f"| | {writer.code(failed)} |" + " |" * (len(header) - 2))
    backward_noise = any(backward_above_step(index, p) for p in providers)
    if backward_noise or any(noisy(r) for r in records):
        lines += ["", NOISE_NOTE + (" `bwd > fwdbwd`: the backward alone read slower than forward + backward, "
                                    "which only noise explains." if backward_noise else "")]
    if device != "cuda":
        lines += ["", "Peak and saved MiB: CUDA memory, not measured on the CPU."]
    if any(r.get("peak_note") for r in records):
        lines += ["", "\\* CUDA-graph modes: memory since the module was built, the graph pool included."]
    labelled = [p for p in providers if p in LABELS]
    if labelled:
        lines += ["", "Eager baselines: " + "; ".join(f"`{p}`: {LABELS[p]}" for p in labelled) + "."]
    return "\n".join(lines + _comparison_lines(records, modes)) + "\n"


def _comparison_lines(records: list[dict], modes: list[str]) -> list[str]:
    """The section that compares every provider with eager with materialized attention, when it ran."""
    compared = comparisons(records).get(MATERIALIZED_ATTENTION)
    if compared is None:
        return []
    peaks = {r["provider"]: r.get("peak_note") for r in records if r["mode"] == "fwdbwd"}
    lines = ["", f"## Against {compared['label']}", "",
             f"`{MATERIALIZED_ATTENTION}`: the eager module with attention computed as Hugging Face's eager "
             "attention does (`q @ k^T * head_dim**-0.5`, masked scores set to the dtype's minimum, softmax in "
             "fp32 cast back to the input dtype, `@ v`: the (batch, heads, seq, seq) scores in memory; rows "
             "with no key to attend are zero, as SDPA returns them), where `eager` calls "
             "`scaled_dot_product_attention`. Speed-up: its time over each provider's; peak: each provider's peak "
             "training memory over its.", "",
             "| provider | " + " | ".join(f"{m} speed-up" for m in modes) + " | peak ratio |",
             "| --- " * (len(modes) + 2) + "|"]
    index = _index(records)
    for provider, row in compared["providers"].items():
        shaky = {m: noisy(index.get((provider, m))) or noisy(index.get((MATERIALIZED_ATTENTION, m))) for m in modes}
        cells = [provider] + ["noisy" if shaky[m] else number(row.get(m), ".2f") for m in modes]
        cells.append(number(row["peak_ratio"], ".2f") + ("*" if row["peak_ratio"] and peaks.get(provider) else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _ceiling_text(workload: dict) -> str:
    ceiling = workload.get("gemm_ceiling")
    if not ceiling:
        return ""
    shape = "x".join(map(str, ceiling["shape"]))
    return (f" (in brackets: the fraction of a {shape} {ceiling['dtype']} GEMM's {ceiling['tflops']:.0f} TFLOP/s,"
            " measured in the same run)")


def write_markdown(path: Path, meta: dict, workload: dict, records: list[dict], with_targets: bool = True) -> None:
    path.write_text(markdown(meta, workload, records, with_targets))


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Speed-up against eager per mode, peak memory and error per provider. False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    index = _index(records)
    providers = _providers(records)
    modes = [m for m in MODE_TITLES if any(r["mode"] == m for r in records)]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    eager = {mode: _ms(index.get(("eager", mode))) for mode in modes}
    speedups = {MODE_TITLES[mode]: [eager[mode] / ms if eager[mode] and (ms := _ms(index.get((p, mode)))) else 0
                                    for p in providers] for mode in modes}
    any_noisy = False
    for mode, bars in zip(modes, writer.grouped_bars(axes[0], providers, speedups)):
        for bar, provider in zip(bars, providers):
            if noisy(index.get(("eager", mode))) or noisy(index.get((provider, mode))):
                bar.set_hatch("//")
                bar.set_alpha(0.5)
                any_noisy = True
    axes[0].axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes[0].set_ylabel("speed-up against eager")
    if any_noisy:
        axes[0].set_title("hatched: noisy (p80 > 2x p20), not a reliable ratio", fontsize=8)
    step = [index.get((p, "fwdbwd"), {}) for p in providers]
    peaks = [s.get("peak_mib") or 0 for s in step]
    axes[1].bar(range(len(providers)), peaks, color="tab:purple")
    axes[1].set_ylabel("peak training memory, MiB")
    if meta.get("device", "cuda") != "cuda" and not any(peaks):
        writer.missing_panel(axes[1], "no CUDA memory on CPU")
    axes[2].bar(range(len(providers)), [s.get("rel_err_grad") or 0 for s in step], color="tab:red")
    axes[2].set_ylabel("relative error of gradients vs fp32")
    for ax in axes[1:]:
        ax.set_xticks(range(len(providers)))
        ax.set_xticklabels(providers, rotation=35, ha="right", fontsize=7)
    shape = "x".join(map(str, workload["shape"]))
    return writer.save(figure, path, f"{workload['name']} {shape} {workload['dtype']}, {workload['layers']} layer(s): "
                                     f"{writer.versions_title(meta)}")


def command(kind: str, settings, out: Path) -> str:
    """The ``blockfuse bench block|model`` command that reproduces a run of ``settings`` (a
    ``bench.block.BlockSettings``), every choice spelled out."""
    import shlex

    from blockfuse.bench.runner import DTYPES
    from blockfuse.cliutil import format_shape
    from blockfuse.models import preset

    dtype = next(name for name, value in DTYPES.items() if value == settings.dtype)
    words = ["blockfuse", "bench", kind, settings.name]
    if settings.shape:
        words += ["--shape", format_shape(settings.shape)]
    default_layers = 1 if kind == "block" else preset(settings.name).layers
    if settings.layers is not None and settings.layers != default_layers:
        words += ["--layers", str(settings.layers)]
    words += ["--dtype", dtype, "--providers", ",".join(settings.providers), "--modes", ",".join(settings.modes)]
    words += ["--quick"] * settings.quick
    if settings.linear != "bf16":
        words += ["--linear", settings.linear]
    if settings.compile_times:
        compiled = [p for p in settings.providers if ":" in p]
        words += ["--compile-times"] if list(settings.compile_times) == compiled else \
            ["--compile-times", ",".join(settings.compile_times)]
    return shlex.join(words + ["--out", str(out)])


def run_and_write(kind: str, settings, meta: dict, out: Path, show_progress: bool = True, say=None,
                  with_targets: bool = True):
    """Runs ``bench.block.run_block`` (``show_progress`` and ``say``: its own) and writes
    ``out/<kind>-<name>.{json,md}`` after every provider, then the CSV and the PNG. ``meta`` gains the
    command and the elapsed time. The JSON always holds the targets, the Markdown when ``with_targets``.
    Returns ``(workload, records, stem, wrote_plot)``."""
    import time

    from blockfuse.bench import block

    meta["command"] = command(kind, settings, out)
    # NOTE: FP8 runs get their own files, and no targets (those are the bf16 blocks' against their peers)
    fp8 = settings.linear != "bf16"
    linear = settings.linear.replace(":", "-").replace("+", "-")  # (file names of letters, digits, '.', '_', '-')
    stem = out / (f"{kind}-{settings.name}" + ("-" + linear if fp8 else ""))
    with_targets = with_targets and not fp8
    began = time.perf_counter()

    def write(workload, records):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        write_json(stem.with_suffix(".json"), meta, workload, records)
        write_markdown(stem.with_suffix(".md"), meta, workload, records, with_targets)

    workload, records = block.run_block(settings, on_update=write, show_progress=show_progress, say=say)
    write(workload, records)
    write_csv(stem.with_suffix(".csv"), records)
    return workload, records, stem, write_plot(stem.with_suffix(".png"), meta, workload, records)
