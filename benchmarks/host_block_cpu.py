"""A block's host cost on the CPU, no GPU needed: the Python, dispatcher and autograd work of one training step
with blockfuse's kernel launches stubbed out, fused against eager.

    TRITON_INTERPRET=1 python benchmarks/host_block_cpu.py reordered [--steps 300] [--profile 25 [--sort cumtime]]
        [--bf16] [--linear fp8:tensorwise] [--stub-fp8-gemm] [--tokens 2x16] [--mlp-block-bytes N]
        [--rotary-v-in-launch 0|1] [--launches]

Why: without CUDA graphs a small block is host-bound on a GPU (the enqueue takes longer than the kernels):
on an H200 the fused `reordered` block's step measured 0.77-0.87x plain eager's while its kernels (under CUDA
graphs) took 0.95x compile's (benchmarks/results/op-path/host-rows-2026-11-28-h200/). What a step costs the
host is the same Python whatever runs the kernels, so it can be measured and cut here, with the GPU's time kept
for confirming. Each kernel launch (``ops/launch.Kernel``) returns at once; GEMMs, attention and the eager
block's PyTorch ops run for real on tiny fp32 tensors ([2, 16, 64], 4 heads, FFN 128), where their CPU work
is small beside the dispatch (bf16, ``--bf16``, runs this CPU's slow bf16 arithmetic: eager's step then costs
several times more). So eager's number is an upper bound of its host cost and fused's holds no kernel
time at all: the ratio understates what fused costs beyond eager.

``--tokens BxS``: the input's batch and sequence (default 2x16; at 1024 tokens and more the gated MLP works in
blocks, ``ops/mlp.py``); ``--mlp-block-bytes N``: ``mlp.BLOCKS.min_block_bytes`` for the run (the MLP's blocks by
the activation's bytes; scale it with the tiny width here: 32 MiB at a real model's hidden is N at this one);
``--rotary-v-in-launch``: ``rotary.PACKED_COPY_IN_LAUNCH`` for the run (the attention's v copied in the rotation's
launch);
``--launches``: also counts, for one training step of each block, blockfuse's kernel launches and the ATen GEMM
calls (``mm``, ``addmm``, ``bmm``, ``linear``'s), where a GPU's host pays 15-75 us each
(``benchmarks/results/op-path/host-backward-2026-12-07-h100/``).

Prints the median microseconds of the forward and of the backward (gradients cleared outside the timing), and
with ``--profile N`` cProfile's top N functions of the fused step by own time. Numbers depend on this CPU and
on anything else running on it: compare runs of one process, or of one quiet machine.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from dataclasses import replace

import torch

from blockfuse.models import PRESETS, TransformerBlock, convert
from blockfuse.ops import launch
from blockfuse.runtime import interpreter_enabled


def time_steps(block, x, dy, steps: int) -> tuple[float, float]:
    """Median (forward, backward) microseconds of ``steps`` training steps after 50 untimed ones. FP8 layers' weight
    casts are forgotten before each step (untimed), as ``blockfuse bench block`` does: an optimizer step would make
    them stale, so a training step makes them (kept between steps, they hid a backward that cast every weight
    again: benchmarks/NOTES.md, "The weights cast twice a step")."""
    from blockfuse.nn.fp8 import clear_weight_cache

    params = list(block.parameters())
    forward, backward = [], []
    for i in range(steps + 50):
        for p in params:
            clear_weight_cache(p)
        t0 = time.perf_counter()
        out = block(x)
        t1 = time.perf_counter()
        out.backward(dy)
        t2 = time.perf_counter()
        x.grad = None
        for p in params:
            p.grad = None
        if i >= 50:
            forward.append(t1 - t0)
            backward.append(t2 - t1)
    return statistics.median(forward) * 1e6, statistics.median(backward) * 1e6


_GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_scaled_mm")


def count_launches(block, x, dy) -> dict:
    """One training step's blockfuse kernel launches (the stubbed ``Kernel._launch_slow`` calls) and ATen GEMM
    calls, autograd's own backward GEMMs included (counted by the profiler's op events: a dispatch mode would
    count them too, but blockfuse's launchers take their traced path under one)."""
    counts = {"blockfuse launches": 0, "GEMM calls": 0}
    stub = launch.Kernel._launch_slow

    def counted(self, *args, **kwargs):
        counts["blockfuse launches"] += 1
        return stub(self, *args, **kwargs)

    launch.Kernel._launch_slow = counted
    try:
        with torch.autograd.profiler.profile() as profile:
            block(x).backward(dy)
    finally:
        launch.Kernel._launch_slow = stub
    counts["GEMM calls"] = sum(1 for event in profile.function_events if event.name in _GEMMS)
    x.grad = None
    for p in block.parameters():
        p.grad = None
    return counts


