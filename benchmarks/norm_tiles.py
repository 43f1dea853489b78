"""Tile / warp / program-count sweep for the norm kernels, and a CUDA correctness check.

Run on the GPU:  PYTHONPATH=src python3 benchmarks/norm_tiles.py [--out DIR] [--shapes 8192x4304,...] [--forms ln,rms]
    [--fwd "TILES;EPW"] [--bwd "TILES;EPW;PROGRAMS_PER_SM;STAGES"] [--no-check] [--no-wide-cap]
    [--chunked "CHUNK_WIDTHS;CHUNK_TILE_ELEMENTS;EPW"] [--chunked-passes fwd,bwd] [--bwd-knob NAME=V1,V2 ...]
    [--fwd-knob NAME=V1,V2 ...] [--bwd-setting LABEL:NAME=V,NAME=V ...] [--fwd-setting ...] [--setting-rounds 2]

``--bwd-knob`` / ``--fwd-knob`` vary one of ops/norm.py's knobs (its tuning table, ops/norm_tuning.py, by upper-case
name) on the rule's tile; ``--bwd-setting`` sets several together (a rule changed in more than one knob), each setting
timed in turn, ``--setting-rounds`` times over, so that the settings alternate in one process.

``--chunked`` times every row read in chunks (the kernels' wide-row path, forced at any width: each chunk width
alone as CHUNK_CHOICES, CHUNK_TILE_ELEMENTS lanes a program), forward and backward, against the rule's tile.
Times the launchers directly (no autograd) with CUDA-graph replays and the L2 flushed
before each call, so the numbers are the kernels' own; the op benchmark
(`blockfuse bench ops`) measures what a user sees.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import itertools
import json
import os
import sys

import torch
import triton

from blockfuse.bench.timing import l2_flush, time_cuda_graph
from blockfuse.ops import norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _sweep  # noqa: E402 (benchmarks/ is no package)
from norm_knobs import has_knob, rule_constants  # noqa: E402

SHAPES = [(16384, 4096), (8192, 1024), (2048, 1024), (4096, 8192)]


def eager_copy_bandwidth() -> float:
    """GB/s of a 1 GiB device-to-device copy, timed eagerly (a copy inside a CUDA graph may
    run on a copy engine, slower than the kernel an eager copy launches)."""
    from triton.testing import do_bench

    src = torch.randn(2**29, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    return 2 * src.numel() * src.element_size() / ms / 1e6


def relerr(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


# Widths of every tile form: a tail (72, 760, 1152, 4304), one power-of-two tile (4096), rows the backward takes
# in chunks (11008, 14336) and rows both passes take in chunks (20000).
CHECK_SHAPES = [(1, 72), (199, 760), (67, 1152), (3, 4304), (257, 4096), (9, 11008), (3, 14336), (5, 20000)]


def check_correctness(shapes=CHECK_SHAPES) -> list[str]:
    """Every form and dtype at ``shapes`` against float64: the failures (error above twice PyTorch's own)."""
    import blockfuse

    failures = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    done = None
    for (m, n), dtype, is_rms, mode in itertools.product(
            shapes,
            [torch.bfloat16, torch.float16, torch.float32], [False, True], [None, "pre", "post"]):
        if done != (m, n):
            print(f"checking {m}x{n} ({len(failures)} failures so far)", flush=True)
            done = (m, n)
        x = (torch.randn(m, n, device="cuda", generator=gen) * 2 + 0.5).to(dtype)
        w = torch.randn(n, device="cuda", generator=gen).to(dtype)
        b = None if is_rms else torch.randn(n, device="cuda", generator=gen).to(dtype)
        r = torch.randn(m, n, device="cuda", generator=gen).to(dtype) if mode else None
        kw = dict(residual=r, residual_mode=mode or "pre")
        leaves = [t.requires_grad_() for t in (x, w, b, r) if t is not None]
        out = blockfuse.rms_norm(x, w, **kw) if is_rms else blockfuse.layer_norm(x, w, b, **kw)
        outs = out if isinstance(out, tuple) else (out,)
        grads = [torch.randn(o.shape, device="cuda", generator=gen).to(dtype) for o in outs]
        ours = list(outs) + list(torch.autograd.grad(outs, leaves, grads, allow_unused=True))
        # fp64 oracle and PyTorch's own result in the same dtype.
        def run(cast, torch_own):
            xs = [t.detach().to(cast).requires_grad_() if t is not None else None for t in (x, w, b, r)]
            xx, ww, bb, rr = xs
            if torch_own:
                z = xx if rr is None or mode == "post" else rr + xx
                if is_rms:
                    y = torch.nn.functional.rms_norm(z, (n,), ww, 1e-6)
                else:
                    y = torch.nn.functional.layer_norm(z, (n,), ww, bb, 1e-5)
                o = y if mode is None else ((y, z) if mode == "pre" else rr + y)
            else:
                o = (blockfuse.rms_norm_ref(xx, ww, residual=rr, residual_mode=mode or "pre") if is_rms
                     else blockfuse.layer_norm_ref(xx, ww, bb, residual=rr, residual_mode=mode or "pre"))
            os_ = o if isinstance(o, tuple) else (o,)
            lv = [t for t in xs if t is not None]
            return list(os_) + list(torch.autograd.grad(os_, lv, [g.to(cast) for g in grads], allow_unused=True))
        ref = run(torch.float64, False)
        own = run(dtype, True)
        for i, (a, r64, t) in enumerate(zip(ours, ref, own)):
            if r64 is None or a is None:
                continue
            ea, et = relerr(a, r64), relerr(t, r64)
            floor = {torch.float32: 1e-6, torch.float16: 1e-4, torch.bfloat16: 1e-3}[dtype]
            ok = ea <= 2 * et + floor and ea == ea
            if not ok:
                failures.append(f"{'rms' if is_rms else 'ln'} {mode} {m}x{n} {dtype} out{i}: ours {ea:.2e} torch {et:.2e}")
    return failures


def _inputs(shape, is_rms, mode):
    m, n = shape
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x) if mode in ("pre", "post") else None
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = None if is_rms else torch.randn_like(w)
    return x, r, w, b


