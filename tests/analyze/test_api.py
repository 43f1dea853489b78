"""End to end on the CPU (C++ kernels): a tiny reference block, a module built on a blockfuse op (a
custom-op call under Triton's interpreter; forward and backward), and the command line. One analysis per
fixture, shared by the asserts."""

from __future__ import annotations

import io
import json

import pytest
import torch
from torch import nn

import blockfuse
import blockfuse.analyze
from blockfuse.analyze import analyze, compare
from blockfuse.analyze.targets import load_target
from blockfuse.models import build_block


@pytest.fixture(scope="module")
def block_report():
    module, (x,) = build_block("reordered", (2, 16, 64), torch.float32, d_model=64, n_heads=4, ffn_hidden=128)
    longer = torch.randn(2, 24, 64, generator=torch.Generator().manual_seed(1))
    return analyze(module, x, backward=False, recompile_inputs=[(longer,)], name="reordered-tiny")


class NormGate(nn.Module):
    """Linear -> SiLU -> blockfuse.layer_norm (its launcher ops) -> * 2."""

    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)
        generator = torch.Generator().manual_seed(0)
        self.weight = nn.Parameter(torch.rand(width, generator=generator) + 0.5)
        self.bias = nn.Parameter(torch.randn(width, generator=generator))

    def forward(self, x):
        return blockfuse.layer_norm(nn.functional.silu(self.proj(x)), self.weight, self.bias) * 2


@pytest.fixture(scope="module")
def custom_op_report():
    x = torch.randn(3, 7, 72, generator=torch.Generator().manual_seed(2))  # odd rows, a width that is not 2^k
    return analyze(NormGate(72), x, backward=True, name="norm-gate")


def test_tiny_block_forward(block_report):
    assert block_report.graph_breaks == [] and block_report.graph_count == 1
    assert list(block_report.passes) == ["inference"]
    summary = block_report.passes["inference"]
    assert summary.fused_backend == "C++" and summary.fused_kernels >= 4
    assert summary.gemms == 7 and summary.gemm_ops == ["aten.addmm"] * 7
    assert summary.attention == ["flash (CPU)"]
    assert summary.fused.count("LayerNorm + residual add") == 2 and "SiLU * up (SwiGLU)" in summary.fused
    assert summary.wrapper_launches == summary.fused_launches + 8
    assert summary.pass_ms > 0 and summary.compile_s > 0
    assert summary.device_kernels is None and block_report.ceilings is None  # no profiler on the CPU
    assert len(block_report.externs) == 8
    records = {(k.module, k.name): k for k in block_report.kernels}
    assert len(records) == summary.fused_kernels
    record = next(iter(records.values()))
    assert block_report.kernel(record.module, record.name) is record


def test_provenance_gives_user_lines(block_report):
    from torch._inductor import debug

    if not hasattr(debug, "dump_inductor_provenance_info"):
        pytest.skip("this torch has no Inductor provenance tracking")
    assert block_report.modules[0]["provenance"] is True
    norms = [k for k in block_report.kernels if k.description == "LayerNorm + residual add"]
    assert norms and all(k.ops_source == "provenance" for k in norms)
    assert all(any(line.startswith("blocks.py:") for line in k.user_lines) for k in norms)
    assert all({"var_mean", "rsqrt"} <= set(k.post_grad_ops) for k in norms)


def test_recompile_probe(block_report):
    probe = block_report.recompiles
    assert probe.varying == [(0, 1)]
    as_compiled, forced, marked = probe.variants
    assert as_compiled.compiles == 2 and any("size mismatch" in f for f in as_compiled.guard_failures)
    assert forced.compiles == 1 and marked.compiles == 1
    assert "avoids the recompiles" in probe.verdict()


def test_markdown_and_json(block_report, tmp_path):
    document = json.loads(block_report.to_json())
    assert set(document) >= {"meta", "graph_breaks", "passes", "kernels", "launches", "recompiles", "notes"}
    assert document["graph_breaks"]["count"] == 0
    assert document["passes"]["inference"]["gemms"] == 7
    assert len(document["launches"]) == block_report.passes["inference"].wrapper_launches
    assert all({"module", "name", "kind", "aten_ops"} <= set(k) for k in document["kernels"])
    text = block_report.to_markdown()
    for section in ("# torch.compile analysis: reordered-tiny", "## Summary", "## Graph breaks",
                    "## Generated kernels", "## Library and op calls", "## Recompiles"):
        assert section in text
    assert "7 GEMMs (aten.addmm x7)" in text
    paths = block_report.write(tmp_path)
    assert json.loads(paths["json"].read_text())["meta"]["target"] == "reordered-tiny"
    assert paths["markdown"].read_text() == text
    assert "png" not in paths  # no kernel times on the CPU: no roofline
    # (Inductor numbers its AOT ids per process: "0_inference" only where nothing compiled before in this worker)
    inference = next(name for name in block_report.sources if name.endswith("_inference"))
    assert (paths["code"] / f"{inference}.py").read_text() == block_report.sources[inference]


