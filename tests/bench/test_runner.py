import dataclasses

import torch
import torch.nn.functional as F

from blockfuse.bench import bias_dropout_add, norm, runner
from blockfuse.bench.spec import OpBenchmark

RMS = next(b for b in norm.BENCHMARKS if b.name == "rms_norm")
BIAS_DROPOUT_ADD = bias_dropout_add.BENCHMARKS[0]


def _settings(providers, modes=("fwd", "bwd", "fwdbwd")):
    return runner.Settings(
        dtype="fp32", modes=modes, providers=providers, shapes=((5, 72),), quick=True, device=torch.device("cpu")
    )


def _missing_package():
    raise ImportError("No module named 'not_installed'")


def _fails_when_called():
    def fn(x, weight):
        raise RuntimeError("kernel launch failed\nsecond line")

    return fn


def test_failing_providers_are_reported_and_the_others_run():
    bench: OpBenchmark = dataclasses.replace(
        RMS, providers={**RMS.providers, "liger": _missing_package, "broken": _fails_when_called}
    )
    records = runner.run([bench], _settings(("eager", "liger", "broken", "reference")), None, show_progress=False)
    by_provider = {}
    for r in records:
        by_provider.setdefault(r["provider"], []).append(r)
    assert set(by_provider) == {"eager", "liger", "broken", "reference"}
    for r in by_provider["liger"]:
        assert r["error"] == "ImportError: No module named 'not_installed'" and r["ms"] is None
    for r in by_provider["broken"]:
        assert r["error"] == "RuntimeError: kernel launch failed"
    for provider in ("eager", "reference"):
        for r in by_provider[provider]:
            assert r["error"] is None and r["ms"] > 0 and r["gbps"] > 0 and r["frac_copy"] is None
            assert r["peak_mib"] is None  # CPU


def test_records_carry_errors_against_the_float32_reference():
    records = runner.run([RMS], _settings(("eager", "reference")), None, show_progress=False)
    assert {(r["provider"], r["mode"]) for r in records} == {
        (p, m) for p in ("eager", "reference") for m in ("fwd", "bwd", "fwdbwd")
    }
    for r in records:
        assert r["op"] == "rms_norm" and r["shape"] == [5, 72] and r["dtype"] == "fp32"
        assert r["bytes"] == RMS.bytes_moved((5, 72), 4)[0] if r["mode"] == "fwd" else r["bytes"] > 0
        if r["mode"] == "fwd":
            assert set(r["rel_err"]) == {"y"} and r["rel_err_out"] < 1e-5 and r["rel_err_grad"] is None
        else:
            assert set(r["rel_err"]) == {"dx", "dweight"} and r["rel_err_grad"] < 1e-5 and r["rel_err_out"] is None
        assert r["ms_p20"] <= r["ms"] <= r["ms_p80"]


def test_copy_fraction_uses_the_copy_bandwidth():
    records = runner.run([RMS], _settings(("eager",), modes=("fwd",)), 100.0, show_progress=False)
    (r,) = records
    assert r["frac_copy"] == r["gbps"] / 100.0


def test_relative_error_is_float64():
    ref = torch.tensor([1.0, 0.0], dtype=torch.float32)
    out = torch.tensor([1.0, 1e-4], dtype=torch.bfloat16)
    assert runner.relative_error(out, ref) == float(out[1].double())
    assert runner.relative_error(torch.zeros(2), torch.zeros(2)) == 0.0


def _dropout_depending_on_grad_mode():
    """Eager dropout that draws another mask when grad is enabled (as a compiled training graph
    may draw differently from an inference one): the probe must mirror the checked call's mode."""

    def fn(x, bias, residual):
        if torch.is_grad_enabled():
            torch.rand(1)
        return residual + F.dropout(x + bias, bias_dropout_add.P)

    return fn


