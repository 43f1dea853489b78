"""``report.md`` and ``report.json`` of ``blockfuse report``: the card and versions, what was skipped, a table of
the parts, a section per part (written from its result), and last, the verdict for this card
(``full_report.verdict``); the project's targets only with ``--targets``."""

from __future__ import annotations

from pathlib import Path

from blockfuse.bench import writer
from blockfuse.bench.block_report import time_cell
from blockfuse.bench.full_report import parts, verdict
from blockfuse.bench.writer import card_text, noisy, number, spread_text


def write_report(out: Path, document: dict) -> None:
    writer.write_json(out / "report.json", document)
    (out / "report.md").write_text(markdown(document))


def _number(value, spec: str) -> str:
    return number(value, spec, "n/a")


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
    for place, (name, entry) in enumerate(document["parts"].items(), start=1):
        lines += ["", f"## {place}. {entry['title']}", ""]
        if entry["status"] == "failed":
            lines += [f"**Failed** after {entry['elapsed_s']} s; the other parts still ran.", "",
                      "```", entry["error"], "```"]
        elif entry["status"] == "ok":
            lines += sections[name](entry["result"], meta)
        else:
            lines.append("(still running, or the run was cut short here)")
    if document.get("targets_shown"):
        lines += ["", "## Targets", "", "This project's own targets (`--targets`), for its GPU runs: not advice.", ""]
        lines += _targets_lines(document)
    if "verdict" in document:
        lines += ["", "## Verdict for this card", ""] + verdict.markdown_lines(document["verdict"])
    return "\n".join(lines) + "\n"


def _targets_lines(document: dict) -> list[str]:
    """The block and model parts' target checks (their JSON holds them whether shown or not)."""
    lines = []
    for name, entry in document["parts"].items():
        checks = (entry.get("result") or {}).get("targets")
        if checks is not None:
            lines += [f"{entry['title']}:", "", *writer.checks_lines(checks), ""]
    return lines or ["(no part with targets ran)"]


def _analyze_markdown(result: dict, meta: dict) -> list[str]:
    shapes = ", ".join("x".join(map(str, s)) for s in result["input_shapes"])
    lines = [
        f"`torch.compile` (mode default) of one `{parts.BLOCK}` layer on {shapes} bf16, inference and a training step "
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
    index = {(r["provider"], r["mode"]): r for r in records}
    present = [p for p in parts.COMPILE_TABLE if any(r["provider"] == p for r in records)]
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


def _rope_markdown(result: dict, meta: dict) -> list[str]:
    records = {r["provider"]: r for r in result["records"]}
    cuda = meta["device"] == "cuda"
    timing = ("median of CUDA-graph replays, L2 flushed (the kernels' own time); host ms: back-to-back eager "
              "calls, host overhead included" if cuda else "wall clock on the CPU")
    lines = [f"**{parts.rope_line(result)}**", "",
             f"Timing: {timing}. Files: {_links(result['files'])}; reproduce alone: `{result['meta']['command']}`.",
             "", "| provider | ms | " + ("host ms | of copy bandwidth | " if cuda else "") + "rel. error vs fp32 |",
             "| --- " * (5 if cuda else 3) + "|"]
    for provider in parts.ROPE_PROVIDERS:
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
