"""RoPE at head dims whose rotary half is not a power of two: ops/rotary.py's launch (one padded block of
next_power_of_2(rotary_dim / 2) pairs, alignment hints on the row offsets) against the same launch without
the hints and against torch.compile's RoPE, forward and forward+backward, at head_dim
{64, 72, 80, 96, 128, 256} x (heads, kv heads) {(32, 32), (32, 8), (16, 4)} at [batch 4, seq 4096]: bf16,
"bhsd", Hugging Face's per-token tables, as ``blockfuse bench ops --sweep`` runs the op.

Variants (``--variants``, default padded,new,compile):
* ``old``: the launcher before the hints (``_cached_alignments`` -> (1, 1): ALIGN = TABLE_ALIGN = 1; the flat
  kernel off too);
* ``padded``: the launcher with the flat kernel off (``_flat_tile`` -> None): the padded pair axis, hints on,
  as shipped before the flat kernel;
* ``new``: the launcher as shipped (the flat kernel where ``_flat_tile`` takes the shape);
* ``compile``: ``torch.compile(rotary_ref)``, a fresh static-shape compile per shape (the sweep's baseline).
The pairs in power-of-two chunks with at most 1/8 of the lanes masked were tried and measured slower (see
the NOTE beside TILE_ELEMENTS in ops/rotary.py); the variant is gone with the code.

Each figure: kernel time from CUDA-graph replays with the L2 flushed (``blockfuse.bench.timing``), and the
fraction of a device copy of the same bytes timed in the same run (do_bench, as the sweep times its copy).
Every variant's outputs and input gradients are checked against the fp32 reference (``rotary_ref`` on fp32
copies of q, k and the incoming gradients): each element within one bf16 ulp. For power-of-two head dims
``old`` and ``new`` launch the same kernel (no hint where Triton knows: strides that are multiples of 16).

Run on the GPU (budget: under 90 s on an H200, most of it the 18 static torch.compile builds; the run prints
its time; ``--variants old,new`` skips torch.compile):
    PYTHONPATH=src python3 benchmarks/rotary_head_dims.py --out DIR
``--setting LABEL:NAME=V,...`` (repeatable) adds the shipped launcher with ops/rotary.py's settings changed
(fields of its table ``TILES``: ``h2:TILES.flat_heads_per_program=2``, ``t512:TILES.tile_elements=512``), timed
beside the others.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import time
from pathlib import Path

import _sweep
import torch

from blockfuse.bench.rotary import rotary_bytes, tables
from blockfuse.bench.timing import l2_flush, time_cuda, time_cuda_graph
from blockfuse.ops import rotary as rotary_module
from blockfuse.ops.launch import sm_count
from blockfuse.ops.rotary import rotary, rotary_ref

HEAD_DIMS = (64, 72, 80, 96, 128, 256)
HEADS = ((32, 32), (32, 8), (16, 4))
BATCH, SEQ = 4, 4096
DEVICE = "cuda"
# variant -> the module attributes it sets while it runs (None: torch.compile)
VARIANTS = {
    "old": {"_cached_alignments": lambda *key: (1, 1), "_flat_tile": lambda *a: None},
    "padded": {"_flat_tile": lambda *a: None},
    "new": {},
    "compile": None,
}


def reference_bhsd(q, k, cos, sin):
    return rotary_ref(q, k, cos, sin, layout="bhsd")


def blockfuse_bhsd(q, k, cos, sin):
    return rotary(q, k, cos, sin, layout="bhsd")


def copy_ms(nbytes: int) -> float:
    """A device copy that moves ``nbytes`` (half read, half written), timed as the sweep times its copy."""
    source = torch.empty(nbytes // 2, dtype=torch.uint8, device=DEVICE)
    target = torch.empty_like(source)
    return time_cuda(lambda: target.copy_(source), warmup_ms=5, rep_ms=30).median


def forward_backward(fn, q, k, dq, dk):
    """(q_out, k_out, dq, dk) of ``fn`` on leaves that require grad."""
    lq, lk = q.detach().requires_grad_(), k.detach().requires_grad_()
    outs = fn(lq, lk)
    return (*[o.detach() for o in outs], *torch.autograd.grad(outs, (lq, lk), (dq, dk)))


def ulp_errors(results, expected) -> int:
    """Elements farther than one bf16 ulp (2**-7 relative) from the fp32 reference, over every tensor."""
    return sum(int(((r.float() - e).abs() > 2**-7 * e.abs() + 1e-30).sum()) for r, e in zip(results, expected))


def time_variant(fn, q, k, dq, dk, flush) -> tuple[float, float]:
    """Median ms of the forward and of the forward+backward (CUDA-graph replays, L2 flushed in the graph).

    NOTE: the forward is timed on inputs that require grad, without the backward: for blockfuse the same
    kernel as under no_grad, and for torch.compile the training graph's forward, so that one compile per
    shape serves both figures (no second, inference-only graph)."""
    lq, lk = q.detach().requires_grad_(), k.detach().requires_grad_()

    def forward():
        flush()
        fn(lq, lk)

    def forward_backward_():
        flush()
        torch.autograd.grad(fn(lq, lk), (lq, lk), (dq, dk))

    return time_cuda_graph(forward, flush).median, time_cuda_graph(forward_backward_, flush).median


def parse_setting(text: str) -> tuple[str, dict]:
    """``LABEL:NAME=V,...`` -> (LABEL, {NAME: value}) for ``_sweep.constants(rotary_module, ...)``: V a Python
    literal; ``NAME.field=V`` replaces a field of the dataclass setting NAME (``TILES.tile_elements=512``). A
    ValueError names an unknown setting or field."""
    label, assignments = _sweep.parse_setting(text)
    if not label or label in VARIANTS or not assignments:
        raise ValueError(f"--setting {text!r}: expected LABEL:NAME=V,... with a label not in {list(VARIANTS)}")
    values: dict = {}
    for dotted, value in assignments.items():
        name, _, field = dotted.partition(".")
        if not hasattr(rotary_module, name):
            raise ValueError(f"--setting {text!r}: ops/rotary.py has no setting {name!r}")
        if field:
            current = values.get(name, getattr(rotary_module, name))
            if field not in {f.name for f in dataclasses.fields(current)}:
                raise ValueError(f"--setting {text!r}: {name} has no field {field!r}")
            value = dataclasses.replace(current, **{field: value})
        values[name] = value
    return label, values


def tile_of(shape, cos) -> str:
    """The tile the launcher picks under the current settings (q, k contiguous "bhsd"): the flat kernel's
    "G{BLOCK_G}/{head splits}", else BLOCK_P and ALIGN of the padded one."""
    batch, seq, hq, hk, d = shape
    tile = rotary_module._tile(batch * seq, hq, hk, d, 0, sm_count(torch.device(DEVICE)), rotary_module.TILES)
    q_strides, k_strides = (hq * seq * d, d, seq * d, 1), (hk * seq * d, d, seq * d, 1)  # (batch, seq, head, dim)
    table = rotary_module._table_strides(cos, d, False)
    align, _ = rotary_module._cached_alignments(2, (batch, seq, hq, hk), (q_strides, q_strides, k_strides, k_strides),
                                                cos.dtype.itemsize, (1, seq), (table, table))
    flat = rotary_module._flat_tile(seq, d // 2, hq, hk, batch, sm_count(torch.device(DEVICE)))
    if flat is not None:  # (None under a variant that turns the flat kernel off)
        return f"G{flat[0]}/{flat[1]}"
    return f"{tile[3]} a{align}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--head-dims", default=",".join(map(str, HEAD_DIMS)))
    parser.add_argument("--heads", default=",".join(f"{h}:{k}" for h, k in HEADS), help="q:kv pairs")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--seq", type=int, default=SEQ)
    parser.add_argument("--variants", default="padded,new,compile", help=f"from {','.join(VARIANTS)}")
    parser.add_argument("--setting", action="append", default=[], metavar="LABEL:NAME=V,...",
                        help="one more variant: the launcher as shipped with ops/rotary.py's settings NAME (or a field "
                             "of one, TILES.tile_elements) set to the Python literals V (e.g. "
                             "h2:TILES.flat_heads_per_program=2); run after --variants, compared with compile too")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    try:
        settings_of = {**{variant: VARIANTS[variant] for variant in variants},
                       **dict(parse_setting(text) for text in args.setting)}
    except ValueError as error:
        parser.error(str(error))
    variants = list(settings_of)
    head_dims = [int(d) for d in args.head_dims.split(",")]
    heads = [tuple(int(n) for n in pair.split(":")) for pair in args.heads.split(",")]
    began = time.perf_counter()
    flush = l2_flush()
    results = _sweep.header()
    results.update(batch=args.batch, seq=args.seq, dtype="bf16", layout="bhsd", table="per-token (1, seq, head_dim)")
    compiled = torch.compile(reference_bhsd)
    print(f"{'head_dim':>8} {'heads':>6} {'variant':>8} {'tile':>9} {'fwd us':>8} {'of copy':>7} {'f+b us':>8} "
          f"{'of copy':>7} {'vs compile':>10} {'ulp errs':>8}", flush=True)
    for d, (hq, hk) in itertools.product(head_dims, heads):
        shape = (args.batch, args.seq, hq, hk, d)
        torch.manual_seed(0)
        q = torch.randn((args.batch, hq, args.seq, d), dtype=torch.bfloat16, device=DEVICE)  # (b, h, s, d)
        k = torch.randn((args.batch, hk, args.seq, d), dtype=torch.bfloat16, device=DEVICE)
        dq, dk = torch.randn_like(q), torch.randn_like(k)
        cos, sin = tables(args.seq, d, torch.bfloat16, q.device)  # (1, seq, head_dim)
        expected = forward_backward(functools.partial(reference_bhsd, cos=cos, sin=sin), q.float(), k.float(),
                                    dq.float(), dk.float())
        fwd_bytes, bwd_bytes = rotary_bytes(shape, 2)
        copy_fwd, copy_fwdbwd = copy_ms(fwd_bytes), copy_ms(fwd_bytes + bwd_bytes)
        torch.compiler.reset()  # NOTE: a fresh, static-shape compile per shape, as the op benchmark's runner does
        rows = {}
        for variant in variants:
            settings = settings_of[variant]
            fn = functools.partial(compiled if settings is None else blockfuse_bhsd, cos=cos, sin=sin)
            with _sweep.constants(rotary_module, **(settings or {})):
                tile = "-" if settings is None else tile_of(shape, cos)
                errors = ulp_errors(forward_backward(fn, q, k, dq, dk), expected)
                fwd_ms, fwdbwd_ms = time_variant(fn, q, k, dq, dk, flush)
            rows[variant] = {"shape": list(shape), "variant": variant, "tile": tile, "fwd_us": 1e3 * fwd_ms,
                             "fwdbwd_us": 1e3 * fwdbwd_ms, "fwd_of_copy": copy_fwd / fwd_ms,
                             "fwdbwd_of_copy": copy_fwdbwd / fwdbwd_ms, "ulp_errors": errors,
                             "copy_fwd_us": 1e3 * copy_fwd, "copy_fwdbwd_us": 1e3 * copy_fwdbwd}
        for variant, row in rows.items():
            if "compile" in rows:
                row["vs_compile_fwdbwd"] = rows["compile"]["fwdbwd_us"] / row["fwdbwd_us"]
                row["vs_compile_fwd"] = rows["compile"]["fwd_us"] / row["fwd_us"]
            results["rows"].append(row)
            ratio = f"{row['vs_compile_fwdbwd']:.2f}x" if "vs_compile_fwdbwd" in row else "-"
            print(f"{d:>8} {hq:>3}/{hk:<2} {variant:>8} {row['tile']:>9} {row['fwd_us']:>8.1f} "
                  f"{row['fwd_of_copy']:>7.2f} {row['fwdbwd_us']:>8.1f} {row['fwdbwd_of_copy']:>7.2f} {ratio:>10} "
                  f"{row['ulp_errors']:>8}", flush=True)
        del q, k, dq, dk, expected
        torch.cuda.empty_cache()
    rows = [r for r in results["rows"] if r["variant"] == "new"]
    if rows:
        worst = {key: min(r[key] for r in rows if key in r) for key in ("fwd_of_copy", "fwdbwd_of_copy",
                                                                        "vs_compile_fwdbwd") if key in rows[0]}
        results["worst_new"] = worst
        print("new, worst cell:", {key: round(value, 3) for key, value in worst.items()},
              "(targets: fwd >= 0.85, fwd+bwd >= 0.80 of copy, >= 1.0x compile fwd+bwd)")
    failed = [r for r in results["rows"] if r["ulp_errors"]]
    results["elapsed_s"] = time.perf_counter() - began
    print(f"{'every variant within 1 ulp of fp32' if not failed else f'{len(failed)} rows off by more than 1 ulp'}; "
          f"{results['elapsed_s']:.0f} s")
    _sweep.write(args.out, "rotary_head_dims.json", results)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
