"""Capture what Inductor generates for the reference blocks, as test fixtures for ``blockfuse analyze``.

    python scripts/capture_inductor_code.py --out DIR [--device cuda] [--shape 4 2048 1024]

For each block (``reordered``, ``standard``) and each pass (inference forward; training forward +
backward) it writes the generated wrapper modules (``torch._inductor.utils.run_and_get_code``) and the
GPU kernels a profiler sees in one compiled step, with the torch / triton versions they came from.
"""

from __future__ import annotations

import argparse
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


def capture(name: str, shape, dtype, device, out: Path) -> None:
    torch._dynamo.reset()
    module, (x,) = build_block(name, shape, dtype, device, **_sizes(shape))
    compiled = torch.compile(module)
    with torch.no_grad():
        _, inference_code = run_and_get_code(compiled, x)
    with torch.no_grad():
        inference_kernels = _profile_kernels(lambda: compiled(x), device)

    torch._dynamo.reset()
    module, (x,) = build_block(name, shape, dtype, device, **_sizes(shape))
    compiled = torch.compile(module)
    x = x.requires_grad_()

    def train_step():
        compiled(x).float().square().mean().backward()

    _, training_code = run_and_get_code(train_step)
    training_kernels = _profile_kernels(train_step, device)

    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    for tag, codes in (("inference", inference_code), ("training", training_code)):
        for index, code in enumerate(codes):
            (folder / f"{tag}_{index}.py").write_text(code)
    (folder / "kernels.json").write_text(json.dumps(
        {"inference": inference_kernels, "training": training_kernels, "shape": list(shape),
         "dtype": str(dtype), **_versions()}, indent=1))
    print(f"{name}: {len(inference_code)} inference modules, {len(training_code)} training modules, "
          f"{len(inference_kernels)} / {len(training_kernels)} profiled kernels")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", type=int, nargs=3, default=(4, 2048, 1024))
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "versions.json").write_text(json.dumps(_versions(), indent=1))
    for name in ("reordered", "standard"):
        capture(name, tuple(args.shape), dtype, torch.device(args.device), args.out)


if __name__ == "__main__":
    main()
