"""Every kernel launch the ops make, compiled for a Hopper GPU (sm_90) on this CPU-only machine.

The interpreter runs a kernel as Python and accepts code that the GPU compiler rejects (a global
that is not ``constexpr``, a block shape that is not a power of two, a ``num_warps`` that is not one).
This test records the launches the op tests' kinds of calls make in the interpreter (argument
types, constants, warps), then compiles them with Triton's own compiler and ptxas (shipped with the
``triton`` wheel) for ``GPUTarget("cuda", 90, 32)``, in a subprocess without the interpreter: every
specialization (a kernel's constants, warps and options) once, and every kernel with each set of
pointer dtypes it was called with once (``_covering``: 93 builds of the 157 distinct launches on
2026-11-29, where each op ran in bf16 and again in fp32 with the same constants). It needs no GPU;
it fails on any build the GPU compiler refuses. Each launch is built as the launch specializes it (an int equal to 1
a constant, multiples of 16 and 16-byte-aligned pointers with the divisibility hint), with the Triton imported here
and with each of ``BLOCKFUSE_SM90_TRITONS`` (CI: 3.6, the lent H200's, beside 3.9).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import blockfuse
from blockfuse.ops import fp8_act, launch, norm, rotary
from blockfuse.ops.rotary import _rotary_bwd_fp8, rotary_copying_v, rotary_packed

# More Triton installs to build every launch with besides the one imported here: folders (os.pathsep-separated) that
# each hold a ``triton`` package, e.g. ``pip install --no-deps --target DIR triton==3.6.0`` (the lent H200's compiler,
# which builds some kernels very differently from 3.9's; benchmarks/NOTES.md, "Tools"). .ci/run sets it.
OTHER_TRITONS = [folder for folder in os.environ.get("BLOCKFUSE_SM90_TRITONS", "").split(os.pathsep) if folder]

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
           torch.int32: "i32", torch.int8: "i8", torch.bool: "i1", torch.float8_e4m3fn: "fp8e4nv",
           torch.float8_e5m2: "fp8e5", torch.uint8: "u8"}

BUILD_LAUNCH = r"""
import importlib
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def build(launch):  # one launch as _record_launches noted it, compiled for sm_90 with the Triton on the path
    kernel = getattr(importlib.import_module(launch["module"]), launch["kernel"])
    signature, constexprs = dict(launch["signature"]), dict(launch["constexprs"])
    for name in launch["none"]:
        signature[name], constexprs[name] = "constexpr", None
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in launch.get("aligned", ())}
    options = {"num_warps": launch["num_warps"]}
    if launch["maxnreg"] is not None:
        options["maxnreg"] = launch["maxnreg"]
    if launch["launch_pdl"]:
        options["launch_pdl"] = True
    source = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
"""

COMPILE_SCRIPT = BUILD_LAUNCH + r"""
import json, sys

launches = json.loads(sys.stdin.read())
failures = []
for launch in launches:
    try:
        build(launch)
    except Exception as error:  # report every failure, not only the first
        failures.append(f"{launch['kernel']} {launch['constexprs']} num_warps={launch['num_warps']}: "
                        f"{type(error).__name__}: {str(error)[-600:]}")
