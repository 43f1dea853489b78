"""The two ceilings every kernel is measured against, measured in the same run: the device-to-device
copy bandwidth (``blockfuse.bench.timing.copy_bandwidth``) and a large GEMM's throughput."""

from __future__ import annotations

import torch

GEMM_SIZE = 8192


def gemm_throughput(dtype: torch.dtype, size: int = GEMM_SIZE) -> dict:
    """TFLOP/s of a ``size``^3 matmul in ``dtype`` (the current TF32 setting applies to fp32)."""
    from blockfuse.bench.timing import time_cuda

    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    out = torch.empty(size, size, device="cuda", dtype=dtype)
    ms = time_cuda(lambda: torch.mm(a, b, out=out), warmup_ms=25, rep_ms=100).median
    a = b = out = None  # free the 384 MiB before the analysis goes on
    torch.cuda.empty_cache()
    return {"shape": [size, size, size], "dtype": str(dtype).removeprefix("torch."), "ms": ms,
            "tflops": 2 * size**3 / ms / 1e9}


def measure(dtype: torch.dtype) -> dict:
    """``{"copy": {bytes, ms, gbps}, "gemm": {shape, dtype, ms, tflops}}`` on the current CUDA device."""
    from blockfuse.bench.timing import copy_bandwidth

    return {"copy": copy_bandwidth(), "gemm": gemm_throughput(dtype)}
