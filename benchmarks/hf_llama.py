"""A Hugging Face LlamaModel training step: HF eager, torch.compile, Liger-Kernel, blockfuse.patch.

The model: ``LlamaModel`` at random init (seeded), 4 layers, hidden 2048, 32 heads / 8 KV heads,
FFN 8192, ``attn_implementation="sdpa"``, bf16; input ids (2, 4096). A training step is the
forward, the loss ``h.float().pow(2).mean()`` on the last hidden state, and the backward (grads
set to None before each step, as ``zero_grad`` does).

Providers, each a deep copy of one seeded model (the same weights):

* ``hf-eager``          the model as Hugging Face builds it;
* ``hf-compile``        ``torch.compile(model)`` (default mode);
* ``liger``             Liger-Kernel's ``apply_liger_kernel_to_llama(rope, rms_norm, swiglu,
                        model=model)`` (no cross entropy: the step has no LM head);
* ``liger-compile``     the same, then ``torch.compile``;
* ``blockfuse``         ``blockfuse.patch(model)``;
* ``blockfuse-compile`` the same, then ``torch.compile``.

For each: forward ms (with autograd on, as in training) and step ms (median, p20, p80; CUDA:
``blockfuse.bench.timing.time_cuda``, the L2 flushed before each call; CPU: wall clock), peak
memory of a step above what is allocated before it, graph breaks of the compiled providers, and
the relative error (``||x - ref|| / ||ref||``) of the last hidden state and of all parameter
gradients (together, and the worst parameter) against an fp32 eager run with the same weights.
A provider that raises is recorded with its error and the others still run.

NOTE: compiled, transformers passes SDPA an explicit (batch, 1, seq, seq) causal mask unless torch
is 2.14 or later (``transformers.masking_utils._ignore_causal_mask_sdpa``; eager, it passes
``is_causal=True``): SDPA then computes every (query, key) pair and the compiled providers pay
for it (3x the attention time on an H200, torch 2.11): compare them with each other.

Liger's ``apply_liger_kernel_to_llama`` assigns module globals of ``modeling_llama``
(``apply_rotary_pos_emb``, ``LlamaRMSNorm``, ``LlamaMLP``), which would change every other
provider's Llama: its providers run last, and the globals are restored after each.

Writes ``hf_llama.json`` and ``hf_llama.md`` to ``--out``.

GPU:  PYTHONPATH=src python benchmarks/hf_llama.py --out benchmarks/results/<dir>
CPU smoke test (tiny model; kernels in Triton's interpreter with TRITON_INTERPRET=1, else the
references): PYTHONPATH=src python benchmarks/hf_llama.py --tiny --device cpu --out /tmp/hfl
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import importlib.metadata
import json
import math
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from blockfuse.bench import timing
from blockfuse.bench.report import _finite
from blockfuse.bench.runner import environment, relative_error

PROVIDERS = ("hf-eager", "hf-compile", "blockfuse", "blockfuse-compile", "liger", "liger-compile")
BASELINES = ("hf-eager", "hf-compile", "liger")  # the speedups of every provider are against these
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    batch: int
    seq: int


FULL = Shape(layers=4, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=32000, batch=2, seq=4096)
TINY = Shape(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=128, batch=2, seq=32)


# ----------------------------------------------------------------------------------------
# The model and the providers
# ----------------------------------------------------------------------------------------


def build_base(shape: Shape, dtype: torch.dtype, device: torch.device):
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
        raise RuntimeError(f"Liger-Kernel is not installed ({error}); pip install liger-kernel") from error
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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_step(run, ids, parameters):
    """The step: forward, loss on the last hidden state, backward. Returns the hidden state."""
    for parameter in parameters:
        parameter.grad = None
    hidden = run(input_ids=ids).last_hidden_state
    hidden.float().pow(2).mean().backward()
    return hidden


def fp32_reference(base, ids):
    """The last hidden state and the parameter grads of an fp32 eager step with base's weights."""
    model = copy.deepcopy(base).float()
    parameters = dict(model.named_parameters())
    hidden = training_step(model, ids, parameters.values()).detach()
    reference = {"hidden": hidden, "grads": {name: p.grad for name, p in parameters.items()}}
    del model
    return reference


