"""Training steps of a preset's stack across GPUs, under PyTorch's own engines:
``blockfuse bench model NAME --nproc N --parallel fsdp|tp|fsdp+tp``.

The command re-launches itself under ``torch.distributed.run`` (torchrun) with N processes on this machine (a
free port each run); ``torchrun --nproc-per-node N -m blockfuse bench model NAME --parallel ...`` runs the same
workers directly. NCCL on GPUs (one a process), gloo and CPU tensors without CUDA.

Per parallelism and provider (``eager``; ``compile``: each eager block under ``torch.compile``; ``fused``;
``fused+compile``: each fused block under ``torch.compile``), every rank builds the same seeded weights and
trains ``--steps`` steps (a step: zero the gradients, forward, the loss, backward, the optimizer's step) on
seeded random batches, the loss the mean squared error of the stack's output against a random target (the
stack has no LM head):

* ``fsdp``: ``fully_shard`` on each block, then on the stack, over all ranks, with
  ``MixedPrecisionPolicy(param_dtype=--dtype, reduce_dtype=float32)``; each rank its own ``--shape`` batch;
* ``tp``: ``parallelize_module(stack, mesh, blockfuse.distributed.tp_plan(stack, sequence_parallel=True))``
  over all ranks; every rank the same ``--shape`` batch;
* ``fsdp+tp``: a 2-D mesh (dp, tp) of ``N / --tp`` by ``--tp`` ranks: the TP plan on the tp dimension, then
  ``fully_shard`` on the dp dimension; each dp rank its own batch.

Parameters and optimizer state are float32 everywhere and the blocks compute in ``--dtype``: under FSDP2 its
policy does it; elsewhere (TP, and the one-GPU reference) the module holds ``--dtype`` parameters and the
optimizer steps their float32 copies, the same arithmetic. Compiled providers compile each block after the TP
plan and before ``fully_shard`` (torchtitan's order). Rank 0 also trains the same provider unsharded on the
whole global batch (every dp rank's batch), the same seeds and steps: "one GPU". Recorded: the step time per
GPU (median after ``--warmup`` steps, the slowest rank's), the global tokens a second, the peak memory each GPU
allocates during training (parameters, gradients and optimizer state included), the loss after each step and
its relative difference from one GPU's, and one GPU's own step time on the global batch. ``--profile`` records
one more step under the torch profiler (rank 0's Chrome trace) and lists its communication kernels (``nccl*``;
on the CPU gloo's ``gloo:*`` calls) with their count and time. ``--max-batch`` searches, per provider, the
largest batch per GPU that trains (each try its own launch, so that a rank out of memory cannot hang the
others), with ``--memory-fraction`` capping each process's CUDA memory.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from blockfuse.bench.runner import DTYPES
from blockfuse.cliutil import UsageError, default_out, format_shape, parse_shape

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
# The issue's targets (2 GPUs): a fused provider's step at least this fraction of compile's speed, its peak at
# most this fraction of compile's, and every provider's loss after the last step within this relative
# difference of one GPU's.
SPEED_TARGET = {"fsdp": 1.0, "tp": 1.0}
MEMORY_TARGET = {"fsdp": 0.8}
LOSS_TARGET = 1e-3
MAX_BATCH_TRY_S = 600  # one try of --max-batch: build, compile and a few steps
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
    overrides: tuple = ()


# ----------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------


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
    parser.add_argument("--no-reference", dest="reference", action="store_const", const=False,
                        help="--parallel: skip rank 0's one-GPU run (no loss difference)")


_OWN_OPTIONS = ("tp", "steps", "warmup", "optimizer", "lr", "seed", "memory_fraction", "max_batch", "profile",
                "reference")


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


def _world_size_of_torchrun() -> Optional[int]:
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
                             "--memory-fraction, --max-batch, --profile")
    if args.name not in PRESETS:
        raise UsageError(f"--parallel: unknown preset {args.name!r}; choose from {' '.join(PRESETS)}")
    if args.parallel is None:
        given = [f"--{'no-reference' if name == 'reference' else name.replace('_', '-')}"
                 for name in ("nproc", *_OWN_OPTIONS) if _given(args, name)]
        raise UsageError(f"{' '.join(given)}: for the multi-GPU benchmark; say how to split the model: "
                         f"--nproc N --parallel {'|'.join(PARALLELS)}")
    chosen = {name: DEFAULTS[name] if getattr(args, name) is None else getattr(args, name) for name in DEFAULTS}
    parallels = _parse_list(args.parallel, PARALLELS, "--parallel")
    launched = _world_size_of_torchrun()
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
    return Settings(name=args.name, shape=tuple(shape), layers=args.layers, dtype=args.dtype, providers=providers,
                    parallels=parallels, nproc=nproc, tp=tp, memory_fraction=args.memory_fraction,
                    profile=args.profile, reference=args.reference is not False, overrides=overrides, **chosen)


def command(settings: Settings, out: Optional[Path]) -> str:
    """The ``blockfuse bench model`` command of ``settings``, every choice spelled out (what is re-launched)."""
    words = ["blockfuse", "bench", "model", settings.name, "--nproc", str(settings.nproc),
             "--parallel", ",".join(settings.parallels)]
    if "fsdp+tp" in settings.parallels:
        words += ["--tp", str(settings.tp)]
    words += ["--shape", format_shape(settings.shape)]
    if settings.layers is not None:
        words += ["--layers", str(settings.layers)]
    words += ["--dtype", settings.dtype, "--providers", ",".join(settings.providers), "--steps", str(settings.steps),
              "--warmup", str(settings.warmup), "--optimizer", settings.optimizer, "--lr", f"{settings.lr:g}",
              "--seed", str(settings.seed)]
    if settings.memory_fraction is not None:
        words += ["--memory-fraction", f"{settings.memory_fraction:g}"]
    words += ["--profile"] * settings.profile + ["--no-reference"] * (not settings.reference)
    if out is not None:
        words += ["--out", str(out)]
    return shlex.join(words)


def stem(settings: Settings) -> str:
    """The file name (no suffix) of a run's results: ``model-NAME-PARALLELS-xN``."""
    return f"model-{settings.name}-{'_'.join(settings.parallels)}-x{settings.nproc}"