print(json.dumps({"compiled": len(launches), "failures": failures, "triton": triton.__version__}))
"""


def _with_each_triton(script: str, *args: str, stdin: str | None = None):
    """The JSON of ``script``'s last line, run in a subprocess without the interpreter (blockfuse's source first on
    its path) with the Triton imported here, then with each of OTHER_TRITONS (that folder's first on the path)."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    path = os.pathsep.join(filter(None, [str(Path(blockfuse.__file__).parents[1]), env.get("PYTHONPATH")]))
    for folder in ("", *OTHER_TRITONS):
        result = subprocess.run([sys.executable, "-c", script, *args], input=stdin,
                                env=dict(env, PYTHONPATH=os.pathsep.join(filter(None, [folder, path]))),
                                cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=900,
                                check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        yield json.loads(result.stdout.strip().splitlines()[-1])


def _record_launches(monkeypatch) -> list[dict]:
    """Patch ``launch.Kernel`` to note each launch (and still run it in the interpreter)."""
    seen: dict[str, dict] = {}
    with_pdl: set[str] = set()
    original = launch.Kernel.__call__

    def recording_call(self, grid, *args, num_warps=4, num_stages=None, maxnreg=None, launch_pdl=False, **constexprs):
        fn = getattr(self.fn, "fn", self.fn)
        names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
        signature, none, aligned, ones = {}, [], [], {}
        for name, arg in zip(names, args):
            if arg is None:
                none.append(name)
            elif isinstance(arg, torch.Tensor):
                signature[name] = "*" + _DTYPES[arg.dtype]
                if arg.data_ptr() % 16 == 0:
                    aligned.append(name)
            elif isinstance(arg, bool):
                signature[name] = "i1"
            elif isinstance(arg, int):
                # NOTE: as a launch specializes them (Triton 3.6 and 3.9): an int equal to 1 becomes the constant
                # 1, a multiple of 16 gets the divisibility hint; built otherwise, a kernel can take another layout
                # than the GPU builds (benchmarks/results/session-check/2026-12-04-h200/)
                if arg == 1:
                    ones[name] = 1
                    signature[name] = "constexpr"
                    continue
                signature[name] = "i32" if -(2**31) <= arg < 2**31 else "i64"
                if arg % 16 == 0:
                    aligned.append(name)
            elif isinstance(arg, float):
                signature[name] = "fp32"
            else:
                raise TypeError(f"{fn.__name__}: argument {name} of unexpected type {type(arg).__name__}")
        for name in constexprs:
            signature[name] = "constexpr"
        record = {"module": fn.__module__, "kernel": fn.__name__, "signature": signature, "none": none,
                  "constexprs": {**ones, **constexprs}, "aligned": aligned, "num_warps": num_warps,
                  "maxnreg": maxnreg, "launch_pdl": launch_pdl}
        seen.setdefault(json.dumps(record, sort_keys=True, default=str), record)
        if constexprs.get("PDL") is False and fn.__name__ not in with_pdl:
            # The interpreter launches without programmatic dependent launch, a GPU from sm_90 with it: one such
            # launch a kernel (the grid-dependency instructions), not each specialization again.
            with_pdl.add(fn.__name__)
            pdl = dict(record, constexprs={**constexprs, "PDL": True}, launch_pdl=True)
            seen.setdefault(json.dumps(pdl, sort_keys=True, default=str), pdl)
        return original(self, grid, *args, num_warps=num_warps, num_stages=num_stages, maxnreg=maxnreg,
                        launch_pdl=launch_pdl, **constexprs)

    monkeypatch.setattr(launch.Kernel, "__call__", recording_call)
    return seen


def _covering(launches: list[dict]) -> list[dict]:
    """The launches to build: one of each specialization (kernel, constexprs, warps, register cap, programmatic
    launch, absent arguments), preferring one whose kernel and pointer dtypes are not built yet, then one more for
    each kernel and set of pointer dtypes still unbuilt. A GPU compiler that refuses a kernel's code path refuses it
    in every dtype; one that refuses a dtype refuses it on any path the dtype reaches (the GPU runs of the op tests
    build every combination for real)."""
    def specialization(record):
        return json.dumps([record["kernel"], record["constexprs"], record["num_warps"], record["maxnreg"],
                           record["launch_pdl"], sorted(record["none"]), sorted(record.get("aligned", ()))],
                          sort_keys=True, default=str)

    def dtypes(record):
        return record["kernel"], tuple(sorted({kind for kind in record["signature"].values() if kind[0] == "*"}))

    groups: dict[str, list[dict]] = {}
    for record in launches:
        groups.setdefault(specialization(record), []).append(record)
    chosen, built = [], set()
    for records in groups.values():
        record = next((r for r in records if dtypes(r) not in built), records[0])
        chosen.append(record)
        built.add(dtypes(record))
    for record in launches:
        if dtypes(record) not in built:
            chosen.append(record)
            built.add(dtypes(record))
    return chosen


def _exercise_every_op(device: str) -> None:
    """Calls that reach every kernel and its main specializations: each dtype, dropout, the
    residual forms, GELU, the chunked path of wide rows, packed halves, both RoPE conventions."""
    torch.manual_seed(0)

    def run(fn, *inputs):
        leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
        out = fn(*leaves)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.float().sum() for o in outs).backward()

    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(6, 72, dtype=dtype, device=device)
        res, w, b = torch.randn_like(x), torch.randn(72, dtype=dtype, device=device), torch.randn(72, dtype=dtype,
                                                                                                 device=device)
        run(lambda x, w, b: blockfuse.layer_norm(x, w, b), x, w, b)
        run(lambda x, w: blockfuse.rms_norm(x, w, cast_before_weight=True), x, w)
        run(lambda x, r, w: blockfuse.rms_norm(x, w, residual=r, dropout_p=0.1), x, res, w)
        run(lambda x, r, w, b: blockfuse.layer_norm(x, w, b, residual=r, residual_mode="post", dropout_p=0.1),
            x, res, w, b)
        run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), x, w, b)
        run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b, approximate="none"), x, w, b)
        run(lambda x, b, r: blockfuse.bias_dropout_add(x, b, r, 0.1), x, b, res)
        run(lambda x, b, r: blockfuse.bias_dropout_add(x[:, :70], b[:70], r[:, :70], 0.1), x, b, res)
        run(lambda g, u: blockfuse.swiglu(g, u), x, res)
        run(lambda g: blockfuse.geglu(g), x)
        q = torch.randn(2, 5, 4, 16, dtype=dtype, device=device)
        k = torch.randn(2, 5, 2, 16, dtype=dtype, device=device)
        cos, sin = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
        run(lambda q, k: blockfuse.rotary(q, k, cos, sin), q, k)
        run(lambda q, k: blockfuse.rotary(q, k, cos[:, :4], sin[:, :4], interleaved=True, out_layout="bhsd"), q, k)
        run(lambda qkv: rotary_copying_v(*(p.view(2, 5, 2, 8) for p in qkv.split(16, dim=-1)), cos, sin),
            torch.randn(2, 5, 48, dtype=dtype, device=device))
        # 12 pairs a head (not a power of two), 12 tokens: the flat kernel (ops/rotary.py's _flat_tile)
        q = torch.randn(1, 12, 2, 24, dtype=dtype, device=device)
        k = torch.randn(1, 12, 1, 24, dtype=dtype, device=device)
        cos, sin = torch.randn(12, 12, device=device), torch.randn(12, 12, device=device)
        run(lambda q, k: blockfuse.rotary(q, k, cos, sin, layout="bhsd", out_layout="bshd"), q.transpose(1, 2),
            k.transpose(1, 2))
        if dtype == torch.bfloat16:
            # the packed form with v (and its gradient) copied in the rotation's launch (HAS_COPY): the flat kernel
            # at head_size 24, the padded one at 16 (bf16, the fused attention's dtype: each launch's opcheck costs
            # CI seconds)
            before = rotary.PACKED_COPY_IN_LAUNCH, rotary.FLAT_COPY_IN_LAUNCH
            rotary.PACKED_COPY_IN_LAUNCH = rotary.FLAT_COPY_IN_LAUNCH = True
            try:
                run(lambda qkv: rotary_packed(qkv, 2, 1, 24, cos, sin), torch.randn(1, 12, 96, dtype=dtype,
                                                                                    device=device))
                run(lambda qkv: rotary_packed(qkv, 2, 1, 16, cos[:, :8], sin[:, :8]),
                    torch.randn(2, 5, 64, dtype=dtype, device=device))
            finally:
                rotary.PACKED_COPY_IN_LAUNCH, rotary.FLAT_COPY_IN_LAUNCH = before
    # the MLP ops: packed and separate gated weights, the GELU MLP and linear_act
    x = torch.randn(6, 40, device=device)
    w_packed, w_down = torch.randn(48, 40, device=device) / 7, torch.randn(40, 24, device=device) / 5
    b_packed, b_down = torch.randn(48, device=device), torch.randn(40, device=device)
    run(lambda x, w, b, wd, bd: blockfuse.gated_mlp(x, w, b, wd, bd, "swiglu"), x, w_packed, b_packed, w_down, b_down)
    run(lambda x, w, wd, u: blockfuse.gated_mlp(x, w, None, wd, None, "geglu", up_weight=u), x, w_packed[:24],
        w_down, w_packed[24:])
    w_fc1, w_fc2 = torch.randn(24, 40, device=device) / 7, torch.randn(40, 24, device=device) / 5
    run(lambda x, w1, b1, w2: blockfuse.fused_mlp(x, w1, b1, w2, None, "gelu_tanh"), x, w_fc1, b_packed[:24], w_fc2)
    run(lambda x, w: blockfuse.linear_act(x, w, None, "swiglu"), x, w_packed)
    # FP8: the casts (amax passes with and without the bias gradient's column sums) and the linear layer
    xf, wf = torch.randn(40, 32, device=device), torch.randn(16, 32, device=device) / 5
    bf = torch.randn(16, device=device)
    for recipe in ("tensorwise", "rowwise"):
        run(lambda x, w, b, recipe=recipe: blockfuse.fp8_linear(x, w, b, recipe=recipe), xf, wf, bf)
    # the layer with its activation, folding the amaxes (ops/fp8_act.py), gated and pointwise, bf16 and fp32
    def mlp(x, w, b, activation):  # (the down layer's input cast made again from the pre-activation: cast_again)
        act, amax = blockfuse.fp8.fp8_linear_act(x, w, b, activation)
        return blockfuse.fp8_linear(act, wf[:, :16].to(x.dtype).requires_grad_(), x_amax=amax,
                                    x_cast=fp8_act.cast_again(act, amax))

    for dtype in (torch.bfloat16, torch.float32):
        for activation, rows in (("swiglu", 32), ("gelu_tanh", 16)):
            run(lambda x, w, b, activation=activation: mlp(x, w, b, activation), xf.to(dtype),
                torch.randn(rows, 32, device=device, dtype=dtype) / 5, torch.randn(rows, device=device, dtype=dtype))
    # the norms' output for a tensorwise FP8 projection, its amax folded (FP8 code FP8_AMAX), with and without a residual
    from blockfuse.ops.norm import cast_again as norm_cast_again
    from blockfuse.ops.norm import norm_for_tensorwise_projection

    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(6, 72, dtype=dtype, device=device)
        res, w, b = torch.randn_like(x), torch.randn(72, dtype=dtype, device=device), torch.randn(72, dtype=dtype,
                                                                                                 device=device)
        run(lambda x, r, w, b: norm_for_tensorwise_projection(x, w, b, 1e-5, r, "pre", 0.0, True, False)[0][0], x, res,
            w, b)
        run(lambda x, w: norm_for_tensorwise_projection(x, w, None, 1e-6, None, "pre", 0.0, True, True)[0][0], x, w)
        # its output's transposed cast made again from the norm's input and statistics (norm.cast_again)
        for bias, is_rms in ((b, False), (None, True)):
            leaves = [t.detach().requires_grad_() for t in (x, res, w)]
            (y, amax), _ = norm_for_tensorwise_projection(leaves[0], leaves[2], bias, 1e-5, leaves[1], "pre", 0.0,
                                                          True, is_rms)
            norm_cast_again(y, amax, bias)()
    # recipe "delayed": the one-pass cast with its column sums, the recast with a given scale, the norms' and the
    # activation's e4m3 outputs with a history and their transposed casts made again with the forward's scale
    from blockfuse.ops import fp8 as fp8_ops
    from blockfuse.ops.norm import cast_again_quantized as norm_cast_again_quantized
    from blockfuse.ops.norm import norm_for_fp8_projection

    def delayed_pair():
        return (fp8_ops.Float8Scaling.new(4, device), fp8_ops.Float8Scaling.new(4, device))

    for dtype in (torch.bfloat16, torch.float32):
        pair = delayed_pair()
        run(lambda x, w, b: blockfuse.fp8_linear(x, w, b, recipe="delayed", fp8_scaling=pair), xf.to(dtype),
            wf.to(dtype), bf.to(dtype))
        fp8_ops.transposed_cast_with_scale(xf.to(dtype), torch.tensor(0.01, device=device), 16)
        x = torch.randn(6, 72, dtype=dtype, device=device)
        res, w, b = torch.randn_like(x), torch.randn(72, dtype=dtype, device=device), torch.randn(72, dtype=dtype,
                                                                                                 device=device)
        for bias, is_rms in ((b, False), (None, True)):
            leaves = [t.detach().requires_grad_() for t in (x, res, w)]
            (q, scale, proxy), _ = norm_for_fp8_projection(leaves[0], leaves[2], bias, 1e-5, leaves[1], "pre", 0.0,
                                                           True, is_rms, fp8_scaling=pair[0])
            norm_cast_again_quantized(proxy, scale, bias)()
        for activation, width in (("swiglu", 64), ("gelu_tanh", 32)):
            pre = torch.randn(6, width, dtype=dtype, device=device, requires_grad=True)
            q, scale, proxy = fp8_act.act_fp8_delayed(pre, activation, pair[1])
            fp8_act.cast_again_quantized(proxy, scale)()
            proxy.backward(torch.randn(proxy.shape, dtype=dtype, device=device))
            # the backward writing the layer before's e5m2 operands itself (a delayed MLP's first layer)
            dy = torch.randn(6, width // 2 if activation == "swiglu" else width, dtype=dtype, device=device)
            fp8_act._act_backward_delayed(dy, pre.detach(), activation, *delayed_pair()[1], True, True, 16,
                                          torch.float32)
    # the packed QKV form of RoPE: the rotations and v's row copy into one gradient (ops/rotary.py)
    for dtype in (torch.bfloat16, torch.float32):
        cos, sin = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
        run(lambda qkv: rotary_packed(qkv, 4, 2, 16, cos, sin), torch.randn(2, 5, 128, dtype=dtype, device=device))
        # its backward into a delayed FP8 QKV layer's e5m2 operands (head_size 16 and 24: a padded half)
        for head_size in (16, 24):
            grads = [torch.randn(2, h, 5, head_size, dtype=dtype, device=device).transpose(1, 2) for h in (4, 2, 2)]
            table = torch.randn(8, head_size // 2, device=device)
            _rotary_bwd_fp8(*grads, table, table, *delayed_pair()[1], True, True, 16, torch.float32)
    wide = torch.randn(2, 20000, device=device)
    run(lambda x: blockfuse.layer_norm(x), wide)
    # rows in chunks with weight gradients: the chunked backward on its 16 warps and the weight kernel (norm's NOTE
    # above BWD_WEIGHT_KERNEL_FROM_LANES), plain, post-residual with dropout, GELU
    wide = torch.randn(2, 20000, dtype=torch.bfloat16, device=device)
    w, b = torch.randn(20000, dtype=torch.bfloat16, device=device), torch.randn(20000, dtype=torch.bfloat16, device=device)
    run(lambda x, w, b: blockfuse.layer_norm(x, w, b), wide, w, b)
    run(lambda x, r, w: blockfuse.rms_norm(x, w, residual=r, residual_mode="post", dropout_p=0.1), wide, wide.flip(0), w)
    run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), wide, w, b)
    # bf16 rows of odd width: one-element accesses (VEC 1), the backward's pieces on twice the warps (the NOTE above
    # BWD_SCALAR_WARPS), plain and pre-residual
    odd = torch.randn(2, 4567, dtype=torch.bfloat16, device=device)
    w, b = torch.randn(4567, dtype=torch.bfloat16, device=device), torch.randn(4567, dtype=torch.bfloat16, device=device)
    run(lambda x, w, b: blockfuse.layer_norm(x, w, b), odd, w, b)
    run(lambda x, r, w: blockfuse.rms_norm(x, w, residual=r), odd, odd.flip(0), w)
    # enough row blocks per program for the backward's pipelined loop (norm._stages)
    tall = torch.randn(400, 72, dtype=torch.bfloat16, device=device)
    w, b = torch.randn(72, dtype=torch.bfloat16, device=device), torch.randn(72, dtype=torch.bfloat16, device=device)
    run(lambda x, w, b: blockfuse.layer_norm(x, w, b), tall, w, b)
    run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), tall, w, b)
    # rows the backward holds in two pieces (norm.backward_rule: 2304 = 2048 + 256), plain, GELU, pre-residual dropout
    pieces = torch.randn(3, 2304, dtype=torch.bfloat16, device=device)
    w, b = torch.randn(2304, dtype=torch.bfloat16, device=device), torch.randn(2304, dtype=torch.bfloat16, device=device)
    assert norm.backward_rule(2304).tail and norm.backward_rule(2304, 1).tail
    run(lambda x, w, b: blockfuse.layer_norm(x, w, b), pieces, w, b)
    run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), pieces, w, b)
    run(lambda x, r, w: blockfuse.rms_norm(x, w, residual=r, dropout_p=0.1), pieces, pieces.flip(0), w)
    # the GELU form's pieces with a tail as wide as half the head, on 16 warps (6144 = 4096 + 2048)
    pieces = torch.randn(3, 6144, dtype=torch.bfloat16, device=device)
    w, b = torch.randn(6144, dtype=torch.bfloat16, device=device), torch.randn(6144, dtype=torch.bfloat16, device=device)
    assert norm.backward_rule(6144, 1).tail and norm.backward_rule(6144, 1).num_warps == 16
    run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), pieces, w, b)
    # rows in pieces with their sums reduced jointly, both passes (JOINT_SUMS, FWD_JOINT_SUMS), whatever the
    # defaults: LayerNorm and + GELU at 2304 and 6144, RMSNorm's pre-residual form with dropout at 2304
    with norm.tuned(JOINT_SUMS=True, FWD_JOINT_SUMS=True):
        for n in (2304, 6144):
            pieces = torch.randn(3, n, dtype=torch.bfloat16, device=device)
            w = torch.randn(n, dtype=torch.bfloat16, device=device)
            b = torch.randn(n, dtype=torch.bfloat16, device=device)
            run(lambda x, w, b: blockfuse.layer_norm(x, w, b), pieces, w, b)
            run(lambda x, w, b: blockfuse.layer_norm_gelu(x, w, b), pieces, w, b)
        narrow = pieces[:, :2304]
        run(lambda x, r, w: blockfuse.rms_norm(x, w, residual=r, dropout_p=0.1), narrow, narrow.flip(0), w[:2304])


