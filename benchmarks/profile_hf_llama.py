"""Where the forward of the HF Llama benchmark model goes, per provider: GPU kernel time by kernel
(torch.profiler) and the wall time of the same calls, for the providers of ``blockfuse bench model
hf-llama`` (4 layers, hidden 2048, ids 2 x 4096, bf16, training forward: parameters require grad).

Run on the GPU:  PYTHONPATH=src:<liger> python3 benchmarks/profile_hf_llama.py [--providers ...] [--top 12]
    [--mode fwdbwd] [--family qwen3]"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from blockfuse.bench import hf_families, hf_llama


def profile_provider(name: str, base, ids, args) -> None:
    """Prints one provider's wall time, kernel time by kernel and (``--copies``) its copying ops."""
    model, run = hf_llama.make_provider(name, base)
    parameters = list(model.parameters())

    def call():
        if args.mode == "fwd":
            return run(input_ids=ids)
        return hf_llama.training_step(run, ids, parameters)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - began) / 5 * 1e3
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU], record_shapes=args.copies) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    kernels = defaultdict(float)
    syncs = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name] += event.device_time / 5 / 1e3
        elif "Synchronize" in event.name or event.name in ("aten::item", "aten::_local_scalar_dense"):
            syncs += 1
    total = sum(kernels.values())
    print(f"== {name} {args.mode}: wall {wall:.2f} ms a call, GPU kernels {total:.2f} ms, "
          f"host syncs / item calls {syncs / 5:.0f} a call")
    for kernel, ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"   {ms:7.3f} ms  {kernel[:110]}")
    if args.copies:
        copies = [a for a in prof.key_averages(group_by_input_shape=True)
                  if a.key in ("aten::copy_", "aten::contiguous", "aten::clone") and a.device_time_total > 0]
        for a in sorted(copies, key=lambda a: -a.device_time_total)[:8]:
            print(f"   copy {a.device_time_total / 5 / 1e3:7.3f} ms  {a.key} {a.input_shapes}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--providers", nargs="+", default=["hf-eager", "blockfuse", "liger"])
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--mode", choices=("fwd", "fwdbwd"), default="fwd")
    parser.add_argument("--family", default="llama", choices=sorted(hf_families.FAMILIES),
                        help="another causal-LM family at Llama's sizes (as `bench model hf-llama --family`)")
    parser.add_argument("--copies", action="store_true",
                        help="also list the ops that copied (aten::copy_ and friends) with their input shapes")
    args = parser.parse_args()
    family = hf_families.FAMILIES[args.family]
    base, ids = hf_llama.build_base(hf_llama.FULL, torch.bfloat16, torch.device("cuda"), family)
    for name in args.providers:
        # Liger assigns modeling_llama's globals: put them back before the next provider
        with hf_families.modeling_globals_restored(family) if name.startswith("liger") else contextlib.nullcontext():
            profile_provider(name, base, ids, args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
