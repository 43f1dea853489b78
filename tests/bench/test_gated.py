"""The declaration of the gated-activation benchmarks: byte formulas, inputs, providers, and one
quick run of the runner on the CPU."""

import math

import pytest
import torch

from blockfuse.bench import gated, runner
from blockfuse.bench.spec import mode_bytes

BENCHMARKS = {b.name: b for b in gated.BENCHMARKS}
N, B = 16384 * 4096, 2  # [16384, 4096] bf16


@pytest.mark.parametrize("name", ["swiglu", "geglu", "swiglu_packed"])
def test_gated_byte_formulas(name):
    """Forward: read gate, up; write out (3n). Backward: read dout, gate, up; write dgate, dup (5n).
    The packed form moves the same bytes: its halves are gate and up."""
    bench = BENCHMARKS[name]
    assert mode_bytes(bench, (16384, 4096), B, "fwd") == 3 * N * B
    assert mode_bytes(bench, (16384, 4096), B, "bwd") == 5 * N * B
    assert mode_bytes(bench, (16384, 4096), B, "fwdbwd") == 8 * N * B
    assert mode_bytes(bench, (8192, 14336), 4, "fwd") == 3 * 8192 * 14336 * 4


@pytest.mark.parametrize("name", list(BENCHMARKS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bytes_are_the_tensors_read_and_written(name, dtype):
    """Forward: every input and output once. Backward: dout, every input, and every input's
    gradient once; counted from the tensors the reference reads and produces."""
    bench = BENCHMARKS[name]
    shape = (3, 8, 72)  # (batch, seq, hidden)
    itemsize = torch.empty((), dtype=dtype).element_size()
    inputs = {key: t.requires_grad_() for key, t in bench.make_inputs(shape, dtype, torch.device("cpu")).items()}
    out = bench.reference()(**inputs)
    assert out.shape == shape and len(bench.outputs) == 1
    dout = torch.randn_like(out)
    input_grads = torch.autograd.grad(out, list(inputs.values()), dout)

    def size(tensors):
        return sum(t.numel() * t.element_size() for t in tensors)

    assert mode_bytes(bench, shape, itemsize, "fwd") == size([*inputs.values(), out])
    assert mode_bytes(bench, shape, itemsize, "bwd") == size([dout, *inputs.values(), *input_grads])


def test_declared_gated_benchmarks():
    assert [b.name for b in gated.BENCHMARKS if b.default] == ["swiglu", "geglu", "swiglu_packed"]
    assert gated.SHAPES == ((16384, 4096), (8192, 14336), (2048, 1024))
    for bench in gated.BENCHMARKS:
        assert set(bench.providers) == {"eager", "reference", "compile", "liger", "blockfuse"}
        assert bench.grad_of in bench.make_inputs((2, 8), torch.float32, torch.device("cpu"))
    packed = BENCHMARKS["swiglu_packed"].make_inputs((4, 72), torch.bfloat16, torch.device("cpu"))
    assert {k: tuple(v.shape) for k, v in packed.items()} == {"gate_up": (4, 144)}
    separate = BENCHMARKS["geglu"].make_inputs((4, 72), torch.bfloat16, torch.device("cpu"))
    assert {k: tuple(v.shape) for k, v in separate.items()} == {"gate": (4, 72), "up": (4, 72)}


def test_liger_providers_import():
    """The Liger-Kernel names and conventions exist in the installed wheel (its kernels need CUDA)."""
    pytest.importorskip("liger_kernel")
    for bench in gated.BENCHMARKS:
        assert callable(bench.providers["liger"]())


def test_geglu_providers_use_the_tanh_form():
    """Liger's GeGLU is the tanh form: every geglu provider computes that one, not erf."""
    bench = BENCHMARKS["geglu"]
    inputs = bench.make_inputs((4, 72), torch.float64, torch.device("cpu"))
    tanh = torch.nn.functional.gelu(inputs["gate"], approximate="tanh") * inputs["up"]
    erf = torch.nn.functional.gelu(inputs["gate"]) * inputs["up"]
    assert (tanh - erf).abs().max() > 1e-6
    for provider in ("eager", "reference", "blockfuse"):
        assert torch.allclose(bench.providers[provider]()(**inputs), tanh, rtol=0, atol=1e-12), provider


def test_runner_times_every_gated_op_on_the_cpu():
    """One quick run of the runner: eager, reference and blockfuse, forward and forward+backward;
    no provider fails and each is as accurate as fp32 math allows."""
    settings = runner.Settings(
        dtype="fp32",
        modes=("fwd", "fwdbwd"),
        providers=("eager", "reference", "blockfuse"),
        shapes=((5, 72),),
        quick=True,
        device=torch.device("cpu"),
    )
    records = runner.run(list(gated.BENCHMARKS), settings, None, show_progress=False)
    assert len(records) == 3 * 2 * 3  # ops x modes x providers
    for record in records:
        assert record["error"] is None, record
        assert record["ms"] > 0 and record["bytes"] > 0
        error = record["rel_err_out"] if record["mode"] == "fwd" else record["rel_err_grad"]
        assert error is not None and not math.isnan(error) and error < 1e-5, record