def _empty_scaled_mm(a, b, scale_a=None, scale_b=None, bias=None, out_dtype=None, **_):
    """``torch._scaled_mm``'s output, unwritten (``--stub-fp8-gemm``)."""
    return torch.empty(a.shape[0], b.shape[1], dtype=out_dtype or a.dtype, device=a.device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("--steps", type=int, default=300, help="timed steps (0: none, for --launches alone)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile's top N of the fused step")
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumtime"), help="the profile's order")
    parser.add_argument("--bf16", action="store_true", help="bf16 tensors (default fp32: see the docstring)")
    parser.add_argument("--linear", default="bf16", choices=("bf16", "fp8:tensorwise", "fp8:rowwise", "fp8:delayed"),
                        help="the blocks' Linear layers: as they are, or blockfuse.fp8.convert's (CPU _scaled_mm: "
                             "torch >= 2.13 for rowwise)")
    parser.add_argument("--stub-fp8-gemm", action="store_true",
                        help="torch._scaled_mm returns an empty output at once: the CPU's FP8 GEMM is an emulation "
                             "(~90 us a call here at these shapes) where a GPU's costs its host a cuBLASLt call")
    parser.add_argument("--tokens", default="2x16", help="batch x sequence of the input (default 2x16)")
    parser.add_argument("--mlp-block-bytes", type=int, default=None,
                        help="ops/mlp.py's BLOCKS.min_block_bytes for the run (default: as it is)")
    parser.add_argument("--rotary-v-in-launch", type=int, choices=(0, 1), default=None,
                        help="ops/rotary.py's PACKED_COPY_IN_LAUNCH for the run (default: as it is)")
    parser.add_argument("--launches", action="store_true",
                        help="count one step's blockfuse launches and ATen GEMM calls, eager and fused")
    args = parser.parse_args()
    if not interpreter_enabled():
        parser.error("set TRITON_INTERPRET=1: the fused block takes its kernel path only there on the CPU")
    launch.Kernel._launch_slow = lambda self, *a, **k: None  # every launch returns at once
    if args.stub_fp8_gemm:
        torch._scaled_mm = _empty_scaled_mm
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    batch, seq = (int(v) for v in args.tokens.split("x"))
    config = replace(PRESETS[args.preset].config, d_model=64, n_heads=4, ffn_hidden=128)
    config = replace(config, max_seq_len=max(config.max_seq_len, seq))
    eager = TransformerBlock(config, "eager").to(dtype)
    fused = convert(eager, "fused")
    if args.linear != "bf16":
        import blockfuse.fp8

        recipe = args.linear.split(":")[1]
        eager, fused = (blockfuse.fp8.convert(block, recipe=recipe) for block in (eager, fused))
    if args.mlp_block_bytes is not None:
        import blockfuse.ops.mlp as mlp

        mlp.BLOCKS = replace(mlp.BLOCKS, min_block_bytes=args.mlp_block_bytes)
    if args.rotary_v_in_launch is not None:
        import blockfuse.ops.rotary as rotary

        rotary.PACKED_COPY_IN_LAUNCH = bool(args.rotary_v_in_launch)
    x = torch.randn(batch, seq, 64, dtype=dtype, requires_grad=True)
    dy = torch.randn(batch, seq, 64, dtype=dtype)
    print(f"{args.preset}, [{batch}, {seq}, 64] {dtype}, {args.linear} Linear layers, torch {torch.__version__}, "
          f"{args.steps} steps, median us:")
    if args.launches:
        for label, block in (("eager", eager), ("fused", fused)):
            counts = count_launches(block, x, dy)
            print(f"  {label:6s} a step: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if args.steps == 0:  # (--launches alone: nothing timed)
        return
    results = {}
    for label, block in (("eager", eager), ("fused", fused)):
        results[label] = time_steps(block, x, dy, args.steps)
        fwd, bwd = results[label]
        print(f"  {label:6s} forward {fwd:7.0f}  backward {bwd:7.0f}  step {fwd + bwd:7.0f}")
    ratio = sum(results["fused"]) / sum(results["eager"])
    print(f"  fused / eager, whole step: {ratio:.2f}x")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        time_steps(fused, x, dy, 100)
        profiler.disable()
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)


if __name__ == "__main__":
    main()
