"""Tests of the gated activations' FP8 output option (``swiglu`` / ``geglu`` with ``fp8=...``,
``blockfuse/ops/gated.py``): the down projection's input written in e4m3 with its scale by the activation's pass.

As in test_norm_fp8.py: for float32 inputs the FP8 kernel computes the same fp32 output as the op without FP8,
so its scales must equal that output's amax / 448 (rowwise) or the history's (tensorwise) and its values its
cast ``(y * (1 / scale)).to(float8_e4m3fn)``, bit for bit in Triton's interpreter (one FP8 step on a GPU, whose
compiler may contract the two kernels' arithmetic differently); for bf16 inputs, within one FP8 step of the
reference's cast (``swiglu_ref(..., fp8=...)``), whose fp32 output differs in the last bits.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import blockfuse
from blockfuse.ops import gated
from blockfuse.ops.fp8 import Float8Scaling, fp8_linear
from tests.helpers import assert_compiles_like_eager, random_tensor, relative_error
from tests.ops.test_norm_fp8 import (
    E4M3, RECIPES, amax_scale, assert_near_reference, assert_quantized, assert_same, fp8_steps,
)

ACTIVATIONS = {
    "swiglu": (blockfuse.swiglu, blockfuse.swiglu_ref, {}),
    "geglu": (blockfuse.geglu, blockfuse.geglu_ref, {}),
    "geglu-erf": (blockfuse.geglu, blockfuse.geglu_ref, {"approximate": "none"}),
}
# One tile; rows packed several to a program; and, in the interpreter (gated.FP8_ROW_LANES), rows in chunks
# read twice (4304: 9 x 512 lanes, 9000: 9 x 1024).
WIDTHS = (72, 760, 4304, 9000)


def operands(shape, dtype=torch.float32, *, seed=0, device="cpu", layout="contiguous"):
    gate = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=0.25, layout=layout)
    up = random_tensor(shape, dtype, device, seed=seed + 1, scale=1.5, offset=-0.5, layout=layout)
    return gate, up


def apply(name, gate, up, packed=False, reference=False, **kwargs):
    fn, ref, extra = ACTIVATIONS[name]
    args = (torch.cat((gate, up), -1),) if packed else (gate, up)
    return (ref if reference else fn)(*args, **extra, **kwargs)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("packed", (False, True), ids=("separate", "packed"))
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_fp32_input_quantizes_its_own_output_exactly(name, n, packed, device):
    gate, up = operands((3, n) if n > 100 else (37, n), seed=n, device=device)
    with torch.no_grad():
        y = apply(name, gate, up, packed)
        q, scale = apply(name, gate, up, packed, fp8="rowwise")
        assert q.shape == y.shape and scale.shape == (y.shape[0], 1) and scale.dtype == torch.float32
        assert_same(scale, amax_scale(y, -1), device, "scale")
        assert_quantized(q, scale, y, device)
        scaling = Float8Scaling.new(device=device)
        q1, scale1 = apply(name, gate, up, packed, fp8="tensorwise", fp8_scaling=scaling)
        assert scale1.shape == () and scale1.item() == 1.0
        assert_quantized(q1, scale1, y, device)
        assert_same(scaling.history[0], y.abs().amax(), device, "recorded amax")
        assert scaling.amax.item() == 0.0
        q2, scale2 = apply(name, gate, up, packed, fp8="tensorwise", fp8_scaling=scaling)
        assert_same(scale2, amax_scale(y), device, "scale")
        assert_quantized(q2, scale2, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("n", (760, 4304))
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_bf16_input_against_the_reference(name, n, recipe, device):
    gate, up = operands((5, n), torch.bfloat16, seed=3 * n, device=device)
    y_ref = apply(name, gate.float(), up.float())  # the reference's fp32 output: fp32 math on the bf16 values
    scalings = [Float8Scaling.new(device=device) if recipe == "tensorwise" else None for _ in range(2)]
    with torch.no_grad():
        for scaling, reference in zip(scalings, (False, True)):
            if scaling is not None:
                apply(name, gate, up, reference=reference, fp8=recipe, fp8_scaling=scaling)
        q, scale = apply(name, gate, up, fp8=recipe, fp8_scaling=scalings[0])
        q_ref, scale_ref = apply(name, gate, up, reference=True, fp8=recipe, fp8_scaling=scalings[1])
    expected = amax_scale(y_ref, -1 if recipe == "rowwise" else None)
    torch.testing.assert_close(scale, expected, rtol=1e-5, atol=0)
    torch.testing.assert_close(scale_ref, expected, rtol=1e-6, atol=0)
    assert_near_reference(q, scale, y_ref)
    assert fp8_steps(q, q_ref).max().item() <= 1


@pytest.mark.usefixtures("requires_triton")
def test_values_past_the_history_saturate(device):
    gate, up = operands((4, 760), seed=5, device=device)
    with torch.no_grad():
        y = blockfuse.swiglu(gate, up)
        amax = y.abs().amax()
        scaling = Float8Scaling(torch.tensor([0.0, amax.item() / 8], device=device), torch.zeros(1, device=device))
        q, scale = blockfuse.swiglu(gate, up, fp8="tensorwise", fp8_scaling=scaling)
    assert torch.equal(scale, amax_scale(amax / 8))
    saturated = y.abs() * (1.0 / scale) >= 448
    assert saturated.any() and (~saturated).any() and (q.float()[saturated].abs() == 448).all()
    assert_quantized(q, scale, y, device)
    assert_same(scaling.history, torch.stack((amax, amax * 0)), device, "history")


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("layout", ("transposed", "strided"))
def test_higher_rank_and_non_contiguous_inputs(layout, device):
    gate, up = operands((2, 3, 760), seed=7, device=device, layout=layout)
    with torch.no_grad():
        y = blockfuse.geglu(gate, up)
        q, scale = blockfuse.geglu(gate, up, fp8="rowwise")
    assert q.shape == (2, 3, 760) and q.is_contiguous() and scale.shape == (2, 3, 1)
    assert_same(scale, amax_scale(y, -1), device, "scale")
    assert_quantized(q, scale, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
def test_no_rows(recipe, device):
    gate = torch.empty((0, 2 * 760), device=device)
    scaling = Float8Scaling.new(2, device=device) if recipe == "tensorwise" else None
    if scaling is not None:
        scaling.history[0] = 3.0
    with torch.no_grad():
        q, scale = blockfuse.swiglu(gate, fp8=recipe, fp8_scaling=scaling)
    assert q.shape == (0, 760) and q.dtype == E4M3
    if recipe == "rowwise":
        assert scale.shape == (0, 1)
    else:
        assert_same(scale, amax_scale(torch.tensor(3.0)), device, "scale")
        assert scaling.history.tolist() == [0.0, 3.0]


@pytest.mark.parametrize("recipe", RECIPES)
def test_float64_runs_the_reference(recipe, device):
    gate, up = operands((5, 72), torch.float64, seed=9, device=device)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        q, scale = blockfuse.swiglu(gate, up, fp8=recipe, fp8_scaling=scaling)
    y = F.silu(gate) * up
    assert q.dtype == E4M3 and scale.dtype == torch.float32
    if recipe == "rowwise":
        torch.testing.assert_close(scale, amax_scale(y, -1), rtol=1e-6, atol=0)
    else:
        assert scale.item() == 1.0 and scaling.history[0].item() == pytest.approx(y.abs().amax().item())


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
def test_swiglu_into_fp8_linear_is_within_fp8_error_of_bf16(recipe, device):
    """The MLP's down projection on the activation's FP8 output: within FP8's error of bf16 (test_fp8.py's
    bound for a GEMM of two e4m3 operands, 0.05), and close to fp8_linear casting the bf16 activation itself."""
    gate, up = operands((3, 41, 256), torch.bfloat16, seed=11, device=device)
    w_down = random_tensor((96, 256), torch.bfloat16, device, seed=12, scale=256**-0.5)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        y = blockfuse.swiglu(gate, up)
        if scaling is not None:
            blockfuse.swiglu(gate, up, fp8=recipe, fp8_scaling=scaling)
        q, scale = blockfuse.swiglu(gate, up, fp8=recipe, fp8_scaling=scaling)
        chained = fp8_linear(q, w_down, x_scale=scale, recipe=recipe)
        exact = F.linear(y.double(), w_down.double())
        own_cast = fp8_linear(y, w_down, recipe=recipe)
    assert chained.shape == (3, 41, 96)
    assert relative_error(chained, exact) < 0.05
    assert relative_error(chained, own_cast) < 0.02


def mlp(x, w_gate_up, w_down, scaling):
    """A gated MLP, its activation written in FP8 (tensorwise, delayed) for the down projection."""
    q, scale = blockfuse.swiglu(x @ w_gate_up.t(), fp8="tensorwise", fp8_scaling=scaling)
    return fp8_linear(q, w_down, x_scale=scale, recipe="tensorwise")


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no break; eager's results and history. 300 x 256 elements: the kernels run."""
    x = random_tensor((300, 128), torch.bfloat16, device, seed=13)
    w_gate_up = random_tensor((512, 128), torch.bfloat16, device, seed=14, scale=128**-0.5)
    w_down = random_tensor((128, 256), torch.bfloat16, device, seed=15, scale=256**-0.5)
    histories = []

    def run(fn):
        scaling = Float8Scaling.new(4, device=device)
        with torch.no_grad():
            results = [fn(x, w_gate_up, w_down, scaling).float() for _ in range(2)]
        histories.append(scaling.history.clone())
        return results

    assert_compiles_like_eager(mlp, run, ["out1", "out2"], backend=backend, exact=backend == "aot_eager",
                               rtol=2e-2, atol=2e-2)
    assert histories[0][:2].gt(0).all() and histories[0][2:].eq(0).all()
    torch.testing.assert_close(histories[0], histories[1], rtol=1e-5, atol=0)


