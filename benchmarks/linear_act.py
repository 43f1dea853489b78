"""GEMM + bias + activation (``linear_act``) and the two-GEMM MLP (``fused_mlp``) against cuBLAS,
eager PyTorch and torch.compile: time, relative error against an fp32 reference, memory.

Run on the GPU (about 3 minutes on an H100 with autotuning; ``--quick``: the first shape only):
    PYTHONPATH=src python benchmarks/linear_act.py --out benchmarks/results/DIR [--quick]
Smoke test on CPU (tiny shapes, Triton's interpreter):
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/linear_act.py --device cpu --quick --out /tmp/la

Sections, each a list of shapes x a list of providers x modes:

* ``linear``: ``act(x @ W.T + b)``, modes ``fwd`` (no grad: nothing kept for a backward),
  ``fwd_train`` (inputs require grad: the pre-activation is kept) and ``fwd+bwd``. Providers:
  ``cublas_gemm`` (``F.linear`` alone, bias in cuBLASLt's epilogue: the floor), ``torch_mm_act``
  (``F.linear`` then the activation, eager), ``torch_compile`` (``torch.compile`` of
  ``linear_act_ref``, default mode), ``linear_act_triton`` / ``linear_act_triton_tma`` (the Triton GEMMs
  with the activation in their epilogue, ``benchmarks/triton_gemm_epilogue.py``; TMA on sm_90+ only),
  ``linear_act_cublas`` (``blockfuse.linear_act``: cuBLAS and its activation kernel).
* ``mlp``: ``fc2(act(fc1(x)))``, modes ``fwd_train`` and ``fwd+bwd``. Providers: ``eager_mlp``,
  ``compile_mlp`` (one per ``--compile-modes``), ``fused_mlp`` (``blockfuse.fused_mlp``),
  ``fused_mlp_triton`` (``benchmarks/triton_gemm_epilogue.py``). Each row also gives ``saved_mib``, the memory the
  forward leaves allocated for the backward (allocated after the forward minus before, the
  output excluded), and ``peak_mib`` of fwd+bwd above the inputs.

Every row carries ``rel_error``: ||out - ref|| / ||ref|| of the output against the same math in
fp32 on the same (bf16) inputs, and for fwd+bwd ``grad_rel_error``, the largest of the input and
weight gradients' errors. Ratios in the Markdown are against ``torch_mm_act`` (linear) and
``eager_mlp`` (mlp) of the same shape and mode, measured in the same process on the same card.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton_gemm_epilogue

from blockfuse.bench import timing
from blockfuse.bench.runner import environment, relative_error
from blockfuse.ops.activation import ACTIVATIONS
from blockfuse.ops.linear_act import linear_act, linear_act_ref
from blockfuse.ops.mlp import fused_mlp

# (tokens, in features, out features (hidden, for gated: H of the 2H-row weight), activation)
LINEAR_SHAPES = [(65536, 1152, 4304, "gelu_tanh"), (16384, 4096, 14336, "gelu_tanh"), (16384, 4096, 14336, "swiglu")]
# (tokens, d_model, hidden, activation): the SigLIP-2 so400m MLP at 256 images x 256 patches
MLP_SHAPES = [(65536, 1152, 4304, "gelu_tanh")]
CPU_LINEAR_SHAPES = [(67, 72, 40, "swiglu")]
CPU_MLP_SHAPES = [(67, 72, 40, "gelu_tanh")]
LINEAR_PROVIDERS = ["cublas_gemm", "torch_mm_act", "torch_compile", "linear_act_triton", "linear_act_triton_tma",
                    "linear_act_cublas"]
MLP_PROVIDERS = ["eager_mlp", "compile_mlp", "fused_mlp", "fused_mlp_triton"]
LINEAR_MODES = ["fwd", "fwd_train", "fwd+bwd"]
MLP_MODES = ["fwd_train", "fwd+bwd"]


# PyTorch's compositions in the inputs' dtype, as eager code would write them.
_eager_linear_act = triton_gemm_epilogue.eager_linear_act
_eager_mlp = triton_gemm_epilogue.eager_mlp


def _gemm_flops(tokens, d_in, d_out, activation) -> int:
    rows = 2 * d_out if ACTIVATIONS[activation][1] else d_out
    return 2 * tokens * d_in * rows


class _Timer:
    def __init__(self, device: torch.device, quick: bool):
        self.device = device
        self.warmup_ms, self.rep_ms = (10, 40) if quick else (25, 100)

    def __call__(self, fn) -> float:
        if self.device.type == "cuda":
            return timing.time_cuda(fn, warmup_ms=self.warmup_ms, rep_ms=self.rep_ms).median
        return timing.time_cpu(fn, warmup=1, rep_ms=self.rep_ms, min_reps=2, max_reps=5).median

    def peak_mib(self, fn):
        return round(timing.peak_memory_mib(fn), 1) if self.device.type == "cuda" else None

    def saved_mib(self, forward):
        """MiB the forward leaves allocated besides its output (what autograd keeps)."""
        if self.device.type != "cuda":
            return None
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        out = forward()
        torch.cuda.synchronize()
        saved = torch.cuda.memory_allocated() - before - out.numel() * out.element_size()
        del out
        return round(saved / 2**20, 1)


def _grad_call(fn, inputs, dy):
    """fwd+bwd: the forward, then autograd.grad of every input that requires grad."""
    def run():
        out = fn(*inputs)
        return torch.autograd.grad(out, [t for t in inputs if t is not None and t.requires_grad], dy)
    return run


def _fp32_reference(fn, inputs, dy):
    """(out, grads) of ``fn`` on fp32 copies of the (low-precision) inputs."""
    leaves = [None if t is None else t.detach().float().requires_grad_() for t in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, [t for t in leaves if t is not None], dy.float())
    return out.detach(), [g.detach() for g in grads]


def _errors(fn, inputs, dy, reference, mode):
    out_ref, grads_ref = reference
    if mode == "fwd+bwd":
        leaves = [None if t is None else t.detach().requires_grad_() for t in inputs]
        out = fn(*leaves)
        grads = torch.autograd.grad(out, [t for t in leaves if t is not None], dy)
        return relative_error(out, out_ref), max(relative_error(g, r) for g, r in zip(grads, grads_ref))
    with torch.no_grad():
        return relative_error(fn(*inputs), out_ref), None


def _run_provider(rows, timer, section, shape, provider, mode, fn, inputs, dy, reference, flops):
    row = {"section": section, "shape": list(shape[:3]), "activation": shape[3], "provider": provider, "mode": mode}
    try:
        train = [None if t is None else t.detach().requires_grad_() for t in inputs]
        if mode == "fwd":
            with torch.no_grad():
                ms = timer(lambda: fn(*inputs))
        elif mode == "fwd_train":
            ms = timer(lambda: fn(*train))
            row["saved_mib"] = timer.saved_mib(lambda: fn(*train))
        else:
            run = _grad_call(fn, train, dy)
            ms = timer(run)
            row["peak_mib"] = timer.peak_mib(run)
        row["ms"] = round(ms, 4)
        row["tflops"] = round(flops * (3 if mode == "fwd+bwd" else 1) / ms / 1e9, 1)
        row["rel_error"], grad_error = _errors(fn, inputs, dy, reference, mode)
        if grad_error is not None:
            row["grad_rel_error"] = grad_error
    except Exception as error:  # noqa: BLE001  (a failing provider is recorded; the others still run)
        row["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"
    rows.append(row)
    print(_format_row(row), flush=True)


def _linear_providers(device):
    compiled = torch.compile(linear_act_ref)
    providers = {
        "cublas_gemm": lambda x, w, b, activation: F.linear(x, w, b),
        "torch_mm_act": _eager_linear_act,
        "torch_compile": lambda x, w, b, activation: compiled(x, w, b, activation),
        "linear_act_triton": lambda x, w, b, activation: triton_gemm_epilogue.linear_act_triton(x, w, b, activation),
        "linear_act_triton_tma": lambda x, w, b, activation: triton_gemm_epilogue.linear_act_triton(
            x, w, b, activation, tma=True),
        "linear_act_cublas": lambda x, w, b, activation: linear_act(x, w, b, activation),
    }
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        providers.pop("linear_act_triton_tma")
    return providers


def _mlp_providers(compile_modes):
    providers = {"eager_mlp": _eager_mlp}
    for mode in compile_modes:
        name = "compile_mlp" if mode == "default" else f"compile_mlp[{mode}]"
        providers[name] = torch.compile(_eager_mlp, mode=mode)
    providers["fused_mlp"] = lambda *a: fused_mlp(*a[:5], a[5])
    providers["fused_mlp_triton"] = lambda *a: triton_gemm_epilogue.fused_mlp_triton(*a[:5], a[5])
    return providers


def run(args) -> dict:
    device = torch.device(args.device)
    dtype = torch.bfloat16
    timer = _Timer(device, args.quick)
    cpu = device.type == "cpu"
    linear_shapes = CPU_LINEAR_SHAPES if cpu else LINEAR_SHAPES[:1] if args.quick else LINEAR_SHAPES
    mlp_shapes = CPU_MLP_SHAPES if cpu else MLP_SHAPES
    generator = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=generator) * scale).to(device=device, dtype=dtype)

    rows: list[dict] = []
    began = time.perf_counter()
    linear = _linear_providers(device)
    for shape in linear_shapes:
        tokens, d_in, d_out, activation = shape
        weight_rows = 2 * d_out if ACTIVATIONS[activation][1] else d_out
        x, w, b = randn(tokens, d_in), randn(weight_rows, d_in, scale=d_in**-0.5), randn(weight_rows, scale=0.1)
        dy = randn(tokens, d_out)
        flops = _gemm_flops(tokens, d_in, d_out, activation)
        reference = _fp32_reference(lambda x, w, b: linear_act_ref(x, w, b, activation), (x, w, b), dy)
        gemm_reference = (F.linear(x.float(), w.float(), b.float()), [])  # cublas_gemm's: the GEMM alone
        for name in args.providers or LINEAR_PROVIDERS:
            if name not in linear:
                continue
            call = linear[name]
            fn = (lambda x, w, b, call=call, activation=activation: call(x, w, b, activation))
            for mode in LINEAR_MODES:
                if name == "cublas_gemm" and mode != "fwd":  # the GEMM alone: the forward floor
                    continue
                if name == "linear_act_triton_tma" and mode == "fwd+bwd":  # same backward as linear_act_triton
                    continue
                _run_provider(rows, timer, "linear", shape, name, mode, fn, (x, w, b), dy,
                              gemm_reference if name == "cublas_gemm" else reference, flops)
        del x, w, b, dy, reference, gemm_reference
        if not cpu:
            torch.cuda.empty_cache()

    mlp = _mlp_providers(args.compile_modes)
    for shape in mlp_shapes:
        tokens, d, hidden, activation = shape
        rows1 = 2 * hidden if ACTIVATIONS[activation][1] else hidden
        inputs = (randn(tokens, d), randn(rows1, d, scale=d**-0.5), randn(rows1, scale=0.1),
                  randn(d, hidden, scale=hidden**-0.5), randn(d, scale=0.1))
        dy = randn(tokens, d)
        flops = _gemm_flops(tokens, d, hidden, activation) + 2 * tokens * hidden * d
        reference = _fp32_reference(lambda *a: _eager_mlp(*a, activation), inputs, dy)
        for name, call in mlp.items():
            if args.providers and name.split("[")[0] not in args.providers:
                continue
            fn = (lambda *a, call=call, activation=activation: call(*a, activation))
            for mode in MLP_MODES:
                _run_provider(rows, timer, "mlp", shape, name, mode, fn, inputs, dy, reference, flops)
        del inputs, dy, reference
    return {"environment": environment(device), "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
            "dtype": "bf16", "tma_failure": triton_gemm_epilogue._TMA_FAILURE, "autotuned": _autotuned(),
            "seconds": round(time.perf_counter() - began, 1), "rows": rows}


def _autotuned() -> dict:
    """The tile each autotuned kernel picked, by its autotuning key (empty in the interpreter)."""
    tuned = {"forward": triton_gemm_epilogue._fwd_tuned, "dx": triton_gemm_epilogue._dx_tuned,
             "mlp_d_pre": triton_gemm_epilogue._dpre_tuned}
    return {name: {str(key): str(config) for key, config in kernel.cache.items()} for name, kernel in tuned.items()}


def _format_row(row) -> str:
    shape = "x".join(map(str, row["shape"]))
    if "error" in row:
        return f"{row['section']:6} {shape:>18} {row['activation']:9} {row['provider']:28} {row['mode']:9} ERROR {row['error']}"
    extra = "".join(f" {key}={row[key]}" for key in ("saved_mib", "peak_mib") if row.get(key) is not None)
    grad = f" grad_err={row['grad_rel_error']:.2e}" if "grad_rel_error" in row else ""
    return (f"{row['section']:6} {shape:>18} {row['activation']:9} {row['provider']:28} {row['mode']:9} "
            f"{row['ms']:9.4f} ms {row['tflops']:7.1f} TFLOP/s err={row['rel_error']:.2e}{grad}{extra}")


def markdown(record) -> str:
    env = record["environment"]
    lines = [f"# linear_act and fused_mlp, {record['dtype']}", "",
             f"Card: {env['card']} (compute capability {env['compute_capability']}), torch {env['torch']}, "
             f"triton {env['triton']}, CUDA {env['cuda']}, commit {env['git_commit']} "
             f"(sources {env['source_digest']}), {env['date']}.", "",
             f"Command: `{record['command']}`", "",
             f"Triton GEMMs' TMA failure: {record['tma_failure']}.", "",
             "ms: median (do_bench, L2 flushed). vs base: time of the baseline (torch_mm_act for linear, "
             "eager_mlp for mlp; same shape and mode) / this time: above 1 is faster. rel err: against the same "
             "math in fp32 on the same inputs (grads: the largest over inputs and weights).", "",
             "| section | shape | act | provider | mode | ms | vs base | TFLOP/s | rel err | grad rel err | "
             "saved MiB | peak MiB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    base = {(r["section"], tuple(r["shape"]), r["activation"], r["mode"]): r["ms"] for r in record["rows"]
            if r["provider"] in ("torch_mm_act", "eager_mlp") and "ms" in r}
    for r in record["rows"]:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            lines.append(f"| {r['section']} | {shape} | {r['activation']} | {r['provider']} | {r['mode']} | "
                         f"error: {r['error']} | | | | | | |")
            continue
        reference = base.get((r["section"], tuple(r["shape"]), r["activation"], r["mode"]))
        ratio = f"{reference / r['ms']:.2f}x" if reference else ""
        grad = f"{r['grad_rel_error']:.2e}" if "grad_rel_error" in r else ""
        lines.append(f"| {r['section']} | {shape} | {r['activation']} | {r['provider']} | {r['mode']} | "
                     f"{r['ms']:.4f} | {ratio} | {r['tflops']} | {r['rel_error']:.2e} | {grad} | "
                     f"{r.get('saved_mib') if r.get('saved_mib') is not None else ''} | "
                     f"{r.get('peak_mib') if r.get('peak_mib') is not None else ''} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke test, tiny shapes)")
    parser.add_argument("--quick", action="store_true", help="the first linear shape only, shorter timing loops")
    parser.add_argument("--out", type=Path, help="folder for linear_act.json and linear_act.md")
    parser.add_argument("--providers", nargs="*", help="only these providers")
    parser.add_argument("--compile-modes", nargs="*", default=["default"],
                        help="torch.compile modes of the eager MLP (e.g. default max-autotune-no-cudagraphs)")
    args = parser.parse_args()
    record = run(args)
    print(f"done in {record['seconds']} s")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "linear_act.json").write_text(json.dumps(record, indent=1))
        (args.out / "linear_act.md").write_text(markdown(record))
        print(f"wrote {args.out / 'linear_act.json'} and {args.out / 'linear_act.md'}")


if __name__ == "__main__":
    main()
