"""Norm + FP8 quantize in one pass (issue 18, "quantize as you write") against a device copy of the same bytes.

Run on the GPU (under a minute on an H100 or H200):
    PYTHONPATH=src python benchmarks/norm_fp8.py [--rows 16384] [--widths 4096] [--forms rms,ln,...] \
        [--warps 4,8] [--out DIR]
The speed-ups of ``--setting`` (and the other) variants over their recipe's default, from the JSON of one or more
runs, as a chart (no GPU needed):
    PYTHONPATH=src python benchmarks/norm_fp8.py --chart-from RUN1/norm-fp8.json [RUN2/norm-fp8.json ...] --out DIR
Registers and stack (spills) of the FP8 kernels as compiled for sm_90, on any machine (no GPU needed), as shipped and
under each ``--setting``:
    PYTHONPATH=src python benchmarks/norm_fp8.py --registers [--widths 4096,4304,20000] [--warps 4,8] [--setting ...]

``--warps``: the norms' FP8 forward with at least these many warps (the knob ``FP8_FWD_MIN_WARPS``, default: its
rule's warps, 2 at 4096): the first for the main figures, the others timed beside them (``rowwise_w8``, ...).

For each width and form (``rms``, ``ln``: LayerNorm with a bias, ``rms-pre``: RMSNorm of residual + x, ``ln-post``:
residual + LayerNorm(x), ``ln-gelu``, and ``swiglu`` / ``geglu``: the gated activations of two (rows, width)
inputs), bf16 inputs, times under ``torch.no_grad`` (CUDA-graph replays, the L2 flushed before each call,
``blockfuse.bench.timing.time_cuda_graph``):

* ``bf16``: the op's forward in bf16 (no FP8 output, no statistics): what it costs today;
* ``rowwise``, ``tensorwise``: the op with ``fp8=...`` (tensorwise: delayed scaling, its one-program roll of
  the amax history included);
* ``unfused_rowwise``, ``unfused_tensorwise``: the bf16 op, then ``blockfuse.fp8.quantize`` of its output (one
  pass rowwise; two tensorwise: the amax, then the cast): what feeding ``fp8_linear`` costs without the fusion.

Bytes a provider must move (per element; the per-row scales and statistics are not counted): x read (2), the
output written (bf16 2, FP8 1); ``-pre`` and ``-post`` read the residual (2) and write the residual stream (2:
s, or the post output in bf16 beside its FP8 copy; without FP8 the post output is that stream, written once);
the gated ops read two inputs (4). The unfused pipeline
moves the fused one's bytes plus the bf16 output's write and read (tensorwise: two reads). Each figure is
reported as the fraction of a same-size copy: the time of a device copy that moves the provider's bytes
(``do_bench``, eager, the L2 flushed: captured in a graph a copy may run on a copy engine, slower), timed in
the same run, over the provider's time. The issue's target: >= 0.9 for the fused rowwise and tensorwise
(``rms`` and ``ln``, [16384, 4096]). Each FP8 result is also checked against the references' fp32 output (on
fp32 copies of the inputs): the scales' relative error, and how many FP8 steps the codes are from that output's
cast with the kernel's scale (1 at most: the two fp32 outputs differ in the last bits).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import torch

FORMS = ("rms", "ln", "rms-pre", "ln-post", "ln-gelu", "swiglu", "geglu")
DEFAULT_FORMS = ("rms", "ln", "rms-pre", "ln-post", "swiglu")
PROVIDERS = ("bf16", "rowwise", "tensorwise", "unfused_rowwise", "unfused_tensorwise")


def make_case(form: str, m: int, n: int, device: str):
    """(op(fp8, scaling) -> the op's result, its fp32 output from the references on fp32 copies of the inputs (the
    kernels' math: bf16 read, fp32 computed), bytes per element of the residual stream's traffic: the residual's
    read and s's (or the post output's) write)."""
    import blockfuse

    g = torch.Generator(device=device).manual_seed(n)

    def randn(*shape, scale=1.0, offset=0.0):
        return (torch.randn(*shape, device=device, generator=g) * scale + offset).bfloat16()

    x = randn(m, n, scale=2.0, offset=0.5)
    if form in ("swiglu", "geglu"):
        up = randn(m, n)
        fn, ref = ((blockfuse.swiglu, blockfuse.swiglu_ref) if form == "swiglu"
                   else (blockfuse.geglu, blockfuse.geglu_ref))
        return (lambda fp8=None, scaling=None: fn(x, up, fp8=fp8, fp8_scaling=scaling),
                lambda: ref(x.float(), up.float()), 0)
    w, b, r = randn(n, scale=0.5, offset=1.0), randn(n, scale=0.5), randn(m, n, scale=2.0)
    f = {"x": x.float(), "w": w.float(), "b": b.float(), "r": r.float()}
    ops = {
        "rms": (lambda fp8, s: blockfuse.rms_norm(x, w, fp8=fp8, fp8_scaling=s),
                lambda: blockfuse.rms_norm_ref(f["x"], f["w"])),
        "ln": (lambda fp8, s: blockfuse.layer_norm(x, w, b, fp8=fp8, fp8_scaling=s),
               lambda: blockfuse.layer_norm_ref(f["x"], f["w"], f["b"])),
        "rms-pre": (lambda fp8, s: blockfuse.rms_norm(x, w, residual=r, fp8=fp8, fp8_scaling=s),
                    lambda: blockfuse.rms_norm_ref(f["x"], f["w"], residual=f["r"])[0]),
        "ln-post": (lambda fp8, s: blockfuse.layer_norm(x, w, b, residual=r, residual_mode="post", fp8=fp8,
                                                        fp8_scaling=s),
                    lambda: blockfuse.layer_norm_ref(f["x"], f["w"], f["b"], residual=f["r"], residual_mode="post")),
        "ln-gelu": (lambda fp8, s: blockfuse.layer_norm_gelu(x, w, b, fp8=fp8, fp8_scaling=s),
                    lambda: blockfuse.layer_norm_gelu_ref(f["x"], f["w"], f["b"])),
    }
    op, ref = ops[form]
    return lambda fp8=None, scaling=None: op(fp8, scaling), ref, 4 if form in ("rms-pre", "ln-post") else 0


def split(form: str, result):
    """(the GEMM input (bf16 y, or (y_fp8, scale)), the residual stream or None) of an op's result."""
    if form in ("rms-pre", "ln-post") and isinstance(result, (tuple, list)):
        return result[0], result[1]
    return result, None  # NOTE: a post-residual norm without FP8 returns its output alone: it is the stream