def test_terminal_summary(block_report):
    from rich.console import Console

    console = Console(record=True, width=200, file=io.StringIO())
    block_report.print_summary(console)
    text = console.export_text()
    assert "inference forward: 5 fused C++ kernels" in text or "inference forward: 4 fused C++ kernels" in text
    assert "generated kernels" in text and "LayerNorm + residual add" in text


def test_custom_ops_forward_and_backward(custom_op_report):
    from blockfuse.runtime import implementation

    report = custom_op_report
    assert report.graph_breaks == []
    assert list(report.passes) == ["inference", "forward", "backward"]
    assert all(p.pass_ms > 0 for p in report.passes.values())
    if implementation("cpu") == "reference":
        # NOTE: without TRITON_INTERPRET=1 blockfuse ops on CPU tensors run the pure-PyTorch reference,
        # which Inductor traces and fuses like any other code: no custom op is left to call.
        assert all(p.custom_ops == [] for p in report.passes.values())
        assert any("LayerNorm" in d for d in report.passes["inference"].fused)
        return
    # NOTE: Triton's interpreter runs blockfuse's launchers as custom ops (on CUDA they are triton_ops, whose
    # kernels Inductor emits itself: tests/analyze/test_blockfuse_kernels.py), so they stay calls here. The
    # inference pass on this small input takes the reference, which Inductor fuses
    # (runtime.COMPILED_INFERENCE_MAX_ELEMENTS); the training passes keep the kernels.
    assert report.passes["inference"].custom_ops == []
    assert any("LayerNorm" in d for d in report.passes["inference"].fused)
    assert report.passes["forward"].custom_ops == ["blockfuse.norm_fwd"]
    assert report.passes["backward"].custom_ops == ["blockfuse.norm_bwd"]
    assert report.passes["backward"].gemms == 2  # the weight and input gradients of the Linear
    assert all(p.blockfuse_kernels == [] for p in report.passes.values())
    custom = [launch for launch in report.externs if launch.category == "custom op"]
    assert custom[0].args[0] == "fp32[3, 7, 72]"
    assert "1 custom-op call(s) (blockfuse.norm_fwd)" in report.passes["forward"].headline()


def test_compare(block_report, custom_op_report):
    comparison = compare(block_report, custom_op_report)
    rows = {row["metric"]: row for row in comparison.rows("inference")}
    assert rows["gemms"]["a"] == 7 and rows["gemms"]["b"] == 1 and rows["gemms"]["b_minus_a"] == -6
    assert comparison.steps() == ["inference", "forward", "backward"]
    assert "norm-gate makes" in comparison.sentence("inference")
    assert "| GEMMs | 7 | 1 | -6 |" in comparison.to_markdown()


def test_package_is_callable():
    assert callable(blockfuse.analyze) and blockfuse.analyze.compare is compare


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        analyze(nn.Identity(), torch.ones(2), mode="fastest")
    with pytest.raises(ValueError, match="example_inputs"):
        analyze(nn.Identity())
    with pytest.raises(ValueError, match="BLOCK: expected one of"):
        load_target("no-such-block")
    with pytest.raises(ValueError, match="shape"):
        load_target("reordered", (4, 64))


FACTORIES = '''
import torch


def make(shape=(8, 32), dtype=torch.float32, device="cpu"):
    class Gate(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.silu(x) * x.sum(-1, keepdim=True)

    generator = torch.Generator().manual_seed(3)
    return Gate(), (torch.randn(shape, generator=generator).to(device=device, dtype=dtype),)


def make_other(shape=(8, 32), dtype=torch.float32, device="cpu"):
    generator = torch.Generator().manual_seed(4)
    return (lambda x: torch.sin(x) * x + 1.0), torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
'''


def test_command_line_with_a_user_factory_and_compare(tmp_path, capsys):
    from blockfuse.cli import main

    factory = tmp_path / "gates.py"
    factory.write_text(FACTORIES)
    out = tmp_path / "out"
    code = main(["analyze", f"{factory}:make", "--shape", "9x40", "3x40", "--dtype", "fp32", "--device", "cpu",
                 "--compare", f"{factory}:make_other", "--out", str(out)])
    assert code == 0
    first = json.loads((out / "gates-make.json").read_text())
    assert first["meta"]["input_shapes"] == [[9, 40]]
    assert first["recompiles"]["shapes"] == [[[9, 40]], [[3, 40]]]
    assert first["meta"]["command"].startswith("blockfuse analyze ")
    assert (out / "gates-make_other.md").exists() and (out / "gates-make-code").is_dir()
    comparison = json.loads((out / "compare-gates-make-gates-make_other.json").read_text())
    assert comparison["steps"]["inference"]["rows"][0]["metric"] == "graphs"
    printed = capsys.readouterr().out
    assert "gates-make 9x40 float32" in printed and f"wrote {out}/compare-gates-make-gates-make_other.json" in printed


def test_command_line_rejects_a_bad_shape():
    from blockfuse.cliutil import UsageError, parse_shapes

    assert parse_shapes(["4x2048x1024,2x16x64", "1x3x5"]) == [(4, 2048, 1024), (2, 16, 64), (1, 3, 5)]
    with pytest.raises(UsageError, match="--shape: bad shape"):
        parse_shapes(["4x0x3"])
    with pytest.raises(UsageError, match="--shape: bad shape"):
        parse_shapes(["four"])
