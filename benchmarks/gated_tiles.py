"""The gated activations' launch: flat rows and tile sizes against the launch rule, over the sweep's widths and rows.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/gated_tiles.py [--out DIR] [--ops swiglu,geglu]
    [--widths 768,...] [--rows 2048,8192,32768] [--variants rule,flat,...] [--jobs 8]

Issue 22's sweep of the gated activations (`benchmarks/results/sweep/2026-12-04-h200-gated/`) had them at a copy's
bandwidth at every width, but behind the faster of ``torch.compile`` and Liger-Kernel in most cells, by 1-3% from
8192 rows and 4-15% at 2048 rows (the backward most). The kernels take 2-D tiles (a power-of-two column block, rows
packed to a tile of ``gated.TILES`` elements); ``torch.compile`` and Liger walk contiguous runs. This times the
forward and backward launchers alone (``gated.launch_gated_forward`` / ``launch_gated_backward``, the separate form:
gate and up two tensors) in CUDA-graph replays with the L2 flushed before each call, each variant in turn within one
process (``--rounds``: again, in the reverse order), and a same-size device copy for the fraction. Variants
(``VARIANTS``): ``rule`` (the code as it is), ``flat`` (``gated.FLAT``: contiguous operands as one flat row), and
flat or 2-D with other tiles (``gated.TILES``). Each variant's outputs are checked equal to the rule's. ``--jobs``
processes compile every variant first (Triton's on-disk cache). Writes gated-tiles.json and gated-tiles.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import multiprocessing
import os
import sys
import time

import torch

from blockfuse.bench.runner import environment
from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import gated

WIDTHS = (768, 1024, 1152, 1536, 2048, 2560, 3072, 4096, 4304, 5120, 6144, 8192, 11008, 14336)
ROWS = (2048, 8192, 32768)
OPS = {"swiglu": "silu", "geglu": "gelu_tanh"}
# label -> (gated.FLAT, gated.TILES fields)
VARIANTS = {
    "rule": (False, {}),
    "flat": (True, {}),
    "flat-1k": (True, dict(forward=1024, forward_per_warp=256, backward=1024, backward_per_warp=256)),
    "flat-2k": (True, dict(forward=2048, forward_per_warp=256, backward=2048, backward_per_warp=256)),
    "flat-4k": (True, dict(forward=4096, forward_per_warp=512, backward=4096, backward_per_warp=512)),
    "2d-1k": (False, dict(backward=1024, backward_per_warp=256)),
}


@contextlib.contextmanager
def variant(label: str):
    """gated.FLAT and gated.TILES as ``label`` says, restored after."""
    flat, tiles = VARIANTS[label]
    saved = gated.FLAT, gated.TILES
    gated.FLAT, gated.TILES = flat, dataclasses.replace(gated.Tiles(), **tiles)
    try:
        yield
    finally:
        gated.FLAT, gated.TILES = saved


def _inputs(m: int, n: int):
    gen = torch.Generator(device="cuda").manual_seed(m * 131 + n)
    g, u, dy = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    return g, u, dy


def _passes(op: str, g, u, dy):
    """pass -> (callable, outputs, bytes moved)."""
    act = OPS[op]
    y, dg, du = torch.empty_like(g), torch.empty_like(g), torch.empty_like(g)
    nbytes = g.numel() * g.element_size()
    return {
        "fwd": (lambda: gated.launch_gated_forward(g, u, y, act), (y,), 3 * nbytes),
        "bwd": (lambda: gated.launch_gated_backward(dy, g, u, dg, du, act), (dg, du), 5 * nbytes),
    }


def _compile_some(cells, labels) -> int:
    """Worker: runs every variant of ``cells`` once (Triton compiles them into its on-disk cache)."""
    for op, m, n in cells:
        tensors = _inputs(m, n)
        for label in labels:
            with variant(label):
                for run, _, _ in _passes(op, *tensors).values():
                    run()
        torch.cuda.synchronize()
    return len(cells)


def warm(cells, labels, jobs: int) -> float:
    start = time.perf_counter()
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            pool.starmap(_compile_some, [(cells[i::jobs], labels) for i in range(jobs)])
    return time.perf_counter() - start


def copy_ms(nbytes: int) -> float:
    from triton.testing import do_bench

    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.bfloat16).normal_()  # half the bytes, read + written
    dst = torch.empty_like(src)
    return do_bench(lambda: dst.copy_(src), warmup=10, rep=50, return_mode="median")


def measure(op: str, m: int, n: int, labels, rounds: int) -> dict:
    tensors = _inputs(m, n)
    flush = l2_flush()
    passes = _passes(op, *tensors)
    record = dict(op=op, rows=m, width=n, passes={})
    for name, (run, outputs, nbytes) in passes.items():
        with variant("rule"):
            run()
        reference = [t.clone() for t in outputs]
        times = {label: [] for label in labels}
        for r in range(rounds):
            for label in (labels if r % 2 == 0 else labels[::-1]):
                with variant(label):
                    for t in outputs:
                        t.zero_()
                    run()
                    if not all(torch.equal(t, ref) for t, ref in zip(outputs, reference)):
                        raise AssertionError(f"{op} [{m}, {n}] {name}: {label}'s outputs differ from the rule's")

                    def body(run=run):
                        flush()
                        run()

                    times[label].append(time_cuda_graph(body, flush, reps=10, samples=7).median)
        copy = copy_ms(nbytes)
        record["passes"][name] = dict(copy_ms=copy, ms={k: v for k, v in times.items()},
                                      fraction={k: copy / min(v) for k, v in times.items()})
    return record


def markdown(meta: dict, records: list[dict], labels) -> str:
    lines = [
        "# The gated activations: flat rows and tiles against the launch rule",
        "",
        f"- card: **{meta['card']}**; torch {meta['torch']}, triton {meta['triton']}; bf16; {meta['commit']}; "
        f"{meta['date']}",
        f"- command: `{meta['command']}`",
        "- each cell and pass: the launcher alone, CUDA-graph replays with the L2 flushed; the rule's time over each "
        "variant's (above 1: the variant is faster), the best of the rounds each; `rule` column: the rule's time "
        "(us) and its fraction of a same-size copy.",
        "",
    ]
    for name in ("fwd", "bwd"):
        lines += [f"## {name}", "", "| op | rows x width | rule | " + " | ".join(labels[1:]) + " |",
                  "| --- | --- | --- | " + " | ".join("---" for _ in labels[1:]) + " |"]
        for r in records:
            p = r["passes"][name]
            rule = min(p["ms"]["rule"])
            cells = " | ".join(f"{rule / min(p['ms'][k]):.2f}" for k in labels[1:])
            lines.append(f"| {r['op']} | {r['rows']} x {r['width']} | {rule * 1000:.1f} us, "
                         f"{p['fraction']['rule']:.2f} | {cells} |")
        lines.append("")
        lines += ["Geometric mean of rule / variant:", ""]
        for rows in sorted({r["rows"] for r in records}):
            means = []
            for k in labels[1:]:
                logs = [math.log(min(r["passes"][name]["ms"]["rule"]) / min(r["passes"][name]["ms"][k]))
                        for r in records if r["rows"] == rows]
                means.append(f"{k} {math.exp(sum(logs) / len(logs)):.3f}")
            lines.append(f"- {rows} rows: " + ", ".join(means))
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gated-tiles")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument("--rows", default=",".join(map(str, ROWS)))
    ap.add_argument("--variants", default=",".join(VARIANTS), help="labels of VARIANTS, 'rule' first")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=8, help="processes compiling the variants first (1: none)")
    args = ap.parse_args()
    labels = args.variants.split(",")
    if labels[0] != "rule" or any(label not in VARIANTS for label in labels):
        raise SystemExit(f"--variants: 'rule' first, then any of {list(VARIANTS)}")
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    cells = list(itertools.product(args.ops.split(","), [int(v) for v in args.rows.split(",")],
                                   [int(v) for v in args.widths.split(",")]))
    print(f"{len(cells)} cells x {len(labels)} variants; compiling in {args.jobs} processes", flush=True)
    print(f"warm-up {warm(cells, labels, args.jobs):.1f} s", flush=True)
    records = []
    for op, m, n in cells:
        record = measure(op, m, n, labels, args.rounds)
        records.append(record)
        print(f"{op:7s} {m:6d} x {n:5d}: " + "; ".join(
            f"{name} rule {min(p['ms']['rule']) * 1000:.1f} us " + " ".join(
                f"{k} {min(p['ms']['rule']) / min(p['ms'][k]):.2f}" for k in labels[1:])
            for name, p in record["passes"].items()), flush=True)
    env = environment(torch.device("cuda"))
    meta = dict(card=env["card"], torch=env["torch"], triton=env["triton"],
                commit=f"commit {env['git_commit']} (source digest {env['source_digest']})", date=env["date"],
                command="python3 " + " ".join(sys.argv))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gated-tiles.json"), "w") as f:
        json.dump(dict(meta=meta, variants={k: VARIANTS[k] for k in labels}, cells=records), f, indent=1)
    with open(os.path.join(args.out, "gated-tiles.md"), "w") as f:
        f.write(markdown(meta, records, labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
