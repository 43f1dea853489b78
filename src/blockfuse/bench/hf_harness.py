"""What the Hugging Face model benchmarks (``blockfuse bench model hf-llama`` and ``hf-siglip2``) share:
timing a call, the training steps (a loss of the last hidden state, or a causal LM's own loss) and their
fp32 oracles, the errors against them, running each provider with its failure reported rather than raised,
speed-ups, the issue's target checks, and writing the records as JSON, CSV, Markdown and a PNG.

A record is one provider in one mode: ``provider``, ``mode``, ``ms`` / ``p20`` / ``p80`` (the
median and percentiles of the mode's own time: a call, a step, a prefill, a decoded token), and
whatever else the benchmark measured; or ``provider``, ``mode`` and ``error``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from blockfuse.bench import checks, timing, writer
from blockfuse.bench.block import _total_relative_error
from blockfuse.bench.runner import _describe, relative_error


@dataclass(frozen=True)
class Settings:
    """One run of a Hugging Face model benchmark."""

    shape: Any  # the benchmark's own: hf_llama.LlamaShape, hf_siglip2.SiglipShape
    dtype: str  # a key of runner.DTYPES
    providers: tuple[str, ...]
    modes: tuple[str, ...]
    device: torch.device
    quick: bool = False
    tiny: bool = False  # the shape's widths are the tiny model's (said in the command that reproduces the run)


# ----------------------------------------------------------------------------------------
# Timing and numerics
# ----------------------------------------------------------------------------------------


def time_call(fn: Callable, device: torch.device, quick: bool, parameters=None) -> timing.Timing:
    """CUDA: ``timing.time_cuda`` (do_bench, the L2 flushed before each call; ``parameters``' grads
    set to None before each); CPU: the wall clock."""
    if device.type == "cuda":
        # (at least 5 timed calls: a model's step of 100+ ms got 2-4 within --quick's 400 ms)
        return timing.time_cuda(fn, warmup_ms=100 if quick else 500, rep_ms=400 if quick else 2000,
                                grad_to_none=parameters, min_reps=5)
    return timing.time_cpu(fn, warmup=1, rep_ms=20 if quick else 200, min_reps=3, max_reps=20 if quick else 200)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds_of_first_call(fn: Callable, device: torch.device):
    """(fn's result, the seconds it took, compile included)."""
    began = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, round(time.perf_counter() - began, 3)


def peak_mib(fn: Callable, device: torch.device) -> float | None:
    """Memory one call allocates above what is allocated before it (CUDA); None elsewhere."""
    return timing.peak_memory_mib(fn) if device.type == "cuda" else None


def mean_square(hidden: torch.Tensor) -> torch.Tensor:
    """The loss ``h.float().pow(2).mean()``."""
    return hidden.float().pow(2).mean()


def training_step(run: Callable, inputs: dict, parameters, loss: Callable = mean_square) -> torch.Tensor:
    """Forward, ``loss`` of the last hidden state, backward (grads set to None first, as ``zero_grad``
    does). Returns the last hidden state."""
    for parameter in parameters:
        parameter.grad = None
    hidden = run(**inputs).last_hidden_state
    loss(hidden).backward()
    return hidden


def fp32_reference(base: torch.nn.Module, inputs: dict, loss: Callable = mean_square) -> dict:
    """The last hidden state and the parameter grads of an fp32 eager step with base's weights
    (floating inputs widened to fp32)."""
    model = copy.deepcopy(base).float()
    inputs = {key: value.float() if value.is_floating_point() else value for key, value in inputs.items()}
    parameters = dict(model.named_parameters())
    hidden = training_step(model, inputs, parameters.values(), loss).detach()
    return {"hidden": hidden, "grads": {name: p.grad for name, p in parameters.items()}}


def causal_lm_step(run: Callable, inputs: dict, parameters) -> tuple[torch.Tensor, bool]:
    """Forward with ``labels`` among ``inputs`` (the model's own loss over the vocabulary), backward of that
    loss (grads set to None first, as ``zero_grad`` does). Returns (the loss detached, whether the output
    holds the logits)."""
    for parameter in parameters:
        parameter.grad = None
    output = run(**inputs)
    output.loss.backward()
    return output.loss.detach(), output.logits is not None


def fp32_causal_lm_reference(base: torch.nn.Module, inputs: dict) -> dict:
    """The loss and the parameter grads of an fp32 eager ``causal_lm_step`` with base's weights."""
    model = copy.deepcopy(base).float()
    parameters = dict(model.named_parameters())
    loss, _ = causal_lm_step(model, inputs, parameters.values())
    return {"loss": loss, "grads": {name: p.grad for name, p in parameters.items()}}


def gradient_errors(named_parameters, reference_grads, not_worst: tuple[str, ...] = ()) -> dict:
    """Relative error of all grads together and of the worst parameter (of those whose names do not end
    with one of ``not_worst``)."""
    grads = {name: parameter.grad for name, parameter in named_parameters}
    missing = [name for name, grad in grads.items() if grad is None]
    if missing:
        return {"rel_err_grad": float("nan"), "rel_err_grad_worst": float("nan"), "grad_worst_parameter": missing[0]}
    worst, worst_name = 0.0, None
    for name, grad in grads.items():
        if name.endswith(not_worst):
            continue
        error = relative_error(grad, reference_grads[name])
        if not error <= worst:  # (NaN included)
            worst, worst_name = error, name
    return {"rel_err_grad": _total_relative_error(grads, reference_grads), "rel_err_grad_worst": worst,
            "grad_worst_parameter": worst_name}


def step_errors(hidden: torch.Tensor, named_parameters, reference: dict, not_worst: tuple[str, ...] = ()) -> dict:
    """The errors of one training step against ``fp32_reference``: the last hidden state and the grads."""
    return {"rel_err_out": relative_error(hidden, reference["hidden"]),
            **gradient_errors(named_parameters, reference["grads"], not_worst)}


def loss_errors(loss: torch.Tensor, named_parameters, reference: dict) -> dict:
    """The errors of one ``causal_lm_step`` against ``fp32_causal_lm_reference``: the loss and the grads."""
    return {"rel_err_loss": relative_error(loss, reference["loss"]),
            **gradient_errors(named_parameters, reference["grads"])}


def graph_breaks() -> dict:
    """The graph breaks Dynamo counted since the last ``torch._dynamo.utils.counters.clear()``."""
    breaks = torch._dynamo.utils.counters["graph_break"]
    return {"graph_breaks": sum(breaks.values()), "graph_break_reasons": sorted(breaks)[:5]}


# ----------------------------------------------------------------------------------------
# Running providers
# ----------------------------------------------------------------------------------------


def run_guarded(name: str, modes: Sequence[str], measure: Callable[[], list[dict]], device: torch.device,
                guard=None) -> list[dict]:
    """``measure()``'s records, within ``guard`` (a context manager) and from a fresh Dynamo; a provider
    that raises gets its error in one record per mode, and the others still run."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        with guard or contextlib.nullcontext():
            records = measure()
        synchronize(device)  # (a kernel's asynchronous error is this provider's)
        return records
    except Exception as error:  # noqa: BLE001 (a failing provider is reported, the rest still run)
        failure = {"error": _describe(error), "traceback": traceback.format_exc(limit=-6)}
        return [{"provider": name, "mode": mode, **failure} for mode in modes]
    finally:
        torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            # NOTE: after a CUDA error that broke the context (an illegal address) this raises too; the
            # error is in the records already, and the providers after this one will record theirs.
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()


def run_providers(label: str, providers: Sequence[str], setup: Sequence[tuple[str, Callable[[], None]]],
                  measure: Callable[[str], list[dict]], add_speedups: Callable[[list[dict]], None],
                  on_update: Callable | None = None, show_progress: bool = True) -> list[dict]:
    """Runs each ``(title, fn)`` of ``setup`` (the oracles), then ``measure(name)`` for each provider in
    order, printing one line per provider; ``on_update(records)`` after each. ``show_progress=False``
    hides the progress bar (its refresh thread skews CPU timings on a small machine)."""
    from rich.progress import Progress

    records: list[dict] = []
    with Progress(transient=True, disable=not show_progress) as progress:
        task = progress.add_task(label, total=len(setup) + len(providers))
        for title, fn in setup:
            progress.update(task, description=f"{label}: {title}")
            fn()
            progress.advance(task)
        for name in providers:
            progress.update(task, description=f"{label}: {name}")
            measured = measure(name)
            records.extend(measured)
            add_speedups(records)
            failed = next((r["error"] for r in measured if r.get("error")), None)
            status = failed or ", ".join(f"{r['mode']} {r['ms']:.2f} ms" for r in measured)
            progress.console.print(f"{name:<26} {status}", soft_wrap=True)
            if on_update is not None:
                on_update(records)
            progress.advance(task)
    return records


def add_speedups(records: list[dict], baselines: Sequence[str]) -> None:
    """``speedup_vs_<baseline>``: the baseline's median ms in the same mode over this provider's (> 1: faster)."""
    index = {(r["provider"], r["mode"]): r for r in records if not r.get("error")}
    for (_, mode), record in index.items():
        for baseline in baselines:
            if (baseline, mode) in index:
                record[f"speedup_vs_{baseline}"] = index[(baseline, mode)]["ms"] / record["ms"]


# ----------------------------------------------------------------------------------------
# Targets
# ----------------------------------------------------------------------------------------


def pairs_to_check(records: list[dict], pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The first (eager) pair always, each other (compiled) pair when either of its providers ran."""
    ran = {r["provider"] for r in records}
    return [pair for k, pair in enumerate(pairs) if not k or set(pair) & ran]


def pair_check(records: list[dict], mode: str, ours: str, baseline: str, field: str, text: str, bound: float,
               speedup: bool, missing_mode: str, unmeasured: str = "") -> dict:
    """The target on ``ours`` against ``baseline`` in ``mode``: a speed-up (``speedup``: the baseline's
    ``field`` over ours, at least ``bound``) or a ratio (ours over the baseline's, at most ``bound``);
    n/a with the reason where either did not run or failed, ``mode`` was not run (``missing_mode``), or
    the field is missing (``unmeasured``)."""
    ran = {r["provider"] for r in records}
    index = {(r["provider"], r["mode"]): r for r in records}
    pair = (ours, baseline)
    why = next((f"{p} not run" for p in pair if p not in ran), None)
    why = why or next((f"{p} failed" for p in pair if index.get((p, mode), {}).get("error")), None)
    why = why or (missing_mode if not any(r["mode"] == mode for r in records) else None)
    mine, theirs = (index.get((p, mode), {}).get(field) for p in pair)
    value = (theirs / mine if speedup else mine / theirs) if mine and theirs else None
    return checks.check(text, value, bound, speedup, why=why or unmeasured or f"{field} missing")


# ----------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------


def write_json(path: Path, meta: dict, workload: dict, targets: list[dict], records: list[dict]) -> None:
    writer.write_json(path, {"meta": meta, "workload": workload, "targets": targets, "records": records})


def number(value, spec: str) -> str:
    """A cell of the Hugging Face tables: ``writer.number``, "-" where not measured."""
    return writer.number(value, spec, "-")


def error(record: dict, key: str) -> str:
    """A record's relative error ``key`` as a table cell ("-" when absent)."""
    return number(record.get(key), ".2e")


def timed(record: dict, spec: str = ".2f") -> str:
    """``ms (p20-p80)`` of a record."""
    return f"{record['ms']:{spec}} ({record['p20']:{spec}}-{record['p80']:{spec}})"


def meta_lines(meta: dict) -> list[str]:
    """The Markdown lines that say where and with what a run was measured, and how to repeat it."""
    return [
        f"- card: **{meta['card']}**; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"python {meta['python']}; transformers {meta.get('transformers')}, "
        f"liger-kernel {meta.get('liger_kernel') or 'not installed'}",
        f"- blockfuse {meta.get('blockfuse_implementation')} (source digest {meta.get('source_digest')}, "
        f"git {meta.get('git_commit')}), date {meta['date']}",
        f"- command: `{meta['command']}`",
    ]


def time_note(meta: dict) -> str:
    return ("Times: median ms of CUDA events (p20-p80), L2 flushed before each call." if meta.get("device") == "cuda"
            else "Times: median ms of the CPU wall clock (p20-p80).")


def run_and_write(benchmark, settings: Settings, meta: dict, out: Path, show_progress: bool = True):
    """Runs ``benchmark`` (the module ``bench.hf_llama`` or ``hf_siglip2``: its ``command``, ``workload_of``,
    ``run``, ``targets``, ``markdown``, ``CSV_FIELDS`` and ``write_plot``) with ``settings``, and writes
    ``out/model-NAME.{json,md}`` (NAME: the workload's ``name``, ``hf-llama``, ``hf-qwen3``, ...) after each
    provider, then the CSV and the PNG. ``meta`` gains the transformers version, the command and the elapsed
    time. Returns ``(workload, records, stem, wrote_plot)``."""
    import transformers

    meta["transformers"] = transformers.__version__
    meta["command"] = benchmark.command(settings, out)
    workload = benchmark.workload_of(settings)
    stem = out / f"model-{workload['name']}"
    began = time.perf_counter()

    def write(records):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        write_json(stem.with_suffix(".json"), meta, workload, benchmark.targets(records), records)
        stem.with_suffix(".md").write_text(benchmark.markdown(meta, workload, records))

    records = benchmark.run(settings, on_update=write, show_progress=show_progress)
    write(records)
    writer.write_csv(stem.with_suffix(".csv"), records, benchmark.CSV_FIELDS)
    return workload, records, stem, benchmark.write_plot(stem.with_suffix(".png"), meta, workload, records)
