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

One job a module: ``settings`` (the options, checked, and the command again), ``launch`` (the torchrun
re-launch), ``training`` (a worker's model, sharding, optimizer and timed steps), ``profile`` (the step's
collectives), ``job`` (every parallelism and provider, the ranks' records gathered, rank 0's files),
``max_batch`` (``--max-batch``), ``targets`` (the project's checks), ``tables`` (JSON, Markdown, plot).
"""

from __future__ import annotations

from blockfuse.bench.distributed.job import worker_main
from blockfuse.bench.distributed.launch import card_name, launch
from blockfuse.bench.distributed.max_batch import search_max_batch
from blockfuse.bench.distributed.settings import (CPU_PROVIDERS, PROVIDERS, add_arguments, settings_from, wanted,
                                                  world_size_of_torchrun)
from blockfuse.cliutil import UsageError, default_out

__all__ = ["CPU_PROVIDERS", "PROVIDERS", "add_arguments", "main", "wanted"]


def main(args) -> int:
    """``blockfuse bench model NAME --nproc N --parallel ...``: a torchrun worker runs the benchmark; otherwise
    the command re-launches itself under torchrun (and with ``--max-batch`` searches the batch afterwards)."""
    settings = settings_from(args)
    if world_size_of_torchrun() is not None:
        if args.max_batch:
            raise UsageError("--max-batch launches its own tries: run it without torchrun")
        return worker_main(settings, args.out)
    out = args.out or default_out(card_name(), "-distributed")
    out.mkdir(parents=True, exist_ok=True)
    code = launch(settings, out)
    if args.max_batch:
        code = max(code, search_max_batch(settings, out))
    return code
