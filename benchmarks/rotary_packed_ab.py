"""The packed rotary's kernel time with the attention's v copied in the rotation's launch against by a launch of its
own (``rotary.PACKED_COPY_IN_LAUNCH``; "in-launch" sets ``FLAT_COPY_IN_LAUNCH`` too, so the flat kernel's copy is
timed whatever its default).

    PYTHONPATH=src python3 benchmarks/rotary_packed_ab.py [--rounds 3] [--shapes BxSxHxKVxD,...] [--out DIR]

For each shape ([batch, seq] x heads / kv heads x head_dim: power-of-two head dims take the padded kernel, 72 / 80 /
96 the flat one), ``rotary_packed(heads_first=True)``'s forward and forward + backward as the fused attention calls
them, CUDA-graph replays (kernel time, no host), both settings in alternating rounds of one process; the median of
the rounds. The forward's bytes (qkv read, q, k and v written) over its time, TB/s. Writes
``rotary-packed-ab.json`` / ``.md`` under ``--out``. Without a GPU (``--device cpu``, its test: tiny shapes, under
``TRITON_INTERPRET=1``) each figure is one call's wall time: it checks the tool, not the kernels' speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import blockfuse.ops.rotary as rotary
from blockfuse.bench.timing import time_cuda_graph
from blockfuse.models.eager import rotary_half_tables

SHAPES = [(4, 4096, 32, 32, 72), (4, 4096, 32, 8, 72), (4, 4096, 16, 4, 72), (4, 1024, 32, 32, 80),
          (4, 4096, 16, 4, 80), (4, 2048, 16, 16, 64), (4, 4096, 32, 8, 128), (1, 1024, 32, 8, 96)]
SETTINGS = {"separate": (False, False), "in-launch": (True, True)}  # (PACKED_, FLAT_COPY_IN_LAUNCH)


def _wall_ms(fn, _baseline) -> float:
    """One call's wall time, ms (the CPU's stand-in for time_cuda_graph's median)."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def measure(shape, rounds: int, device: str = "cuda") -> dict:
    b, s, h, kv, d = shape
    torch.manual_seed(0)
    timer = (lambda fn, base: time_cuda_graph(fn, base).median) if device == "cuda" else _wall_ms
    cos, sin = (t.to(device) for t in rotary_half_tables(d, s, 10000.0))
    qkv = torch.randn(b, s, (h + 2 * kv) * d, device=device, dtype=torch.bfloat16, requires_grad=True)
    grads = [torch.randn(b, s, n, d, device=device, dtype=torch.bfloat16).transpose(1, 2) for n in (h, kv, kv)]

    def forward():
        return rotary.rotary_packed(qkv, h, kv, d, cos, sin, heads_first=True)

    def forward_backward():
        qkv.grad = None
        torch.autograd.backward(forward(), grads)

    samples = {label: {"fwd_us": [], "fwd_bwd_us": []} for label in SETTINGS}
    before = rotary.PACKED_COPY_IN_LAUNCH, rotary.FLAT_COPY_IN_LAUNCH
    try:
        for r in range(rounds):
            for label in (SETTINGS if r % 2 == 0 else reversed(SETTINGS)):
                rotary.PACKED_COPY_IN_LAUNCH, rotary.FLAT_COPY_IN_LAUNCH = SETTINGS[label]
                samples[label]["fwd_us"].append(1e3 * timer(forward, lambda: None))
                samples[label]["fwd_bwd_us"].append(1e3 * timer(forward_backward, lambda: None))
    finally:
        rotary.PACKED_COPY_IN_LAUNCH, rotary.FLAT_COPY_IN_LAUNCH = before
    fwd_bytes = 2 * b * s * (h + 2 * kv) * d * 2
    row = {"shape": [b, s, h, kv, d]}
    for label, times in samples.items():
        fwd, both = statistics.median(times["fwd_us"]), statistics.median(times["fwd_bwd_us"])
        row[label] = {"fwd_us": fwd, "fwd_bwd_us": both, "fwd_tbps": fwd_bytes / fwd / 1e6, "rounds": times}
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default=None, help="BxSxHxKVxD,... (default: SHAPES)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import triton

    shapes = SHAPES if args.shapes is None else [tuple(int(v) for v in item.split("x"))
                                                 for item in args.shapes.split(",")]
    card = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    result = {"card": card, "torch": torch.__version__, "triton": triton.__version__, "rounds": args.rounds,
              "rows": []}
    lines = [f"# The packed rotary, v copied in the rotation's launch against apart ({result['card']}; torch "
             f"{torch.__version__}, triton {triton.__version__}; bf16, CUDA-graph kernel time, median of "
             f"{args.rounds} alternating rounds)", "",
             "| [batch, seq] heads/kv head_dim | fwd us separate | fwd us in-launch | fwd x | fwd+bwd us separate | "
             "fwd+bwd us in-launch | fwd+bwd x |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for shape in shapes:
        row = measure(shape, args.rounds, args.device)
        result["rows"].append(row)
        apart, joint = row["separate"], row["in-launch"]
        b, s, h, kv, d = shape
        lines.append(f"| [{b}, {s}] {h}/{kv} {d} | {apart['fwd_us']:.1f} | {joint['fwd_us']:.1f} | "
                     f"{apart['fwd_us'] / joint['fwd_us']:.3f} | {apart['fwd_bwd_us']:.1f} | "
                     f"{joint['fwd_bwd_us']:.1f} | {apart['fwd_bwd_us'] / joint['fwd_bwd_us']:.3f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "rotary-packed-ab.json").write_text(json.dumps(result, indent=1))
        (out / "rotary-packed-ab.md").write_text(text)
    return result


if __name__ == "__main__":
    main()