@pytest.mark.long
@pytest.mark.usefixtures("requires_triton")
def test_every_launch_compiles_for_sm90(request, device):
    if device != "cpu":
        pytest.skip("on a GPU the op tests compile every kernel for real")
    launches, _ = request.getfixturevalue("every_op_recorded")  # (tests/conftest.py)
    kernels = {record["kernel"] for record in launches.values()}
    stages = {record["constexprs"].get("STAGES") for record in launches.values()
              if record["kernel"] == "_norm_bwd_kernel"}
    assert {1, 3} <= stages, stages
    assert any(record["constexprs"].get("TAIL") for record in launches.values()
               if record["kernel"] == "_norm_bwd_kernel"), "no backward in two pieces was built"
    for kernel in ("_norm_fwd_kernel", "_norm_bwd_kernel"):  # (rows in pieces with their sums reduced jointly)
        assert any(record["constexprs"].get("THREADS") for record in launches.values() if record["kernel"] == kernel)
    assert {record["kernel"] for record in launches.values() if record["constexprs"].get("HAS_COPY")} == {
        "_rotary_kernel", "_rotary_flat_kernel"}
    assert {record["kernel"] for record in launches.values() if record["launch_pdl"]} == {
        "_fp8_roll_kernel", "_norm_fwd_fp8_kernel"}
    assert {"_norm_fwd_kernel", "_norm_bwd_kernel", "_sum_partials_kernel", "_gated_fwd_kernel",
            "_gated_bwd_kernel", "_rotary_kernel", "_rotary_flat_kernel", "_bias_dropout_add_fwd_kernel",
            "_bias_dropout_add_bwd_kernel", "_fp8_act_fwd_kernel", "_fp8_act_bwd_kernel", "_copy_rows_kernel",
            "_fp8_act_cast_t_kernel", "_transpose_bytes_kernel", "_norm_cast_t_kernel"} <= kernels, kernels
    delayed = {(record["kernel"], key) for record in launches.values() for key in ("GIVEN_SCALE", "HAS_SUM")
               if record["constexprs"].get(key)}
    delayed |= {(record["kernel"], "BLOCK_H") for record in launches.values()
                if (record["constexprs"].get("BLOCK_H") or 1) > 1}
    assert {("_fp8_cast_kernel", "GIVEN_SCALE"), ("_fp8_cast_kernel", "HAS_SUM"), ("_fp8_cast_kernel", "BLOCK_H"),
            ("_norm_cast_t_kernel", "GIVEN_SCALE"), ("_fp8_act_cast_t_kernel", "GIVEN_SCALE"),
            ("_fp8_act_fwd_kernel", "BLOCK_H"), ("_fp8_act_bwd_delayed_kernel", "HAS_SUM")} <= delayed, delayed
    # (recipe "delayed"'s variants, above)
    builds = _covering(list(launches.values()))
    assert {record["kernel"] for record in builds} == kernels and len(builds) < len(launches)
    versions = []
    for report in _with_each_triton(COMPILE_SCRIPT, stdin=json.dumps(builds)):
        assert report["compiled"] == len(builds) and not report["failures"], (
            f"triton {report['triton']}:\n" + "\n".join(report["failures"]))
        versions.append(report["triton"])
    assert len(set(versions)) == len(versions), f"{OTHER_TRITONS} holds no other triton than {versions[0]}"


