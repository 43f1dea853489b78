"""The job every torchrun worker runs: each parallelism and provider trained (``distributed.training``), the
ranks' figures gathered into one record on rank 0, and rank 0 writing the files (``distributed.tables``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import torch

from blockfuse.bench.distributed.profile import planned_collectives
from blockfuse.bench.distributed.settings import LABELS, Settings, command, stem
from blockfuse.bench.distributed.tables import markdown, write_json, write_plot
from blockfuse.bench.distributed.training import Work, World, release, step_timing, train_one_gpu, train_sharded
from blockfuse.cliutil import default_out


def _gathered_error(error: Optional[str]) -> Optional[str]:
    """Every rank's error (or None), the first one found: rank 0 records a failure wherever it happened."""
    import torch.distributed as dist

    errors = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    return next((f"rank {rank}: {e}" if rank else e for rank, e in enumerate(errors) if e), None)


def _record(work: Work, parallel: str, provider: str, reference: Optional[dict], sharded: dict,
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
              "peak_mib_by_phase_by_rank": [r["peak_mib_by_phase"] for r in ranks],
              "allocator_per_step_by_rank": [r["allocator_per_step"] for r in ranks],
              "state_mib_by_rank": [r["state_mib"] for r in ranks],
              "reserved_mib": max((r["reserved_mib"] for r in ranks if r["reserved_mib"] is not None), default=None),
              "losses": sharded["losses"], "loss": sharded["losses"][-1]}
    record["tokens_per_s"] = record["tokens_per_step"] / (record["ms"] * 1e-3)
    first, last = sharded["losses"][0], sharded["losses"][-1]
    record["loss_moved"] = abs(first - last) / abs(first) if first else None
    if sharded.get("memory_snapshot") is not None:
        record["memory_snapshot"] = sharded["memory_snapshot"]  # rank 0's
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


def _run_provider(work: Work, parallel: str, provider: str, references: dict, traces: Optional[Path]) -> dict:
    """Every rank: the record of ``provider`` under ``parallel`` (complete on rank 0), one GPU's run added from
    ``references`` (rank 0 fills it: one run per provider and global batch)."""
    import torch.distributed as dist

    from blockfuse.bench.runner import _describe

    settings, world = work.settings, work.world
    data_ranks, _ = world.data_parallel(parallel)
    sharded, error = None, None
    trace = traces / f"trace-{parallel}-{provider}-rank0.json" if traces and world.rank == 0 else None
    try:
        sharded = train_sharded(work, parallel, provider, trace)
    except Exception as caught:  # noqa: BLE001 (a provider that fails is reported, the rest still run)
        error = _describe(caught)
        release(world)
    error = _gathered_error(error)
    if error is not None:
        return {"parallel": parallel, "provider": provider, "error": error}
    mine = {**step_timing(sharded["times"], settings.warmup), "peak_mib": sharded["peak_mib"],
            "peak_mib_by_phase": sharded["peak_mib_by_phase"], "reserved_mib": sharded["reserved_mib"],
            "allocator_per_step": sharded["allocator_per_step"], "state_mib": sharded["state_mib"]}
    ranks = [None] * world.size
    dist.all_gather_object(ranks, mine)
    # NOTE: one GPU after the sharded run, whose peak memory it so cannot touch; the other ranks wait.
    if settings.reference and world.rank == 0 and (provider, data_ranks) not in references:
        try:
            references[provider, data_ranks] = train_one_gpu(work, provider, data_ranks)
        except Exception as caught:  # noqa: BLE001 (reported with the sharded run's record)
            references[provider, data_ranks] = {"error": _describe(caught)}
            release(world)
    dist.barrier()
    return _record(work, parallel, provider, references.get((provider, data_ranks)), sharded, ranks)


def run_job(settings: Settings, on_update: Optional[Callable] = None, traces: Optional[Path] = None,
            say: Optional[Callable[[str], None]] = None) -> tuple[dict, list[dict]]:
    """Every rank: (workload, records) of every parallelism and provider (records complete on rank 0).
    ``on_update(workload, records)`` on rank 0 after each; ``traces``: the folder of rank 0's profiler traces."""
    import torch.distributed as dist

    world = World(settings)
    work = Work(settings, world)
    config = work.config
    batch, seq, width = settings.shape
    workload = {"name": settings.name, "shape_per_rank": [batch, seq, width], "layers": work.layers,
                "dtype": settings.dtype, "linear": settings.linear, "nproc": world.size,
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


def worker_main(settings: Settings, out: Optional[Path]) -> int:
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
