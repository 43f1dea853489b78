"""The fused LM-head loss with the head sharded on the vocabulary across GPUs (tensor parallelism), against
PyTorch's own vocabulary-parallel loss (``loss_parallel``: DTensor logits sharded on the classes) and against
one GPU holding the whole head.

    torchrun --nproc-per-node 2 benchmarks/cross_entropy_tp.py [--shape 8192x4096x128256] [--json PATH]

bf16, forward + backward of the mean loss, every rank the same tokens (a DTensor ``Replicate()``), the weight a
DTensor ``Shard(0)``. Each provider: median ms of CUDA events over repetitions (a barrier before each), the peak
memory a rank allocates above its inputs during a step, and the loss's relative difference from one GPU's
fp32 reference. Rank 0 prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F

import blockfuse


def timed(step, reps: int = 10) -> tuple[float, float]:
    """(median ms, peak MiB above what was allocated before) of ``step()``."""
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    times = []
    for _ in range(reps):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), peak


def main() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="8192x4096x128256")
    parser.add_argument("--json")
    args = parser.parse_args()
    tokens, d, vocab = (int(v) for v in args.shape.split("x"))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (world,))
    g = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(tokens, d, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(vocab, d, device="cuda", generator=g) * (2.0 / d**0.5)).bfloat16()
    target = torch.randint(0, vocab, (tokens,), device="cuda", generator=g)
    with torch.no_grad():
        reference = blockfuse.linear_cross_entropy_ref(hidden.float(), weight.float(), target)
    records = []

    def record(name, step, loss_of):
        ms, peak = timed(step)
        loss = loss_of()
        records.append({"provider": name, "ms": ms, "peak_mib": peak,
                        "loss_rel_diff": abs(float(loss) - float(reference)) / abs(float(reference))})

    # one GPU, the whole head (each rank runs the same problem on its own)
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()

    def single():
        h1.grad = w1.grad = None
        blockfuse.linear_cross_entropy(h1, w1, target).backward()

    record("blockfuse, one GPU, whole head", single, lambda: blockfuse.linear_cross_entropy(h1, w1, target).detach())
    del h1, w1
    # vocabulary-parallel: blockfuse
    hd = distribute_tensor(hidden, mesh, [Replicate()]).requires_grad_()
    wd = distribute_tensor(weight, mesh, [Shard(0)]).requires_grad_()

    def fused():
        hd.grad = wd.grad = None
        blockfuse.linear_cross_entropy(hd, wd, target).backward()

    record(f"blockfuse, vocabulary over {world} GPUs", fused,
           lambda: blockfuse.linear_cross_entropy(hd, wd, target).full_tensor().detach())

    # vocabulary-parallel: PyTorch's loss_parallel on DTensor logits (materialized: tokens x vocab / world)
    td = distribute_tensor(target, mesh, [Replicate()])

    def pytorch():
        hd.grad = wd.grad = None
        with loss_parallel():
            logits = F.linear(hd, wd)  # (tokens, vocab) Shard(-1)
            F.cross_entropy(logits.float(), td).backward()

    def pytorch_loss():
        with loss_parallel(), torch.no_grad():
            return F.cross_entropy(F.linear(hd, wd).float(), td).full_tensor()

    record(f"PyTorch loss_parallel over {world} GPUs", pytorch, pytorch_loss)
    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x {world}, torch {torch.__version__}; [{args.shape}] bf16, "
              f"forward + backward of the mean loss")
        for r in records:
            print(f"  {r['provider']:<42} {r['ms']:8.2f} ms  peak +{r['peak_mib']:8.0f} MiB  "
                  f"loss vs fp32 {r['loss_rel_diff']:.1e}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"card": torch.cuda.get_device_name(), "gpus": world, "torch": torch.__version__,
                           "shape": args.shape, "records": records}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
