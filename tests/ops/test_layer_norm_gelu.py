"""Tests of the fused LayerNorm + GELU: ``layer_norm_gelu(x, weight, bias, eps, approximate)``.

The oracle is PyTorch's own composition ``F.gelu(F.layer_norm(x), approximate=...)`` in float64,
on ``.double()`` copies of the low-precision inputs; the baseline is the same composition run by
PyTorch in the low dtype (autograd for its grads). A fused result may be at most about 2x as wrong
as the baseline (``tests.helpers.assert_close_to_reference``). The reference beside the kernels
(``layer_norm_gelu_ref``) is checked against the same oracle in ``test_reference_*``.
"""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn.functional as F

from blockfuse.ops import norm
from blockfuse.ops.norm import layer_norm_gelu, layer_norm_gelu_ref
from tests.helpers import (
    assert_compiles_like_eager,
    assert_runs_without_interpreter,
    as_double,
    assert_all_close_to_reference,
    grads,
    leaves,
    random_tensor,
    record_results,
    relative_error,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}
APPROXIMATIONS = ["tanh", "none"]
EPS = 1e-5
GRAD_NAMES = ["dx", "dweight", "dbias"]


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


# ---------------------------------------------------------------------------------------------
# Inputs and the three ways to compute the op
# ---------------------------------------------------------------------------------------------


def make_inputs(shape, dtype, device, *, weight=True, bias=True, param_dtype=None, layout="contiguous", seed=0):
    """x with a nonzero mean (the centering matters); weight around 1 and bias around 0, so the
    GELU's input spans its curved part (about -3 to 3), never zeros."""
    width = shape[-1]
    param_dtype = param_dtype or dtype
    x = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=0.5, layout=layout)
    w = random_tensor((width,), param_dtype, device, seed=seed + 1, scale=0.5, offset=1.0) if weight else None
    b = random_tensor((width,), param_dtype, device, seed=seed + 2, scale=0.5) if bias else None
    return [x, w, b]


def call_pytorch(x, weight, bias, approximate, eps=EPS):
    """PyTorch's composition in the inputs' dtype: float64 gives the oracle, a low dtype the
    baseline. Parameters in another dtype than x run as autocast runs them: upcast, normalize,
    cast back, then the GELU in x's dtype."""
    width = x.shape[-1]
    params = [p for p in (weight, bias) if p is not None]
    if params and params[0].dtype != x.dtype:
        y = F.layer_norm(x.to(params[0].dtype), (width,), weight, bias, eps).to(x.dtype)
    else:
        y = F.layer_norm(x, (width,), weight, bias, eps)
    return F.gelu(y, approximate=approximate)


def forward_backward(fn, tensors, grad_output, *, as_dtype=None):
    """Run ``fn(*leaf tensors)`` and autograd; returns (output, grads of x, weight, bias)."""
    leaf_list = leaves(*tensors, dtype=as_dtype)
    out = fn(*leaf_list)
    return out.detach(), grads(out, leaf_list, grad_output)


def check_against_pytorch(tensors, approximate, *, eps=EPS, grad_layout="contiguous"):
    """Forward and backward of the fused op against the fp64 oracle, relative to PyTorch's error."""
    x = tensors[0]
    grad_output = random_tensor(tuple(x.shape), x.dtype, x.device, seed=100, layout=grad_layout)
    ours = forward_backward(lambda *t: layer_norm_gelu(*t, eps, approximate), tensors, grad_output)
    baseline = forward_backward(lambda *t: call_pytorch(*t, approximate, eps), tensors, grad_output)
    oracle = forward_backward(
        lambda *t: call_pytorch(*t, approximate, eps), tensors, grad_output.double(), as_dtype=torch.float64
    )
    (y, our_grads) = ours
    assert y.dtype == x.dtype and y.shape == x.shape, f"y: {y.dtype} {tuple(y.shape)}, expected x's"
    for grad, tensor, name in zip(our_grads, tensors, GRAD_NAMES):
        if grad is not None:
            assert grad.dtype == tensor.dtype, f"{name}: dtype {grad.dtype}, expected {tensor.dtype}"
            assert grad.shape == tensor.shape, f"{name}: shape {tuple(grad.shape)}, expected {tuple(tensor.shape)}"
    assert_all_close_to_reference(
        [y, *our_grads],
        [baseline[0], *baseline[1]],
        [oracle[0], *oracle[1]],
        ["y", *GRAD_NAMES],
        rounded_through=x.dtype,
    )


