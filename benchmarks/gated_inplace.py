"""Does writing the gradients over the inputs make a small gated backward faster? SwiGLU's backward kernel time at
2048 rows, blockfuse's writing fresh outputs against the same launch writing over its inputs, beside the peers'.

    PYTHONPATH=src python3 benchmarks/gated_inplace.py [--shapes MxN,...] [--rounds 5] [--out DIR]

Why: at 2048 rows (tensors of 3-8 MiB) blockfuse's SwiGLU / GeGLU forward + backward runs 0.91-0.95x the faster of
``torch.compile`` and Liger-Kernel on both cards (``results/sweep/2026-12-07-h100-gated-rope-partial/``), the
backward 0.5-0.8 us slower than compile's 5-8 us kernel (``results/launch-rules/27-gated-small-*``), with the same
bytes, tiles and instruction count tried (benchmarks/NOTES.md, "Gated activations and the MLP"). Liger's backward
writes its gradients into its inputs (``in_place``), and compile's kernel marks a buffer it reads as the one it
writes (``in_out_ptr0``). A public op whose caller may still hold gate and up cannot do that, but the gated MLP
(whose pre-activation is its own) already does; this says whether the addresses are the difference.

Variants, each timed as its backward alone (CUDA-graph replays, the L2 flushed before each in body and baseline):
* ``fresh``: ``gated.launch_gated_backward`` into two new buffers (the op as shipped);
* ``in-place``: the same launch with ``dg = gate`` and ``du = up`` (each element read before it is written);
* ``compile``: ``torch.compile`` of the backward's math in fp32 (the reference's), two fresh outputs;
* ``liger``: Liger-Kernel's ``swiglu_backward`` (writes into gate and up), where it is installed.
``--tiles E:W,...`` adds ``tile-E-W``: the fresh launch with the backward's tile of E elements, W a warp
(``gated.TILES.backward`` / ``backward_per_warp``; the default 4096 / 512). ``--flat`` adds ``flat`` (and
``flat-E-W`` a tile): the same kernel launched on one (1, rows x width) row of the contiguous tensors, so each
program's tile is one run of memory with no row index, row mask or row stride (what an elementwise pass over
contiguous tensors can do; the packed form's halves cannot). ``grid-1d`` / ``grid-2d`` (and ``grid-2d-E-W`` a
tile): the fresh launch on a 1-D / 2-D grid whatever the default (``activation.TILES.grid_2d``, on since
results/launch-rules/47-*: no integer division before the first load). ``--forward`` adds the forward's launch
(``fwd`` as shipped, ``fwd-grid-1d``, ``fwd-grid-2d``) beside compile's and Liger's forwards (``fwd-compile``,
``fwd-liger``). ``--sequence`` adds each provider's forward then backward in one replay, the L2 flushed once before
the forward, as the sweep's forward + backward cells run them (the backward then finds gate and up in the L2):
``seq-fresh`` (the op as shipped), ``seq-in-place`` (its backward over gate and up), ``seq-compile``,
``seq-liger``, and with ``--tiles`` ``seq-tile-E-W`` (the backward's tile E:W after the forward as shipped).
In-place variants overwrite their inputs on every replay; the times do not depend on the values.
Before timing, each variant's gradients (a forward's output) are checked against float64 math on the same inputs
(max relative error a tensor, in the JSON). Writes ``gated-inplace.json`` / ``.md`` under ``--out``; ``--device cpu``
(its test, under ``TRITON_INTERPRET=1``) runs the checks and one call's wall time instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

import torch

from blockfuse.ops import activation, gated

SHAPES = [(2048, 768), (2048, 1024), (2048, 1536), (2048, 2048), (8192, 4096)]


def reference(dy: torch.Tensor, g: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(d gate, d up) of ``silu(g) * u`` in the dtype of the arguments' promotion (float64 for the check)."""
    s = torch.sigmoid(g)
    return dy * u * s * (1 + g * (1 - s)), dy * g * s


def _compiled_backward():
    def backward(dy, g, u):
        dg, du = reference(dy.float(), g.float(), u.float())
        return dg.to(dy.dtype), du.to(dy.dtype)

    return torch.compile(backward)


