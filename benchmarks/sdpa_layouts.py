"""Which q/k/v memory layouts scaled_dot_product_attention reads without a copy, what layout its
output comes back in, and the time of attention + the output's reshape to (batch, seq, heads * head_dim).

    python benchmarks/sdpa_layouts.py [--shape 4,2048,16,64]

Layouts: "bhsd" (contiguous (batch, heads, seq, head_dim)), "bshd" (contiguous (batch, seq, heads,
head_dim) viewed as bhsd with transpose(1, 2)), "qkv" (strided views into one (batch, seq, 3 * heads *
head_dim) buffer, as a fused QKV GEMM writes them). Forward and forward+backward, CUDA events.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


def make(layout, b, s, h, d, device, dtype):
    if layout == "bhsd":
        return [torch.randn(b, h, s, d, device=device, dtype=dtype) for _ in range(3)]
    if layout == "bshd":
        return [torch.randn(b, s, h, d, device=device, dtype=dtype).transpose(1, 2) for _ in range(3)]
    qkv = torch.randn(b, s, 3, h, d, device=device, dtype=dtype)
    return [qkv[:, :, i].transpose(1, 2) for i in range(3)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="4,2048,16,64")
    args = parser.parse_args()
    b, s, h, d = map(int, args.shape.split(","))
    import triton.testing

    for layout in ("bhsd", "bshd", "qkv"):
        q, k, v = (t.detach().requires_grad_() for t in make(layout, b, s, h, d, "cuda", torch.bfloat16))

        def forward():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return out.transpose(1, 2).reshape(b, s, h * d)

        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        flat = forward()
        dy = torch.randn_like(flat)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            forward().backward(dy)
            torch.cuda.synchronize()
        kernels = [e.key[:60] for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        fwd = triton.testing.do_bench(forward, warmup=25, rep=200)
        step = triton.testing.do_bench(lambda: forward().backward(dy), warmup=25, rep=200, grad_to_none=[q, k, v])
        print(f"{layout}: out strides {out.stride()} (bshd-physical: {out.transpose(1, 2).is_contiguous()}), "
              f"reshape is a view: {flat._base is not None}; fwd {fwd:.4f} ms, fwd+bwd {step:.4f} ms; "
              f"dq strides {q.grad.stride() if q.grad is not None else None}")
        print("   kernels:", "; ".join(kernels))


if __name__ == "__main__":
    main()
