import pytest
import torch

from blockfuse.bench import norm
from blockfuse.bench.spec import mode_bytes

BENCHMARKS = {b.name: b for b in norm.BENCHMARKS}
N, H, B = 16384 * 4096, 4096, 2  # [16384, 4096] bf16


@pytest.mark.parametrize(
    "name, forward, backward",
    [
        ("rms_norm", 2 * N + H, 3 * N + 2 * H),  # x, w -> y;  dy, x, w -> dx, dw
        ("layer_norm", 2 * N + 2 * H, 3 * N + 3 * H),  # x, w, b -> y;  dy, x, w -> dx, dw, db
        ("add_rms_norm", 4 * N + H, 4 * N + 2 * H),  # x, r, w -> y, s;  dy, ds, s, w -> dx (= dr), dw
        ("add_layer_norm", 4 * N + 2 * H, 4 * N + 3 * H),  # x, r, w, b -> y, s;  dy, ds, s, w -> dx, dw, db
        ("layer_norm_post", 3 * N + 2 * H, 3 * N + 3 * H),  # x, r, w, b -> out;  dout, x, w -> dx, dw, db
        ("layer_norm_gelu", 2 * N + 2 * H, 3 * N + 4 * H),  # x, w, b -> y;  dy, x, w, b -> dx, dw, db
    ],
)
def test_norm_byte_formulas(name, forward, backward):
    bench = BENCHMARKS[name]
    assert mode_bytes(bench, (16384, 4096), B, "fwd") == forward * B
    assert mode_bytes(bench, (16384, 4096), B, "bwd") == backward * B
    assert mode_bytes(bench, (16384, 4096), B, "fwdbwd") == (forward + backward) * B


@pytest.mark.parametrize("name", list(BENCHMARKS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_forward_bytes_are_inputs_plus_outputs(name, dtype):
    """The forward count is every input read once and every output written once."""
    bench = BENCHMARKS[name]
    shape = (3, 8, 72)  # (batch, seq, hidden)
    inputs = bench.make_inputs(shape, dtype, torch.device("cpu"))
    outputs = bench.reference()(**inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert len(outputs) == len(bench.outputs)
    moved = sum(t.numel() * t.element_size() for t in (*inputs.values(), *outputs))
    assert mode_bytes(bench, shape, torch.empty((), dtype=dtype).element_size(), "fwd") == moved


def test_declared_norm_benchmarks():
    assert [b.name for b in norm.BENCHMARKS if b.default] == [
        "rms_norm",
        "layer_norm",
        "add_rms_norm",
        "add_layer_norm",
        "layer_norm_gelu",
    ]
    assert norm.SHAPES == ((16384, 4096), (8192, 1024), (2048, 1024), (4096, 8192))
    for bench in norm.BENCHMARKS:
        assert {"eager", "reference", "compile", "blockfuse"} <= set(bench.providers)
    assert "liger" in BENCHMARKS["rms_norm"].providers and "liger" not in BENCHMARKS["add_layer_norm"].providers
    assert "liger" not in BENCHMARKS["layer_norm_gelu"].providers


def test_layer_norm_gelu_benchmark():
    """The headline shape and the small norm shapes; every provider computes the same GELU form
    (tanh) as the reference, and the eager provider is PyTorch's unfused composition."""
    bench = BENCHMARKS["layer_norm_gelu"]
    assert bench.shapes == ((16384, 4096), (8192, 1024), (2048, 1024))
    assert set(bench.providers) == {"eager", "reference", "compile", "blockfuse"}
    inputs = bench.make_inputs((3, 5, 72), torch.float32, torch.device("cpu"))
    expected = torch.nn.functional.gelu(
        torch.nn.functional.layer_norm(inputs["x"], (72,), inputs["weight"], inputs["bias"], norm.LAYER_EPS),
        approximate="tanh",
    )
    for name in ("eager", "reference", "blockfuse"):
        result = bench.providers[name]()(**inputs)
        torch.testing.assert_close(result, expected, msg=lambda m, name=name: f"{name}: {m}")