def test_the_covering_builds_every_specialization_and_every_dtype_set():
    """``_covering`` keeps one launch of each specialization and of each kernel's pointer dtypes, and no more."""
    def launch(kernel, dtype, block, warps=4):
        return {"kernel": kernel, "signature": {"X": f"*{dtype}", "n": "i32"}, "constexprs": {"BLOCK": block},
                "num_warps": warps, "maxnreg": None, "launch_pdl": False, "none": []}

    launches = [launch("a", "bf16", 16), launch("a", "fp32", 16), launch("a", "bf16", 32), launch("a", "fp32", 32),
                launch("a", "bf16", 32, warps=8), launch("b", "fp16", 16), launch("b", "fp16", 16)]
    builds = _covering(launches)
    assert len(builds) == 3 + 1  # a: 16, 32, 32 on 8 warps (one of them in fp32); b: once
    assert {(b["kernel"], b["signature"]["X"]) for b in builds} == {("a", "*bf16"), ("a", "*fp32"), ("b", "*fp16")}
    assert {(b["kernel"], b["constexprs"]["BLOCK"], b["num_warps"]) for b in builds} == {
        ("a", 16, 4), ("a", 32, 4), ("a", 32, 8), ("b", 16, 4)}


@pytest.mark.usefixtures("requires_triton")
def test_layer_norm_gelu_backward_fits_two_programs_per_multiprocessor(device):
    """The tuning in ops/norm.py relies on it: at N = 4096 the LayerNorm + GELU backward, 8 warps under
    a 128-register cap (two programs per multiprocessor), compiles for sm_90 without spilling."""
    if device != "cpu":
        pytest.skip("compiles on the CPU machine; the GPU benchmarks time the kernel itself")
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parents[2]
    warps = norm.TUNING.bwd_tile_elements // norm.TUNING.act_bwd_elements_per_warp
    result = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "kernel_stats.py"), "--warps", str(warps), "--maxnreg",
         str(norm.TUNING.act_bwd_maxnreg), "--stages", str(norm.TUNING.act_bwd_stages), "--even-n"],
        env=env, cwd=root, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    registers, stack = (int(v) for v in re.search(r"registers (\d+), stack (\d+) B", result.stdout).groups())
    assert registers <= norm.TUNING.act_bwd_maxnreg and stack == 0, result.stdout
    tile = norm.backward_rule(4096, 1)
    assert tile.num_warps == warps and norm._act_programs_per_sm(tile) == 2
    assert norm._act_programs_per_sm(tile) * warps * 32 * norm.TUNING.act_bwd_maxnreg <= 65536


