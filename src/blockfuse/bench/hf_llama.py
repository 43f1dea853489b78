"""A Hugging Face ``LlamaModel`` training step every way the issue compares it (``blockfuse bench model
hf-llama``): HF eager, ``torch.compile``, Liger-Kernel and ``blockfuse.patch``.

The model: ``LlamaModel`` at random init (seeded), 4 layers, hidden 2048, 32 heads / 8 KV heads,
FFN 8192, ``attn_implementation="sdpa"``, bf16; input ids (2, 4096). Without CUDA: a tiny model
(2 layers, hidden 64, 4 / 2 heads, FFN 128; input ids (2, 32)). A training step is the forward, the
loss ``h.float().pow(2).mean()`` on the last hidden state, and the backward (grads set to None before
each step, as ``zero_grad`` does).

Providers, each a deep copy of one seeded model (the same weights):

* ``hf-eager``          the model as Hugging Face builds it;
* ``hf-compile``        ``torch.compile(model)`` (default mode);
* ``blockfuse``         ``blockfuse.patch(model)``;
* ``blockfuse-compile`` the same, then ``torch.compile``;
* ``liger``             Liger-Kernel's ``apply_liger_kernel_to_llama(rope, rms_norm, swiglu,
                        model=model)`` (no cross entropy: the step has no LM head);
* ``liger-compile``     the same, then ``torch.compile``.

Per provider and mode (``fwd``: the forward with autograd on, as in training; ``fwdbwd``: the whole
step) it records the median / p20 / p80 ms (CUDA: ``timing.time_cuda``, the L2 flushed before each
call; CPU: wall clock), the peak memory of a step above what is allocated before it (CUDA), the graph
breaks of the compiled providers, the seconds of the first step (compile included), and the relative
error (``||x - ref|| / ||ref||``) of the last hidden state and of all parameter gradients (together,
and the worst parameter) against an fp32 eager step with the same weights. A provider that raises is
recorded with its error and the others still run.

NOTE: compiled, transformers passes SDPA an explicit (batch, 1, seq, seq) causal mask unless torch
is 2.14 or later (``transformers.masking_utils._ignore_causal_mask_sdpa``; eager, it passes
``is_causal=True``): SDPA then computes every (query, key) pair and the compiled providers pay
for it (3x the attention time on an H200, torch 2.11): compare them with each other.

Liger's ``apply_liger_kernel_to_llama`` assigns module globals of ``modeling_llama``
(``apply_rotary_pos_emb``, ``LlamaRMSNorm``, ``LlamaMLP``), which would change every other
provider's Llama: its providers run last, and the globals are restored after each.

Writes ``model-hf-llama.{json,csv,md}`` and, with matplotlib, ``model-hf-llama.png``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import shlex
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from blockfuse.bench import timing
from blockfuse.bench.block import _total_relative_error
from blockfuse.bench.report import _finite, pyplot
from blockfuse.bench.runner import DTYPES, _describe, relative_error

NAME = "hf-llama"
# Liger's providers last: they assign modeling_llama's globals (restored after each, but still).
PROVIDERS = ("hf-eager", "hf-compile", "blockfuse", "blockfuse-compile", "liger", "liger-compile")
BASELINES = ("hf-eager", "hf-compile", "liger")  # every provider's speed-up is against each of these
MODES = ("fwd", "fwdbwd")
MODE_TITLES = {"fwd": "training forward", "fwdbwd": "training step"}
MODE_COLUMNS = {"fwd": "fwd", "fwdbwd": "step"}

# The targets: blockfuse's step at least STEP_TARGET x as fast as Liger's, its peak at most
# MEMORY_TARGET x Liger's; each blockfuse provider against the Liger provider run the same way.
STEP_TARGET = 1.1
MEMORY_TARGET = 1.0
PAIRS = (("blockfuse", "liger"), ("blockfuse-compile", "liger-compile"))


def in_run_order(providers) -> tuple[str, ...]:
    """``providers`` in the order of ``PROVIDERS``, whatever the order asked: Liger's last."""
    return tuple(sorted(providers, key=PROVIDERS.index))


@dataclass(frozen=True)
class LlamaShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    batch: int
    seq: int


FULL = LlamaShape(layers=4, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=32000, batch=2, seq=4096)
TINY = LlamaShape(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=128, batch=2, seq=32)


@dataclass(frozen=True)
class Settings:
    shape: LlamaShape
    dtype: str  # a key of runner.DTYPES
    providers: tuple[str, ...]
    modes: tuple[str, ...]
    device: torch.device
    quick: bool = False
    tiny: bool = False  # the shape's widths are TINY's (said in the command that reproduces the run)