@pytest.mark.usefixtures("requires_triton")
def test_the_launcher_passes_opcheck(device):
    if device != "cpu":
        pytest.skip("the interpreter's custom op")
    gate, up = operands((6, 72), torch.bfloat16, seed=17)
    scaling = Float8Scaling.new(4)
    for args in ((gate, up, "silu", None, None), (torch.cat((gate, up), -1), None, "gelu_tanh", *scaling)):
        torch.library.opcheck(torch.ops.blockfuse.gated_fwd_fp8.default, args,
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def _bad_calls():
    gate, up = operands((3, 16), seed=19)
    ok = Float8Scaling.new()
    return [
        ("recipe", lambda: blockfuse.swiglu(gate, up, fp8="columnwise"), ValueError, "fp8"),
        ("tensorwise-without-state", lambda: blockfuse.geglu(gate, up, fp8="tensorwise"), TypeError, "fp8_scaling"),
        ("rowwise-with-state", lambda: blockfuse.swiglu(gate, up, fp8="rowwise", fp8_scaling=ok), ValueError,
         "fp8_scaling"),
        ("history-dtype", lambda: blockfuse.swiglu(gate, up, fp8="tensorwise",
                                                   fp8_scaling=Float8Scaling(ok.history.half(), ok.amax)),
         TypeError, "history"),
        ("grad-gate", lambda: blockfuse.swiglu(gate.clone().requires_grad_(), up, fp8="rowwise"), NotImplementedError,
         "forward only"),
        ("grad-up", lambda: blockfuse.geglu(gate, up.clone().requires_grad_(), fp8="rowwise"), NotImplementedError,
         "forward only"),
        ("packed-odd", lambda: blockfuse.swiglu(gate[:, :15], fp8="rowwise"), ValueError, "gate"),
        ("approximate", lambda: blockfuse.geglu(gate, up, "exact", fp8="rowwise"), ValueError, "approximate"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    name, fn, error, match = _bad_calls()[case]
    with torch.enable_grad() if name.startswith("grad") else torch.no_grad():
        with pytest.raises(error, match=match):
            fn()


def test_the_row_tile_covers_each_row():
    """fp8_tile: rowwise programs hold whole rows (chunks of a power of two covering the width), narrow rows
    packed several to a program; tensorwise takes elementwise tiles."""
    for compiled in (True, False):
        for n in (72, 760, 4096, 4304, 11008, 14336):
            block_m, block_n, chunks, warps = gated.fp8_tile(64, n, True, compiled)
            assert block_n & (block_n - 1) == 0 and chunks * block_n >= n > (chunks - 1) * block_n
            assert chunks == 1 or block_m == 1
            assert 1 <= warps <= 16 and block_m >= 1
            _, _, chunks, _ = gated.fp8_tile(64, n, False, compiled)
            assert chunks == 1
