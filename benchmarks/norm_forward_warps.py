"""The norm forward's rows a program and warps, against the launch rule, over the sweep's widths and row counts.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/norm_forward_warps.py [--out DIR] [--widths 768,1024,...]
    [--rows 2048,8192,32768] [--forms rms,ln,ln-pre,ln-post,rms-pre(,ln-gelu)] [--jobs 8] [--no-tiles]
    [--setting LABEL:NAME=V,NAME=V ...] [--peers]

Issue 22's sweep left the forwards 1-12% behind ``torch.compile`` at many cells (`benchmarks/results/sweep/`), and
Inductor's heuristics tile a row differently from the rule: one row a program always, one warp a row up to 1024
lanes, 8 warps from 2048 (``_persistent_reduction_configs`` in ``torch/_inductor/runtime/triton_heuristics.py``).
This times, for each form, row count and width, the forward launcher (inference: no statistics written, as the
sweep's forward) on the rule's tile (``norm.forward_rule`` and ``norm.rows_for_count``) and on the same row pieces
with other rows a program and warps: one row a program on 1-16 warps, two and four rows a program where a row has
at most 2048 lanes (``--no-tiles``: not), and the rule's tile with ops/norm.py's knobs (norm.tuned) set as each
``--setting`` says (the tile the rule gives under them, timed under them: a rule or kernel knob A/B'd in one
process). Each tile's ``y`` is checked against the rule's (a launch that failed would differ). CUDA-graph
replays with the L2 flushed before each call; the fraction is of a same-size device copy timed in the same process
(do_bench, as the sweep). ``--jobs`` processes compile every tile first (Triton's on-disk cache), so the timing
loop compiles nothing. ``--peers``: each cell's forward of ``torch.compile`` and Liger-Kernel too (the op benchmark's
runner, as the sweep times them: its op of the form, CUDA-graph replays), so that a tile or setting is judged against
the faster peer in the same process (their compiles warmed first in ``--jobs`` processes). Writes forward-warps.json
and forward-warps.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import multiprocessing
import os
import sys
import time

import torch

from blockfuse.bench import runner
from blockfuse.bench.runner import environment
from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import norm_tiles  # noqa: E402 (benchmarks/ is no package)
from norm_knobs import has_knob, rule_constants  # noqa: E402

WIDTHS = (768, 1024, 1152, 1536, 2048, 2560, 3072, 4096, 4304, 5120, 6144, 8192)
ROWS = (2048, 8192, 32768)
FORMS = {"rms": (True, norm.NONE), "ln": (False, norm.NONE), "ln-pre": (False, norm.PRE),
         "ln-post": (False, norm.POST), "rms-pre": (True, norm.PRE), "ln-gelu": (False, norm.NONE)}
# The forms with an activation after the norm (LayerNorm + GELU, tanh form; not in the default --forms).
ACTIVATIONS = {"ln-gelu": norm.GELU_CODES["tanh"]}
# The op benchmark of each form (``--peers``).
FORM_OPS = {"rms": "rms_norm", "ln": "layer_norm", "ln-pre": "add_layer_norm", "ln-post": "layer_norm_post",
            "rms-pre": "add_rms_norm", "ln-gelu": "layer_norm_gelu"}
# A thread's elements of a row (16-bit): at least one 16-byte vector, at most what a tile of the rule holds.
MIN_PER_THREAD, MAX_PER_THREAD = 8, 64


def rule_tile(n: int, m: int, form: str) -> norm.Tile:
    """The forward's tile for ``m`` rows of ``n`` in ``form``, as the launcher takes it on this card."""
    is_rms, mode = FORMS[form]
    return norm.rows_for_count(norm.forward_rule(n, is_rms, mode != norm.NONE), m, torch.cuda.get_device_properties(
        0).multi_processor_count)


def parse_setting(text: str) -> tuple[str, dict]:
    """'LABEL:NAME=V,NAME=V' -> (LABEL, {NAME: V}) (``norm_tiles.parse_setting``), every NAME one of ops/norm.py's."""
    label, values = norm_tiles.parse_setting(text)
    missing = [name for name in values if not has_knob(name)]
    if missing:
        raise SystemExit(f"--setting {label}: ops/norm.py has no {missing}")
    return label, values


def variants(n: int, m: int, form: str, settings=(), tiles: bool = True) -> dict[str, tuple[norm.Tile, dict]]:
    """label -> (tile, knobs): the rule's; then one row a program on each warp count a row's lanes
    allow, and 2 / 4 rows a program for rows of at most 2048 lanes (not for rows in pieces: those are one row a
    program), unless not ``tiles``; then the rule's tile under each of ``settings`` ((label, knobs) pairs)."""
    rule = rule_tile(n, m, form)
    out = {"rule": (rule, {})}
    for label, values in settings:
        with rule_constants(values):
            out[label] = (rule_tile(n, m, form), values)
    if not tiles:
        return out
    known = {rule}
    lanes = rule.block_n + (rule.block_t if rule.tail else 0)
    for rows in (1, 2, 4):
        if rows > 1 and (rule.tail or lanes > 2048 or rule.num_chunks != 1):
            continue
        for warps in (1, 2, 4, 8, 16):
            per_thread = rows * lanes / (32 * warps)
            if not MIN_PER_THREAD <= per_thread <= MAX_PER_THREAD:
                continue
            tile = rule._replace(block_m=rows, num_warps=warps)
            if tile not in known:
                known.add(tile)
                out[f"m{rows}w{warps}"] = (tile, {})
    return out