# ----------------------------------------------------------------------------------------
# The model and the providers
# ----------------------------------------------------------------------------------------


def build_base(shape: LlamaShape, dtype: torch.dtype, device: torch.device):
    """(the seeded LlamaModel, its input ids (batch, seq))."""
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(hidden_size=shape.hidden, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, intermediate_size=shape.ffn,
                         num_hidden_layers=shape.layers, vocab_size=shape.vocab,
                         max_position_embeddings=max(shape.seq, 4096), bos_token_id=0, eos_token_id=1,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaModel(config).to(device=device, dtype=dtype)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq), generator=generator).to(device)
    return model, ids


@contextlib.contextmanager
def llama_globals_restored():
    """Puts back the module globals of transformers' modeling_llama that Liger assigns."""
    from transformers.models.llama import modeling_llama

    saved = dict(vars(modeling_llama))
    try:
        yield
    finally:
        for name in [name for name in vars(modeling_llama) if name not in saved]:
            delattr(modeling_llama, name)
        for name, value in saved.items():
            if getattr(modeling_llama, name, None) is not value:
                setattr(modeling_llama, name, value)


def apply_liger(model) -> None:
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_llama
    except ImportError as error:
        raise RuntimeError(f"liger-kernel is not installed ({error}); pip install liger-kernel") from error
    apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True, cross_entropy=False,
                                fused_linear_cross_entropy=False, model=model)


def make_provider(name: str, base):
    """(the module holding the parameters, the callable that runs it) of one provider."""
    import blockfuse

    model = copy.deepcopy(base)
    if name.startswith("blockfuse"):
        blockfuse.patch(model)
    elif name.startswith("liger"):
        apply_liger(model)
    return model, (torch.compile(model) if name.endswith("-compile") else model)


# ----------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------


def training_step(run, ids, parameters):
    """The step: forward, loss on the last hidden state, backward. Returns the hidden state."""
    for parameter in parameters:
        parameter.grad = None
    hidden = run(input_ids=ids).last_hidden_state  # (batch, seq, hidden)
    hidden.float().pow(2).mean().backward()
    return hidden


def fp32_reference(base, ids) -> dict:
    """The last hidden state and the parameter grads of an fp32 eager step with base's weights."""
    model = copy.deepcopy(base).float()
    parameters = dict(model.named_parameters())
    hidden = training_step(model, ids, parameters.values()).detach()
    return {"hidden": hidden, "grads": {name: p.grad for name, p in parameters.items()}}


def gradient_errors(named_parameters, reference_grads) -> dict:
    """Relative error of all grads together and of the worst parameter."""
    grads = {name: parameter.grad for name, parameter in named_parameters}
    missing = [name for name, grad in grads.items() if grad is None]
    if missing:
        return {"rel_err_grad": float("nan"), "rel_err_grad_worst": float("nan"), "grad_worst_parameter": missing[0]}
    worst, worst_name = 0.0, None
    for name, grad in grads.items():
        error = relative_error(grad, reference_grads[name])
        if not error <= worst:  # (NaN included)
            worst, worst_name = error, name
    return {"rel_err_grad": _total_relative_error(grads, reference_grads), "rel_err_grad_worst": worst,
            "grad_worst_parameter": worst_name}


def _time(fn: Callable, settings: Settings, parameters=None) -> timing.Timing:
    if settings.device.type == "cuda":
        return timing.time_cuda(fn, warmup_ms=100 if settings.quick else 500, rep_ms=400 if settings.quick else 2000,
                                grad_to_none=parameters)
    return timing.time_cpu(fn, warmup=1, rep_ms=20 if settings.quick else 200, min_reps=3,
                           max_reps=20 if settings.quick else 200)