def test_kernel_stats_counts_the_backward_loop_per_useful_element():
    """``benchmarks/kernel_stats.py --loop`` finds the norm backward's loop in the sm_90 SASS and counts its
    instructions per useful row element: a padded tile (4160 in 8192 lanes: its 64-lane tail keeps the padded tile,
    norm.backward_rule) runs its padded lanes too, so it issues far more an element than the tile that fits (4096);
    two pieces (4304 = 4096 + 256) about as many as the tile that fits, and with their row sums reduced jointly
    (JOINT_SUMS) as few barriers and shuffles as that one tile."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(blockfuse.__file__).parents[1]),
                                                      env.get("PYTHONPATH")]))
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "kernel_stats.py"), "--loop", "--widths", "4096,4160,4304",
         "--forms", "ln", "--set", "JOINT_SUMS=True"], env=env, cwd=root, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {int(m.group(1)): (int(m.group(2)), float(m.group(3)), (int(m.group(4)), int(m.group(5))))
            for m in re.finditer(r"^\| (\d+) \| ln \| [^|]+ \| (\d+) \| ([\d.]+) \| (\d+) / (\d+) / \d+ \|",
                                 result.stdout, re.M)}
    assert set(rows) == {4096, 4160, 4304}, result.stdout
    assert all(count > 50 for count, _, _ in rows.values()), rows  # a loop body, not an empty match
    assert rows[4160][1] > 1.5 * rows[4096][1], rows
    assert rows[4304][1] < 1.25 * rows[4096][1], rows
    assert rows[4304][2] == rows[4096][2] and rows[4096][2][0] > 0, rows  # (barriers, shuffles)


ROTARY_COPY_SCRIPT = r"""
import collections, json, re, sys
sys.path.insert(0, "benchmarks")
from kernel_stats import compile_sm90, sass_stats
from blockfuse.ops import rotary

