"""On CUDA: the reference blocks at the SPEC's size, [4, 2048, 1024] bf16, must show what a careful hand
analysis finds, and a module on blockfuse ops must show them as custom-op calls (``@pytest.mark.gpu``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import blockfuse
from blockfuse.analyze import analyze, compare
from blockfuse.models import build_block

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def reordered():
    module, (x,) = build_block("reordered", None, torch.bfloat16, "cuda")
    return analyze(module, x, backward=True, name="reordered")


@pytest.fixture(scope="module")
def standard():
    module, (x,) = build_block("standard", None, torch.bfloat16, "cuda")
    return analyze(module, x, backward=False, name="standard")


def test_reordered_forward_is_the_hand_analysis(reordered):
    inference = reordered.passes["inference"]
    assert reordered.graph_breaks == [] and reordered.graph_count == 1
    assert (inference.fused_kernels, inference.fused_launches, inference.fused_backend) == (4, 4, "Triton")
    assert inference.fused[0].startswith("rotary (RoPE)")
    assert inference.fused[1:] == ["LayerNorm + residual add", "SiLU * up (SwiGLU)", "LayerNorm + residual add"]
    assert inference.gemms == 7 and len(inference.attention) == 1
    detail = inference.reconciliation_detail
    assert detail["matched"] == inference.wrapper_launches == 12 and detail["missing"] == []
    assert detail["unattributed"] == {}  # no eager code in a whole-graph forward
    assert inference.device_kernels >= 12 and inference.kernel_ms > 0 and inference.pass_ms >= inference.kernel_ms * 0.9


def test_kernel_times_and_ceilings(reordered):
    assert reordered.ceilings["copy"]["gbps"] > 500 and reordered.ceilings["gemm"]["tflops"] > 50
    fused = [k for k in reordered.kernels if k.phase == "inference"]
    assert all(k.time_us and k.bytes and k.bytes_source == "inductor" for k in fused)  # benchmark_kernel's estimate
    assert all(0.05 < k.frac_copy < 1.3 for k in fused)
    gemms = [launch for launch in reordered.externs if launch.category == "gemm" and launch.module == "0_inference"]
    assert all(launch.time_us and launch.flops / launch.time_us / 1e6 > 10 for launch in gemms)


def test_training_steps(reordered):
    forward, backward = reordered.passes["forward"], reordered.passes["backward"]
    assert forward.reconciliation_detail["unattributed"] == {}
    assert backward.reconciliation_detail["missing"] == []
    assert backward.gemms == 14 and backward.attention[0].endswith("backward")
    assert reordered.meta["analysis_s"] < 120  # the bound, with the backward included


def test_standard_needs_more_launches(reordered, standard):
    assert standard.passes["inference"].wrapper_launches > reordered.passes["inference"].wrapper_launches
    assert standard.passes["inference"].device_kernels > reordered.passes["inference"].device_kernels
    comparison = compare(reordered, standard)
    assert "standard makes 13 launches against 12 for reordered" in comparison.sentence("inference")


def test_files_with_roofline(reordered, tmp_path):
    paths = reordered.write(tmp_path)
    assert paths["png"].stat().st_size > 10_000
    assert "![roofline](reordered.png)" in paths["markdown"].read_text()


class NormGate(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.weight = nn.Parameter(torch.rand(width) + 0.5)
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return blockfuse.layer_norm(nn.functional.silu(self.proj(x)), self.weight, self.bias) * 2


def test_blockfuse_ops_are_custom_op_calls_without_breaks():
    module = NormGate(760).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(199, 760, device="cuda", dtype=torch.bfloat16)
    report = analyze(module, x, backward=True, name="norm-gate")
    assert report.graph_breaks == []
    assert report.passes["inference"].custom_ops == ["blockfuse.layer_norm"]
    assert report.passes["backward"].custom_ops == ["blockfuse.layer_norm_backward"]
    call = next(launch for launch in report.externs
                if launch.target == "blockfuse.layer_norm" and launch.module.endswith("inference"))
    assert call.device_kernels and call.time_us > 0  # the op's own Triton kernels, attributed to the call