def gradient_errors(named_parameters, reference_grads) -> dict:
    """Relative error of all grads together and of the worst parameter."""
    difference = scale = 0.0
    worst, worst_name = 0.0, None
    for name, parameter in named_parameters:
        expected = reference_grads[name]
        if parameter.grad is None:
            return {"grad_error": math.nan, "grad_worst_error": math.nan, "grad_worst_parameter": name}
        got, expected = parameter.grad.double(), expected.double()
        difference += torch.linalg.vector_norm(got - expected).item() ** 2
        scale += torch.linalg.vector_norm(expected).item() ** 2
        error = relative_error(parameter.grad, reference_grads[name])
        if not error <= worst:  # (NaN included)
            worst, worst_name = error, name
    return {"grad_error": math.sqrt(difference / scale) if scale else math.sqrt(difference),
            "grad_worst_error": worst, "grad_worst_parameter": worst_name}


def time_call(fn, device: torch.device, settings, parameters=None) -> timing.Timing:
    if device.type == "cuda":
        return timing.time_cuda(fn, warmup_ms=settings.warmup_ms, rep_ms=settings.rep_ms,
                                grad_to_none=parameters)
    return timing.time_cpu(fn, warmup=1, rep_ms=settings.rep_ms, min_reps=3)


def measure(name: str, base, ids, reference, settings) -> dict:
    record = {"provider": name}
    device = ids.device
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model, run = make_provider(name, base)
    named_parameters = list(model.named_parameters())
    parameters = [p for _, p in named_parameters]

    began = time.perf_counter()
    hidden = training_step(run, ids, parameters)  # (compiles, for the compiled providers)
    _sync(device)
    record["first_step_s"] = time.perf_counter() - began
    record["hidden_error"] = relative_error(hidden, reference["hidden"])
    record.update(gradient_errors(named_parameters, reference["grads"]))
    if name.endswith("-compile"):
        breaks = torch._dynamo.utils.counters["graph_break"]
        record["graph_breaks"] = sum(breaks.values())
        record["graph_break_reasons"] = sorted(breaks)[:5]
    del hidden

    forward = time_call(lambda: run(input_ids=ids), device, settings)
    step = time_call(lambda: training_step(run, ids, parameters), device, settings, parameters)
    record["forward"], record["step"] = asdict(forward), asdict(step)
    if device.type == "cuda":
        for parameter in parameters:
            parameter.grad = None
        record["step_peak_mib"] = timing.peak_memory_mib(lambda: training_step(run, ids, parameters))
    return record


def run_provider(name, base, ids, reference, settings) -> dict:
    guard = llama_globals_restored() if name.startswith("liger") else contextlib.nullcontext()
    try:
        with guard:
            return measure(name, base, ids, reference, settings)
    except Exception as error:  # a provider that fails is recorded; the others still run
        lines = str(error).strip().splitlines()
        return {"provider": name, "error": f"{type(error).__name__}: {lines[0] if lines else ''}"[:400],
                "traceback": traceback.format_exc(limit=-6)}
    finally:
        torch._dynamo.reset()
        gc.collect()
        if ids.device.type == "cuda":
            torch.cuda.empty_cache()


def add_speedups(records: list[dict]) -> None:
    """``speedup_vs_<baseline>``: the baseline's median ms over this provider's (> 1: faster)."""
    by_name = {record["provider"]: record for record in records if "error" not in record}
    for record in records:
        if "error" in record:
            continue
        for baseline in BASELINES:
            if baseline in by_name:
                for what in ("forward", "step"):
                    record[f"{what}_speedup_vs_{baseline}"] = (
                        by_name[baseline][what]["median"] / record[what]["median"])


# ----------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------


def _version(package: str):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_before(major: int, minor: int) -> bool:
    release = torch.__version__.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in release[:2]) < (major, minor)


def _ms(entry) -> str:
    return f"{entry['median']:.2f} ({entry['p20']:.2f}-{entry['p80']:.2f})"


def _ratio(record, key) -> str:
    value = record.get(key)
    return f"{value:.2f}x" if value is not None else "-"