def forward_reference(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return g * torch.sigmoid(g) * u


def _compiled_forward():
    return torch.compile(lambda g, u: forward_reference(g.float(), u.float()).to(g.dtype))


def _liger_forward():
    try:
        from liger_kernel.ops.swiglu import swiglu_forward
    except ImportError:
        return None
    return swiglu_forward


def _liger_backward():
    try:
        from liger_kernel.ops.swiglu import swiglu_backward
    except ImportError:
        return None
    return swiglu_backward


def _with_tiles(call, module, **fields):
    """``call`` with ``module.TILES``' ``fields`` set for its duration (gated's backward tile, activation's grid)."""

    def run(state):
        before = module.TILES
        module.TILES = dataclasses.replace(before, **fields)
        try:
            return call(state)
        finally:
            module.TILES = before

    return run


def _tile(call, elements: int, per_warp: int):
    return _with_tiles(call, gated, backward=elements, backward_per_warp=per_warp)


def _grid(call, grid_2d: bool = True):
    return _with_tiles(call, activation, grid_2d=grid_2d)


def variants(m: int, n: int, device: str, tiles=(), flat: bool = False, forward: bool = False,
             sequence: bool = False) -> dict:
    """label -> (setup: () -> state, call: state -> (dg, du)); setup makes fresh inputs (in-place calls spend them)."""
    gen = torch.Generator(device="cpu").manual_seed(m + n)

    def inputs():
        return [torch.randn(m, n, generator=gen).to(device=device, dtype=torch.bfloat16) for _ in range(3)]

    def fresh(state):
        dy, g, u, dg, du = state
        gated.launch_gated_backward(dy, g, u, dg, du, "silu")
        return dg, du

    def in_place(state):
        dy, g, u = state[:3]
        gated.launch_gated_backward(dy, g, u, g, u, "silu")
        return g, u

    table = {"fresh": (lambda: inputs() + [torch.empty(m, n, device=device, dtype=torch.bfloat16) for _ in range(2)],
                       fresh),
             "in-place": (inputs, in_place)}
    for elements, per_warp in tiles:
        table[f"tile-{elements}-{per_warp}"] = (table["fresh"][0], _tile(fresh, elements, per_warp))
    table["grid-1d"] = (table["fresh"][0], _grid(fresh, False))
    table["grid-2d"] = (table["fresh"][0], _grid(fresh))
    for elements, per_warp in tiles:
        table[f"grid-2d-{elements}-{per_warp}"] = (table["fresh"][0],
                                                   _grid(_tile(fresh, elements, per_warp)))
    if flat:
        def flat_call(state):
            dy, g, u, dg, du = (t.view(1, -1) for t in state)
            gated.launch_gated_backward(dy, g, u, dg, du, "silu")
            return state[3], state[4]

        table["flat"] = (table["fresh"][0], flat_call)
        for elements, per_warp in tiles:
            table[f"flat-{elements}-{per_warp}"] = (table["fresh"][0], _tile(flat_call, elements, per_warp))
    def forward_call(state):  # the forward's launch, output y = silu(g) * u into state[3]
        gated.launch_gated_forward(state[1], state[2], state[3], "silu")
        return (state[3],)

    peers = device == "cuda" and (forward or sequence)  # (the peers' forwards, made once for both)
    compiled_forward, liger_forward = (_compiled_forward(), _liger_forward()) if peers else (None, None)
    if forward:  # (labels "fwd...": state [dy, g, u, y])
        table["fwd"] = (table["fresh"][0], forward_call)
        table["fwd-grid-1d"] = (table["fresh"][0], _grid(forward_call, False))
        table["fwd-grid-2d"] = (table["fresh"][0], _grid(forward_call))
        if device == "cuda":
            table["fwd-compile"] = (inputs, lambda state: (compiled_forward(state[1], state[2]),))
            if liger_forward is not None:
                table["fwd-liger"] = (inputs, lambda state: (liger_forward(state[1], state[2])[2],))
    if sequence:  # (labels "seq-...": state [dy, g, u, y, (dg, du)], the forward into y, then the backward)
        def then(backward):
            def run(state):
                forward_call(state)
                return backward(state)
            return run

        def with_outputs(count):
            return lambda: inputs() + [torch.empty(m, n, device=device, dtype=torch.bfloat16) for _ in range(count)]

        def fresh_after(state):
            return fresh(state[:3] + state[4:])

        table["seq-fresh"] = (with_outputs(3), then(fresh_after))
        table["seq-in-place"] = (with_outputs(1), then(in_place))
        for elements, per_warp in tiles:
            table[f"seq-tile-{elements}-{per_warp}"] = (with_outputs(3), then(_tile(fresh_after, elements, per_warp)))
    if device == "cuda":
        compiled, liger = _compiled_backward(), _liger_backward()
        table["compile"] = (inputs, lambda state: compiled(*state))
        if liger is not None:
            table["liger"] = (inputs, lambda state: liger(state[1], state[2], state[0]))
        if sequence:
            def seq_compile(state):
                compiled_forward(state[1], state[2])
                return compiled(*state)

            table["seq-compile"] = (inputs, seq_compile)
            if liger is not None and liger_forward is not None:
                def seq_liger(state):
                    liger_forward(state[1], state[2])
                    return liger(state[1], state[2], state[0])

                table["seq-liger"] = (inputs, seq_liger)
    return table


def check(setup, call, forward: bool = False) -> float:
    """Largest relative error (norm) of the two gradients (``forward``: the output) against float64 math on the
    same inputs."""
    state = setup()
    dy, g, u = (t.double() for t in state[:3])
    want = (forward_reference(g, u),) if forward else reference(dy, g, u)
    got = call(state)
    return max(float((a.double() - b).norm() / b.norm()) for a, b in zip(got, want))


def measure(shape, rounds: int, device: str, tiles=(), flat: bool = False, forward: bool = False,
            sequence: bool = False) -> dict:
    from blockfuse.bench.timing import l2_flush, time_cuda_graph

    m, n = shape
    table = variants(m, n, device, tiles, flat, forward, sequence)
    row = {"shape": [m, n], "error": {label: check(*entry, forward=label.startswith("fwd"))
                                      for label, entry in table.items()}, "us": {}}
    samples = {label: [] for label in table}
    states = {label: setup() for label, (setup, _) in table.items()}
    flush = l2_flush() if device == "cuda" else (lambda: None)
    for r in range(rounds):
        for label in (list(table) if r % 2 == 0 else reversed(list(table))):
            call, state = table[label][1], states[label]

            def body(call=call, state=state):
                flush()
                call(state)

            if device == "cuda":
                samples[label].append(1e3 * time_cuda_graph(body, flush).median)
            else:
                start = time.perf_counter()
                body()
                samples[label].append(1e6 * (time.perf_counter() - start))
    row["us"] = {label: statistics.median(times) for label, times in samples.items()}
    row["rounds"] = samples
    row["gb"] = 5 * m * n * 2 / 1e9
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=None, help="MxN,... (default: SHAPES)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiles", default="", help="E:W,... backward tiles to time beside the default")
    parser.add_argument("--flat", action="store_true", help="time the launch on one flat row too")
    parser.add_argument("--forward", action="store_true", help="time the forward's launch too (fwd-*)")
    parser.add_argument("--sequence", action="store_true",
                        help="time each provider's forward then backward in one replay too (seq-*)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import triton

    tiles = [tuple(int(v) for v in item.split(":")) for item in args.tiles.split(",") if item]
    shapes = SHAPES if args.shapes is None else [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    card = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    result = {"card": card, "torch": torch.__version__, "triton": triton.__version__, "rounds": args.rounds,
              "rows": [measure(shape, args.rounds, args.device, tiles, args.flat, args.forward, args.sequence)
                       for shape in shapes]}
    labels = list(result["rows"][0]["us"])
    timing = "CUDA-graph kernel time, L2 flushed" if args.device == "cuda" else "one call's wall time (CPU)"
    lines = [f"# SwiGLU's backward: fresh outputs against in place ({card}; torch {torch.__version__}, triton "
             f"{triton.__version__}; bf16, {timing}, median of {args.rounds} alternating rounds)", "",
             "| [rows, width] | " + " | ".join(f"{label} us" for label in labels) + " | fresh / in-place | "
             "fresh / fastest peer | max rel. error |",
             "| --- | " + " | ".join("---" for _ in labels) + " | --- | --- | --- |"]
    for row in result["rows"]:
        us = row["us"]
        peers = [us[label] for label in ("compile", "liger") if label in us]
        peer = f"{us['fresh'] / min(peers):.3f}" if peers else "-"
        lines.append(f"| {row['shape']} | " + " | ".join(f"{us[label]:.2f}" for label in labels)
                     + f" | {us['fresh'] / us['in-place']:.3f} | {peer} | {max(row['error'].values()):.1e} |")
        print(lines[-1], flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gated-inplace.json").write_text(json.dumps(result, indent=1))
        (out / "gated-inplace.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
