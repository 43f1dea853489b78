"""A Hugging Face Llama every way the issue compares it (``blockfuse bench model hf-llama``): HF eager,
``torch.compile``, Liger-Kernel and ``blockfuse.patch``; a training step without and with the LM head and
its loss, and greedy generation.

The model: ``LlamaModel`` at random init (seeded), 4 layers, hidden 2048, 32 heads / 8 KV heads,
FFN 8192, ``attn_implementation="sdpa"``, bf16; input ids (2, 4096). Without CUDA: a tiny model
(2 layers, hidden 64, 4 / 2 heads, FFN 128; input ids (2, 32)). A training step is the forward, the
loss ``h.float().pow(2).mean()`` on the last hidden state, and the backward (grads set to None before
each step, as ``zero_grad`` does). The training step with the LM head and loss (mode ``loss``):
``LlamaForCausalLM`` of the same config but vocab 128256 (tiny: 251), in training mode, the same shape
of input ids, labels the ids with 1 in 32 positions (seeded) set to -100; the step is
``model(input_ids=ids, labels=labels).loss.backward()`` (transformers' mean cross-entropy of the shifted
labels), grads set to None before each. Generation (modes ``prefill`` and ``decode``,
``bench.hf_generate``): ``LlamaForCausalLM`` of the same config (vocab 32000), batch 1, a seeded random
prompt of 512 tokens, 64 new tokens, greedy (tiny: prompt 32, 8 new tokens). Each model is built only
when a mode of ``--modes`` needs it.

``--family`` (``bench.hf_families``) builds another causal-LM family that ``blockfuse.patch`` knows in its
place, at the same sizes and with the same token ids: ``mistral``, ``qwen2``, ``qwen3``, ``phi3``, ``gemma``,
``gemma2``, ``gemma3`` (Gemma-3's text model, ``Gemma3TextModel`` / ``Gemma3ForCausalLM``); head_dim = hidden
/ heads, the family's own activation and defaults otherwise, Gemma-2 with eager attention. Liger's provider
then calls the family's ``apply_liger_kernel_to_*`` with the same choices; the files are
``model-hf-<family>.*``, and the workload names the family, its classes and Liger's call.

Providers, each a deep copy of one seeded model (the same weights):

* ``hf-eager``          the model as Hugging Face builds it (mode ``loss``: the logits made, then its loss);
* ``hf-compile``        ``torch.compile(model)`` (default mode; training modes only, ``loss`` included);
* ``hf-static-compile`` generate with a static KV cache under transformers' compile (default mode;
                        generation modes only);
* ``blockfuse``         ``blockfuse.patch(model)`` (mode ``loss``: ``patch(model, loss=True)``, the
                        LM head and the loss fused, logits None); ``blockfuse-compile`` /
                        ``-static-compile`` the same, then compiled as above;
* ``liger``             Liger-Kernel's ``apply_liger_kernel_to_llama(rope, rms_norm, swiglu,
                        model=model)`` (another family: its own function, Gemma's MLP ``geglu``;
                        mode ``loss``: also ``fused_linear_cross_entropy=True``, its
                        fused LM head + loss, logits None; the other modes take no loss over the
                        vocabulary); ``liger-compile`` / ``-static-compile`` the same, then compiled.

Per provider and training mode (``fwd``: the forward with autograd on, as in training; ``fwdbwd``:
the whole step; ``loss``: the whole step with the LM head and loss) it records the median / p20 / p80 ms
(CUDA: ``timing.time_cuda``, the L2 flushed before each call; CPU: wall clock), the peak memory of a step
above what is allocated before it (CUDA), the graph breaks of the compiled providers, the seconds of the
first step (compile included), and the relative error (``||x - ref|| / ||ref||``) of the last hidden
state (mode ``loss``: of the loss; and whether the output held the logits) and of all parameter
gradients (together, and the worst parameter) against an fp32 eager step with the same weights. Per
generation mode: ``bench.hf_generate`` says what. A provider that raises is recorded with its error
and the others still run.

NOTE: compiled, transformers passes SDPA an explicit (batch, 1, seq, seq) causal mask unless torch
is 2.14 or later (``transformers.masking_utils._ignore_causal_mask_sdpa``; eager, it passes
``is_causal=True``): SDPA then computes every (query, key) pair and the compiled providers pay
for it (3x the attention time on an H200, torch 2.11): compare them with each other.

Liger's ``apply_liger_kernel_to_llama`` assigns module globals of ``modeling_llama``
(``apply_rotary_pos_emb``, ``LlamaRMSNorm``, ``LlamaMLP``) and, with its fused linear cross-entropy and
no model given, ``LlamaForCausalLM.forward`` (given the model, as here, it sets that instance's
``forward``), which would change every other provider's Llama: its providers run last, and the globals
and the attributes of modeling_llama's classes are restored after each (another family: those of its
modeling module, which its Liger function assigns the same way).

Writes ``model-hf-llama.{json,csv,md}`` and, with matplotlib, ``model-hf-llama.png`` (another family:
``model-hf-<family>.*``).
"""

