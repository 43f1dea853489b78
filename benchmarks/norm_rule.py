"""The norm kernels' launch rule against the power-of-two rule it replaced, side by side on one GPU.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/norm_rule.py [--out DIR] [--widths 768,1152,...]

For each width (rows: 8192, or enough for a 32 MiB input) and form (LayerNorm, RMSNorm, pre-residual and
post-residual LayerNorm, LayerNorm + GELU), times the forward and the backward launchers (CUDA-graph
replays, L2 flushed) tiled two ways in the same process:

* ``pow2``: the rule before issue 22, one power-of-two tile of ``next_power_of_2(N)`` columns up to 16384
  (4304 -> 8192 lanes; 11008 -> 16384, whose backward spills);
* ``rule``: ``norm._tile`` (two power-of-two pieces for rows past 8192 lanes in the forward, chunked wide
  backward rows of the residual and activation forms);

and a device copy of the same bytes (do_bench, L2 flushed) in the same run, and checks that the two agree.
Writes norm-rule.json and norm-rule.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
from triton.testing import do_bench

from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import norm
from blockfuse.ops.launch import cdiv, next_power_of_2


WIDTHS = (768, 1152, 2560, 2880, 4096, 4304, 5120, 6144, 8192, 11008, 14336)
FORMS = {"ln": (False, norm.NONE, 0), "rms": (True, norm.NONE, 0), "ln-pre": (False, norm.PRE, 0),
         "ln-post": (False, norm.POST, 0), "ln-gelu": (False, norm.NONE, norm.GELU_CODES["tanh"])}


def pow2_tile(n, target_elements, elements_per_warp, max_lanes, tail_from):
    """The rule before issue 22 (the kernels without a tail run the same code as then)."""
    block_n = min(next_power_of_2(n), 16384)
    num_chunks = cdiv(n, block_n)
    block_m = max(1, target_elements // block_n) if num_chunks == 1 else 1
    num_warps = min(16, max(4, (block_m * block_n) // elements_per_warp))
    return norm.Tile(block_m, block_n, num_chunks, num_warps, False, 1)


def _copy_ms(nbytes: int) -> float:
    """A device copy that moves ``nbytes`` in all: reads half of them and writes the other half."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    flush = l2_flush()

    def body():
        flush()
        dst.copy_(src)

    flush_ms = do_bench(flush, warmup=5, rep=30, return_mode="median")
    return max(1e-6, do_bench(body, warmup=10, rep=60, return_mode="median") - flush_ms)


def _case(m, n, form):
    is_rms, mode, activation = FORMS[form]
    g = torch.Generator(device="cuda").manual_seed(n)
    x = (torch.randn(m, n, device="cuda", generator=g) * 2 + 0.5).bfloat16()
    r = torch.randn(m, n, device="cuda", generator=g).bfloat16() if mode else None
    w = torch.randn(n, device="cuda", generator=g).bfloat16()
    b = None if is_rms else torch.randn(n, device="cuda", generator=g).bfloat16()

    def forward():
        return norm._norm_fwd(x, w, b, r, None, 1e-5, mode, 0.0, is_rms, False, activation, True)

    y, s, mean, rstd = forward()
    z = s if mode == norm.PRE else x
    dy = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    ds = torch.randn(m, n, device="cuda", generator=g).bfloat16() if mode == norm.PRE else None

    def backward():
        return norm._norm_bwd(dy, ds, z, w, b, b is not None, None if is_rms else mean, rstd, None, mode, 0.0,
                              is_rms, False, activation)

    fwd_bytes = (2 + (2 if mode == norm.PRE else 1 if mode == norm.POST else 0)) * x.numel() * 2
    bwd_bytes = (3 + (1 if mode == norm.PRE else 0)) * x.numel() * 2
    return forward, backward, fwd_bytes, bwd_bytes


def _time(fn) -> float:
    flush = l2_flush()

    def body():
        flush()
        fn()

    return time_cuda_graph(body, flush, reps=10, samples=7).median


def _max_rel(a, b) -> float:
    return max(((x.float() - y.float()).abs().max() / y.float().abs().max().clamp_min(1e-30)).item()
               for x, y in zip(a, b) if x.numel())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument("--forms", default=",".join(FORMS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    card = torch.cuda.get_device_name()
    head = f"{card}; torch {torch.__version__}, triton {triton.__version__}; bf16"
    print(head, flush=True)
    rule = norm._tile
    rows = []
    for n in map(int, args.widths.split(",")):
        m = max(8192, (32 << 20) // (2 * n))
        for form in args.forms.split(","):
            forward, backward, fwd_bytes, bwd_bytes = _case(m, n, form)
            row = {"rows": m, "width": n, "form": form}
            outputs = {}
            tilings = [("pow2", pow2_tile), ("rule", rule)]
            for name, tile in tilings:
                norm._tile = tile
                try:
                    outputs[name] = (*forward(), *backward())
                    row[f"{name}_fwd_ms"] = _time(forward)
                    row[f"{name}_bwd_ms"] = _time(backward)
                finally:
                    norm._tile = rule
            row["max_rel_diff"] = _max_rel(outputs["rule"], outputs["pow2"])
            row["copy_fwd_ms"] = _copy_ms(fwd_bytes)
            row["copy_bwd_ms"] = _copy_ms(bwd_bytes)
            for way in ("fwd", "bwd"):
                for name, _ in tilings:
                    row[f"{name}_{way}_frac"] = row[f"copy_{way}_ms"] / row[f"{name}_{way}_ms"]
                row[f"{way}_speedup"] = row[f"pow2_{way}_ms"] / row[f"rule_{way}_ms"]
            rows.append(row)
            print(f"{m}x{n} {form}: fwd {row['pow2_fwd_frac']:.2f} -> {row['rule_fwd_frac']:.2f} of copy "
                  f"({row['fwd_speedup']:.2f}x), bwd {row['pow2_bwd_frac']:.2f} -> {row['rule_bwd_frac']:.2f} "
                  f"({row['bwd_speedup']:.2f}x), max rel diff {row['max_rel_diff']:.1e}", flush=True)
    command = "PYTHONPATH=src python3 benchmarks/norm_rule.py " + " ".join(sys.argv[1:])
    with open(os.path.join(args.out, "norm-rule.json"), "w") as f:
        json.dump({"card": card, "torch": torch.__version__, "triton": triton.__version__, "command": command,
                   "rows": rows}, f, indent=1)
    lines = [f"# Norm launch rule against the power-of-two tile ({head})", "", f"Command: `{command}`", "",
             "Fraction of a same-size device copy's bandwidth (copy timed in the same run), power-of-two tile -> "
             "rule, and the rule's speed-up. Launchers timed directly (CUDA-graph replays, L2 flushed); "
             "forward: x, y (+ residual, s); backward: dy, z, dx (+ ds).", "",
             "| rows x width | form | fwd pow2 | fwd rule | fwd x | bwd pow2 | bwd rule | bwd x | max rel diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['rows']}x{r['width']} | {r['form']} | {r['pow2_fwd_frac']:.2f} | {r['rule_fwd_frac']:.2f} "
                     f"| {r['fwd_speedup']:.2f} | {r['pow2_bwd_frac']:.2f} | {r['rule_bwd_frac']:.2f} | "
                     f"{r['bwd_speedup']:.2f} | {r['max_rel_diff']:.1e} |")
    with open(os.path.join(args.out, "norm-rule.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
