"""Tests of the FP8 ops: ``quantize`` and ``fp8_linear`` (``blockfuse/ops/fp8.py``).

Quantization is exact arithmetic and is checked exactly: the values against ``(x.float() / scale).to(fp8)``
with the same scale, bit for bit, and the scales equal to ``amax / fp8_max``. The kernels (in the
interpreter) and the reference must agree bit for bit.

The linear layer is checked against a float64 linear with an elementwise error bound derived from FP8's
rounding, not a tolerance tuned to pass. For a value ``a`` quantized with scale ``s`` and dequantized,
``|a' - a| <= u |a| + d s``: ``u`` is the unit roundoff of the format (e4m3, 3 mantissa bits: 2^-4;
e5m2, 2 bits: 2^-3) and ``d`` half the subnormal spacing (e4m3: 2^-10; e5m2: 2^-17), for values below
the smallest normal. A GEMM of quantized operands then errs by at most
``Ea @ |B| + |A| @ Eb + Ea @ Eb`` (E the elementwise bounds), plus the accumulation
(``K 2^-24 |A'| @ |B'|`` in fp32) and one rounding of the output (bf16: ``2^-8 |y|``; rowwise GEMMs
write bf16 whatever the output dtype), which below the output dtype's smallest normal errs by up to half its
subnormal spacing instead (fp16: 2^-25; a one-token weight gradient of small fp16 values lies there). The
relative (Frobenius) error of random data sits well below that worst case. One rounding to e4m3 errs by about 0.025 of a tensor's norm (an error uniform over
half an ulp either way, ulp = 2^-3 of the binade: sqrt(2^-6 / 12 / E[m^2]) with E[m^2] = 2.16 for a
mantissa m spread over [1, 2); measured: 0.026 on Gaussian data), e5m2 about twice that (0.053). A GEMM
of two quantized operands sums two such independent errors: about 0.037 for the forward (e4m3 x e4m3),
0.059 for the tensorwise gradients (e5m2 x e4m3), 0.037 for the rowwise ones. The tests hold them under
0.05, 0.08 and 0.05: margin for small shapes, and less than a wrong format or a lost scale gives.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from blockfuse.ops import fp8
from blockfuse.ops.fp8 import FP8_MAX, dequantize, fp8_linear, fp8_linear_ref, quantize, quantize_ref
from tests.helpers import FreeHooks, as_layout, random_tensor, relative_error

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}
# Unit roundoff and half the subnormal spacing of each format (see the module docstring).
ROUNDOFF = {E4M3: 2.0**-4, E5M2: 2.0**-3}
HALF_SUBNORMAL = {E4M3: 2.0**-10, E5M2: 2.0**-17}
OUTPUT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
# Half the subnormal spacing (smallest normal x machine epsilon) of each output dtype: fp32 2^-150, bf16 2^-134,
# fp16 2^-25.
OUTPUT_HALF_SUBNORMAL = {dtype: torch.finfo(dtype).tiny * torch.finfo(dtype).eps / 2 for dtype in OUTPUT_ROUNDOFF}
# Relative (Frobenius) error bounds against float64 (module docstring).
FORWARD_BOUND = 0.05
GRADIENT_BOUND = {"tensorwise": 0.08, "rowwise": 0.05}


def wide_range(shape, dtype=torch.float32, seed=0, layout="contiguous"):
    """Random values over many binades (some below FP8's normal range after scaling), no zeros."""
    magnitude = torch.exp(random_tensor(shape, seed=seed + 1) * 2.0)
    values = (random_tensor(shape, seed=seed) * magnitude).to(dtype)
    return as_layout(values, layout)


def bits(t):
    return t.view(torch.uint8)


def divide(a, divisor):
    """``a / divisor`` in fp32, an IEEE division on every device. NOTE: by a tensor: CUDA divides by a Python
    number as a product with its reciprocal, at times one ulp from the quotient the kernels' ``div_rn`` (and
    the CPU) give; that was the last-bit mismatch of the scales on a GPU, the kernels being the exact side."""
    return a / torch.full((), divisor, dtype=torch.float32, device=a.device)


def amax_scale(t, dtype, dim=None):
    """``amax / fp8_max`` over ``dim`` (keepdim; the whole tensor for None), computed here from scratch."""
    a = t.detach().double().abs()
    amax = a.amax() if dim is None else a.amax(dim, keepdim=True)
    return (amax / FP8_MAX[dtype]).float()


def quantization_error(t, dtype, scale):
    """Elementwise bound on ``|dequantize(quantize(t)) - t|`` for scale ``scale`` (float64)."""
    return ROUNDOFF[dtype] * t.double().abs() + HALF_SUBNORMAL[dtype] * scale.double()


def gemm_error_bound(a, ea, b, eb):
    """Bound on ``|a' @ b' - a @ b|`` for ``|a' - a| <= ea``, ``|b' - b| <= eb`` (a (M, K), b (K, N)), with
    the accumulation of the products (float64). NOTE: fp32 accumulation on CPU; a GPU's FP8 tensor cores
    with fast accumulation (the forward GEMM) keep about 14 bits of the sum, so 2^-13 there."""
    accumulation = 2.0**-13 if a.is_cuda else 2.0**-24
    a, b = a.double().abs(), b.double().abs()
    bound = ea @ b + a @ eb + ea @ eb
    return bound + a.shape[1] * accumulation * ((a + ea) @ (b + eb))


def assert_within(actual, expected, bound, name):
    error = (actual.double() - expected.double()).abs()
    worst = (error / bound).max().item()
    assert torch.isfinite(actual).all(), f"{name}: NaN or inf"
    assert worst <= 1.0, f"{name}: error {worst:.3f}x its FP8 bound (max abs error {error.max().item():.3e})"


# ---------------------------------------------------------------------------------------------
# quantize
# ---------------------------------------------------------------------------------------------

QUANTIZE_CASES = [  # (shape, layout, dtype of x)
    ((1, 72), "contiguous", torch.float32),
    ((3, 760), "transposed", torch.bfloat16),
    ((199, 48), "strided", torch.float32),
    ((3, 5, 72), "contiguous", torch.float16),
    ((5, 4304), "contiguous", torch.bfloat16),  # rows wider than a chunk of the interpreter's rowwise kernel
]


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape, layout, dtype", QUANTIZE_CASES)
def test_quantize_is_the_cast_with_its_scale(recipe, fmt, shape, layout, dtype, device):
    dtype8 = FORMATS[fmt]
    x = wide_range(shape, dtype, seed=3, layout=layout).to(device)
    q, scale = quantize(x, dtype8, recipe=recipe)
    assert q.dtype == dtype8 and q.shape == x.shape and scale.dtype == torch.float32
    if recipe == "rowwise":
        assert scale.shape == (*shape[:-1], 1)
        expected_scale = divide(x.float().abs().amax(-1, keepdim=True), FP8_MAX[dtype8])
    else:
        assert scale.shape == ()
        expected_scale = divide(x.float().abs().amax(), FP8_MAX[dtype8])
    assert torch.equal(scale, expected_scale)  # amax / 448 (or 57344), the same fp32 division, on every device
    # The kernels multiply by the fp32 reciprocal of the scale (ops/fp8.py, _quantized): exactly that product's
    # cast; the quotient x / scale is at most one fp32 ulp away, which moves a value by one FP8 step at a tie.
    assert torch.equal(bits(q), bits((x.float() * (torch.ones_like(scale) / scale)).to(dtype8)))
    quotient = bits((x.float() / scale).to(dtype8)).int()
    steps = (bits(q).int() - quotient).abs()
    assert steps.max().item() <= 1 and steps.ne(0).float().mean().item() < 0.01
    q_ref, scale_ref = quantize_ref(x, dtype8, recipe=recipe)
    assert torch.equal(scale, scale_ref) and torch.equal(bits(q), bits(q_ref))


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_error_is_within_one_rounding(recipe, fmt, device):
    dtype8 = FORMATS[fmt]
    x = wide_range((37, 200), seed=5).to(device)
    q, scale = quantize(x, dtype8, recipe=recipe)
    error = (dequantize(q, scale).double() - x.double()).abs()
    bound = quantization_error(x, dtype8, scale)
    assert (error <= bound).all(), (error / bound).max().item()
    # The values land on the grid's nearest points, not on a coarser grid that still passes: the largest
    # error is near the bound's, and about half of one rounding on average.
    normal = x.double().abs() >= 2.0 ** (-6 if dtype8 == E4M3 else -14) * scale.double()
    relative = (error / x.double().abs())[normal]
    assert 0.75 * ROUNDOFF[dtype8] <= relative.max().item() <= ROUNDOFF[dtype8]
    assert relative.mean().item() < 0.5 * ROUNDOFF[dtype8]


def test_all_zero_rows_get_a_finite_scale(device):
    """amax 0 (a padded row, say) gives the floor's scale and zeros, not NaN; the other rows are untouched."""
    x = wide_range((6, 64), seed=7).to(device)
    x[2] = 0.0
    for recipe in fp8.RECIPES:
        q, scale = quantize(x, recipe=recipe)
        assert torch.isfinite(scale).all() and (scale > 0).all()
        assert (q[2].float() == 0).all()
        assert torch.equal(bits(q), bits(quantize_ref(x, recipe=recipe)[0]))
    q, scale = quantize(x, recipe="rowwise")
    assert scale[2].item() == pytest.approx(1e-12 / 448)


# The kernels themselves against the reference, every combination of outputs the linear layer asks for.
KERNEL_CASES = [  # (rowwise, rows, transposed)
    (False, True, False), (False, True, True), (False, False, True),
    (True, True, False), (True, True, True), (True, False, True),
]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rowwise, rows, transposed", KERNEL_CASES)
@pytest.mark.parametrize("shape, layout", [((37, 72), "contiguous"), ((3, 760), "transposed"), ((16, 48), "strided")])
def test_kernels_match_the_reference_bit_for_bit(fmt, rowwise, rows, transposed, shape, layout, dtype, device):
    """fp32 inputs too: the tensorwise transposed output of fp32 inputs is the one a GPU once got wrong."""
    x = wide_range(shape, dtype, seed=11, layout=layout).to(device)
    outputs = fp8._fp8_quantize(x, FORMATS[fmt], rowwise, rows, transposed, 16)
    expected = fp8._quantize_2d_ref(x, FORMATS[fmt], rowwise, rows, transposed, 16)
    for name, mine, theirs in zip(("y", "y_scale", "yt", "yt_scale"), outputs, expected):
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, name
        assert mine.is_contiguous() and mine.stride() == theirs.stride(), name  # _scaled_mm checks strides
        same = torch.equal(bits(mine), bits(theirs)) if mine.dtype in FP8_MAX else torch.equal(mine, theirs)
        assert same, name
    if transposed:
        yt = outputs[2]
        assert yt.shape == (shape[1], 48 if shape[0] == 37 else 16) and (yt[:, shape[0]:].float() == 0).all()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("sum_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("rowwise, rows, transposed",
                         [case for case in KERNEL_CASES if fp8._fused_column_sum(*case[:2])])
@pytest.mark.parametrize("shape, layout", [((300, 72), "contiguous"), ((3, 760), "transposed"),
                                           ((131, 48), "strided")])
def test_the_amax_pass_sums_the_columns(rowwise, rows, transposed, shape, layout, sum_dtype, device):
    """A layer's bias gradient from the pass that reads dy for its amax: x's column sums in fp32 (partials over
    several row blocks: 300 and 131 rows span several programs' rows on every device), one rounding to
    ``sum_dtype``; the casts themselves unchanged by it."""
    x = wide_range(shape, torch.bfloat16, seed=12, layout=layout).to(device)
    *casts, col_sum = fp8._fp8_quantize(x, E5M2, rowwise, rows, transposed, 16, None, sum_dtype)
    plain = fp8._fp8_quantize(x, E5M2, rowwise, rows, transposed, 16)
    for name, mine, theirs in zip(("y", "y_scale", "yt", "yt_scale"), casts, plain):
        assert torch.equal(bits(mine), bits(theirs)) if mine.dtype in FP8_MAX else torch.equal(mine, theirs), name
    exact = x.double().sum(0)
    assert col_sum.shape == (shape[1],) and col_sum.dtype == sum_dtype
    # fp32 sums of at most 300 terms, any order: well within 1e-5 of the magnitudes summed; then one rounding to
    # sum_dtype, within one ulp
    bound = 1e-5 * x.double().abs().sum(0) + 2 * OUTPUT_ROUNDOFF[sum_dtype] * exact.abs()
    assert ((col_sum.double() - exact).abs() <= bound).all()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("transposed", [False, True])
def test_rowwise_rows_take_the_column_sum_apart(transposed, device):
    """Rowwise rows have no amax pass (alone) or one row tile a program (with the transposed cast): the kernels
    refuse a column sum there, by name, and _quantize_2d_sum takes it apart, as a plain reduction."""
    x = wide_range((8, 32), torch.bfloat16, seed=13).to(device)
    with pytest.raises(ValueError, match="sum_dtype"):
        fp8._fp8_quantize(x, E4M3, True, True, transposed, 16, None, torch.float32)
    *_, col_sum = fp8._quantize_2d_sum(x, E4M3, True, True, transposed, 16, None, torch.float32)
    torch.testing.assert_close(col_sum, x.float().sum(0))


@pytest.mark.usefixtures("requires_triton")
def test_tiles_follow_the_table(monkeypatch, device):
    """The launchers read the table of the device's kernels (``TILES`` compiled, ``INTERPRETED_TILES`` in the
    interpreter) at each call: a table swapped in (benchmarks/fp8_delayed_tiles.py's) is the one launched."""
    name = "TILES" if device == "cuda" else "INTERPRETED_TILES"
    launched = []

    def spy(kernel, key):
        def launch(grid, *args, **constexprs):
            launched.append((key, constexprs.get("BLOCK_M", constexprs.get("BLOCK")), constexprs.get("BLOCK_N"),
                             constexprs["num_warps"]))
            return kernel(grid, *args, **constexprs)
        return launch

    monkeypatch.setattr(fp8, "_cast_kernel", spy(fp8._cast_kernel, "cast"))
    monkeypatch.setattr(fp8, "_transpose_kernel", spy(fp8._transpose_kernel, "transpose"))
    monkeypatch.setattr(fp8, name, dataclasses.replace(getattr(fp8, name), tile=(16, 32, 2), sum_tile=(32, 16, 1),
                                                       tensor_amax_tile=(4, 512), transpose_tile=(16, 2)))
    assert fp8._tensor_amax_tile(torch.empty(0, device=device), 4096) == (4, 512)
    x = wide_range((21, 48), torch.bfloat16, seed=3).to(device)
    history, amax = fp8.Float8Scaling.new(4, device)
    for sum_dtype in (None, torch.float32):
        fp8._fp8_quantize_delayed(x, E5M2, True, True, 16, history, amax, sum_dtype)
    fp8._fp8_transpose(torch.zeros(21, 48, dtype=torch.uint8, device=device), 16)
    assert launched == [("cast", 16, 32, 2), ("cast", 32, 16, 1), ("transpose", 16, None, 2)]


@pytest.mark.usefixtures("requires_triton")
def test_the_launcher_passes_opcheck(device):
    """Schema, fake implementation and AOT dispatch of ``blockfuse::fp8_quantize`` agree with the kernels."""
    if device != "cpu":
        pytest.skip("the interpreter's custom op")
    x = wide_range((19, 48), torch.bfloat16, seed=2)
    # The one-pass rowwise kernel; the amax and cast kernels with every output.
    for rowwise, rows, transposed in ((True, True, False), (True, True, True)):
        torch.library.opcheck(torch.ops.blockfuse.fp8_quantize.default, (x, E4M3, rowwise, rows, transposed, 16),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    # and with the column sum (a bias gradient) from the amax pass
    torch.library.opcheck(torch.ops.blockfuse.fp8_quantize.default,
                          (x, E5M2, False, True, True, 16, None, torch.bfloat16),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


# ---------------------------------------------------------------------------------------------
# fp8_linear: forward
# ---------------------------------------------------------------------------------------------


def operands(shape, n, dtype, device, seed=0, layout="contiguous"):
    """x (shape), weight (n, shape[-1]) and bias (n,), weights of a linear layer's usual scale."""
    k = shape[-1]
    x = random_tensor(shape, dtype, seed=seed, layout=layout).to(device)
    weight = random_tensor((n, k), dtype, seed=seed + 1, scale=k**-0.5).to(device)
    bias = random_tensor((n,), dtype, seed=seed + 2, scale=0.1).to(device)
    return x, weight, bias


def forward_bound(x, weight, bias, recipe, out_dtype):
    """The elementwise bound of ``fp8_linear``'s output against float64 (module docstring)."""
    x2 = x.reshape(-1, x.shape[-1])
    dim = -1 if recipe == "rowwise" else None
    ex = quantization_error(x2, E4M3, amax_scale(x2, E4M3, dim))
    ew = quantization_error(weight, E4M3, amax_scale(weight, E4M3, dim))
    bound = gemm_error_bound(x2, ex, weight.t(), ew.t())
    exact = F.linear(x2.double(), weight.double(), None if bias is None else bias.double())
    rounding = OUTPUT_ROUNDOFF[torch.bfloat16 if recipe == "rowwise" else out_dtype]
    magnitude = exact.abs() + (0 if bias is None else bias.double().abs())
    absolute = OUTPUT_HALF_SUBNORMAL[out_dtype]  # (the bf16 a rowwise GEMM writes first: far smaller)
    return (bound + rounding * (magnitude + bound) + absolute + 1e-30).view(*x.shape[:-1], -1)


def reference_tolerance(recipe, dtype, device):
    """The relative error allowed between ``fp8_linear`` and ``fp8_linear_ref``: the same quantized operands,
    so only the accumulation and the output's rounding differ.

    CPU, fp32 accumulation: 1e-6 for fp32 tensorwise (the sum in another order); else 4e-3, one rounding
    of bf16 (2^-8: rowwise GEMMs write bf16). CUDA: the forward GEMM accumulates fast (FP8 tensor cores
    keep about 14 bits of a sum: 2^-13, as gemm_error_bound), so fp32 tensorwise gets 2^-12 (an H200
    gave up to 1.03e-4 over LINEAR_CASES); and a bf16 bias fused into the rowwise GEMM (a bf16 output) is
    added past the GEMM's own rounding to bf16, so 3 roundings of bf16, 3 * 2^-8 (an H200 gave up to
    1.07e-2; fp32 rowwise, its bias added in fp32, stayed under 4e-3)."""
    if dtype == torch.float32 and recipe == "tensorwise":
        return 2.0**-12 if device == "cuda" else 1e-6
    if device == "cuda" and dtype == torch.bfloat16 and recipe == "rowwise":
        return 3 * 2.0**-8
    return 4e-3


LINEAR_CASES = [  # (x's shape, out_features)
    ((199, 96), 80),  # rows not a multiple of 16: the weight gradient pads them
    ((3, 5, 64), 48),
    ((2, 3, 4, 32), 16),  # 4-D
    ((64,), 32),  # 1-D
]


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape, n", LINEAR_CASES)
def test_forward_is_within_fp8_error(recipe, dtype, shape, n, device):
    x, weight, bias = operands(shape, n, dtype, device, seed=20)
    y = fp8_linear(x, weight, bias, recipe=recipe)
    assert y.shape == (*shape[:-1], n) and y.dtype == dtype
    exact = F.linear(x.double(), weight.double(), bias.double())
    assert_within(y, exact, forward_bound(x, weight, bias, recipe, dtype), "output")
    if x.numel() >= 32 * 16:  # enough elements for the statistic
        assert relative_error(y, exact) < FORWARD_BOUND
    reference = fp8_linear_ref(x, weight, bias, recipe=recipe)
    assert relative_error(y, reference) < reference_tolerance(recipe, dtype, device)


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_without_bias_and_with_strided_inputs(recipe, device):
    """No bias; x transposed in memory, or every other element of a wider buffer: the same values give the
    same output and gradients as a contiguous x, bit for bit."""
    x, weight, _ = operands((33, 64), 32, torch.bfloat16, device, seed=30)
    y = fp8_linear(x, weight, recipe=recipe)
    assert_within(y, F.linear(x.double(), weight.double()), forward_bound(x, weight, None, recipe, x.dtype), "output")
    grad_output = random_tensor(y.shape, y.dtype, seed=31).to(device)
    results = []
    for layout in ("contiguous", "transposed", "strided"):
        xl = as_layout(x, layout).detach().requires_grad_()  # a leaf, in its layout
        w = weight.clone().requires_grad_()
        out = fp8_linear(xl, w, recipe=recipe)
        out.backward(grad_output)
        results.append((out, xl.grad, w.grad))
    for other in results[1:]:
        for mine, theirs in zip(other, results[0]):
            assert torch.equal(mine, theirs)


def test_sizes_that_are_not_multiples_of_16_run_a_plain_linear(device):
    x, weight, bias = operands((7, 72), 40, torch.float32, device, seed=40)  # in_features 72
    x.requires_grad_()
    weight.requires_grad_()
    y = fp8_linear(x, weight, bias)
    torch.testing.assert_close(y, F.linear(x, weight, bias), rtol=0, atol=0)
    y.sum().backward()
    torch.testing.assert_close(weight.grad, torch.ones(7, 40).t().to(device) @ x.detach(), rtol=1e-6, atol=1e-6)
    assert not fp8.fp8_supported(72, 40) and not fp8.fp8_supported(64, 40) and fp8.fp8_supported(64, 48)


# ---------------------------------------------------------------------------------------------
# fp8_linear: backward
# ---------------------------------------------------------------------------------------------


def gradient_bounds(x2, weight, dy, recipe):
    """Elementwise bounds of dx = dy @ W and dW = dy^T @ x against float64 (module docstring)."""
    grad_format = E4M3 if recipe == "rowwise" else E5M2
    rowwise = recipe == "rowwise"
    # dgrad: dy by rows (over N) and W by columns (over N, each row of W^T); wgrad: both by columns (over M).
    e_dy_rows = quantization_error(dy, grad_format, amax_scale(dy, grad_format, -1 if rowwise else None))
    e_w = quantization_error(weight, E4M3, amax_scale(weight, E4M3, 0 if rowwise else None))
    e_dy_cols = quantization_error(dy, grad_format, amax_scale(dy, grad_format, 0 if rowwise else None))
    e_x = quantization_error(x2, E4M3, amax_scale(x2, E4M3, 0 if rowwise else None))
    dx_bound = gemm_error_bound(dy, e_dy_rows, weight, e_w)
    dw_bound = gemm_error_bound(dy.t(), e_dy_cols.t(), x2, e_x)
    dx_exact, dw_exact = dy.double() @ weight.double(), dy.double().t() @ x2.double()
    rounding = OUTPUT_ROUNDOFF[torch.bfloat16 if rowwise else x2.dtype]
    absolute = OUTPUT_HALF_SUBNORMAL[x2.dtype] + 1e-30  # (the gradients come in the operands' dtype)
    return (dx_bound + rounding * (dx_exact.abs() + dx_bound) + absolute,
            dw_bound + rounding * (dw_exact.abs() + dw_bound) + absolute)


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape, n", LINEAR_CASES[:2])
def test_gradients_are_within_fp8_error(recipe, dtype, shape, n, device):
    x, weight, bias = operands(shape, n, dtype, device, seed=50)
    leaves_ = [t.clone().requires_grad_() for t in (x, weight, bias)]
    y = fp8_linear(*leaves_, recipe=recipe)
    assert y._base is None  # a tensor of its own, as F.linear's of 3-D rows (FSDP2 hooks a module's outputs)
    dy = random_tensor(y.shape, dtype, seed=53).to(device)
    y.backward(dy)
    dx, dw, db = (t.grad for t in leaves_)
    assert (dx.dtype, dw.dtype, db.dtype) == (dtype, dtype, dtype)
    exact = [t.double().requires_grad_() for t in (x, weight, bias)]
    F.linear(*exact).backward(dy.double())
    dy2, x2 = dy.reshape(-1, n), x.reshape(-1, shape[-1])
    dx_bound, dw_bound = gradient_bounds(x2, weight, dy2, recipe)
    assert_within(dx.reshape(-1, shape[-1]), exact[0].grad.reshape(-1, shape[-1]), dx_bound, "dx")
    assert_within(dw, exact[1].grad, dw_bound, "dweight")
    assert relative_error(dx, exact[0].grad) < GRADIENT_BOUND[recipe]
    assert relative_error(dw, exact[1].grad) < GRADIENT_BOUND[recipe]
    # The bias gradient is a sum of dy in fp32 (a few fp32 roundings), then one rounding to bias's dtype.
    assert relative_error(db, exact[2].grad) < OUTPUT_ROUNDOFF[dtype] * 2 + 1e-6


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_fp16_gradients_under_the_smallest_normal_are_within_the_bound(recipe, device):
    """One fp16 token of small values (as in two cases fuzz seed 51 flagged): its weight gradient dy^T x lies largely under fp16's
    smallest normal (6.1e-5), where the output's rounding errs by up to half the subnormal spacing (2^-25), not by
    2^-11 of the value. The bound allows that much and no more: the gradient rounded to nearest is within it, and an
    error of one whole subnormal step is not."""
    x = random_tensor((1, 80), torch.float16, seed=60, scale=2e-5).to(device)
    weight = random_tensor((1152, 80), torch.float16, seed=61, scale=80**-0.5).to(device)
    dy = random_tensor((1, 1152), torch.float16, seed=62).to(device)
    leaves_ = [t.clone().requires_grad_() for t in (x, weight)]
    fp8_linear(*leaves_, None, recipe=recipe).backward(dy)
    exact = dy.double().t() @ x.double()
    assert (exact.abs() < torch.finfo(torch.float16).tiny).float().mean() > 0.5  # mostly under the normal range
    dx_bound, dw_bound = gradient_bounds(x, weight, dy, recipe)
    assert_within(leaves_[0].grad, (dy.double() @ weight.double()), dx_bound, "dx")
    assert_within(leaves_[1].grad, exact, dw_bound, "dweight")
    step = 2 * OUTPUT_HALF_SUBNORMAL[torch.float16]  # 2^-24: one subnormal step
    assert ((leaves_[1].grad.double() + step - exact).abs() > dw_bound).any()


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_only_the_gradients_asked_for(recipe, device):
    x, weight, bias = operands((40, 32), 16, torch.float32, device, seed=60)
    w = weight.clone().requires_grad_()
    y = fp8_linear(x, w, bias, recipe=recipe)  # x and bias without grad: the first layer of a model
    y.backward(torch.ones_like(y))
    assert x.grad is None and bias.grad is None and w.grad is not None
    xg = x.clone().requires_grad_()
    y = fp8_linear(xg, weight, bias, recipe=recipe)  # a frozen weight
    y.backward(torch.ones_like(y))
    assert xg.grad is not None and weight.grad is None
    with torch.no_grad():
        assert fp8_linear(xg, w, bias, recipe=recipe).grad_fn is None



@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_an_empty_batch(recipe, device):
    x = torch.empty((2, 0, 32), device=device).requires_grad_()
    _, weight, bias = operands((4, 32), 16, torch.float32, device, seed=65)
    weight.requires_grad_()
    y = fp8_linear(x, weight, bias, recipe=recipe)
    assert y.shape == (2, 0, 16)
    y.sum().backward()
    assert x.grad.shape == x.shape and weight.grad.shape == weight.shape and not weight.grad.any()

# ---------------------------------------------------------------------------------------------
# Every element written: fresh allocations poisoned
# ---------------------------------------------------------------------------------------------


def poison(t):
    """``t`` filled with NaN (floating dtypes) or 0xFF bytes (FP8: NaN in e4m3 and in e5m2 alike; integers)."""
    if t.numel():
        if t.dtype in FP8_MAX or not t.is_floating_point():
            t.view(torch.uint8).fill_(0xFF) if t.element_size() == 1 else t.fill_(-1)
        else:
            t.fill_(float("nan"))
    return t


@pytest.fixture
def poison_allocations(monkeypatch):
    """A function that makes ``torch.empty``, ``torch.empty_like`` and ``Tensor.new_empty`` return poisoned
    tensors (:func:`poison`) for the rest of the test: an element a kernel fails to write (a mask, a grid
    short of the padded rows) then reads as NaN on any device, not as the zeros a fresh CPU page holds."""
    empty, empty_like, new_empty = torch.empty, torch.empty_like, torch.Tensor.new_empty

    def enable():
        monkeypatch.setattr(torch, "empty", lambda *args, **kwargs: poison(empty(*args, **kwargs)))
        monkeypatch.setattr(torch, "empty_like", lambda *args, **kwargs: poison(empty_like(*args, **kwargs)))
        monkeypatch.setattr(torch.Tensor, "new_empty",
                            lambda self, *args, **kwargs: poison(new_empty(self, *args, **kwargs)))

    return enable


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_every_element_is_written(recipe, dtype, poison_allocations, device):
    """The casts (every output combination) and a linear layer's forward and backward give the same bits
    when every fresh allocation starts as NaN: no kernel or GEMM reads an element nobody wrote. 37 rows:
    the transposed casts pad them to 48 (the wgrad GEMM's contraction)."""
    rowwise = recipe == "rowwise"
    x, weight, bias = operands((37, 64), 48, dtype, device, seed=120)
    dy = random_tensor((37, 48), dtype, seed=121).to(device)

    def run():
        casts = [fp8._quantize_2d(x, dtype8, rowwise, rows, transposed, 16)
                 for dtype8 in FORMATS.values() for rows, transposed in ((True, False), (True, True), (False, True))]
        leaves_ = [t.clone().requires_grad_() for t in (x, weight, bias)]
        y = fp8_linear(*leaves_, recipe=recipe, weight_cache=False)
        y.backward(dy)
        return [t for cast in casts for t in cast if t is not None] + [y.detach()] + [t.grad for t in leaves_]

    expected = run()
    poison_allocations()
    for i, (mine, theirs) in enumerate(zip(run(), expected, strict=True)):
        if mine.dtype in FP8_MAX:
            assert torch.equal(bits(mine), bits(theirs)), i
        else:
            assert torch.isfinite(mine).all() and torch.equal(mine, theirs), i
    yt = fp8._quantize_2d(x, E4M3, rowwise, False, True, 16)[2]
    assert yt.shape == (64, 48) and (bits(yt[:, 37:]) == 0).all()  # the padding: zeros, in the poisoned run too


# ---------------------------------------------------------------------------------------------
# An input already in FP8
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_fp8_input_gives_what_the_high_precision_input_gives(recipe, device):
    """``fp8_linear(quantize(x), x_scale=...)`` runs the GEMM fp8_linear(x) runs, on the same operands: the
    same output bit for bit, and (tensorwise, whose weight gradient reuses x's cast) the same weight
    gradient; rowwise re-quantizes x by columns from the FP8 values, within the FP8 bound."""
    x, weight, bias = operands((3, 21, 64), 48, torch.bfloat16, device, seed=70)
    q, scale = quantize(x, recipe=recipe)
    w1, w2 = weight.clone().requires_grad_(), weight.clone().requires_grad_()
    b1, b2 = bias.clone().requires_grad_(), bias.clone().requires_grad_()
    y1 = fp8_linear(x, w1, b1, recipe=recipe)
    y2 = fp8_linear(q, w2, b2, x_scale=scale, recipe=recipe)
    assert y2.dtype == weight.dtype and torch.equal(y1, y2)
    dy = random_tensor(y1.shape, y1.dtype, seed=71).to(device)
    y1.backward(dy)
    y2.backward(dy)
    assert torch.equal(b1.grad, b2.grad)
    if recipe == "tensorwise":
        assert torch.equal(w1.grad, w2.grad)
    else:
        exact = dy.double().reshape(-1, 48).t() @ x.double().reshape(-1, 64)
        _, dw_bound = gradient_bounds(x.reshape(-1, 64), weight, dy.reshape(-1, 48), recipe)
        # Two roundings of x (by rows, then by columns from the FP8 values): twice x's share of the bound.
        assert_within(w2.grad, exact, 2 * dw_bound, "dweight")
    # The 2-D scale of a 2-D x, and a 1-element tensorwise scale, are taken as they are.
    q2, scale2 = quantize(x.reshape(-1, 64), recipe=recipe)
    if recipe == "tensorwise":
        scale2 = scale2.reshape(1)
    assert torch.equal(fp8_linear(q2, weight, bias, x_scale=scale2, recipe=recipe), y1.detach().reshape(-1, 48))


# ---------------------------------------------------------------------------------------------
# The weight's casts, cached
# ---------------------------------------------------------------------------------------------


def count_weight_casts(monkeypatch, weight):
    calls = []
    original = fp8._quantize_2d

    def counting(x, *args):
        if x.data_ptr() == weight.data_ptr():
            calls.append(args)
        return original(x, *args)

    monkeypatch.setattr(fp8, "_quantize_2d", counting)
    return calls


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_weight_casts_are_reused_until_the_weight_changes(recipe, monkeypatch, device):
    x, weight, bias = operands((24, 64), 32, torch.float32, device, seed=80)
    weight.requires_grad_()
    calls = count_weight_casts(monkeypatch, weight)
    y1 = fp8_linear(x, weight, bias, recipe=recipe)
    y2 = fp8_linear(x, weight, bias, recipe=recipe)  # the same step: a second micro-batch
    assert len(calls) == 1 and torch.equal(y1, y2)
    cached = getattr(weight, fp8._CACHE_ATTRIBUTE)[1]
    fp8_linear(x, weight, bias, recipe=recipe)
    assert getattr(weight, fp8._CACHE_ATTRIBUTE)[1] is cached
    # An optimizer step updates the weight in place: the next call casts it again, and uses the new values.
    y1.sum().backward()
    torch.optim.SGD([weight], lr=0.5).step()
    y3 = fp8_linear(x, weight, bias, recipe=recipe)
    assert len(calls) == 2 and not torch.equal(y3, y1)
    assert torch.equal(y3, fp8_linear(x, weight, bias, recipe=recipe, weight_cache=False))
    with torch.no_grad():
        weight.mul_(-1.5)  # any in-place update
    assert torch.equal(fp8_linear(x, weight, bias, recipe=recipe),
                       fp8_linear(x, weight, bias, recipe=recipe, weight_cache=False))
    # An input that needs its gradient wants the transposed cast too, made by each backward and not kept: from the
    # cached cast's bytes (tensorwise: no cast at all), or one transposed cast a backward (rowwise: the columns'
    # scales); the same input gradient as the uncached path's one pass gives.
    xg = x.clone().requires_grad_()
    before = len(calls)
    fp8_linear(xg, weight, bias, recipe=recipe).sum().backward()
    fp8_linear(xg, weight, bias, recipe=recipe).sum().backward()
    made = calls[before:]
    assert len(made) == (0 if recipe == "tensorwise" else 2), made
    assert all(args[2:4] == (False, True) for args in made), made  # (rows, transposed): the transpose alone
    cached_grad = xg.grad.clone()  # two backwards' sum
    xg.grad = None
    fp8_linear(xg, weight, bias, recipe=recipe, weight_cache=False).sum().backward()
    assert torch.equal(cached_grad, 2 * xg.grad)


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_the_weights_transpose_is_not_kept_between_forward_and_backward(recipe, device):
    """Eagerly, what the forward keeps for the backward holds no transposed cast of the weight (1 byte a parameter
    a layer at the step's peak; ops/fp8.py's _weight_operands), and the weight's cache only the forward's cast."""
    x, weight, bias = operands((24, 64), 48, torch.float32, device, seed=81)  # x^T is (64, 32) once padded
    weight.requires_grad_()
    y = fp8_linear(x.clone().requires_grad_(), weight, bias, recipe=recipe)
    node = y.grad_fn
    while not hasattr(node, "saved_tensors"):  # past the views of the output to the Function's node
        node = node.next_functions[0][0]
    fp8_tensors = [t for t in node.saved_tensors if t is not None and t.dtype == torch.float8_e4m3fn]
    assert fp8_tensors and all(tuple(t.shape) != (64, 48) for t in fp8_tensors), [t.shape for t in fp8_tensors]
    entry = getattr(weight, fp8._CACHE_ATTRIBUTE)
    assert [tuple(t.shape) for t in entry[1:] if t.dtype == torch.float8_e4m3fn] == [(48, 64)]
    y.sum().backward()
    assert weight.grad is not None


@pytest.mark.parametrize("recipe", fp8.RECIPES)
@pytest.mark.parametrize("x_amax", [False, True], ids=["amax-pass", "amax-given"])
def test_an_input_kept_for_free_is_kept_not_its_cast(recipe, x_amax, device):
    """Under hooks that keep x for free (a fused block's recomputed norm output, attention's output), a tensorwise
    layer keeps x itself and its amax, not x^T's e4m3 cast, and its backward casts x with that amax: output and
    gradients equal to the plain call's, bit for bit. Rowwise layers (x's columns need scales of their own) keep
    the cast as before."""
    x, weight, bias = operands((24, 64), 48, torch.bfloat16, device, seed=85)
    dy = random_tensor((24, 48), torch.bfloat16, seed=88).to(device)
    amax = x.float().abs().amax().reshape(1) if x_amax and recipe == "tensorwise" else None
    runs = []
    for free in (False, True):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        hooks = FreeHooks()
        with hooks if free else contextlib.nullcontext():
            y = fp8_linear(*leaves, recipe=recipe, x_amax=amax)
        y.backward(dy)
        runs.append([y.detach()] + [t.grad for t in leaves])
    kept = [dtype for shape, dtype in hooks.packed]
    if recipe == "tensorwise":
        assert ((24, 64), torch.bfloat16) in hooks.packed and torch.float8_e4m3fn not in kept, hooks.packed
    else:
        assert torch.float8_e4m3fn in kept and ((24, 64), torch.bfloat16) not in hooks.packed, hooks.packed
    for name, a, b in zip(("y", "dx", "dweight", "dbias"), runs[1], runs[0]):
        assert torch.equal(a, b), name


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape, pad, row_stride", [((37, 72), 16, None), ((130, 200), 1, None), ((16, 48), 16, 64),
                                                    ((1, 3), 16, None), ((0, 32), 16, None), ((300, 129), 16, 160),
                                                    ((100, 4304), 1, None), ((1152, 40), 16, None)])  # real widths
def test_the_byte_transpose_is_the_references(fmt, shape, pad, row_stride, device):
    """``_transposed`` (the kernel, eagerly): (K, MP) bytes equal to the PyTorch reference's, zero past column M,
    for tiles cut at odd sizes, padding and rows of a wider buffer."""
    m, k = shape
    full = random_tensor((m, row_stride or k), torch.float32, seed=21, scale=8.0).to(device).to(FORMATS[fmt])
    q = full[:, :k]
    got, want = fp8._transposed(q, pad), fp8._transposed_ref(q, pad)
    assert got.dtype == FORMATS[fmt] and got.shape == want.shape == (k, fp8.round_up(m, pad)) and got.is_contiguous()
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_tensor_amax_is_the_casts_amax(device):
    """``tensor_amax``: max |x| as (1,) fp32, the amax pass the casts run (their value, exactly); 0 when empty."""
    for shape, layout in (((37, 72), "contiguous"), ((3, 760), "transposed"), ((300, 1100), "strided")):
        x = random_tensor(shape, torch.bfloat16, seed=7, layout=layout).to(device)
        got = fp8.tensor_amax(x)
        assert got.shape == (1,) and got.dtype == torch.float32
        assert got.item() == x.float().abs().max().item(), shape
    assert fp8.tensor_amax(torch.empty(0, 16, device=device)).item() == 0.0


@pytest.mark.usefixtures("requires_triton")
def test_the_casts_amax_passes_need_no_zero_fill(poison_allocations, device):
    """A tensorwise cast's amax pass folds into one of the stream's two amax slots (fp8.AMAX_SLOTS), zeroed by the
    cast before it, and its cast kernel zeroes the other: casts in a row with shrinking values (a slot left
    holding an earlier amax would give a larger scale), e5m2 and e4m3, rows and transposed, with a cast of a given
    amax (no pass, no slot) between them, each bit for bit the reference's, with every fresh allocation poisoned;
    after a cast the slot it will not read next is zero."""
    poison_allocations()
    for i, scale in enumerate((64.0, 8.0, 1.0, 0.125, 0.015625)):
        x = random_tensor((67, 96), torch.bfloat16, seed=200 + i, scale=scale).to(device)
        fmt = (E5M2, E4M3)[i % 2]
        for rows, transposed in ((True, False), (True, True), (False, True)):
            got = fp8._quantize_2d(x, fmt, False, rows, transposed, 16)
            want = fp8._quantize_2d_ref(x, fmt, False, rows, transposed, 16)
            for mine, theirs in zip(got, want, strict=True):
                if mine is None:
                    assert theirs is None or theirs.numel() == 0
                else:
                    comparable = [bits(t) if t.dtype in FP8_MAX else t for t in (mine, theirs)]
                    assert torch.equal(*[t.cpu() for t in comparable]), (scale, rows, transposed)
        given = fp8._quantize_2d(x, fmt, False, True, False, 16, None, x.float().abs().amax().reshape(1))
        assert torch.equal(given[1].cpu(), fp8._quantize_2d_ref(x, fmt, False, True, False, 16)[1].cpu())
        slot, _ = fp8.AMAX_SLOTS.take(x)  # the next pass's slot is zero
        assert slot.item() == 0.0, scale
        fp8.AMAX_SLOTS.take(x)  # (back to the order the casts left)


@pytest.mark.gpu
def test_amax_slots_are_the_streams_and_not_taken_in_a_capture():
    """A stream of its own gets slots of its own (launches on two streams may run at once); while a CUDA graph
    captures, no slots: the cast's amax is zero-filled, in the graph, and replays give the replayed input's scale."""
    x = random_tensor((1000, 256), torch.bfloat16, seed=5).cuda()
    main = fp8.AMAX_SLOTS.take(x)
    fp8.AMAX_SLOTS.take(x)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        other = fp8.AMAX_SLOTS.take(x)
        fp8.AMAX_SLOTS.take(x)
        assert {t.data_ptr() for t in other}.isdisjoint({t.data_ptr() for t in main})
        q, q_scale = fp8._quantize_2d(x, E4M3, False, True, False, 16)[:2]
        assert torch.equal(q_scale, fp8._quantize_2d_ref(x, E4M3, False, True, False, 16)[1])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    source = x.clone()
    with torch.cuda.graph(graph):
        assert fp8.AMAX_SLOTS.take(source) is None
        q_scale = fp8._quantize_2d(source, E4M3, False, True, False, 16)[1]
    for scale in (3.0, 0.5):
        source.copy_(x * scale)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(q_scale, fp8._quantize_2d_ref(source, E4M3, False, True, False, 16)[1]), scale


def test_an_update_through_data_needs_clear_weight_cache(device):
    """``weight.data`` has a version counter of its own: such an update is not seen until the cache is cleared
    (documented in fp8_linear)."""
    x, weight, _ = operands((8, 32), 16, torch.float32, device, seed=90)
    stale = fp8_linear(x, weight)
    weight.data.mul_(2.0)
    assert torch.equal(fp8_linear(x, weight), stale)
    fp8.clear_weight_cache(weight)
    assert torch.equal(fp8_linear(x, weight), fp8_linear(x, weight, weight_cache=False))
    assert not torch.equal(fp8_linear(x, weight), stale)


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def skip_unless_compiled_rowwise_runs(recipe: str, device: str) -> None:
    """Compiled rowwise FP8 on the CPU needs a torch whose CPU ``_scaled_mm`` takes rowwise scales (2.13); on an
    older one the op refuses (tests/models/test_fused_fp8.py tests the refusal)."""
    if recipe == "rowwise" and device == "cpu" and not fp8.CPU_ROWWISE_SCALED_MM:
        pytest.skip(f"torch {torch.__version__}: no rowwise _scaled_mm on the CPU, compiled rowwise FP8 refuses")


@pytest.mark.parametrize("recipe", fp8.RECIPES)
def test_torch_compile_fullgraph_functional(recipe, device):
    """One graph with the quantize launchers and ``_scaled_mm``, eager's values (aot_eager runs the same ops)."""
    from tests.helpers import assert_compiles_like_eager

    skip_unless_compiled_rowwise_runs(recipe, device)
    x, weight, bias = operands((37, 64), 48, torch.float32, device, seed=100)
    grad_output = random_tensor((37, 48), torch.float32, seed=101).to(device)

    def block(x, weight, bias):
        return fp8_linear(x * 2.0, weight, bias, recipe=recipe).relu()

    def run(fn):
        leaves_ = [t.clone().requires_grad_() for t in (x, weight, bias)]
        out = fn(*leaves_)
        out.backward(grad_output)
        return [out.detach()] + [t.grad for t in leaves_]

    # Bit for bit, but the bias gradient: eagerly it comes from the cast's pass over dy (fp32 partial sums);
    # traced at this size the backward takes the reference (runtime.use_triton's small-input rule), dy.sum(0).
    assert_compiles_like_eager(block, run, ["out", "dx", "dweight", "dbias"], backend="aot_eager",
                               rtol=[0, 0, 0, 1e-5], atol=[0, 0, 0, 1e-5], explain_args=[x, weight, bias])


def test_traced_transposes_are_the_byte_kernel(device):
    """Traced, the forward's e4m3 x^T is made by the byte-transpose op, as eagerly: left to PyTorch it became an
    Inductor kernel of its own at a twentieth of the copy's bandwidth (3.0 ms of te-4layer's compiled step)."""
    from torch._dynamo.backends.common import aot_autograd

    x, weight, bias = operands((300, 256), 192, torch.bfloat16, device, seed=102)
    q, scale = quantize(x)  # an e4m3 input (a norm's FP8 output): its bytes transposed for the weight gradient
    graphs = []

    def keep(graph, example_inputs):
        graphs.append(graph)
        return graph

    torch._dynamo.reset()
    try:
        step = torch.compile(lambda q, s, w, b: fp8_linear(q, w, b, x_scale=s, recipe="tensorwise"), fullgraph=True,
                             backend=aot_autograd(fw_compiler=keep, bw_compiler=keep))
        step(q, scale, weight.requires_grad_(), bias).float().sum().backward()
    finally:
        torch._dynamo.reset()
    assert "fp8_transpose" in _called(graphs[0]), _called(graphs[0])


def _called(graph) -> list[str]:
    """The ops a traced graph calls by name; a user Triton kernel (a ``triton_op``'s, as traced on a GPU) by its
    op's name, from the kernel's."""
    from torch._higher_order_ops.triton_kernel_wrap import (
        kernel_side_table, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation)

    ops_of_kernels = {"_transpose_bytes_kernel": "fp8_transpose"}
    names = []
    for node in graph.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in (triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation):
            kernel = kernel_side_table.get_kernel(node.kwargs["kernel_idx"])
            while hasattr(kernel, "fn"):  # (an autotuner's JITFunction's Python function)
                kernel = kernel.fn
            name = kernel.__name__
            names.append(ops_of_kernels.get(name, name))
        else:
            names.append(getattr(node.target, "_opname", str(node.target)))
    return names


# ---------------------------------------------------------------------------------------------
# Bad arguments: each error names the argument and what was expected
# ---------------------------------------------------------------------------------------------


def bad_calls(device):
    x, weight, bias = operands((7, 32), 16, torch.float32, device, seed=110)
    q, scale = quantize(x)
    q_rows, scale_rows = quantize(x, recipe="rowwise")
    return [
        (lambda: fp8_linear(x.double(), weight), TypeError, "x: expected a float32, float16 or bfloat16"),
        (lambda: fp8_linear(x.to(E5M2), weight, x_scale=scale), TypeError, "x: expected"),
        (lambda: fp8_linear(x.long(), weight), TypeError, "x: expected"),
        (lambda: fp8_linear(x, weight.t()), ValueError, "weight: expected shape (out_features, 32)"),
        (lambda: fp8_linear(x, weight.to(E4M3)), TypeError, "weight: expected a float32"),
        (lambda: fp8_linear(x, weight, bias[:8]), ValueError, "bias: expected shape (16,)"),
        (lambda: fp8_linear(q, weight), ValueError, "x_scale: x is float8_e4m3fn"),
        (lambda: fp8_linear(x, weight, x_scale=scale), ValueError, "x_scale: only for an x already in float8"),
        (lambda: fp8_linear(q, weight, x_scale=scale_rows), ValueError, "x_scale: recipe 'tensorwise' expects one"),
        (lambda: fp8_linear(q_rows, weight, x_scale=scale, recipe="rowwise"), ValueError,
         "x_scale: recipe 'rowwise' expects one scale a row of x, shape (7, 1)"),
        (lambda: fp8_linear(q_rows, weight, x_scale=scale_rows.t(), recipe="rowwise"), ValueError, "shape (7, 1)"),
        (lambda: fp8_linear(q, weight, x_scale=scale.half()), TypeError, "x_scale: expected a float32 tensor"),
        (lambda: fp8_linear(q.clone().requires_grad_(), weight, x_scale=scale), ValueError,
         "x: a float8_e4m3fn x cannot take its gradient"),
        (lambda: fp8_linear(x, weight, recipe="blockwise"), ValueError, "recipe: expected one of 'tensorwise'"),
        (lambda: quantize(x, torch.int8), TypeError, "dtype: expected torch.float8_e4m3fn or torch.float8_e5m2"),
        (lambda: quantize(x.int()), TypeError, "x: expected a float32"),
        (lambda: quantize(x, recipe="columnwise"), ValueError, "recipe:"),
    ]


def test_bad_arguments_raise_clear_errors(device):
    for call, error, message in bad_calls(device):
        with pytest.raises(error) as raised:
            call()
        assert message in str(raised.value), (message, str(raised.value))



# ---------------------------------------------------------------------------------------------
# An input quantized by the op before the layer, in a training step
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
def test_quantized_input_sends_its_gradient_to_the_proxy(device):
    """``fp8_linear_quantized(q, scale, proxy, ...)``: the input's gradient goes to ``proxy`` and equals what
    ``fp8_linear`` gives x itself (the same dgrad); the weight gradient is the same within FP8's error (its x
    columns cast from q rather than from x)."""
    x, weight, bias = operands((3, 7, 64), 48, torch.bfloat16, device, seed=300)
    dy = random_tensor((3, 7, 48), torch.bfloat16, seed=303).to(device)
    q, scale = quantize(x, recipe="rowwise")
    results = []
    for quantized in (False, True):
        leaf, w, b = (t.detach().clone().requires_grad_() for t in (x, weight, bias))
        if quantized:
            out = fp8.fp8_linear_quantized(q, scale, leaf, w, b)
        else:
            out = fp8_linear(leaf, w, b, recipe="rowwise")
        out.backward(dy)
        results.append((out.detach(), leaf.grad, w.grad, b.grad))
    (out, dx, dw, db), (q_out, q_dx, q_dw, q_db) = results
    assert q_dx.shape == x.shape and q_dx.dtype == x.dtype
    assert torch.equal(q_dx, dx) and torch.equal(q_db, db)
    assert relative_error(q_out, out) < 5e-2 and relative_error(q_dw, dw) < 5e-2


@pytest.mark.usefixtures("requires_triton")
def test_quantized_input_with_a_zero_stride_proxy(device):
    """The proxy may hold no storage of its own (the norms' stand-in: zeros expanded to the input's shape)."""
    x, weight, bias = operands((5, 64), 32, torch.bfloat16, device, seed=310)
    q, scale = quantize(x, recipe="rowwise")
    dy = random_tensor((5, 32), torch.bfloat16, seed=311).to(device)
    grads = []
    for stand_in in (torch.zeros((), dtype=torch.bfloat16, device=device), torch.zeros_like(x)):
        stand_in.requires_grad_()
        fp8.fp8_linear_quantized(q, scale, stand_in.expand(x.shape), weight, bias).backward(dy)
        grads.append(stand_in.grad)
    expanded, whole = grads
    assert whole.shape == x.shape and bool((whole != 0).any())
    torch.testing.assert_close(expanded.float(), whole.float().sum(), rtol=1e-2, atol=1e-2)


def test_quantized_input_bad_arguments():
    x, weight, bias = operands((5, 64), 32, torch.bfloat16, "cpu", seed=320)
    q, scale = quantize_ref(x, recipe="rowwise")
    with pytest.raises(ValueError, match=r"proxy: expected the input's shape \(5, 64\)"):
        fp8.fp8_linear_quantized(q, scale, x[:4], weight, bias)
    with pytest.raises(ValueError, match="x_scale"):
        fp8.fp8_linear_quantized(q, scale[:4], x, weight, bias)
