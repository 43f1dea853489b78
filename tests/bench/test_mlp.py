"""The declarations of the GEMM-bound activation ops' benchmarks (``bench/mlp.py``): inputs, FLOP counts, the
providers computing the same function, and one quick ``blockfuse bench ops`` run on the CPU."""

import json

import pytest
import torch
import torch.nn.functional as F

from blockfuse.bench import mlp
from blockfuse.bench.cli import declared_ops
from blockfuse.bench.spec import mode_flops
from blockfuse.cli import main

CPU = torch.device("cpu")
BENCHES = {b.name: b for b in mlp.BENCHMARKS}


def _composition(name, inputs):
    """The op in fp64, from its definition."""
    d = {k: v.double() for k, v in inputs.items()}
    if name == "linear_act":
        return F.gelu(F.linear(d["x"], d["weight"], d["bias"]), approximate="tanh")
    if name == "fused_mlp":
        return F.linear(F.gelu(F.linear(d["x"], d["weight"], d["bias"]), approximate="tanh"), d["fc2_weight"],
                        d["fc2_bias"])
    gate, up = F.linear(d["x"], d["gate_up_weight"]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, d["down_weight"])


def test_every_mlp_op_is_declared_once_and_named_only():
    names = [b.name for b in declared_ops()]
    for name in ("linear_act", "fused_mlp", "gated_mlp"):
        assert names.count(name) == 1 and not BENCHES[name].default and BENCHES[name].flops is not None


@pytest.mark.parametrize("name, gemms", [("linear_act", 1), ("fused_mlp", 2), ("gated_mlp", 3)])
def test_flops_are_the_gemms(name, gemms):
    tokens, d, hidden = shape = BENCHES[name].shapes[0]
    forward = 2 * gemms * tokens * d * hidden
    assert [mode_flops(BENCHES[name], shape, m) for m in ("fwd", "bwd", "fwdbwd")] == [forward, 2 * forward,
                                                                                        3 * forward]


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_providers_compute_the_op(name):
    bench = BENCHES[name]
    inputs = bench.make_inputs((37, 24, 40), torch.float32, CPU)
    expected = _composition(name, inputs)
    assert expected.std() > 0.1  # not a test on zeros
    for provider in ("eager", "reference", "blockfuse"):
        out = bench.providers[provider]()(**inputs)
        torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-4,
                                   msg=lambda m, provider=provider: f"{name} {provider}: {m}")


def test_bench_ops_runs_them_on_the_cpu(tmp_path):
    out = tmp_path / "mlp"
    assert main(["bench", "ops", "--op", "linear_act", "fused_mlp", "gated_mlp", "--quick", "--out", str(out)]) == 0
    records = json.loads((out / "ops.json").read_text())["records"]
    assert {r["op"] for r in records} == set(BENCHES) and not [r for r in records if r.get("error")]
    errors = [r["rel_err_out"] if r["mode"] == "fwd" else r["rel_err_grad"]
              for r in records if r["provider"] == "blockfuse"]
    assert len(errors) == 9 and all(e < 1e-2 for e in errors)  # bf16's error against fp32
