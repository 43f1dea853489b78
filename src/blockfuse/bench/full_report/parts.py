"""The four parts of ``blockfuse report``, each a function ``(settings, meta, console) -> result``:

1. ``analyze``: what torch.compile does to the ``reordered`` block, inference and a training step
   (``blockfuse.analyze``; on CUDA with the copy / GEMM ceilings and the profiler);
2. ``block``: the ``reordered`` block with every provider (``blockfuse bench block reordered``;
   ``--fast`` drops the max-autotune providers);
3. ``surgical``: inference of ``te-4layer``, the 4-layer model of the surgical-compilation experiment,
   eager vs torch.compile vs surgical compile vs fused, with the relative error and the max abs
   difference of the output against an fp32 run and against eager, all with the same weights;
4. ``rope``: RoPE alone, eager vs torch.compile vs blockfuse, forward, at one shape
   (``blockfuse bench ops --op rotary``).

A result is a dict with a one-line ``headline`` and the ``files`` the part wrote; the rest is the part's own
(its records, workload, tables), all of it written into ``report.json``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import torch

from blockfuse.analyze.targets import CPU_SHAPE
from blockfuse.bench.writer import noisy, number, spread_text

BLOCK = "reordered"
MODEL = "te-4layer"
# te-4layer inference: whole-model compile, surgical compile (where bench.block has it) and fused ops
MODEL_PROVIDERS = ("eager", "compile:default", "surgical:default", "fused")
ROPE_PROVIDERS = ("eager", "compile", "blockfuse")
# the compile-mode table: these providers' compiles are also timed with cold and with warm caches
COMPILE_TABLE = ("eager", "compile:default", "compile:reduce-overhead", "compile:max-autotune")

TITLES = {
    "analyze": f"compile analysis of `{BLOCK}` (inference + backward)",
    "block": f"`{BLOCK}` block, every provider",
    "surgical": f"`{MODEL}` inference (surgical compilation)",
    "rope": "RoPE alone, forward",
}


@dataclass(frozen=True)
class ReportSettings:
    device: torch.device
    out: Path
    fast: bool = False
    quick: bool = False
    targets: bool = False  # the project's targets in the parts' Markdown too (always in their JSON)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """Every block's input shape: None (each preset's own) on CUDA, ``CPU_SHAPE`` on the CPU."""
        return None if self.cuda else CPU_SHAPE




def runners() -> dict:
    """The parts in the order they run (looked up when called, so a test can replace one)."""
    return {"analyze": analyze_part, "block": block_part, "surgical": surgical_part, "rope": rope_part}


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
                                                                  show_progress=settings.cuda,
                                                                  with_targets=settings.targets)
    files = {suffix: stem.with_suffix(f".{suffix}").name for suffix in ("json", "csv", "md")}
    if plotted:
        files["png"] = stem.with_suffix(".png").name
    return {"meta": part_meta, "workload": workload, "records": records, "files": files,
            "targets": block_report.targets(workload, records, settings.device.type),
            "table": block_report.markdown(part_meta, workload, records, settings.targets)}


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
    result["headline"] = f"{len(providers)} providers, {len(records)} measurements, {failed} failed"
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
        speed = f"compile:default {number(speedup, '.2f', 'n/a')}x eager"
    result["headline"] = f"{speed}, max abs difference {number(difference, '.3g', 'n/a')} vs eager"
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
    report.write_markdown(settings.out / files["markdown"], part_meta, copy_ceiling, records, settings.targets)
    if report.write_plot(settings.out / "ops-rotary.png", part_meta, copy_ceiling, records):
        files["png"] = "ops-rotary.png"
    result = {"meta": part_meta, "shape": list(shape), "copy": copy_ceiling, "records": records, "files": files}
    result["headline"] = rope_line(result)
    return result


def rope_line(result: dict) -> str:
    """One line: each provider's forward ms, its speed-up over eager (and blockfuse's over compile); a
    noisy median (``writer.noisy``) is given with its spread and takes part in no ratio."""
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