def _inputs(m: int, n: int, form: str):
    is_rms, mode = FORMS[form]
    gen = torch.Generator(device="cuda").manual_seed(m * 131 + n)
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    r = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen) if mode != norm.NONE else None
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = None if is_rms else torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
    return x, r, w, b


def _forward(tile: norm.Tile, x, r, w, b, form: str):
    """The forward launcher on ``tile`` (norm._forward_tile replaced for the call), inference: no statistics."""
    is_rms, mode = FORMS[form]
    saved = norm._forward_tile
    norm._forward_tile = lambda _rule, _m, _device: tile
    try:
        return norm._norm_fwd(x, w, b, r, None, 1e-5, mode, 0.0, is_rms, False, ACTIVATIONS.get(form, 0), False)[0]
    finally:
        norm._forward_tile = saved


def _cells(widths, rows, forms):
    return list(itertools.product(forms, rows, widths))


def _compile_some(cells, settings, tiles) -> int:
    """Worker: runs every tile of ``cells`` once (Triton compiles it into its on-disk cache)."""
    count = 0
    for form, m, n in cells:
        x, r, w, b = _inputs(m, n, form)
        for tile, values in variants(n, m, form, settings, tiles).values():
            with rule_constants(values):
                _forward(tile, x, r, w, b, form)
            count += 1
        torch.cuda.synchronize()
    return count


def warm(cells, jobs: int, settings, tiles) -> float:
    start = time.perf_counter()
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            pool.starmap(_compile_some, [(cells[i::jobs], settings, tiles) for i in range(jobs)])
    return time.perf_counter() - start