from __future__ import annotations

import copy
import functools
import shlex
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from blockfuse import runtime
from blockfuse.bench import hf_generate, hf_harness, writer
from blockfuse.bench.hf_families import (FAMILIES, LLAMA, CausalLMFamily, apply_liger, liger_call,
                                         modeling_globals_restored)
from blockfuse.bench.hf_generate import STATIC_COMPILE
from blockfuse.bench.runner import DTYPES

NAME = "hf-llama"
# Liger's providers last: they assign the modeling module's globals (restored after each, but still).
PROVIDERS = ("hf-eager", "hf-compile", "hf" + STATIC_COMPILE, "blockfuse", "blockfuse-compile",
             "blockfuse" + STATIC_COMPILE, "liger", "liger-compile", "liger" + STATIC_COMPILE)
# every provider's speed-up is against each of these (in the modes the baseline ran)
BASELINES = ("hf-eager", "hf-compile", "hf" + STATIC_COMPILE, "liger")
TRAINING_MODES = ("fwd", "fwdbwd")  # LlamaModel, a loss of its last hidden state
LOSS_MODES = ("loss",)  # LlamaForCausalLM, its own loss over the vocabulary
MODES = TRAINING_MODES + LOSS_MODES + hf_generate.MODES
DEFAULT_MODES = TRAINING_MODES
MODE_TITLES = {"fwd": "training forward", "fwdbwd": "training step", "loss": "training step with the LM head and loss",
               **hf_generate.MODE_TITLES}
MODE_COLUMNS = {"fwd": "fwd", "fwdbwd": "step"}

# The targets: blockfuse's step at least STEP_TARGET x as fast as Liger's, its peak at most
# MEMORY_TARGET x Liger's; each blockfuse provider against the Liger provider run the same way.
# (The generation targets: hf_generate.)
STEP_TARGET = 1.1
MEMORY_TARGET = 1.0
PAIRS = (("blockfuse", "liger"), ("blockfuse-compile", "liger-compile"))
# With the LM head and loss (mode loss; Liger with its fused linear cross-entropy): the same pairs, the
# step at least LOSS_STEP_TARGET x as fast, the peak at most LOSS_MEMORY_TARGET x.
LOSS_STEP_TARGET = 1.1
LOSS_MEMORY_TARGET = 0.85

IGNORE_INDEX = -100
IGNORED_EVERY = 32  # mode loss: 1 in IGNORED_EVERY label positions (seeded) set to IGNORE_INDEX


def in_run_order(providers) -> tuple[str, ...]:
    """``providers`` in the order of ``PROVIDERS``, whatever the order asked: Liger's last."""
    return tuple(sorted(providers, key=PROVIDERS.index))


def modes_of(provider: str) -> tuple[str, ...]:
    """The modes a provider runs: ``*-compile`` the training ones (with and without the LM head),
    ``*-static-compile`` the generation ones, the others all."""
    if provider.endswith(STATIC_COMPILE):
        return hf_generate.MODES
    return TRAINING_MODES + LOSS_MODES if provider.endswith("-compile") else MODES


def providers_for(modes, family: CausalLMFamily = LLAMA) -> tuple[str, ...]:
    """Every provider that runs one of ``modes`` (the default of ``--providers``); Liger's only where it covers
    ``family``."""
    return tuple(p for p in PROVIDERS if set(modes_of(p)) & set(modes)
                 and (family.liger or not p.startswith("liger")))


