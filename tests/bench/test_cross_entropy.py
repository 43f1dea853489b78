"""The declaration of the fused LM head + cross-entropy benchmark: inputs, byte and FLOP counts, providers,
one quick ``blockfuse bench ops`` run on the CPU, and how the report rates a GEMM-bound op."""

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from blockfuse.bench import cross_entropy, report, runner
from blockfuse.bench.cli import declared_ops
from blockfuse.bench.spec import CUDA_PROVIDERS, PROVIDERS, mode_bytes, mode_flops
from blockfuse.cli import main

BENCH = cross_entropy.BENCHMARKS[0]
CPU = torch.device("cpu")


def test_declared_linear_cross_entropy_benchmark():
    assert BENCH.name == "linear_cross_entropy" and BENCH in declared_ops() and not BENCH.default
    assert BENCH.shapes == ((8192, 4096, 128256), (16384, 2048, 32000), (4096, 4096, 262144))
    assert set(BENCH.providers) == {"eager", "reference", "compile", "liger", "cce", "blockfuse"}
    assert "cce" in PROVIDERS and "cce" in CUDA_PROVIDERS and BENCH.outputs == ("loss",) and BENCH.grad_of == "hidden"
    inputs = BENCH.make_inputs((4000, 64, 301), torch.bfloat16, CPU)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "hidden": ((4000, 64), torch.bfloat16), "weight": ((301, 64), torch.bfloat16), "target": ((4000,), torch.int64)}
    target = inputs["target"]
    ignored = (target == cross_entropy.IGNORE_INDEX).float().mean().item()
    assert 0.03 < ignored < 0.07 and ((target == -100) | ((target >= 0) & (target < 301))).all()
    std = F.linear(inputs["hidden"].float(), inputs["weight"].float()).std().item()
    assert 1.5 < std < 2.5  # an LM head's O(1..5) logits


def test_flops_are_the_three_gemms_and_bytes_the_tensors():
    gemm = 2 * 8192 * 4096 * 128256
    shape = (8192, 4096, 128256)
    assert [mode_flops(BENCH, shape, m) for m in ("fwd", "bwd", "fwdbwd")] == [gemm, 2 * gemm, 3 * gemm]
    shape = (67, 32, 301)
    inputs = BENCH.make_inputs(shape, torch.bfloat16, CPU)
    loss = BENCH.reference()(**inputs)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    moved = sum(t.numel() * t.element_size() for t in (*inputs.values(), loss))
    assert mode_bytes(BENCH, shape, 2, "fwd") == moved  # hidden, weight, target -> loss
    gradients = (67 * 32 + 301 * 32) * 2
    # dloss (fp32, as the loss), hidden, weight, target -> dhidden, dweight
    assert mode_bytes(BENCH, shape, 2, "bwd") == moved + gradients


def test_providers_compute_the_same_loss():
    """eager (Hugging Face's composition), the reference and blockfuse: the same mean over the tokens
    not ignored, in fp32."""
    inputs = BENCH.make_inputs((67, 32, 301), torch.float32, CPU)
    logits = inputs["hidden"].double() @ inputs["weight"].double().T
    expected = F.cross_entropy(logits, inputs["target"], ignore_index=-100)
    for name in ("eager", "reference", "blockfuse"):
        loss = BENCH.providers[name]()(**inputs)
        assert loss.dtype == torch.float32 and loss.dim() == 0, name
        torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("package, provider", [("liger_kernel", "liger"), ("cut_cross_entropy", "cce")])
def test_cuda_only_peers_import(package, provider):
    """Liger-Kernel's and Cut Cross-Entropy's names exist where they are installed (their kernels need CUDA)."""
    pytest.importorskip(package)
    assert callable(BENCH.providers[provider]())