kernel = rotary._rotary_flat_kernel
constexpr_names = {p.name for p in kernel.params if p.is_constexpr}
pointers = {"X1": "*bf16", "Y1": "*bf16", "X2": "*bf16", "Y2": "*bf16", "X3": "*bf16", "Y3": "*bf16", "COS": "*fp32",
            "SIN": "*fp32", "POS": "*i64"}
report = {}
for has_copy in (False, True):
    # head_dim 72 packed q, k, v of 32 / 32 heads: token strides 96 x 72 (multiples of 16), head strides 72 (ALIGN 8)
    constexprs = dict(HALF=36, BACKWARD=False, HAS_POS=False, HAS_COPY=has_copy, WIDE=False, ALIGN=8, TABLE_ALIGN=4,
                      BLOCK_G=1024, POS=None)
    if not has_copy:
        constexprs.update(X3=None, Y3=None)
    signature = {name: pointers.get(name, "i32") for name in kernel.arg_names
                 if name not in constexpr_names and name not in constexprs}
    divisible = [name for name, kind in signature.items() if kind.startswith("*")] + [
        "stride_x1b", "stride_x1s", "stride_x2b", "stride_x2s", "stride_y1b", "stride_y1s", "stride_y2b", "stride_y2s"]
    compiled = compile_sm90(kernel, signature, constexprs, divisible, num_warps=4)
    _, stack, _, sass = sass_stats(compiled.asm["cubin"])
    report[str(has_copy)] = {"stack": stack,
                             **{op: len(re.findall(r"\b" + re.escape(op) + r"\b", sass))
                                for op in ("LDG.E.128", "STG.E.128", "LDG.E.64", "STG.E.64")}}
