"""A chunk's three GEMMs of the fused LM head + cross-entropy at a vocabulary that is not a multiple of 16, against
the same GEMMs split at the largest multiple of 8 (ops/cross_entropy.py, ``vocab_split``), on CUDA.

    python3 benchmarks/cross_entropy_odd_vocab.py [--tokens 1024] [--width 4096] [--vocab 50257]

Prints the time of each GEMM (logits, d hidden, d weight) on logits rows of exactly ``vocab`` elements, on rows padded
to a multiple of 16 (whole and split), with do_bench.
"""

from __future__ import annotations

import argparse

import torch
from triton.testing import do_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=50257)
    args = parser.parse_args()
    t, d, v = args.tokens, args.width, args.vocab
    main = v // 8 * 8
    h = torch.randn(t, d, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(v, d, device="cuda", dtype=torch.bfloat16)
    # rows of the logits padded to a multiple of 16 (as ops/cross_entropy.py's logits_buffer), and, for comparison,
    # rows of exactly v elements (an odd row stride)
    padded = -(-v // 16) * 16
    z = torch.randn(t, padded, device="cuda", dtype=torch.bfloat16)[:, :v]
    z_odd = torch.randn(t, v, device="cuda", dtype=torch.bfloat16)
    dh = torch.empty_like(h)
    dw = torch.empty_like(w)
    whole = {
        "logits h @ W.T": lambda: torch.mm(h, w.t(), out=z),
        "d hidden z @ W": lambda: torch.mm(z, w, out=dh),
        "d weight z.T @ h": lambda: torch.mm(z.t(), h, out=dw),
    }
    split = {
        "logits h @ W.T": lambda: (torch.mm(h, w[:main].t(), out=z[:, :main]),
                                   torch.mm(h, w[main:].t(), out=z[:, main:])),
        "d hidden z @ W": lambda: (torch.mm(z[:, :main], w[:main], out=dh), dh.addmm_(z[:, main:], w[main:])),
        "d weight z.T @ h": lambda: (torch.mm(z[:, :main].t(), h, out=dw[:main]),
                                     torch.mm(z[:, main:].t(), h, out=dw[main:])),
    }
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; tokens {t}, width {d}, vocab {v} "
          f"(split at {main})")
    odd_stride = {
        "logits h @ W.T": lambda: torch.mm(h, w.t(), out=z_odd),
        "d hidden z @ W": lambda: torch.mm(z_odd, w, out=dh),
        "d weight z.T @ h": lambda: torch.mm(z_odd.t(), h, out=dw),
    }
    flops = 2 * t * d * v
    print("| GEMM | logits rows of v (odd stride) ms | padded rows, whole ms | padded rows, split ms | "
          "split TFLOP/s |")
    print("| --- | --- | --- | --- | --- |")
    for name in whole:
        times = [do_bench(fn[name], warmup=25, rep=200, return_mode="median") for fn in (odd_stride, whole, split)]
        print(f"| {name} | {times[0]:.3f} | {times[1]:.3f} | {times[2]:.3f} | {flops / times[2] / 1e9:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
