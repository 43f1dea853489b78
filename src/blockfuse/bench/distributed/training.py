"""One worker's training: this process in the job (``World``: rank, device, meshes), the seeded model and
batches every run shares (``Work``), the model sharded by FSDP2 and / or the TP plan (``distribute``), float32
optimizer state (``Optimizer``), and the timed steps (``train``), sharded and on one GPU."""

from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import torch

from blockfuse.bench.distributed.profile import communication
from blockfuse.bench.distributed.settings import Settings
from blockfuse.bench.runner import DTYPES


class World:
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


class Work:
    """The workload every run of the job shares: the preset's config, the seeded fp32 weights (on the CPU, so
    that they count in no GPU's peak), and the seeded batches."""

    def __init__(self, settings: Settings, world: World):
        from blockfuse.models import build_model

        self.settings, self.world = settings, world
        shape = settings.shape
        base, _ = build_model(settings.name, shape, torch.float32, "cpu", layers=settings.layers, seed=settings.seed,
                              **dict(settings.overrides))
        self.config, self.layers = base.config, len(base.blocks)
        self.state = base.state_dict()
        self.dtype = DTYPES[settings.dtype]

    def module(self, provider: str, dtype: torch.dtype):
        """The provider's stack (not yet compiled) on this rank's device, the job's weights, in ``dtype``, its
        Linear layers FP8 ones where ``--linear`` says so (``blockfuse.fp8.convert``)."""
        from blockfuse.models import TransformerStack

        impl = "fused" if provider.startswith("fused") else "eager"
        # NOTE: built on the device (random init of a 1B model on one CPU thread: seconds), then overwritten.
        with torch.device(self.world.device):
            model = TransformerStack(self.config, self.layers, impl)
        model.load_state_dict(self.state)
        model = model.to(dtype).train()
        kind, _, recipe = self.settings.linear.partition(":")
        if kind == "fp8":  # (before the model is sharded: the styles' hooks go on the layers it swaps in)
            import blockfuse.fp8

            recipe, _, recompute = recipe.partition("+")
            blockfuse.fp8.convert(model, recipe=recipe, recompute_activation=recompute == "recompute")
        return model

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


def compile_blocks(model) -> None:
    """Each block under its own ``torch.compile`` (the stack's loop stays eager)."""
    for index, block in enumerate(model.blocks):
        model.blocks[index] = torch.compile(block)


class Optimizer:
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


PHASES = ("forward", "backward", "optimizer")


class Trained(NamedTuple):
    """What :func:`train` measured. ``losses``: each step's loss (this rank's batch); ``times``: each step's wall
    time in ms (synchronized); ``peak``: the peak CUDA memory allocated over the steps in MiB (None on the CPU);
    ``step``: the step function (for the profiler and the snapshot); ``phase_peaks``: the peak of each phase of a
    step over the steps (PHASES: zero grad + forward + loss, backward, optimizer step; None on the CPU): where the
    peak sits, e.g. the activations' backward or the optimizer's temporaries (NOTE: the allocator's counters, read
    on the host between the phases: no synchronization); ``allocator``: the allocator's host-costly events a timed
    step (:func:`allocator_counters`; None on the CPU); ``state_mib``: the memory allocated when a timed step
    begins (parameters, their gradients, the optimizer's state, the batch; the largest over the timed steps;
    None on the CPU), so that ``peak - state_mib`` is what the step itself adds: activations and temporaries."""

    losses: torch.Tensor
    times: list
    peak: Optional[float]
    step: Callable
    phase_peaks: Optional[dict]
    allocator: Optional[dict]
    state_mib: Optional[float]


def train(run: Callable, optimizer: Optimizer, batches: Callable, settings: Settings, world: World) -> Trained:
    """Trains ``settings.steps`` steps (the first ``settings.warmup`` untimed): :class:`Trained`."""
    import torch.nn.functional as F

    phase_peaks = dict.fromkeys(PHASES, 0.0)

    def phase_done(phase: str) -> None:
        if world.cuda:
            phase_peaks[phase] = max(phase_peaks[phase], torch.cuda.max_memory_allocated() / 2**20)
            torch.cuda.reset_peak_memory_stats()

    def step(x, target):
        optimizer.zero_grad()
        out = run(x)  # (batch, seq, d_model)
        loss = F.mse_loss(out.float(), target)
        phase_done("forward")
        loss.backward()
        phase_done("backward")
        optimizer.step()
        phase_done("optimizer")
        return loss.detach()

    losses, times = [], []
    world.synchronize()
    if world.cuda:
        torch.cuda.reset_peak_memory_stats()
    counters, state = None, None
    for index in range(settings.steps):
        if index == settings.warmup and world.cuda:
            counters = allocator_counters()
        x, target = batches(index)
        world.synchronize()
        if index >= settings.warmup and world.cuda:
            state = max(state or 0.0, torch.cuda.memory_allocated() / 2**20)
        began = time.perf_counter()
        losses.append(step(x, target))
        world.synchronize()
        times.append((time.perf_counter() - began) * 1e3)
        del x, target
    peak = max(phase_peaks.values()) if world.cuda else None
    allocator = None
    if counters is not None:
        timed = settings.steps - settings.warmup
        allocator = {name: (count - counters[name]) / timed for name, count in allocator_counters().items()}
    return Trained(torch.stack(losses).float(), times, peak, step, phase_peaks if world.cuda else None, allocator,
                   state)


ALLOCATOR_COUNTERS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def allocator_counters() -> dict:
    """The CUDA caching allocator's counts of what costs the host: ``cudaMalloc`` / ``cudaFree`` calls, retries
    (an allocation that failed, freed every cached block and synchronized the device), and synchronizations of
    every stream. Read before and after the timed steps: a step that allocates from the device each time stalls
    its host there."""
    stats = torch.cuda.memory_stats()
    return {name: stats.get(name, 0) for name in ALLOCATOR_COUNTERS}


