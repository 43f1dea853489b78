"""On CUDA: the reference blocks at the SPEC's size, [4, 2048, 1024] bf16, must show what a careful hand
analysis finds, and modules on blockfuse ops (the fused reordered block) must show blockfuse's kernels as
Triton kernels labelled blockfuse's, not as custom-op calls (``@pytest.mark.gpu``)."""

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
    gemms = [launch for launch in reordered.externs
             if launch.category == "gemm" and launch.module.endswith("_inference")]  # (AOT ids count per process)
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


def _blockfuse_calls(report) -> list[str]:
    """The blockfuse ops the compiled code calls as custom ops, but those registered opaque on purpose
    (``launch.OPAQUE_LAUNCHERS``: the gated MLP's backward, whose blocks must run as they are)."""
    from blockfuse.ops.launch import OPAQUE_LAUNCHERS

    return [launch.target for launch in report.externs if launch.target.startswith("blockfuse.")
            and launch.target.split(".")[1] not in OPAQUE_LAUNCHERS]


def test_only_the_declared_launchers_are_opaque():
    """Opaque on purpose: the gated MLP's backward (its blocks must run as they are) and its gate|up GEMM (the
    pre-activations' dense layout that backward overwrites), and the fused loss's three launchers (chunk loops of
    cuBLAS GEMMs that Inductor must not take apart into logits)."""
    import blockfuse.ops.cross_entropy  # noqa: F401  (registers its launchers)
    from blockfuse.ops.launch import OPAQUE_LAUNCHERS

    assert OPAQUE_LAUNCHERS == {"gated_mlp_down_bwd_", "mlp_gate_up_fwd", "linear_cross_entropy_fwd",
                                "linear_cross_entropy_bwd", "linear_cross_entropy_scale_"}


def test_blockfuse_ops_are_blockfuse_triton_kernels_without_breaks():
    """On CUDA a blockfuse op's launchers are triton_ops: Inductor launches their kernels itself."""
    module = NormGate(760).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(199, 760, device="cuda", dtype=torch.bfloat16)
    report = analyze(module, x, backward=True, name="norm-gate")
    assert report.graph_breaks == []
    assert report.passes["inference"].blockfuse_kernels == ["_norm_fwd_kernel"]
    assert {"_norm_bwd_kernel", "_sum_partials_kernel"} <= set(report.passes["backward"].blockfuse_kernels)
    assert _blockfuse_calls(report) == []
    launch = next(launch for launch in report.launches
                  if launch.owner == "blockfuse" and launch.module.endswith("inference"))
    assert launch.kind == "triton" and launch.device_kernels == ["_norm_fwd_kernel"] and launch.time_us > 0


@pytest.fixture(scope="module")
def fused_reordered():
    # NOTE: a small block (the labels checked here do not depend on the size), but over
    # runtime.COMPILED_INFERENCE_MAX_ELEMENTS, so that its inference pass launches blockfuse's kernels.
    module, (x,) = build_block("reordered", (2, 160, 256), torch.bfloat16, "cuda", impl="fused",
                               d_model=256, n_heads=4, ffn_hidden=1024)
    return analyze(module, x, backward=True, name="reordered-fused")


def test_fused_block_shows_blockfuse_kernels_as_triton_kernels(fused_reordered):
    """The fused reordered block, compiled: blockfuse's kernels are Triton kernels in Inductor's wrapper,
    labelled blockfuse's by their names (``KERNEL_NAMES``), launched and profiled like Inductor's own,
    and no blockfuse op is left as a custom-op call."""
    from blockfuse.analyze.kernels import blockfuse_kernel_names
    from blockfuse.ops.launch import KERNEL_NAMES

    report = fused_reordered
    names = blockfuse_kernel_names()
    assert report.graph_breaks == [] and names <= KERNEL_NAMES
    for step, summary in report.passes.items():
        assert summary.blockfuse_kernels, f"{step}: no blockfuse kernel launched"
        assert set(summary.blockfuse_kernels) <= names, step
        assert summary.fused_launches >= len(summary.blockfuse_kernels) and summary.fused_backend == "Triton"
    records = [k for k in report.kernels if k.owner == "blockfuse"]
    assert records and all(k.backend == "triton" and k.kind == "blockfuse" and k.source_name in names
                           and k.description == f"blockfuse {k.source_name}" and k.launches >= 1 for k in records)
    for launch in report.launches:
        if launch.owner == "blockfuse":
            assert launch.kind == "triton" and launch.time_us and launch.time_us > 0, launch.target
            assert launch.device_kernels[0].startswith(launch.device_name), (launch.target, launch.device_kernels)
    assert "| blockfuse | blockfuse _" in report.to_markdown()
    assert _blockfuse_calls(report) == [], "blockfuse ops still called as custom ops"
