"""A block's FP8 weight casts grouped (``ops/fp8_weights.py``: two launches for up to four weights) against each layer
casting its own (``ops/fp8.py``'s ``_weight_operands``: an amax pass and a cast a weight), issue 18.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/fp8_weight_casts.py [--out FILE.json]   (and FILE.png)
Plot a run again: python3 benchmarks/fp8_weight_casts.py --replot FILE.json

For the four weights of a block of several real models (QKV, output, the MLP's two; bf16), prints and writes:
- ``gpu_us``: the kernels' time, from CUDA-graph replays with the L2 flushed before each call, and the fraction of a
  same-run device copy's bandwidth that makes for the bytes a cast must move (the weights read twice, the amax pass
  and the cast; one byte written an element). NOTE: captured in a graph the per-weight path zero-fills its amax
  slot (``_AmaxSlots`` is off during a capture): one memset a weight more than it launches eagerly;
- ``host_us``: the host's time to enqueue the casts (the weights' kept casts cleared first, as an optimizer step
  would), the median of 200 calls, the device synchronized after each;
- ``equal``: whether the grouped casts equal the layers' own bit for bit (values and scales).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from blockfuse.analyze.ceilings import copy_bandwidth
from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.analyze.png import write_png
from blockfuse.ops import fp8, fp8_weights

# (name, [(out_features, in_features) of QKV, output, MLP up (gate|up where gated), MLP down])
BLOCKS = [
    ("te-4layer (d 2048, FFN 4096 SwiGLU)", [(6144, 2048), (2048, 2048), (8192, 2048), (2048, 4096)]),
    ("Llama-3-8B (d 4096, GQA 32/8, FFN 14336)", [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]),
    ("SigLIP-2 so400m (d 1152, FFN 4304)", [(3456, 1152), (1152, 1152), (4304, 1152), (1152, 4304)]),
    ("OLMo-2-1B (d 2048, FFN 8192)", [(6144, 2048), (2048, 2048), (16384, 2048), (2048, 8192)]),
    ("Mistral-NeMo (d 5120, GQA 32/8 x 128, FFN 14336)", [(6144, 5120), (5120, 4096), (28672, 5120), (5120, 14336)]),
]


def own_casts(weights):
    return [fp8._quantize_2d(w, torch.float8_e4m3fn, False, True, False, 1)[:2] for w in weights]


def host_us(fn, weights) -> float:
    samples = []
    for _ in range(200):
        for w in weights:
            fp8.clear_weight_cache(w)
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def plot(result: dict, path: str) -> None:
    """Both paths' fraction of the copy's bandwidth and host microseconds, block by block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [row["block"].split(" (")[0] for row in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, metric, label in ((axes[0], "copy_fraction", "GPU: fraction of a copy's bandwidth"),
                              (axes[1], "host_us", "host: us to enqueue")):
        for offset, path_name in ((-0.2, "own"), (0.2, "grouped")):
            ax.bar([i + offset for i in range(len(rows))], [row[f"{metric}_{path_name}"] for row in rows], 0.4,
                   label={"own": "each layer its own (2 launches a weight)", "grouped": "grouped (2 launches)"}[
                       path_name])
        ax.set_xticks(range(len(rows)), names, rotation=20, fontsize=8)
        ax.set_title(label, fontsize=10)
    axes[0].set_ylim(0, 1.35)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"A block's four FP8 weight casts, bf16 -> e4m3: {result['device']}, torch {result['torch']}",
                 fontsize=10)
    fig.tight_layout()
    write_png(fig, path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--replot", default=None, metavar="JSON", help="plot a run's JSON again (no GPU needed)")
    args = parser.parse_args()
    if args.replot:
        with open(args.replot) as f:
            plot(json.load(f), args.replot.removesuffix(".json") + ".png")
        return
    copy = copy_bandwidth()
    flush = l2_flush()
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; copy {copy['gbps']:.0f} GB/s")
    for name, shapes in BLOCKS:
        generator = torch.Generator(device="cuda").manual_seed(0)
        weights = [torch.nn.Parameter(torch.randn(shape, device="cuda", generator=generator).bfloat16() * 0.02)
                   for shape in shapes]
        detached = [w.detach() for w in weights]
        moved = sum(w.numel() * (2 * w.element_size() + 1) for w in weights)
        grouped = fp8_weights._launch(detached)
        own = own_casts(detached)
        equal = all(torch.equal(q.view(torch.uint8), oq.view(torch.uint8)) and torch.equal(s, os.reshape(()))
                    for (q, s), (oq, os) in zip(grouped, own))
        gpu = {label: time_cuda_graph(lambda f=f: (flush(), f()), flush).median * 1e3
               for label, f in (("grouped", lambda: fp8_weights._launch(detached)),
                                ("own", lambda: own_casts(detached)))}
        host = {"grouped": host_us(lambda: fp8_weights.cast_weights(weights), weights),
                "own": host_us(lambda: [fp8._weight_operands(w, False, False, True) for w in weights], weights)}
        row = {"block": name, "shapes": shapes, "bytes": moved, "equal": equal,
               **{f"gpu_us_{k}": v for k, v in gpu.items()},
               **{f"copy_fraction_{k}": moved / (v * 1e-6) / 1e9 / copy["gbps"] for k, v in gpu.items()},
               **{f"host_us_{k}": v for k, v in host.items()}}
        rows.append(row)
        print(f"{name}: GPU {gpu['grouped']:.1f} us ({row['copy_fraction_grouped']:.2f} of copy) grouped, "
              f"{gpu['own']:.1f} us ({row['copy_fraction_own']:.2f}) own; host {host['grouped']:.1f} against "
              f"{host['own']:.1f} us; bit-equal {equal}")
    if args.out:
        result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy": copy, "rows": rows}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        plot(result, args.out.removesuffix(".json") + ".png")


if __name__ == "__main__":
    main()
