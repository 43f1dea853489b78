"""Where a decode step's time goes, per provider of ``blockfuse bench model hf-llama --modes decode`` (4 layers,
hidden 2048, batch 1, prompt 512, greedy, bf16): wall ms per new token, GPU kernels and launches per token
(torch.profiler), the aten ops by host time, and the Python functions by own time (cProfile).

Run on the GPU:  PYTHONPATH=src:<liger> python3 benchmarks/profile_decode.py [--providers hf-eager blockfuse]
    [--tokens 33] [--top 20] [--static] [--tiny]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from blockfuse.bench import hf_families, hf_generate, hf_llama


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _wall(fn) -> float:
    _sync()
    began = time.perf_counter()
    fn()
    _sync()
    return (time.perf_counter() - began) * 1e3


def decode_forwards(model, ids, steps: int) -> tuple[float, float, int]:
    """(host ms to enqueue one decode forward, wall ms of it, synchronizing calls in it): the model's
    forward on one new token over a dynamic cache filled by the prompt, ``steps`` times, medians, and the
    calls that synchronized the host with the GPU (``torch.cuda.set_sync_debug_mode``) in the last one."""
    import warnings

    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.no_grad():
        token = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        hosts, walls = [], []
        for step in range(steps):
            _sync()
            began = time.perf_counter()
            if step == steps - 1 and torch.cuda.is_available():
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.cuda.set_sync_debug_mode("warn")
                    try:
                        out = model(input_ids=token, past_key_values=cache, use_cache=True)
                    finally:
                        torch.cuda.set_sync_debug_mode(0)
                syncs = [str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message)]
            else:
                out = model(input_ids=token, past_key_values=cache, use_cache=True)
                syncs = []
            hosts.append((time.perf_counter() - began) * 1e3)
            _sync()
            walls.append((time.perf_counter() - began) * 1e3)
            token = out.logits[:, -1:].argmax(-1)
    for message in syncs:
        print(f"   synchronizing call in a decode forward: {message[:150]}")
    return sorted(hosts[:-1])[len(hosts) // 2], sorted(walls[:-1])[len(walls) // 2], len(syncs)


def profile_provider(name: str, base, ids, args) -> None:
    model, _ = hf_llama.make_provider(name, base)
    n = args.tokens
    config = hf_generate._compile_config(ids.device) if args.static else None
    if not args.static:
        host, wall, syncs = decode_forwards(model, ids, n)
        print(f"== {name}: one decode forward (no generate): host {host:.3f} ms to enqueue, wall {wall:.3f} ms, "
              f"{syncs} synchronizing calls")
    else:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        name = f"{name} (static cache + compile)"

    def generate(count):
        return hf_generate.generate(model, ids, count, config)

    for count in (n, 1):
        generate(count)
    per_token = sorted((_wall(lambda: generate(n)) - _wall(lambda: generate(1))) / (n - 1) for _ in range(5))[2]
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as long_run:
        generate(n)
        _sync()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as short_run:
        generate(1)
        _sync()

    def tally(prof):
        kernels, launches, cpu = defaultdict(float), 0, defaultdict(float)
        for event in prof.events():
            if event.device_type == torch.autograd.DeviceType.CUDA:
                kernels[event.name] += event.device_time / 1e3
                launches += 1
            else:
                cpu[event.name] += event.self_cpu_time_total / 1e3
        return kernels, launches, cpu

    k_long, l_long, c_long = tally(long_run)
    k_short, l_short, c_short = tally(short_run)
    steps = n - 1
    gpu = (sum(k_long.values()) - sum(k_short.values())) / steps
    print(f"== {name}: {per_token:.3f} ms per new token (wall), GPU kernels {gpu:.3f} ms and "
          f"{(l_long - l_short) / steps:.1f} launches per token")
    print("   kernels per token (ms):")
    per_kernel = {k: (k_long[k] - k_short.get(k, 0.0)) / steps for k in k_long}
    for kernel, ms in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"   {ms:7.4f}  {kernel[:110]}")
    print("   host ops by self CPU time per token (ms, profiler on):")
    per_op = {k: (c_long[k] - c_short.get(k, 0.0)) / steps for k in c_long}
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"   {ms:7.4f}  {op[:110]}")
    profiler = cProfile.Profile()
    profiler.enable()
    generate(n)
    profiler.disable()
    _sync()
    print(f"   Python functions by own time over generate({n}) (cProfile):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
    if args.static:
        print(f"   Dynamo: {dict(torch._dynamo.utils.counters['stats'])}, graph breaks "
              f"{sum(torch._dynamo.utils.counters['graph_break'].values())}, recompiles "
              f"{dict(torch._dynamo.utils.counters['recompiles'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", nargs="+", default=["hf-eager", "blockfuse"])
    parser.add_argument("--tokens", type=int, default=33)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--static", action="store_true",
                        help="generate with a static cache under transformers' compile (the *-static-compile providers)")
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny model (a smoke run, CPU if no GPU)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    shape = hf_llama.TINY if args.tiny else hf_llama.FULL
    base, ids = hf_llama.build_generator(shape, torch.bfloat16 if cuda else torch.float32,
                                         torch.device("cuda" if cuda else "cpu"))
    for name in args.providers:
        with hf_families.modeling_globals_restored() if name.startswith("liger") else contextlib.nullcontext():
            profile_provider(name, base, ids, args)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