def check(form: str, op, y_ref: torch.Tensor) -> dict:
    """Scales against amax / 448 of the reference's fp32 output, and the FP8 codes against its cast with the
    kernel's own scale: the largest difference in FP8 steps (1: one rounding apart, the kernel's fp32 output
    and the reference's differ in the last bits)."""
    from blockfuse.ops.fp8 import Float8Scaling

    out = {}
    for recipe in ("rowwise", "tensorwise"):
        scaling = Float8Scaling.new(device=y_ref.device) if recipe == "tensorwise" else None
        with torch.no_grad():
            if scaling is not None:
                op("tensorwise", scaling)  # records the amax: the second call uses it
            (q, scale), _ = split(form, op(recipe, scaling))
        if recipe == "rowwise":
            expected = y_ref.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448
        else:
            expected = y_ref.abs().amax() / 448
        scale_error = ((scale - expected).abs() / expected).max().item()
        cast = (y_ref * (1.0 / scale)).clamp(-448, 448).to(torch.float8_e4m3fn)
        # e4m3 codes of one sign are ordered like the values: a step is a difference of 1 in the code's low 7 bits.
        steps = ((q.view(torch.uint8).int() & 127) - (cast.view(torch.uint8).int() & 127)).abs()
        same_sign = (q.view(torch.uint8) >> 7) == (cast.view(torch.uint8) >> 7)
        out[recipe] = {"scale_rel_error": scale_error, "max_fp8_steps": int(steps.max().item()),
                       "sign_mismatches": int((~same_sign & (steps > 0)).sum().item())}
    return out


def copy_ms(nbytes: int) -> float:
    """A device copy that moves ``nbytes`` (nbytes / 2 read, written elsewhere): do_bench, eager, L2 flushed."""
    from blockfuse.bench import timing

    source = torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    return timing.time_cuda(lambda: target.copy_(source), warmup_ms=10, rep_ms=50).median


def graph_ms(fn) -> float:
    from blockfuse.bench import timing

    flush = timing.l2_flush()

    def body():
        flush()
        fn()

    return timing.time_cuda_graph(body, flush, reps=10, samples=7).median


@contextlib.contextmanager
def _fp8_tile(norm, tile):
    """``norm.fp8_forward_tile`` giving ``tile`` = (rows a program, warps) instead of its own, within the block
    (None: unchanged)."""
    if tile is None:
        yield
        return
    original = norm.fp8_forward_tile
    norm.fp8_forward_tile = lambda n, *rule, **form: original(n, *rule, **form)._replace(block_m=tile[0],
                                                                                        num_warps=tile[1])
    try:
        yield
    finally:
        norm.fp8_forward_tile = original


