"""Capture what Inductor generates for the reference blocks, as test fixtures for ``blockfuse analyze``.

    python scripts/capture_inductor_code.py --out DIR [--device cuda] [--shape 4 2048 1024] [--like-analyze]
    python scripts/capture_inductor_code.py --out DIR --dynamic-only   # the small dynamic-shape fixture

For each block (``reordered``, ``standard``) and each pass (inference forward; training forward +
backward) it writes the generated wrapper modules (``torch._inductor.utils.run_and_get_code``) and the
GPU kernels a profiler sees in one compiled step, with the torch / triton versions they came from.
``--like-analyze`` compiles with the settings ``blockfuse analyze`` uses (``benchmark_kernel`` on CUDA,
provenance tracking), so the wrappers carry ``kernel_num_gb`` / ``kernel_flop`` and provenance handles,
and writes each graph's provenance next to it (``<pass>_<i>.provenance.json``).
``--dynamic-only`` writes ``dynamic/inference_0.py``: a small function compiled with ``dynamic=True``,
whose wrapper has symbolic sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
from pathlib import Path

import torch
from torch._inductor.utils import run_and_get_code

from blockfuse.models import build_block


def _versions() -> dict:
    info = {"torch": torch.__version__, "python": platform.python_version(), "device": "cpu"}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name()
    return info


def _profile_kernels(step, device) -> list[dict]:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    kernels = []
    for event in prof.events():
        if device.type == "cuda" and event.device_type == torch.autograd.DeviceType.CUDA:
            kernels.append({"name": event.name, "us": event.device_time})
    return kernels


def _sizes(shape) -> dict:
    """Config overrides for a width other than the SPEC's 1024: head_dim 64 (at least one head), FFN 4x."""
    d_model = shape[-1]
    return {} if d_model == 1024 else {"d_model": d_model, "n_heads": max(1, d_model // 64), "ffn_hidden": 4 * d_model}


def _codes(fn, device, like_analyze: bool) -> tuple[list[str], list[dict]]:
    """The wrapper sources ``fn()`` compiles (and their provenance with ``like_analyze``)."""
    if not like_analyze:
        _, codes = run_and_get_code(fn)
        return codes, [{} for _ in codes]
    from blockfuse.analyze.capture import CodeCapture

    torch._dynamo.reset()
    with CodeCapture(device.type) as capture:
        fn()
    return [r.source for r in capture.records], [r.provenance for r in capture.records]


def capture(name: str, shape, dtype, device, out: Path, like_analyze: bool = False) -> None:
    torch._dynamo.reset()
    module, (x,) = build_block(name, shape, dtype, device, **_sizes(shape))
    compiled = torch.compile(module)
    with torch.no_grad():
        inference_code, inference_provenance = _codes(lambda: compiled(x), device, like_analyze)
    with torch.no_grad():
        inference_kernels = _profile_kernels(lambda: compiled(x), device)

    torch._dynamo.reset()
    module, (x,) = build_block(name, shape, dtype, device, **_sizes(shape))
    compiled = torch.compile(module)
    x = x.requires_grad_()

    def train_step():
        compiled(x).float().square().mean().backward()

    training_code, training_provenance = _codes(train_step, device, like_analyze)
    training_kernels = _profile_kernels(train_step, device)

    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    for tag, codes, provenances in (("inference", inference_code, inference_provenance),
                                    ("training", training_code, training_provenance)):
        for index, (code, provenance) in enumerate(zip(codes, provenances, strict=True)):
            (folder / f"{tag}_{index}.py").write_text(code)
            if provenance:
                (folder / f"{tag}_{index}.provenance.json").write_text(json.dumps(provenance, indent=1))
    (folder / "kernels.json").write_text(json.dumps(
        {"inference": inference_kernels, "training": training_kernels, "shape": list(shape),
         "dtype": str(dtype), **_versions()}, indent=1))
    print(f"{name}: {len(inference_code)} inference modules, {len(training_code)} training modules, "
          f"{len(inference_kernels)} / {len(training_kernels)} profiled kernels")


def capture_dynamic(out: Path) -> None:
    """A two-input function compiled with ``dynamic=True`` on the CPU: symbolic sizes in the wrapper."""

    def silu_gate(x, w):
        return torch.nn.functional.silu(x @ w) * x.sum(-1, keepdim=True)

    torch._dynamo.reset()
    compiled = torch.compile(silu_gate, dynamic=True)
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 32, generator=generator), torch.randn(32, 32, generator=generator)
    with contextlib.suppress(FileExistsError):
        (out / "dynamic").mkdir(parents=True)
    _, codes = run_and_get_code(compiled, x, w)
    (out / "dynamic" / "inference_0.py").write_text(codes[0])
    print(f"dynamic: {len(codes)} module(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", type=int, nargs=3, default=(4, 2048, 1024))
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--like-analyze", action="store_true", help="compile with blockfuse analyze's settings")
    parser.add_argument("--dynamic-only", action="store_true", help="only the small dynamic-shape fixture (CPU)")
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.dynamic_only:
        capture_dynamic(args.out)
        return
    (args.out / "versions.json").write_text(json.dumps(_versions(), indent=1))
    for name in ("reordered", "standard"):
        capture(name, tuple(args.shape), dtype, torch.device(args.device), args.out, args.like_analyze)


if __name__ == "__main__":
    main()