print(json.dumps(report))
"""


def test_the_flat_rotary_copies_v_in_16_byte_accesses():
    """The flat kernel's copy of v (HAS_COPY) moves each row whole: at head_dim 72, whose 36 pairs run in 8-byte
    accesses, the copy adds 16-byte loads and stores (runs of gcd(72, 16) = 8 elements) and no 8-byte ones. Its first
    form copied v through the pairs' lanes, 8-byte runs, 0.88-0.93x the separate copy's kernel time on an H100; this
    one was 0.92-0.96x there at 72 and ties or wins at whole-sector rows, so 72 keeps the copy apart by default
    (rotary.FLAT_COPY_SECTOR; benchmarks/results/op-path/rotary-packed-2026-12-07-h100/). This build forces it on.
    sm_90 builds with each Triton, no spill."""
    for report in _with_each_triton(ROTARY_COPY_SCRIPT):
        plain, copying = report["False"], report["True"]
        assert plain["stack"] == copying["stack"] == 0, report
        assert copying["LDG.E.128"] - plain["LDG.E.128"] >= 2 and copying["STG.E.128"] - plain["STG.E.128"] >= 2, report
        assert copying["LDG.E.64"] == plain["LDG.E.64"] and copying["STG.E.64"] == plain["STG.E.64"], report


DELAYED_TILES_SCRIPT = r"""
import json, sys
sys.path.insert(0, "benchmarks")
from kernel_stats import compile_sm90, resource_usage
from blockfuse.ops import fp8, fp8_act

def stats(kernel, signature, constexprs, divisible, warps):
    for name, kind in list(signature.items()):
        if kind is None:
            del signature[name]
            constexprs[name] = None
    compiled = compile_sm90(kernel, signature, constexprs, divisible, num_warps=warps)
    registers, stack = resource_usage(compiled.asm["cubin"])  # (no SASS needed)
    return {"registers": registers, "stack": stack}

report = {}
bm, bn, warps = fp8.TILES.sum_tile
report["cast"] = stats(fp8._fp8_cast_kernel, {
    "X": "*bf16", "X_SCALE": None, "AMAX": "*fp32", "COL_AMAX": None, "RESET": None, "Y": "*fp8e5",
    "Y_SCALE": "*fp32", "YT": "*fp8e5", "YT_SCALE": "*fp32", "HISTORY": "*fp32", "COL_SUM": "*fp32",
    "stride_m": "i32", "M": "i32", "N": "i32", "MP": "i32", "history_len": "i32"},
    dict(FP8_MAX=57344.0, E5M2=True, ROWWISE=False, HAS_Y=True, HAS_YT=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_H=16,
         HAS_SUM=True, GIVEN_SCALE=False, stride_n=1), ["X", "Y", "YT", "stride_m", "N", "MP"], warps)
bm, bn, warps = fp8_act.TILES.bwd_delayed
report["activation backward"] = stats(fp8_act._fp8_act_bwd_delayed_kernel, {
    "DY": "*bf16", "G": "*bf16", "U": "*bf16", "HISTORY": "*fp32", "AMAX": "*fp32", "Q": "*fp8e5",
    "Q_SCALE": "*fp32", "QT": "*fp8e5", "QT_SCALE": "*fp32", "COL_SUM": "*fp32", "stride_dy": "i32",
    "stride_g": "i32", "stride_u": "i32", "M": "i32", "N": "i32", "MP": "i32", "history_len": "i32"},
    dict(ACTIVATION=2, GATED=True, HAS_Q=True, HAS_QT=True, HAS_SUM=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_H=16),
    ["DY", "G", "U", "Q", "QT", "stride_dy", "stride_g", "stride_u", "N", "MP"], warps)
