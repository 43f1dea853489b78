"""The fused blocks' QKV projection with and without ``split_linear`` (``blocks.SPLIT_QKV_BACKWARD``).

    PYTHONPATH=src python benchmarks/qkv_backward.py [--out DIR] [--workloads siglip2,reordered,olmo2-1b]

``split_linear``'s backward takes q, k and v's gradients separately: no concatenated gradient (a
(tokens, q + 2 kv) copy, allocated while the three are alive), but three narrower weight-gradient
GEMMs and dx accumulated over three GEMMs. This measures both in one process, alternating
(on, off, on, off) so that clock drift shows: forward+backward median ms (``do_bench``, L2 flushed,
gradients cleared) and peak memory of one step above what was allocated before it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from blockfuse.bench.timing import time_cuda
from blockfuse.models import blocks, build_model

LAYERS = {"siglip2": 4}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    parser.add_argument("--workloads", default="siglip2,reordered,olmo2-1b")
    args = parser.parse_args()
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16")
    for name in args.workloads.split(","):
        module, inputs = build_model(name, None, torch.bfloat16, "cuda", layers=LAYERS.get(name, 1), impl="fused")
        x = inputs[0].detach().requires_grad_()
        dy = torch.randn_like(x)
        leaves = [x, *module.parameters()]

        def step():
            module(x, *inputs[1:]).backward(dy)

        for split in (True, False, True, False):
            blocks.SPLIT_QKV_BACKWARD = split
            for leaf in leaves:
                leaf.grad = None
            step()  # warm-up (and gradients allocated, as in the timed loop)
            for leaf in leaves:
                leaf.grad = None
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step()
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - before) / 2**20
            ms = time_cuda(step, warmup_ms=100, rep_ms=1500 if name == "siglip2" else 300, grad_to_none=leaves).median
            rows.append({"workload": name, "split_linear": split, "fwdbwd_ms": ms, "peak_mib": peak})
            print(f"{name:10s} split_linear={split!s:5s}  fwd+bwd {ms:8.3f} ms  peak {peak:7.0f} MiB")
        blocks.SPLIT_QKV_BACKWARD = True
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "qkv_backward.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
