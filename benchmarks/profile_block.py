"""Where a block's time goes: the GPU kernels of one training step (or forward), per provider, in one process.

    python benchmarks/profile_block.py reordered [--providers fused,compile:default] [--mode fwdbwd]
        [--layers 1] [--encoder] [--linear fp8:tensorwise] [--top 25] [--cpu] [--python STEPS] [--json FILE]
        [--trace DIR]

For each provider (``eager``, ``fused``, ``compile:MODE`` = eager under torch.compile, ``fused+compile:MODE``)
prints the profiler's CUDA kernels of one step after warm-up (total time, calls) and splits the kernel time
into GEMMs (cuBLAS / CUTLASS kernels), attention (SDPA's kernels) and the rest
(norms, activations, copies, reductions). The GEMM + attention time of a provider is a floor for any
implementation that runs the same GEMMs and attention with every other kernel removed.

``--encoder``: for ``siglip2``, the whole encoder (patch and position embeddings, post-norm) on NaFlex
inputs, as ``blockfuse bench model siglip2`` runs it, instead of a stack of its blocks.
``--mode fwd``: a training forward (inputs require grad); ``infer``: a forward under no_grad.
``--trace DIR``: also Chrome traces of three steps back to back, for ``benchmarks/trace_gaps.py`` (where the GPU
waits on the host within and between steps, and the runtime calls that wait on the GPU: synchronizations, blocking
copies, cudaMalloc / cudaFree): ``DIR/trace-<provider>-gpu.json`` records the GPU and the CUDA runtime only,
``-host.json`` the host's ops too. Both slow the host: te-4layer's FP8 fused step took 32.5 and 39 ms a step
traced against ~24-26 unprofiled (the runtime's recording alone ~25 us a launch), so a step bound by its GPU
unprofiled may show host gaps traced; rank costs and find the phases there, and take the unprofiled wall time
(``benchmarks/host_slack.py``) for whether the GPU waits.
``--bytes``: every blockfuse kernel launch of the profiled step in order, with the bytes of its tensor arguments
(each read or written once: a floor's estimate, zero-stride stand-ins left out), its time and the fraction of a
1 GiB device copy's rate that makes; sorted by the time above that copy's, what a kernel at the copy would save.
The Triton launches are matched to the profiler's kernels by order (one stream), so only for eager providers.
"""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from blockfuse.analyze.profiler import kernel_class
from blockfuse.models import build_model


def category(kernel: str) -> str:
    """"gemm", "attention" or "other" for a CUDA kernel's name (blockfuse analyze's classes; memsets and
    copies count as other)."""
    kind = kernel_class(kernel)
    return kind if kind in ("gemm", "attention") else "other"


def build(name: str, impl: str, layers: int, encoder: bool):
    """(module, inputs) in bf16 on CUDA: a stack of ``layers`` blocks of preset ``name``, or the siglip2 encoder."""
    if encoder:
        if name != "siglip2":
            raise SystemExit("--encoder: only for siglip2")
        from blockfuse.models.siglip2 import build_siglip2

        return build_siglip2(layers=layers, device="cuda", impl=impl)
    return build_model(name, None, torch.bfloat16, "cuda", layers=layers, impl=impl)


