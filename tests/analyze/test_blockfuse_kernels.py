"""blockfuse's own kernels in generated code: on CUDA every launcher op is a ``triton_op``, so Inductor emits
blockfuse's kernels as user-defined Triton kernels and launches them like its own. The analysis must show
them as Triton kernels labelled blockfuse's, by name, and still report the ops that remain custom-op calls.

Fixtures: the wrapper modules torch 2.11 wrote on an H200 (``cuda-h200-torch2.11-blockfuse``), and one in the
form torch 2.13 writes (``cuda-torch2.13-user-kernels``, made from 2.13's code generation: CUDA is needed to
capture user kernels, and 2.13 runs only on the CPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blockfuse.analyze.kernels import blockfuse_kernel_names
from blockfuse.analyze.profiler import DeviceKernel, reconcile
from blockfuse.analyze.report import Report, build_kernels, build_pass
from blockfuse.analyze.wrapper import parse_wrapper
from blockfuse.ops.launch import KERNEL_NAMES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor"
TORCH_2_13 = FIXTURES / "cuda-torch2.13-user-kernels" / "inference_0.py"
H200 = FIXTURES / "cuda-h200-torch2.11-blockfuse"
BDA = "_bias_dropout_add_fwd_kernel"


def _launched(module, owner="blockfuse"):
    return [module.kernels[launch.target].source_name for launch in module.launches
            if launch.kind == "triton" and launch.owner == owner]


def _report(modules) -> Report:
    meta = {"target": "fixture", "input_shapes": [[4, 16, 256]], "dtype": "bfloat16", "mode": "default",
            "dynamic": None, "backward": False, "date": "2026-11-26T00:00:00", "analysis_s": 1.0, "card": "NVIDIA H200",
            "torch": "2.13.0", "triton": "3.6.0", "cuda": "13.0", "python": "3.12.3", "device": "cuda",
            "profiled": False, "steps": 5}
    passes = {m.kind: build_pass(m.kind, [m], None, {}, None) for m in modules}
    return Report(meta=meta, graph_breaks=[], graph_count=1, passes=passes, kernels=build_kernels(modules, None),
                  launches=[launch for m in modules for launch in m.launches],
                  modules=[{"id": m.id, "kind": m.kind, "phase": m.kind, "device": m.device,
                            "kernels": len(m.kernels), "launches": len(m.launches), "provenance": False}
                           for m in modules])


def test_kernel_names_are_registered():
    names = blockfuse_kernel_names()
    assert {BDA, "_bias_dropout_add_bwd_kernel", "_norm_fwd_kernel", "_norm_bwd_kernel",
            "_sum_partials_kernel"} <= names
    assert names == frozenset(KERNEL_NAMES)


def test_torch_2_13_user_kernel_is_a_blockfuse_triton_kernel():
    module = parse_wrapper(TORCH_2_13.read_text())
    assert (module.id, module.kind, module.device) == ("0_inference", "inference", "cuda")
    kernel = module.kernels[f"{BDA}_0"]
    assert (kernel.backend, kernel.kind, kernel.owner) == ("triton", "blockfuse", "blockfuse")
    assert kernel.source_name == kernel.jit_name == BDA and BDA in KERNEL_NAMES
    # constexprs left out (Inductor passes none of them); pointers: the one stored to is the output
    assert [(p.name, p.role) for p in kernel.params] == [
        ("X", "in"), ("BIAS", "in"), ("RES", "in"), ("OUT", "out"), ("SEED", "in"), ("stride_x", "scalar"),
        ("stride_res", "scalar"), ("stride_out", "scalar"), ("M", "scalar"), ("N", "scalar"), ("p", "scalar"),
        ("scale", "scalar")]
    assert module.description(kernel.name) == f"blockfuse {BDA}"
    others = [k for k in module.kernels.values() if k.name != kernel.name]
    assert len(others) == 3 and all(k.owner is None and k.kind == "pointwise" for k in others)

    launches = [launch for launch in module.launches if launch.target == kernel.name]
    assert len(launches) == 2 and all(launch.kind == "triton" and launch.owner == "blockfuse" for launch in launches)
    first = launches[0]
    assert first.args == ["bf16[4, 16, 256]", "bf16[256]", "bf16[4, 16, 256]", "bf16[4, 16, 256]", "i64[1]"]
    assert first.bytes == 3 * 16384 * 2 + 256 * 2 + 8 and first.bytes_source == "estimate"
    assert first.numel == 16384 and first.device_name == BDA
    (custom,) = [launch for launch in module.launches if launch.kind == "extern" and launch.category == "custom op"]
    assert custom.target == "blockfuse.rotary"  # an op still registered as a custom op stays a call

    summary = build_pass("inference", [module], None, {}, None)
    assert (summary.fused_kernels, summary.fused_launches, summary.fused_backend) == (4, 5, "Triton")
    assert summary.blockfuse_kernels == [BDA, BDA] and summary.custom_ops == ["blockfuse.rotary"]
    assert f"2 of the fused launches are blockfuse kernels ({BDA} x2)" in summary.headline()
    assert "1 custom-op call(s) (blockfuse.rotary)" in summary.headline()


def test_report_labels_blockfuse_kernels():
    module = parse_wrapper(TORCH_2_13.read_text())
    report = _report([module])
    record = report.kernel("0_inference", f"{BDA}_0")
    assert (record.owner, record.kind, record.source_name, record.launches) == ("blockfuse", "blockfuse", BDA, 2)
    assert record.bytes == 2 * (3 * 16384 * 2 + 256 * 2 + 8)
    assert all(k.owner is None for k in report.kernels if k.name != record.name)
    document = report.to_dict()
    entry = next(k for k in document["kernels"] if k["name"] == record.name)
    assert entry["owner"] == "blockfuse" and entry["source_name"] == BDA
    assert [launch["owner"] for launch in document["launches"] if launch["target"] == record.name] == ["blockfuse"] * 2
    text = report.to_markdown()
    assert f"| 0_inference | `{BDA}_0` | blockfuse | blockfuse {BDA} |" in text
    assert "Kind `blockfuse`: one of blockfuse's own Triton kernels" in text
    assert "`blockfuse.rotary` | custom op" in text


def test_unique_user_kernel_names_keep_the_label():
    """With ``config.triton.unique_user_kernel_names`` Inductor names the jitted function and the
    compiled kernel ``<fn>_<i>``: the label comes from the name without the suffix."""
    source = TORCH_2_13.read_text().replace(f"async_compile.triton('{BDA}'", f"async_compile.triton('{BDA}_0'")
    source = source.replace(f"def {BDA}(", f"def {BDA}_0(")
    kernel = parse_wrapper(source).kernels[f"{BDA}_0"]
    assert (kernel.owner, kernel.source_name, kernel.jit_name) == ("blockfuse", BDA, f"{BDA}_0")


def test_other_user_kernels_are_not_blockfuse():
    source = TORCH_2_13.read_text().replace(BDA, "_my_bias_kernel")
    module = parse_wrapper(source)
    kernel = module.kernels["_my_bias_kernel_0"]
    assert (kernel.kind, kernel.owner, kernel.source_name) == ("user Triton kernel", None, "_my_bias_kernel")
    assert module.description(kernel.name) != "blockfuse _my_bias_kernel"
    assert build_pass("inference", [module], None, {}, None).blockfuse_kernels == []


def test_profiler_matches_blockfuse_kernels_by_their_own_name():
    module = parse_wrapper(TORCH_2_13.read_text())
    seen = [DeviceKernel(name, us) for name, us in (
        ("triton_poi_fused_randint_0", 1.0), ("triton_poi_fused_randint_1", 1.0), (BDA, 4.0), (BDA, 4.5),
        ("triton_poi_fused_mul_2", 2.0), ("_rotary_kernel", 6.0))]
    result = reconcile(module.launches, seen)
    assert result.missing == ["aten.randint"] and result.unattributed == {}
    assert [launch.time_us for launch in module.launches if launch.owner == "blockfuse"] == [4.0, 4.5]
    rotary = next(launch for launch in module.launches if launch.target == "blockfuse.rotary")
    assert rotary.device_kernels == ["_rotary_kernel"]  # the custom op's own kernel, attributed to the call


@pytest.mark.parametrize("graph, expected", [
    ("inference_0", ["_norm_fwd_kernel", BDA]),
    ("training_0", ["_norm_fwd_kernel", BDA]),
    ("training_1", ["_bias_dropout_add_bwd_kernel", "_sum_partials_kernel", "_norm_bwd_kernel",
                    "_sum_partials_kernel"]),
])
def test_h200_launcher_ops_are_all_triton_kernels(graph, expected):
    """torch 2.11's real code for a graph on launcher ops only: every blockfuse op is Triton kernels, no call."""
    module = parse_wrapper((H200 / "norm-bias-dropout-add" / f"{graph}.py").read_text())
    assert _launched(module) == expected and set(expected) <= blockfuse_kernel_names()
    assert not [launch for launch in module.launches if launch.target.startswith("blockfuse.")]
    assert all(k.owner is None for k in module.kernels.values() if k.name.startswith("triton_"))