def markdown(meta: dict, records: list[dict]) -> str:
    shape = meta["shape"]
    lines = [
        "## Hugging Face LlamaModel training step", "",
        f"- card: {meta['card']}; torch {meta['torch']}, triton {meta['triton']}, transformers "
        f"{meta['transformers']}, liger-kernel {meta['liger_kernel'] or 'not installed'}; blockfuse "
        f"{meta['blockfuse_implementation']} (sources {meta['source_digest']}, git {meta['git_commit']})",
        f"- model: LlamaModel, {shape['layers']} layers, hidden {shape['hidden']}, {shape['heads']} heads / "
        f"{shape['kv_heads']} KV heads, FFN {shape['ffn']}, sdpa attention, {meta['dtype']}; input ids "
        f"({shape['batch']}, {shape['seq']})",
        "- step: forward + `h.float().pow(2).mean()` + backward, grads set to None before each; ms are the "
        "median (p20-p80); speedup = the baseline's median over the provider's (> 1: faster); errors are "
        "`||x - ref|| / ||ref||` against an fp32 eager step with the same weights",
        f"- {meta['date']}; command: `{meta['command']}`",
    ]
    if _torch_before(2, 14) and any(record["provider"].endswith("-compile") for record in records):
        lines.append("- compiled, transformers passes SDPA an explicit causal mask with torch < 2.14 (eager: "
                     "is_causal=True), so the compiled providers' attention computes every (query, key) pair")
    lines += [
        "",
        "| provider | forward ms | fwd vs eager | step ms | step vs eager | vs compile | vs Liger | "
        "peak MiB (step) | hidden error | grad error (worst parameter) | graph breaks | first step s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        if "error" in record:
            lines.append(f"| {record['provider']} | failed: {record['error'].replace('|', '/')} |" + " |" * 10)
            continue
        peak = record.get("step_peak_mib")
        lines.append(
            f"| {record['provider']} | {_ms(record['forward'])} | {_ratio(record, 'forward_speedup_vs_hf-eager')} | "
            f"{_ms(record['step'])} | "
            f"{_ratio(record, 'step_speedup_vs_hf-eager')} | {_ratio(record, 'step_speedup_vs_hf-compile')} | "
            f"{_ratio(record, 'step_speedup_vs_liger')} | {'-' if peak is None else f'{peak:.0f}'} | "
            f"{record['hidden_error']:.2e} | {record['grad_error']:.2e} ({record['grad_worst_error']:.2e} "
            f"`{record['grad_worst_parameter']}`) | {record.get('graph_breaks', '-')} | "
            f"{record['first_step_s']:.1f} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for hf_llama.json and hf_llama.md")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a smoke test of the harness on CPU)")
    parser.add_argument("--providers", default=",".join(PROVIDERS),
                        help=f"comma-separated, of {', '.join(PROVIDERS)}")
    parser.add_argument("--warmup-ms", type=float, default=500.0)
    parser.add_argument("--rep-ms", type=float, default=2000.0)
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.providers.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROVIDERS]
    if unknown:
        parser.error(f"--providers: unknown {unknown}; choose from {', '.join(PROVIDERS)}")
    # Liger's module globals are restored after each of its providers, but run them last anyway.
    args.providers = sorted(names, key=PROVIDERS.index)
    if args.tiny and args.rep_ms == parser.get_default("rep_ms"):
        args.rep_ms = 200.0
    return args


def main(argv=None) -> int:
    from rich.progress import Progress

    args = parse_args(argv)
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    shape = TINY if args.tiny else FULL
    meta = environment(device)
    meta.update(transformers=_version("transformers"), shape=asdict(shape), dtype=args.dtype,
                providers=args.providers, command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]))

    base, ids = build_base(shape, dtype, device)
    records = []
    with Progress(transient=False) as progress:
        task = progress.add_task("fp32 reference", total=len(args.providers) + 1)
        reference = fp32_reference(base, ids)
        progress.advance(task)
        for name in args.providers:
            progress.update(task, description=name)
            record = run_provider(name, base, ids, reference, args)
            records.append(record)
            status = record.get("error") or f"step {record['step']['median']:.2f} ms"
            progress.console.print(f"{name:<18} {status}")
            progress.advance(task)
    add_speedups(records)

    args.out.mkdir(parents=True, exist_ok=True)
    document = {"meta": meta, "records": records}
    (args.out / "hf_llama.json").write_text(json.dumps(_finite(document), indent=1) + "\n")
    text = markdown(meta, records)
    (args.out / "hf_llama.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
