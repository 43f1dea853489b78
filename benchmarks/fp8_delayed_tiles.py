"""Tile sweep for recipe "delayed"'s one-pass kernels (issue 18), against the tensorwise passes they replace.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/fp8_delayed_tiles.py [--ablate] [--tiles "64,64,4;..."]
    [--out FILE.json]

Times, with CUDA-graph replays and the L2 flushed before each call (the kernels' own time):
- ``act-bwd``: the activation's backward written straight into both e5m2 layouts with the bias column sums
  (``fp8_act._act_backward_delayed``), against the tensorwise path (``_act_backward`` in x's dtype with its amax,
  then ``_fp8_quantize``'s cast of both layouts with that amax);
- ``cast``: the one-pass delayed cast of x (both layouts, column sums: ``fp8._fp8_quantize_delayed``) against the
  tensorwise two-pass cast (``_fp8_quantize``: amax pass with the sums, then the cast);
at each (BLOCK_M, BLOCK_N, num_warps) of ``TILES`` (set in ``fp8.TILES.tile``, ``fp8.TILES.sum_tile`` and
``fp8_act.TILES.bwd_delayed`` alike, which the launchers read at each call: :func:`tile_of`), with the bytes each must
move and the GB/s that makes, beside an eager copy's. Errors: each variant's outputs are
compared bit for bit with the first tile's (a tile changes no value).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json

import torch

from blockfuse.analyze.ceilings import copy_bandwidth
from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import fp8, fp8_act

TILES = [(64, 128, 8), (64, 128, 4), (32, 128, 4), (32, 128, 8), (64, 64, 4), (32, 64, 4), (16, 128, 4),
         (128, 64, 8), (128, 128, 8), (32, 256, 8)]
ACT_SHAPES = [("gelu_tanh", 16384, 4096), ("swiglu", 16384, 4096), ("gelu_tanh", 8192, 4304)]
CAST_SHAPES = [(16384, 2048), (16384, 4096), (8192, 1152)]
E5M2, E4M3 = torch.float8_e5m2, torch.float8_e4m3fn


def own_tiles() -> list:
    """The compiled tile of each timed launcher as shipped (fp8.TILES.tile, fp8.TILES.sum_tile,
    fp8_act.TILES.bwd_delayed)."""
    return [fp8.TILES.tile, fp8.TILES.sum_tile, fp8_act.TILES.bwd_delayed]


@contextlib.contextmanager
def tile_of(tile):
    """Every launcher timed here on ``tile`` (None: each on its own table's), restored after."""
    saved, saved_act = fp8.TILES, fp8_act.TILES
    try:
        if tile is not None:
            fp8.TILES = dataclasses.replace(saved, tile=tile, sum_tile=tile)
            fp8_act.TILES = dataclasses.replace(saved_act, bwd_delayed=tile)
        yield
    finally:
        fp8.TILES = saved
        fp8_act.TILES = saved_act


def same_outputs(outs, reference):
    """None for the first tile; else whether the FP8 outputs and scales equal the first tile's bit for bit (the
    column sums, the last output, are summed in another order by another tile)."""
    if reference is None:
        return None
    return all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) if a.dtype in (E5M2, E4M3) else torch.equal(a, b)
               for a, b in zip(outs[:-1], reference[:-1]))


