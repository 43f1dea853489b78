"""What ``blockfuse env`` prints: versions, the device, and where each op runs."""

from __future__ import annotations

import platform

import torch

from blockfuse import runtime

# Every public op, by name; each dispatches by the rule in blockfuse.runtime.
OPS = ("layer_norm", "rms_norm", "layer_norm_gelu", "rotary", "swiglu", "geglu", "gated_mlp", "linear_act",
       "fused_mlp", "bias_dropout_add")
# The ops whose GEMMs are not blockfuse's kernels on CUDA (see ops/mlp.py and ops/linear_act.py).
GEMM_NOTE = "gated_mlp, linear_act, fused_mlp: GEMMs by cuBLAS on CUDA, blockfuse's kernels between them"


def collect_env() -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": None,
        "cuda_runtime": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "gpu": None,
        "compute_capability": None,
        "triton_interpret": runtime.interpreter_enabled(),
    }
    if runtime.triton_available():
        import triton

        info["triton"] = triton.__version__
    if info["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = props.name
        info["compute_capability"] = f"{props.major}.{props.minor}"
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        info["multiprocessors"] = props.multi_processor_count
    info["implementation"] = {
        device: {op: runtime.implementation(device) for op in OPS}
        for device in (["cuda"] if info["cuda_available"] else []) + ["cpu"]
    }
    return info


def format_env(info: dict) -> str:
    lines = [
        f"python        {info['python']}",
        f"torch         {info['torch']} (CUDA {info['cuda_runtime'] or 'none'})",
        f"triton        {info['triton'] or 'not installed'}",
        f"GPU           {info['gpu'] or 'none'}"
        + (f" (sm_{info['compute_capability'].replace('.', '')}, {info['multiprocessors']} SMs, "
           f"{info['gpu_memory_gib']} GiB)" if info["gpu"] else ""),
        f"interpreter   TRITON_INTERPRET={'1 (kernels run on CPU tensors)' if info['triton_interpret'] else 'off'}",
        "ops:",
    ]
    for device, ops in info["implementation"].items():
        for op, impl in ops.items():
            lines.append(f"  {op:<18} {device:<5} -> {impl}")
    if info["cuda_available"]:
        lines.append(f"note: {GEMM_NOTE}.")
    if not info["cuda_available"] and not info["triton_interpret"]:
        lines.append("note: the fused Triton kernels need CUDA (or TRITON_INTERPRET=1 for the CPU "
                     "interpreter); CPU tensors use the pure-PyTorch references.")
    return "\n".join(lines)