# "gelu": no residual, a tanh GELU after the affine (layer_norm_gelu)
MODES = {"none": norm.NONE, "pre": norm.PRE, "post": norm.POST, "gelu": norm.NONE}


def _activation(mode):
    return norm.GELU_CODES["tanh"] if mode == "gelu" else 0


def _forward(x, w, b, r, mode, is_rms):
    """(y, s, mean, rstd) of the norm forward launcher (None for what the form has not)."""
    outs = norm._norm_fwd(x, w, b, r, None, 1e-5, MODES[mode], 0.0, is_rms, False, _activation(mode), True)
    return outs[0], outs[1] if mode == "pre" else None, None if is_rms else outs[-2], outs[-1]


def _backward(dy, ds, z, w, b, mean, rstd, mode, is_rms):
    return norm._norm_bwd(dy, ds, z, w, b if mode == "gelu" else None, b is not None, mean, rstd, None, MODES[mode],
                          0.0, is_rms, False, _activation(mode))


def time_forward(shape, is_rms, mode):
    x, r, w, b = _inputs(shape, is_rms, mode)
    flush = l2_flush()

    def body():
        flush()
        _forward(x, w, b, r, mode, is_rms)

    ms = time_cuda_graph(body, flush, reps=10, samples=7).median
    tensors = 2 + (2 if mode == "pre" else 1 if mode == "post" else 0)  # x, y (+ residual, s)
    return ms, tensors * x.numel() * 2


def time_backward(shape, is_rms, mode):
    x, r, w, b = _inputs(shape, is_rms, mode)
    y, s, mean, rstd = _forward(x, w, b, r, mode, is_rms)
    z = s if mode == "pre" else x
    dy = torch.randn_like(x)
    ds = torch.randn_like(x) if mode == "pre" else None
    flush = l2_flush()

    def body():
        flush()
        _backward(dy, ds, z, w, b, mean, rstd, mode, is_rms)

    ms = time_cuda_graph(body, flush, reps=10, samples=7).median
    tensors = 3 + (1 if mode == "pre" else 0)  # dy, z, dx (+ ds)
    return ms, tensors * x.numel() * 2


def profile_backward(shape, is_rms, mode):
    """Per-kernel time of one backward, from the profiler."""
    x, r, w, b = _inputs(shape, is_rms, mode)
    y, s, mean, rstd = _forward(x, w, b, r, mode, is_rms)
    z = s if mode == "pre" else x
    dy = torch.randn_like(x)
    for _ in range(3):
        _backward(dy, None, z, w, b, mean, rstd, mode, is_rms)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            _backward(dy, None, z, w, b, mean, rstd, mode, is_rms)
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=6)