def memory_snapshot(step: Callable[[], object], world: World) -> Optional[dict]:
    """Every rank runs ``step`` once more (its collectives need them all); rank 0, recording the CUDA allocator's
    history since the model was built (:func:`train_sharded`), returns what was alive at the step's peak and after
    it, by allocating line (:func:`blockfuse.bench.memory.snapshot_call`); the other ranks return None."""
    from blockfuse.bench.memory import snapshot_call

    if world.rank != 0:
        step()
        return None
    return snapshot_call(step, recording=True)


def step_timing(times: list[float], warmup: int) -> dict:
    from blockfuse.bench.timing import summarize

    timed = summarize(times[warmup:])
    return {"ms": timed.median, "p20": timed.p20, "p80": timed.p80}


def release(world: World) -> None:
    from blockfuse.bench.memory import release_provider

    if world.cuda:
        torch.cuda.memory._record_memory_history(enabled=None)  # --memory-snapshot's, if a failure left it on
    release_provider(world.cuda)


def train_one_gpu(work: Work, provider: str, data_ranks: int) -> dict:
    """Rank 0 alone: the provider unsharded on the whole global batch, the same seeds and steps."""
    settings, world = work.settings, work.world
    model = work.module(provider, work.dtype)
    if "compile" in provider:
        compile_blocks(model)
    optimizer = Optimizer(model, settings, copies=work.dtype != torch.float32)
    trained = train(model, optimizer, lambda i: work.batch(i, data_ranks, None), settings, world)
    losses, times, peak = trained.losses, trained.times, trained.peak
    del trained  # (its step holds the model)
    batch, seq, _ = settings.shape
    result = {"batch": batch * data_ranks, "losses": [float(v) for v in losses], "peak_mib": peak,
              **step_timing(times, settings.warmup)}
    result["tokens_per_s"] = batch * data_ranks * seq / (result["ms"] * 1e-3)
    alive = weakref.ref(model)
    del model, optimizer
    released(alive, world, provider)
    return result


def released(model: weakref.ref, world: World, provider: str) -> None:
    """Frees what a provider's run holds once its caller has let go of the model (``model``: a weak reference to
    it); raises if the model outlives this (something still refers to it): its parameters and optimizer state
    would count in the next provider's peak. Under FSDP2 that happened (the training step's closure, kept past
    the release, held the model): fused eager, measured after compile, carried compile's 2 GB of float32 shards
    and gradients through every phase."""
    release(world)
    if model() is not None:
        raise RuntimeError(f"{provider}: its model is still referenced after its run; its memory would count in the "
                           "next provider's peak")


def distribute(model, parallel: str, provider: str, work: Work) -> None:
    """Shards ``model`` as ``parallel`` says (compiling its blocks in between for a compiled provider)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    mesh = work.world.mesh(parallel)
    if parallel in ("tp", "fsdp+tp"):
        parallelize_module(model, mesh["tp"] if parallel == "fsdp+tp" else mesh,
                           tp_plan(model, sequence_parallel=True))
    if "compile" in provider:
        compile_blocks(model)
    if parallel in ("fsdp", "fsdp+tp"):
        policy = MixedPrecisionPolicy(param_dtype=work.dtype, reduce_dtype=torch.float32)
        dp_mesh = mesh["dp"] if parallel == "fsdp+tp" else mesh
        for block in model.blocks:
            fully_shard(block, mesh=dp_mesh, mp_policy=policy)
        fully_shard(model, mesh=dp_mesh, mp_policy=policy)


def train_sharded(work: Work, parallel: str, provider: str, trace: Optional[Path]) -> dict:
    """Every rank: the provider trained under ``parallel``; this rank's figures."""
    import torch.distributed as dist

    settings, world = work.settings, work.world
    fsdp = parallel in ("fsdp", "fsdp+tp")
    if settings.memory_snapshot and world.rank == 0:
        from blockfuse.bench.memory import start_recording

        start_recording()  # every allocation's stack from the model's build on: what outlives a step, and why
    # FSDP2's policy casts float32 parameters; elsewhere the module computes in the dtype with float32 copies
    model = work.module(provider, torch.float32 if fsdp else work.dtype)
    distribute(model, parallel, provider, work)
    optimizer = Optimizer(model, settings, copies=not fsdp and work.dtype != torch.float32)
    data_ranks, index = world.data_parallel(parallel)
    trained = train(model, optimizer, lambda i: work.batch(i, data_ranks, index), settings, world)
    losses, step = trained.losses, trained.step
    # the global loss: the mean of the data-parallel ranks' (tensor-parallel ranks hold equal ones)
    losses = losses.to(world.device)
    dist.all_reduce(losses)
    losses /= world.size
    result = {"losses": [float(v) for v in losses.cpu()], "peak_mib": trained.peak,
              "peak_mib_by_phase": trained.phase_peaks, "allocator_per_step": trained.allocator,
              "state_mib": trained.state_mib, "times": trained.times,
              "reserved_mib": torch.cuda.max_memory_reserved() / 2**20 if world.cuda else None}
    if settings.profile:
        x, target = work.batch(settings.steps, data_ranks, index)
        result["communication"] = communication(lambda: step(x, target), world, trace)
    if settings.memory_snapshot:
        x, target = work.batch(settings.steps, data_ranks, index)
        result["memory_snapshot"] = memory_snapshot(lambda: step(x, target), world)
    alive = weakref.ref(model)
    del model, optimizer, step, trained  # (the step's closure holds the model too)
    released(alive, world, provider)
    return result