@contextlib.contextmanager
def _lanes_per_warp(norm, lanes):
    """``norm.fp8_forward_tile`` with one warp a ``lanes`` lanes of its tile (a power of two, 1 to 16) where the
    rule gives one piece (no tail, no chunks), within the block (None: unchanged)."""
    if lanes is None:
        yield
        return
    from blockfuse.ops.launch import cdiv, next_power_of_2

    original = norm.fp8_forward_tile

    def tile_of(n, *rule, **form):
        tile = original(n, *rule, **form)
        if tile.tail or tile.num_chunks > 1:
            return tile
        return tile._replace(num_warps=min(16, next_power_of_2(cdiv(tile.block_m * tile.block_n, lanes))))

    norm.fp8_forward_tile = tile_of
    try:
        yield
    finally:
        norm.fp8_forward_tile = original


@contextlib.contextmanager
def _no_roll(norm, active: bool):
    """Within the block, the norms' launcher does not roll the amax history after its kernel (``--ablate``: what
    the roll's launch costs; the results are not checked)."""
    if not active:
        yield
        return
    original = norm.roll_amax_history
    norm.roll_amax_history = lambda history, amax: None
    try:
        yield
    finally:
        norm.roll_amax_history = original


class Setting(NamedTuple):
    """``--setting LABEL:NAME=V,...``: ops/norm.py's knobs set together for a timed call (parsed and set as
    benchmarks/norm_tiles.py's ``--fwd-setting``)."""

    label: str
    values: dict


def parse_setting(text: str) -> Setting:
    from norm_tiles import parse_setting as parse

    return Setting(*parse(text))


def _constants(setting: Optional[Setting]):
    """Within the block, ops/norm.py's knobs of ``setting`` (none: as they are)."""
    from norm_knobs import rule_constants

    return rule_constants(setting.values if setting else {})


