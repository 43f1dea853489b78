"""Where a fused op's forward + backward host time goes on a GPU's host, piece by piece (issue 22's host lead).

    PYTHONPATH=src python3 benchmarks/host_backward.py [--rounds 3] [--calls 300] [--shape 64x256] [--out DIR]

`blockfuse bench host` found blockfuse's RMSNorm forward + backward costing an H100's host 2.97x what PyTorch's
costs (521 against 176 us a call at [64, 256]: op-path/host-rows-2026-12-07-h100/), where on a 2-core CPU with the
launches stubbed the two cost about the same (116 against 108 us: benchmarks/NOTES.md, "The op path and host time").
This splits the GPU host's number into what it is made of, each row a loop of back-to-back calls (host-inclusive:
the GPU work of these shapes is a few microseconds a kernel), every row in each of ``--rounds`` alternating rounds of
one process, the median of the rounds:

* ``eager`` / ``blockfuse``: ``F.rms_norm`` / ``blockfuse.rms_norm`` and ``F.layer_norm`` / ``blockfuse.layer_norm``,
  forward (no grad), forward with grad on (the Function and what it saves; the graph freed unused), and forward +
  ``torch.autograd.grad`` (as ``bench host`` calls them);
* ``... no launch``: blockfuse with every kernel launch returning at once (``ops.launch.Kernel.__call__``): the
  launches' own host time is the difference;
* ``... one thread``: ``torch.autograd.set_multithreading_enabled(False)``, the backward on the calling thread
  instead of the engine's device thread;
* ``empty Function``: an ``autograd.Function`` whose forward allocates its output and whose backward returns dy: what
  a Python Function costs the engine, whatever it launches.

* ``Function with a blockfuse launch / an ATen clone in its backward``: the empty Function's forward, and a backward
  that launches one blockfuse kernel (a row copy) or makes one ATen kernel: what a launch in a backward costs;
* ``... switch interval 10 us``: Python's GIL switch interval (5 ms) shortened, against a thread waiting for the GIL.

With each forward + backward row, the mean time inside the Functions' Python ``backward`` (perf_counter around it,
on whichever thread runs it): what the engine adds around it is the rest. Then the same forwards (no grad:
``F.rms_norm``, ``blockfuse.rms_norm`` with and without its launch, ``empty_like``) timed on the calling thread and
inside a backward (``_OnEngineThread``: on a GPU the engine's device thread runs it): whether a call costs more there;
and each forward + backward call timed on its own (median, mean, p90, largest): whether a few calls stall or every
call costs more. Writes ``host-backward.json`` and ``host-backward.md`` under ``--out``. Runs on the CPU too (the
reference path, or the interpreter's kernels; for its test), where the numbers mean little.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import blockfuse
from blockfuse.ops import launch, norm
from blockfuse.ops.copy import launch_copy_rows
from blockfuse.runtime import use_triton


class _Empty(torch.autograd.Function):
    """The cheapest Python Function: an allocation forward, an identity backward."""

    @staticmethod
    def forward(ctx, x):
        return x.new_empty(x.shape)

    @staticmethod
    def backward(ctx, dy):
        return dy


class _LaunchInBackward(_Empty):
    """:class:`_Empty` whose backward launches one blockfuse kernel (a row copy of dy) and returns its output."""

    @staticmethod
    def backward(ctx, dy):
        out = torch.empty_like(dy)
        if use_triton(dy):
            launch_copy_rows(dy, out)
        else:  # (a CPU without the interpreter: no kernel to launch)
            out.copy_(dy)
        return out


class _AtenInBackward(_Empty):
    """:class:`_Empty` whose backward makes one ATen kernel (``dy.clone()``) and returns it."""

    @staticmethod
    def backward(ctx, dy):
        return dy.clone()


class BackwardClock:
    """Time spent inside wrapped Functions' ``backward`` (seconds, calls), on any thread."""

    def __init__(self):
        self.seconds, self.calls = 0.0, 0

    def reset(self):
        self.seconds, self.calls = 0.0, 0

    @contextlib.contextmanager
    def wrapping(self, *functions):
        originals = [f.backward for f in functions]

        def timed(original):
            def backward(ctx, *grads):
                start = time.perf_counter()
                try:
                    return original(ctx, *grads)
                finally:
                    self.seconds += time.perf_counter() - start
                    self.calls += 1
            return staticmethod(backward)

        for f, original in zip(functions, originals):
            f.backward = timed(original)
        try:
            yield
        finally:
            for f, original in zip(functions, originals):
                f.backward = staticmethod(original)


@contextlib.contextmanager
def no_launch():
    """Every blockfuse kernel launch returns at once (the outputs stay unwritten)."""
    original = launch.Kernel.__call__
    launch.Kernel.__call__ = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        launch.Kernel.__call__ = original