def python_profile(step, calls: int, top: int) -> None:
    """Prints the Python functions that take the host's time over ``calls`` steps (cProfile, by own time)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        step()
    profiler.disable()
    torch.cuda.synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def allocator_calls(before: dict, after: dict) -> str:
    """The CUDA caching allocator's calls into the driver between two ``torch.cuda.memory_stats()``: cudaMalloc and
    cudaFree (a cudaFree waits for the device) and allocation retries (the cache released, then allocated again)."""
    def delta(key: str) -> int:
        return int(after.get(key, 0) - before.get(key, 0))

    return (f"{delta('num_device_alloc')} cudaMalloc, {delta('num_device_free')} cudaFree, "
            f"{delta('num_alloc_retries')} allocation retries")


class LaunchLog:
    """Records each blockfuse kernel launch (name, bytes of its tensor arguments, their shapes) while ``on``: made
    once a process, it wraps ``launch.Kernel.__call__`` for the rest of it (a benchmark's process)."""

    def __init__(self):
        from blockfuse.ops import launch

        self.records: list[tuple[str, int, str]] = []
        self.on = False
        original = launch.Kernel.__call__
        log = self

        def recording(kernel, grid, *args, **options):
            if log.on:
                tensors = [a for a in args if isinstance(a, torch.Tensor) and 0 not in a.stride() and a.numel() > 1]
                log.records.append((kernel.name, sum(t.numel() * t.element_size() for t in tensors),
                                    " ".join(f"{list(t.shape)}{str(t.dtype)[6:]}" for t in tensors)))
            return original(kernel, grid, *args, **options)

        launch.Kernel.__call__ = recording


def launch_table(prof, records: list, top: int) -> list[dict]:
    """Zips the recorded launches with the profiler's blockfuse kernels (by order) and prints the top ones by time above
    a 1 GiB copy's rate."""
    from blockfuse.analyze.ceilings import copy_bandwidth
    from blockfuse.ops import launch

    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                      and e.name in launch.KERNEL_NAMES), key=lambda e: e.time_range.start)
    if [k.name for k in kernels] != [r[0] for r in records]:
        print(f"--bytes: {len(kernels)} blockfuse kernels profiled against {len(records)} launches recorded, "
              "not in the same order: no table")
        return []
    gbps = copy_bandwidth()["gbps"]
    rows = []
    for kernel, (name, nbytes, shapes) in zip(kernels, records):
        us = kernel.device_time
        rows.append({"kernel": name, "us": us, "mb": nbytes / 1e6, "of_copy": nbytes / (us * 1e3) / gbps,
                     "above_copy_us": us - nbytes / (gbps * 1e3), "tensors": shapes})
    print(f"blockfuse kernels by time above a {gbps:.0f} GB/s copy of their tensors' bytes "
          f"({sum(r['us'] for r in rows):.0f} us in all, {sum(r['above_copy_us'] for r in rows):.0f} above):")
    for r in sorted(rows, key=lambda r: -r["above_copy_us"])[:top]:
        print(f"  {r['us']:7.1f} us {r['mb']:7.1f} MB {r['of_copy']:5.2f} of copy  +{r['above_copy_us']:6.1f}  "
              f"{r['kernel']:28s} {r['tensors'][:120]}")
    return rows