def bench(forms, m: int, widths, warps=(None,), tiles=(), caps=(), ablate=False, lanes_per_warp=(), settings=(),
          rounds: int = 1, device: str = "cuda") -> list[dict]:
    from norm_knobs import has_knob, knob, rule_constants

    import blockfuse.fp8
    from blockfuse.ops import launch as launch_ops
    from blockfuse.ops import norm
    from blockfuse.ops.fp8 import Float8Scaling

    rows = []
    for n in widths:
        elements = m * n
        for form in forms:
            op, ref, extra = make_case(form, m, n, device)
            with torch.no_grad():
                y_ref = ref()
            scaling = Float8Scaling.new(device=device)

            def unfused(recipe):
                y, _ = split(form, op())
                return blockfuse.fp8.quantize(y, recipe=recipe)

            x_bytes = 4 if form in ("swiglu", "geglu") else 2  # the gated ops read two inputs
            # NOTE: without FP8 a post-residual norm's bf16 output is the residual stream: written once (the
            # FP8 forms write it beside the e4m3 copy, counted in ``extra``).
            y_bytes = 0 if form.endswith("-post") else 2
            calls = {
                "bf16": (lambda: op(), x_bytes + y_bytes + extra, None),
                "rowwise": (lambda: op("rowwise"), x_bytes + 1 + extra, None),
                "tensorwise": (lambda: op("tensorwise", scaling), x_bytes + 1 + extra, None),
                "unfused_rowwise": (lambda: unfused("rowwise"), x_bytes + y_bytes + extra + 2 + 1, None),
                "unfused_tensorwise": (lambda: unfused("tensorwise"), x_bytes + y_bytes + extra + 2 * 2 + 1, None),
            }
            if form not in ("swiglu", "geglu"):
                for w in warps[1:]:  # the norms' FP8 forward with other warp counts (FP8_FWD_MIN_WARPS)
                    calls[f"rowwise_w{w}"] = (calls["rowwise"][0], calls["rowwise"][1], w)
                    calls[f"tensorwise_w{w}"] = (calls["tensorwise"][0], calls["tensorwise"][1], w)
                for tile in tiles:  # (rows a program, warps): the FP8 forward's tile replaced
                    for recipe in ("rowwise", "tensorwise"):
                        calls[f"{recipe}_t{tile[0]}x{tile[1]}"] = (calls[recipe][0], calls[recipe][1], tile)
                for cap in caps:  # the FP8 forward's register cap (FP8_FWD_MAXNREG), on the rule's tile
                    for recipe in ("rowwise", "tensorwise"):
                        calls[f"{recipe}_r{cap}"] = (calls[recipe][0], calls[recipe][1], f"r{cap}")
                for lanes in lanes_per_warp:  # the FP8 forward's warps from its tile's lanes
                    for recipe in ("rowwise", "tensorwise"):
                        calls[f"{recipe}_l{lanes}"] = (calls[recipe][0], calls[recipe][1], f"l{lanes}")
                for setting in settings:  # ops/norm.py's knobs set (e.g. FP8_FWD_MIN_WARPS=2)
                    missing = [name for name in setting.values if not has_knob(name)]
                    if missing:  # (older code)
                        print(f"setting {setting.label}: {missing} not in this code, skipped", flush=True)
                        continue
                    for recipe in ("rowwise", "tensorwise"):
                        calls[f"{recipe}_{setting.label}"] = (calls[recipe][0], calls[recipe][1], setting)
                if ablate:  # timing only: the history's roll (a second launch) left out, the history not rolled;
                    # and the roll launched plainly, not as a programmatic dependent launch
                    calls["tensorwise_noroll"] = (calls["tensorwise"][0], calls["tensorwise"][1], "noroll")
                    calls["tensorwise_nopdl"] = (calls["tensorwise"][0], calls["tensorwise"][1], "nopdl")
            default_warps = knob("FP8_FWD_MIN_WARPS")

            @contextlib.contextmanager
            def variant_of(variant):
                """The FP8 forward as ``variant`` launches it: a setting, tile, register cap, lanes a warp or
                minimum warps in force (None: the rule's); "noroll" / "nopdl": the ablations."""
                setting = variant if isinstance(variant, Setting) else None
                tile = variant if isinstance(variant, tuple) and setting is None else None
                cap = int(variant[1:]) if isinstance(variant, str) and variant.startswith("r") else None
                lanes = int(variant[1:]) if isinstance(variant, str) and variant.startswith("l") else None
                min_warps = variant if isinstance(variant, int) else None
                own = {"FP8_FWD_MIN_WARPS": 1 if lanes else min_warps or warps[0] or default_warps,
                       "FP8_FWD_MAXNREG": cap}
                own = {key: value for key, value in own.items() if has_knob(key)}  # (older code)
                try:
                    launch_ops.PDL = variant != "nopdl"
                    with rule_constants(own), _fp8_tile(norm, tile), _lanes_per_warp(norm, lanes), \
                            _constants(setting), _no_roll(norm, variant == "noroll"):
                        yield
                finally:
                    launch_ops.PDL = True

            row = {"rows": m, "width": n, "form": form, "check": check(form, op, y_ref)}
            # every variant's outputs checked as the default's (the ablations leave the history unrolled: not)
            row["check_variants"] = {}
            for name, (_, _, variant) in calls.items():
                if name.startswith("rowwise_") and variant is not None and variant not in ("noroll", "nopdl"):
                    with variant_of(variant):
                        row["check_variants"][name.split("_", 1)[1]] = check(form, op, y_ref)
            copies = {}
            timed: dict = {}
            with torch.no_grad():
                for _ in range(rounds):  # (--rounds: every call timed once a round, the calls alternating)
                    for name, (fn, per_element, variant) in calls.items():
                        with variant_of(variant):
                            timed.setdefault(name, []).append(graph_ms(fn))
                        if per_element not in copies:
                            copies[per_element] = copy_ms(per_element * elements)
            for name, (_, per_element, _) in calls.items():
                ms, copy = statistics.median(timed[name]), copies[per_element]
                row[name] = {"ms": ms, "bytes": per_element * elements, "copy_ms": copy, "fraction": copy / ms,
                             "gbps": per_element * elements / ms / 1e6,
                             "rounds": [{"ms": t, "fraction": copy / t} for t in timed[name]]}
            rows.append(row)
            cells = ", ".join(f"{name} {row[name]['ms'] * 1e3:.1f} us ({row[name]['fraction']:.2f}"
                              + (" in rounds " + "/".join(f"{r['fraction']:.2f}" for r in row[name]["rounds"])
                                 if rounds > 1 else "") + ")" for name in calls)
            print(f"{m}x{n} {form}: {cells}; check {json.dumps(row['check'])}"
                  + (f"; variants' checks {json.dumps(row['check_variants'])}" if row["check_variants"] else ""),
                  flush=True)
    return rows


# ----------------------------------------------------------------------------------------
# --registers: the FP8 kernels compiled for sm_90 (no GPU)
# ----------------------------------------------------------------------------------------