@contextlib.contextmanager
def one_thread():
    with torch.autograd.set_multithreading_enabled(False):
        yield


@contextlib.contextmanager
def switch_interval(seconds: float = 1e-5):
    """Python's GIL switch interval (default 5 ms) shortened: a thread waiting for the GIL gets it sooner."""
    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def cases(shape: tuple[int, int], device: str, dtype: torch.dtype) -> dict:
    """name -> (call, context factory, mode)."""
    m, n = shape
    x = torch.randn(m, n, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(n, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(n, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(m, n, device=device, dtype=dtype)
    ops = {
        "rms_norm": ((lambda: F.rms_norm(x, (n,), w, 1e-6)), (lambda: blockfuse.rms_norm(x, w, 1e-6)), (x, w)),
        "layer_norm": ((lambda: F.layer_norm(x, (n,), w, b)), (lambda: blockfuse.layer_norm(x, w, b)), (x, w, b)),
    }
    table = {}
    plain = contextlib.nullcontext
    for op, (eager, fused, leaves) in ops.items():
        def forward(fn):
            with torch.no_grad():
                fn()

        def forward_backward(fn, leaves=leaves):
            torch.autograd.grad(fn(), leaves, dy)

        for label, fn in (("eager", eager), ("blockfuse", fused)):
            table[f"{op} {label}"] = ((lambda fn=fn, f=forward: f(fn)), plain, "fwd")
            table[f"{op} {label} fwd, grad on"] = (fn, plain, "fwd")
            both = (lambda fn=fn, fb=forward_backward: fb(fn))
            table[f"{op} {label} fwd+bwd"] = (both, plain, "fwdbwd")
            table[f"{op} {label} fwd+bwd, one thread"] = (both, one_thread, "fwdbwd")
        table[f"{op} blockfuse no launch"] = ((lambda fn=fused, f=forward: f(fn)), no_launch, "fwd")
        table[f"{op} blockfuse fwd+bwd, no launch"] = ((lambda fn=fused, fb=forward_backward: fb(fn)), no_launch,
                                                      "fwdbwd")
    for name, function in (("a blockfuse launch", _LaunchInBackward), ("an ATen clone", _AtenInBackward)):
        both = (lambda f=function: torch.autograd.grad(f.apply(x), (x,), dy))
        table[f"Function with {name} in its backward, fwd+bwd"] = (both, plain, "fwdbwd")
        table[f"Function with {name} in its backward, fwd+bwd, one thread"] = (both, one_thread, "fwdbwd")
    table["rms_norm blockfuse fwd+bwd, switch interval 10 us"] = (
        (lambda fn=ops["rms_norm"][1], leaves=ops["rms_norm"][2]: torch.autograd.grad(fn(), leaves, dy)),
        switch_interval, "fwdbwd")
    table["empty Function fwd+bwd"] = ((lambda: torch.autograd.grad(_Empty.apply(x), (x,), dy)), plain, "fwdbwd")
    table["empty Function fwd+bwd, one thread"] = ((lambda: torch.autograd.grad(_Empty.apply(x), (x,), dy)),
                                                   one_thread, "fwdbwd")
    return table


class _OnEngineThread(torch.autograd.Function):
    """Runs ``work`` ``calls`` times inside its backward, wherever the engine runs that (a GPU's: its device
    thread), and records the microseconds a call there."""

    @staticmethod
    def forward(ctx, x, work, calls, record):
        ctx.work, ctx.calls, ctx.record = work, calls, record
        return x.new_empty(x.shape)

    @staticmethod
    def backward(ctx, dy):
        with torch.no_grad():
            for _ in range(10):
                ctx.work()
            start = time.perf_counter()
            for _ in range(ctx.calls):
                ctx.work()
            ctx.record.append((time.perf_counter() - start) / ctx.calls * 1e6)
        return dy, None, None, None


def thread_rows(shape, device: str, dtype, calls: int, sync) -> list[dict]:
    """The same forwards (no grad) timed on the calling thread and inside a backward (the engine's thread): does a
    call cost more there? Host time only (no sync inside the loop)."""
    m, n = shape
    x = torch.randn(m, n, device=device, dtype=dtype)
    w = torch.randn(n, device=device, dtype=dtype)
    leaf = torch.randn(m, n, device=device, dtype=dtype, requires_grad=True)
    works = {"F.rms_norm": lambda: F.rms_norm(x, (n,), w, 1e-6), "blockfuse.rms_norm": lambda: blockfuse.rms_norm(x, w),
             "torch.empty_like": lambda: torch.empty_like(x)}
    rows = []
    for name, work in works.items():
        for label, context in (("", contextlib.nullcontext), (", no launch", no_launch)):
            if label and not name.startswith("blockfuse"):
                continue
            with context():
                with torch.no_grad():
                    for _ in range(10):
                        work()
                    sync()
                    start = time.perf_counter()
                    for _ in range(calls):
                        work()
                    here = (time.perf_counter() - start) / calls * 1e6
                sync()
                record: list = []
                torch.autograd.grad(_OnEngineThread.apply(leaf, work, calls, record), (leaf,), torch.ones_like(leaf))
                sync()
            rows.append({"work": name + label, "calling_thread_us": here, "engine_thread_us": record[0]})
    return rows


def call_spread(call, calls: int, sync) -> dict:
    """Each call's host time on its own (no sync between calls): median, mean, 90th percentile and largest, us.
    A mean far over the median: a few calls stall (a thread waiting for another), not every call costing more."""
    for _ in range(10):
        call()
    sync()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    sync()
    times.sort()
    return {"median": statistics.median(times), "mean": statistics.fmean(times),
            "p90": times[int(0.9 * (len(times) - 1))], "max": times[-1]}


def per_call_us(call, context, calls: int, sync, clock: BackwardClock) -> tuple[float, float]:
    """(host-inclusive us a call, us a call inside the wrapped backward) of ``calls`` back-to-back calls."""
    with context():
        for _ in range(10):
            call()
        sync()
        clock.reset()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        total = time.perf_counter() - start
    return total / calls * 1e6, clock.seconds / calls * 1e6


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--shape", default="64x256")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split("x"))
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    table = cases(shape, args.device, dtype)
    clock = BackwardClock()
    samples = {name: [] for name in table}
    inside = {name: [] for name in table}
    with clock.wrapping(norm._NormFunction, _Empty, _LaunchInBackward, _AtenInBackward):
        for r in range(args.rounds):
            order = list(table) if r % 2 == 0 else list(reversed(table))
            for name in order:
                call, context, _ = table[name]
                us, backward_us = per_call_us(call, context, args.calls, sync, clock)
                samples[name].append(us)
                inside[name].append(backward_us)
            print(f"round {r + 1}/{args.rounds} done", flush=True)
    card = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    import triton

    rows = [{"case": name, "mode": table[name][2], "us": statistics.median(samples[name]), "rounds": samples[name],
             "backward_python_us": statistics.median(inside[name])} for name in table]
    threads = [thread_rows(shape, args.device, dtype, args.calls, sync) for _ in range(args.rounds)]
    thread_table = [{"work": row["work"],
                     "calling_thread_us": statistics.median(t[i]["calling_thread_us"] for t in threads),
                     "engine_thread_us": statistics.median(t[i]["engine_thread_us"] for t in threads)}
                    for i, row in enumerate(threads[0])]
    spread = {name: call_spread(table[name][0], args.calls, sync)
              for name in ("rms_norm eager fwd+bwd", "rms_norm blockfuse fwd+bwd", "empty Function fwd+bwd")}
    result = {"card": card, "torch": torch.__version__, "triton": triton.__version__, "shape": list(shape),
              "dtype": str(dtype), "calls": args.calls, "rounds": args.rounds, "rows": rows, "threads": thread_table,
              "spread": spread}
    lines = [f"# Host time a call, piece by piece ({card}; torch {torch.__version__}, triton {triton.__version__}; "
             f"{list(shape)} {dtype})", "",
             "Median of the rounds, us a call (back-to-back calls, host-inclusive); `in backward`: the mean time "
             "inside the Functions' Python backward.", "",
             "| case | us a call | rounds | in backward |", "| --- | --- | --- | --- |"]
    for row in rows:
        rounds = " / ".join(f"{v:.1f}" for v in row["rounds"])
        back = f"{row['backward_python_us']:.1f}" if row["mode"] == "fwdbwd" else ""
        lines.append(f"| {row['case']} | {row['us']:.1f} | {rounds} | {back} |")
    lines += ["", "The same call (no grad, host time of back-to-back calls) on the calling thread and inside a "
              "backward (the engine's thread on a GPU), median of the rounds:", "",
              "| call | calling thread, us | engine's thread, us |", "| --- | --- | --- |"]
    lines += [f"| {r['work']} | {r['calling_thread_us']:.1f} | {r['engine_thread_us']:.1f} |" for r in thread_table]
    lines += ["", "Each call timed on its own (host time, no sync between calls), us:", "",
              "| case | median | mean | p90 | max |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {name} | {v['median']:.1f} | {v['mean']:.1f} | {v['p90']:.1f} | {v['max']:.1f} |"
              for name, v in spread.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "host-backward.json").write_text(json.dumps(result, indent=1))
        (out / "host-backward.md").write_text(text)
    return result


if __name__ == "__main__":
    main()
