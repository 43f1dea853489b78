#!/usr/bin/env python
"""Robustness fuzz of blockfuse's public ops at shapes no test or benchmark lists.

Run (one process, the interpreter must be on or CPU calls silently take the references):

    TRITON_INTERPRET=1 python benchmarks/fuzz_ops.py [--groups norm,gelu,fp8,gated,bda,rotary,mlp,ce,edge,linear,bad]
                                                     [--seed 0] [--limit N] [--out fuzz-results.json]

The rule (tests/helpers.py, ``assert_close_to_reference``): every output and every input gradient of the fused op
must satisfy ``rel_err(ours) <= factor * rel_err(PyTorch in the same dtype) + floor(dtype)`` against a float64
oracle computed from the same (rounded) inputs; ``factor`` is 2 (importing tests/helpers.py makes Triton's interpreter
round fp32 -> bf16 to nearest even, as a GPU does: ``round_interpreted_bf16_to_nearest``; before 2026-12-06 it
truncated, and the factor was 4 for results rounded through bf16). Every case uses a random, never-zero upstream
gradient. Each case also checks dtypes, shapes, that the inputs were not modified, that no gradient is missing, and
that the op took its Triton path (its module's ``*_ref`` was not called).

Each case is a dict of parameters; ``run_case(group, params)`` rebuilds it deterministically, so a failure printed
in the results can be rerun on its own:

    TRITON_INTERPRET=1 python -c "import sys; sys.path.insert(0, 'benchmarks'); import fuzz_ops as f; \
        print(f.run_case('norm', {...}))"

(From the repository root. About 15 minutes a seed on a 2-core CPU; results: benchmarks/results/fuzz/.)

On a machine with a CUDA GPU, run without ``TRITON_INTERPRET``: the same cases on the GPU's compiled kernels, their
leading shapes also drawn from ``GPU_LEADS`` (up to thousands of rows), in N processes side by side:

    for i in $(seq 0 7); do python benchmarks/fuzz_ops.py --seed 21 --shard $i/8 --out F-$i.json > F-$i.log & done
    wait; python benchmarks/fuzz_ops.py --summarize F-*.json     (scripts/fuzz_gpu.sh)
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import time
import traceback
import warnings
from collections import defaultdict

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (the repository root: tests/)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import blockfuse  # noqa: E402
from blockfuse.ops import (  # noqa: E402
    bias_dropout_add as bda_mod, cross_entropy as ce_mod, gated as gated_mod, linear_act as la_mod, mlp as mlp_mod,
    norm as norm_mod, rotary as rotary_mod,
)
from blockfuse.runtime import use_triton  # noqa: E402
from tests.helpers import reference_tolerance, relative_error  # noqa: E402

# The interpreter on CPU tensors, else the GPU (its compiled kernels at more rows: GPU_LEADS).
DEVICE = "cpu" if INTERPRETED else "cuda"
SUMMARIZING = sys.argv[1:2] == ["--summarize"]  # (reads result files only: any machine)
if SUMMARIZING:
    DEVICE = "cpu"
elif DEVICE == "cuda" and not torch.cuda.is_available():
    sys.exit("set TRITON_INTERPRET=1, or run on a machine with a CUDA GPU (otherwise CPU calls use the references "
             "and the fuzz tests nothing)")
torch.set_default_device(DEVICE)  # (every tensor a case makes; random values are drawn on the CPU, then moved)
assert SUMMARIZING or use_triton(torch.empty(0)), "the ops would take their references here"

torch.set_num_threads(2)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
E4M3 = torch.float8_e4m3fn

WIDTHS = [576, 896, 1152, 1280, 2560, 2880, 3584, 4304, 5120, 6656, 9216, 11008, 13824, 14336, 16400, 18944]
ODD_WIDTHS = [1, 3, 17, 100, 1001, 4097, 8193, 12345]
ALL_WIDTHS = WIDTHS + ODD_WIDTHS
LEADS = [(1,), (3,), (5,), (7,), (2, 3), (1, 7), (3, 2), (1, 2, 3), (2, 1, 2), (1, 1, 1)]
# On a GPU the leading shapes also take many rows (a few to thousands of programs; row counts that are not a
# multiple of any tile): what the interpreter is too slow for, and where a compiled kernel's grid, its partial
# sums across programs and its chunk loops are exercised.
GPU_LEADS = LEADS + [(129,), (1031,), (3, 683), (4099,), (2, 2053), (6001,)]
if DEVICE == "cuda":
    LEADS = GPU_LEADS


# ----------------------------------------------------------------------------------------------------------------
# Which ops took their reference: wrap each ops module's *_ref global (what the public functions call) with a
# counter. The originals stay available for the baselines.
# ----------------------------------------------------------------------------------------------------------------

ORIGINAL = {}
REF_CALLS = defaultdict(int)


def _wrap(module, name):
    original = getattr(module, name)
    ORIGINAL[name] = original

    def counting(*args, **kwargs):
        REF_CALLS[name] += 1
        return original(*args, **kwargs)

    setattr(module, name, counting)


for _module, _names in ((norm_mod, ["layer_norm_ref", "rms_norm_ref", "layer_norm_gelu_ref"]),
                        (gated_mod, ["swiglu_ref", "geglu_ref"]), (bda_mod, ["bias_dropout_add_ref"]),
                        (rotary_mod, ["rotary_ref"]), (mlp_mod, ["fused_mlp_ref"]),
                        (la_mod, ["linear_act_ref"]), (ce_mod, ["linear_cross_entropy_ref"])):
    for _name in _names:
        _wrap(_module, _name)


# ----------------------------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------------------------


def rand(shape, dtype, seed, scale=1.0, offset=0.0, layout="contiguous"):
    """randn * scale + offset (fixed generator), rounded to dtype, in a memory layout:
    contiguous; slice (x[..., :n] of a (..., n + 8) buffer padded with NaN); transposed (last two dims swapped in
    memory); strided (every other element of a NaN buffer 2n + 3 wide)."""
    g = torch.Generator().manual_seed(seed)
    values = (torch.randn(tuple(shape), generator=g, device="cpu") * scale + offset).to(dtype).to(DEVICE)
    return as_layout(values, layout)


def as_layout(values, layout):
    if layout == "contiguous":
        return values.contiguous()
    if layout == "slice":
        n = values.shape[-1]
        buf = torch.full((*values.shape[:-1], n + 8), float("nan"), dtype=values.dtype)
        view = buf[..., :n]
        view.copy_(values)
        return view
    if layout == "strided":
        n = values.shape[-1]
        buf = torch.full((*values.shape[:-1], 2 * n + 3), float("nan"), dtype=values.dtype)
        view = buf[..., : 2 * n: 2]
        view.copy_(values)
        return view
    if layout == "transposed":
        if values.dim() < 2:
            return values.contiguous()
        return values.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(layout)


def leaves(*tensors, dtype=None):
    out = []
    for t in tensors:
        if t is None:
            out.append(None)
        else:
            c = t.detach() if dtype is None else t.detach().to(dtype)
            out.append(c.requires_grad_(True))
    return out


def autograd(outputs, inputs, grad_outputs):
    """Grads of every non-None input; a None grad where one was expected is returned as None."""
    outputs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    grad_outputs = [grad_outputs] if isinstance(grad_outputs, torch.Tensor) else list(grad_outputs)
    grad_outputs = [g.to(o.dtype) if g.dtype != o.dtype else g for o, g in zip(outputs, grad_outputs)]
    present = [t for t in inputs if t is not None]
    computed = iter(torch.autograd.grad(outputs, present, grad_outputs, allow_unused=True))
    return [None if t is None else next(computed) for t in inputs]


def snapshot(*tensors):
    return [None if t is None else t.detach().clone() for t in tensors]


def unchanged(before, tensors):
    for b, t in zip(before, tensors):
        if t is not None and not torch.equal(b, t.detach()):
            return False
    return True


# ----------------------------------------------------------------------------------------------------------------
# The comparison and its bookkeeping
# ----------------------------------------------------------------------------------------------------------------


class Case:
    """One case's comparisons and problems."""

    def __init__(self):
        self.comparisons = []  # dicts
        self.problems = []  # strings

    def compare(self, name, ours, lowp, ref64, rounded_through=None, factor=2.0, floor=None):
        if ours is None or ref64 is None:
            if (ours is None) != (ref64 is None):
                self.problems.append(f"{name}: {'missing gradient (None)' if ours is None else 'unexpected tensor'}")
            return
        if tuple(ours.shape) != tuple(ref64.shape):
            self.problems.append(f"{name}: shape {tuple(ours.shape)} != expected {tuple(ref64.shape)}")
            return
        if lowp is not None and ours.dtype != lowp.dtype:
            self.problems.append(f"{name}: dtype {ours.dtype} != PyTorch's {lowp.dtype}")
        e_ours, e_torch, factor, floor, tol = reference_tolerance(ours, lowp, ref64, factor=factor, floor=floor,
                                                                  rounded_through=rounded_through)
        ok = (not math.isnan(e_ours)) and e_ours <= tol
        self.comparisons.append(dict(name=name, dtype=str(ours.dtype).replace("torch.", ""), ours=e_ours,
                                     torch=e_torch, tol=tol, factor=factor, floor=floor, ok=ok))
        if not ok:
            self.problems.append(f"{name} ({ours.dtype}, shape {tuple(ours.shape)}): rel err {e_ours:.3e} vs "
                                 f"PyTorch's {e_torch:.3e} (tol {factor:g}*{e_torch:.3e}+{floor:.0e}={tol:.3e})"
                                 + (" NaN/inf" if math.isnan(e_ours) else ""))

    def expect(self, condition, message):
        if not condition:
            self.problems.append(message)


# ----------------------------------------------------------------------------------------------------------------
# Norms: rms_norm, layer_norm (residual pre/post), layer_norm_gelu
# ----------------------------------------------------------------------------------------------------------------


