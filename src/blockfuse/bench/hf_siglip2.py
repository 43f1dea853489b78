"""A Hugging Face ``Siglip2VisionModel`` as built and patched (``blockfuse bench model hf-siglip2``):
HF eager, ``torch.compile``, ``blockfuse.patch`` and ``blockfuse.patch`` + ``torch.compile``.

The model: ``Siglip2VisionModel`` at random init (seeded), SigLIP-2 so400m's widths with 4 layers:
hidden 1152, MLP 4304, 16 heads, patch 16, a 16 x 16 position grid (256 patches), GELU-tanh,
LayerNorm eps 1e-6, ``attn_implementation="sdpa"``, bf16. NOTE: without the pooling head
(``vision_use_head=False``), as a VLM's vision tower runs it: the loss is on the last hidden
state, so the head would be dead compute with no gradients. Input: the flattened patches
``Siglip2VisionModel.forward`` takes, ``pixel_values`` (64, 256, 3 * 16 * 16) seeded random,
``pixel_attention_mask`` (64, 256) all ones and ``spatial_shapes`` (64, 2) all 16 x 16. Without
CUDA: a tiny model (2 layers, hidden 64, MLP 152, 4 heads, patch 4; batch 3 of 16 patches).

Providers, each a deep copy of one seeded model (the same weights): ``hf-eager`` (as built),
``hf-compile`` (``torch.compile(model)``, default mode), ``blockfuse`` (``blockfuse.patch(model)``:
its LayerNorms and GELU MLPs), ``blockfuse-compile`` (patched, then compiled).

Modes: ``infer`` (the forward under ``torch.no_grad``), ``fwd`` (the forward with autograd on) and
``fwdbwd`` (a training step: forward, the loss ``(h.float() * probe).mean()`` on the last hidden
state ``h``, ``probe`` a fixed seeded random tensor of its shape, backward; grads set to None
before each). Per provider and mode: median / p20 / p80 ms (CUDA:
``timing.time_cuda``, the L2 flushed before each call; CPU: wall clock), the peak memory of a call
above what is allocated before it (CUDA), the seconds of the mode's first call (compile included:
a compiled model compiles ``infer`` apart from ``fwd``), the relative error of the last hidden state
and (``fwdbwd``) of the parameter gradients (all together, and the worst parameter but the key
biases) against an fp32 eager step with the same weights, and the graph breaks of the compiled
providers.

Writes ``model-hf-siglip2.{json,csv,md}`` and, with matplotlib, ``model-hf-siglip2.png``.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from blockfuse.bench import hf_harness, writer
from blockfuse.bench.runner import DTYPES, relative_error

NAME = "hf-siglip2"
PROVIDERS = ("hf-eager", "hf-compile", "blockfuse", "blockfuse-compile")
BASELINES = ("hf-eager", "hf-compile")
MODES = ("infer", "fwd", "fwdbwd")
MODE_TITLES = {"infer": "inference", "fwd": "training forward", "fwdbwd": "training step"}

# The targets: the patched model's training step and inference at least as fast as the model as
# built (speed-up = HF ms / patched ms), eagerly and under torch.compile.
SPEEDUP_TARGET = 1.0
PAIRS = (("blockfuse", "hf-eager"), ("blockfuse-compile", "hf-compile"))
TARGET_MODES = ("fwdbwd", "infer")
LOSS = "(h.float() * probe).mean(), probe a seeded standard normal of h's shape"
# NOTE: the key biases are left out of the worst gradient error: softmax ignores a shift that is the
# same for every key, so their exact gradient is zero and any computed one is rounding noise.
NOT_WORST = ("k_proj.bias",)


@dataclass(frozen=True)
class SiglipShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    patch_size: int
    batch: int
    patches: int  # a square: the images are sqrt(patches) x sqrt(patches) patches, the position grid too


FULL = SiglipShape(layers=4, hidden=1152, intermediate=4304, heads=16, patch_size=16, batch=64, patches=256)
TINY = SiglipShape(layers=2, hidden=64, intermediate=152, heads=4, patch_size=4, batch=3, patches=16)


Settings = hf_harness.Settings  # (shape: a SiglipShape)


# ----------------------------------------------------------------------------------------
# The model and the providers
# ----------------------------------------------------------------------------------------


def side(patches: int) -> int:
    """The side of a square of ``patches`` patches; ValueError if there is none."""
    root = round(patches**0.5)
    if root * root != patches:
        raise ValueError(f"{patches} patches are no square image (16 x 16 = 256 are)")
    return root


def build_base(shape: SiglipShape, dtype: torch.dtype, device: torch.device):
    """(the seeded Siglip2VisionModel, its inputs, the loss of a training step)."""
    from transformers import Siglip2VisionConfig, Siglip2VisionModel

    config = Siglip2VisionConfig(hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                                 num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                                 patch_size=shape.patch_size, num_patches=shape.patches, num_channels=3,
                                 hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False,
                                 attn_implementation="sdpa")
    torch.manual_seed(0)
    model = Siglip2VisionModel(config).to(device=device, dtype=dtype)
    generator = torch.Generator().manual_seed(1)
    pixels = torch.randn(shape.batch, shape.patches, 3 * shape.patch_size**2, generator=generator)
    inputs = {
        "pixel_values": pixels.to(device=device, dtype=dtype),  # (batch, patches, 3 * patch * patch)
        "pixel_attention_mask": torch.ones(shape.batch, shape.patches, dtype=torch.long, device=device),
        "spatial_shapes": torch.tensor([[side(shape.patches)] * 2] * shape.batch, device=device),  # (batch, 2)
    }
    # NOTE: not hf-llama's h.float().pow(2).mean(): after the final LayerNorm at init (weight 1, bias 0)
    # each row of h has mean 0 and variance 1, so that loss is a constant and every gradient but the
    # norm's own is rounding noise. A fixed random direction reaches every parameter.
    probe = torch.randn(shape.batch, shape.patches, shape.hidden, generator=generator).to(device)

    def loss(hidden):  # (batch, patches, hidden)
        return (hidden.float() * probe).mean()

    return model, inputs, loss


def make_provider(name: str, base):
    """(the module holding the parameters, the callable that runs it) of one provider."""
    import blockfuse

    model = copy.deepcopy(base)
    if name.startswith("blockfuse"):
        blockfuse.patch(model)
    return model, (torch.compile(model) if name.endswith("-compile") else model)


# ----------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------


def _measure(name: str, base, inputs: dict, loss, reference: dict, settings: Settings) -> list[dict]:
    model, run = make_provider(name, base)
    named_parameters = list(model.named_parameters())
    parameters = [p for _, p in named_parameters]

    def infer():
        with torch.no_grad():
            return run(**inputs).last_hidden_state

    calls = {"infer": infer, "fwd": lambda: run(**inputs).last_hidden_state,
             "fwdbwd": lambda: hf_harness.training_step(run, inputs, parameters, loss)}
    records = []
    for mode in [m for m in MODES if m in settings.modes]:
        hidden, first_call_s = hf_harness.seconds_of_first_call(calls[mode], settings.device)
        errors = (hf_harness.step_errors(hidden, named_parameters, reference, NOT_WORST) if mode == "fwdbwd"
                  else {"rel_err_out": relative_error(hidden, reference["hidden"])})
        del hidden
        result = hf_harness.time_call(calls[mode], settings.device, settings.quick,
                                      parameters if mode == "fwdbwd" else None)
        for parameter in parameters:
            parameter.grad = None
        records.append({"provider": name, "mode": mode, "ms": result.median, "p20": result.p20, "p80": result.p80,
                        "peak_mib": hf_harness.peak_mib(calls[mode], settings.device),
                        "first_call_s": first_call_s, **errors})
    if name.endswith("-compile"):
        breaks = hf_harness.graph_breaks()
        for record in records:
            record.update(breaks)
    return records


def run_provider(name: str, base, inputs: dict, loss, reference: dict, settings: Settings) -> list[dict]:
    """One record per mode; a provider that raises gets its error in each, and the others still run."""
    return hf_harness.run_guarded(name, [m for m in MODES if m in settings.modes],
                                  lambda: _measure(name, base, inputs, loss, reference, settings), settings.device)


def add_speedups(records: list[dict]) -> None:
    hf_harness.add_speedups(records, BASELINES)


def targets(records: list[dict]) -> list[dict]:
    """The issue's targets, status met / missed / n/a: the training step and inference of each blockfuse
    provider against HF run the same way (the eager pair always, the compiled pair when either ran)."""
    checks = []
    for ours, theirs in hf_harness.pairs_to_check(records, PAIRS):
        for mode in TARGET_MODES:
            checks.append(hf_harness.pair_check(records, mode, ours, theirs, "ms",
                                                f"{MODE_TITLES[mode]}: {theirs} ms / {ours} ms", SPEEDUP_TARGET, True,
                                                f"{mode} not in --modes"))
    return checks


# ----------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------


def workload_of(settings: Settings) -> dict:
    return {"name": NAME, "model": "Siglip2VisionModel", "attention": "sdpa", **asdict(settings.shape),
            "image_patches": [side(settings.shape.patches)] * 2, "pooling_head": False,
            "activation": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "dtype": settings.dtype, "tiny": settings.tiny,
            "loss": LOSS}


CSV_FIELDS = ("provider", "mode", "ms", "p20", "p80", "speedup_vs_hf-eager", "speedup_vs_hf-compile", "peak_mib",
              "rel_err_out", "rel_err_grad", "rel_err_grad_worst", "grad_worst_parameter", "graph_breaks",
              "first_call_s", "error")


COLUMNS = (
    ("provider", lambda r: r["provider"]),
    ("mode", lambda r: r["mode"]),
    ("ms (p20-p80)", hf_harness.timed),
    ("x hf-eager", lambda r: hf_harness.number(r.get("speedup_vs_hf-eager"), ".2f")),
    ("x hf-compile", lambda r: hf_harness.number(r.get("speedup_vs_hf-compile"), ".2f")),
    ("peak MiB", lambda r: hf_harness.number(r.get("peak_mib"), ".0f")),
    ("hidden error", lambda r: hf_harness.error(r, "rel_err_out")),
    ("grad error", lambda r: hf_harness.error(r, "rel_err_grad")),
    ("worst grad error (parameter)",
     lambda r: (f"{hf_harness.error(r, 'rel_err_grad_worst')} `{r['grad_worst_parameter']}`"
                if "rel_err_grad" in r else "-")),
    ("graph breaks", lambda r: str(r.get("graph_breaks", "-"))),
    ("first call s", lambda r: f"{r['first_call_s']:.1f}"),
)


def markdown(meta: dict, workload: dict, records: list[dict]) -> str:
    shape = workload
    lines = [
        "# blockfuse model benchmark: hf-siglip2 (Hugging Face Siglip2VisionModel)",
        "",
        *hf_harness.meta_lines(meta),
        f"- workload: Siglip2VisionModel{' (tiny config)' if workload['tiny'] else ''}, {shape['layers']} layers, "
        f"hidden {shape['hidden']}, MLP {shape['intermediate']}, {shape['heads']} heads, patch {shape['patch_size']}, "
        f"GELU-tanh, LayerNorm eps 1e-6, sdpa attention, no pooling head, {shape['dtype']}; pixel_values "
        f"({shape['batch']}, {shape['patches']}, {3 * shape['patch_size'] ** 2}), pixel_attention_mask all ones, "
        f"spatial_shapes {shape['image_patches'][0]} x {shape['image_patches'][1]}",
        "",
        hf_harness.time_note(meta) +
        " `infer`: the forward under no_grad; `fwd`: the forward with autograd on; `fwdbwd` (step): forward +"
        f" the loss {LOSS} + backward, grads set to None before each. x: a baseline's median over the"
        " provider's (> 1: faster). Peak: memory allocated during one call above what was allocated before it."
        " Errors: ||x - ref|| / ||ref|| of the last hidden state and of every parameter gradient together (worst"
        " parameter apart, the key biases left out: their exact gradient is zero) against an fp32 eager step with"
        " the same weights. First call: seconds of the mode's"
        " first call, compile included.",
        "",
        "## Targets",
        "",
        *[f"- **{t['status']}**: {t['text']}" for t in targets(records)],
        "",
        "## Results",
        "",
        *writer.record_table(COLUMNS, records),
    ]
    return "\n".join(lines) + "\n"


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Speed-up against hf-eager and peak memory per mode, per provider. False when matplotlib is missing."""
    panels = (writer.Panel("speedup_vs_hf-eager", "speed-up against hf-eager", line=1.0),
              writer.Panel("peak_mib", "peak memory of a call, MiB", missing="measured on CUDA only"))
    title = (f"Siglip2VisionModel, {workload['layers']} layers, hidden {workload['hidden']}, pixel_values "
             f"({workload['batch']}, {workload['patches']}, ...) {workload['dtype']}: {meta['card']}, "
             f"torch {meta['torch']}, triton {meta['triton']}")
    return writer.panel_plot(path, title, records, MODES, MODE_TITLES, panels)


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