@pytest.mark.usefixtures("few_timed_calls")
def test_bench_ops_runs_linear_cross_entropy_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "results"
    code = main(["bench", "ops", "--op", "linear_cross_entropy", "--quick", "--providers", "eager,blockfuse",
                 "--out", str(out)])
    assert code == 0
    document = json.loads((out / "ops.json").read_text())
    records = document["records"]
    assert [(r["provider"], r["mode"]) for r in records] == [
        (p, m) for p in ("eager", "blockfuse") for m in ("fwd", "bwd", "fwdbwd")]
    tokens, d, vocab = BENCH.cpu_shapes[0]
    gemm = 2 * tokens * d * vocab
    errors = {}
    for r in records:
        assert r["error"] is None, r
        assert r["op"] == "linear_cross_entropy" and r["shape"] == [tokens, d, vocab] and r["dtype"] == "bf16"
        assert r["ms"] > 0 and r["bytes"] == mode_bytes(BENCH, (tokens, d, vocab), 2, r["mode"])
        assert r["flops"] == {"fwd": 1, "bwd": 2, "fwdbwd": 3}[r["mode"]] * gemm
        assert math.isclose(r["tflops"], r["flops"] / r["ms"] / 1e9)
        assert r["frac_gemm"] is None and r["gemm_ceiling_tflops"] is None  # no CUDA: no GEMM measured
        if r["mode"] == "fwd":
            assert set(r["rel_err"]) == {"loss"}
            error = r["rel_err_out"]
            assert 0 < error < 1e-3, r  # bf16 logits against fp32 ones
        else:
            assert set(r["rel_err"]) == {"dhidden", "dweight"}, r  # the int target got no gradient
            error = r["rel_err_grad"]
            assert error == r["rel_err"]["dhidden"] and 0 < error < 2e-2 and 0 < r["rel_err"]["dweight"] < 2e-2, r
        errors[r["provider"], r["mode"]] = error
    # blockfuse at most about twice as wrong as PyTorch's own bf16 result (a little slack for one tiny shape)
    assert errors["blockfuse", "fwdbwd"] <= 3 * errors["eager", "fwdbwd"]
    assert document["targets"] == []  # CPU
    markdown = (out / "ops.md").read_text()
    assert "## linear_cross_entropy, forward (bf16)" in markdown
    assert "## linear_cross_entropy, forward+backward (bf16)" in markdown
    assert "| shape | eager | blockfuse | blockfuse vs best peer |" in markdown
    assert " TFLOP/s · err " in markdown and "GB/s" not in markdown.split("## linear_cross_entropy")[1]
    assert "6 measurements, 0 failed" in capsys.readouterr().out


def _record(shape, mode, provider, ms, tflops, frac_gemm):
    return {"op": "linear_cross_entropy", "shape": list(shape), "dtype": "bf16", "mode": mode, "provider": provider,
            "bytes": 10, "ms": ms, "ms_eager": ms, "gbps": 1.0, "frac_copy": 0.01, "peak_mib": 100.0,
            "rel_err_out": 1e-4, "rel_err_grad": 3e-3, "rel_err": {}, "error": None, "flops": 3 * 10**12,
            "tflops": tflops, "frac_gemm": frac_gemm, "gemm_ceiling_tflops": 700.0}


def test_report_rates_a_gemm_bound_op_against_the_gemm():
    """TFLOP/s and the fraction of the GEMM in the cells, the GEMM in the header, CCE among the peers, and
    no copy-bandwidth target for an op whose bound is the GEMM."""
    shape = (8192, 4096, 128256)
    records = [_record(shape, "fwdbwd", "compile", 10.0, 300.0, 0.43),
               _record(shape, "fwdbwd", "cce", 8.0, 375.0, 0.54),
               _record(shape, "fwdbwd", "blockfuse", 6.0, 500.0, 0.71)]
    meta = {"card": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132, "torch": "2.11.0",
            "triton": "3.6.0", "cuda": "13.0", "liger_kernel": "0.8.5", "cut_cross_entropy": "25.1.1",
            "python": "3.12", "date": "2026-01-01", "blockfuse_implementation": "triton",
            "command": "blockfuse bench ops", "device": "cuda"}
    text = report.markdown(meta, {"gbps": 3000.0, "bytes": 2**31, "ms": 0.7}, records)
    assert "6 ms · 500 TFLOP/s (0.71 of GEMM) · err 3.0e-03 · 100 MiB" in text
    assert "- GEMM: 700 TFLOP/s (8192^3 matmul" in text and "Cut Cross-Entropy 25.1.1" in text
    assert "| shape | compile | cce | blockfuse | blockfuse vs best peer |" in text and "1.33x (cce)" in text
    by_target = {t["target"]: t for t in report.targets(records, "cuda")}
    assert set(by_target) == {"vs_peers"} and by_target["vs_peers"]["status"] == "met"
    slower = [dict(r, ms=9.0) if r["provider"] == "blockfuse" else r for r in records]
    assert "0.89x of cce" in {t["target"]: t for t in report.targets(slower, "cuda")}["vs_peers"]["text"]


def test_runner_passes_the_target_as_it_is():
    """Every provider gets the int64 target itself, without a gradient; hidden and weight get theirs."""
    seen = []

    def spy():
        eager = cross_entropy._eager()

        def fn(hidden, weight, target):
            seen.append((target.dtype, target.requires_grad, hidden.requires_grad, weight.requires_grad))
            return eager(hidden, weight, target)

        return fn

    bench = dataclasses.replace(BENCH, providers={"spy": spy})
    settings = runner.Settings(dtype="fp32", modes=("fwd", "fwdbwd"), providers=("spy",), shapes=((5, 72, 1129),),
                               quick=True, device=CPU)
    records = runner.run([bench], settings, None, show_progress=False)
    assert all(r["error"] is None for r in records) and records[0]["rel_err_out"] < 1e-5
    assert {(dtype, target_grad) for dtype, target_grad, _, _ in seen} == {(torch.int64, False)}
    assert (torch.int64, False, True, True) in seen and (torch.int64, False, False, False) in seen
