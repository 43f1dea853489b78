"""The gated MLP's blocks by the activation's bytes against the fixed counts (or another host-path knob of the fused
block), a block's step without CUDA graphs.

    PYTHONPATH=src python3 benchmarks/mlp_blocks_ab.py PRESET [--knob mlp-blocks|rotary-v-copy] [--shape BxSxD]
        [--providers fused,...] [--rounds 4] [--steps 30] [--out DIR]

``ops/mlp.py`` makes the activation in up to four blocks of rows (forward) and columns / rows (backward), for
memory; each block costs the step launches and GEMM calls, which cost a GPU's host 15-75 us each
(``benchmarks/results/op-path/host-backward-2026-12-07-h100/``). ``BLOCKS.min_block_bytes`` (the NOTE there; off
by default until this has run on a GPU) caps the count at one block per ``BLOCK_BYTES_RULE`` (32 MiB) of the
activation. This times one layer of a preset, its training step (forward + backward, host-inclusive: ``--steps``
back-to-back steps, then a sync) for each provider with the knob at 0 (``fixed``: the counts at any size, the
default) and at the rule (``by-bytes``), in ``--rounds`` alternating rounds of one process (the eager providers once
a round, as the reference), and the peak memory of one step for each. The providers' gradients under both settings
are compared (largest difference relative to the largest value). Writes ``mlp-blocks-PRESET.json`` / ``.md`` under
``--out``.

``--knob rotary-v-copy``: the same for ``ops/rotary.py``'s ``PACKED_COPY_IN_LAUNCH``, the attention's v (and its
gradient) copied in the rotation's launch (``in-launch``, the default) or by a launch of its own (``separate``);
writes ``rotary-v-copy-PRESET.*``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import time
from pathlib import Path

import torch

import blockfuse.ops.mlp as mlp
import blockfuse.ops.rotary as rotary
from blockfuse.models import build_model, convert
from blockfuse.models.build import width_overrides

SETTINGS = {"fixed": 0, "by-bytes": mlp.BLOCK_BYTES_RULE}
# the knobs: their settings, the reference first (its label -> the value)
KNOBS = {"mlp-blocks": SETTINGS, "rotary-v-copy": {"separate": False, "in-launch": True}}


@contextlib.contextmanager
def blocks_setting(min_block_bytes: int):
    before = mlp.BLOCKS
    mlp.BLOCKS = dataclasses.replace(before, min_block_bytes=min_block_bytes)
    try:
        yield
    finally:
        mlp.BLOCKS = before


@contextlib.contextmanager
def knob_setting(knob: str, label: str):
    """``knob`` set as ``label`` names it inside the block (the unfused providers' label "-": as it is)."""
    if label == "-":
        yield
    elif knob == "mlp-blocks":
        with blocks_setting(SETTINGS[label]):
            yield
    else:
        before = rotary.PACKED_COPY_IN_LAUNCH
        rotary.PACKED_COPY_IN_LAUNCH = KNOBS[knob][label]
        try:
            yield
        finally:
            rotary.PACKED_COPY_IN_LAUNCH = before


def _modules(eager, providers):
    modules = {}
    for provider in providers:
        base = eager if provider in ("eager", "compile:default") else convert(eager, "fused")
        modules[provider] = torch.compile(base) if provider.endswith("compile:default") else base
    return modules


def _step(module, x, dy, parameters):
    module(x).backward(dy)
    x.grad = None
    for p in parameters:
        p.grad = None


def _timed(module, x, dy, steps, sync) -> float:
    parameters = list(module.parameters())
    for _ in range(3):
        _step(module, x, dy, parameters)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        _step(module, x, dy, parameters)
    sync()
    return (time.perf_counter() - start) / steps * 1e3


def _gradients(module, x, dy) -> list[torch.Tensor]:
    module(x).backward(dy)
    grads = [x.grad.detach().clone(), *(p.grad.detach().clone() for p in module.parameters())]
    x.grad = None
    for p in module.parameters():
        p.grad = None
    return grads


def _peak_mib(module, x, dy, cuda: bool) -> float | None:
    if not cuda:
        return None
    parameters = list(module.parameters())
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    _step(module, x, dy, parameters)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset")
    parser.add_argument("--knob", choices=sorted(KNOBS), default="mlp-blocks")
    parser.add_argument("--shape", default=None,
                        help="batch x seq x d_model (default: the preset's; another width resizes the preset)")
    parser.add_argument("--providers", default="eager,compile:default,fused,fused+compile:default")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dtype = torch.bfloat16 if cuda else torch.float32
    shape = tuple(int(v) for v in args.shape.replace(",", "x").split("x")) if args.shape else None
    overrides = width_overrides(args.preset, shape[-1]) if shape else {}
    eager, inputs = build_model(args.preset, shape, dtype, args.device, layers=1, **overrides)
    x = inputs[0].detach().requires_grad_()
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(x.device, x.dtype)
    providers = args.providers.split(",")
    modules = _modules(eager, providers)
    fused = [p for p in providers if p.startswith("fused")]
    settings = KNOBS[args.knob]
    reference, candidate = settings
    times = {(p, s): [] for p in providers for s in (settings if p in fused else ("-",))}
    for r in range(args.rounds):
        order = list(times) if r % 2 == 0 else list(reversed(times))
        for provider, setting in order:
            with knob_setting(args.knob, setting):
                times[(provider, setting)].append(_timed(modules[provider], x, dy, args.steps, sync))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    rows = []
    for (provider, setting), samples in times.items():
        with knob_setting(args.knob, setting):
            peak = _peak_mib(modules[provider], x, dy, cuda)
        rows.append({"provider": provider, "setting": setting, "ms": statistics.median(samples), "rounds": samples,
                     "peak_mib": peak})
    differences = {}
    for provider in fused:
        grads = {}
        for setting in settings:
            with knob_setting(args.knob, setting):
                grads[setting] = _gradients(modules[provider], x, dy)
        scale = max(float(g.abs().max()) for g in grads[reference])
        differences[provider] = max(float((a.float() - b.float()).abs().max())
                                    for a, b in zip(grads[reference], grads[candidate])) / scale
    config = eager.blocks[0].config
    tokens = x.shape[0] * x.shape[1]
    activation_mib = tokens * config.ffn_hidden * x.element_size() / 2**20
    counts = {}
    for setting, value in SETTINGS.items():  # (the blocks the forward's rows come in, with the minimum rows)
        with blocks_setting(value):
            blocks = mlp.block_count(mlp.BLOCKS.forward, tokens, config.ffn_hidden, x.element_size())
            counts[setting] = len(mlp.column_blocks(tokens, blocks, mlp.BLOCKS.forward_min_rows))
    card = torch.cuda.get_device_name() if cuda else "cpu"
    import triton

    result = {"preset": args.preset, "knob": args.knob, "shape": list(x.shape), "dtype": str(dtype), "card": card,
              "torch": torch.__version__, "triton": triton.__version__, "steps": args.steps, "rounds": args.rounds,
              "activation_mib": activation_mib, "blocks": counts, "rows": rows,
              "gradient_difference": differences}
    eager_ms = next((row["ms"] for row in rows if row["provider"] == "eager"), None)
    if args.knob == "mlp-blocks":
        what = "the MLP's blocks, fixed against by bytes"
        about = (f"Activation (tokens x hidden) {activation_mib:.0f} MiB: {counts['fixed']} blocks fixed, "
                 f"{counts['by-bytes']} by bytes (<= 1 per {SETTINGS['by-bytes'] >> 20} MiB).")
    else:
        what = "the attention's v copied by a launch of its own against in the rotation's"
        about = "rotary.PACKED_COPY_IN_LAUNCH False (separate) and True (in-launch)."
    lines = [f"# {args.preset} {list(x.shape)} {dtype}: {what} ({card}; torch {torch.__version__}, triton "
             f"{triton.__version__})", "",
             f"{about} A training step without CUDA graphs, ms (median of {args.rounds} alternating rounds of "
             f"{args.steps} back-to-back steps, host-inclusive); peak MiB of one step over what was allocated before "
             "it.", "",
             "| provider | setting | ms | x eager | rounds | peak MiB |", "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        ratio = f"{eager_ms / row['ms']:.2f}x" if eager_ms else ""
        rounds = " / ".join(f"{v:.3f}" for v in row["rounds"])
        peak = "" if row["peak_mib"] is None else f"{row['peak_mib']:.0f}"
        lines.append(f"| {row['provider']} | {row['setting']} | {row['ms']:.3f} | {ratio} | {rounds} | {peak} |")
    lines += ["", f"Gradients, {reference} against {candidate} (largest difference / largest value): "
              + ", ".join(f"{p} {d:.2e}" for p, d in differences.items())]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.knob}-{args.preset}.json").write_text(json.dumps(result, indent=1))
        (out / f"{args.knob}-{args.preset}.md").write_text(text)
    return result


if __name__ == "__main__":
    main()