def _norm_pytorch(p, x, w, b, res, dtype_is_oracle=False):
    """PyTorch's composition in the inputs' dtype (as tests/ops/test_norm.py's call_pytorch)."""
    n = x.shape[-1]
    eps = p["eps"]

    def norm(t):
        if p["op"] == "layer_norm" or p["op"] == "layer_norm_gelu":
            params = [q for q in (w, b) if q is not None]
            if params and params[0].dtype != t.dtype:
                y = F.layer_norm(t.to(params[0].dtype), (n,), w, b, eps).to(t.dtype)
            else:
                y = F.layer_norm(t, (n,), w, b, eps)
            if p["op"] == "layer_norm_gelu":
                y = F.gelu(y, approximate=p["approximate"])
            return y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if p.get("cast_before_weight") and w is not None:
                return (F.rms_norm(t, (n,), None, eps) * w).to(t.dtype)
            return F.rms_norm(t, (n,), w, eps)

    if res is None:
        return [norm(x)]
    if p["mode"] == "pre":
        s = res + x
        return [norm(s), s]
    return [res + norm(x)]


def _norm_inputs(p):
    dtype = DTYPES[p["dtype"]]
    pdtype = DTYPES[p["param_dtype"]]
    shape = (*p["lead"], p["n"])
    seed = p["seed"]
    offset = 0.0 if p["op"] == "rms_norm" else 0.5
    scale = 2.0
    if p.get("large_mean"):
        scale, offset = 1.0, 300.0
    x = rand(shape, dtype, seed, scale, offset, p["x_layout"])
    w = rand((p["n"],), pdtype, seed + 1, 0.5, 1.0) if p["weight"] else None
    b = rand((p["n"],), pdtype, seed + 2, 0.5) if p.get("bias") else None
    res = rand(shape, dtype, seed + 3, 2.0, -0.25, p["res_layout"]) if p.get("mode", "none") != "none" else None
    return x, w, b, res


def _call_norm(p, x, w, b, res, **kwargs):
    if p["op"] == "layer_norm":
        return blockfuse.layer_norm(x, w, b, p["eps"], residual=res, residual_mode=p["mode"] if res is not None
                                    else "pre", **kwargs)
    if p["op"] == "rms_norm":
        return blockfuse.rms_norm(x, w, p["eps"], residual=res, residual_mode=p["mode"] if res is not None else "pre",
                                  cast_before_weight=p["cast_before_weight"], **kwargs)
    return blockfuse.layer_norm_gelu(x, w, b, p["eps"], p["approximate"], **kwargs)