def profile_provider(name: str, provider: str, mode: str, layers: int, encoder: bool, top: int, cpu: bool,
                     python: int = 0, linear: str = "bf16", trace: str | None = None,
                     log: LaunchLog | None = None) -> dict:
    impl = "fused" if provider.startswith("fused") else "eager"
    compile_mode = provider.split(":", 1)[1] if ":" in provider else None
    if linear == "bf16":
        module, inputs = build(name, impl, layers, encoder)
        run = torch.compile(module, mode=compile_mode) if compile_mode else module
    else:  # FP8 Linear layers, as `blockfuse bench block --linear` makes them (and compiles them)
        from blockfuse.bench.block import parse_linear, provider_module

        eager, inputs = build(name, "eager", layers, encoder)
        module, run = provider_module(eager, provider, parse_linear(linear))
        del eager
    x = inputs[0].detach().requires_grad_()
    fp8_training = linear.startswith("fp8") and mode == "fwdbwd"

    def step():
        if fp8_training:  # as bench block: an optimizer step would make the cached weight casts stale
            from blockfuse.nn.fp8 import clear_weight_cache

            for p in module.parameters():
                clear_weight_cache(p)
        # NOTE: gradients set to None before each step, as bench block and an optimizer's zero_grad do; left in place,
        # each step added its gradients into the last one's (one add kernel a parameter: 50 launches, 0.37 ms, in
        # te-4layer's profiles before this)
        x.grad = None
        for p in module.parameters():
            p.grad = None
        if mode == "infer":
            with torch.no_grad():
                return run(x, *inputs[1:])
        out = run(x, *inputs[1:])
        if mode == "fwdbwd":
            out.backward(dy)
        return out

    dy = torch.randn_like(step() if mode == "infer" else module(x, *inputs[1:]).detach())
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if cpu:
        import time

        before = torch.cuda.memory_stats()
        began = time.perf_counter()
        for _ in range(20):
            step()
        host = (time.perf_counter() - began) / 20 * 1e3
        torch.cuda.synchronize()
        wall = (time.perf_counter() - began) / 20 * 1e3
        print(f"host {host:.3f} ms per step to enqueue, {wall:.3f} ms per step with the GPU; over the 20 steps "
              f"{allocator_calls(before, torch.cuda.memory_stats())}")
        with profile(activities=[ProfilerActivity.CPU]) as cpu_prof:
            step()
            torch.cuda.synchronize()
        print(cpu_prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
    if python:
        python_profile(step, python, top)
    if trace:
        for kind, activities in (("gpu", [ProfilerActivity.CUDA]),
                                 ("host", [ProfilerActivity.CPU, ProfilerActivity.CUDA])):
            with profile(activities=activities) as traced:
                for _ in range(3):
                    step()
                torch.cuda.synchronize()
            path = Path(trace) / f"trace-{provider.replace(':', '-')}-{kind}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            traced.export_chrome_trace(str(path))
            print(f"wrote {path}")
    if log is not None:
        log.records.clear()
        log.on = True
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    if log is not None:
        log.on = False
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    split = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for e in events:
        split[category(e.key)] += e.self_device_time_total / 1e3
    total = sum(split.values())
    launches = sum(e.count for e in events)
    print(f"{name} {provider} mode={mode}: {total:.3f} ms of kernels, {launches} launches; GEMM {split['gemm']:.3f}, "
          f"attention {split['attention']:.3f}, other {split['other']:.3f} ms")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:top]:
        print(f"{e.self_device_time_total / 1e3:8.3f} ms {e.count:4d}x  [{category(e.key)[:4]}] {e.key[:100]}")
    row = {"provider": provider, "kernel_ms": total, "launches": launches, **{f"{k}_ms": v for k, v in split.items()}}
    if log is not None:
        row["launch_bytes"] = launch_table(prof, log.records, top)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("--providers", default="fused", help="comma-separated: eager, fused, compile:MODE, "
                        "fused+compile:MODE")
    parser.add_argument("--mode", default="fwdbwd", choices=("infer", "fwd", "fwdbwd"))
    parser.add_argument("--layers", type=int, default=None, help="default: 1, or the preset's for --encoder")
    parser.add_argument("--encoder", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cpu", action="store_true", help="also the host side: ops by self CPU time, and wall ms per step")
    parser.add_argument("--python", type=int, default=0, metavar="STEPS",
                        help="also cProfile this many steps: the Python functions by own time")
    parser.add_argument("--linear", default="bf16", help="bf16, fp8:RECIPE or torchao:RECIPE (bench block's --linear)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--trace", default=None, metavar="DIR", help="also a Chrome trace of three steps a provider")
    parser.add_argument("--bytes", action="store_true", help="also each blockfuse launch's bytes against a copy's")
    args = parser.parse_args()
    if args.bytes and any("compile" in p for p in args.providers.split(",")):
        parser.error("--bytes: eager providers only (Inductor launches traced kernels itself)")
    log = LaunchLog() if args.bytes else None
    layers = args.layers if args.layers is not None else (4 if args.encoder else 1)
    rows = []
    for provider in args.providers.split(","):
        rows.append(profile_provider(args.name, provider.strip(), args.mode, layers, args.encoder, args.top, args.cpu,
                                     args.python, args.linear, args.trace, log))
        gc.collect()  # the provider's module and activations, before the next one allocates
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"name": args.name, "mode": args.mode, "layers": layers, "linear": args.linear,
                       "encoder": args.encoder,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
