"""The options of ``blockfuse bench model NAME --nproc N --parallel ...``: the parser's arguments, their checks
into one ``Settings``, and the command that gives the same settings again (what the launch re-runs)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from blockfuse.cliutil import UsageError, format_shape, parse_shape

PARALLELS = ("fsdp", "tp", "fsdp+tp")
PROVIDERS = ("eager", "compile", "fused", "fused+compile")
CPU_PROVIDERS = ("eager", "fused")  # torch.compile: minutes on a small CPU, asked for by name
LABELS = {
    "eager": "eager blocks (PyTorch ops, SDPA attention)",
    "compile": "eager blocks, each under torch.compile",
    "fused": "blockfuse's fused blocks",
    "fused+compile": "fused blocks, each under torch.compile",
}
OPTIMIZERS = ("adamw", "sgd")
# Options of the single-process benchmark that mean nothing here.
SINGLE_PROCESS_ONLY = ("modes", "fast", "quick", "compile_times", "tiny", "prompt", "new_tokens")
# Defaults of the training options (None on the parser, so that one given without --parallel is caught).
DEFAULTS = {"steps": 20, "warmup": 3, "optimizer": "adamw", "lr": 1e-4, "seed": 0}



@dataclass(frozen=True)
class Settings:
    name: str
    shape: tuple[int, int, int]  # per data-parallel rank: (batch, seq, d_model)
    layers: Optional[int]
    dtype: str
    providers: tuple[str, ...]
    parallels: tuple[str, ...]
    nproc: int
    tp: int  # tensor-parallel ranks of fsdp+tp
    steps: int = DEFAULTS["steps"]
    warmup: int = DEFAULTS["warmup"]
    optimizer: str = DEFAULTS["optimizer"]
    lr: float = DEFAULTS["lr"]
    seed: int = DEFAULTS["seed"]
    memory_fraction: Optional[float] = None
    profile: bool = False
    reference: bool = True
    memory_snapshot: bool = False
    overrides: tuple = ()
    linear: str = "bf16"  # "bf16", or "fp8:RECIPE" (blockfuse.fp8.convert before the model is sharded)


def add_arguments(parser) -> None:
    """The options of ``blockfuse bench model`` that make it this benchmark (``--nproc`` or ``--parallel``)."""
    parser.add_argument("--nproc", type=int, metavar="N",
                        help="train across N processes (one a GPU; gloo on the CPU without CUDA), re-launched "
                        "under torch.distributed.run; or run under torchrun yourself. With --parallel")
    parser.add_argument("--parallel", help=f"comma-separated from {','.join(PARALLELS)}: FSDP2 (fully_shard per "
                        "block, bf16 params, fp32 reduce), tensor + sequence parallelism "
                        "(blockfuse.distributed.tp_plan), or both on a 2-D mesh (dp x tp)")
    parser.add_argument("--tp", type=int, help="fsdp+tp: tensor-parallel ranks (default 2; must divide --nproc)")
    parser.add_argument("--steps", type=int, help="--parallel: optimizer steps; the loss after the last is "
                        f"compared with one GPU's (default {DEFAULTS['steps']})")
    parser.add_argument("--warmup", type=int, help=f"--parallel: steps not timed (default {DEFAULTS['warmup']})")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, help=f"--parallel: (default {DEFAULTS['optimizer']})")
    parser.add_argument("--lr", type=float, help=f"--parallel: learning rate (default {DEFAULTS['lr']:g})")
    parser.add_argument("--seed", type=int, help="--parallel: seed of the weights and batches (default 0)")
    parser.add_argument("--memory-fraction", type=float, metavar="F",
                        help="--parallel: torch.cuda.set_per_process_memory_fraction(F) in every process")
    parser.add_argument("--max-batch", action="store_true",
                        help="--parallel: also find each provider's largest batch per GPU that trains (one launch "
                        "a try) and its tokens/s")
    parser.add_argument("--profile", action="store_true",
                        help="--parallel: one more step under the torch profiler per provider: rank 0's trace and "
                        "the communication kernels it ran")
    parser.add_argument("--memory-snapshot", action="store_true",
                        help="--parallel: rank 0 records the CUDA allocator's history from each provider's build "
                        "on, then one more step: what is alive at its peak and after it, by the line that allocated "
                        "it (recording slows the timed steps: time without it)")
    parser.add_argument("--no-reference", dest="reference", action="store_const", const=False,
                        help="--parallel: skip rank 0's one-GPU run (no loss difference)")


_OWN_OPTIONS = ("tp", "steps", "warmup", "optimizer", "lr", "seed", "memory_fraction", "max_batch", "profile",
                "memory_snapshot", "reference")


def _given(args, name: str) -> bool:
    value = getattr(args, name, None)
    return value is False if name == "reference" else value not in (None, False)


def wanted(args) -> bool:
    """True when ``args`` (of ``blockfuse bench model``) ask for this benchmark: ``--nproc`` or ``--parallel``,
    or one of its own options (then :func:`settings_from` asks for ``--parallel``)."""
    return any(_given(args, name) for name in ("nproc", "parallel", *_OWN_OPTIONS))


def _parse_list(text: str, allowed: tuple[str, ...], option: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise UsageError(f"{option}: expected comma-separated names from {','.join(allowed)}, got {text!r}")
    return items


def world_size_of_torchrun() -> Optional[int]:
    """WORLD_SIZE when this process is a worker started by torchrun, else None."""
    if "TORCHELASTIC_RUN_ID" in os.environ or ("LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ):
        return int(os.environ["WORLD_SIZE"])
    return None


def settings_from(args) -> Settings:
    """The checked settings of ``args``; a :class:`UsageError` names what is wrong."""
    from blockfuse.analyze.targets import CPU_SHAPE
    from blockfuse.models import PRESETS, preset, width_overrides

    for flag in SINGLE_PROCESS_ONLY:
        if getattr(args, flag, None):
            raise UsageError(f"--{flag.replace('_', '-')} is for the single-process benchmark; with --parallel "
                             "the options are --steps, --warmup, --optimizer, --lr, --seed, --providers, "
                             "--memory-fraction, --max-batch, --profile, --memory-snapshot")
    if args.name not in PRESETS:
        raise UsageError(f"--parallel: unknown preset {args.name!r}; choose from {' '.join(PRESETS)}")
    if args.parallel is None:
        given = [f"--{'no-reference' if name == 'reference' else name.replace('_', '-')}"
                 for name in ("nproc", *_OWN_OPTIONS) if _given(args, name)]
        raise UsageError(f"{' '.join(given)}: for the multi-GPU benchmark; say how to split the model: "
                         f"--nproc N --parallel {'|'.join(PARALLELS)}")
    chosen = {name: DEFAULTS[name] if getattr(args, name) is None else getattr(args, name) for name in DEFAULTS}
    parallels = _parse_list(args.parallel, PARALLELS, "--parallel")
    launched = world_size_of_torchrun()
    nproc = args.nproc if args.nproc is not None else launched
    if nproc is None:
        raise UsageError("--parallel: give --nproc N (or run under torchrun --nproc-per-node N)")
    if nproc < 1:
        raise UsageError(f"--nproc: expected at least 1, got {nproc}")
    if launched is not None and launched != nproc:
        raise UsageError(f"--nproc {nproc}, but torchrun started {launched} processes")
    if launched is None and torch.cuda.is_available() and nproc > torch.cuda.device_count():
        raise UsageError(f"--nproc {nproc}: this machine has {torch.cuda.device_count()} GPU(s), one a process")
    tp = args.tp if args.tp is not None else min(2, nproc)
    if args.tp is not None and "fsdp+tp" not in parallels:
        raise UsageError("--tp is for --parallel fsdp+tp (tp alone uses every rank)")
    if "fsdp+tp" in parallels and (tp < 1 or nproc % tp):
        raise UsageError(f"--tp {tp}: must divide --nproc {nproc} (the mesh is (--nproc / --tp) x --tp)")
    if chosen["steps"] < 1 or chosen["warmup"] < 0 or chosen["warmup"] >= chosen["steps"]:
        raise UsageError(f"--steps {chosen['steps']} --warmup {chosen['warmup']}: expected 0 <= warmup < steps")
    if args.memory_fraction is not None and not 0 < args.memory_fraction <= 1:
        raise UsageError(f"--memory-fraction: expected a fraction in (0, 1], got {args.memory_fraction}")
    if args.max_batch and not torch.cuda.is_available():
        raise UsageError("--max-batch: searches the batch that fits in GPU memory: needs CUDA")
    if getattr(args, "memory_snapshot", False) and not torch.cuda.is_available():
        raise UsageError("--memory-snapshot: records the CUDA caching allocator: needs CUDA")
    if not chosen["lr"] > 0:
        raise UsageError(f"--lr: expected a positive rate, got {chosen['lr']}")
    cuda = torch.cuda.is_available()
    providers = _parse_list(args.providers, PROVIDERS, "--providers") if args.providers else \
        (PROVIDERS if cuda else CPU_PROVIDERS)
    if args.shape:
        try:
            shape = parse_shape(args.shape, option="--shape", dims=(3,))
        except UsageError as error:
            raise UsageError(f"{error} (batch per GPU x seq x d_model, e.g. 2x4096x2048)") from None
    else:
        own = preset(args.name).shape
        shape = own if cuda else CPU_SHAPE
    try:
        overrides = tuple(width_overrides(args.name, shape[-1]).items())
    except ValueError as error:
        raise UsageError(f"--shape {format_shape(shape)}: {error}") from None
    if args.layers is not None and args.layers < 1:
        raise UsageError(f"--layers: expected at least 1, got {args.layers}")
    linear = _linear(getattr(args, "linear", None) or "bf16")
    return Settings(name=args.name, shape=tuple(shape), layers=args.layers, dtype=args.dtype, providers=providers,
                    parallels=parallels, nproc=nproc, tp=tp, memory_fraction=args.memory_fraction,
                    profile=args.profile, reference=args.reference is not False, overrides=overrides,
                    memory_snapshot=bool(getattr(args, "memory_snapshot", False)), linear=linear, **chosen)


def _linear(text: str) -> str:
    """``--linear`` for the multi-GPU step: bf16 or blockfuse's FP8 layers (torchao's are the single-process
    benchmark's baseline, not sharded here)."""
    from blockfuse.bench.block import parse_linear

    try:
        linear = parse_linear(text)
    except ValueError as error:
        raise UsageError(f"--{error}") from None
    if linear.startswith("torchao"):
        raise UsageError(f"--linear {text}: with --parallel the Linear layers are bf16 or blockfuse's FP8 ones "
                         "(fp8:tensorwise, fp8:rowwise, fp8:delayed)")
    return linear