def main(args) -> int:
    """``blockfuse bench model NAME --nproc N --parallel ...``: a torchrun worker runs the benchmark; otherwise
    the command re-launches itself under torchrun (and with ``--max-batch`` searches the batch afterwards)."""
    settings = settings_from(args)
    if _world_size_of_torchrun() is not None:
        if args.max_batch:
            raise UsageError("--max-batch launches its own tries: run it without torchrun")
        return _worker_main(settings, args.out)
    out = args.out or default_out(_card_name(), "-distributed")
    out.mkdir(parents=True, exist_ok=True)
    code = launch(settings, out)
    if args.max_batch:
        code = max(code, search_max_batch(settings, out))
    return code


def _card_name() -> str:
    import platform

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)}x{torch.cuda.device_count()}"
    return f"CPU ({platform.machine() or 'unknown'})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(settings: Settings, out: Path, timeout: Optional[float] = None, log: Optional[Path] = None) -> int:
    """Runs ``settings`` under ``torch.distributed.run`` (``nproc`` processes on this machine, a free port), its
    output to ``log`` (a file) when given; its exit status (124 when ``timeout`` seconds passed first, its
    processes then ended)."""
    import signal

    import blockfuse

    source = str(Path(blockfuse.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (source, os.environ.get("PYTHONPATH"))))}
    # NOTE: the host's cores shared among the processes (torchrun would set 1 and say so in a banner).
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // settings.nproc)))
    # NOTE: without --nproc, which torchrun's own parser would take for an abbreviation of its --nproc-per-node
    # (it reads the script's arguments too): a worker knows the world size from torchrun.
    words = shlex.split(command(settings, out))
    at = words.index("--nproc")
    del words[at:at + 2]
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(settings.nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "-m", "blockfuse", *words[1:]]
    text = "launching: " + shlex.join(["torchrun", *argv[3:]])
    stream = None if log is None else log.open("w")
    if stream is None:
        print(text, flush=True)
    else:
        print(text, file=stream, flush=True)
    # its own session, so that a timeout ends torchrun and every worker it started
    process = subprocess.Popen(argv, env=env, stdout=stream, stderr=subprocess.STDOUT if stream else None,
                               start_new_session=timeout is not None)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return 124
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        if stream is not None:
            stream.close()


# ----------------------------------------------------------------------------------------
# The workers
# ----------------------------------------------------------------------------------------