def register_stats(widths, warps_options=(4,)) -> None:
    """A markdown table of registers and stack bytes a thread of each FP8 forward kernel, as the launchers tile
    it (the norms' warps: at least each of ``warps_options``), beside the plain norm forward's (no statistics)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernel_stats import compile_sm90, sass_stats

    from blockfuse.ops import gated, norm
    from blockfuse.ops.fp8 import FP8_OUTPUT_CODES

    norm_forms = {"rms": (True, norm.NONE, 0), "ln": (False, norm.NONE, 0), "ln-pre": (False, norm.PRE, 0),
                  "ln-post": (False, norm.POST, 0), "ln-gelu": (False, norm.NONE, norm.GELU_CODES["tanh"])}
    print("| width | op | recipe | FP8 tile (m x n + tail, chunks, warps) | regs | stack | barriers | instructions a "
          "row element | plain kernel regs | stack |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in widths:
        for form, (is_rms, mode, activation) in norm_forms.items():
            tile = norm.forward_rule(n, is_rms, mode != norm.NONE, mode == norm.PRE)  # the plain forward's
            plain = _plain_norm_stats(compile_sm90, sass_stats, norm, n, tile, is_rms, mode, activation)
            for recipe in FP8_OUTPUT_CODES:
                for min_warps in warps_options:
                    fp8_tile = _forward_tile(norm, n, min_warps, mode, is_rms)
                    registers, stack = _fp8_norm_stats(compile_sm90, sass_stats, norm, n, fp8_tile, is_rms, mode,
                                                       activation, recipe, fp8_tile.num_warps)
                    fp8_tail = f" + {fp8_tile.block_t}" if fp8_tile.tail else ""
                    print(f"| {n} | {form} | {recipe} | {fp8_tile.block_m} x {fp8_tile.block_n}{fp8_tail}, "
                          f"{fp8_tile.num_chunks}, {fp8_tile.num_warps} | {registers} | {stack} | {plain[0]} | "
                          f"{plain[1]} |", flush=True)
        for recipe, code in FP8_OUTPUT_CODES.items():
            block_m, block_n, chunks, warps = gated.fp8_tile(4 * n, n, recipe == "rowwise", compiled=True)
            signature = {"G": BF16, "U": BF16, "Q": E4M3, "Q_SCALE": F32, "stride_g": "i32", "stride_u": "i32",
                         "M": "i32", "N": "i32", "history_len": "i32"}
            nones = {}
            for name in ("HISTORY", "AMAX"):
                if recipe == "tensorwise":
                    signature[name] = F32
                else:
                    nones[name] = None
            constexprs = dict(ACTIVATION=0, FP8=code, BLOCK_M=block_m, BLOCK_N=block_n, NUM_CHUNKS=chunks,
                              BLOCK_H=16 if recipe == "tensorwise" else 1, VEC=1)
            compiled = compile_sm90(gated._gated_fwd_fp8_kernel, signature, {**nones, **constexprs},
                                    ["G", "U", "Q", "stride_g", "stride_u", "N"], num_warps=warps)
            registers, stack, _, _ = sass_stats(compiled.asm["cubin"])
            print(f"| {n} | swiglu | {recipe} | {block_m} x {block_n}, {chunks}, {warps} | {registers} | {stack} | "
                  f"| | |", flush=True)


BF16, F32, E4M3 = "*bf16", "*fp32", "*fp8e4nv"


def _forward_tile(norm, n: int, min_warps: int, mode: int, is_rms: bool):
    """``norm.fp8_forward_tile`` for rows of ``n`` in residual form ``mode`` (as the launcher asks for it) with the
    knob ``FP8_FWD_MIN_WARPS`` at ``min_warps``."""
    from norm_knobs import rule_constants

    with rule_constants({"FP8_FWD_MIN_WARPS": min_warps}):
        return norm.fp8_forward_tile(n, residual=mode != norm.NONE, is_rms=is_rms, pre=mode == norm.PRE)


def _fp8_norm_stats(compile_sm90, sass_stats, norm, n, tile, is_rms, mode, activation, recipe, num_warps):
    """(registers, stack) of the norms' FP8 forward kernel for one form and recipe (bf16 input, a weight)."""
    from blockfuse.ops.fp8 import FP8_OUTPUT_CODES, HISTORY_LEN
    from blockfuse.ops.launch import next_power_of_2

    signature = {"X": BF16, "W": BF16, "Q": E4M3, "Q_SCALE": F32, "stride_x": "i32", "stride_res": "i32",
                 "stride_y": "i32", "stride_s": "i32", "M": "i32", "N": "i32", "eps": "fp32", "dropout_p": "fp32",
                 "dropout_scale": "fp32", "history_len": "i32"}
    nones = {"SEED": None, "MEAN": None, "RSTD": None}
    for name, present, kind in (("B", not is_rms, BF16), ("RES", mode != norm.NONE, BF16),
                                ("S", mode == norm.PRE, BF16), ("Y", mode == norm.POST, BF16),
                                ("HISTORY", recipe == "tensorwise", F32), ("AMAX", recipe == "tensorwise", F32)):
        if present:
            signature[name] = kind
        else:
            nones[name] = None
    constexprs = dict(IS_RMS=is_rms, MODE=mode, HAS_W=True, HAS_B=not is_rms, HAS_DROPOUT=0, CAST_BEFORE_WEIGHT=False,
                      ACTIVATION=activation, STATS=False, **tile.constexprs(n), FP8=FP8_OUTPUT_CODES[recipe],
                      BLOCK_H=next_power_of_2(HISTORY_LEN) if recipe == "tensorwise" else 1, VEC=1,
                      PDL=recipe == "tensorwise",  # (as the launcher on sm_90: fp8.roll_pdl)
                      THREADS=norm.joint_sums_threads(tile, forward=True, fp8=True))  # (FP8_FWD_JOINT_SUMS)
    aligned = [name for name, kind in signature.items() if kind.startswith("*")] + ["stride_x", "N"]
    compiled = compile_sm90(norm._norm_fwd_fp8_kernel, signature, {**nones, **constexprs}, aligned,
                            num_warps=num_warps)
    registers, stack, opcodes, _ = sass_stats(compiled.asm["cubin"])
    per_element = sum(opcodes.values()) * 32 * num_warps / (tile.block_m * n)
    return registers, f"{stack} | {opcodes['BAR']} | {per_element:.1f}"