# ---------------------------------------------------------------------------------------------
# Accuracy against float64, relative to PyTorch's own error
# ---------------------------------------------------------------------------------------------

# (rows, width): every awkward row count and width (4304: SigLIP-2's MLP width, one 8192 tile).
SHAPES = [(199, 72), (3, 760), (1, 4304)]


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_layer_norm_gelu(shape, dtype, approximate, device):
    check_against_pytorch(make_inputs(shape, dtype, device), approximate)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", [(3, 6144), (2, 8200), (2, 11008), (2, 14336)], ids=shape_id)
def test_layer_norm_gelu_wide_tails(shape, dtype, device):
    """Rows in two pieces, as the launch rules take them on a GPU: the forward's 4096 + 2048 lanes on 4 warps (6144),
    8192 + 16 (8200) and 8192 + 4096 on 8 (11008); the backward's pieces at any tail (6144; 8200 on 16 warps), in
    bf16 three pieces (11008: 8192 + 2048 + 1024; 14336: 8192 + 4096 + 2048), in fp32 two pieces at 11008 (24 lanes
    a thread) or its padded tile read twice (14336)."""
    n = shape[1]
    assert norm.forward_rule(n).tail == (n != 14336)
    bf16 = dtype == torch.bfloat16
    tile = norm.backward_rule(n, 1, element_size=2 if bf16 else 4, bf16=bf16)
    assert tile.tail == (bf16 or n != 14336) and (tile.block_u > 1) == (bf16 and n in (11008, 14336))
    check_against_pytorch(make_inputs(shape, dtype, device), "tanh")


@pytest.mark.parametrize("scale", [6.0, 400.0], ids=["near-the-clamp", "past-fp16-squares"])
def test_gelu_inputs_far_from_the_curve(scale, device):
    """bf16 takes the tanh form's derivative in packed fp16 on a GPU (activation.gelu_tanh_grad_f16x2), its input
    clamped to [-8, 8]: GELU inputs around that clamp (weight ~6) and past where an fp16 square overflows (~256;
    weight ~400, inputs to ~1500) keep finite gradients as exact as PyTorch's."""
    x, w, b = make_inputs((5, 1000), torch.bfloat16, device)
    w = random_tensor((1000,), torch.bfloat16, device, seed=7, scale=scale, offset=0.0)
    check_against_pytorch([x, w, b], "tanh")


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize(
    "weight,bias,approximate",
    [(True, False, "tanh"), (False, True, "none"), (False, False, "tanh")],
    ids=["weight-only", "bias-only", "no-affine"],
)
def test_without_some_affine_parameters(weight, bias, approximate, dtype, device):
    check_against_pytorch(make_inputs((3, 760), dtype, device, weight=weight, bias=bias), approximate)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", LOW_PRECISION.values(), ids=LOW_PRECISION.keys())
def test_float32_parameters_with_low_precision_input(dtype, approximate, device):
    """Weight and bias in fp32 (mixed-precision training) while x is fp16/bf16: y stays in x's
    dtype, dweight/dbias come back in fp32."""
    check_against_pytorch(make_inputs((199, 760), dtype, device, param_dtype=torch.float32), approximate)


def test_float32_bias_without_weight_gets_a_float32_grad(device):
    """The bias gradient takes the bias's dtype even when there is no weight to take it from."""
    check_against_pytorch(
        make_inputs((3, 760), torch.bfloat16, device, weight=False, param_dtype=torch.float32), "tanh"
    )


def test_eps_is_used(device):
    """A large eps changes the result a lot: the kernels must use the one they are given."""
    check_against_pytorch(make_inputs((3, 760), torch.float32, device), "tanh", eps=0.5)