def command(settings: Settings, out: Optional[Path]) -> str:
    """The ``blockfuse bench model`` command of ``settings``, every choice spelled out (what is re-launched)."""
    words = ["blockfuse", "bench", "model", settings.name, "--nproc", str(settings.nproc),
             "--parallel", ",".join(settings.parallels)]
    if "fsdp+tp" in settings.parallels:
        words += ["--tp", str(settings.tp)]
    words += ["--shape", format_shape(settings.shape)]
    if settings.layers is not None:
        words += ["--layers", str(settings.layers)]
    if settings.linear != "bf16":
        words += ["--linear", settings.linear]
    words += ["--dtype", settings.dtype, "--providers", ",".join(settings.providers), "--steps", str(settings.steps),
              "--warmup", str(settings.warmup), "--optimizer", settings.optimizer, "--lr", f"{settings.lr:g}",
              "--seed", str(settings.seed)]
    if settings.memory_fraction is not None:
        words += ["--memory-fraction", f"{settings.memory_fraction:g}"]
    words += ["--profile"] * settings.profile + ["--memory-snapshot"] * settings.memory_snapshot
    words += ["--no-reference"] * (not settings.reference)
    if out is not None:
        words += ["--out", str(out)]
    return shlex.join(words)


def stem(settings: Settings) -> str:
    """The file name (no suffix) of a run's results: ``model-NAME-PARALLELS-xN`` (``-fp8-RECIPE`` after it with
    FP8 layers)."""
    linear = "" if settings.linear == "bf16" else "-" + settings.linear.replace(":", "-").replace("+", "-")
    return f"model-{settings.name}-{'_'.join(settings.parallels)}-x{settings.nproc}{linear}"