def _measure(name: str, base, ids, reference: dict, settings: Settings) -> list[dict]:
    cuda = settings.device.type == "cuda"
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model, run = make_provider(name, base)
    named_parameters = list(model.named_parameters())
    parameters = [p for _, p in named_parameters]

    began = time.perf_counter()
    hidden = training_step(run, ids, parameters)  # (compiles, for the compiled providers)
    if cuda:
        torch.cuda.synchronize()
    common = {"first_step_s": round(time.perf_counter() - began, 3),
              "rel_err_out": relative_error(hidden, reference["hidden"]),
              **gradient_errors(named_parameters, reference["grads"])}
    if name.endswith("-compile"):
        breaks = torch._dynamo.utils.counters["graph_break"]
        common.update(graph_breaks=sum(breaks.values()), graph_break_reasons=sorted(breaks)[:5])
    del hidden

    calls = {"fwd": lambda: run(input_ids=ids), "fwdbwd": lambda: training_step(run, ids, parameters)}
    records = []
    for mode in settings.modes:
        result = _time(calls[mode], settings, parameters if mode == "fwdbwd" else None)
        record = {"provider": name, "mode": mode, "ms": result.median, "p20": result.p20, "p80": result.p80}
        if cuda and mode == "fwdbwd":
            for parameter in parameters:
                parameter.grad = None
            record["peak_mib"] = timing.peak_memory_mib(calls["fwdbwd"])
        records.append({**record, **common})
    return records


def run_provider(name: str, base, ids, reference: dict, settings: Settings) -> list[dict]:
    """One record per mode; a provider that raises gets its error in each, and the others still run."""
    guard = llama_globals_restored() if name.startswith("liger") else contextlib.nullcontext()
    try:
        with guard:
            return _measure(name, base, ids, reference, settings)
    except Exception as error:  # noqa: BLE001 (a failing provider is reported, the rest still run)
        failure = {"error": _describe(error), "traceback": traceback.format_exc(limit=-6)}
        return [{"provider": name, "mode": mode, **failure} for mode in settings.modes]
    finally:
        torch._dynamo.reset()
        gc.collect()
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()


def add_speedups(records: list[dict]) -> None:
    """``speedup_vs_<baseline>``: the baseline's median ms in the same mode over this provider's (> 1: faster)."""
    index = {(r["provider"], r["mode"]): r for r in records if not r.get("error")}
    for (_, mode), record in index.items():
        for baseline in BASELINES:
            if (baseline, mode) in index:
                record[f"speedup_vs_{baseline}"] = index[(baseline, mode)]["ms"] / record["ms"]


def targets(records: list[dict]) -> list[dict]:
    """The issue's targets, each with status met / missed / n/a: for each blockfuse provider against the
    Liger provider run the same way (the eager pair always, the compiled pair when either ran), the
    step's speed-up and the step's peak memory."""
    steps = {r["provider"]: r for r in records if r["mode"] == "fwdbwd"}
    ran = {r["provider"] for r in records}
    checks = []
    for k, (ours, theirs) in enumerate(PAIRS):
        if k and ours not in ran and theirs not in ran:
            continue
        why = next((f"{p} not run" for p in (ours, theirs) if p not in ran), None)
        why = why or next((f"{p} failed" for p in (ours, theirs) if steps.get(p, {}).get("error")), None)
        why = why or ("the step (fwdbwd) not in --modes" if not steps else None)
        ms = [steps.get(p, {}).get("ms") for p in (ours, theirs)]
        peaks = [steps.get(p, {}).get("peak_mib") for p in (ours, theirs)]
        checks.append(_check(f"training step: {theirs} ms / {ours} ms", ms[1] / ms[0] if all(ms) else None,
                             STEP_TARGET, True, why))
        checks.append(_check(f"peak training-step memory: {ours} / {theirs}",
                             peaks[0] / peaks[1] if all(peaks) else None, MEMORY_TARGET, False,
                             why or "peak memory is measured on CUDA only"))
    return checks


def _check(text: str, value, bound: float, higher_is_better: bool, why) -> dict:
    if value is None:
        return {"status": "n/a", "text": f"{text}: not measured ({why})"}
    met = value >= bound if higher_is_better else value <= bound
    sign = ">=" if higher_is_better else "<="
    return {"status": "met" if met else "missed", "text": f"{text}: {value:.2f} ({sign} {bound})",
            "value": value, "bound": bound}


# ----------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------


def workload_of(settings: Settings) -> dict:
    return {"name": NAME, "model": "LlamaModel", "attention": "sdpa", **asdict(settings.shape),
            "dtype": settings.dtype, "tiny": settings.tiny, "loss": "h.float().pow(2).mean()"}


CSV_FIELDS = ("provider", "mode", "ms", "p20", "p80", "speedup_vs_hf-eager", "speedup_vs_hf-compile",
              "speedup_vs_liger", "peak_mib", "rel_err_out", "rel_err_grad", "rel_err_grad_worst",
              "grad_worst_parameter", "graph_breaks", "first_step_s", "error")


def write_csv(path: Path, records: list[dict]) -> None:
    """One row per provider and mode, the fields of ``CSV_FIELDS`` (empty where not measured)."""
    import csv

    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