def test_approximations_differ(device):
    """The two GELU forms give results that differ by more than rounding (so each test above
    really checks the form it names)."""
    x, w, b = make_inputs((3, 760), torch.float32, device)
    tanh, exact = layer_norm_gelu(x, w, b, approximate="tanh"), layer_norm_gelu(x, w, b, approximate="none")
    assert relative_error(tanh, exact) > 1e-5


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_wide_rows_in_one_tile(approximate, device):
    """8192 < 11008 <= 16384: the backward holds the row in one 16384-lane tile without the pipeliner and reads it
    twice (the GELU's derivative made in both reads), the forward as 8192 + 4096 lanes."""
    check_against_pytorch(make_inputs((3, 11008), torch.bfloat16, device), approximate)


@pytest.mark.parametrize("n,whole_row,dtype", [(12345, True, torch.bfloat16), (9999, True, torch.bfloat16),
                                               (16383, True, torch.float16), (12345, False, torch.bfloat16)],
                         ids=["whole-row", "whole-row-tail", "whole-row-fp16-16383", "chunks"])
def test_scalar_rows_in_the_plain_forms_tiles(n, whole_row, dtype, device, monkeypatch):
    """Odd 16-bit rows past 8192 lanes in the plain forms' tiles (BWD_SCALAR_ROW_CHUNKS_ACT): one whole row on 32
    warps, its register cap 64 (at 12345 and, in fp16, 16383 in place of a padded tile; at 9999 of pieces with a
    2048-lane tail), or with the whole rows off one-row chunks of BWD_SCALAR_CHUNK_LANES, writing dx, the weight kernel
    the weight and bias gradients: within twice PyTorch's error of float64."""
    assert norm.backward_rule(n, 1).num_chunks == 1  # (its own: a padded tile, or pieces)
    with norm.tuned(**({} if whole_row else {"BWD_SCALAR_WHOLE_ROW_RMS_ONLY": True})):
        tile = norm.backward_rule(n, 1, scalar=True)
        assert (tile.num_chunks == 1 and tile.num_warps == 32) if whole_row else tile == norm._scalar_chunk_tile(n)
        assert norm.weight_kernel_rule(tile, n, True, 1)
        assert norm._act_bwd_maxnreg(tile) == (64 if whole_row else norm.TUNING.act_bwd_maxnreg)
        seen = record_results(monkeypatch, norm, "weight_kernel_rule")
        check_against_pytorch(make_inputs((3, n), dtype, device, seed=31), "tanh")
    assert seen == [True], seen


def test_scalar_rows_keep_narrow_tails_pieces(device, monkeypatch):
    """Where the GELU form's own pieces have a tail of at most ACT_BWD_SCALAR_PIECES_MAX_TAIL lanes (8447 = 8192 +
    255) scalar rows keep them, their gradients in the kernel; 0 sends them to the whole row."""
    tile = norm.backward_rule(8447, 1, scalar=True)
    assert tile == norm.backward_rule(8447, 1) and tile.tail and not norm.weight_kernel_rule(tile, 8447, True, 1)
    seen = record_results(monkeypatch, norm, "weight_kernel_rule")
    check_against_pytorch(make_inputs((3, 8447), torch.bfloat16, device, seed=37), "tanh")
    assert seen == [False], seen
    with norm.tuned(ACT_BWD_SCALAR_PIECES_MAX_TAIL=0):
        assert norm.backward_rule(8447, 1, scalar=True).num_warps == 32


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_chunked_wide_rows(approximate, device):
    """20000 > 16384: the row is normalized in two chunks (a second kernel path), forward and backward."""
    check_against_pytorch(make_inputs((3, 20000), torch.float32, device), approximate)


# ---------------------------------------------------------------------------------------------
# Layouts and ranks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,layout,dtype",
    [
        ((2, 5, 760), "contiguous", torch.bfloat16),
        ((2, 3, 3, 72), "contiguous", torch.float16),
        ((3, 5, 72), "transposed", torch.bfloat16),
    ],
    ids=["3d", "4d", "3d-transposed"],
)
def test_higher_rank_inputs(shape, layout, dtype, device):
    check_against_pytorch(make_inputs(shape, dtype, device, layout=layout), "tanh", grad_layout=layout)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_non_contiguous_inputs(layout, dtype, device):
    """x a transposed view (last-dim stride > 1) or a strided view of a wider, padded buffer;
    the incoming grad transposed; x is not modified."""
    tensors = make_inputs((5, 760), dtype, device, layout=layout)
    x_before = tensors[0].clone()
    check_against_pytorch(tensors, "none" if layout == "strided" else "tanh", grad_layout="transposed")
    assert torch.equal(tensors[0], x_before), "x was modified in place"