def _plain_norm_stats(compile_sm90, sass_stats, norm, n, tile, is_rms, mode, activation):
    """(registers, stack) of the same form without an FP8 output (inference: no statistics), for comparison."""
    bf = BF16
    signature = {"X": bf, "W": bf, "Y": bf, "stride_x": "i32", "stride_res": "i32", "stride_y": "i32",
                 "stride_s": "i32", "M": "i32", "N": "i32", "eps": "fp32", "dropout_p": "fp32", "dropout_scale": "fp32"}
    nones = {"SEED": None, "MEAN": None, "RSTD": None}
    for name, present in (("B", not is_rms), ("RES", mode != norm.NONE), ("S", mode == norm.PRE)):
        if present:
            signature[name] = bf
        else:
            nones[name] = None
    constexprs = dict(IS_RMS=is_rms, MODE=mode, HAS_W=True, HAS_B=not is_rms, HAS_DROPOUT=0, CAST_BEFORE_WEIGHT=False,
                      ACTIVATION=activation, STATS=False, **tile.constexprs(n), VEC=1,
                      STAGES=0)
    compiled = compile_sm90(norm._norm_fwd_kernel, signature, {**nones, **constexprs},
                            ["X", "W", "Y", "stride_x", "stride_y", "N"], num_warps=tile.num_warps)
    registers, stack, _, _ = sass_stats(compiled.asm["cubin"])
    return registers, stack


def variants(rows: list[dict]) -> list[str]:
    """The timed calls beside PROVIDERS (``rowwise_LABEL`` / ``tensorwise_LABEL``: --setting, --warps, --tiles, ...),
    in the order first seen."""
    seen: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in PROVIDERS and key not in seen and isinstance(value, dict) and "ms" in value:
                seen.append(key)
    return seen