def timed(fn, flush) -> float:
    return time_cuda_graph(lambda: (flush(), fn()), flush).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--ablate", action="store_true", help="only the cast's parts: each output alone, with and "
                        "without the column sums, delayed and with a given amax, at the launchers' own tiles and at "
                        "each of --tiles")
    parser.add_argument("--tiles", default=None, help="BLOCK_M,BLOCK_N,WARPS;... instead of TILES")
    args = parser.parse_args()
    if args.tiles:
        TILES[:] = [tuple(int(v) for v in tile.split(",")) for tile in args.tiles.split(";")]
    if args.ablate:
        return ablate(args.out)
    flush = l2_flush()
    gen = torch.Generator(device="cuda").manual_seed(0)
    records = []
    copy = copy_bandwidth()["gbps"]
    print(f"{torch.cuda.get_device_name()}: eager copy {copy:.0f} GB/s; the launchers' own tiles: "
          f"{', '.join(str(tile) for tile in own_tiles())}")
    for activation, m, hidden in ACT_SHAPES:
        gated = activation == "swiglu"
        width = 2 * hidden if gated else hidden
        dy = torch.randn(m, hidden, device="cuda", generator=gen).bfloat16()
        pre = torch.randn(m, width, device="cuda", generator=gen).bfloat16()
        history = torch.rand(16, device="cuda", generator=gen) * 4
        amax = torch.zeros(1, device="cuda")
        mp = fp8.round_up(m, fp8.GEMM_MULTIPLE)
        moved = (dy.numel() + pre.numel()) * 2 + 2 * m * width  # read dy and pre; write both e5m2 layouts

        def tensorwise():
            dpre, a, _ = fp8_act._act_backward(dy, pre, activation, torch.bfloat16)
            return fp8._fp8_quantize(dpre, E5M2, False, True, True, fp8.GEMM_MULTIPLE, None, None, a)

        ms = timed(tensorwise, flush)
        print(f"act-bwd {activation} {m}x{hidden}: tensorwise {ms * 1e3:.1f} us")
        records.append(dict(kind="act-bwd", activation=activation, m=m, hidden=hidden, variant="tensorwise",
                            ms=ms, gbps=moved / ms / 1e6))
        reference = None
        for tile in TILES:

            def delayed():
                return fp8_act._act_backward_delayed(dy, pre, activation, history, amax, True, True,
                                                     fp8.GEMM_MULTIPLE, torch.bfloat16)

            try:
                history.fill_(3.0)
                with tile_of(tile):
                    outs = fp8_act._act_backward_delayed(dy, pre, activation, history.clone(), amax.zero_(), True,
                                                         True, fp8.GEMM_MULTIPLE, torch.bfloat16)
                    amax.zero_()
                    same = same_outputs(outs, reference)
                    reference = reference or [o.clone() for o in outs]
                    ms = timed(delayed, flush)
            except Exception as error:  # a tile the card cannot run (shared memory): recorded, not fatal
                print(f"  {tile}: {type(error).__name__}: {str(error)[:120]}")
                records.append(dict(kind="act-bwd", activation=activation, m=m, hidden=hidden, variant=str(tile),
                                    error=str(error)[:300]))
                continue
            print(f"  {tile}: {ms * 1e3:.1f} us, {moved / ms / 1e6:.0f} GB/s ({moved / ms / 1e6 / copy:.2f} of "
                  f"copy), same as the first tile: {same}")
            records.append(dict(kind="act-bwd", activation=activation, m=m, hidden=hidden, variant=str(tile),
                                ms=ms, gbps=moved / ms / 1e6, same_as_first_tile=same))
    for m, n in CAST_SHAPES:
        x = torch.randn(m, n, device="cuda", generator=gen).bfloat16()
        history = torch.full((16,), 3.0, device="cuda")
        amax = torch.zeros(1, device="cuda")
        moved = m * n * 2 + 2 * m * n

        def tensorwise():
            return fp8._fp8_quantize(x, E4M3, False, True, True, fp8.GEMM_MULTIPLE, None, torch.bfloat16)

        ms = timed(tensorwise, flush)
        print(f"cast {m}x{n}: tensorwise (two passes) {ms * 1e3:.1f} us")
        records.append(dict(kind="cast", m=m, n=n, variant="tensorwise", ms=ms, gbps=moved / ms / 1e6))
        reference = None
        for tile in TILES:
            try:
                history.fill_(3.0)  # the timed calls roll x's amax in: every tile's check from one state
                with tile_of(tile):
                    outs = fp8._fp8_quantize_delayed(x, E4M3, True, True, fp8.GEMM_MULTIPLE, history.clone(),
                                                     amax.zero_(), torch.bfloat16)
                    amax.zero_()
                    same = same_outputs(outs, reference)
                    reference = reference or [o.clone() for o in outs]
                    ms = timed(lambda: fp8._fp8_quantize_delayed(x, E4M3, True, True, fp8.GEMM_MULTIPLE, history,
                                                                 amax, torch.bfloat16), flush)
            except Exception as error:
                print(f"  {tile}: {type(error).__name__}: {str(error)[:120]}")
                records.append(dict(kind="cast", m=m, n=n, variant=str(tile), error=str(error)[:300]))
                continue
            print(f"  {tile}: {ms * 1e3:.1f} us, {moved / ms / 1e6:.0f} GB/s ({moved / ms / 1e6 / copy:.2f} of "
                  f"copy), same as the first tile: {same}")
            records.append(dict(kind="cast", m=m, n=n, variant=str(tile), ms=ms, gbps=moved / ms / 1e6,
                                same_as_first_tile=same))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(dict(card=torch.cuda.get_device_name(), torch=torch.__version__,
                           triton=__import__("triton").__version__, copy_gbps=copy, records=records), handle,
                      indent=1)


def ablate(out) -> None:
    """The delayed cast's cost by part: rows / transposed / both, column sums or not, against the tensorwise
    cast kernel alone (amax given: no amax pass) with the same outputs; at the launchers' own tiles (tile None:
    the delayed cast with sums then on ``fp8.TILES.sum_tile``, the others on ``fp8.TILES.tile``), then every one at
    each of
    ``TILES``."""
    flush = l2_flush()
    gen = torch.Generator(device="cuda").manual_seed(0)
    copy = copy_bandwidth()["gbps"]
    records = []
    for m, n in [(16384, 4096), (16384, 2048)]:
        x = torch.randn(m, n, device="cuda", generator=gen).bfloat16()
        history = torch.full((16,), 3.0, device="cuda")
        amax = torch.zeros(1, device="cuda")
        given = x.abs().amax().float().reshape(1)
        for tile, rows, transposed in itertools.product([None, *TILES], (True, False), (False, True)):
            if not (rows or transposed):
                continue
            moved = m * n * 2 + m * n * (rows + transposed)
            cases = [("given-amax", lambda: fp8._fp8_quantize(x, E4M3, False, rows, transposed, fp8.GEMM_MULTIPLE,
                                                               None, None, given))]
            for sums in (None, torch.bfloat16):
                cases.append((f"delayed{'+sums' if sums else ''}",
                              lambda sums=sums: fp8._fp8_quantize_delayed(x, E4M3, rows, transposed,
                                                                          fp8.GEMM_MULTIPLE, history, amax, sums)))
            for name, fn in cases:
                with tile_of(tile):
                    ms = timed(fn, flush)
                print(f"{m}x{n} {tile or 'own'} rows={rows} transposed={transposed} {name}: {ms * 1e3:.1f} us, "
                      f"{moved / ms / 1e6 / copy:.2f} of copy")
                records.append(dict(m=m, n=n, tile=str(tile or "own"), rows=rows, transposed=transposed,
                                    variant=name, ms=ms, fraction_of_copy=moved / ms / 1e6 / copy))
    if out:
        with open(out, "w") as handle:
            json.dump(dict(card=torch.cuda.get_device_name(), torch=torch.__version__, copy_gbps=copy,
                           records=records), handle, indent=1)


if __name__ == "__main__":
    main()