def test_strided_weight_and_bias(device):
    """Weight and bias that are every other element of a longer vector (stride 2)."""
    x, w, b = make_inputs((3, 760), torch.float32, device)
    w_buffer = torch.stack([w, torch.full_like(w, float("nan"))], dim=-1).reshape(-1)
    b_buffer = torch.stack([b, torch.full_like(b, float("nan"))], dim=-1).reshape(-1)
    strided_w, strided_b = w_buffer[::2], b_buffer[::2]
    assert strided_w.stride(0) == 2 and torch.equal(strided_w, w)
    check_against_pytorch([x, strided_w, strided_b], "tanh")


# ---------------------------------------------------------------------------------------------
# Gradients of some inputs, and determinism
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("needs_grad", ["x", "weight", "bias", "weight+bias", "none"])
def test_grads_of_some_inputs(needs_grad, device):
    """Only some inputs require grad (frozen parameters, frozen activations, inference): the
    grads asked for equal those of the full backward, bit for bit, as does the output (on a GPU, under
    no_grad, within a few ulps)."""
    tensors = make_inputs((3, 760), torch.float32, device)
    grad_output = random_tensor((3, 760), torch.float32, device, seed=100)
    full_output, full_grads = forward_backward(lambda *t: layer_norm_gelu(*t), tensors, grad_output)
    chosen = {"x": [0], "weight": [1], "bias": [2], "weight+bias": [1, 2], "none": []}[needs_grad]
    copies = [t.detach().clone().requires_grad_(i in chosen) for i, t in enumerate(tensors)]
    if not chosen:
        with torch.no_grad():
            output = layer_norm_gelu(*copies)
        assert not output.requires_grad
    else:
        output = layer_norm_gelu(*copies)
        computed = torch.autograd.grad(output, [copies[i] for i in chosen], grad_output)
        for index, grad in zip(chosen, computed):
            assert torch.equal(grad, full_grads[index]), GRAD_NAMES[index]
    if chosen or device == "cpu":
        assert torch.equal(output.detach(), full_output)
    else:  # NOTE: under no_grad the forward is compiled without the statistics' stores, and the GPU compiler may
        # contract its arithmetic differently: within a few fp32 ulps (seen on an H200, as for the norms)
        torch.testing.assert_close(output, full_output, rtol=4 * 2**-24, atol=4 * 2**-24)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_weight_grads_are_deterministic(dtype, device):
    """dweight and dbias are reduced without atomics: two identical runs agree bit for bit
    (199 rows: several programs each hold a partial sum)."""
    if device != "cuda":
        pytest.skip("needs CUDA: the interpreter runs a kernel's programs one after another, so two runs there "
                    "cannot differ in their order of additions")
    tensors = make_inputs((199, 760), dtype, device)
    grad_output = random_tensor((199, 760), dtype, device, seed=100)
    first = forward_backward(lambda *t: layer_norm_gelu(*t), tensors, grad_output)[1]
    second = forward_backward(lambda *t: layer_norm_gelu(*t), tensors, grad_output)[1]
    for a, b, name in zip(first, second, GRAD_NAMES):
        assert torch.equal(a, b), f"{name} differs between two identical runs"


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def block(x, weight, bias):
    """Every form of the op in one graph, with ops around it for Inductor to fuse."""
    y = layer_norm_gelu(x, weight, bias)
    z = layer_norm_gelu(y * 1.5 - x, None, bias, approximate="none")
    return z + layer_norm_gelu(x, weight, eps=1e-6)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no graph breaks, and the same forward and backward as eager."""
    shape = (5, 72)
    inputs = make_inputs(shape, torch.float32, device)
    grad_output = random_tensor(shape, torch.float32, device, seed=6)

    def run(fn):
        leaf_list = leaves(*inputs)
        out = fn(*leaf_list)
        return [out.detach()] + grads(out, leaf_list, grad_output)

    # Inductor fuses the ops around the custom ops (and the reference's ops on the reference
    # path), so the last bits may differ; aot_eager runs eager's kernels.
    assert_compiles_like_eager(block, run, ["out", *GRAD_NAMES], backend=backend, exact=backend == "aot_eager",
                               rtol=1e-5, atol=1e-5, explain_args=inputs)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _bad_calls():
    x = random_tensor((3, 8), torch.float32)
    w = random_tensor((8,), torch.float32, seed=1, offset=1.0)
    b = random_tensor((8,), torch.float32, seed=2)
    wrong = random_tensor((7,), torch.float32, seed=3)
    int_x = torch.randint(1, 5, (3, 8), generator=torch.Generator().manual_seed(0))
    return [
        ("x-not-a-tensor", lambda: layer_norm_gelu(x.tolist(), w, b), TypeError, "x"),
        ("x-int", lambda: layer_norm_gelu(int_x, w, b), TypeError, "x"),
        ("x-scalar", lambda: layer_norm_gelu(x[0, 0], None, None), ValueError, "x"),
        ("weight-shape", lambda: layer_norm_gelu(x, wrong, b), ValueError, "weight"),
        ("weight-2d", lambda: layer_norm_gelu(x, w.view(1, 8), b), ValueError, "weight"),
        ("weight-int", lambda: layer_norm_gelu(x, int_x[0], b), TypeError, "weight"),
        ("bias-shape", lambda: layer_norm_gelu(x, w, wrong), ValueError, "bias"),
        ("bias-int", lambda: layer_norm_gelu(x, w, int_x[0]), TypeError, "bias"),
        ("eps-zero", lambda: layer_norm_gelu(x, w, b, 0.0), ValueError, "eps"),
        ("eps-nan", lambda: layer_norm_gelu(x, w, b, float("nan")), ValueError, "eps"),
        ("approximate-unknown", lambda: layer_norm_gelu(x, w, b, approximate="exact"), ValueError, "approximate"),
        ("approximate-none-object", lambda: layer_norm_gelu(x, w, b, approximate=None), ValueError, "approximate"),
        ("ref-approximate", lambda: layer_norm_gelu_ref(x, w, b, approximate="erf"), ValueError, "approximate"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    _, call, error, argument = _bad_calls()[case]
    with pytest.raises(error, match=argument):
        call()


def test_residual_with_activation_is_refused_by_the_launcher():
    """The kernels fuse the activation only without a residual; the launcher says so rather
    than computing something else."""
    from blockfuse.ops.norm import GELU_CODES, PRE, _norm_fwd

    x = random_tensor((3, 8), torch.float32)
    with pytest.raises(ValueError, match="residual"):
        _norm_fwd(x, None, None, x, None, EPS, PRE, 0.0, False, False, GELU_CODES["tanh"], True)


# ---------------------------------------------------------------------------------------------
# The reference beside the kernels, and the CPU fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("weight,bias", [(True, True), (False, True), (False, False)], ids=["wb", "b", "none"])
def test_reference_in_float64_matches_pytorch(weight, bias, approximate):
    """``layer_norm_gelu_ref`` on float64 inputs (the documented oracle) equals PyTorch's
    composition in float64, forward and backward."""
    tensors = make_inputs((3, 760), torch.float64, "cpu", weight=weight, bias=bias)
    grad_output = random_tensor((3, 760), torch.float64, seed=100)
    ref = forward_backward(lambda *t: layer_norm_gelu_ref(*t, EPS, approximate), tensors, grad_output)
    expected = forward_backward(lambda *t: call_pytorch(*t, approximate), tensors, grad_output)
    for a, b, name in zip([ref[0], *ref[1]], [expected[0], *expected[1]], ["y", *GRAD_NAMES]):
        if b is None:
            assert a is None, f"{name}: unexpected grad"
            continue
        assert a.dtype == torch.float64, f"{name}: {a.dtype}"
        assert relative_error(a, b) < 1e-12, f"{name}: relative error {relative_error(a, b):.3e}"


def test_float64_input_runs_the_reference(device):
    """fp64 is accepted and computed by the reference (the kernels compute in fp32)."""
    tensors = make_inputs((3, 72), torch.float64, device)
    assert torch.equal(layer_norm_gelu(*tensors), layer_norm_gelu_ref(*tensors))


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_reference_in_low_precision(dtype):
    """The reference (what CPU tensors use without Triton) is as accurate as PyTorch."""
    tensors = make_inputs((3, 760), dtype, "cpu")
    ours = layer_norm_gelu_ref(*tensors)
    baseline = call_pytorch(*tensors, "tanh")
    oracle = call_pytorch(*as_double(*tensors), "tanh")
    assert_all_close_to_reference([ours], [baseline], [oracle], ["y"])



FALLBACK_SCRIPT = textwrap.dedent(
    """
    import torch
    from blockfuse.ops.norm import layer_norm_gelu, layer_norm_gelu_ref
    from blockfuse.runtime import implementation

    assert implementation("cpu") == "reference", implementation("cpu")
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 760, generator=g) * 2 + 0.5).bfloat16()
    w = (torch.randn(760, generator=g) * 0.5 + 1).bfloat16()
    b = (torch.randn(760, generator=g) * 0.5).bfloat16()
    dy = torch.randn(3, 760, generator=g).bfloat16()

    for approximate in ("tanh", "none"):
        a = [t.clone().requires_grad_() for t in (x, w, b)]
        c = [t.clone().requires_grad_() for t in (x, w, b)]
        ours = layer_norm_gelu(*a, approximate=approximate)
        ref = layer_norm_gelu_ref(*c, approximate=approximate)
        assert torch.equal(ours, ref), (approximate, (ours.float() - ref.float()).abs().max())
        ours.backward(dy)
        ref.backward(dy)
        for t, u in zip(a, c):
            assert torch.equal(t.grad, u.grad), approximate
    assert torch.equal(layer_norm_gelu(x), layer_norm_gelu_ref(x))
    print("reference fallback ok")
    """
)


def test_cpu_without_interpreter_uses_the_reference():
    assert_runs_without_interpreter(FALLBACK_SCRIPT)


# ---------------------------------------------------------------------------------------------
# CUDA only: bigger shapes, the wide-row path in low precision, no host synchronization
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((4096, 4304), torch.bfloat16),  # SigLIP-2 MLP width
        ((16384, 1152), torch.bfloat16),  # SigLIP-2 hidden width, many rows per program
        ((257, 20000), torch.bfloat16),  # chunked rows
        ((2, 65536), torch.float32),
        ((1000, 4096), torch.float16),
    ],
    ids=["4096x4304-bf16", "16384x1152-bf16", "257x20000-bf16", "2x65536-fp32", "1000x4096-fp16"],
)
def test_cuda_large_shapes(shape, dtype, approximate):
    from blockfuse.runtime import implementation

    assert implementation("cuda") == "triton"
    check_against_pytorch(make_inputs(shape, dtype, "cuda"), approximate)
    check_against_pytorch(make_inputs(shape, dtype, "cuda", param_dtype=torch.float32), approximate)


@pytest.mark.gpu
def test_cuda_weight_grads_are_deterministic_with_many_programs():
    tensors = make_inputs((8192, 1152), torch.bfloat16, "cuda")
    grad_output = random_tensor((8192, 1152), torch.bfloat16, "cuda", seed=100)
    first = forward_backward(lambda *t: layer_norm_gelu(*t), tensors, grad_output)[1]
    second = forward_backward(lambda *t: layer_norm_gelu(*t), tensors, grad_output)[1]
    for a, b, name in zip(first, second, GRAD_NAMES):
        assert torch.equal(a, b), f"{name} differs between two identical runs"


@pytest.mark.gpu
@pytest.mark.parametrize("width", [1152, 20000])
def test_cuda_forward_and_backward_do_not_synchronize(width):
    """No ``.item()`` or other host sync in the forward or the backward (warm caches first)."""
    tensors = leaves(*make_inputs((64, width), torch.bfloat16, "cuda"))
    grad_output = random_tensor((64, width), torch.bfloat16, "cuda", seed=100)
    layer_norm_gelu(*tensors).backward(grad_output)
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        layer_norm_gelu(*tensors).backward(grad_output)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()
