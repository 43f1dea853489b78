"""The rotary benchmark declaration (byte formula, shapes, providers) and the layout script
``benchmarks/rotary_layout.py`` (its kernel counting on a fake trace, and its CPU path)."""

from __future__ import annotations

import dataclasses

import json
from types import SimpleNamespace

import pytest
import torch

from blockfuse.bench import rotary as rotary_bench
from blockfuse.bench import runner
from blockfuse.bench.spec import mode_bytes
from tests.helpers import load_benchmark

BENCH = rotary_bench.BENCHMARKS[0]


def test_declared_rotary_benchmark():
    assert [b.name for b in rotary_bench.BENCHMARKS] == ["rotary"]
    assert BENCH.shapes == ((4, 2048, 32, 32, 128), (8, 4096, 32, 8, 128), (1, 128, 16, 16, 64))
    assert set(BENCH.providers) == {"eager", "reference", "compile", "liger", "blockfuse"}
    assert BENCH.outputs == ("q_out", "k_out") and BENCH.grad_of == "q" and BENCH.default


@pytest.mark.parametrize(
    "shape, qk",
    [((4, 2048, 32, 32, 128), 2 * 4 * 32 * 2048 * 128), ((8, 4096, 32, 8, 128), 8 * 4096 * 40 * 128)],
)
def test_rotary_byte_formula(shape, qk):
    """q, k read and q_out, k_out written (dq_out, dk_out read and dq, dk written), plus the two
    (1, seq, head_dim) tables once, each way."""
    tables = 2 * shape[1] * shape[4]
    for itemsize in (2, 4):
        assert mode_bytes(BENCH, shape, itemsize, "fwd") == (2 * qk + tables) * itemsize
        assert mode_bytes(BENCH, shape, itemsize, "bwd") == (2 * qk + tables) * itemsize
        assert mode_bytes(BENCH, shape, itemsize, "fwdbwd") == 2 * (2 * qk + tables) * itemsize
    # The SPEC's figure: q, k [4, 32, 2048, 128] bf16 forward moves 4 x 64 MiB + 2 MiB of tables.
    assert mode_bytes(BENCH, (4, 2048, 32, 32, 128), 2, "fwd") == 4 * 64 * 2**20 + 2 * 2048 * 128 * 2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_forward_bytes_are_inputs_outputs_and_tables(dtype):
    shape = (2, 9, 4, 2, 72)
    inputs = BENCH.make_inputs(shape, dtype, torch.device("cpu"))
    assert inputs["q"].shape == (2, 4, 9, 72) and inputs["k"].shape == (2, 2, 9, 72)  # (b, h, s, d)
    outputs = BENCH.reference()(**inputs)
    tables = rotary_bench.tables(9, 72, dtype, torch.device("cpu"))
    assert tables[0].shape == (1, 9, 72)
    moved = sum(t.numel() * t.element_size() for t in (*inputs.values(), *outputs, *tables))
    assert mode_bytes(BENCH, shape, torch.empty((), dtype=dtype).element_size(), "fwd") == moved


def test_cpu_providers_agree_with_the_reference():
    """eager (HF's formula in bf16), reference and blockfuse give the fp32 reference's outputs
    within bf16 rounding, and grads of q and k."""
    shape = BENCH.cpu_shapes[-1]
    inputs = BENCH.make_inputs(shape, torch.bfloat16, torch.device("cpu"))
    expected = BENCH.reference()(**{name: t.float() for name, t in inputs.items()})
    for provider in ("eager", "reference", "blockfuse"):
        fn = BENCH.providers[provider]()
        leaves = {name: t.clone().requires_grad_() for name, t in inputs.items()}
        outs = fn(**leaves)
        for out, ref in zip(outs, expected, strict=True):
            assert out.dtype == torch.bfloat16 and out.shape == ref.shape
            error = runner.relative_error(out, ref)
            assert error < 1e-2, f"{provider}: {error:.2e}"
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        assert all(t.grad is not None for t in leaves.values()), provider


def test_runner_measures_rotary_on_cpu():
    """The one runner takes the declaration as it is: errors against its fp32 oracle, bytes."""
    settings = runner.Settings(dtype="fp32", modes=("fwd", "fwdbwd"), providers=("eager", "reference"),
                               shapes=((1, 5, 2, 1, 8),), quick=True, device=torch.device("cpu"))
    records = runner.run([BENCH], settings, None, show_progress=False)
    assert len(records) == 4
    for r in records:
        assert r["error"] is None, r["error"]
        assert r["bytes"] == mode_bytes(BENCH, (1, 5, 2, 1, 8), 4, r["mode"])
        if r["mode"] == "fwd":
            assert set(r["rel_err"]) == {"q_out", "k_out"} and r["rel_err_out"] < 1e-6
        else:
            assert set(r["rel_err"]) == {"dq", "dk"} and r["rel_err_grad"] < 1e-6


