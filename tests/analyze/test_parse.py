"""Parsing real generated code: the committed fixtures of torch 2.11 (CUDA, H200) and torch 2.13 (CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blockfuse.analyze.calls import classify
from blockfuse.analyze.fusion import describe, ops_from_kernel_name
from blockfuse.analyze.kernels import parse_comment, parse_triton
from blockfuse.analyze.profiler import DeviceKernel, kernel_class, median_step, reconcile
from blockfuse.analyze.report import build_kernels, build_pass
from blockfuse.analyze.wrapper import parse_wrapper

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor"
CUDA = FIXTURES / "cuda-h200-torch2.11"
CPU = FIXTURES / "cpu-torch2.13"


def _module(folder: Path, block: str, name: str):
    return parse_wrapper((folder / block / f"{name}.py").read_text())


def _fused(module):
    return [module.description(launch.target) for launch in module.launches if launch.kind in ("triton", "cpp")]


def test_fixture_versions_are_recorded():
    assert json.loads((CUDA / "versions.json").read_text())["torch"].startswith("2.11")
    assert json.loads((CPU / "versions.json").read_text())["torch"].startswith("2.13")


def test_reordered_inference_on_cuda_is_the_hand_analysis():
    """4 fused Triton kernels (RoPE on q and k; LayerNorm + residual; SiLU * up; LayerNorm + residual),
    7 GEMMs, 1 attention kernel: what a careful reading of the generated code finds."""
    module = _module(CUDA, "reordered", "inference_0")
    assert (module.id, module.kind, module.device) == ("0_inference", "inference", "cuda")
    fused = [launch for launch in module.launches if launch.kind == "triton"]
    assert len(module.kernels) == 4 and len(fused) == 4
    assert [module.kernels[launch.target].kind for launch in fused] == [
        "pointwise", "persistent reduction", "pointwise", "persistent reduction"]
    descriptions = _fused(module)
    assert descriptions[0] == "rotary (RoPE) (feeds attention)"
    assert descriptions[1:] == ["LayerNorm + residual add", "SiLU * up (SwiGLU)", "LayerNorm + residual add"]
    gemms = [launch for launch in module.launches if launch.category == "gemm"]
    assert len(gemms) == 7 and {launch.target for launch in gemms} == {"aten.addmm"}
    assert gemms[0].args == ["bf16[1024]", "bf16[8192, 1024]", "bf16[1024, 1024]", "out=bf16[8192, 1024]"]
    assert gemms[0].flops == 2 * 8192 * 1024 * 1024
    assert sum(launch.flops for launch in gemms) == 2 * 8192 * 1024 * (4 * 1024 + 3 * 4096)
    attention = [launch for launch in module.launches if launch.category == "attention"]
    assert len(attention) == 1 and attention[0].attention == "cuDNN"
    assert attention[0].flops == pytest.approx(0.5 * 4 * 4 * 16 * 2048 * 2048 * 64)  # causal: half of 4*B*H*S^2*D
    assert len(module.launches) == 12


def test_kernel_details_from_triton_meta_and_comments():
    module = _module(CUDA, "reordered", "inference_0")
    norm = module.kernels["triton_per_fused_add_native_layer_norm_view_1"]
    assert (norm.num_load, norm.num_store, norm.num_reduction) == (4, 1, 4)
    assert norm.numel == {"x": 8192, "r0_": 1024} and norm.total_numel == 8192 * 1024
    assert norm.ops_source == "comments"
    assert norm.aten_ops == ["aten.view", "aten.native_layer_norm", "aten.add"]
    assert norm.source_nodes == ["linear_3", "layer_norm", "h"]
    assert {"var_mean", "rsqrt", "add"} <= set(norm.post_grad_ops)
    assert [p.role for p in norm.params] == ["inout", "in", "in", "in", "scalar", "scalar"]
    launch = next(launch for launch in module.launches if launch.target == norm.name)
    # in/out x (read + write) + residual + weight + bias, bf16; no kernel_num_gb without benchmark_kernel
    assert launch.bytes == 2 * (2 * 8192 * 1024 + 8192 * 1024 + 2 * 1024) and launch.bytes_source == "estimate"


def test_inductor_byte_and_flop_estimates_are_preferred():
    source = ("@triton_heuristics.pointwise(size_hints={'x': 1024}, triton_meta={'signature': {'in_ptr0': '*fp32', "
              "'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}}, inductor_meta={'kernel_name': 'k', "
              "'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'kernel_num_gb': 8.2e-06, 'kernel_flop': 0})\n"
              "@triton.jit\ndef triton_poi_fused_neg_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):\n"
              "    xnumel = 1024\n")
    kernel = parse_triton("triton_poi_fused_neg_0", source, parse_comment([]))
    assert kernel.num_gb == pytest.approx(8.2e-06) and kernel.kind == "pointwise"
    assert kernel.ops_source == "kernel name" and kernel.aten_ops == ["aten.neg"]
    assert [p.name for p in kernel.params] == ["in_ptr0", "out_ptr0", "xnumel"]


def test_standard_block_needs_more_launches():
    reordered = _module(CUDA, "reordered", "inference_0")
    standard = _module(CUDA, "standard", "inference_0")
    assert len(standard.launches) > len(reordered.launches)
    assert _fused(standard)[0] == "LayerNorm" and _fused(standard)[-1] == "add"
    for folder in (CUDA, CPU):  # forward and backward, both versions
        for name in ("inference_0", "training_0", "training_1"):
            standard_launches = len(_module(folder, "standard", name).launches)
            assert standard_launches >= len(_module(folder, "reordered", name).launches) - 2


def test_backward_wrapper_ops_and_repeated_launches():
    module = _module(CUDA, "reordered", "training_1")
    assert module.kind == "backward"
    sums = [launch for launch in module.launches if launch.kind == "wrapper op"]
    assert [launch.target for launch in sums] == ["aten.sum"] * 4  # the mix-order reduction's workspace sums
    assert sums[0].args == ["fp32[512, 1024]"]
    repeated = [launch for launch in module.launches
                if launch.target == "triton_poi_fused_native_layer_norm_backward_7"]
    assert len(repeated) == 4
    attention = [launch for launch in module.launches if launch.category == "attention"]
    assert [launch.attention for launch in attention] == ["cuDNN backward"]
    assert len([launch for launch in module.launches if launch.category == "gemm"]) == 14
    standard = _module(CUDA, "standard", "training_1")
    chained = [launch.target for launch in standard.launches if launch.kind == "wrapper op"]
    assert chained[:2] == ["aten.sum", "aten.to"]  # ``x.sum(dim=0).to(torch.bfloat16)``: two launches, in order


def test_cpu_cpp_kernels_from_torch_2_13():
    module = _module(CPU, "reordered", "inference_0")
    assert module.device == "cpu"
    assert all(k.backend == "cpp" for k in module.kernels.values())
    assert all(k.ops_source == "kernel name" for k in module.kernels.values())  # 2.13 writes no comment above them
    assert {k.kind for k in module.kernels.values()} == {"C++ pointwise", "C++ reduction"}
    assert _fused(module) == ["rotate-half (neg, cat)", "add, mul (feeds attention)", "LayerNorm + residual add",
                              "SiLU * up (SwiGLU)", "LayerNorm + residual add"]
    summary = build_pass("inference", [module], None, {}, None)
    assert (summary.gemms, summary.attention, summary.fused_backend) == (7, ["flash (CPU)"], "C++")
    backward = _module(CPU, "reordered", "training_1")
    assert backward.kind == "backward"
    assert len([launch for launch in backward.launches if launch.category == "gemm"]) == 14


def test_dynamic_shapes_resolve_through_get_args():
    module = parse_wrapper((CPU / "dynamic" / "inference_0.py").read_text())
    gemm, kernel = module.launches
    assert gemm.args == ["fp32[6, 32]", "fp32[32, 32]", "out=fp32[6, 32]"] and gemm.flops == 2 * 6 * 32 * 32
    assert kernel.kind == "cpp" and kernel.numel == 6 * 32
    assert [p.role for p in module.kernels[kernel.target].params][-2:] == ["scalar", "scalar"]


def test_kernel_records_are_keyed_by_module_and_name():
    modules = [_module(CUDA, "reordered", n) for n in ("inference_0", "training_0", "training_1")]
    records = build_kernels(modules, None)
    keys = [(r.module, r.name) for r in records]
    assert len(keys) == len(set(keys)) == 4 + 3 + 10
    shared = [r for r in records if r.name == "triton_per_fused_add_native_layer_norm_view_1"]
    assert {r.module for r in shared} == {"0_inference", "1_forward"}
    assert next(r for r in shared if r.module == "1_forward").launches == 2  # one kernel for both LayerNorms


@pytest.mark.parametrize("block, profiled", [("reordered", 15), ("standard", 16)])
def test_profiler_reconciliation_inference(block, profiled):
    module = _module(CUDA, block, "inference_0")
    seen = json.loads((CUDA / block / "kernels.json").read_text())["inference"]
    result = reconcile(module.launches, [DeviceKernel(k["name"], k["us"]) for k in seen])
    assert result.device_kernels == profiled
    assert result.matched == len(module.launches) and result.missing == []
    assert result.extras == {"memset": 3} and result.unattributed == {}
    attention = next(launch for launch in module.launches if launch.category == "attention")
    assert attention.device_kernels[0].startswith("Memset") and "cudnn" in attention.device_kernels[1]
    assert all(launch.time_us and launch.time_us > 0 for launch in module.launches)
    assert "3 memsets" in result.text()


def test_profiler_reconciliation_training_finds_eager_kernels():
    """The captured training step ran an eager loss and accumulated gradients: kernels no wrapper launched."""
    forward, backward = _module(CUDA, "reordered", "training_0"), _module(CUDA, "reordered", "training_1")
    seen = json.loads((CUDA / "reordered" / "kernels.json").read_text())["training"]
    launches = forward.launches + backward.launches
    result = reconcile(launches, [DeviceKernel(k["name"], k["us"]) for k in seen])
    assert result.matched == len(launches) and result.missing == []
    assert sum(result.unattributed.values()) >= 19  # at least the 19 gradient accumulations
    assert any("CUDAFunctor_add" in name for name in result.unattributed)
    cudnn_backward = next(launch for launch in backward.launches if launch.category == "attention")
    assert sum("cudnn" in k or "dot_do_o" in k or "convert_dq" in k for k in cudnn_backward.device_kernels) == 3
    assert result.device_kernels == len(seen)


def test_median_step_keeps_the_common_sequence():
    steps = [[DeviceKernel("a", 1.0), DeviceKernel("b", 3.0)], [DeviceKernel("a", 2.0), DeviceKernel("b", 5.0)],
             [DeviceKernel("a", 9.0)], [DeviceKernel("a", 3.0), DeviceKernel("b", 4.0)]]
    assert [(k.name, k.us) for k in median_step(steps)] == [("a", 2.0), ("b", 4.0)]


@pytest.mark.parametrize("name, expected", [
    ("Memset (Device)", "memset"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "gemm"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", "attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "attention"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("void at::native::reduce_kernel<128, 4>", "other"),
])
def test_device_kernel_classes(name, expected):
    assert kernel_class(name) == expected


@pytest.mark.parametrize("dotted, method, expected", [
    ("extern_kernels.addmm", None, ("extern", "gemm", "aten.addmm")),
    ("extern_kernels.bmm", None, ("extern", "gemm", "aten.bmm")),
    ("torch.ops.aten._scaled_dot_product_efficient_attention.default", None,
     ("extern", "attention", "aten._scaled_dot_product_efficient_attention")),
    ("aten._scaled_dot_product_flash_attention.default", None,
     ("extern", "attention", "aten._scaled_dot_product_flash_attention")),
    ("torch.ops.blockfuse.rms_norm.default", None, ("extern", "custom op", "blockfuse.rms_norm")),
    ("torch.ops.aten.native_dropout.default", None, ("extern", "fallback", "aten.native_dropout")),
    (None, "zero_", ("wrapper op", "aten op", "aten.zero_")),
    (None, "view", None),
    ("empty_strided_cuda", None, None),
    ("torch.ops.inductor._alloc_from_pool", None, None),
])
def test_call_classification(dotted, method, expected):
    kind = classify(dotted, method)
    assert (None if kind is None else (kind.kind, kind.category, kind.op)) == expected


@pytest.mark.parametrize("name, ops", [
    ("cpp_fused_add_native_layer_norm_view_2", ["add", "native_layer_norm", "view"]),
    ("triton_per_fused_native_layer_norm_native_layer_norm_backward_sum_view_2",
     ["native_layer_norm", "native_layer_norm_backward", "sum", "view"]),
    ("cpp_fused__scaled_dot_product_flash_attention_for_cpu_add_mul_slice_transpose_view_1",
     ["_scaled_dot_product_flash_attention_for_cpu", "add", "mul", "slice", "transpose", "view"]),
    ("triton_poi_fused_0", []),
    ("extern_kernels.mm", []),
])
def test_ops_from_kernel_names(name, ops):
    assert ops_from_kernel_name(name) == ops


@pytest.mark.parametrize("ops, feeds, text", [
    (["aten.native_layer_norm", "aten.add", "aten.view"], (), "LayerNorm + residual add"),
    (["aten.silu", "aten.mul"], (), "SiLU * up (SwiGLU)"),
    (["aten.mul", "aten.neg", "aten.cat", "aten.add", "aten.slice"], (), "rotary (RoPE)"),
    (["aten.silu", "aten.layer_norm", "aten.view"], {"layer_norm"}, "SiLU (feeds layer_norm)"),
    (["aten.clone", "aten.permute"], (), "copy / layout change"),
])
def test_descriptions(ops, feeds, text):
    assert describe(ops, feeds=frozenset(feeds)) == text


def _profiled_report(tmp_path=None):
    """A report as a CUDA run builds it, from the H200 fixtures and the kernels its profiler saw."""
    from blockfuse.analyze.report import Report

    module = _module(CUDA, "reordered", "inference_0")
    seen = json.loads((CUDA / "reordered" / "kernels.json").read_text())["inference"]
    kernels = [DeviceKernel(k["name"], k["us"]) for k in seen]
    ceilings = {"copy": {"bytes": 2**31, "ms": 0.515, "gbps": 4170.0},
                "gemm": {"shape": [8192, 8192, 8192], "dtype": "bfloat16", "ms": 1.62, "tflops": 680.0}}
    measured = {"reconciliation": reconcile(module.launches, kernels), "device_kernels": len(kernels),
                "kernel_ms": sum(k.us for k in kernels) / 1e3, "pass_ms": 0.76}
    meta = {"target": "reordered", "input_shapes": [[4, 2048, 1024]], "dtype": "bfloat16", "mode": "default",
            "dynamic": None, "backward": False, "date": "2026-11-26T00:00:00", "analysis_s": 40.0,
            "card": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "torch": "2.11.0+cu130",
            "triton": "3.6.0", "cuda": "13.0", "python": "3.12.3", "device": "cuda", "profiled": True, "steps": 5}
    return Report(meta=meta, graph_breaks=[], graph_count=1,
                  passes={"inference": build_pass("inference", [module], 21.0, measured, ceilings)},
                  kernels=build_kernels([module], ceilings), launches=module.launches,
                  modules=[{"id": module.id, "kind": module.kind, "phase": "inference", "device": "cuda",
                            "kernels": 4, "launches": 12, "provenance": False}],
                  ceilings=ceilings, sources={module.id: module.source})


def test_profiled_report_rates_markdown_and_roofline(tmp_path):
    pytest.importorskip("matplotlib")
    report = _profiled_report()
    summary = report.passes["inference"]
    assert summary.device_kernels == 15 and "3 memsets" in summary.reconciliation
    assert set(summary.time_ms) == {"fused kernels", "gemm", "attention"}
    assert sum(summary.time_ms.values()) == pytest.approx(summary.kernel_ms)
    silu = next(k for k in report.kernels if k.description == "SiLU * up (SwiGLU)")
    # in/out (read + write) and up, bf16 [8192, 4096], in 45.8 us
    assert silu.bytes == 3 * 2 * 8192 * 4096 and silu.time_us == pytest.approx(45.792)
    assert silu.gbps == pytest.approx(silu.bytes / 45.792e3) and silu.frac_copy == pytest.approx(silu.gbps / 4170)
    document = json.loads(report.to_json())
    gemm = next(launch for launch in document["launches"] if launch["category"] == "gemm")
    assert gemm["tflops"] == pytest.approx(gemm["flops"] / gemm["time_us"] / 1e6)
    assert gemm["frac_gemm"] == pytest.approx(gemm["tflops"] / 680)
    paths = report.write(tmp_path)
    assert paths["png"].stat().st_size > 10_000
    text = paths["markdown"].read_text()
    assert "![roofline](reordered.png)" in text and "device-to-device copy 4170 GB/s" in text
    assert "the profiler saw 15 GPU kernels: 12 are those launches; 3 memsets" in text


# A user-written Triton kernel as Inductor emits it (``user_autotune``; the variable, the kernel-name
# string and the jitted function's name differ). Hand-made in that shape: user kernels need CUDA to capture.
USER_KERNEL_WRAPPER = """# AOT ID: ['0_inference']
import torch
add_kernel_0 = async_compile.triton('add_kernel', '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_heuristics

@triton_heuristics.user_autotune(
    configs=[],
    inductor_meta={'grid_type': 'PrecomputedGrid', 'kernel_name': 'add_kernel_0', 'mutated_arg_names': ['out_ptr']},
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'out_ptr': '*fp32', 'n_elements': 'i32',
                               'BLOCK_SIZE': 'constexpr'}},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def add_kernel(in_ptr0, in_ptr1, out_ptr, n_elements, BLOCK_SIZE: "tl.constexpr"):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(in_ptr0 + offsets, mask=mask) + tl.load(in_ptr1 + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)
''', device_str='cuda')

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        buf0 = empty_strided_cuda((999, ), (1, ), torch.float32)
        stream0 = get_raw_stream(0)
        add_kernel_0.run(arg0_1, arg1_1, buf0, 999, stream=stream0)
        return (buf0, )

def get_args():
    arg0_1 = rand_strided((999, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((999, ), (1, ), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1]
"""


def test_user_triton_kernel():
    module = parse_wrapper(USER_KERNEL_WRAPPER)
    kernel = module.kernels["add_kernel_0"]
    assert (kernel.kind, kernel.jit_name, kernel.backend) == ("user Triton kernel", "add_kernel", "triton")
    assert [(p.name, p.role) for p in kernel.params] == [
        ("in_ptr0", "in"), ("in_ptr1", "in"), ("out_ptr", "out"), ("n_elements", "scalar")]
    assert (kernel.num_load, kernel.num_store) == (2, 1)
    (launch,) = module.launches
    assert launch.bytes == 3 * 999 * 4 and launch.numel == 999  # two inputs read, the mutated one written
    result = reconcile(module.launches, [DeviceKernel("add_kernel", 3.0)])
    assert result.matched == 1 and launch.time_us == 3.0