@contextlib.contextmanager
def forced_chunks(chunk: int, tile_elements: int, elements_per_warp: int):
    """Both kernels read every row in chunks of ``chunk`` lanes, ``tile_elements`` lanes a program and
    ``elements_per_warp`` a warp (the wide-row path of the rule, forced at any width)."""
    names = ("FWD_MAX_LANES", "BWD_MAX_LANES", "BWD_MAX_LANES_PRE", "CHUNK_CHOICES", "CHUNK_TILE_ELEMENTS",
             "FWD_ELEMENTS_PER_WARP", "BWD_ELEMENTS_PER_WARP", "BWD_PIECES_FROM_LANES")
    values = (1, 1, 1, (chunk,), tile_elements, elements_per_warp, elements_per_warp, 0)
    with rule_constants({name: value for name, value in zip(names, values) if has_knob(name)}):
        yield


FORMS = {"ln": (False, "none"), "rms": (True, "none"), "ln-pre": (False, "pre"), "rms-pre": (True, "pre"),
         "ln-post": (False, "post"), "ln-gelu": (False, "gelu")}


def time_knob(knob, pass_, timer, shape, op, is_rms, mode, bw) -> list[dict]:
    """``knob`` = 'NAME=V1,V2': the pass timed on the rule's tile with ops/norm.py's knob NAME (norm.tuned) at each
    value (a value the kernel cannot launch with, e.g. more shared memory than the card has, is reported, not
    fatal)."""
    name, values = knob.split("=", 1)
    if not has_knob(name):  # older code (an A/B run against the code before a knob)
        print(f"{shape} {op:7s} {pass_}, {name}: not in this code, skipped", flush=True)
        return []
    rows = []
    for value in [ast.literal_eval(v) for v in values.split(",")]:
        try:
            with rule_constants({name: value}):
                ms, nbytes = timer(shape, is_rms, mode)
        except Exception as error:  # noqa: BLE001 (reported: e.g. triton's OutOfResources)
            print(f"{shape} {op:7s} {pass_}, {name}={value}: failed: {type(error).__name__}: {error}"[:300],
                  flush=True)
            continue
        rows.append(dict(shape=shape, op=op, mode=mode, pass_=f"{pass_}-knob", knob=name, value=value, ms=ms,
                         frac=nbytes / ms / 1e6 / bw))
        print(f"{shape} {op:7s} {pass_}, {name}={value}: {ms:.4f} ms, {nbytes / ms / 1e6 / bw:.2f} of copy",
              flush=True)
    return rows


parse_setting = _sweep.parse_setting  # (the tools' one LABEL:NAME=V,... syntax)


def time_setting(setting, timer, shape, op, is_rms, mode, bw, pass_="bwd") -> list[dict]:
    """``setting`` = 'LABEL:NAME=V,NAME=V': the pass (``timer``) timed on the rule's tile with those knobs of
    ops/norm.py set together (a rule changed in several knobs at once; --bwd-knob / --fwd-knob vary one). A
    setting the kernel cannot launch with (e.g. more shared memory than the card has) is reported, not fatal."""
    label, values = parse_setting(setting)
    missing = [name for name in values if not has_knob(name)]
    if missing:  # older code (an A/B run against the code before these constants)
        print(f"{shape} {op:7s} {pass_} setting {label}: {missing} not in this code, skipped", flush=True)
        return []
    try:
        with rule_constants(values):
            ms, nbytes = timer(shape, is_rms, mode)
    except Exception as error:  # noqa: BLE001 (reported: e.g. triton's OutOfResources)
        print(f"{shape} {op:7s} {pass_} setting {label}: failed: {type(error).__name__}: {error}"[:300], flush=True)
        return []
    frac = nbytes / ms / 1e6 / bw
    print(f"{shape} {op:7s} {pass_} setting {label}: {ms:.4f} ms, {frac:.2f} of copy", flush=True)
    return [dict(shape=shape, op=op, mode=mode, pass_=f"{pass_}-setting", setting=label, values=values, ms=ms,
                 frac=frac)]


def _parse_shapes(text):
    return [tuple(int(v) for v in item.split("x")) for item in text.split(",")]


