"""Grouped-query heads in the fused block: handed to SDPA as they are (``enable_gqa``, models/fused.py NATIVE_GQA)
against repeated first, in one process, alternating: training step time (fwd+bwd, CUDA events, L2 flushed), peak
memory, and the output's and gradients' relative error against an fp32 run of the same weights.

    PYTHONPATH=src python benchmarks/gqa_attention.py [--rounds 3] [--json FILE]
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/gqa_attention.py --smoke   (CPU: tiny shapes, errors only,
        the CPU's SDPA made to take the grouped heads as they are)

Workloads: the olmo2-1b layer with 4 kv heads of 16 (QK-norm + RoPE, reordered), and a Llama-3-8B-like pre-norm
layer (d 4096, 32 heads, 8 kv heads, SwiGLU 14336, RMSNorm), each at [2, 4096], bf16, 2 layers.
"""

from __future__ import annotations

import argparse
import json

import torch

from blockfuse.bench.timing import peak_memory_mib, time_cuda
from blockfuse.models import build_model, convert
from blockfuse.models import fused as fused_module

WORKLOADS = {
    "olmo2-1b, 16 heads / 4 kv": ("olmo2-1b", {"n_kv_heads": 4}),
    "llama3-8b-like, 32 / 8": ("standard", {"d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336,
                                            "mlp": "swiglu", "norm": "rms", "bias": False,
                                            "rms_cast_before_weight": True}),
}


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).norm() / b.detach().double().norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, errors only")
    args = parser.parse_args()
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        from blockfuse.models import eager as eager_module

        eager_module.sdpa_takes_grouped_heads = lambda q, masked: not masked
    results = []
    for label, (name, overrides) in WORKLOADS.items():
        if args.smoke:
            overrides = {**overrides, "d_model": 128, "n_heads": overrides["n_heads"] if "n_heads" in overrides
                         else 16, "ffn_hidden": 256}
        shape = (2, 16 if args.smoke else 4096, overrides.get("d_model", 2048))
        model32, inputs = build_model(name, shape, torch.float32, device, layers=2, seed=0, **overrides)
        x = inputs[0]
        dy = torch.randn_like(x)
        x32 = x.detach().clone().requires_grad_()
        out32 = model32(x32)
        out32.backward(dy)
        ref = (out32.detach(), x32.grad)
        model = convert(model32, "fused").to(torch.bfloat16)
        del model32
        xb, dyb = x.to(torch.bfloat16), dy.to(torch.bfloat16)

        def step():
            model.zero_grad(set_to_none=True)
            xi = xb.detach().requires_grad_()
            out = model(xi)
            out.backward(dyb)
            return out, xi

        rows = {}
        for round_ in range(args.rounds):
            for native in (False, True):
                fused_module.NATIVE_GQA = native
                out, xi = step()
                errors = (relative(out, ref[0]), relative(xi.grad, ref[1]))
                if args.smoke:
                    print(f"{label}: {'native' if native else 'repeated'}: rel err out {errors[0]:.2e} dx "
                          f"{errors[1]:.2e}")
                    continue
                timing = time_cuda(step, warmup_ms=100, rep_ms=400, min_reps=5)
                peak = peak_memory_mib(step)
                rows.setdefault(native, []).append({"ms": timing.median, "peak_mib": peak, "rel_err_out": errors[0],
                                                    "rel_err_dx": errors[1]})
                print(f"{label}: round {round_ + 1}, {'native' if native else 'repeated'}: {timing.median:.3f} ms, "
                      f"peak {peak:.0f} MiB, rel err out {errors[0]:.2e} dx {errors[1]:.2e}", flush=True)
        if args.smoke:
            continue
        medians = {k: sorted(r["ms"] for r in v)[len(v) // 2] for k, v in rows.items()}
        print(f"{label}: native / repeated, median of rounds: {medians[False] / medians[True]:.3f}x speed, peak "
              f"{rows[True][0]['peak_mib']:.0f} against {rows[False][0]['peak_mib']:.0f} MiB", flush=True)
        results.append({"workload": label, "rounds": {("native" if k else "repeated"): v for k, v in rows.items()}})
        del model
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"card": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