def test_h200_none_arguments_line_up():
    """Inductor passes a None pointer as -1 and appends the grid: the tensors are still the right ones."""
    module = parse_wrapper((H200 / "norm-bias-dropout-add" / "inference_0.py").read_text())
    norm = next(launch for launch in module.launches if launch.target == "_norm_fwd_kernel_0")
    params = [p.name for p in module.kernels[norm.target].params]
    assert params[:9] == ["X", "RES", "W", "B", "Y", "S", "MEAN", "RSTD", "SEED"] and params[-1] == "dropout_scale"
    assert norm.args == ["bf16[64, 256]", "bf16[64, 256]", "bf16[256]", "bf16[256]", "bf16[64, 256]", "fp32[64]",
                         "fp32[64]", "i64[1]"]  # S is None (-1): no tensor
    assert norm.bytes == 3 * 64 * 256 * 2 + 2 * 256 * 2 + 2 * 64 * 4 + 8  # x, residual, y; w, b; mean, rstd; seed


def test_h200_fused_block_mixes_kernels_and_remaining_custom_ops():
    folder = H200 / "fused-reordered"
    modules = [parse_wrapper((folder / f"{name}.py").read_text()) for name in ("inference_0", "training_0",
                                                                               "training_1")]
    inference, forward, backward = (build_pass(m.kind, [m], None, {}, None) for m in modules)
    assert inference.blockfuse_kernels == ["_norm_fwd_kernel"] * 2
    assert inference.custom_ops == ["blockfuse.rotary", "blockfuse.gated_mlp"]
    assert backward.blockfuse_kernels == ["_norm_bwd_kernel", "_sum_partials_kernel"] * 2
    assert backward.custom_ops == ["blockfuse.gated_mlp_backward", "blockfuse.rotary_backward"]
    assert forward.fused_launches == 3 and forward.gemms == 2


def test_existing_fixtures_have_no_blockfuse_kernels():
    folders = (FIXTURES / "cuda-h200-torch2.11", FIXTURES / "cpu-torch2.13")
    paths = [path for folder in folders for path in sorted(folder.rglob("*.py"))]
    for path in paths:
        module = parse_wrapper(path.read_text())
        assert all(k.owner is None for k in module.kernels.values()), path
        assert "blockfuse kernels" not in build_pass(module.kind, [module], None, {}, None).headline(), path
