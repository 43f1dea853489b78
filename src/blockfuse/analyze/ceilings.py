"""The two ceilings every kernel is measured against, measured in the same run: the device-to-device
copy bandwidth and a large GEMM's throughput; and :func:`rates`, what a kernel achieved as fractions of them.
The benchmarks measure the same ceilings (``blockfuse.bench.timing.copy_bandwidth`` is this one)."""

from __future__ import annotations

import torch

from blockfuse.analyze.timing import time_cuda

GEMM_SIZE = 8192


def rates(nbytes: float | None, flops: float | None, us: float | None, ceilings: dict | None) -> dict:
    """Achieved GB/s and TFLOP/s of ``us`` microseconds, and their fractions of the measured ceilings."""
    out = {"gbps": None, "tflops": None, "frac_copy": None, "frac_gemm": None}
    if not us:
        return out
    if nbytes:
        out["gbps"] = nbytes / us / 1e3
        if ceilings:
            out["frac_copy"] = out["gbps"] / ceilings["copy"]["gbps"]
    if flops:
        out["tflops"] = flops / us / 1e6
        if ceilings:
            out["frac_gemm"] = out["tflops"] / ceilings["gemm"]["tflops"]
    return out


def copy_bandwidth(*, gib: float = 1.0, warmup_ms: float = 25, rep_ms: float = 100) -> dict:
    """Device-to-device copy of a ``gib`` GiB bf16 buffer: the ceiling every op is measured against.

    Bytes moved = 2 x the buffer size (one read, one write).

    NOTE: timed eagerly with do_bench, not in a CUDA graph: captured, the copy becomes a
    memcpy node that may run on a copy engine (seen at 2.7 TB/s against 4.2 TB/s eagerly
    on an H200). A 1 GiB copy costs a few microseconds of host time against half a
    millisecond on the GPU, so the eager time is the kernel's.
    """
    numel = int(gib * 2**30) // 2
    source = torch.empty(numel, dtype=torch.bfloat16, device="cuda").normal_()
    target = torch.empty_like(source)
    moved = 2 * source.numel() * source.element_size()
    median = time_cuda(lambda: target.copy_(source), warmup_ms=warmup_ms, rep_ms=rep_ms).median
    source = target = None  # free the 2 GiB before the ops run
    torch.cuda.empty_cache()
    return {"bytes": moved, "ms": median, "gbps": moved / median / 1e6}


def gemm_throughput(dtype: torch.dtype, size: int = GEMM_SIZE) -> dict:
    """TFLOP/s of a ``size``^3 matmul in ``dtype`` (the current TF32 setting applies to fp32)."""
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
    return {"copy": copy_bandwidth(), "gemm": gemm_throughput(dtype)}