# ---------------------------------------------------------------- benchmarks/rotary_layout.py


def load_layout_script():
    return load_benchmark("rotary_layout")


def test_layout_script_counts_kernels_on_a_fake_trace():
    """GPU events only (``device_type`` prints as torch's ``DeviceType.CUDA``), GPU-side user
    annotations skipped, memcpy / memset counted apart from kernels."""
    script = load_layout_script()

    def event(name, device, annotation=False):
        return SimpleNamespace(name=name, device_type=f"DeviceType.{device}", is_user_annotation=annotation)

    trace = [
        event("aten::mul", "CPU"),
        event("_rotary_kernel", "CUDA"),
        event("Memcpy DtoD (Device -> Device)", "CUDA"),
        event("Memset (Device)", "CUDA"),
        event("flash_fwd_kernel", "CUDA"),
        event("cudaLaunchKernel", "CPU"),
        event("## forward ##", "CUDA", annotation=True),
        event("triton_poi_fused_cat_0", "CUDA"),
    ]
    assert script.count_gpu_events(trace) == {"kernels": 3, "copies": 2}
    assert script.count_gpu_events([]) == {"kernels": 0, "copies": 0}
    if hasattr(torch.autograd, "DeviceType"):  # the enum the profiler's events carry
        real = SimpleNamespace(name="k", device_type=torch.autograd.DeviceType.CUDA)
        assert script.count_gpu_events([real]) == {"kernels": 1, "copies": 0}


def test_layout_script_cpu_path(tmp_path):
    """The CPU path runs every way end to end (kernel counts are CUDA-only), the four attention
    outputs agree with the fp32 reference, and it writes JSON and Markdown."""
    script = load_layout_script()
    result = script.main(["--device", "cpu", "--batch", "1", "--seq", "5", "--heads", "2", "--head-dim", "8",
                          "--iters", "1", "--backward", "--out", str(tmp_path)])
    records = result["records"]
    assert [(r["way"], r["mode"]) for r in records] == [(w, m) for w in script.WAYS for m in ("fwd", "fwdbwd")]
    for r in records:
        assert r["per_call"] is None and r["ms"] > 0
        if r["mode"] == "fwd":
            assert r["rel_err"] < 2e-2, r  # bf16
    saved = json.loads((tmp_path / "rotary_layout.json").read_text())
    assert saved["shape"] == {"batch": 1, "seq": 5, "heads": 2, "head_dim": 8}
    markdown = (tmp_path / "rotary_layout.md").read_text()
    assert all(way in markdown for way in script.WAYS) and "n/a" in markdown


def test_layout_script_ways_give_the_same_attention():
    """The three blockfuse ways compute the same numbers (only the layout differs)."""
    script = load_layout_script()
    qkv, half, hf = script.make_inputs(2, 7, 3, 16, torch.float32, "cpu")
    ways = script.make_ways(half, hf)
    reference = script.reference_output(qkv, half)
    outs = {name: fn(qkv) for name, fn in ways.items()}
    for name, out in outs.items():
        assert out.shape == (2, 3, 7, 16)
        assert script.relative_error(out, reference) < 1e-5, name
    assert script.relative_error(outs["bshd-views"], outs["out-bhsd"]) < 1e-6


# ---------------------------------------------------------------- benchmarks/rotary_head_dims.py --setting


def test_head_dims_settings_parse_names_fields_and_reject_unknowns(monkeypatch):
    """``--setting LABEL:NAME=V,...``: ops/rotary.py's settings, a dataclass setting's field by ``NAME.field`` (several
    fields combined), and a clear error for an unknown setting or field or a label that names a built-in variant."""
    from pathlib import Path

    from blockfuse.ops import rotary

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # (its `import _sweep`)
    head_dims = load_benchmark("rotary_head_dims")
    assert head_dims.parse_setting("h2:TILES.flat_heads_per_program=2") == (
        "h2", {"TILES": dataclasses.replace(rotary.TILES, flat_heads_per_program=2)})
    label, values = head_dims.parse_setting("t:TILES.tile_elements=512,TILES.max_warps=4,TILES.flat_tile=2048")
    assert label == "t" and values["TILES"] == dataclasses.replace(rotary.TILES, tile_elements=512, max_warps=4,
                                                                   flat_tile=2048)
    assert values["TILES"].elements_per_warp == rotary.TILES.elements_per_warp  # the fields not named: as shipped
    for text, message in (("x:NOPE=1", "no setting 'NOPE'"), ("x:TILES.nope=1", "no field 'nope'"),
                          ("new:TILES.flat_tile=1", "label not in"), ("x:TILES.flat_tile=", "no value")):
        with pytest.raises(ValueError, match=message):
            head_dims.parse_setting(text)