def _parse_grid(text, width):
    """'a,b;c,d;...' -> the product of the ';'-separated axes (each of ``width`` axes a list of ints)."""
    axes = [[int(v) for v in axis.split(",")] for axis in text.split(";")]
    if len(axes) != width:
        raise SystemExit(f"a grid of {width} ';'-separated axes was expected, got {text!r}")
    return list(itertools.product(*axes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shapes", default=",".join(f"{m}x{n}" for m, n in SHAPES), help="rows x width, comma-separated")
    ap.add_argument("--forms", default="rms,ln,ln-pre", help=f"comma-separated, of {sorted(FORMS)}")
    ap.add_argument("--fwd", default="4096,8192;256,512,1024,2048",
                    help="forward grid: tile elements ; elements a warp ('' skips the forward)")
    ap.add_argument("--bwd", default="4096,8192;128,256,512;1,2,3;3",
                    help="backward grid: tile elements ; elements a warp ; programs a multiprocessor ; stages (0: the rule)")
    ap.add_argument("--chunked", default="",
                    help="chunked grid, forward and backward: chunk widths ; tile elements ; elements a warp")
    ap.add_argument("--chunked-passes", default="fwd,bwd", help="the passes the chunked grid times: fwd, bwd or both")
    ap.add_argument("--fwd-maxnreg", default="",
                    help="comma-separated register caps of the forward's 16-warp programs (FWD_WIDE_MAXNREG; "
                    "0: none), each timed on the rule's tile")
    ap.add_argument("--bwd-knob", action="append", default=[], metavar="NAME=V1,V2",
                    help="time the backward on the rule's tile with ops/norm.py's knob NAME at each value "
                    "(Python literals: 0, True, None, ...; repeatable; a name the code lacks is skipped), e.g. "
                    "BWD_RELOAD=False,True")
    ap.add_argument("--fwd-knob", action="append", default=[], metavar="NAME=V1,V2",
                    help="as --bwd-knob, for the forward (e.g. TAIL_VECTOR=8,10000)")
    ap.add_argument("--bwd-setting", action="append", default=[], metavar="LABEL:NAME=V,NAME=V",
                    help="time the backward with several of ops/norm.py's knobs set together (repeatable; "
                    "'LABEL:' alone: the rule as it is), e.g. "
                    "'wide:ACT_BWD_PIECE_MAX_WARPS=16,ACT_BWD_WARPS_PER_SM=16'")
    ap.add_argument("--fwd-setting", action="append", default=[], metavar="LABEL:NAME=V,NAME=V",
                    help="as --bwd-setting, for the forward (e.g. 'persist3:FWD_PERSIST_STAGES=3')")
    ap.add_argument("--setting-rounds", type=int, default=1,
                    help="--bwd-setting / --fwd-setting: rounds over the settings, alternating (each round times "
                    "every setting)")
    ap.add_argument("--no-check", action="store_true", help="skip the float64 check")
    ap.add_argument("--no-wide-cap", action="store_true",
                    help="let rows wider than 4096 lanes run several backward programs a multiprocessor")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    failures = [] if args.no_check else check_correctness()
    print("correctness failures:", len(failures))
    for f in failures:
        print("  ", f)
    if args.no_wide_cap:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        norm._num_programs = lambda x, row_blocks, block_n, per_sm: max(1, min(row_blocks, sms * per_sm))
    bw = eager_copy_bandwidth()
    print(f"copy bandwidth {bw:.0f} GB/s")
    rows = []
    chunked_configs = _parse_grid(args.chunked, 3) if args.chunked else []
    fwd_configs = _parse_grid(args.fwd, 2) if args.fwd else []
    bwd_configs = _parse_grid(args.bwd, 4) if args.bwd else []
    for shape in _parse_shapes(args.shapes):
        for op in args.forms.split(","):
            is_rms, mode = FORMS[op]
            for tile, epw in fwd_configs:
                with rule_constants({"FWD_TILE_ELEMENTS": tile, "FWD_ELEMENTS_PER_WARP": epw}):
                    ms, nbytes = time_forward(shape, is_rms, mode)
                rows.append(dict(shape=shape, op=op, mode=mode, pass_="fwd", tile=tile, epw=epw, pps=None,
                                 stages=None, ms=ms, frac=nbytes / ms / 1e6 / bw))
            for tile, epw, pps, stages in bwd_configs:
                try:
                    with rule_constants({"BWD_TILE_ELEMENTS": tile, "BWD_ELEMENTS_PER_WARP": epw,
                                         "BWD_PROGRAMS_PER_SM": pps,
                                         "BWD_STAGES": stages or None}):  # stages 0: the rule (_bwd_stages)
                        ms, nbytes = time_backward(shape, is_rms, mode)
                except Exception as error:  # noqa: BLE001 (e.g. more stages than shared memory holds at this width)
                    print(f"{shape} {op:7s} bwd tile {tile} epw {epw} pps {pps} stages {stages}: failed: "
                          f"{type(error).__name__}: {error}"[:300], flush=True)
                    continue
                rows.append(dict(shape=shape, op=op, mode=mode, pass_="bwd", tile=tile, epw=epw, pps=pps,
                                 stages=stages, ms=ms, frac=nbytes / ms / 1e6 / bw))
            for chunk, tile, epw in chunked_configs:
                if tile != chunk:  # (one row a program: several measured slower)
                    continue
                with forced_chunks(chunk, tile, epw):
                    for pass_, timer in (("fwd-chunked", time_forward), ("bwd-chunked", time_backward)):
                        if pass_.split("-")[0] not in args.chunked_passes.split(","):
                            continue
                        ms, nbytes = timer(shape, is_rms, mode)
                        print(f"{shape} {op:7s} {pass_} chunk {chunk} tile {tile} epw {epw}: "
                              f"{nbytes / ms / 1e6 / bw:.2f} of copy", flush=True)
                        rows.append(dict(shape=shape, op=op, mode=mode, pass_=pass_, tile=tile, epw=epw, pps=None,
                                         stages=None, chunk=chunk, ms=ms, frac=nbytes / ms / 1e6 / bw))
            for cap in [int(c) for c in args.fwd_maxnreg.split(",") if c]:
                # (code from before the cap: the forward as it is)
                with rule_constants({"FWD_WIDE_MAXNREG": cap or None} if has_knob("FWD_WIDE_MAXNREG") else {}):
                    ms, nbytes = time_forward(shape, is_rms, mode)
                rows.append(dict(shape=shape, op=op, mode=mode, pass_="fwd-maxnreg", maxnreg=cap, ms=ms,
                                 frac=nbytes / ms / 1e6 / bw))
                print(f"{shape} {op:7s} forward, 16-warp register cap {cap or 'none'}: "
                      f"{nbytes / ms / 1e6 / bw:.2f} of copy", flush=True)
            for pass_, knobs, timer in (("fwd", args.fwd_knob, time_forward), ("bwd", args.bwd_knob, time_backward)):
                for knob in knobs:
                    rows += time_knob(knob, pass_, timer, shape, op, is_rms, mode, bw)
            for round_ in range(args.setting_rounds if args.bwd_setting or args.fwd_setting else 0):
                for pass_, settings, timer in (("fwd", args.fwd_setting, time_forward),
                                               ("bwd", args.bwd_setting, time_backward)):
                    for setting in settings:
                        for row in time_setting(setting, timer, shape, op, is_rms, mode, bw, pass_):
                            rows.append(dict(row, round=round_))
            f_ms, f_bytes = time_forward(shape, is_rms, mode)
            b_ms, b_bytes = time_backward(shape, is_rms, mode)
            sel = [r for r in rows if r["shape"] == shape and r["op"] == op]
            line = (f"{shape} {op:7s} default fwd {f_bytes / f_ms / 1e6 / bw:.2f} bwd "
                    f"{b_bytes / b_ms / 1e6 / bw:.2f}")
            fwd_rows = [r for r in sel if r["pass_"] == "fwd"]
            bwd_rows = [r for r in sel if r["pass_"] == "bwd"]
            if fwd_rows:
                fb = max(fwd_rows, key=lambda r: r["frac"])
                line += f" | best fwd {fb['frac']:.2f} (tile {fb['tile']} epw {fb['epw']})"
            if bwd_rows:
                bb = max(bwd_rows, key=lambda r: r["frac"])
                line += (f" | best bwd {bb['frac']:.2f} (tile {bb['tile']} epw {bb['epw']} pps {bb['pps']} "
                         f"stages {bb['stages']})")
            for pass_ in ("fwd-chunked", "bwd-chunked"):
                chunked_rows = [r for r in sel if r["pass_"] == pass_]
                if chunked_rows:
                    cb = max(chunked_rows, key=lambda r: r["frac"])
                    line += (f" | best {pass_} {cb['frac']:.2f} (chunk {cb['chunk']} tile {cb['tile']} "
                             f"epw {cb['epw']})")
            print(line, flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    with open(f"{args.out}/norm_tiles.json", "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                           copy_gbps=bw, failures=failures, rows=rows, argv=sys.argv[1:]), fh, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
