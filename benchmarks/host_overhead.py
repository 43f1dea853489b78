"""Host time per call of the norm ops (fwd, fwd+bwd), and a cProfile of the slowest.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/host_overhead.py
"""

import cProfile
import pstats
import time

import torch

import blockfuse


def host_us(fn, n=200):
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main():
    x = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn_like(x, requires_grad=True)
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    cases = {
        "rms": lambda: blockfuse.rms_norm(x, w),
        "ln": lambda: blockfuse.layer_norm(x, w, b),
        "add_rms": lambda: blockfuse.rms_norm(x, w, residual=r),
        "add_ln": lambda: blockfuse.layer_norm(x, w, b, residual=r),
    }
    for name, fn in cases.items():
        def fwdbwd(fn=fn):
            out = fn()
            outs = out if isinstance(out, tuple) else (out,)
            torch.autograd.backward(outs, [dy] * len(outs))
            x.grad = r.grad = w.grad = b.grad = None
        with torch.no_grad():
            fwd = host_us(fn)
        print(f"{name:8s} fwd {fwd:7.1f} us   fwd+bwd {host_us(fwdbwd):7.1f} us")
    out_fn = cases["add_ln"]

    def step():
        out = out_fn()
        torch.autograd.backward(out, [dy, dy])
        x.grad = r.grad = w.grad = b.grad = None

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(200):
        step()
    torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