@dataclass(frozen=True)
class LlamaShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int  # training without the LM head, and generation
    batch: int
    seq: int
    prompt: int = 512  # generation: prompt tokens (batch hf_generate.BATCH)
    new_tokens: int = 64  # generation: new tokens
    loss_vocab: int = 128256  # mode loss: the vocabulary of the LM head and loss


FULL = LlamaShape(layers=4, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=32000, batch=2, seq=4096)
TINY = LlamaShape(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=128, batch=2, seq=32, prompt=32,
                  new_tokens=8, loss_vocab=251)


@dataclass(frozen=True)
class Settings(hf_harness.Settings):
    """One run (shape: a LlamaShape), and the family built at that shape."""

    family: str = LLAMA.name  # a key of hf_families.FAMILIES


def family_of(settings: Settings) -> CausalLMFamily:
    return FAMILIES[settings.family]


def output_name(settings: Settings) -> str:
    """``hf-llama``, or ``hf-<family>`` for another family: the files' ``model-<name>.*``."""
    return NAME if settings.family == LLAMA.name else f"hf-{settings.family}"


def _training(modes) -> list[str]:
    return [m for m in MODES if m in modes and m in TRAINING_MODES]


def _loss(modes) -> list[str]:
    return [m for m in MODES if m in modes and m in LOSS_MODES]


def _generation(modes) -> list[str]:
    return [m for m in MODES if m in modes and m in hf_generate.MODES]


# ----------------------------------------------------------------------------------------
# The model and the providers
# ----------------------------------------------------------------------------------------


def model_config(shape: LlamaShape, family: CausalLMFamily = LLAMA):
    """``family``'s config at ``shape``: head_dim = hidden / heads, bos 0, eos 1, no padding token (Phi-3's
    default, 32000, is no id of a smaller vocabulary; Gemma's, 0, would zero a row of the embedding and its
    gradient), its other options its own defaults."""
    config, _, _ = family.classes()
    return config(hidden_size=shape.hidden, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
                  intermediate_size=shape.ffn, num_hidden_layers=shape.layers, vocab_size=shape.vocab,
                  max_position_embeddings=max(shape.seq, shape.prompt + shape.new_tokens, 4096),
                  bos_token_id=0, eos_token_id=1, pad_token_id=None,
                  **family.config_options(shape.hidden // shape.heads))


def build_base(shape: LlamaShape, dtype: torch.dtype, device: torch.device, family: CausalLMFamily = LLAMA):
    """(the seeded model of ``family`` without the LM head (LlamaModel, ...), its input ids (batch, seq))."""
    _, model_class, _ = family.classes()
    config = model_config(shape, family)
    torch.manual_seed(0)
    model = model_class(config).to(device=device, dtype=dtype)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq), generator=generator).to(device)
    return model, ids