def variants_chart(payloads: list[dict], path: Path) -> None:
    """Each variant's speed-up over its recipe's default call (``rowwise_LABEL``: rowwise's time over its own), a
    point a run, one panel a recipe, the cells along x: from the norm-fp8.json of several runs (a variant A/B
    repeated across calls)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recipes = ("rowwise", "tensorwise")
    labels = sorted({name.split("_", 1)[1] for payload in payloads for name in variants(payload["rows"])
                     if name.split("_", 1)[0] in recipes})
    if not labels:
        raise ValueError("no rowwise_LABEL / tensorwise_LABEL variant in these runs to chart")
    cells = list(dict.fromkeys((row["rows"], row["width"], row["form"]) for p in payloads for row in p["rows"]
                               if any(f"{recipe}_{label}" in row for recipe in recipes for label in labels)))
    figure, axes = plt.subplots(1, len(recipes), figsize=(max(8.0, 0.45 * len(cells) * len(recipes)), 4.5),
                                sharey=True, squeeze=False)
    for axis, recipe in zip(axes[0], recipes):
        for k, label in enumerate(labels):
            for run, payload in enumerate(payloads):
                by_cell = {(row["rows"], row["width"], row["form"]): row for row in payload["rows"]}
                xs, ys = [], []
                for x, cell in enumerate(cells):
                    row = by_cell.get(cell)
                    if row and f"{recipe}_{label}" in row and recipe in row:
                        xs.append(x + 0.15 * (k - (len(labels) - 1) / 2))
                        ys.append(row[recipe]["ms"] / row[f"{recipe}_{label}"]["ms"])
                axis.plot(xs, ys, "o" if run == 0 else "x", color=f"C{k}",
                          label=f"{label} (run {run + 1})" if recipe == recipes[0] else None)
        axis.axhline(1.0, color="0.5", lw=0.8)
        axis.set_title(f"{recipe}: default time / variant time")
        axis.set_xticks(range(len(cells)), [f"{w} {f}" for _, w, f in cells], rotation=60, ha="right", fontsize=8)
        axis.grid(axis="y", alpha=0.3)
    first = payloads[0]
    figure.suptitle(f"Norm + FP8 forward variants ({first['card']}; torch {first['torch']}, triton {first['triton']};"
                    f" {len(payloads)} run(s))", fontsize=10)
    axes[0][0].set_ylabel("speed-up (above 1: the variant is faster)")
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def width_chart(payloads: list[dict], path: Path) -> None:
    """The variants' speed-ups (as :func:`variants_chart`) along the row width: a color a form, a marker a variant,
    one panel a recipe; from the norm-fp8.json of several runs (widths split between calls)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recipes = ("rowwise", "tensorwise")
    points = {}  # (label, form) -> [(width, speed-up)]
    for payload in payloads:
        for row in payload["rows"]:
            for name in row:
                recipe, _, label = name.partition("_")
                if recipe == recipes[0] and label and f"{recipes[1]}_{label}" in row:
                    points.setdefault((label, row["form"]), []).append(
                        (row["width"], *(row[r]["ms"] / row[f"{r}_{label}"]["ms"] for r in recipes)))
    if not points:
        raise ValueError("no rowwise_LABEL / tensorwise_LABEL variant in these runs to chart")
    widths = sorted({w for values in points.values() for w, *_ in values})
    forms = list(dict.fromkeys(form for _, form in points))
    labels = list(dict.fromkeys(label for label, _ in points))
    figure, axes = plt.subplots(1, 2, figsize=(max(8.0, 0.7 * len(widths) * 2), 4.5), sharey=True)
    for k, (axis, recipe) in enumerate(zip(axes, recipes)):
        for (label, form), values in points.items():
            values = sorted(values)
            xs = [widths.index(w) + 0.08 * (forms.index(form) - (len(forms) - 1) / 2) for w, *_ in values]
            axis.plot(xs, [v[1 + k] for v in values], "osx^Dv"[labels.index(label) % 6],
                      color=f"C{forms.index(form)}", label=f"{form}, {label}" if k == 0 else None)
        axis.axhline(1.0, color="0.5", lw=0.8)
        axis.set_title(f"{recipe}: default time / variant time")
        axis.set_xticks(range(len(widths)), [str(w) for w in widths], rotation=45)
        axis.set_xlabel("row width")
        axis.grid(axis="y", alpha=0.3)
    first = payloads[0]
    rows = sorted({row["rows"] for p in payloads for row in p["rows"]})
    figure.suptitle(f"Norm + FP8 forward variants by width ({first['card']}; torch {first['torch']}, triton "
                    f"{first['triton']}; {', '.join(map(str, rows))} rows, {len(payloads)} run(s))", fontsize=10)
    axes[0].set_ylabel("speed-up (above 1: the variant is faster)")
    axes[0].legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--widths", default=None, help="comma-separated (default 4096; --registers: 4096,4304,20000)")
    parser.add_argument("--forms", default=",".join(DEFAULT_FORMS), help=f"any of {', '.join(FORMS)}")
    parser.add_argument("--registers", action="store_true", help="registers / stack of the sm_90 build, no GPU")
    parser.add_argument("--warps", default=None,
                        help="comma-separated minimum warps of the norms' FP8 forward (FP8_FWD_MIN_WARPS): the "
                             "first for the main figures, the others timed beside them as rowwise_wN / tensorwise_wN")
    parser.add_argument("--tiles", default="", help="comma-separated ROWSxWARPS (e.g. 2x8): the norms' FP8 forward "
                                                    "with that tile too, timed as rowwise_tROWSxWARPS, ...")
    parser.add_argument("--maxnreg", default="", help="comma-separated register caps of the norms' FP8 forward "
                                                      "(FP8_FWD_MAXNREG), timed as rowwise_rCAP, ...")
    parser.add_argument("--lanes-per-warp", default="", help="comma-separated lanes a warp of the norms' FP8 forward "
                                                              "(its warps from its tile), timed as rowwise_lLANES, ...")
    parser.add_argument("--ablate", action="store_true",
                        help="the norms' tensorwise forward without the history's roll too, timed as "
                             "tensorwise_noroll, and with the roll a plain launch (no programmatic dependent launch), "
                             "as tensorwise_nopdl")
    parser.add_argument("--setting", action="append", default=[], metavar="LABEL:NAME=V,NAME=V",
                        help="ops/norm.py's knobs set together, timed as rowwise_LABEL / tensorwise_LABEL beside "
                             "the others (repeatable), e.g. 'w2:FP8_FWD_MIN_WARPS=2'")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every call this many times, the calls alternating; each figure the median")
    parser.add_argument("--out", type=Path, help="write norm-fp8.json and norm-fp8.md here")
    parser.add_argument("--chart-from", type=Path, nargs="+", metavar="JSON",
                        help="no GPU: draw the variants' speed-ups over their recipe's default from these runs' "
                             "norm-fp8.json into --out/norm-fp8-variants.png")
    parser.add_argument("--by-width", action="store_true",
                        help="with --chart-from: the speed-ups along the row width, a color a form "
                             "(norm-fp8-widths.png)")
    args = parser.parse_args()
    if args.chart_from:
        if args.out is None:
            parser.error("--chart-from needs --out")
        os.makedirs(args.out, exist_ok=True)
        payloads = [json.loads(path.read_text()) for path in args.chart_from]
        if args.by_width:
            width_chart(payloads, args.out / "norm-fp8-widths.png")
        else:
            variants_chart(payloads, args.out / "norm-fp8-variants.png")
        return
    if args.registers:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # (norm_tiles / norm_knobs, for --setting)
        for setting in [None] + [parse_setting(text) for text in args.setting]:  # as shipped, then each setting's
            if args.setting:
                print(f"\n{setting.label if setting else 'default'}:\n", flush=True)
            with _constants(setting):
                register_stats([int(w) for w in (args.widths or "4096,4304,20000").split(",")],
                               [int(w) for w in (args.warps or "4").split(",")])
        return
    import triton

    widths = [int(w) for w in (args.widths or "4096").split(",")]
    forms = args.forms.split(",")
    head = f"{torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}; bf16 inputs"
    print(head, flush=True)
    warps = tuple(int(w) for w in args.warps.split(",")) if args.warps else (None,)
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",") if t]
    caps = [int(c) for c in args.maxnreg.split(",") if c]
    lanes = [int(v) for v in args.lanes_per_warp.split(",") if v]
    rows = bench(forms, args.rows, widths, warps, tiles, caps, args.ablate, lanes,
                 [parse_setting(text) for text in args.setting], args.rounds)
    if args.out is None:
        return
    os.makedirs(args.out, exist_ok=True)
    command = "PYTHONPATH=src python benchmarks/norm_fp8.py " + " ".join(sys.argv[1:])
    (args.out / "norm-fp8.json").write_text(json.dumps(
        {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
         "command": command, "rows": rows}, indent=1))
    columns = list(PROVIDERS) + variants(rows)
    lines = [f"# Norm + FP8 quantize against a copy of the same bytes ({head})", "", f"Command: `{command}`", "",
             "Time (CUDA-graph replays, L2 flushed) and fraction of a same-size device copy timed in the same run.", "",
             "| rows x width | form | " + " | ".join(columns) + " | max FP8 steps (row / tensor) | the variants' |",
             "| --- | --- | " + " | ".join("---" for _ in columns) + " | --- | --- |"]
    for r in rows:
        cells = " | ".join(f"{r[p]['ms'] * 1e3:.1f} us ({r[p]['fraction']:.2f})" if p in r else "-" for p in columns)
        steps = f"{r['check']['rowwise']['max_fp8_steps']} / {r['check']['tensorwise']['max_fp8_steps']}"
        checked = r.get("check_variants") or {}
        worst = " / ".join(str(max((c[recipe]["max_fp8_steps"] for c in checked.values()), default="-"))
                           for recipe in ("rowwise", "tensorwise")) if checked else "-"
        lines.append(f"| {r['rows']}x{r['width']} | {r['form']} | {cells} | {steps} | {worst} |")
    (args.out / "norm-fp8.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