print(json.dumps(report))
"""


def test_delayed_tiles_compile_for_sm90_without_spills():
    """The delayed cast with column sums at ``fp8.TILES.sum_tile`` (128 x 64 on 2 warps) and the gated delayed
    activation backward at ``fp8_act.TILES.bwd_delayed`` (64 x 64 on 4 warps), compiled for sm_90 as a Hopper
    launches them (the interpreter's tiles are others): no spills. Both were timed best with these tiles on an
    H200 (fp8/14-delayed-2026-11-28-h200); a spill would be a slower kernel than the one measured. The cast's
    column stride is 1, a constant, as a launch specializes an int argument equal to 1 (Triton 3.6 and 3.9): compiled
    with it as a plain int, Triton 3.6 (the lent H200's) gave the cast a layout of one element a thread and 488 bytes
    of spill, a kernel no launch runs (benchmarks/results/session-check/2026-12-04-h200/)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(blockfuse.__file__).parents[1]),
                                                      env.get("PYTHONPATH")]))
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", DELAYED_TILES_SCRIPT], env=env, cwd=root, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == {"cast", "activation backward"}, report
    for kernel, usage in report.items():
        assert 32 < usage["registers"] <= 255 and usage["stack"] == 0, (kernel, usage)


# The most shared memory a program may take on an H100 / H200 (sm_90: 227 KiB; the GPU's own OutOfResources message
# names this number).
SM90_MAX_SHARED = 232448
# The widths where the norms' kernels stage most rows in shared memory (the backward's pipelined wide pieces, three
# pieces and padded tiles, the forward's persistent programs), in every form.
WIDE_ROWS = (8192, 11008, 12288, 13312, 14336)

WIDE_RULE_SCRIPT = r"""
import json, sys
sys.path.insert(0, "benchmarks")
import triton
from kernel_stats import FORMS, rule_stats

widths = json.loads(sys.argv[1])
report = {}
for n in widths:
    for form in FORMS:
        stats = rule_stats(n, form, disassemble=False)  # (registers, stack and shared memory: no SASS needed)
        report[f"{form} {n}"] = {kernel: {key: stats[kernel][key] for key in ("registers", "stack", "stages", "shared")}
                                 for kernel in ("fwd", "bwd")}
print(json.dumps({"triton": triton.__version__, "report": report}))
"""


@pytest.mark.long
def test_wide_rows_fit_the_cards_shared_memory():
    """The norm kernels at the widths that stage the most in shared memory, built for sm_90 as the launch rules give
    them at a large row count (the pipeline's full depth: the CUDA tests' few rows run these kernels unpipelined), fit
    the shared memory a program may take on an H100 / H200, with every Triton the sm_90 builds use (this one and
    ``BLOCKFUSE_SM90_TRITONS``). A rule past it fails only at a large size on a GPU (2026-12-04: a backward variant
    asked for 246 KB at [16384, 11008]; benchmarks/results/launch-rules/28-gelu-reread-2026-12-04-h200/)."""
    for built in _with_each_triton(WIDE_RULE_SCRIPT, json.dumps(WIDE_ROWS)):
        report = built["report"]
        forms = ("ln", "rms", "ln-pre", "rms-pre", "ln-post", "ln-gelu")
        assert sorted(report) == sorted(f"{form} {n}" for form in forms for n in WIDE_ROWS), sorted(report)
        assert any((usage["bwd"]["stages"] or 1) > 1 for usage in report.values()), "no pipelined backward built"
        over = {cell: usage for cell, usage in report.items()
                if max(usage["fwd"]["shared"], usage["bwd"]["shared"]) > SM90_MAX_SHARED}
        assert not over, (built["triton"], over)


SATFINITE_SCRIPT = r"""
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from blockfuse.ops import fp8

@triton.jit
def cast(X, Q, R, inverse):
    offs = tl.arange(0, 256)
    x = tl.load(X + offs)
    tl.store(Q + offs, fp8.to_e4m3(x, inverse, Q))
    tl.store(R + offs, fp8._quantized(x, inverse, R, True))

source = ASTSource(fn=cast, signature={"X": "*fp32", "Q": "*fp8e4nv", "R": "*fp8e5", "inverse": "fp32"},
                   constexprs={})
print(triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"])
"""


def test_fp8_casts_saturate_in_the_conversion_on_sm90(tmp_path):
    """The kernels' FP8 casts write no clamp on a GPU (ops/fp8.py, ``_to_fp8``): they rely on the conversion
    saturating (``cvt.rn.satfinite``), as Triton lowers an fp32 -> e4m3 / e5m2 cast for sm_90. If a Triton
    version lowered it without ``satfinite``, values past the FP8 range would turn into NaN: this catches it."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(blockfuse.__file__).parents[1]),
                                                      env.get("PYTHONPATH")]))
    script = tmp_path / "cast.py"  # (a @triton.jit function must live in a file)
    script.write_text(SATFINITE_SCRIPT)
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    conversions = re.findall(r"cvt\.[\w.]*(?:e4m3|e5m2)[\w.]*", result.stdout)
    assert any("e4m3x2" in c for c in conversions) and any("e5m2x2" in c for c in conversions), conversions
    assert all(".satfinite." in c for c in conversions), conversions
    # and no clamp: the only max / min are none (the kernel above takes no amax)
    assert not re.search(r"\b(max|min)\.(?:NaN\.)?f32", result.stdout), "a clamp was compiled in"