def command(settings: Settings, out: Path) -> str:
    """The ``blockfuse bench model hf-siglip2`` command that reproduces a run of ``settings``."""
    shape = settings.shape
    words = ["blockfuse", "bench", "model", NAME, "--layers", str(shape.layers), "--shape",
             f"{shape.batch}x{shape.patches}", "--dtype", settings.dtype, "--providers",
             ",".join(p for p in PROVIDERS if p in settings.providers), "--modes", ",".join(settings.modes)]
    words += ["--quick"] * settings.quick + ["--tiny"] * settings.tiny
    return shlex.join(words + ["--out", str(out)])


def run(settings: Settings, on_update: Callable | None = None, show_progress: bool = True) -> list[dict]:
    """The records of every provider and mode of ``settings``; ``on_update(records)`` after each provider."""
    base, inputs, loss = build_base(settings.shape, DTYPES[settings.dtype], settings.device)
    reference: dict = {}
    setup = [("fp32 reference", lambda: reference.update(hf_harness.fp32_reference(base, inputs, loss)))]
    providers = [p for p in PROVIDERS if p in settings.providers]
    return hf_harness.run_providers(NAME, providers, setup,
                                    lambda name: run_provider(name, base, inputs, loss, reference, settings),
                                    add_speedups, on_update, show_progress)