def run_norm(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    x, w, b, res = _norm_inputs(p)
    inputs = [x, w, b, res]
    before = snapshot(*inputs)
    n_out = 2 if (res is not None and p["mode"] == "pre") else 1
    gys = [rand(x.shape, dtype, p["seed"] + 100 + i, layout=p["grad_layout"]) for i in range(n_out)]

    ours_leaves = leaves(*inputs)
    out = _call_norm(p, *ours_leaves)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    c.expect(len(outs) == n_out, f"expected {n_out} outputs, got {len(outs)}")
    outs = outs[:n_out]
    for i, o in enumerate(outs):
        c.expect(o.dtype == dtype and tuple(o.shape) == tuple(x.shape),
                 f"output {i}: {o.dtype} {tuple(o.shape)}, expected {dtype} {tuple(x.shape)}")
    ours_grads = autograd(outs, ours_leaves, gys)
    for g, t, name in zip(ours_grads, inputs, ["dx", "dweight", "dbias", "dresidual"]):
        if g is not None:
            c.expect(g.dtype == t.dtype, f"{name}: dtype {g.dtype}, expected {t.dtype}")
    c.expect(unchanged(before, inputs), "an input was modified")

    base_leaves = leaves(*inputs)
    base = _norm_pytorch(p, *base_leaves)
    base_grads = autograd(base, base_leaves, gys)
    ref_leaves = leaves(*inputs, dtype=torch.float64)
    ref = _norm_pytorch(p, *ref_leaves)
    ref_grads = autograd(ref, ref_leaves, [g.double() for g in gys])

    names = ["y", "s"][:n_out]
    for name, o, bo, r in zip(names, outs, base, ref):
        c.compare(name, o.detach(), bo.detach(), r.detach(), rounded_through=dtype)
    for name, g, bg, rg in zip(["dx", "dweight", "dbias", "dresidual"], ours_grads, base_grads, ref_grads):
        if inputs[["dx", "dweight", "dbias", "dresidual"].index(name)] is None:
            continue
        c.compare(name, g, bg, rg, rounded_through=dtype)
    return c


def gen_norm(rng):
    cases = []
    for n in ALL_WIDTHS:
        for dt in DTYPES:
            for op in ("layer_norm", "rms_norm"):
                p = dict(op=op, n=n, dtype=dt, lead=rng.choice(LEADS), seed=rng.randrange(10**6),
                         mode=rng.choice(["none", "pre", "post"]),
                         x_layout=rng.choice(["contiguous", "contiguous", "slice", "transposed", "strided"]),
                         res_layout=rng.choice(["contiguous", "slice"]),
                         grad_layout=rng.choice(["contiguous", "contiguous", "transposed"]),
                         weight=rng.random() < 0.85,
                         param_dtype=dt if (dt == "fp32" or rng.random() < 0.7) else "fp32")
                if op == "layer_norm":
                    p.update(bias=rng.random() < 0.7, eps=rng.choice([1e-5, 1e-6]), large_mean=rng.random() < 0.15)
                else:
                    p.update(cast_before_weight=rng.random() < 0.5, eps=rng.choice([1e-6, 1e-5]))
                cases.append(p)
    return cases


def gen_gelu(rng):
    cases = []
    for n in ALL_WIDTHS:
        for dt in DTYPES:
            cases.append(dict(op="layer_norm_gelu", n=n, dtype=dt, lead=rng.choice(LEADS), seed=rng.randrange(10**6),
                              approximate=rng.choice(["tanh", "none"]), mode="none",
                              x_layout=rng.choice(["contiguous", "slice", "transposed", "strided"]),
                              res_layout="contiguous", grad_layout=rng.choice(["contiguous", "transposed"]),
                              weight=rng.random() < 0.85, bias=rng.random() < 0.8, eps=1e-5,
                              large_mean=rng.random() < 0.1,
                              param_dtype=dt if (dt == "fp32" or rng.random() < 0.7) else "fp32"))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# FP8 rowwise outputs (norms and gated), forward only
# ----------------------------------------------------------------------------------------------------------------


def fp8_steps(a, b):
    def ordinal(t):
        code = t.view(torch.uint8).int()
        magnitude = code & 127
        return torch.where(code >= 128, -magnitude, magnitude)

    return (ordinal(a) - ordinal(b)).abs()


def cast_e4m3(y, scale):
    return (y.float() * (1.0 / scale)).clamp(-448, 448).to(E4M3)


def amax_scale(y):
    a = y.float().abs().amax(-1, keepdim=True)
    return a.clamp(min=1e-12) / torch.full((), 448.0)


def run_fp8(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    if p["op"] in ("swiglu", "geglu"):
        gate, up = _gated_inputs(p)
        before = snapshot(gate, up)
        with torch.no_grad():
            plain = _call_gated(p, gate, up)
            q, scale = _call_gated(p, gate, up, fp8="rowwise")
            g32 = gate.float()
            u32 = None if up is None else up.float()
            y32 = (ORIGINAL["swiglu_ref"](g32, u32) if p["op"] == "swiglu"
                   else ORIGINAL["geglu_ref"](g32, u32, p["approximate"]))
        second = None
        c.expect(unchanged(before, [gate, up]), "an input was modified")
    else:
        x, w, b, res = _norm_inputs(p)
        before = snapshot(x, w, b, res)
        with torch.no_grad():
            plain = _call_norm(p, x, w, b, res)
            out = _call_norm(p, x, w, b, res, fp8="rowwise")
            f32 = lambda t: None if t is None else t.float()  # noqa: E731
            ref_fn = ORIGINAL[p["op"] + "_ref"]
            if p["op"] == "layer_norm":
                y32 = ref_fn(f32(x), f32(w), f32(b), p["eps"], residual=f32(res), residual_mode=p["mode"])
            elif p["op"] == "rms_norm":
                y32 = ref_fn(f32(x), f32(w), p["eps"], residual=f32(res), residual_mode=p["mode"])
            else:
                y32 = ref_fn(f32(x), f32(w), f32(b), p["eps"], p["approximate"])
        c.expect(unchanged(before, [x, w, b, res]), "an input was modified")
        second = None
        if res is None:
            q, scale = out
        else:
            (q, scale), second = out
            plain, plain_second = plain if p["mode"] == "pre" else (plain, plain)
            y32 = y32[0] if p["mode"] == "pre" else y32
            c.expect(second.dtype == dtype, f"the residual-stream output: dtype {second.dtype}, expected {dtype}")
            c.expect(torch.equal(second, plain_second),
                     "NOTE (invariant): the residual-stream output beside the FP8 output differs from the plain "
                     f"call's (max abs diff {(second.float() - plain_second.float()).abs().max().item():.3e})")
    y_shape = tuple(plain.shape)
    c.expect(q.dtype == E4M3 and tuple(q.shape) == y_shape, f"q: {q.dtype} {tuple(q.shape)}, expected e4m3 {y_shape}")
    c.expect(scale.dtype == torch.float32 and tuple(scale.shape) == (*y_shape[:-1], 1),
             f"scale: {scale.dtype} {tuple(scale.shape)}, expected float32 {(*y_shape[:-1], 1)}")
    if c.problems:
        return c
    # NOTE: rms cast_before_weight rounds the normalized row to x's dtype before the weight (not in y32 here),
    # and the interpreter truncates to bf16: compare loosely there.
    loose = p["op"] == "rms_norm" and p.get("cast_before_weight") and dtype != torch.float32
    expected_scale = amax_scale(y32)
    if dtype == torch.float32 and not loose:
        # the op's own fp32 output quantized: bit for bit in the interpreter (tests/ops/test_norm_fp8.py)
        c.expect(torch.equal(scale, amax_scale(plain)),
                 f"NOTE (invariant): scale != amax(own fp32 output)/448 (max rel diff "
                 f"{((scale - amax_scale(plain)).abs() / amax_scale(plain)).max().item():.3e})")
        differ = (q.view(torch.uint8) != cast_e4m3(plain, scale).view(torch.uint8)).sum().item()
        c.expect(differ == 0, f"NOTE (invariant): q: {differ} codes differ from the cast of the op's own fp32 output")
    rtol = 2.0 ** -7 if loose else 1e-5
    rel = ((scale - expected_scale).abs() / expected_scale).max().item()
    if loose:
        # the project's own reference quantizes the row it rounds to x's dtype before the weight: compare codes
        # with its FP8 output (the interpreter truncates that rounding, the reference rounds to nearest)
        fn = ORIGINAL["rms_norm_ref"]
        with torch.no_grad():
            out_ref = fn(x, w, p["eps"], residual=res, residual_mode=p["mode"], cast_before_weight=True,
                         fp8="rowwise")
        (q_ref, scale_ref) = out_ref if res is None else out_ref[0]
        expected_scale = scale_ref
        rel = ((scale - expected_scale).abs() / expected_scale).max().item()
        steps = fp8_steps(q, q_ref)
        far = (steps > 1).float().mean().item()
        c.expect(rel <= rtol, f"scale: max rel diff {rel:.3e} from the reference's (rtol {rtol:g})")
        c.expect(far < 0.01, f"q: {far:.3f} of the codes more than one FP8 step from the reference's")
        c.comparisons.append(dict(name="fp8 codes off by one step", dtype=p["dtype"],
                                  ours=(steps > 0).float().mean().item(),
                                  torch=float("nan"), tol=float("nan"), factor=float("nan"), floor=float("nan"),
                                  ok=not c.problems))
        return c
    steps = fp8_steps(q, cast_e4m3(y32, scale))
    off = (steps > 0).float().mean().item()
    c.expect(steps.max().item() <= 1, f"q: {steps.max().item()} FP8 steps from the fp32 reference's cast")
    c.expect(off < (0.1 if loose else 0.02), f"q: {off:.3f} of the codes one step off the fp32 reference's cast")
    c.comparisons.append(dict(name="fp8 codes off by one step", dtype=p["dtype"], ours=off, torch=float("nan"),
                              tol=float("nan"), factor=float("nan"), floor=float("nan"), ok=not c.problems))
    return c


def gen_fp8(rng):
    cases = []
    for n in WIDTHS + [1, 17, 1001, 4097, 8193]:
        for dt in DTYPES:
            op = rng.choice(["layer_norm", "rms_norm", "layer_norm_gelu", "swiglu", "geglu"])
            p = dict(op=op, n=n, dtype=dt, lead=rng.choice(LEADS), seed=rng.randrange(10**6), eps=1e-5,
                     x_layout=rng.choice(["contiguous", "slice", "transposed"]), res_layout="contiguous",
                     grad_layout="contiguous", weight=rng.random() < 0.85, bias=rng.random() < 0.7,
                     param_dtype=dt, mode="none", approximate=rng.choice(["tanh", "none"]),
                     cast_before_weight=rng.random() < 0.3)
            if op in ("layer_norm", "rms_norm"):
                p["mode"] = rng.choice(["none", "pre", "post"])
            if op in ("swiglu", "geglu"):
                p.update(form=rng.choice(["packed", "separate"]), gate_layout=p["x_layout"],
                         up_layout=rng.choice(["contiguous", "slice"]))
            cases.append(p)
    return cases


# ----------------------------------------------------------------------------------------------------------------
# swiglu / geglu
# ----------------------------------------------------------------------------------------------------------------


def _gated_inputs(p):
    dtype = DTYPES[p["dtype"]]
    n, lead, seed = p["n"], tuple(p["lead"]), p["seed"]
    if p["form"] == "packed":
        return rand((*lead, 2 * n), dtype, seed, 2.0, 0.25, p["gate_layout"]), None
    return (rand((*lead, n), dtype, seed, 2.0, 0.25, p["gate_layout"]),
            rand((*lead, n), dtype, seed + 1, 1.0, 0.5, p["up_layout"]))


def _call_gated(p, gate, up, **kwargs):
    if p["op"] == "swiglu":
        return blockfuse.swiglu(gate, up, **kwargs)
    return blockfuse.geglu(gate, up, p["approximate"], **kwargs)


def _gated_pytorch(p, gate, up):
    if up is None:
        gate, up = gate.chunk(2, dim=-1)
    if p["op"] == "swiglu":
        return F.silu(gate) * up
    return F.gelu(gate, approximate=p["approximate"]) * up


def run_gated(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    gate, up = _gated_inputs(p)
    inputs = [gate, up]
    before = snapshot(*inputs)
    out_shape = (*p["lead"], p["n"])
    gy = rand(out_shape, dtype, p["seed"] + 100, layout=p["grad_layout"])
    lv = leaves(*inputs)
    y = _call_gated(p, *lv)
    c.expect(y.dtype == dtype and tuple(y.shape) == out_shape, f"out: {y.dtype} {tuple(y.shape)}")
    gr = autograd(y, lv, gy)
    for g, t, name in zip(gr, inputs, ["dgate", "dup"]):
        if t is not None and g is not None:
            c.expect(g.dtype == t.dtype and g.shape == t.shape, f"{name}: {g.dtype} {tuple(g.shape)}")
    c.expect(unchanged(before, inputs), "an input was modified")
    bl = leaves(*inputs)
    by = _gated_pytorch(p, *bl)
    bg = autograd(by, bl, gy)
    rl = leaves(*inputs, dtype=torch.float64)
    ry = _gated_pytorch(p, *rl)
    rg = autograd(ry, rl, gy.double())
    c.compare("out", y.detach(), by.detach(), ry.detach(), rounded_through=dtype)
    names = ["dgate_up"] if up is None else ["dgate", "dup"]
    for name, a, b_, r in zip(names, gr, bg, rg):
        c.compare(name, a, b_, r, rounded_through=dtype)
    return c


def gen_gated(rng):
    cases = []
    for n in ALL_WIDTHS:
        for dt in DTYPES:
            op = rng.choice(["swiglu", "geglu", "geglu"])
            cases.append(dict(op=op, approximate=rng.choice(["tanh", "none"]), n=n, dtype=dt,
                              lead=rng.choice(LEADS), seed=rng.randrange(10**6),
                              form=rng.choice(["packed", "separate"]),
                              gate_layout=rng.choice(["contiguous", "slice", "transposed", "strided"]),
                              up_layout=rng.choice(["contiguous", "slice", "transposed"]),
                              grad_layout=rng.choice(["contiguous", "transposed"])))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# bias_dropout_add (p = 0)
# ----------------------------------------------------------------------------------------------------------------


def run_bda(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    shape = (*p["lead"], p["n"])
    s = p["seed"]
    x = rand(shape, dtype, s, 1.0, 0.0, p["x_layout"])
    bias = rand((p["n"],), DTYPES[p["bias_dtype"]], s + 1, 0.5, 0.1) if p["bias"] else None
    res = rand(shape, dtype, s + 2, 2.0, -0.25, p["res_layout"])
    inputs = [x, bias, res]
    before = snapshot(*inputs)
    gy = rand(shape, dtype, s + 100, layout=p["grad_layout"])

    def pytorch(x, b, r):
        z = x if b is None else (x + b).to(x.dtype)
        return r + z

    lv = leaves(*inputs)
    y = blockfuse.bias_dropout_add(lv[0], lv[1], lv[2], 0.0, p["training"])
    c.expect(y.dtype == dtype and tuple(y.shape) == shape, f"out: {y.dtype} {tuple(y.shape)}")
    gr = autograd(y, lv, gy)
    for g, t, name in zip(gr, inputs, ["dx", "dbias", "dresidual"]):
        if t is not None and g is not None:
            c.expect(g.dtype == t.dtype and g.shape == t.shape, f"{name}: {g.dtype} {tuple(g.shape)}")
    c.expect(unchanged(before, inputs), "an input was modified")
    bl = leaves(*inputs)
    by = pytorch(*bl)
    bg = autograd(by, bl, gy)
    rl = leaves(*inputs, dtype=torch.float64)
    ry = pytorch(*rl)
    rg = autograd(ry, rl, gy.double())
    c.compare("out", y.detach(), by.detach(), ry.detach(), rounded_through=dtype)
    for name, a, b_, r, t in zip(["dx", "dbias", "dresidual"], gr, bg, rg, inputs):
        if t is not None:
            c.compare(name, a, b_, r, rounded_through=dtype)
    return c


def gen_bda(rng):
    cases = []
    for n in ALL_WIDTHS:
        for dt in DTYPES:
            cases.append(dict(n=n, dtype=dt, lead=rng.choice(LEADS), seed=rng.randrange(10**6),
                              bias=rng.random() < 0.75,
                              bias_dtype=dt if (dt == "fp32" or rng.random() < 0.7) else "fp32",
                              x_layout=rng.choice(["contiguous", "slice", "transposed", "strided"]),
                              res_layout=rng.choice(["contiguous", "slice", "transposed"]),
                              grad_layout=rng.choice(["contiguous", "transposed"]),
                              training=rng.random() < 0.7))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# rotary
# ----------------------------------------------------------------------------------------------------------------


def _rotary_qk(p, dtype):
    b, s, hq, hk, d = p["batch"], p["seq"], p["hq"], p["hk"], p["d"]
    seed = p["seed"]
    if p["source"] == "qkv":
        width = (hq + 2 * hk) * d
        qkv = rand((b, s, width), dtype, seed, 2.0)
        q = qkv[..., : hq * d].unflatten(-1, (hq, d))
        k = qkv[..., hq * d:(hq + hk) * d].unflatten(-1, (hk, d))
    else:
        q = rand((b, s, hq, d), dtype, seed, 2.0)
        k = rand((b, s, hk, d), dtype, seed + 1, 2.0)
    if p["layout"] == "bhsd":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        if p["source"] == "contiguous":
            q, k = q.contiguous(), k.contiguous()
    if p["source"] == "transposed":
        q, k = as_layout(q, "transposed"), as_layout(k, "transposed")
    return q, k


def _rotary_positions(p):
    g = torch.Generator().manual_seed(p["seed"] + 7)
    s, b = p["seq"], p["batch"]
    max_seq = s + 9
    if p["positions"] in ("none", "offset"):
        off = 5 if p["positions"] == "offset" else 0
        return None, off, (torch.arange(s) + off)[None]
    rows = b if p["positions"] in ("ids", "ids-int32") else 1
    ids = torch.randint(0, max_seq, (rows, s), generator=g, device="cpu").to(DEVICE)
    positions = ids
    if p["positions"] == "ids-1d":
        ids = ids[0]
    if p["positions"] == "ids-int32":
        ids = ids.to(torch.int32)
    return ids, 0, positions


def _rotary_tables(p, dtype, positions):
    r = p["rot"]
    angles = rand((p["seq"] + 9, r // 2), torch.float32, p["seed"] + 11, 3.0)
    hc, hs = angles.cos(), angles.sin()
    tdt = dtype if p["table"] in ("full-lowp", "per-token", "per-token-1") else torch.float32
    hc, hs = hc.to(tdt), hs.to(tdt)

    def full(h):
        return h.repeat_interleave(2, dim=-1) if p["interleaved"] else torch.cat((h, h), dim=-1)

    if p["table"] == "half":
        cos, sin = hc, hs
    elif p["table"] in ("full", "full-lowp"):
        cos, sin = full(hc), full(hs)
    elif p["table"] == "half-view":
        sl = (lambda t: t[:, 0::2]) if p["interleaved"] else (lambda t: t[:, : r // 2])
        cos, sin = sl(full(hc)), sl(full(hs))
    else:
        rows = positions.expand(p["batch"], -1) if p["table"] == "per-token" else positions[:1]
        cos, sin = full(hc)[rows], full(hs)[rows]
    return cos, sin, (hc.double()[positions], hs.double()[positions])


def _rotary_formula(x, ch, sh, p, out_layout):
    r = p["rot"]
    x = x if p["layout"] == "bshd" else x.transpose(1, 2)
    cc = ch.to(x.dtype)[:, :, None, :]
    ss = sh.to(x.dtype)[:, :, None, :]
    rot, rest = x[..., :r], x[..., r:]
    if p["interleaved"]:
        cc, ss = cc.repeat_interleave(2, dim=-1), ss.repeat_interleave(2, dim=-1)
        sw = torch.stack((-rot[..., 1::2], rot[..., 0::2]), dim=-1).flatten(-2)
    else:
        cc, ss = torch.cat((cc, cc), dim=-1), torch.cat((ss, ss), dim=-1)
        sw = torch.cat((-rot[..., r // 2:], rot[..., : r // 2]), dim=-1)
    y = torch.cat((rot * cc + sw * ss, rest), dim=-1)
    return y if out_layout == "bshd" else y.transpose(1, 2)


def run_rotary(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    q, k = _rotary_qk(p, dtype)
    ids, off, positions = _rotary_positions(p)
    cos, sin, (ch, sh) = _rotary_tables(p, dtype, positions)
    out_layout = p["out_layout"] or p["layout"]

    def shape(h, layout):
        return (p["batch"], p["seq"], h, p["d"]) if layout == "bshd" else (p["batch"], h, p["seq"], p["d"])

    gys = [rand(shape(h, out_layout), dtype, p["seed"] + 20 + i, layout=p["grad_layout"])
           for i, h in enumerate((p["hq"], p["hk"]))]
    extra = {"rotary_dim": p["rot"]} if p["pass_rotary_dim"] else {}
    before = snapshot(q, k, cos, sin)
    lq, lk = leaves(q, k)
    if p["inplace"]:
        q_in, k_in = lq * 1.0, lk * 1.0  # non-leaf copies (exact) that the op may modify
        outs = blockfuse.rotary(q_in, k_in, cos, sin, position_ids=ids, seq_offset=off, interleaved=p["interleaved"],
                                layout=p["layout"], inplace=True, **extra)
    else:
        outs = blockfuse.rotary(lq, lk, cos, sin, position_ids=ids, seq_offset=off, interleaved=p["interleaved"],
                                layout=p["layout"], out_layout=p["out_layout"], **extra)
    gr = autograd(outs, [lq, lk], gys)
    c.expect(unchanged(before, [q, k, cos, sin]), "an input was modified")
    for o, h, name in zip(outs, (p["hq"], p["hk"]), ("q_out", "k_out")):
        c.expect(o.dtype == dtype and tuple(o.shape) == shape(h, out_layout),
                 f"{name}: {o.dtype} {tuple(o.shape)}, expected {shape(h, out_layout)}")
        if not p["inplace"]:
            c.expect(o.is_contiguous(), f"{name}: not contiguous in out_layout {out_layout}")
    for g, t, name in zip(gr, (q, k), ("dq", "dk")):
        if g is not None:
            c.expect(g.dtype == dtype and g.shape == t.shape, f"{name}: {g.dtype} {tuple(g.shape)}")

    def reference(dt):
        a, b = leaves(q, k, dtype=dt)
        o = [_rotary_formula(t, ch, sh, p, out_layout) for t in (a, b)]
        return [x.detach() for x in o] + autograd(o, [a, b], [g.to(dt) for g in gys])

    base = reference(dtype)
    ref = reference(torch.float64)
    for name, a, b_, r in zip(["q_out", "k_out", "dq", "dk"], [o.detach() for o in outs] + gr, base, ref):
        c.compare(name, a, b_, r)
    return c


HEAD_DIMS = [48, 64, 72, 80, 96, 112, 128, 160, 192, 256]
GQA = [(8, 8), (8, 2), (6, 1), (4, 4), (12, 4), (5, 1), (3, 3)]
SEQS = [1, 7, 33, 2, 5]


def gen_rotary(rng):
    cases = []
    for d in HEAD_DIMS:
        for dt in DTYPES:
            for _ in range(2):
                hq, hk = rng.choice(GQA)
                seq = rng.choice(SEQS)
                batch = rng.choice([1, 1, 2, 3])
                interleaved = rng.random() < 0.3
                partial = rng.random() < 0.25
                rot = d if not partial else rng.choice([x for x in (d // 4, d // 2, 32, 16) if x % 2 == 0 and x < d
                                                        and x > 0])
                table = rng.choice(["half", "full", "full-lowp", "half-view", "per-token", "per-token-1"])
                positions = "none" if table.startswith("per-token") else rng.choice(
                    ["none", "offset", "ids", "ids-1d", "ids-int32", "ids-row"])
                layout = rng.choice(["bshd", "bhsd"])
                inplace = rng.random() < 0.12
                source = rng.choice(["contiguous", "contiguous", "qkv", "transposed"])
                if inplace:
                    source = "contiguous"
                cases.append(dict(d=d, rot=rot, dtype=dt, hq=hq, hk=hk, seq=seq, batch=batch, interleaved=interleaved,
                                  table=table, positions=positions, layout=layout,
                                  out_layout=None if inplace else rng.choice([None, "bshd", "bhsd"]),
                                  source=source, grad_layout=rng.choice(["contiguous", "transposed"]),
                                  pass_rotary_dim=partial or rng.random() < 0.2, inplace=inplace,
                                  seed=rng.randrange(10**6)))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# linear_act, fused_mlp, gated_mlp
# ----------------------------------------------------------------------------------------------------------------


from tests.ops.test_linear_act import _activate  # noqa: E402  (the activation in PyTorch, as the tests compute it)


def run_mlp(p):
    from blockfuse.ops.activation import ACTIVATIONS

    c = Case()
    dtype = DTYPES[p["dtype"]]
    d, h, d_out, act, s = p["d"], p["hidden"], p["d_out"], p["activation"], p["seed"]
    gated = ACTIVATIONS[act][1]
    separate = p.get("separate", False)
    rows1 = 2 * h if (gated and not separate) else h
    lead = tuple(p["lead"])
    x = rand((*lead, d), dtype, s, 1.0, 0.0, p["x_layout"])
    w1 = rand((rows1, d), dtype, s + 1, d ** -0.5, 0.0, p.get("w_layout", "contiguous"))
    b1 = rand((rows1,), dtype, s + 2, 0.5 if p["op"] == "linear_act" else 0.1) if p["bias"] else None
    if p["op"] == "linear_act":
        inputs = [x, w1, b1]
        out_width = h
    else:
        w2 = rand((d_out, h), dtype, s + 3, h ** -0.5)
        b2 = rand((d_out,), dtype, s + 4, 0.1) if p["bias"] else None
        wu = rand((h, d), dtype, s + 5, d ** -0.5) if separate else None
        bu = rand((h,), dtype, s + 6, 0.1) if (separate and p["bias"]) else None
        inputs = [x, w1, b1, w2, b2, wu, bu]
        out_width = d_out
    names = {"linear_act": ["x", "weight", "bias"],
             "fused_mlp": ["x", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "up_weight", "up_bias"],
             "gated_mlp": ["x", "gate_up_weight", "gate_up_bias", "down_weight", "down_bias", "up_weight",
                           "up_bias"]}[p["op"]]
    before = snapshot(*inputs)
    gy = rand((*lead, out_width), dtype, s + 100, layout=p["grad_layout"])

    def ours(t):
        if p["op"] == "linear_act":
            return blockfuse.linear_act(t[0], t[1], t[2], act)
        fn = blockfuse.fused_mlp if p["op"] == "fused_mlp" else blockfuse.gated_mlp
        return fn(t[0], t[1], t[2], t[3], t[4], act, up_weight=t[5], up_bias=t[6])

    def pytorch(t):
        if p["op"] == "linear_act":
            return _activate(F.linear(t[0], t[1], t[2]), act)
        pre = F.linear(t[0], t[1], t[2])
        if t[5] is not None:
            pre = torch.cat([pre, F.linear(t[0], t[5], t[6])], dim=-1)
        return F.linear(_activate(pre, act), t[3], t[4])

    lv = leaves(*inputs)
    y = ours(lv)
    c.expect(y.dtype == dtype and tuple(y.shape) == (*lead, out_width), f"out: {y.dtype} {tuple(y.shape)}")
    gr = autograd(y, lv, gy)
    c.expect(unchanged(before, inputs), "an input was modified")
    bl = leaves(*inputs)
    by = pytorch(bl)
    bg = autograd(by, bl, gy)
    rl = leaves(*inputs, dtype=torch.float64)
    ry = pytorch(rl)
    rg = autograd(ry, rl, gy.double())
    rt = torch.bfloat16 if dtype == torch.bfloat16 else None
    c.compare("out", y.detach(), by.detach(), ry.detach(), rounded_through=rt)
    for name, a, b_, r, t in zip(names, gr, bg, rg, inputs):
        if t is not None:
            if a is not None:
                c.expect(a.dtype == t.dtype and a.shape == t.shape, f"d{name}: {a.dtype} {tuple(a.shape)}")
            c.compare("d" + name, a, b_, r, rounded_through=rt)
    return c


MLP_SHAPES = [(576, 1536), (896, 4864), (1152, 4304), (1280, 5120), (2560, 6912), (2880, 2880), (3584, 1152),
              (4304, 1152), (5120, 576), (9216, 576), (11008, 896), (13824, 576), (14336, 576), (16400, 100),
              (18944, 576), (576, 18944), (17, 1001), (100, 4097), (1001, 3), (3, 8193), (1, 17), (4097, 100)]


def gen_mlp(rng):
    from blockfuse.ops.activation import ACTIVATIONS, GATED

    cases = []
    for d, h in MLP_SHAPES:
        for dt in DTYPES:
            op = rng.choice(["linear_act", "fused_mlp", "gated_mlp"])
            act = rng.choice(list(GATED) if op == "gated_mlp" else list(ACTIVATIONS))
            gated = ACTIVATIONS[act][1]
            cases.append(dict(op=op, activation=act, d=d, hidden=h, d_out=rng.choice([d, 576, 1001, 3]),
                              dtype=dt, lead=rng.choice(LEADS), seed=rng.randrange(10**6),
                              bias=rng.random() < 0.6, separate=(op != "linear_act" and gated and rng.random() < 0.4),
                              x_layout=rng.choice(["contiguous", "slice", "transposed", "strided"]),
                              w_layout=rng.choice(["contiguous", "contiguous", "transposed"]),
                              grad_layout=rng.choice(["contiguous", "transposed"])))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# linear_cross_entropy
# ----------------------------------------------------------------------------------------------------------------


def run_ce(p):
    c = Case()
    dtype = DTYPES[p["dtype"]]
    d, vocab, lead, s = p["d"], p["vocab"], tuple(p["lead"]), p["seed"]
    hidden = rand((*lead, d), dtype, s, 1.0, 0.0, p["h_layout"])
    weight = rand((vocab, d), dtype, s + 1, 2.0 / d ** 0.5)
    bias = rand((vocab,), dtype, s + 2, 0.5) if p["bias"] else None
    g = torch.Generator().manual_seed(s + 3)
    target = torch.randint(0, vocab, lead, generator=g, device="cpu").to(DEVICE)
    ii = p["ignore_index"]
    mask = (torch.rand(lead, generator=g, device="cpu") < p["ignored"]).to(DEVICE)
    target[mask] = ii
    if p["reduction"] == "mean" and bool((target == ii).all()):
        target.view(-1)[0] = 1 if ii == 0 else 0  # keep one token that counts (mean over none is NaN)
    if p["target_dtype"] == "int32":
        target = target.to(torch.int32)
    kw = dict(ignore_index=ii, label_smoothing=p["smoothing"], softcap=p["softcap"], z_loss=p["z_loss"],
              reduction=p["reduction"])
    inputs = [hidden, weight, bias]
    before = snapshot(hidden, weight, bias, target)

    def run(fn, tensors, with_lse, reference=False, **extra):
        lv = leaves(*tensors)
        # the reference's F.cross_entropy takes int64 targets only; the op is given the case's dtype
        out = fn(lv[0], lv[1], target.long() if reference else target, lv[2], return_lse=with_lse, **kw, **extra)
        loss, lse = out if with_lse else (out, None)
        if loss.dim():
            gl = rand(loss.shape, torch.float32, s + 9)
        else:
            gl = torch.tensor(0.5 + abs(rand((), torch.float32, s + 9).item()))
        gr = autograd(loss, lv, gl.to(loss.dtype))
        return loss.detach(), None if lse is None else lse.detach(), gr

    extra = {} if p["chunk_size"] is None else {"chunk_size": p["chunk_size"]}
    ours = run(blockfuse.linear_cross_entropy, inputs, p["return_lse"], **extra)
    c.expect(unchanged(before, [hidden, weight, bias, target]), "an input was modified")
    exp_shape = lead if p["reduction"] == "none" else ()
    c.expect(tuple(ours[0].shape) == tuple(exp_shape), f"loss shape {tuple(ours[0].shape)}, expected {exp_shape}")
    c.expect(ours[0].dtype == torch.float32, f"loss dtype {ours[0].dtype}, expected float32")
    base = run(ORIGINAL["linear_cross_entropy_ref"], inputs, True, reference=True)
    ref = run(ORIGINAL["linear_cross_entropy_ref"], [None if t is None else t.double() for t in inputs], True,
              reference=True)
    c.compare("loss", ours[0], base[0], ref[0].float(), rounded_through=dtype)
    if p["return_lse"]:
        c.expect(ours[1].dtype == torch.float32 and tuple(ours[1].shape) == lead,
                 f"lse: {ours[1].dtype} {tuple(ours[1].shape)}")
        c.compare("lse", ours[1], base[1], ref[1], rounded_through=dtype)
    for name, a, b_, r, t in zip(["d hidden", "d weight", "d bias"], ours[2], base[2], ref[2], inputs):
        if t is not None:
            if a is not None:
                c.expect(a.dtype == t.dtype and a.shape == t.shape, f"{name}: {a.dtype} {tuple(a.shape)}")
            c.compare(name, a, b_, r)
    return c


CE_SHAPES = [(576, 49152 + 1), (896, 151655 // 8), (1152, 32001), (1280, 4099), (2560, 50257 // 4), (2880, 201),
             (3584, 1), (4304, 7), (5120, 1000), (6656, 2049), (9216, 301), (11008, 1023), (13824, 513),
             (14336, 17), (16400, 999), (18944, 257), (17, 50257), (100, 32003), (1001, 12345), (3, 8193),
             (1, 65), (8193, 129)]


# (a GPU's cases to about 2000 tokens: the float64 oracle's logits, [tokens, vocab], are 8 bytes an element)
CE_LEADS = [lead for lead in LEADS if math.prod(lead) <= 2200]


def gen_ce(rng):
    cases = []
    for d, vocab in CE_SHAPES:
        for dt in DTYPES:
            ii = rng.choice([-100, -100, -1, 0, 5]) if vocab > 1 else -100
            cases.append(dict(d=d, vocab=vocab, dtype=dt, lead=rng.choice(CE_LEADS), seed=rng.randrange(10**6),
                              bias=rng.random() < 0.4, ignore_index=ii, ignored=rng.choice([0.0, 0.2, 0.5]),
                              reduction=rng.choice(["mean", "sum", "none"]),
                              smoothing=rng.choice([0.0, 0.0, 0.1]), softcap=rng.choice([None, None, 30.0, 3.0]),
                              z_loss=rng.choice([0.0, 0.0, 1e-3]), return_lse=rng.random() < 0.3,
                              chunk_size=rng.choice([None, None, 1, 2, 3, "low-memory"]),
                              target_dtype=rng.choice(["int64", "int64", "int32"]),
                              h_layout=rng.choice(["contiguous", "slice", "transposed", "strided"])))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# Edge shapes: no rows, 1-D inputs (no leading dims)
# ----------------------------------------------------------------------------------------------------------------


def run_edge(p):
    """Forward and backward run without error; empty outputs have the right shapes; 1-D agrees with 2-D."""
    c = Case()
    dtype = DTYPES[p["dtype"]]
    n = p["n"]
    shape = tuple(p["shape"])
    x = rand(shape, dtype, 1, 2.0, 0.5)
    w = rand((n,), dtype, 2, 0.5, 1.0)
    b = rand((n,), dtype, 3, 0.5)
    op = p["op"]
    lv = leaves(x, w, b)
    if op == "layer_norm":
        y = blockfuse.layer_norm(lv[0], lv[1], lv[2])
        y64 = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    elif op == "rms_norm":
        y = blockfuse.rms_norm(lv[0], lv[1])
        y64 = F.rms_norm(x.double(), (n,), w.double(), 1e-6)
    elif op == "layer_norm_gelu":
        y = blockfuse.layer_norm_gelu(lv[0], lv[1], lv[2])
        y64 = F.gelu(F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5), approximate="tanh")
    elif op == "swiglu":
        y = blockfuse.swiglu(lv[0])
        g_, u_ = x.double().chunk(2, -1)
        y64 = F.silu(g_) * u_
    elif op == "bias_dropout_add":
        y = blockfuse.bias_dropout_add(lv[0], lv[2], lv[0].detach().clone(), 0.0)
        y64 = 2 * x.double() + b.double()
    else:
        raise ValueError(op)
    c.expect(tuple(y.shape) == tuple(y64.shape), f"shape {tuple(y.shape)} vs {tuple(y64.shape)}")
    gy = rand(y.shape, dtype, 4) + 0.1
    gr = autograd(y, lv, gy)
    if y.numel():
        err = relative_error(y, y64)
        c.expect(err < {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype],
                 f"forward rel err {err:.3e} against float64")
    for g, t, name in zip(gr, lv, ["dx", "dweight", "dbias"]):
        if g is not None:
            c.expect(tuple(g.shape) == tuple(t.shape), f"{name}: shape {tuple(g.shape)}")
            c.expect(bool(torch.isfinite(g).all()), f"{name}: non-finite")
            if x.numel() == 0 and name != "dx":
                c.expect(bool((g == 0).all()), f"{name}: not zero for no rows")
    return c


def gen_edge(rng):
    cases = []
    for op in ["layer_norm", "rms_norm", "layer_norm_gelu", "swiglu", "bias_dropout_add"]:
        for shape in [(0, 576), (2, 0, 1152), (576,), (4097,), (16400,), (0, 16400), (1, 1), (7, 1)]:
            if op == "swiglu" and shape[-1] % 2:
                continue  # packed needs an even width (checked among the bad inputs)
            cases.append(dict(op=op, dtype=rng.choice(list(DTYPES)), shape=shape, n=shape[-1] if op != "swiglu"
                              else shape[-1]))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# Bad inputs: is there an error, and does its message name the argument and what was expected?
# ----------------------------------------------------------------------------------------------------------------


def bad_calls():
    x = torch.randn(3, 64)
    xb = x.bfloat16()
    w = torch.randn(64)
    meta_w = torch.empty(64, device="meta")
    xi = torch.randint(0, 5, (3, 64))
    q = torch.randn(1, 4, 8, 64)
    k = torch.randn(1, 4, 2, 64)
    cos = torch.randn(10, 32)
    sin = torch.randn(10, 32)
    h = torch.randn(5, 32)
    lm = torch.randn(101, 32)
    t = torch.randint(0, 101, (5,))
    ln, rms, gelu = blockfuse.layer_norm, blockfuse.rms_norm, blockfuse.layer_norm_gelu
    # (name, call, words the message should contain: the argument and what was expected)
    return [
        ("layer_norm weight of wrong width", lambda: ln(x, torch.randn(63)), ["weight", "64"]),
        ("layer_norm weight 2-D", lambda: ln(x, torch.randn(1, 64)), ["weight", "64"]),
        ("layer_norm bias of wrong width", lambda: ln(x, w, torch.randn(65)), ["bias", "64"]),
        ("layer_norm int x", lambda: ln(xi), ["x", "int64"]),
        ("layer_norm int weight", lambda: ln(x, torch.ones(64, dtype=torch.int32)), ["weight", "int32"]),
        ("layer_norm weight on meta", lambda: ln(x, meta_w), ["weight", "meta"]),
        ("layer_norm residual of other dtype", lambda: ln(x, w, residual=xb), ["residual", "bfloat16"]),
        ("layer_norm residual of other shape", lambda: ln(x, w, residual=torch.randn(2, 64)), ["residual", "(3, 64)"]),
        ("layer_norm residual on meta", lambda: ln(x, w, residual=torch.empty(3, 64, device="meta")),
         ["residual", "meta"]),
        ("layer_norm bad residual_mode", lambda: ln(x, w, residual=x, residual_mode="middle"), ["residual_mode"]),
        ("layer_norm eps=0", lambda: ln(x, w, eps=0.0), ["eps"]),
        ("layer_norm eps negative", lambda: ln(x, w, eps=-1e-5), ["eps"]),
        ("layer_norm dropout without residual", lambda: ln(x, w, dropout_p=0.1), ["dropout_p", "residual"]),
        ("layer_norm dropout_p=1", lambda: ln(x, w, residual=x, dropout_p=1.0), ["dropout_p"]),
        ("layer_norm scalar x", lambda: ln(torch.tensor(1.0)), ["x"]),
        ("layer_norm x not a tensor", lambda: ln([1.0, 2.0]), ["x", "Tensor"]),
        ("layer_norm bf16 x with fp64 weight", lambda: ln(xb, w.double()), ["weight"]),
        ("layer_norm fp16 x with bf16 weight", lambda: ln(x.half(), w.bfloat16()), ["weight"]),
        ("layer_norm fp8 bad recipe", lambda: ln(x, w, fp8="columnwise"), ["fp8", "rowwise"]),
        ("layer_norm fp8 with grad", lambda: ln(x.clone().requires_grad_(), w, fp8="rowwise"), ["fp8"]),
        ("rms_norm weight of wrong width", lambda: rms(x, torch.randn(32)), ["weight", "64"]),
        ("rms_norm int x", lambda: rms(xi), ["x", "int64"]),
        ("rms_norm weight on meta", lambda: rms(x, meta_w), ["weight", "meta"]),
        ("rms_norm residual of other dtype", lambda: rms(x, w, residual=x.half()), ["residual", "float16"]),
        ("layer_norm_gelu bad approximate", lambda: gelu(x, w, approximate="erf"), ["approximate"]),
        ("layer_norm_gelu weight of wrong width", lambda: gelu(x, torch.randn(3)), ["weight", "64"]),
        ("swiglu up of other shape", lambda: blockfuse.swiglu(x, torch.randn(3, 63)), ["up", "(3, 64)"]),
        ("swiglu up of other dtype", lambda: blockfuse.swiglu(x, xb), ["up", "bfloat16"]),
        ("swiglu packed odd width", lambda: blockfuse.swiglu(torch.randn(3, 63)), ["gate", "63"]),
        ("swiglu int gate", lambda: blockfuse.swiglu(xi), ["gate", "int64"]),
        ("swiglu up on meta", lambda: blockfuse.swiglu(x, torch.empty(3, 64, device="meta")), ["up", "meta"]),
        ("geglu bad approximate", lambda: blockfuse.geglu(x, x, "sigmoid"), ["approximate"]),
        ("geglu broadcastable up", lambda: blockfuse.geglu(x, torch.randn(64)), ["up"]),
        ("bias_dropout_add bias wrong width", lambda: blockfuse.bias_dropout_add(x, torch.randn(65), x, 0.0),
         ["bias", "64"]),
        ("bias_dropout_add residual other dtype", lambda: blockfuse.bias_dropout_add(x, None, xb, 0.0),
         ["residual", "bfloat16"]),
        ("bias_dropout_add int x", lambda: blockfuse.bias_dropout_add(xi, None, xi, 0.0), ["x", "int64"]),
        ("bias_dropout_add p=1", lambda: blockfuse.bias_dropout_add(x, None, x, 1.0), ["p"]),
        ("bias_dropout_add p=-0.1", lambda: blockfuse.bias_dropout_add(x, None, x, -0.1), ["p"]),
        ("bias_dropout_add bias on meta", lambda: blockfuse.bias_dropout_add(x, meta_w, x, 0.0), ["bias", "meta"]),
        ("bias_dropout_add int bias", lambda: blockfuse.bias_dropout_add(x, torch.ones(64, dtype=torch.int64), x, 0.0),
         ["bias", "int64"]),
        ("rotary 3-D q", lambda: blockfuse.rotary(q[0], k, cos, sin), ["q", "4"]),
        ("rotary k heads not dividing q heads", lambda: blockfuse.rotary(q, torch.randn(1, 4, 3, 64), cos, sin),
         ["k", "8", "3"]),
        ("rotary k other head_dim", lambda: blockfuse.rotary(q, torch.randn(1, 4, 2, 32), cos, sin),
         ["k", "head_dim"]),
        ("rotary k other dtype", lambda: blockfuse.rotary(q, k.half(), cos, sin), ["k", "float16"]),
        ("rotary k other seq", lambda: blockfuse.rotary(q, torch.randn(1, 5, 2, 64), cos, sin), ["k", "seq"]),
        ("rotary int q", lambda: blockfuse.rotary(q.long(), k.long(), cos, sin), ["q", "int64"]),
        ("rotary table too short", lambda: blockfuse.rotary(q, k, cos[:3], sin[:3]), ["cos", "4"]),
        ("rotary sin of other shape", lambda: blockfuse.rotary(q, k, cos, sin[:, :16]), ["sin"]),
        ("rotary table wider than head", lambda: blockfuse.rotary(q, k, torch.randn(10, 128), torch.randn(10, 128)),
         ["cos", "64"]),
        ("rotary odd table width 2-D", lambda: blockfuse.rotary(q, k, torch.randn(10, 33), torch.randn(10, 33)),
         ["cos"]),
        ("rotary float position_ids", lambda: blockfuse.rotary(q, k, cos, sin, position_ids=torch.zeros(4)),
         ["position_ids", "int"]),
        ("rotary position_ids wrong shape", lambda: blockfuse.rotary(q, k, cos, sin,
                                                                      position_ids=torch.zeros(3, dtype=torch.long)),
         ["position_ids", "4"]),
        ("rotary bad layout", lambda: blockfuse.rotary(q, k, cos, sin, layout="sbhd"), ["layout"]),
        ("rotary negative seq_offset", lambda: blockfuse.rotary(q, k, cos, sin, seq_offset=-1), ["seq_offset"]),
        ("rotary int cos", lambda: blockfuse.rotary(q, k, cos.long(), sin.long()), ["cos"]),
        ("rotary cos on meta", lambda: blockfuse.rotary(q, k, cos.to("meta"), sin.to("meta")), ["cos", "meta"]),
        ("rotary odd rotary_dim", lambda: blockfuse.rotary(q, k, cos, sin, rotary_dim=63), ["rotary_dim"]),
        ("rotary position out of table (documented NaN)",
         lambda: _nan_or_raise(blockfuse.rotary(q, k, cos, sin, position_ids=torch.full((4,), 50)))[0],
         ["position"]),
        ("linear_act weight wrong K", lambda: blockfuse.linear_act(x, torch.randn(32, 63)), ["weight", "64"]),
        ("linear_act weight other dtype", lambda: blockfuse.linear_act(x, torch.randn(32, 64).bfloat16()),
         ["weight", "bfloat16"]),
        ("linear_act bias wrong size", lambda: blockfuse.linear_act(x, torch.randn(32, 64), torch.randn(31)),
         ["bias", "32"]),
        ("linear_act gated odd rows", lambda: blockfuse.linear_act(x, torch.randn(33, 64), None, "swiglu"),
         ["weight", "33"]),
        ("linear_act bad activation", lambda: blockfuse.linear_act(x, torch.randn(32, 64), None, "tanh"),
         ["activation"]),
        ("linear_act int x", lambda: blockfuse.linear_act(xi, torch.randn(32, 64)), ["x", "int64"]),
        ("linear_act weight on meta", lambda: blockfuse.linear_act(x, torch.empty(32, 64, device="meta")),
         ["weight", "meta"]),
        ("gated_mlp down_weight wrong hidden", lambda: blockfuse.gated_mlp(x, torch.randn(64, 64), None,
                                                                           torch.randn(64, 31)),
         ["down_weight", "32"]),
        ("gated_mlp non-gated activation", lambda: blockfuse.gated_mlp(x, torch.randn(64, 64), None,
                                                                       torch.randn(64, 32), None, "gelu"),
         ["activation"]),
        ("gated_mlp up_weight wrong shape", lambda: blockfuse.gated_mlp(
            x, torch.randn(32, 64), None, torch.randn(64, 32), up_weight=torch.randn(31, 64)),
         ["up_weight", "(32, 64)"]),
        ("fused_mlp fc2 other dtype", lambda: blockfuse.fused_mlp(
            x, torch.randn(32, 64), None, torch.randn(64, 32).half()), ["fc2_weight", "float16"]),
        ("fused_mlp up_bias without up_weight", lambda: blockfuse.fused_mlp(x, torch.randn(64, 64), None,
                                                                            torch.randn(64, 32), None, "swiglu",
                                                                            up_bias=torch.randn(32)), ["up_bias"]),
        ("cross_entropy weight wrong width", lambda: blockfuse.linear_cross_entropy(h, torch.randn(101, 31), t),
         ["weight", "32"]),
        ("cross_entropy weight other dtype", lambda: blockfuse.linear_cross_entropy(h, lm.half(), t),
         ["weight", "float16"]),
        ("cross_entropy float target", lambda: blockfuse.linear_cross_entropy(h, lm, t.float()), ["target"]),
        ("cross_entropy target wrong shape", lambda: blockfuse.linear_cross_entropy(h, lm, t[:4]), ["target", "5"]),
        ("cross_entropy target out of range",
         lambda: _nan_loss_on_gpu(blockfuse.linear_cross_entropy(h, lm, torch.full((5,), 101))), ["target", "101"]),
        ("cross_entropy negative target (not ignore_index)",
         lambda: _nan_loss_on_gpu(blockfuse.linear_cross_entropy(h, lm, torch.full((5,), -1))), ["target", "-1"]),
        ("cross_entropy bad reduction", lambda: blockfuse.linear_cross_entropy(h, lm, t, reduction="avg"),
         ["reduction"]),
        ("cross_entropy bias wrong size", lambda: blockfuse.linear_cross_entropy(h, lm, t, torch.randn(100)),
         ["bias", "101"]),
        ("cross_entropy chunk_size 0", lambda: blockfuse.linear_cross_entropy(h, lm, t, chunk_size=0),
         ["chunk_size"]),
        ("cross_entropy label_smoothing 2", lambda: blockfuse.linear_cross_entropy(h, lm, t, label_smoothing=2.0),
         ["label_smoothing"]),
        ("cross_entropy int hidden", lambda: blockfuse.linear_cross_entropy(h.long(), lm.long(), t), ["hidden"]),
        ("cross_entropy target on meta", lambda: blockfuse.linear_cross_entropy(h, lm, t.to("meta")),
         ["target", "meta"]),
        ("cross_entropy bool target", lambda: blockfuse.linear_cross_entropy(h, lm, t > 3), ["target", "bool"]),
        ("cross_entropy softcap 0", lambda: blockfuse.linear_cross_entropy(h, lm, t, softcap=0.0), ["softcap"]),
    ]


def _nan_or_raise(outs):
    q_out = outs[0]
    if torch.isnan(q_out).any():
        raise RuntimeError("no error raised: the documented behaviour, NaN rows in q_out")
    return outs


def _nan_loss_on_gpu(loss):
    """linear_cross_entropy's documented answer to a bad target on CUDA (checking it would wait for the GPU): a NaN
    loss. Raised as an error that names no argument, so that it is reported beside the calls that raise; a loss that
    is a number is returned (a silently wrong result: NO ERROR)."""
    if loss.is_cuda and torch.isnan(loss).all():
        raise RuntimeError("no error raised: the documented behaviour on CUDA, a NaN loss")
    return loss


def run_bad():
    rows = []
    for name, call, words in bad_calls():
        try:
            result = call()
            rows.append(dict(name=name, raised=False, type=None,
                             message=f"NO ERROR (returned {type(result).__name__})", names_arg=False, words=words))
        except Exception as error:  # noqa: BLE001
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            full = str(error)
            names_arg = all(wd.lower() in full.lower() for wd in words)
            rows.append(dict(name=name, raised=True, type=type(error).__name__, message=message[:300],
                             names_arg=names_arg, words=words))
    return rows


# ----------------------------------------------------------------------------------------------------------------
# fp8_linear (group "linear"): the FP8 GEMMs of a linear layer, forward and backward, every recipe
# ----------------------------------------------------------------------------------------------------------------

LINEAR_SIZES = [16, 48, 64, 80, 112, 144, 208, 272, 576, 1152]  # multiples of 16 (what FP8 GEMMs take)


def run_linear(p):
    """``fp8_linear`` against float64 within the tests' elementwise FP8 bounds (tests/ops/test_fp8.py: the operands'
    quantization errors carried through the GEMMs, plus the output's rounding), forward and both gradients, and
    against ``fp8_linear_ref`` (the same quantized operands) within its tolerance. Delayed scaling: two calls on the
    same operands, the second checked (its scales are the first call's amaxes, as the bounds assume)."""
    from blockfuse.ops.fp8 import Float8Scaling, fp8_linear, fp8_linear_ref
    from tests.ops.test_fp8 import (
        forward_bound, gradient_bounds, reference_tolerance as linear_tolerance, wide_range,
    )

    c = Case()
    dtype = DTYPES[p["dtype"]]
    shape = (*p["lead"], p["k"])
    n, seed = p["n"], p["seed"]
    if p["values"] == "wide":  # many binades, some under FP8's normal range after scaling
        with torch.device("cpu"):  # (its generator is a CPU one)
            x = wide_range(shape, torch.float32, seed=seed).to(dtype).to(DEVICE)
    else:
        x = rand(shape, dtype, seed, scale=p["scale"])
    weight = rand((n, p["k"]), dtype, seed + 1, scale=p["k"] ** -0.5)
    bias = rand((n,), dtype, seed + 2, scale=0.1) if p["bias"] else None
    x = as_layout(x, p["x_layout"])
    dy = rand((*p["lead"], n), dtype, seed + 3)
    recipe = p["recipe"]
    scaling = (Float8Scaling.new(16, DEVICE), Float8Scaling.new(16, DEVICE)) if recipe == "delayed" else None
    before = snapshot(x, weight, bias)
    for _ in range(2 if recipe == "delayed" else 1):
        leaves_ = [None if t is None else t.detach().clone().requires_grad_() for t in (x, weight, bias)]
        leaves_[0] = as_layout(x.detach().clone(), p["x_layout"]).requires_grad_() if p["x_layout"] != "contiguous" \
            else leaves_[0]
        states = None if scaling is None else tuple(Float8Scaling(*state) for state in scaling)
        y = fp8_linear(leaves_[0], leaves_[1], leaves_[2], recipe=recipe, fp8_scaling=states)
        y.backward(dy)
    c.expect(unchanged(before, [x, weight, bias]), "an input was modified")
    c.expect(y.dtype == dtype and tuple(y.shape) == (*p["lead"], n), f"y: {y.dtype} {tuple(y.shape)}")
    bound_recipe = "tensorwise" if recipe == "delayed" else recipe
    exact = [None if t is None else t.detach().double().requires_grad_() for t in (x, weight, bias)]
    y64 = F.linear(*exact)
    y64.backward(dy.double())
    x2, dy2 = x.reshape(-1, p["k"]), dy.reshape(-1, n)
    checks = [("output", y, y64, forward_bound(x, weight, bias, bound_recipe, dtype))]
    dx_bound, dw_bound = gradient_bounds(x2, weight, dy2, bound_recipe)
    checks += [("x grad", leaves_[0].grad.reshape(-1, p["k"]), exact[0].grad.reshape(-1, p["k"]), dx_bound),
               ("weight grad", leaves_[1].grad, exact[1].grad, dw_bound)]
    for name, ours, truth, bound in checks:
        if ours is None or tuple(ours.shape) != tuple(truth.shape):
            c.expect(False, f"{name}: {None if ours is None else tuple(ours.shape)} vs {tuple(truth.shape)}")
            continue
        worst = ((ours.double() - truth.detach()).abs() / bound).max().item()
        c.expect(bool(torch.isfinite(ours).all()), f"{name}: NaN or inf")
        c.expect(worst <= 1.0, f"{name} ({recipe}, {p['dtype']}): error {worst:.3f}x its FP8 bound")
        c.comparisons.append(dict(name=f"{name} / FP8 bound", dtype=p["dtype"], ours=worst, torch=float("nan"),
                                  tol=1.0, factor=float("nan"), floor=float("nan"), ok=worst <= 1.0))
    if bias is not None:
        db = leaves_[2].grad
        rel = relative_error(db, exact[2].grad)
        c.expect(rel < 2 * {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype] + 1e-6,
                 f"bias grad: rel err {rel:.3e}")
    if recipe != "delayed":
        with torch.no_grad():
            reference = fp8_linear_ref(x, weight, bias, recipe=recipe)
        rel = relative_error(y.detach(), reference)
        tol = linear_tolerance(recipe, dtype, DEVICE)
        if DEVICE == "cuda":
            # NOTE: the tests' tolerance was measured at K <= 96. The forward GEMM accumulates fast: FP8 tensor cores
            # keep about 14 bits of the sum (gemm_error_bound's 2^-13), and each 32-deep MMA step adds to it, so up to
            # 2^-13 of the output a step (the 2026-12-06 GPU fuzz: 5.7e-4 at K 1152, 3.0e-4 at K 80 with wide values).
            tol = max(tol, math.ceil(p["k"] / 32) * 2.0**-13)
        c.expect(rel < tol, f"output vs fp8_linear_ref: rel err {rel:.3e} (tol {tol:.1e})")
    return c


def gen_linear(rng):
    cases = []
    for k in LINEAR_SIZES:
        for recipe in ("tensorwise", "rowwise", "delayed"):
            dt = rng.choice(["fp32", "bf16", "fp16"])
            cases.append(dict(k=k, n=rng.choice(LINEAR_SIZES), recipe=recipe, dtype=dt,
                              lead=rng.choice(LEADS + [(199,), (1, 33)]), seed=rng.randrange(10**6),
                              bias=rng.random() < 0.7,
                              x_layout=rng.choice(["contiguous", "slice", "transposed"]),
                              values=rng.choice(["plain", "plain", "wide"]),
                              scale=rng.choice([1.0, 1e-3, 300.0])))
    return cases


# ----------------------------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------------------------

GROUPS = {
    "norm": (gen_norm, run_norm),
    "gelu": (gen_gelu, run_norm),
    "fp8": (gen_fp8, run_fp8),
    "gated": (gen_gated, run_gated),
    "bda": (gen_bda, run_bda),
    "rotary": (gen_rotary, run_rotary),
    "mlp": (gen_mlp, run_mlp),
    "ce": (gen_ce, run_ce),
    "edge": (gen_edge, run_edge),
    "linear": (gen_linear, run_linear),
}


def op_name(group, p):
    if group == "linear":
        return f"fp8_linear {p['recipe']}"
    if group in ("norm", "gelu", "fp8", "mlp"):
        return p["op"] + (" fp8" if group == "fp8" else "")
    if group == "gated":
        return p["op"] if p["op"] == "swiglu" else f"geglu-{p['approximate']}"
    if group == "edge":
        return "edge:" + p["op"]
    return {"bda": "bias_dropout_add", "rotary": "rotary", "ce": "linear_cross_entropy"}[group]


def run_case(group, params):
    """Run one case; returns (problems, comparisons, seconds, ref calls). Each comparison notes the case's input
    dtype ("case_dtype"; an fp16 op's loss is fp32)."""
    REF_CALLS.clear()
    start = time.time()
    try:
        case = GROUPS[group][1](params)
        problems, comparisons = case.problems, case.comparisons
    except Exception as error:  # noqa: BLE001
        problems = ["EXCEPTION " + "".join(traceback.format_exception_only(type(error), error)).strip()[:2000]
                    + "\n" + "".join(traceback.format_tb(error.__traceback__)[-3:])[-1500:]]
        comparisons = []
    for cm in comparisons:
        cm["case_dtype"] = params.get("dtype")
    if DEVICE == "cuda":
        torch.cuda.empty_cache()  # (shards side by side share the card: none keeps its largest case's blocks)
    ref_calls = dict(REF_CALLS)
    if takes_reference(group, params):
        if not ref_calls:
            problems.append("the op took the kernels where its rule sends the call to the reference")
    elif ref_calls:
        problems.append(f"the op took its reference, not the kernels: {ref_calls}")
    return problems, comparisons, time.time() - start, ref_calls


def takes_reference(group, params) -> bool:
    """A call the op sends to its reference by design: a pre-residual norm (with or without its FP8 output) on rows
    narrower than ops/norm.py's PRE_MIN_LANES in a 16-bit dtype (the NOTE above it; the fuzz of 2026-12-04 found those
    rows)."""
    return (group in ("norm", "fp8") and params.get("mode") == "pre" and params["n"] < norm_mod.TUNING.pre_min_lanes
            and params["dtype"] != "fp32")


def summarize(paths) -> None:
    """Prints what result files (``--out``, one per shard) hold: cases and failing cases a group, then each failing
    case with its problems, then the bad calls without an error that names the argument."""
    cases, bad = [], []
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            results = json.load(f)
        cases += results.get("cases", [])
        bad += results.get("bad", [])
    by_group = defaultdict(list)
    for case in cases:
        by_group[case["group"]].append(case)
    failing = []
    for group, rows in by_group.items():
        bad_rows = [c for c in rows if any(not pr.startswith("NOTE") for pr in c["problems"])]
        failing += bad_rows
        ratios = [cm["ours"] / cm["torch"] for c in rows for cm in c["comparisons"]
                  if cm.get("torch") and cm["torch"] > 0 and not math.isnan(cm["torch"])]
        # (comparisons against a bound, not PyTorch's error: `fp8_linear`'s, whose "torch" is NaN; ours / tol)
        bounds = [cm["ours"] / cm["tol"] for c in rows for cm in c["comparisons"]
                  if isinstance(cm.get("torch"), float) and math.isnan(cm["torch"]) and cm.get("tol")]
        worst = f"worst error ratio to PyTorch's {max(ratios):.2f}" if ratios else ""
        if bounds:
            worst += f"{'; ' if worst else ''}worst fraction of a bound {max(bounds):.2f}"
        print(f"{group}: {len(rows)} cases, {len(bad_rows)} failing, {worst or 'no comparisons'}")
    print(f"all: {len(cases)} cases, {len(failing)} failing; bad calls {len(bad)}, "
          f"{sum(not row['names_arg'] for row in bad)} without an error naming the argument")
    for case in failing:
        print(f"FAIL {case['group']} {json.dumps(case['params'])}")
        for problem in case["problems"]:
            print("    " + problem.replace("\n", "\n    "))
    for row in bad:
        if not row["names_arg"]:
            print(f"bad call {row['name']}: {row['type']}: {row['message'][:200]}")


def main():
    if sys.argv[1:2] == ["--summarize"]:
        summarize(sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", default="norm,gelu,fp8,gated,bda,rotary,mlp,ce,edge,linear,bad")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="fuzz-results.json")
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases a group (0: all)")
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="run the cases whose index in their group is I modulo N (N processes side by side: on a "
                             "GPU the compiles of a case's new kernels are most of its time)")
    args = parser.parse_args()
    try:
        shard, shards = (int(v) for v in args.shard.split("/"))
        assert 0 <= shard < shards
    except (ValueError, AssertionError):
        parser.error(f"--shard: expected I/N with 0 <= I < N, got {args.shard!r}")
    results = {"cases": [], "bad": [], "seed": args.seed}
    if os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        groups_now = set(args.groups.split(","))
        results["cases"] = [c for c in old.get("cases", []) if c["group"] not in groups_now]
        results["bad"] = old.get("bad", []) if "bad" not in groups_now else []
    t0 = time.time()
    for group in args.groups.split(","):
        if group == "bad":
            if shard:
                continue  # (one shard makes the bad calls)
            results["bad"] = run_bad()
            for row in results["bad"]:
                print(f"[bad] {row['name']}: {row['type']}: {row['message'][:160]} "
                      f"{'' if row['names_arg'] else '  <-- unclear or no error'}", flush=True)
            continue
        rng = random.Random(f"{args.seed}-{group}")
        cases = GROUPS[group][0](rng)
        if args.limit:
            cases = cases[: args.limit]
        cases = cases[shard::shards]
        g0 = time.time()
        fails = 0
        for i, params in enumerate(cases):
            problems, comparisons, seconds, _ = run_case(group, params)
            results["cases"].append(dict(group=group, op=op_name(group, params), params=params, problems=problems,
                                         comparisons=comparisons, seconds=seconds))
            worst = max([cm["ours"] / cm["torch"] for cm in comparisons if cm["torch"] and cm["torch"] > 0
                         and not math.isnan(cm["torch"])] or [float("nan")])
            real = [pr for pr in problems if not pr.startswith("NOTE")]
            status = "FAIL" if real else ("note" if problems else "ok")
            fails += bool(real)
            print(f"[{group} {i + 1}/{len(cases)} {time.time() - t0:6.0f}s] {status} {seconds:5.1f}s "
                  f"worst ratio {worst:5.2f} {json.dumps(params)}", flush=True)
            for pr in problems:
                print("    " + pr.replace("\n", "\n    "), flush=True)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1, default=str)
        print(f"== {group}: {len(cases)} cases, {fails} failing, {time.time() - g0:.0f}s", flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