class _World:
    """This process in the job: rank, size, device, and the meshes of each parallelism."""

    def __init__(self, settings: Settings):
        import torch.distributed as dist

        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")
        self.tp = settings.tp
        self._meshes: dict = {}

    def mesh(self, parallel: str):
        """A 1-D mesh of every rank (fsdp, tp), or the 2-D (dp, tp) mesh of fsdp+tp."""
        from torch.distributed.device_mesh import init_device_mesh

        key = "2d" if parallel == "fsdp+tp" else "1d"
        if key not in self._meshes:
            shape, names = ((self.size // self.tp, self.tp), ("dp", "tp")) if key == "2d" else ((self.size,), ("all",))
            self._meshes[key] = init_device_mesh(self.device.type, shape, mesh_dim_names=names)
        return self._meshes[key]

    def data_parallel(self, parallel: str) -> tuple[int, int]:
        """(data-parallel ranks, this rank's index among them)."""
        if parallel == "fsdp":
            return self.size, self.rank
        if parallel == "tp":
            return 1, 0
        mesh = self.mesh(parallel)
        return mesh["dp"].size(), mesh["dp"].get_local_rank()

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


class _Work:
    """The workload every run of the job shares: the preset's config, the seeded fp32 weights (on the CPU, so
    that they count in no GPU's peak), and the seeded batches."""

    def __init__(self, settings: Settings, world: _World):
        from blockfuse.models import build_model

        self.settings, self.world = settings, world
        shape = settings.shape
        base, _ = build_model(settings.name, shape, torch.float32, "cpu", layers=settings.layers, seed=settings.seed,
                              **dict(settings.overrides))
        self.config, self.layers = base.config, len(base.blocks)
        self.state = base.state_dict()
        self.dtype = DTYPES[settings.dtype]

    def module(self, provider: str, dtype: torch.dtype):
        """The provider's stack (not yet compiled) on this rank's device, the job's weights, in ``dtype``."""
        from blockfuse.models import TransformerStack

        impl = "fused" if provider.startswith("fused") else "eager"
        # NOTE: built on the device (random init of a 1B model on one CPU thread: seconds), then overwritten.
        with torch.device(self.world.device):
            model = TransformerStack(self.config, self.layers, impl)
        model.load_state_dict(self.state)
        return model.to(dtype).train()

    def batch(self, step: int, data_ranks: int, index: Optional[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``step``'s (input, target): the global batch of ``data_ranks`` per-rank batches (the same on every
        rank: seeded), of which rank ``index``'s share (None: all of it)."""
        batch, seq, width = self.settings.shape
        device = self.world.device
        generator = torch.Generator(device=device).manual_seed(self.settings.seed * 1_000_003 + step)
        shape = (batch * data_ranks, seq, width)
        x = torch.randn(shape, generator=generator, device=device)  # (batch, seq, d_model)
        target = torch.randn(shape, generator=generator, device=device)
        if index is not None and data_ranks > 1:
            rows = slice(index * batch, (index + 1) * batch)
            x, target = x[rows].clone(), target[rows].clone()  # the global tensors freed
        return x.to(self.dtype), target


def _compile_blocks(model) -> None:
    """Each block under its own ``torch.compile`` (the stack's loop stays eager)."""
    for index, block in enumerate(model.blocks):
        model.blocks[index] = torch.compile(block)


class _Optimizer:
    """float32 parameters and optimizer state for a module that computes in a lower dtype.

    Under FSDP2 the module's parameters are float32 shards (its policy casts them when it gathers them) and this
    is the plain optimizer over them. Otherwise (``copies``) the module holds its parameters in the compute dtype
    and the optimizer steps float32 copies of their local tensors: each step the gradients are cast up, the copies
    stepped and cast back down into the module (the arithmetic of FSDP2's policy without the sharding; on a
    tensor-parallel rank, its shard or replica of each parameter, elementwise the same update). A DTensor gradient
    placed unlike its parameter (a tensor-parallel norm weight's ``Partial()`` sum) is first reduced to the
    parameter's placement."""

    def __init__(self, model, settings: Settings, copies: bool):
        from torch.distributed.tensor import DTensor

        self.params = [p for p in model.parameters() if p.requires_grad]
        self.copies = copies
        if copies:
            # NOTE: plain local tensors, so that the optimizer's foreach kernels and the casts back skip DTensor's
            # dispatch (a 1B model's ~80 parameters: milliseconds of host time a step otherwise)
            self.locals = [p.to_local() if isinstance(p, DTensor) else p for p in self.params]
            stepped = [t.detach().float().clone() for t in self.locals]
        else:
            stepped = self.params
        self.stepped = stepped
        if settings.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(stepped, lr=settings.lr)
        else:
            self.optimizer = torch.optim.SGD(stepped, lr=settings.lr)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        from torch.distributed.tensor import DTensor

        for p in self.params:
            grad = p.grad
            if isinstance(grad, DTensor) and tuple(grad.placements) != tuple(p.placements):
                p.grad = grad.redistribute(p.device_mesh, p.placements)
        if not self.copies:
            self.optimizer.step()
            return
        for master, p in zip(self.stepped, self.params):
            grad = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            master.grad = grad.float()
        self.optimizer.step()
        with torch.no_grad():
            torch._foreach_copy_(self.locals, self.stepped)
        for master in self.stepped:
            master.grad = None


def _train(run: Callable, optimizer: _Optimizer, batches: Callable, settings: Settings, world: _World):
    """Trains ``settings.steps`` steps; ``(losses, step ms, peak MiB, step)``: each step's loss (this rank's
    batch), each step's wall time (synchronized), the peak CUDA memory allocated over the steps (None on the
    CPU), and the step function (for the profiler)."""
    import torch.nn.functional as F

    def step(x, target):
        optimizer.zero_grad()
        out = run(x)  # (batch, seq, d_model)
        loss = F.mse_loss(out.float(), target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    losses, times = [], []
    world.synchronize()
    if world.cuda:
        torch.cuda.reset_peak_memory_stats()
    for index in range(settings.steps):
        x, target = batches(index)
        world.synchronize()
        began = time.perf_counter()
        losses.append(step(x, target))
        world.synchronize()
        times.append((time.perf_counter() - began) * 1e3)
        del x, target
    peak = torch.cuda.max_memory_allocated() / 2**20 if world.cuda else None
    return torch.stack(losses).float(), times, peak, step


def _timing(times: list[float], warmup: int) -> dict:
    from blockfuse.bench.timing import summarize

    timed = summarize(times[warmup:])
    return {"ms": timed.median, "p20": timed.p20, "p80": timed.p80}


def _release(world: _World) -> None:
    gc.collect()
    torch._dynamo.reset()  # the provider's graphs go with it
    if world.cuda:
        torch.cuda.empty_cache()


def _one_gpu(work: _Work, provider: str, data_ranks: int) -> dict:
    """Rank 0 alone: the provider unsharded on the whole global batch, the same seeds and steps."""
    settings, world = work.settings, work.world
    model = work.module(provider, work.dtype)
    if "compile" in provider:
        _compile_blocks(model)
    optimizer = _Optimizer(model, settings, copies=work.dtype != torch.float32)
    losses, times, peak, _ = _train(model, optimizer, lambda i: work.batch(i, data_ranks, None), settings, world)
    batch, seq, _ = settings.shape
    result = {"batch": batch * data_ranks, "losses": [float(v) for v in losses], "peak_mib": peak,
              **_timing(times, settings.warmup)}
    result["tokens_per_s"] = batch * data_ranks * seq / (result["ms"] * 1e-3)
    del model, optimizer
    _release(world)
    return result


def _distribute(model, parallel: str, provider: str, work: _Work) -> None:
    """Shards ``model`` as ``parallel`` says (compiling its blocks in between for a compiled provider)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    mesh = work.world.mesh(parallel)
    if parallel in ("tp", "fsdp+tp"):
        parallelize_module(model, mesh["tp"] if parallel == "fsdp+tp" else mesh,
                           tp_plan(model, sequence_parallel=True))
    if "compile" in provider:
        _compile_blocks(model)
    if parallel in ("fsdp", "fsdp+tp"):
        policy = MixedPrecisionPolicy(param_dtype=work.dtype, reduce_dtype=torch.float32)
        dp_mesh = mesh["dp"] if parallel == "fsdp+tp" else mesh
        for block in model.blocks:
            fully_shard(block, mesh=dp_mesh, mp_policy=policy)
        fully_shard(model, mesh=dp_mesh, mp_policy=policy)


def _sharded(work: _Work, parallel: str, provider: str, trace: Optional[Path]) -> dict:
    """Every rank: the provider trained under ``parallel``; this rank's figures."""
    import torch.distributed as dist

    settings, world = work.settings, work.world
    fsdp = parallel in ("fsdp", "fsdp+tp")
    # FSDP2's policy casts float32 parameters; elsewhere the module computes in the dtype with float32 copies
    model = work.module(provider, torch.float32 if fsdp else work.dtype)
    _distribute(model, parallel, provider, work)
    optimizer = _Optimizer(model, settings, copies=not fsdp and work.dtype != torch.float32)
    data_ranks, index = world.data_parallel(parallel)
    losses, times, peak, step = _train(model, optimizer, lambda i: work.batch(i, data_ranks, index), settings, world)
    # the global loss: the mean of the data-parallel ranks' (tensor-parallel ranks hold equal ones)
    losses = losses.to(world.device)
    dist.all_reduce(losses)
    losses /= world.size
    result = {"losses": [float(v) for v in losses.cpu()], "peak_mib": peak, "times": times,
              "reserved_mib": torch.cuda.max_memory_reserved() / 2**20 if world.cuda else None}
    if settings.profile:
        x, target = work.batch(settings.steps, data_ranks, index)
        result["communication"] = _profile(lambda: step(x, target), world, trace)
    del model, optimizer
    _release(world)
    return result


# ----------------------------------------------------------------------------------------
# The profile
# ----------------------------------------------------------------------------------------


def _collective(name: str) -> str:
    plain = name.lower().replace("_", "")
    for kind in ("allgather", "reducescatter", "allreduce", "broadcast", "alltoall", "sendrecv", "send", "recv"):
        if kind in plain:
            return {"allgather": "all_gather", "reducescatter": "reduce_scatter", "allreduce": "all_reduce",
                    "alltoall": "all_to_all"}.get(kind, kind)
    return "other"


def _profile(step: Callable, world: _World, trace: Optional[Path]) -> list[dict]:
    """One ``step()`` under the torch profiler; its communication: NCCL kernels on GPUs (their GPU time), gloo's
    calls on the CPU (their wall time), by name: ``{name, kind, count, ms}``. Writes the Chrome trace to
    ``trace`` (when given)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if world.cuda else [])
    with profile(activities=activities) as profiler:
        step()
        world.synchronize()
    if trace is not None:
        profiler.export_chrome_trace(str(trace))
    found = []
    for event in profiler.key_averages():
        name = event.key
        if world.cuda:
            if event.device_type != DeviceType.CUDA or not name.lower().startswith("nccl"):
                continue
            total_us = getattr(event, "device_time_total", None)
            if total_us is None:
                total_us = event.cuda_time_total
        else:
            if not name.startswith("gloo:"):
                continue
            total_us = event.cpu_time_total
        found.append({"name": name, "kind": _collective(name), "count": event.count, "ms": total_us / 1e3})
    return sorted(found, key=lambda e: -e["ms"])


def planned_collectives(parallel: str, layers: int) -> Optional[dict]:
    """The all-gathers and reduce-scatters a training step of the TP plan (sequence parallel) makes: in the forward
    one all-gather into each block's attention and MLP, one reduce-scatter out of each, and the stack's output
    gathered; in the backward their mirror images (the input's gradient, which the step does not need, is not
    gathered). A norm that gathered its input would add to them. (On gloo a reduce-scatter runs as an all-reduce;
    the all-reduces also sum the replicated weights' gradients, the norms' and the output biases', before the
    optimizer's step.)"""
    if parallel != "tp":
        return None
    return {"all_gather": 2 * (2 * layers + 1) - 1, "reduce_scatter": 2 * 2 * layers}


# ----------------------------------------------------------------------------------------
# The job
# ----------------------------------------------------------------------------------------


def _gathered_error(error: Optional[str]) -> Optional[str]:
    """Every rank's error (or None), the first one found: rank 0 records a failure wherever it happened."""
    import torch.distributed as dist

    errors = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    return next((f"rank {rank}: {e}" if rank else e for rank, e in enumerate(errors) if e), None)


def _record(work: _Work, parallel: str, provider: str, reference: Optional[dict], sharded: dict,
            ranks: list[dict]) -> dict:
    settings = work.settings
    data_ranks, _ = work.world.data_parallel(parallel)
    batch, seq, _ = settings.shape
    tp = work.world.size // data_ranks
    # the slowest rank's median: the step of the job
    slowest = max(ranks, key=lambda r: r["ms"])
    record = {"parallel": parallel, "provider": provider, "mesh": {"dp": data_ranks, "tp": tp},
              "batch_per_rank": batch, "global_batch": batch * data_ranks, "tokens_per_step": batch * data_ranks * seq,
              "ms": slowest["ms"], "p20": slowest["p20"], "p80": slowest["p80"],
              "ms_by_rank": [r["ms"] for r in ranks], "peak_mib_by_rank": [r["peak_mib"] for r in ranks],
              "peak_mib": max((r["peak_mib"] for r in ranks if r["peak_mib"] is not None), default=None),
              "reserved_mib": max((r["reserved_mib"] for r in ranks if r["reserved_mib"] is not None), default=None),
              "losses": sharded["losses"], "loss": sharded["losses"][-1]}
    record["tokens_per_s"] = record["tokens_per_step"] / (record["ms"] * 1e-3)
    first, last = sharded["losses"][0], sharded["losses"][-1]
    record["loss_moved"] = abs(first - last) / abs(first) if first else None
    if sharded.get("communication") is not None:
        record["communication"] = sharded["communication"]
        planned = planned_collectives(parallel, work.layers)
        if planned:
            record["planned_collectives"] = planned
    if reference is not None:
        record["one_gpu"] = reference
        if reference.get("error"):
            record["loss_error"] = f"one GPU: {reference['error']}"
        else:
            pairs = list(zip(sharded["losses"], reference["losses"]))
            record["loss_rel_diff"] = abs(last - reference["losses"][-1]) / abs(reference["losses"][-1])
            record["loss_rel_diff_max"] = max(abs(a - b) / abs(b) for a, b in pairs)
            record["speedup_vs_one_gpu"] = record["tokens_per_s"] / reference["tokens_per_s"]
    return record


def _run_provider(work: _Work, parallel: str, provider: str, references: dict, traces: Optional[Path]) -> dict:
    """Every rank: the record of ``provider`` under ``parallel`` (complete on rank 0), one GPU's run added from
    ``references`` (rank 0 fills it: one run per provider and global batch)."""
    import torch.distributed as dist

    from blockfuse.bench.runner import _describe

    settings, world = work.settings, work.world
    data_ranks, _ = world.data_parallel(parallel)
    sharded, error = None, None
    trace = traces / f"trace-{parallel}-{provider}-rank0.json" if traces and world.rank == 0 else None
    try:
        sharded = _sharded(work, parallel, provider, trace)
    except Exception as caught:  # noqa: BLE001 (a provider that fails is reported, the rest still run)
        error = _describe(caught)
        _release(world)
    error = _gathered_error(error)
    if error is not None:
        return {"parallel": parallel, "provider": provider, "error": error}
    mine = {**_timing(sharded["times"], settings.warmup), "peak_mib": sharded["peak_mib"],
            "reserved_mib": sharded["reserved_mib"]}
    ranks = [None] * world.size
    dist.all_gather_object(ranks, mine)
    # NOTE: one GPU after the sharded run, whose peak memory it so cannot touch; the other ranks wait.
    if settings.reference and world.rank == 0 and (provider, data_ranks) not in references:
        try:
            references[provider, data_ranks] = _one_gpu(work, provider, data_ranks)
        except Exception as caught:  # noqa: BLE001 (reported with the sharded run's record)
            references[provider, data_ranks] = {"error": _describe(caught)}
            _release(world)
    dist.barrier()
    return _record(work, parallel, provider, references.get((provider, data_ranks)), sharded, ranks)


def run_job(settings: Settings, on_update: Optional[Callable] = None, traces: Optional[Path] = None,
            say: Optional[Callable[[str], None]] = None) -> tuple[dict, list[dict]]:
    """Every rank: (workload, records) of every parallelism and provider (records complete on rank 0).
    ``on_update(workload, records)`` on rank 0 after each; ``traces``: the folder of rank 0's profiler traces."""
    import torch.distributed as dist

    world = _World(settings)
    work = _Work(settings, world)
    config = work.config
    batch, seq, width = settings.shape
    workload = {"name": settings.name, "shape_per_rank": [batch, seq, width], "layers": work.layers,
                "dtype": settings.dtype, "nproc": world.size,
                "backend": dist.get_backend(), "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
                "steps": settings.steps, "warmup": settings.warmup, "optimizer": settings.optimizer, "lr": settings.lr,
                "seed": settings.seed, "memory_fraction": settings.memory_fraction,
                "labels": {p: LABELS[p] for p in settings.providers},
                "loss": "mean squared error of the stack's output against a seeded random target",
                "step": "zero_grad + forward + loss + backward + optimizer step, fp32 parameters and optimizer state"}
    records: list[dict] = []
    references: dict = {}
    began = time.perf_counter()
    for parallel in settings.parallels:
        for provider in settings.providers:
            if say is not None and world.rank == 0:
                say(f"{parallel} {provider} ({time.perf_counter() - began:.0f} s so far)")
            records.append(_run_provider(work, parallel, provider, references, traces))
            if on_update is not None and world.rank == 0:
                on_update(workload, records)
    return workload, records


def _worker_main(settings: Settings, out: Optional[Path]) -> int:
    """One torchrun worker: the job, and on rank 0 the files. Leaves through ``os._exit``."""
    import torch.distributed as dist

    from blockfuse.bench import runner

    rank = int(os.environ.get("RANK", "0"))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        if settings.memory_fraction is not None:
            torch.cuda.set_per_process_memory_fraction(settings.memory_fraction, local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo")
    code = 0
    try:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
        meta = runner.environment(device)
        cards = [None] * dist.get_world_size()
        dist.all_gather_object(cards, meta["card"])
        if rank == 0:
            out = out or default_out(f"{meta['card']}x{settings.nproc}", "-distributed")
            out.mkdir(parents=True, exist_ok=True)
            meta.update(command=command(settings, out), cards=cards)
        path = out / stem(settings) if rank == 0 else None
        began = time.perf_counter()

        def write(workload, records):
            meta["elapsed_s"] = round(time.perf_counter() - began, 1)
            write_json(path.with_suffix(".json"), meta, workload, records)
            path.with_suffix(".md").write_text(markdown(meta, workload, records))

        workload, records = run_job(settings, on_update=write, traces=out if settings.profile and rank == 0 else None,
                                    say=lambda text: print(text, flush=True))
        if rank == 0:
            write(workload, records)
            plotted = write_plot(path.with_suffix(".png"), meta, workload, records)
            print(markdown(meta, workload, records))
            failed = [r for r in records if r.get("error")]
            print(f"{len(records)} runs, {len(failed)} failed, {meta['elapsed_s']} s; wrote {path}.{{json,md"
                  + (",png" if plotted else "") + "}", flush=True)
            code = 1 if any(r["provider"].startswith("fused") for r in failed) else 0
        dist.barrier()  # both ranks leave together
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass
    # NOTE: leave through os._exit once the output is flushed, as tests/multiprocess.py does: exiting normally, a
    # loaded CPU sometimes ended a gloo rank in "terminate called without an active exception" (exit -6) after
    # its work had passed, and torchrun would report the job failed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ----------------------------------------------------------------------------------------
# The largest batch
# ----------------------------------------------------------------------------------------


def _try_batch(settings: Settings, parallel: str, provider: str, batch: int, folder: Path) -> dict:
    """One launch of ``provider`` under ``parallel`` at ``batch`` per GPU, a few steps, no reference: its record,
    or ``{"error": ...}`` (out of memory, or the launch failed or hung)."""
    tried = dataclasses.replace(settings, shape=(batch, *settings.shape[1:]), providers=(provider,),
                                parallels=(parallel,), steps=settings.warmup + 3, reference=False, profile=False)
    out = folder / f"{parallel}-{provider}-b{batch}"
    out.mkdir(parents=True, exist_ok=True)
    code = launch(tried, out, timeout=MAX_BATCH_TRY_S, log=out / "launch.log")
    path = out / f"{stem(tried)}.json"
    if not path.exists():
        return {"error": f"launch exited {code} before writing results"}
    document = json.loads(path.read_text())
    record = document["records"][0] if document["records"] else {"error": f"launch exited {code} with no record"}
    return {**record, "meta": {key: document["meta"].get(key) for key in ("card", "cards", "torch", "triton")}}


def search_max_batch(settings: Settings, out: Path, limit: int = 1024) -> int:
    """Per parallelism and provider, the largest batch per GPU that trains (doubling from ``--shape``'s batch,
    then bisecting), each try its own launch; writes ``max-batch-NAME-xN.{json,md}``."""
    folder = out / "max-batch-tries"
    results, all_tries = [], []
    for parallel in settings.parallels:
        for provider in settings.providers:
            tries: dict[int, dict] = {}

            def fits(batch: int) -> bool:
                if batch not in tries:
                    tries[batch] = _try_batch(settings, parallel, provider, batch, folder)
                    verdict = "fits" if not tries[batch].get("error") else tries[batch]["error"][:100]
                    print(f"max batch, {parallel} {provider}: batch {batch}: {verdict}", flush=True)
                return not tries[batch].get("error")

            low, high = 0, None  # low fits (0: none yet), high does not
            batch = settings.shape[0]
            while high is None and batch <= limit:
                if fits(batch):
                    low, batch = batch, batch * 2
                else:
                    high = batch
            while high is not None and high - low > 1:  # (the first batch failing: bisect below it)
                middle = (low + high) // 2
                low, high = (middle, high) if fits(middle) else (low, middle)
            all_tries += tries.values()
            best = tries.get(low, {}) if low else {}
            results.append({"parallel": parallel, "provider": provider, "max_batch": low or None,
                            "first_failing_batch": high, "tokens_per_s": best.get("tokens_per_s"),
                            "ms": best.get("ms"), "peak_mib": best.get("peak_mib"),
                            "tries": {str(b): (r.get("error") or "fits") for b, r in sorted(tries.items())}})
    meta = next((r["meta"] for r in all_tries if r.get("meta")), {})
    document = {"command": command(settings, out) + " --max-batch", "meta": meta,
                "memory_fraction": settings.memory_fraction, "shape_per_rank": list(settings.shape),
                "results": results}
    path = out / f"max-batch-{settings.name}-x{settings.nproc}"
    path.with_suffix(".json").write_text(json.dumps(document, indent=1) + "\n")
    path.with_suffix(".md").write_text(max_batch_markdown(document))
    print(max_batch_markdown(document))
    return 0


def max_batch_markdown(document: dict) -> str:
    fraction = document.get("memory_fraction")
    meta = document.get("meta") or {}
    lines = ["# Largest batch per GPU", "",
             f"- cards: {len(meta.get('cards') or [None])} x {meta.get('card')}; torch {meta.get('torch')}, "
             f"triton {meta.get('triton')}", f"- command: `{document['command']}`",
             f"- memory cap: {f'{fraction:g} of each GPU' if fraction else 'none (the whole GPU)'}; seq and width "
             f"of {format_shape(document['shape_per_rank'])}; each try its own launch, {MAX_BATCH_TRY_S} s at most",
             "", "| parallel | provider | max batch per GPU | tokens/s | x compile | step ms | peak MiB | tries |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    compiled = {r["parallel"]: r.get("tokens_per_s") for r in document["results"] if r["provider"] == "compile"}
    for r in document["results"]:
        base = compiled.get(r["parallel"])
        ratio = r["tokens_per_s"] / base if r.get("tokens_per_s") and base else None
        tries = ", ".join(f"{b}: {'ok' if v == 'fits' else 'no'}" for b, v in r["tries"].items())
        lines.append(f"| {r['parallel']} | {r['provider']} | {r['max_batch'] or 'none'} "
                     f"| {_fmt(r['tokens_per_s'], '.0f')} | {_fmt(ratio, '.2f')} | {_fmt(r['ms'], '.1f')} "
                     f"| {_fmt(r['peak_mib'], '.0f')} | {tries} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------


def _fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _find(records: list[dict], parallel: str, provider: str) -> Optional[dict]:
    return next((r for r in records if r["parallel"] == parallel and r["provider"] == provider
                 and not r.get("error")), None)


def targets(workload: dict, records: list[dict], device: str) -> list[dict]:
    """The issue's checks that apply to these records: fused speed and memory against compile under the same
    parallelism (CUDA only), and every provider's loss after the last step against one GPU's."""
    checks = []

    def check(text, value, bound, higher_is_better, speed):
        if speed and device != "cuda":
            checks.append({"status": "n/a", "text": f"{text}: a CUDA target, n/a on the CPU", "bound": bound})
        elif value is None:
            checks.append({"status": "n/a", "text": f"{text}: not measured", "bound": bound})
        else:
            met = value >= bound if higher_is_better else value <= bound
            sign = ">=" if higher_is_better else "<="
            checks.append({"status": "met" if met else "missed", "text": f"{text}: {value:.3g} ({sign} {bound:g})",
                           "value": value, "bound": bound})

    for parallel in dict.fromkeys(r["parallel"] for r in records):
        compiled = _find(records, parallel, "compile")
        for provider in ("fused", "fused+compile"):
            fused = _find(records, parallel, provider)
            if fused is None or compiled is None:
                continue
            if parallel in SPEED_TARGET:
                check(f"{parallel}: compile's step ms / {provider}'s", compiled["ms"] / fused["ms"],
                      SPEED_TARGET[parallel], True, True)
            if parallel in MEMORY_TARGET:
                ratio = fused["peak_mib"] / compiled["peak_mib"] if fused.get("peak_mib") and compiled.get("peak_mib") \
                    else None
                check(f"{parallel}: {provider}'s peak memory per GPU / compile's", ratio, MEMORY_TARGET[parallel],
                      False, True)
        for record in records:
            if record["parallel"] == parallel and "loss_rel_diff" in record:
                check(f"{parallel} {record['provider']}: loss after {workload['steps']} steps, relative difference "
                      "from one GPU", record["loss_rel_diff"], LOSS_TARGET, False, False)
    return checks


def write_json(path: Path, meta: dict, workload: dict, records: list[dict]) -> None:
    from blockfuse.bench.report import _finite

    document = {"meta": meta, "workload": workload, "targets": targets(workload, records, meta["device"]),
                "records": records}
    path.write_text(json.dumps(_finite(document), indent=1) + "\n")


def markdown(meta: dict, workload: dict, records: list[dict]) -> str:
    from blockfuse.bench.report import NOISE_NOTE, noisy, spread_text

    cuda = meta["device"] == "cuda"
    shape = format_shape(workload["shape_per_rank"])
    cards = meta.get("cards") or [meta["card"]]
    lines = [
        f"# blockfuse multi-GPU training step: {workload['name']}",
        "",
        f"- cards: **{workload['nproc']} x {cards[0]}**" + ("" if len(set(cards)) == 1 else f" ({', '.join(cards)})")
        + f", {workload['backend']}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"python {meta['python']}",
        f"- blockfuse source digest {meta.get('source_digest')}, git {meta.get('git_commit')}, date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- workload: {workload['layers']} layer(s), {shape} ({workload['dtype']}) per data-parallel rank; "
        f"{workload['steps']} steps ({workload['warmup']} untimed), {workload['optimizer']} lr {workload['lr']:g}, "
        f"seed {workload['seed']}" + (f"; memory fraction {workload['memory_fraction']:g}"
                                      if workload.get("memory_fraction") else ""),
        "",
        "A step: " + workload["step"] + "; the blocks compute in " + workload["dtype"] + ". Loss: "
        + workload["loss"] + ". fsdp: `fully_shard` per block and on the stack, `MixedPrecisionPolicy(param_dtype="
        + workload["dtype"] + ", reduce_dtype=float32)`, each rank its own batch; tp: `parallelize_module(stack, mesh, "
        "blockfuse.distributed.tp_plan(stack, sequence_parallel=True))`, every rank the same batch; fsdp+tp: both on "
        "a (dp, tp) mesh. compile: each block under `torch.compile`. Step ms: the median wall time of a synchronized "
        "step after the warm-up, the slowest rank's (p20-p80 in the JSON). Tokens/s: the global batch's tokens over "
        "it. Peak: the most CUDA memory a rank allocated during training, parameters, gradients and optimizer state "
        "included (the largest rank's). One GPU: rank 0 training the same provider unsharded on the whole global "
        "batch with the same seeds; loss diff: |loss - one GPU's| / one GPU's after the last step (in brackets: the "
        "largest over the steps).",
        "",
        "## Targets",
        "",
    ]
    checks = targets(workload, records, meta["device"])
    lines += [f"- **{t['status']}**: {t['text']}" for t in checks] or ["(none for these runs)"]
    for parallel in dict.fromkeys(r["parallel"] for r in records):
        mine = [r for r in records if r["parallel"] == parallel]
        compiled = _find(records, parallel, "compile")
        mesh = next((r["mesh"] for r in mine if r.get("mesh")), None)
        lines += ["", f"## {parallel}" + (f" (dp {mesh['dp']} x tp {mesh['tp']})" if mesh else ""), "",
                  "| provider | step ms per GPU | x compile | tokens/s (global) | peak MiB per GPU | peak / compile "
                  "| loss after last step | one GPU's | loss diff | one GPU ms (global batch) | x one GPU tokens/s |",
                  "| --- " * 11 + "|"]
        for r in mine:
            if r.get("error"):
                error = r["error"].replace("|", "/").replace("`", "'")
                lines.append(f"| {r['provider']} | error: `{error}` |" + " |" * 9)
                continue
            speed = compiled["ms"] / r["ms"] if compiled and not noisy(compiled) and not noisy(r) else None
            has_peaks = compiled and r.get("peak_mib") and compiled.get("peak_mib")
            memory = r["peak_mib"] / compiled["peak_mib"] if has_peaks else None
            one = r.get("one_gpu") or {}
            ms = f"{r['ms']:.1f}" if not noisy(r) else f"{r['ms']:.1f} ({spread_text(r)})"
            diff = (f"{r['loss_rel_diff']:.2e} ({r['loss_rel_diff_max']:.1e})" if "loss_rel_diff" in r
                    else r.get("loss_error", "")[:80])
            lines.append(" | ".join([f"| {r['provider']}", ms, _fmt(speed, ".2f"), f"{r['tokens_per_s']:.0f}",
                                     _fmt(r.get("peak_mib"), ".0f"), _fmt(memory, ".2f"), f"{r['loss']:.6g}",
                                     _fmt(one.get("losses", [None])[-1], ".6g"), diff, _fmt(one.get("ms"), ".1f"),
                                     _fmt(r.get("speedup_vs_one_gpu"), ".2f")]) + " |")
        lines += _communication_lines(mine, workload)
    if not cuda:
        lines += ["", "On the CPU (gloo): the figures check the harness and the loss, not the speed; no CUDA memory."]
    if any(noisy(r) for r in records if not r.get("error")):
        lines += ["", NOISE_NOTE]
    lines += ["", "Providers: " + "; ".join(f"`{p}`: {text}" for p, text in workload["labels"].items()) + "."]
    return "\n".join(lines) + "\n"


def _communication_lines(records: list[dict], workload: dict) -> list[str]:
    profiled = [r for r in records if r.get("communication") is not None]
    if not profiled:
        return []
    measured = "NCCL kernels, GPU time" if workload["backend"] == "nccl" else "gloo calls, wall time"
    lines = ["", f"Communication in one profiled step (rank 0; {measured}):", ""]
    for r in profiled:
        totals: dict[str, list] = {}
        for event in r["communication"]:
            count, ms = totals.setdefault(event["kind"], [0, 0.0])
            totals[event["kind"]] = [count + event["count"], ms + event["ms"]]
        found = ", ".join(f"{kind} {count}x {ms:.2f} ms" for kind, (count, ms) in totals.items()) or "none"
        lines.append(f"- {r['provider']}: {found}")
        planned = r.get("planned_collectives")
        if planned:
            lines[-1] += (f"; the plan's: all_gather {planned['all_gather']}x, reduce_scatter "
                          f"{planned['reduce_scatter']}x (one into and out of each attention and MLP, the output "
                          "gathered, forward and backward: a norm that gathered would add all-gathers; gloo runs a "
                          "reduce-scatter as an all-reduce, and the all-reduces also sum the replicated weights' "
                          "gradients)")
        for event in r["communication"][:6]:
            lines.append(f"  - `{event['name'][:90]}`: {event['count']}x, {event['ms']:.2f} ms")
    return lines


def write_plot(path: Path, meta: dict, workload: dict, records: list[dict]) -> bool:
    """Step ms, peak memory per GPU and the loss difference from one GPU, per parallelism and provider."""
    from blockfuse.bench.report import pyplot

    plt = pyplot()
    if plt is None:
        return False
    ran = [r for r in records if not r.get("error")]
    parallels = list(dict.fromkeys(r["parallel"] for r in records))
    providers = list(dict.fromkeys(r["provider"] for r in records))
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / max(len(parallels), 1)
    panels = (("ms", "step ms per GPU (lower is better)"), ("peak_mib", "peak MiB per GPU"),
              ("loss_rel_diff", "loss difference from one GPU"))
    for ax, (key, title) in zip(axes, panels):
        for k, parallel in enumerate(parallels):
            values = []
            for provider in providers:
                record = next((r for r in ran if r["parallel"] == parallel and r["provider"] == provider), {})
                values.append(record.get(key) or 0)
            ax.bar([i + k * width for i in range(len(providers))], values, width, label=parallel)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([i + width * (len(parallels) - 1) / 2 for i in range(len(providers))])
        ax.set_xticklabels(providers, rotation=20, fontsize=8)
        ax.legend(fontsize=8)
    if meta["device"] != "cuda":
        axes[1].text(0.5, 0.5, "no CUDA memory on CPU", transform=axes[1].transAxes, ha="center", color="gray")
    if any(r.get("loss_rel_diff") for r in ran):
        axes[2].set_yscale("log")
        axes[2].axhline(LOSS_TARGET, color="black", linewidth=0.8, linestyle="--")
    figure.suptitle(f"{workload['name']}, {workload['layers']} layers, {format_shape(workload['shape_per_rank'])} "
                    f"{workload['dtype']} per rank: {workload['nproc']} x {meta['card']}, torch {meta['torch']}, "
                    f"triton {meta['triton']}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