def test_providers_with_dropout_are_checked_against_their_own_mask():
    """Each provider draws its own dropout mask; the probe gives the reference that mask, forward
    and backward, so every error is a rounding error. Without the probe they are not."""
    bench = dataclasses.replace(
        BIAS_DROPOUT_ADD, providers={**BIAS_DROPOUT_ADD.providers, "grad_mode": _dropout_depending_on_grad_mode}
    )
    providers = ("eager", "reference", "blockfuse", "grad_mode")
    settings = runner.Settings(
        dtype="fp32", modes=("fwd", "bwd"), providers=providers, shapes=((16, 72),), quick=True,
        device=torch.device("cpu"),
    )
    records = runner.run([bench], settings, None, show_progress=False)
    assert {(r["provider"], r["mode"]) for r in records} == {(p, m) for p in providers for m in ("fwd", "bwd")}
    n, hidden = 16 * 72, 72
    for r in records:
        assert r["error"] is None, r
        if r["mode"] == "fwd":
            assert r["bytes"] == (3 * n + hidden) * 4  # x, residual, bias -> out
            assert set(r["rel_err"]) == {"out"} and r["rel_err_out"] < 1e-6, r
        else:
            assert r["bytes"] == (2 * n + hidden) * 4  # dout -> dx, dbias
            assert set(r["rel_err"]) == {"dx", "dbias", "dresidual"}, r
            assert max(r["rel_err"].values()) < 1e-6, r

    unprobed = dataclasses.replace(bench, probe=None)
    settings = dataclasses.replace(settings, providers=("eager",))
    for r in runner.run([unprobed], settings, None, show_progress=False):
        # A mask independent of the reference's: a tenth of the elements differ by O(1).
        assert (r["rel_err_out"] if r["mode"] == "fwd" else r["rel_err_grad"]) > 0.1, r


def test_source_digest_names_the_code():
    from blockfuse.bench import runner

    digest = runner.source_digest()
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert runner.source_digest() == digest  # stable
    assert runner.environment(torch.device("cpu"))["source_digest"] == digest


def _gather_inputs(shape, dtype, device):
    rows, hidden = shape
    return {
        "x": torch.randn(shape, dtype=dtype, device=device),  # (rows, hidden)
        "index": torch.randint(0, hidden, (rows,), device=device),  # (rows,) int64
    }


def _gather():
    return lambda x, index: x.gather(1, index[:, None]).squeeze(1)


def test_integer_inputs_are_passed_as_they_are_without_a_gradient():
    """An integer input (class indices) reaches the reference and every provider as it is: not cast to
    float (gather would refuse it), never asked for a gradient; the float inputs' gradients are checked."""
    seen = []

    def spy():
        gather = _gather()

        def fn(x, index):
            seen.append((index.dtype, index.requires_grad, x.requires_grad))
            return gather(x, index)

        return fn

    bench = OpBenchmark(
        name="gather", make_inputs=_gather_inputs, outputs=("out",), reference=_gather,
        providers={"eager": _gather, "spy": spy}, bytes_moved=lambda shape, b: (1, 1), shapes=(), cpu_shapes=(),
    )
    records = runner.run([bench], _settings(("eager", "spy")), None, show_progress=False)
    assert len(records) == 2 * 3
    for r in records:
        assert r["error"] is None, r
        if r["mode"] == "fwd":
            assert set(r["rel_err"]) == {"out"} and r["rel_err_out"] == 0.0
        else:
            assert set(r["rel_err"]) == {"dx"} and r["rel_err_grad"] == 0.0  # no dindex
        assert "flops" not in r  # no FLOPs declared: a memory-bound op's record, as before
    assert seen and all(dtype == torch.int64 and not requires_grad for dtype, requires_grad, _ in seen)
    assert any(x_requires_grad for _, _, x_requires_grad in seen)  # the float input did get one


def test_ops_that_declare_flops_get_tflops_and_the_gemm_fraction():
    """An op with FLOPs: each record carries them (fwd, bwd, fwd + bwd), the TFLOP/s its time means and
    its fraction of the GEMM ceiling handed in (measured on CUDA when none is)."""
    bench = dataclasses.replace(RMS, flops=lambda shape: (1000 * shape[0], 2000 * shape[0]))
    records = runner.run([bench], _settings(("eager",)), None, show_progress=False, gemm_tflops=1e-6)
    assert {r["mode"]: r["flops"] for r in records} == {"fwd": 5000, "bwd": 10000, "fwdbwd": 15000}
    for r in records:
        assert r["error"] is None, r
        assert r["tflops"] == r["flops"] / r["ms"] / 1e9 and r["frac_gemm"] == r["tflops"] / 1e-6
        assert r["gemm_ceiling_tflops"] == 1e-6
    (r,) = runner.run([bench], _settings(("eager",), modes=("fwd",)), None, show_progress=False)
    assert r["tflops"] > 0 and r["frac_gemm"] is None and r["gemm_ceiling_tflops"] is None  # CPU: no ceiling