def copy_ms(nbytes: int) -> float:
    from triton.testing import do_bench

    src = torch.empty(nbytes // 2, device="cuda", dtype=torch.bfloat16).normal_()
    dst = torch.empty_like(src)
    return do_bench(lambda: dst.copy_(src), warmup=10, rep=50, return_mode="median")


def measure(form: str, m: int, n: int, settings=(), tiles: bool = True) -> dict:
    is_rms, mode = FORMS[form]
    x, r, w, b = _inputs(m, n, form)
    tensors = 2 + (2 if mode == norm.PRE else 1 if mode == norm.POST else 0)  # x, y (+ residual, s)
    nbytes = tensors * x.numel() * 2
    copy = copy_ms(nbytes // 2)  # a copy of half the bytes reads and writes them all
    flush = l2_flush()
    every = variants(n, m, form, settings, tiles)
    reference = _forward(every["rule"][0], x, r, w, b, form).float()
    record = dict(form=form, rows=m, width=n, copy_ms=copy, tiles={})
    for label, (tile, values) in every.items():
        with rule_constants(values):
            y = _forward(tile, x, r, w, b, form).float()
            diff = ((y - reference).abs().max() / reference.abs().max()).item()

            def body(tile=tile):
                flush()
                _forward(tile, x, r, w, b, form)

            ms = time_cuda_graph(body, flush, reps=10, samples=7).median
        record["tiles"][label] = dict(tile=tile._asdict(), constants=values, ms=ms, fraction=copy / ms,
                                      max_rel_diff=diff)
    best = min(record["tiles"], key=lambda k: record["tiles"][k]["ms"])
    record["best"] = best
    record["rule_over_best"] = record["tiles"]["rule"]["ms"] / record["tiles"][best]["ms"]
    return record


def peer_settings(device: str = "cuda", dtype: str = "bf16") -> runner.Settings:
    """The runner's settings for the peers' forward (the shape set per cell)."""
    return runner.Settings(dtype=dtype, modes=("fwd",), providers=("compile", "liger"), shapes=None, quick=False,
                           device=torch.device(device))


def peers_ms(form: str, m: int, n: int, settings: runner.Settings) -> dict[str, float]:
    """provider -> ms of the peers' forward at [m, n] (the providers the form's op declares and that ran)."""
    bench = next(b for b in runner.declared_ops() if b.name == FORM_OPS[form])
    records = runner.run([bench], dataclasses.replace(settings, shapes=((m, n),)), None, show_progress=False)
    return {r["provider"]: r["ms"] for r in records if r.get("ms") and not r.get("error")}


def add_peers(record: dict, peers: dict[str, float]) -> None:
    """``record`` gains the peers' ms and, against the faster of them, each tile's ratio (above 1: faster)."""
    record["peers"] = peers
    if peers:
        fastest = min(peers.values())
        for tile in record["tiles"].values():
            tile["vs_peer"] = fastest / tile["ms"]


def _tile_text(tile: dict) -> str:
    lanes = tile["block_n"] + (tile["block_t"] if tile["tail"] else 0)
    return f"{tile['block_m']}x{lanes}/{tile['num_warps']}w"


def markdown(meta: dict, records: list[dict]) -> str:
    lines = [
        "# The norm forward: the rule's tile against other rows a program and warps",
        "",
        f"- card: **{meta['card']}**; torch {meta['torch']}, triton {meta['triton']}; bf16; "
        f"commit {meta['commit']}; {meta['date']}",
        f"- command: `{meta['command']}`",
        "- each cell: the forward launcher (inference) on each tile, CUDA-graph replays with the L2 flushed; "
        "fraction of a same-size device copy timed in the same process; `best` the fastest tile, "
        "`rule / best` the rule's time over it (1.00: the rule's tile is the fastest). Tiles: rows a program x "
        "lanes a row / warps. With `--peers`: in brackets, the faster peer's time over the tile's (above 1: the "
        "tile is faster), then the peers' own times.",
        "",
    ]
    for form in dict.fromkeys(r["form"] for r in records):
        lines += [f"## {form}", "", "| rows x width | rule | rule's fraction | best | best's fraction | rule / best |"
                  " every tile (us) |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in (r for r in records if r["form"] == form):
            rule, best = r["tiles"]["rule"], r["tiles"][r["best"]]
            every = ", ".join(f"{k} {v['ms'] * 1000:.1f}us" + (f" ({v['vs_peer']:.2f}x)" if "vs_peer" in v else "")
                              for k, v in r["tiles"].items())
            if r.get("peers"):
                every += "; " + ", ".join(f"{k} {ms * 1000:.1f}us" for k, ms in r["peers"].items())
            lines.append(f"| {r['rows']} x {r['width']} | {_tile_text(rule['tile'])} | {rule['fraction']:.2f} | "
                         f"{r['best']} {_tile_text(best['tile'])} | {best['fraction']:.2f} | "
                         f"{r['rule_over_best']:.2f} | {every} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="forward-warps")
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument("--rows", default=",".join(map(str, ROWS)))
    ap.add_argument("--forms", default=",".join(name for name in FORMS if name not in ACTIVATIONS))
    ap.add_argument("--jobs", type=int, default=8, help="processes compiling the tiles first (1: none)")
    ap.add_argument("--no-tiles", action="store_true", help="the rule's tile and the settings only")
    ap.add_argument("--setting", action="append", default=[], metavar="LABEL:NAME=V,NAME=V",
                    help="the rule's tile with these ops/norm.py knobs (repeatable)")
    ap.add_argument("--peers", action="store_true", help="time torch.compile's and Liger's forward of each cell too")
    args = ap.parse_args()
    settings = [parse_setting(text) for text in args.setting]
    tiles = not args.no_tiles
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    widths = [int(v) for v in args.widths.split(",")]
    rows = [int(v) for v in args.rows.split(",")]
    forms = args.forms.split(",")
    cells = _cells(widths, rows, forms)
    print(f"{len(cells)} cells; compiling in {args.jobs} processes", flush=True)
    print(f"warm-up {warm(cells, args.jobs, settings, tiles):.1f} s", flush=True)
    if args.peers:
        report = runner.warm_up([(FORM_OPS[form], (m, n)) for form, m, n in cells], peer_settings(), args.jobs,
                                show_progress=False)
        print(f"peers' warm-up: {report['warmed']} of {report['cells']} cells, {len(report['failures'])} failures, "
              f"{report['elapsed_s']:.1f} s", flush=True)
    records = []
    try:
        from tqdm import tqdm
        progress = tqdm(cells, desc="cells", file=sys.stdout, mininterval=5)
    except ImportError:
        progress = cells
    for form, m, n in progress:
        record = measure(form, m, n, settings, tiles)
        if args.peers:
            add_peers(record, peers_ms(form, m, n, peer_settings()))
        records.append(record)
        rule, best = record["tiles"]["rule"], record["tiles"][record["best"]]
        versus = (f", vs the faster peer: rule {rule['vs_peer']:.2f}x, best {best['vs_peer']:.2f}x"
                  if "vs_peer" in rule else "")
        print(f"{form:8s} {m:6d} x {n:5d}: rule {_tile_text(rule['tile'])} {rule['fraction']:.2f}, best "
              f"{record['best']} {_tile_text(best['tile'])} {best['fraction']:.2f}, rule/best "
              f"{record['rule_over_best']:.2f}{versus}", flush=True)
    env = environment(torch.device("cuda"))
    meta = dict(card=env["card"], torch=env["torch"], triton=env["triton"],
                commit=f"{env['git_commit']} (source digest {env['source_digest']})", date=env["date"],
                command="python3 " + " ".join(sys.argv))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "forward-warps.json"), "w") as f:
        json.dump(dict(meta=meta, cells=records), f, indent=1)
    with open(os.path.join(args.out, "forward-warps.md"), "w") as f:
        f.write(markdown(meta, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
