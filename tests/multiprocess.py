"""Tests that run on two processes: on two GPUs over NCCL where there are two, else on the CPU over gloo.

``run(worker, *args)`` starts ``worker(rank, *args)`` in every process with the process group initialized
(``device`` is what the worker should put its tensors on: ``"cuda"`` or ``"cpu"``), waits for them with a time
limit, and returns what the workers returned, by rank. A worker returns plain data (numbers, lists, numpy
arrays): tensors would be shared through memory that is gone once its process ends. ``split(rank, computations)``
inside a worker computes each of several one-process references on one rank and shares it with the other.
"""

from __future__ import annotations

import os
import queue
import socket
import sys
import time
import traceback
from typing import Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def on_gpus() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= WORLD


def device() -> str:
    return "cuda" if on_gpus() else "cpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _main(rank: int, port: int, worker, args, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if on_gpus():
        torch.cuda.set_device(rank)
    code = 0
    dist.init_process_group("nccl" if on_gpus() else "gloo", rank=rank, world_size=WORLD)
    try:
        results.put((rank, worker(rank, *args)))
        dist.barrier()  # both ranks leave together
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        dist.destroy_process_group()
    # NOTE: the process leaves through os._exit once its result is flushed: exiting normally, a loaded CPU
    # sometimes ended a gloo rank in "terminate called without an active exception" (a C++ thread destroyed
    # at exit while joinable), exit code -6, after its work had passed.
    results.close()
    results.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(worker, *args, timeout: float = 180.0) -> list:
    """``worker(rank, *args)`` on WORLD processes; its return values by rank."""
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_main, args=(rank, port, worker, args, results)) for rank in range(WORLD)]
    for p in processes:
        p.start()
    returned = {}
    deadline = time.monotonic() + timeout
    while len(returned) < WORLD and time.monotonic() < deadline:
        try:
            rank, value = results.get(timeout=1.0)
            returned[rank] = value
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in processes):
                break  # a worker died: its traceback is on stderr
    for p in processes:
        p.join(timeout=max(1.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
    assert all(p.exitcode == 0 for p in processes) and len(returned) == WORLD, [p.exitcode for p in processes]
    return [returned[rank] for rank in range(WORLD)]


def split(rank: int, computations: dict) -> dict:
    """``{key: computation()}`` for every entry of ``computations`` (the same keys, in the same order, on every rank),
    each computed on one rank only (the i-th on rank i % WORLD) and sent to the others: for a one-process reference
    that every rank would compute alike (the same model and seeds on the same batch), computed once a pair. The
    results travel as CPU tensors (all_gather_object) and come back on ``device()``."""
    from torch.utils._pytree import tree_map_only

    mine = {key: tree_map_only(torch.Tensor, lambda t: t.detach().cpu(), compute())
            for index, (key, compute) in enumerate(computations.items()) if index % WORLD == rank}
    gathered = [None] * WORLD
    dist.all_gather_object(gathered, mine)
    results = {key: value for part in gathered for key, value in part.items()}
    return {key: tree_map_only(torch.Tensor, lambda t: t.to(device()), results[key]) for key in computations}


def _key(worker, args) -> str:
    return f"{worker.__name__}{args!r}"


def _each(rank: int, cases) -> dict:
    """Every case's return value (or its traceback) on this rank, by key. NOTE: a case that raises on one rank
    only may leave the other waiting in a collective, and then the whole run ends at its time limit."""
    outcomes = {}
    for worker, args in cases:
        try:
            outcomes[_key(worker, args)] = ("ok", worker(rank, *args))
        except Exception:
            outcomes[_key(worker, args)] = ("error", traceback.format_exc())
    return outcomes


def run_each(cases, timeout: float = 300.0, *, once: Optional[tuple] = None):
    """Every ``(worker, args)`` of ``cases`` in one set of WORLD processes (spawning them costs a 2-core CI
    machine seconds of imports, about as much as a small case); returns ``result(worker, *args)``: that case's
    return values by rank, or an AssertionError with the traceback of each rank where it raised.

    ``once``: ``(name, tmp_path_factory)`` for a module fixture whose tests pytest-xdist may hand to several workers
    (it splits a file's tests where its batches end: the FP8 tensor-parallel file's pair of processes ran on both of
    CI's workers, 98 and 99 s each): the first worker to ask runs the cases, the others wait on a lock and read its
    results (pytest-xdist's recipe for a fixture made once: a file beside the workers' temporary folders)."""
    if once is None or "PYTEST_XDIST_WORKER" not in os.environ:
        by_rank = run(_each, list(cases), timeout=timeout)
    else:
        import fcntl
        import pickle

        name, tmp_path_factory = once
        shared = tmp_path_factory.getbasetemp().parent  # (this run's, above each worker's own)
        path = shared / f"{name}.pickle"
        with open(shared / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                by_rank = pickle.loads(path.read_bytes())
            else:
                by_rank = run(_each, list(cases), timeout=timeout)
                path.write_bytes(pickle.dumps(by_rank))

    def result(worker, *args) -> list:
        outcomes = [ranks[_key(worker, args)] for ranks in by_rank]
        failures = [value for status, value in outcomes if status == "error"]
        assert not failures, "\n".join(failures)
        return [value for _, value in outcomes]

    return result