def build_causal_lm(shape: LlamaShape, dtype: torch.dtype, device: torch.device, family: CausalLMFamily = LLAMA):
    """(the seeded causal LM of ``family`` (LlamaForCausalLM, ...) of vocab ``shape.loss_vocab`` in training
    mode, its inputs: input ids (batch, seq) and labels, the ids with 1 in IGNORED_EVERY positions (seeded)
    set to IGNORE_INDEX)."""
    _, _, causal_lm = family.classes()
    torch.manual_seed(0)
    model = causal_lm(model_config(replace(shape, vocab=shape.loss_vocab), family))
    # NOTE: training mode: Liger's forward skips the logits only when self.training (it makes them and
    # calls HF's loss otherwise).
    model = model.to(device=device, dtype=dtype).train()
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, shape.loss_vocab, (shape.batch, shape.seq), generator=generator)
    labels = ids.clone()
    ignored = torch.randperm(ids.numel(), generator=generator)[:max(1, ids.numel() // IGNORED_EVERY)]
    labels.view(-1)[ignored] = IGNORE_INDEX
    return model, {"input_ids": ids.to(device), "labels": labels.to(device)}


def build_generator(shape: LlamaShape, dtype: torch.dtype, device: torch.device, family: CausalLMFamily = LLAMA):
    """(the seeded causal LM of ``family`` (LlamaForCausalLM, ...), its prompt ids (hf_generate.BATCH, prompt))."""
    _, _, causal_lm = family.classes()
    torch.manual_seed(0)
    model = causal_lm(model_config(shape, family)).to(device=device, dtype=dtype)
    return model.eval(), hf_generate.prompt_ids(shape.vocab, shape.prompt, device)


def make_provider(name: str, base, loss: bool = False):
    """(the module holding the parameters, the callable that runs it) of one provider; ``loss``: a causal
    LM whose loss blockfuse and Liger fuse with the LM head (Liger's function: that of ``base``'s family). A
    ``*-static-compile`` provider's module runs as it is: transformers' generate compiles it."""
    import blockfuse

    model = copy.deepcopy(base)
    if name.startswith("blockfuse"):
        blockfuse.patch(model, loss=loss)
    elif name.startswith("liger"):
        apply_liger(model, loss)
    compiled = name.endswith("-compile") and not name.endswith(STATIC_COMPILE)
    return model, (torch.compile(model) if compiled else model)


# ----------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------


def training_step(run, ids, parameters):
    """The step: forward, loss on the last hidden state, backward. Returns the hidden state."""
    return hf_harness.training_step(run, {"input_ids": ids}, parameters)


def _measure_training(name: str, base, ids, reference: dict, settings: Settings) -> list[dict]:
    cuda = settings.device.type == "cuda"
    model, run = make_provider(name, base)
    named_parameters = list(model.named_parameters())
    parameters = [p for _, p in named_parameters]

    # (compiles, for the compiled providers)
    hidden, first_step_s = hf_harness.seconds_of_first_call(lambda: training_step(run, ids, parameters),
                                                            settings.device)
    common = {"first_step_s": first_step_s, **hf_harness.step_errors(hidden, named_parameters, reference)}
    if name.endswith("-compile"):
        common.update(hf_harness.graph_breaks())
    del hidden

    calls = {"fwd": lambda: run(input_ids=ids), "fwdbwd": lambda: training_step(run, ids, parameters)}
    records = []
    for mode in _training(set(settings.modes) & set(modes_of(name))):
        result = hf_harness.time_call(calls[mode], settings.device, settings.quick,
                                      parameters if mode == "fwdbwd" else None)
        record = {"provider": name, "mode": mode, "ms": result.median, "p20": result.p20, "p80": result.p80}
        if cuda and mode == "fwdbwd":
            for parameter in parameters:
                parameter.grad = None
            record["peak_mib"] = hf_harness.peak_mib(calls["fwdbwd"], settings.device)
        records.append({**record, **common})
    return records


def _measure_loss(name: str, base, inputs: dict, reference: dict, settings: Settings) -> list[dict]:
    """The record of mode loss: the step ``model(**inputs).loss.backward()`` of the causal LM ``base``."""
    model, run = make_provider(name, base, loss=True)
    named_parameters = list(model.named_parameters())
    parameters = [p for _, p in named_parameters]

    def step():
        return hf_harness.causal_lm_step(run, inputs, parameters)

    (loss, logits_made), first_step_s = hf_harness.seconds_of_first_call(step, settings.device)  # (compiles)
    record = {"provider": name, "mode": "loss", "first_step_s": first_step_s, "logits_materialized": logits_made,
              **hf_harness.loss_errors(loss, named_parameters, reference)}
    if name.endswith("-compile"):
        record.update(hf_harness.graph_breaks())
    result = hf_harness.time_call(step, settings.device, settings.quick, parameters)
    record.update(ms=result.median, p20=result.p20, p80=result.p80)
    if settings.device.type == "cuda":
        for parameter in parameters:
            parameter.grad = None
        record["peak_mib"] = hf_harness.peak_mib(step, settings.device)
    return [record]


# Generation providers measured together, their repetitions in turns (hf_generate.measure_together says
# why): the eager ones that can live side by side (Liger assigns the modeling module's globals; a static-compile
# provider compiles the model's forward).
TOGETHER = ("hf-eager", "blockfuse")


def _measure_generation(name: str, base, ids, reference: torch.Tensor, settings: Settings,
                        group: dict | None = None) -> list[dict]:
    """The generation records of ``name``. A provider of TOGETHER is measured with the others of TOGETHER
    that ``settings`` asks for, all at its turn, and ``group`` (a dict kept across providers) keeps their
    records for theirs."""
    modes = _generation(set(settings.modes) & set(modes_of(name)))
    if group is None or name not in TOGETHER:
        model, _ = make_provider(name, base)
        return hf_generate.measure(name, model, ids, settings.shape.new_tokens, reference, modes, settings.device,
                                   settings.quick)
    if name not in group:
        names = [p for p in in_run_order(settings.providers) if p in TOGETHER]
        models = {p: make_provider(p, base)[0] for p in names}
        records = hf_generate.measure_together(models, ids, settings.shape.new_tokens, reference, modes,
                                               settings.device, settings.quick)
        group.update({p: [r for r in records if r["provider"] == p] for p in names})
    return group.pop(name)


def run_provider(name: str, workloads: dict, settings: Settings, group: dict | None = None) -> list[dict]:
    """One record per mode the provider runs (training, then with the LM head and loss, then generation); a
    provider that raises gets its error in each, and the others still run. ``workloads``: ``"training"``,
    ``"loss"`` and / or ``"generation"`` -> (base model, ids (loss: the inputs, a dict), reference);
    ``group``: see :func:`_measure_generation`."""
    records = []
    generation = functools.partial(_measure_generation, group=group)
    for kind, modes, measure in (("training", _training, _measure_training), ("loss", _loss, _measure_loss),
                                 ("generation", _generation, generation)):
        modes = modes(set(settings.modes) & set(modes_of(name)))
        if not modes:
            continue
        base, ids, reference = workloads[kind]
        guard = modeling_globals_restored(family_of(settings)) if name.startswith("liger") else None
        records += hf_harness.run_guarded(name, modes, lambda: measure(name, base, ids, reference, settings),
                                          settings.device, guard)
    return records


def add_speedups(records: list[dict]) -> None:
    """``speedup_vs_<baseline>``: the baseline's median ms in the same mode over this provider's (> 1: faster)."""
    hf_harness.add_speedups(records, BASELINES)


def loss_targets(records: list[dict]) -> list[dict]:
    """The targets of mode loss (the training step with the LM head and loss), status met / missed / n/a:
    for each blockfuse provider against the Liger provider run the same way (the eager pair always, the
    compiled pair when both ran, failed or not), the step's speed-up (at least LOSS_STEP_TARGET) and its
    peak memory (at most LOSS_MEMORY_TARGET x Liger's)."""
    records = [r for r in records if r["mode"] in LOSS_MODES]
    ran = {r["provider"] for r in records}
    missing, title = "loss not in --modes", MODE_TITLES["loss"]
    checks = []
    for ours, theirs in [pair for k, pair in enumerate(PAIRS) if not k or set(pair) <= ran]:
        checks.append(hf_harness.pair_check(records, "loss", ours, theirs, "ms", f"{title}: {theirs} ms / {ours} ms",
                                            LOSS_STEP_TARGET, True, missing))
        checks.append(hf_harness.pair_check(records, "loss", ours, theirs, "peak_mib",
                                            f"peak memory, {title}: {ours} / {theirs}", LOSS_MEMORY_TARGET, False,
                                            missing, "peak memory is measured on CUDA only"))
    return checks


def targets(records: list[dict]) -> list[dict]:
    """The issue's targets, each with status met / missed / n/a. Training (when a training mode ran): for
    each blockfuse provider against the Liger provider run the same way (the eager pair always, the
    compiled pair when either ran), the step's speed-up and the step's peak memory. With the LM head and
    loss (when mode loss ran): ``loss_targets``. Generation (when a generation mode ran):
    ``hf_generate.targets``."""
    checks = []
    if any(r["mode"] in TRAINING_MODES for r in records):
        for ours, theirs in hf_harness.pairs_to_check(records, PAIRS):
            missing = "the step (fwdbwd) not in --modes"
            checks.append(hf_harness.pair_check(records, "fwdbwd", ours, theirs, "ms",
                                                f"training step: {theirs} ms / {ours} ms", STEP_TARGET, True, missing))
            checks.append(hf_harness.pair_check(records, "fwdbwd", ours, theirs, "peak_mib",
                                                f"peak training-step memory: {ours} / {theirs}", MEMORY_TARGET,
                                                False, missing, "peak memory is measured on CUDA only"))
    if any(r["mode"] in LOSS_MODES for r in records):
        checks += loss_targets(records)
    if any(r["mode"] in hf_generate.MODES for r in records):
        checks += hf_generate.targets(records)
    return checks


# ----------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------


def _family_fields(settings: Settings) -> dict:
    """What the workload of another family than Llama says of it: its name, its config class and the options
    given to it beyond the sizes, its activation (the config's default), Liger's call (or why none)."""
    family = family_of(settings)
    config = model_config(settings.shape, family)
    fields = {"family": family.name, "config": family.config,
              **family.config_options(settings.shape.hidden // settings.shape.heads),
              "hidden_act": getattr(config, "hidden_act", None) or getattr(config, "hidden_activation", None)}
    fields.pop("attn_implementation")  # (the workload's "attention")
    fields["liger"] = liger_call(family) if family.liger else f"none: {family.no_liger_reason}"
    return fields


def workload_of(settings: Settings) -> dict:
    """The run's model, shapes and losses (``name``: that of its files); another family than Llama adds
    ``_family_fields``. The model classes are those built."""
    family = family_of(settings)
    workload = {"name": output_name(settings), "model": family.model, "attention": family.attention,
                **asdict(settings.shape), "dtype": settings.dtype, "tiny": settings.tiny,
                "loss": "h.float().pow(2).mean()"}
    if family is not LLAMA:
        workload.update(_family_fields(settings))
    if _loss(settings.modes):
        workload["lm_loss"] = {"model": family.causal_lm, "vocab": settings.shape.loss_vocab,
                               "labels": f"the input ids, 1 in {IGNORED_EVERY} positions (seeded) {IGNORE_INDEX}",
                               "loss": "model(input_ids=ids, labels=labels).loss"}
    if _generation(settings.modes):
        workload["generation"] = {"model": family.causal_lm, "batch": hf_generate.BATCH, **hf_generate.HOW}
    return workload


CSV_FIELDS = ("provider", "mode", "ms", "p20", "p80", "speedup_vs_hf-eager", "speedup_vs_hf-compile",
              "speedup_vs_hf" + STATIC_COMPILE, "speedup_vs_liger", "peak_mib", "rel_err_out", "rel_err_loss",
              "logits_materialized", "rel_err_grad",
              "rel_err_grad_worst", "grad_worst_parameter", "graph_breaks", "first_step_s", "generate_ms",
              "new_tokens", "tokens_match_hf", "first_mismatch_at", "first_call_s", "error")


def _training_table(records: list[dict]) -> list[str]:
    index = {(r["provider"], r["mode"]): r for r in records}
    providers = list(dict.fromkeys(r["provider"] for r in records if r["mode"] in TRAINING_MODES))
    modes = [m for m in TRAINING_MODES if any(r["mode"] == m for r in records)]
    header = ["provider"]
    for mode in modes:
        header += [f"{MODE_COLUMNS[mode]} ms", f"{MODE_COLUMNS[mode]} x eager"]
    if "fwdbwd" in modes:
        header += ["step x compile", "step x Liger", "peak MiB"]
    header += ["hidden error", "grad error", "worst grad error (parameter)", "graph breaks", "first step s"]
    rows = []
    for provider in providers:
        failed = next((index[(provider, m)]["error"] for m in modes if index[(provider, m)].get("error")), None)
        if failed:
            rows.append([provider, writer.failure_cell(failed)] + [""] * (len(header) - 2))
            continue
        row = [provider]
        for mode in modes:
            row += [hf_harness.timed(index[(provider, mode)]),
                    hf_harness.number(index[(provider, mode)].get("speedup_vs_hf-eager"), ".2f")]
        any_record = index[(provider, modes[0])]
        if "fwdbwd" in modes:
            step = index[(provider, "fwdbwd")]
            row += [hf_harness.number(step.get("speedup_vs_hf-compile"), ".2f"),
                    hf_harness.number(step.get("speedup_vs_liger"), ".2f"),
                    hf_harness.number(step.get("peak_mib"), ".0f")]
        row += [f"{any_record['rel_err_out']:.2e}", f"{any_record['rel_err_grad']:.2e}",
                f"{any_record['rel_err_grad_worst']:.2e} `{any_record['grad_worst_parameter']}`",
                str(any_record.get("graph_breaks", "-")), f"{any_record['first_step_s']:.1f}"]
        rows.append(row)
    return writer.table(header, rows)


LOSS_COLUMNS = (
    ("provider", lambda r: r["provider"]),
    ("mode", lambda r: r["mode"]),
    ("step ms (p20-p80)", hf_harness.timed),
    ("x eager", lambda r: hf_harness.number(r.get("speedup_vs_hf-eager"), ".2f")),
    ("x compile", lambda r: hf_harness.number(r.get("speedup_vs_hf-compile"), ".2f")),
    ("x Liger", lambda r: hf_harness.number(r.get("speedup_vs_liger"), ".2f")),
    ("peak MiB", lambda r: hf_harness.number(r.get("peak_mib"), ".0f")),
    ("loss error", lambda r: hf_harness.error(r, "rel_err_loss")),
    ("grad error", lambda r: hf_harness.error(r, "rel_err_grad")),
    ("worst grad error (parameter)",
     lambda r: f"{hf_harness.error(r, 'rel_err_grad_worst')} `{r.get('grad_worst_parameter')}`"),
    ("logits made", lambda r: "yes" if r.get("logits_materialized") else "no"),
    ("graph breaks", lambda r: str(r.get("graph_breaks", "-"))),
    ("first step s", lambda r: f"{r['first_step_s']:.1f}"),
)


def markdown(meta: dict, workload: dict, records: list[dict]) -> str:
    providers = list(dict.fromkeys(r["provider"] for r in records))
    training = any(r["mode"] in TRAINING_MODES for r in records)
    loss = any(r["mode"] in LOSS_MODES for r in records)
    generation = any(r["mode"] in hf_generate.MODES for r in records)
    tiny = " (tiny config)" if workload["tiny"] else ""
    family = FAMILIES[workload.get("family", LLAMA.name)]
    lines = [
        f"# blockfuse model benchmark: {workload['name']} (Hugging Face {family.title}: "
        + "; ".join(["training step"] * training + [MODE_TITLES["loss"]] * loss + ["generation"] * generation) + ")",
        "",
        *hf_harness.meta_lines(meta),
        f"- config{tiny}: {workload['layers']} layers, hidden {workload['hidden']}, {workload['heads']} heads / "
        f"{workload['kv_heads']} KV heads, FFN {workload['ffn']}, {workload['attention']} attention, "
        f"{workload['dtype']}",
    ]
    if family is not LLAMA:
        given = ", ".join(f"{key}={workload[key]}" for key in ("head_dim", "query_pre_attn_scalar") if key in workload)
        lines.append(f"- family {family.title}: {workload['config']}({given}, otherwise its defaults), activation "
                     f"{workload['hidden_act']}; liger: `{workload['liger']}`")
    if training:
        lines.append(f"- training: {workload['model']} (vocab {workload['vocab']}, no LM head), input ids "
                     f"({workload['batch']}, {workload['seq']})")
    if loss:
        lines.append(f"- training with the LM head and loss: {workload['lm_loss']['model']}, vocab "
                     f"{workload['loss_vocab']}, input ids ({workload['batch']}, {workload['seq']}), labels the ids "
                     f"with 1 in {IGNORED_EVERY} positions (seeded) {IGNORE_INDEX}")
    if generation:
        lines.append(f"- generation: {workload['generation']['model']}, vocab {workload['vocab']}, batch "
                     f"{hf_generate.BATCH}, a random prompt of {workload['prompt']} tokens, "
                     f"{workload['new_tokens']} new tokens, {hf_generate.HOW['decoding']}")
    compiled = any(p.endswith("-compile") and not p.endswith(STATIC_COMPILE) for p in providers)
    if (training or loss) and compiled and runtime.torch_before(2, 14):
        lines.append("- compiled, transformers passes SDPA an explicit causal mask with torch < 2.14 (eager: "
                     "is_causal=True), so the compiled providers' attention computes every (query, key) pair: "
                     "compare them with each other")
    lines += ["", "## Targets", ""]
    lines += [f"- **{t['status']}**: {t['text']}" for t in targets(records)]
    if training:
        lines += [
            "",
            "## Training",
            "",
            hf_harness.time_note(meta) +
            " `fwd`: the forward with autograd on; `fwdbwd` (step): forward + `h.float().pow(2).mean()` + backward,"
            " grads set to None before each. x: a baseline's median over the provider's (> 1: faster). Peak: memory"
            " allocated during one step above what was allocated before it. Errors: ||x - ref|| / ||ref|| of the"
            " last hidden state and of every parameter gradient together (worst parameter apart) against an fp32"
            " eager step with the same weights. First step: seconds, compile included.",
            "",
            *_training_table(records),
        ]
    if loss:
        lines += [
            "",
            "## Training step with the LM head and loss",
            "",
            hf_harness.time_note(meta) +
            f" `loss`: `{workload['lm_loss']['model']}(input_ids, labels).loss.backward()`, grads set to None"
            " before each; hf-*: the logits made, then transformers' loss; blockfuse: `patch(model, loss=True)`;"
            " liger: with its fused linear cross-entropy. x: a baseline's median over the provider's (> 1: faster)."
            " Peak: memory allocated during one step above what was allocated before it. Errors: ||x - ref|| /"
            " ||ref|| of the loss and of every parameter gradient together (worst parameter apart) against an fp32"
            " eager step with the same weights. Logits made: whether the output held the (tokens, vocab) logits."
            " First step: seconds, compile included.",
            "",
            *writer.record_table(LOSS_COLUMNS, [r for r in records if r["mode"] in LOSS_MODES]),
        ]
    if generation:
        lines += ["", *hf_generate.markdown_lines(records, workload["new_tokens"])]
    return "\n".join(lines) + "\n"


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Speed-up against hf-eager per mode and (training, with or without the loss) the step's peak memory,
    per provider. False when matplotlib is missing."""
    modes = [m for m in MODES if any(r["mode"] == m for r in records)]
    panels = [writer.Panel("speedup_vs_hf-eager", "speed-up against hf-eager", line=1.0)]
    if set(modes) & set(TRAINING_MODES + LOSS_MODES):
        panels.append(writer.Panel("peak_mib", "peak training-step memory, MiB", missing="measured on CUDA only"))
    family = FAMILIES[workload.get("family", LLAMA.name)]
    title = (f"{family.title}, {workload['layers']} layers, hidden {workload['hidden']}, {workload['dtype']}: "
             f"{meta['card']}, torch {meta['torch']}, triton {meta['triton']}")
    return writer.panel_plot(path, title, records, modes, MODE_TITLES, panels)


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


def command(settings: Settings, out: Path) -> str:
    """The ``blockfuse bench model hf-llama`` command that reproduces a run of ``settings``, every
    choice spelled out."""
    shape = settings.shape
    words = ["blockfuse", "bench", "model", NAME]
    if settings.family != LLAMA.name:
        words += ["--family", settings.family]
    words += ["--layers", str(shape.layers), "--shape", f"{shape.batch}x{shape.seq}", "--dtype", settings.dtype,
              "--providers", ",".join(in_run_order(settings.providers)), "--modes", ",".join(settings.modes)]
    if _generation(settings.modes):
        words += ["--prompt", str(shape.prompt), "--new-tokens", str(shape.new_tokens)]
    words += ["--quick"] * settings.quick + ["--tiny"] * settings.tiny
    return shlex.join(words + ["--out", str(out)])


def run(settings: Settings, on_update: Callable | None = None, show_progress: bool = True) -> list[dict]:
    """The records of every provider and mode of ``settings``; ``on_update(records)`` after each provider.
    ``show_progress=False`` hides the progress bar (its refresh thread skews CPU timings on a small machine)."""
    dtype, family = DTYPES[settings.dtype], family_of(settings)
    workloads: dict = {}
    setup = []
    if _training(settings.modes):
        base, ids = build_base(settings.shape, dtype, settings.device, family)
        setup.append(("fp32 reference", lambda: workloads.update(
            training=(base, ids, hf_harness.fp32_reference(base, {"input_ids": ids})))))
    if _loss(settings.modes):
        causal_lm, inputs = build_causal_lm(settings.shape, dtype, settings.device, family)
        setup.append(("fp32 reference with the LM head and loss", lambda: workloads.update(
            loss=(causal_lm, inputs, hf_harness.fp32_causal_lm_reference(causal_lm, inputs)))))
    if _generation(settings.modes):
        generator, prompt = build_generator(settings.shape, dtype, settings.device, family)
        setup.append(("HF eager tokens", lambda: workloads.update(
            generation=(generator, prompt, hf_generate.generate(generator, prompt, settings.shape.new_tokens)))))
    group: dict = {}  # the generation records of the TOGETHER providers measured but not yet reported
    return hf_harness.run_providers(output_name(settings), in_run_order(settings.providers), setup,
                                    lambda name: run_provider(name, workloads, settings, group), add_speedups,
                                    on_update, show_progress)