def write_json(path: Path, meta: dict, workload: dict, records: list[dict]) -> None:
    document = {"meta": meta, "workload": workload, "targets": targets(records), "records": records}
    path.write_text(json.dumps(_finite(document), indent=1) + "\n")


def _torch_before(major: int, minor: int) -> bool:
    release = torch.__version__.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in release[:2]) < (major, minor)


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(meta: dict, workload: dict, records: list[dict]) -> str:
    index = {(r["provider"], r["mode"]): r for r in records}
    providers = list(dict.fromkeys(r["provider"] for r in records))
    modes = [m for m in MODES if any(r["mode"] == m for r in records)]
    lines = [
        "# blockfuse model benchmark: hf-llama (Hugging Face LlamaModel training step)",
        "",
        f"- card: **{meta['card']}**; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"python {meta['python']}; transformers {meta.get('transformers')}, "
        f"liger-kernel {meta.get('liger_kernel') or 'not installed'}",
        f"- blockfuse {meta.get('blockfuse_implementation')} (source digest {meta.get('source_digest')}, "
        f"git {meta.get('git_commit')}), date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- workload: LlamaModel{' (tiny config)' if workload['tiny'] else ''}, {workload['layers']} layers, "
        f"hidden {workload['hidden']}, {workload['heads']} heads / {workload['kv_heads']} KV heads, FFN "
        f"{workload['ffn']}, vocab {workload['vocab']}, sdpa attention, {workload['dtype']}; input ids "
        f"({workload['batch']}, {workload['seq']})",
    ]
    if _torch_before(2, 14) and any(p.endswith("-compile") for p in providers):
        lines.append("- compiled, transformers passes SDPA an explicit causal mask with torch < 2.14 (eager: "
                     "is_causal=True), so the compiled providers' attention computes every (query, key) pair: "
                     "compare them with each other")
    lines += [
        "",
        ("Times: median ms of CUDA events (p20-p80), L2 flushed before each call." if meta.get("device") == "cuda"
         else "Times: median ms of the CPU wall clock (p20-p80).") +
        " `fwd`: the forward with autograd on; `fwdbwd` (step): forward + `h.float().pow(2).mean()` + backward,"
        " grads set to None before each. x: a baseline's median over the provider's (> 1: faster). Peak: memory"
        " allocated during one step above what was allocated before it. Errors: ||x - ref|| / ||ref|| of the"
        " last hidden state and of every parameter gradient together (worst parameter apart) against an fp32"
        " eager step with the same weights. First step: seconds, compile included.",
        "",
        "## Targets",
        "",
    ]
    lines += [f"- **{t['status']}**: {t['text']}" for t in targets(records)]
    lines += ["", "## Results", ""]
    header = ["provider"]
    for mode in modes:
        header += [f"{MODE_COLUMNS[mode]} ms", f"{MODE_COLUMNS[mode]} x eager"]
    if "fwdbwd" in modes:
        header += ["step x compile", "step x Liger", "peak MiB"]
    header += ["hidden error", "grad error", "worst grad error (parameter)", "graph breaks", "first step s"]
    lines += ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for provider in providers:
        failed = next((index[(provider, m)]["error"] for m in modes if index[(provider, m)].get("error")), None)
        if failed:
            lines.append(f"| {provider} | failed: `{failed.replace('`', chr(39)).replace('|', '/')}` |"
                         + " |" * (len(header) - 2))
            continue
        row = [provider]
        for mode in modes:
            record = index[(provider, mode)]
            row += [f"{record['ms']:.2f} ({record['p20']:.2f}-{record['p80']:.2f})",
                    _number(record.get("speedup_vs_hf-eager"), ".2f")]
        any_record = index[(provider, modes[0])]
        if "fwdbwd" in modes:
            step = index[(provider, "fwdbwd")]
            row += [_number(step.get("speedup_vs_hf-compile"), ".2f"), _number(step.get("speedup_vs_liger"), ".2f"),
                    _number(step.get("peak_mib"), ".0f")]
        row += [f"{any_record['rel_err_out']:.2e}", f"{any_record['rel_err_grad']:.2e}",
                f"{any_record['rel_err_grad_worst']:.2e} `{any_record['grad_worst_parameter']}`",
                str(any_record.get("graph_breaks", "-")), f"{any_record['first_step_s']:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Speed-up against hf-eager per mode and the step's peak memory, per provider. False when
    matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    index = {(r["provider"], r["mode"]): r for r in records if not r.get("error")}
    providers = list(dict.fromkeys(r["provider"] for r in records))
    modes = [m for m in MODES if any(r["mode"] == m for r in records)]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(len(modes), 1)
    for k, mode in enumerate(modes):
        values = [index.get((p, mode), {}).get("speedup_vs_hf-eager") or 0 for p in providers]
        axes[0].bar([i + k * width for i in range(len(providers))], values, width, label=MODE_TITLES[mode])
    axes[0].axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes[0].set_ylabel("speed-up against hf-eager")
    axes[0].legend(fontsize=8)
    centres = [i + width * (len(modes) - 1) / 2 for i in range(len(providers))]
    axes[0].set_xticks(centres)
    for centre, provider in zip(centres, providers):
        if not any((provider, mode) in index for mode in modes):
            axes[0].text(centre, 0.05, "failed", rotation=90, ha="center", va="bottom", fontsize=8)
    peaks = [index.get((p, "fwdbwd"), {}).get("peak_mib") or 0 for p in providers]
    axes[1].bar(range(len(providers)), peaks, color="tab:purple")
    axes[1].set_ylabel("peak training-step memory, MiB")
    axes[1].set_xticks(range(len(providers)))
    if not any(peaks):
        axes[1].text(0.5, 0.5, "measured on CUDA only", transform=axes[1].transAxes, ha="center")
        axes[1].set_yticks([])
    for ax in axes:
        ax.set_xticklabels(providers, rotation=35, ha="right", fontsize=8)
    figure.suptitle(f"LlamaModel, {workload['layers']} layers, hidden {workload['hidden']}, input ids "
                    f"({workload['batch']}, {workload['seq']}) {workload['dtype']}: {meta['card']}, "
                    f"torch {meta['torch']}, triton {meta['triton']}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


def command(settings: Settings, out: Path) -> str:
    """The ``blockfuse bench model hf-llama`` command that reproduces a run of ``settings``, every
    choice spelled out."""
    shape = settings.shape
    words = ["blockfuse", "bench", "model", NAME, "--layers", str(shape.layers), "--shape",
             f"{shape.batch},{shape.seq}", "--dtype", settings.dtype, "--providers", ",".join(in_run_order(settings.providers)),
             "--modes", ",".join(settings.modes)]
    words += ["--quick"] * settings.quick + ["--tiny"] * settings.tiny
    return shlex.join(words + ["--out", str(out)])


def run(settings: Settings, on_update: Callable | None = None, show_progress: bool = True) -> list[dict]:
    """The records of every provider and mode of ``settings``; ``on_update(records)`` after each provider.
    ``show_progress=False`` hides the progress bar (its refresh thread skews CPU timings on a small machine)."""
    from rich.progress import Progress

    base, ids = build_base(settings.shape, DTYPES[settings.dtype], settings.device)
    records: list[dict] = []
    with Progress(transient=True, disable=not show_progress) as progress:
        task = progress.add_task(f"{NAME}: fp32 reference", total=len(settings.providers) + 1)
        reference = fp32_reference(base, ids)
        progress.advance(task)
        for name in in_run_order(settings.providers):
            progress.update(task, description=f"{NAME}: {name}")
            measured = run_provider(name, base, ids, reference, settings)
            records.extend(measured)
            add_speedups(records)
            failed = next((r["error"] for r in measured if r.get("error")), None)
            status = failed or ", ".join(f"{r['mode']} {r['ms']:.2f} ms" for r in measured)
            progress.console.print(f"{name:<18} {status}", soft_wrap=True)
            if on_update is not None:
                on_update(records)
            progress.advance(task)
    return records


def run_and_write(settings: Settings, meta: dict, out: Path, show_progress: bool = True):
    """Runs every provider and writes ``out/model-hf-llama.{json,md}`` after each, then the CSV and
    the PNG. ``meta`` gains the transformers version, the command and the elapsed time. Returns
    ``(workload, records, stem, wrote_plot)``."""
    import transformers

    meta["transformers"] = transformers.__version__
    meta["command"] = command(settings, out)
    workload = workload_of(settings)
    stem = out / f"model-{NAME}"
    began = time.perf_counter()

    def write(records):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        write_json(stem.with_suffix(".json"), meta, workload, records)
        stem.with_suffix(".md").write_text(markdown(meta, workload, records))

    records = run(settings, on_update=write, show_progress=show_progress)
    write(records)
    write_csv(stem.with_suffix(".csv"), records)
    return workload, records, stem, write_plot(stem.with_suffix(".png"), meta, workload, records)
