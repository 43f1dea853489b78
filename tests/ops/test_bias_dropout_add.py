"""Tests of the fused bias + dropout + residual add: ``bias_dropout_add``.

The oracle is PyTorch's own composition ``residual + (x + bias) * keep / (1 - p)`` in float64, on
``.double()`` copies of the low-precision inputs, with the mask the kernel draws (``keep_mask`` of
the seed the op draws under the same ``torch.manual_seed``); the baseline is the same composition
run by PyTorch in the low dtype (autograd for its grads). A fused result may be at most about 2x as
wrong as the baseline (``tests.helpers.assert_close_to_reference``). The reference beside the
kernels (``bias_dropout_add_ref``) is checked against the same oracle in ``test_reference_*``.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap

import pytest
import torch

from blockfuse.ops.bias_dropout_add import bias_dropout_add, bias_dropout_add_ref
from blockfuse.ops.dropout import draw_seed, keep_mask
from tests.helpers import (
    assert_compiles_like_eager,
    assert_runs_without_interpreter,
    assert_all_close_to_reference,
    grads,
    leaves,
    random_tensor,
    relative_error,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
GRAD_NAMES = ["dx", "dbias", "dresidual"]
SEED = 1234


# ---------------------------------------------------------------------------------------------
# Inputs, the op under test, PyTorch's composition, and the check of one against the other
# ---------------------------------------------------------------------------------------------


def make_inputs(
    shape,
    dtype,
    device,
    *,
    bias=True,
    bias_dtype=None,
    x_layout="contiguous",
    residual_layout="contiguous",
    bias_layout="contiguous",
    seed=0,
):
    """(x, bias, residual), never zeros: x = randn*2 + 0.5, bias around 0.1, residual randn*2 - 0.25."""
    x = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=0.5, layout=x_layout)
    b = None
    if bias:
        b = random_tensor(shape[-1:], bias_dtype or dtype, device, seed=seed + 1, scale=0.5, offset=0.1,
                          layout=bias_layout)
    residual = random_tensor(shape, dtype, device, seed=seed + 2, scale=2.0, offset=-0.25, layout=residual_layout)
    return [x, b, residual]


def call_pytorch(x, bias, residual, mask=None, p=0.0):
    """PyTorch's composition in the inputs' dtype: float64 gives the oracle, a low dtype the
    baseline. ``mask`` (True = keep) applies dropout with ``p``."""
    z = x if bias is None else (x + bias).to(x.dtype)
    if mask is not None:
        z = z * mask.to(z.dtype) * (1.0 / (1.0 - p))
    return residual + z


def forward_backward(fn, tensors, grad_output, *, as_dtype=None):
    """``fn(leaf copies of tensors)`` and its grads (None for a None input)."""
    leaf_list = leaves(*tensors, dtype=as_dtype)
    out = fn(leaf_list)
    return out.detach(), grads(out, leaf_list, grad_output)


def regenerate_mask(seed_value, shape, p, device):
    """The keep-mask the op drew after ``torch.manual_seed(seed_value)`` (its seed is the first draw)."""
    torch.manual_seed(seed_value)
    return keep_mask(draw_seed(device), math.prod(shape), p).view(shape)


def run_seeded(tensors, grad_output, p, seed_value=SEED, **kwargs):
    """Forward and backward of the op right after ``torch.manual_seed(seed_value)``."""
    torch.manual_seed(seed_value)
    return forward_backward(lambda t: bias_dropout_add(*t, p, **kwargs), tensors, grad_output)


def check_against_pytorch(tensors, p=0.0, *, grad_layout="contiguous"):
    """Forward and backward of the op against the fp64 oracle with the kernel's own mask,
    relative to PyTorch's own error in the same dtype."""
    x = tensors[0]
    dy = random_tensor(tuple(x.shape), x.dtype, x.device, seed=100, layout=grad_layout)
    mask = regenerate_mask(SEED, tuple(x.shape), p, x.device) if p > 0 else None
    if mask is not None:
        assert abs(mask.float().mean().item() - (1 - p)) < 0.1, "keep_mask does not keep about 1 - p"
    ours = run_seeded(tensors, dy, p)
    baseline = forward_backward(lambda t: call_pytorch(*t, mask, p), tensors, dy)
    oracle = forward_backward(lambda t: call_pytorch(*t, mask, p), tensors, dy.double(), as_dtype=torch.float64)

    out, our_grads = ours
    assert out.dtype == x.dtype and out.shape == x.shape, f"out: {out.dtype} {tuple(out.shape)}"
    for grad, tensor, name in zip(our_grads, tensors, GRAD_NAMES):
        if grad is not None:
            assert grad.dtype == tensor.dtype, f"{name}: dtype {grad.dtype}, expected {tensor.dtype}"
    assert_all_close_to_reference(
        [out, *our_grads], [baseline[0], *baseline[1]], [oracle[0], *oracle[1]], ["out", *GRAD_NAMES],
        rounded_through=x.dtype,
    )
    return ours, mask


def needs_kernel_mask(p, request):
    """The oracle with dropout needs the kernel's mask, which ``keep_mask`` draws with Triton."""
    if p > 0:
        request.getfixturevalue("requires_triton")


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


# ---------------------------------------------------------------------------------------------
# Accuracy against float64, relative to PyTorch's own error
# ---------------------------------------------------------------------------------------------

SHAPES = [(199, 72), (3, 760), (1, 4304), (5, 77)]  # 77: rows not a multiple of 4 (one draw an element)


@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_bias_dropout_add(shape, dtype, bias, p, device, request):
    needs_kernel_mask(p, request)
    check_against_pytorch(make_inputs(shape, dtype, device, bias=bias), p)


@pytest.mark.parametrize("shape", [(199, 72), (9, 4304)], ids=shape_id)
def test_forward_and_backward_tiles_differ(shape, monkeypatch, device, request):
    """The forward and backward kernels take different tiles; each draws the mask of its elements from
    their flat indices, so the backward drops exactly what the forward dropped whatever the tiles. The
    tiles come from the table swapped in (``TILES``), not from the cached rule's earlier calls."""
    import blockfuse.ops.bias_dropout_add as bda

    needs_kernel_mask(0.3, request)
    launched = {}

    def spy(name, kernel):
        def call(grid, *args, **constexprs):
            launched[name] = (constexprs["BLOCK_M"], constexprs["BLOCK_N"], constexprs["num_warps"])
            return kernel(grid, *args, **constexprs)
        return call

    monkeypatch.setattr(bda, "_fwd_kernel", spy("forward", bda._fwd_kernel))
    monkeypatch.setattr(bda, "_bwd_kernel", spy("backward", bda._bwd_kernel))
    bda._tile(shape[-1], 2048, 256, 256)  # (the shipped forward tile, cached before the swap)
    tiles = dataclasses.replace(bda.TILES, forward=256, forward_per_warp=128, min_block_n=64)
    monkeypatch.setattr(bda, "TILES", tiles)
    check_against_pytorch(make_inputs(shape, torch.float32, device, bias=True), 0.3)
    assert launched == {"forward": bda._tile(shape[-1], 256, 128, 64),
                        "backward": bda._tile(shape[-1], tiles.backward, tiles.backward_per_warp, 64)}, launched
    assert launched["forward"] != launched["backward"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_float32_bias_with_low_precision_input(dtype, device, request):
    """An fp32 bias (mixed-precision training) with fp16/bf16 x: out in x's dtype, dbias in fp32."""
    needs_kernel_mask(0.3, request)
    check_against_pytorch(make_inputs((31, 760), dtype, device, bias_dtype=torch.float32), 0.3)


@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize(
    "shape,layout",
    [((2, 5, 760), "contiguous"), ((3, 5, 72), "transposed"), ((2, 3, 3, 72), "contiguous")],
    ids=["3d", "3d-transposed", "4d"],
)
def test_higher_rank_inputs(shape, layout, p, device, request):
    needs_kernel_mask(p, request)
    inputs = make_inputs(shape, torch.bfloat16, device, x_layout=layout, residual_layout=layout)
    check_against_pytorch(inputs, p)


@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_non_contiguous_inputs(dtype, p, device, request):
    """x a transposed view (last-dim stride > 1), the residual and the bias strided views of wider
    buffers, the incoming grad a transposed view; the inputs are not modified."""
    needs_kernel_mask(p, request)
    inputs = make_inputs(
        (5, 760), dtype, device, x_layout="transposed", residual_layout="strided", bias_layout="strided"
    )
    before = [t.clone() for t in inputs]
    check_against_pytorch(inputs, p, grad_layout="transposed")
    for tensor, copy, name in zip(inputs, before, ["x", "bias", "residual"]):
        assert torch.equal(tensor, copy), f"{name} was modified"


def test_batch_dims_permuted(device, request):
    """A 3-D x whose leading dims are permuted (rows not evenly strided), last dim contiguous."""
    needs_kernel_mask(0.3, request)
    x, bias, residual = make_inputs((2, 5, 760), torch.float16, device)
    x = random_tensor((5, 2, 760), torch.float16, device, scale=2.0, offset=0.5).transpose(0, 1)
    assert not x.is_contiguous() and x.stride(-1) == 1
    check_against_pytorch([x, bias, residual], 0.3, grad_layout="transposed")


def test_empty_input(device):
    x, bias, residual = leaves(*make_inputs((0, 72), torch.float32, device))
    out = bias_dropout_add(x, bias, residual, 0.3)
    assert out.shape == (0, 72)
    dx, dbias, dresidual = torch.autograd.grad(out, [x, bias, residual], torch.ones_like(out))
    assert dx.shape == (0, 72) and dresidual.shape == (0, 72)
    assert torch.equal(dbias, torch.zeros_like(dbias))


def test_float64_runs_the_reference(device):
    inputs = make_inputs((3, 760), torch.float64, device)
    torch.manual_seed(SEED)
    ours = bias_dropout_add(*inputs, 0.3)
    torch.manual_seed(SEED)
    assert torch.equal(ours, bias_dropout_add_ref(*inputs, 0.3))


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("needs_grad", ["x", "bias", "residual", "x+bias", "bias+residual", "none"])
def test_grads_of_some_inputs(needs_grad, p, device):
    """Only some inputs require grad (frozen bias, inference): the grads that are asked for equal
    those of the full backward bit for bit, and the output is the same."""
    inputs = make_inputs((64, 760), torch.float32, device)
    dy = random_tensor((64, 760), torch.float32, device, seed=100)
    full_out, full_grads = run_seeded(inputs, dy, p)
    chosen = [] if needs_grad == "none" else [["x", "bias", "residual"].index(n) for n in needs_grad.split("+")]
    tensors = [t.detach().clone().requires_grad_(i in chosen) for i, t in enumerate(inputs)]
    torch.manual_seed(SEED)
    if not chosen:
        with torch.no_grad():
            out = bias_dropout_add(*tensors, p)
    else:
        out = bias_dropout_add(*tensors, p)
        computed = torch.autograd.grad(out, [tensors[i] for i in chosen], dy)
        for index, grad in zip(chosen, computed):
            assert torch.equal(grad, full_grads[index]), GRAD_NAMES[index]
    assert torch.equal(out.detach(), full_out)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
def test_residual_grad_is_the_incoming_grad(p, device):
    """d residual is dy itself (no copy); without dropout so is dx."""
    x, bias, residual = leaves(*make_inputs((3, 760), torch.bfloat16, device))
    dy = random_tensor((3, 760), torch.bfloat16, device, seed=100)
    dx, _, dresidual = torch.autograd.grad(bias_dropout_add(x, bias, residual, p), [x, bias, residual], dy)
    assert dresidual.data_ptr() == dy.data_ptr()
    assert (dx.data_ptr() == dy.data_ptr()) == (p == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_bias_grad_is_deterministic(dtype, device):
    inputs = make_inputs((64, 760), dtype, device)
    dy = random_tensor((64, 760), dtype, device, seed=100)
    first, second = run_seeded(inputs, dy, 0.3)[1], run_seeded(inputs, dy, 0.3)[1]
    for a, b, name in zip(first, second, GRAD_NAMES):
        assert torch.equal(a, b), f"{name} differs between two identical runs"


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_keep_rate(p, device):
    """A dropped element of the output equals the residual exactly, a kept one is
    residual + x / (1 - p); the kept fraction is within 5 binomial sigmas of 1 - p, and the mask is
    the one ``keep_mask`` reports."""
    x, _, residual = make_inputs((31, 1128), torch.float32, device, bias=False)
    torch.manual_seed(7)
    out = bias_dropout_add(x, None, residual, p)
    kept = out != residual
    n = kept.numel()
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(kept.sum().item() - n * (1 - p)) <= 5 * sigma, f"kept {kept.sum().item()} of {n} at p={p}"
    assert relative_error((out - residual)[kept], (x / (1 - p))[kept]) < 1e-5
    assert torch.equal(kept, regenerate_mask(7, tuple(x.shape), p, device))


def test_dropout_seeding(device):
    """Same torch seed -> the same output and grads, bit for bit; another seed, or the next call
    without reseeding -> another mask."""
    inputs = make_inputs((3, 760), torch.float32, device)
    dy = random_tensor((3, 760), torch.float32, device, seed=100)
    first, again, other = (run_seeded(inputs, dy, 0.5, seed) for seed in (11, 11, 12))
    following = forward_backward(lambda t: bias_dropout_add(*t, 0.5), inputs, dy)
    for a, b in zip([first[0], *first[1]], [again[0], *again[1]]):
        assert torch.equal(a, b)
    for changed, before, what in ((other, first, "another torch seed"), (following, other, "the next call")):
        differing = (changed[0] != before[0]).float().mean().item()
        # Two independent masks at p=0.5 disagree on about half the elements.
        assert differing > 0.25, f"only {differing:.1%} of the outputs changed with {what}"


def _rng_state(device):
    return torch.cuda.get_rng_state() if torch.device(device).type == "cuda" else torch.get_rng_state()


def test_no_dropout_when_p_is_zero_or_not_training(device):
    """``p=0`` and ``training=False`` give exactly the result without dropout, forward and
    backward, and draw no seed (the generator is untouched)."""
    inputs = make_inputs((3, 760), torch.bfloat16, device)
    dy = random_tensor((3, 760), torch.bfloat16, device, seed=100)
    plain = forward_backward(lambda t: bias_dropout_add(*t, 0.0), inputs, dy)
    for p, training in ((0.0, True), (0.0, False), (0.5, False)):
        state = _rng_state(device)
        result = forward_backward(lambda t, p=p, training=training: bias_dropout_add(*t, p, training), inputs, dy)
        assert torch.equal(_rng_state(device), state), f"a seed was drawn with p={p}, training={training}"
        for a, b, name in zip([result[0], *result[1]], [plain[0], *plain[1]], ["out", *GRAD_NAMES]):
            assert torch.equal(a, b), f"{name} differs with p={p}, training={training}"


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def block(x, residual, bias):
    """Every form of the op: bias and dropout, dropout without a bias, neither, a bias without
    dropout, and dropout off by ``training=False``."""
    h = bias_dropout_add(x, bias, residual, 0.25)
    g = bias_dropout_add(h * 0.5, None, x, 0.1)
    k = bias_dropout_add(h * 1.5, None, g, 0.0) + bias_dropout_add(g, bias, h, 0.0)
    return k + bias_dropout_add(x, bias, h, 0.1, training=False)


def _recording_backend(graphs):
    """``aot_eager`` that records the code of the forward and backward graphs AOTAutograd made."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def record(kind):
        def compiler(graph_module, example_inputs):
            graphs[kind].append(graph_module.code)
            return make_boxed_func(graph_module.forward)
        return compiler

    return aot_autograd(fw_compiler=record("forward"), bw_compiler=record("backward"))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no graph breaks, and the same forward and backward as eager (same torch seed:
    the dropout seed is the first draw both ways; inductor is told to use eager's RNG)."""
    import torch._inductor.config

    shape = (5, 72)
    x, bias, residual = make_inputs(shape, torch.float32, device)
    inputs = [x, residual, bias]
    grad_output = random_tensor(shape, torch.float32, device, seed=6)

    def run(fn):
        torch.manual_seed(21)
        leaf_list = leaves(*inputs)
        out = fn(*leaf_list)
        return [out.detach()] + grads(out, leaf_list, grad_output)

    # Inductor fuses the ops around ours (and the reference's ops on the reference path), so the
    # last bits may differ; aot_eager runs eager's kernels.
    with torch._inductor.config.patch(fallback_random=True):
        assert_compiles_like_eager(block, run, ["out", "dx", "dresidual", "dbias"], backend=backend,
                                   exact=backend == "aot_eager", rtol=1e-5, atol=1e-5, explain_args=inputs)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_without_grad(backend, device):
    """The lean path (no input needs a grad, or under no_grad) compiles without graph breaks and
    gives eager's output with the same seed."""
    import torch._dynamo
    import torch._inductor.config

    x, bias, residual = make_inputs((5, 72), torch.float32, device)

    def run(fn):
        torch.manual_seed(21)
        with torch.no_grad():
            return fn(x, residual, bias)

    torch._dynamo.reset()
    with torch._inductor.config.patch(fallback_random=True):
        compiled = run(torch.compile(block, backend=backend, fullgraph=True))
    eager = run(block)
    torch.testing.assert_close(compiled, eager, rtol=1e-5 if backend == "inductor" else 0,
                               atol=1e-5 if backend == "inductor" else 0)
    torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
def test_torch_compile_calls_the_launchers(device):
    """Under compile the forward and backward graphs call the launcher ops (the kernels), not the
    reference: every forward, and a backward wherever dx has dropout or d bias is needed; a seed is
    drawn only for the two calls with p > 0 and training."""
    import torch._dynamo

    graphs = {"forward": [], "backward": []}
    x, bias, residual = leaves(*make_inputs((5, 72), torch.float32, device))
    torch._dynamo.reset()
    out = torch.compile(block, backend=_recording_backend(graphs), fullgraph=True)(x, residual, bias)
    out.backward(torch.ones_like(out))
    torch._dynamo.reset()
    (forward,), (backward,) = graphs["forward"], graphs["backward"]
    if device == "cpu":
        # The interpreter's launchers are custom ops (CUDA's triton_ops decompose into kernels).
        assert forward.count("torch.ops.blockfuse.bias_dropout_add_fwd.default") == 5, forward
        assert backward.count("torch.ops.blockfuse.bias_dropout_add_bwd.default") == 4, backward
    else:
        assert "triton_kernel_wrapper" in forward and "triton_kernel_wrapper" in backward
    assert forward.count("aten.randint") == 2, forward
    assert "aten.rand." not in forward and "aten.rand_like" not in forward, "the reference's dropout ran"


@pytest.mark.usefixtures("requires_triton")
def test_launcher_ops_pass_opcheck(device):
    """The launcher ops' schemas and fake implementations (the launchers themselves) are consistent."""
    from blockfuse.ops.bias_dropout_add import _backward, _forward

    x, bias, residual = make_inputs((3, 72), torch.float32, device)
    seed = draw_seed(device)
    dy = random_tensor((3, 72), torch.float32, device, seed=100)
    tests = ("test_schema", "test_faketensor")
    for args in ((x, bias, residual, seed, 0.3), (x, None, residual, None, 0.0)):
        torch.library.opcheck(_forward.op, args, test_utils=tests)
    for args in ((dy, seed, 0.3, torch.float32, True), (dy, None, 0.0, torch.bfloat16, False),
                 (dy, seed, 0.3, None, True), (dy, None, 0.0, None, True)):
        torch.library.opcheck(_backward.op, args, test_utils=tests)


# ---------------------------------------------------------------------------------------------
# GPU: larger shapes, many backward programs
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 4304), (8192, 1024)], ids=shape_id)
def test_cuda_runs_the_triton_kernels(shape):
    from blockfuse.runtime import implementation

    assert implementation("cuda") == "triton"
    check_against_pytorch(make_inputs(shape, torch.bfloat16, "cuda"), 0.1)


@pytest.mark.gpu
def test_cuda_bias_grad_is_deterministic():
    """Many programs each keep a partial d bias: the fixed-order reduction gives the same bits."""
    inputs = make_inputs((16384, 1024), torch.bfloat16, "cuda")
    dy = random_tensor((16384, 1024), torch.bfloat16, "cuda", seed=100)
    first = run_seeded(inputs, dy, 0.1)[1][1]
    for _ in range(3):
        assert torch.equal(run_seeded(inputs, dy, 0.1)[1][1], first)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _bad_calls():
    x = random_tensor((3, 8), torch.float32)
    b = random_tensor((8,), torch.float32, seed=1)
    r = random_tensor((3, 8), torch.float32, seed=2)
    int_x = torch.randint(1, 5, (3, 8), generator=torch.Generator().manual_seed(0))
    f = bias_dropout_add
    return [
        ("x-not-tensor", lambda: f([[1.0] * 8] * 3, b, r, 0.1), TypeError, "x"),
        ("x-int", lambda: f(int_x, b, int_x, 0.1), TypeError, "x"),
        ("x-scalar", lambda: f(x[0, 0], None, r[0, 0], 0.1), ValueError, "x"),
        ("residual-none", lambda: f(x, b, None, 0.1), TypeError, "residual"),
        ("residual-shape", lambda: f(x, b, r[:2], 0.1), ValueError, "residual"),
        ("residual-broadcast", lambda: f(x, b, r[:1], 0.1), ValueError, "residual"),
        ("residual-dtype", lambda: f(x, b, r.half(), 0.1), TypeError, "residual"),
        ("bias-shape", lambda: f(x, b[:7], r, 0.1), ValueError, "bias"),
        ("bias-2d", lambda: f(x, b.view(1, 8), r, 0.1), ValueError, "bias"),
        ("bias-int", lambda: f(x, int_x[0], r, 0.1), TypeError, "bias"),
        ("p-negative", lambda: f(x, b, r, -0.1), ValueError, "p"),
        ("p-one", lambda: f(x, b, r, 1.0), ValueError, "p"),
        ("p-nan", lambda: f(x, b, r, float("nan")), ValueError, "p"),
        ("p-bool", lambda: f(x, b, r, True), ValueError, "p"),
        ("p-string", lambda: f(x, b, r, "0.1"), ValueError, "p"),
        ("training-not-bool", lambda: f(x, b, r, 0.1, "yes"), TypeError, "training"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    _, call, error, argument = _bad_calls()[case]
    with pytest.raises(error, match=f"^{argument}:"):
        call()


# ---------------------------------------------------------------------------------------------
# The reference beside the kernels, and the CPU fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_reference_in_float64_matches_pytorch(bias, p):
    """``bias_dropout_add_ref`` on float64 inputs (the documented oracle) equals PyTorch's
    composition in float64, forward and backward, with a given mask (shaped or flat)."""
    inputs = make_inputs((3, 760), torch.float64, "cpu", bias=bias)
    mask = torch.rand((3, 760), generator=torch.Generator().manual_seed(0)) >= p if p else None
    dy = random_tensor((3, 760), torch.float64, "cpu", seed=100)
    expected = forward_backward(lambda t: call_pytorch(*t, mask, p), inputs, dy)
    for given in [mask] if mask is None else [mask, mask.flatten()]:
        reference = forward_backward(lambda t, m=given: bias_dropout_add_ref(*t, p, dropout_mask=m), inputs, dy)
        for a, b, name in zip([reference[0], *reference[1]], [expected[0], *expected[1]], ["out", *GRAD_NAMES]):
            if b is None:
                assert a is None, f"{name}: unexpected grad"
                continue
            assert a.dtype == torch.float64, f"{name}: {a.dtype}"
            assert relative_error(a, b) < 1e-12, f"{name}: relative error {relative_error(a, b):.3e}"


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_reference_in_low_precision(dtype):
    """The reference (what CPU tensors use without Triton) is as accurate as PyTorch."""
    inputs = make_inputs((3, 760), dtype, "cpu")
    mask = torch.rand((3, 760), generator=torch.Generator().manual_seed(0)) >= 0.3
    dy = random_tensor((3, 760), dtype, "cpu", seed=100)
    ours = forward_backward(lambda t: bias_dropout_add_ref(*t, 0.3, dropout_mask=mask), inputs, dy)
    baseline = forward_backward(lambda t: call_pytorch(*t, mask, 0.3), inputs, dy)
    oracle = forward_backward(lambda t: call_pytorch(*t, mask, 0.3), inputs, dy.double(), as_dtype=torch.float64)
    assert_all_close_to_reference(
        [ours[0], *ours[1]], [baseline[0], *baseline[1]], [oracle[0], *oracle[1]], ["out", *GRAD_NAMES]
    )


def test_reference_draws_about_one_minus_p():
    """Without a mask the reference draws its own: a kept fraction near 1 - p, reproducible."""
    x, bias, residual = make_inputs((64, 1128), torch.float32, "cpu")
    torch.manual_seed(3)
    out = bias_dropout_add_ref(x, bias, residual, 0.25)
    torch.manual_seed(3)
    assert torch.equal(out, bias_dropout_add_ref(x, bias, residual, 0.25))
    kept = (out != residual).float().mean().item()
    assert abs(kept - 0.75) < 0.02, kept
    assert torch.equal(bias_dropout_add_ref(x, bias, residual, 0.25, training=False),
                       bias_dropout_add_ref(x, bias, residual, 0.0))



FALLBACK_SCRIPT = textwrap.dedent(
    """
    import torch
    from blockfuse.ops.bias_dropout_add import bias_dropout_add, bias_dropout_add_ref
    from blockfuse.runtime import implementation

    assert implementation("cpu") == "reference", implementation("cpu")
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 760, generator=g) * 2 + 0.5).bfloat16()
    r = torch.randn(3, 760, generator=g).bfloat16()
    b = torch.randn(760, generator=g).bfloat16()

    for p, training, bias in ((0.0, True, b), (0.3, True, b), (0.3, False, None)):
        a = [t.clone().requires_grad_() for t in (x, b, r)]
        c = [t.clone().requires_grad_() for t in (x, b, r)]
        torch.manual_seed(5)
        ours = bias_dropout_add(a[0], a[1] if bias is not None else None, a[2], p, training)
        torch.manual_seed(5)
        ref = bias_dropout_add_ref(c[0], c[1] if bias is not None else None, c[2], p, training)
        assert torch.equal(ours, ref), (p, training)
        ours.float().sum().backward()
        ref.float().sum().backward()
        for t, u in zip(a, c):
            assert (t.grad is None and u.grad is None) or torch.equal(t.grad, u.grad), (p, training)
    print("reference fallback ok")
    """
)


def test_cpu_without_interpreter_uses_the_reference():
    assert_runs_without_interpreter(FALLBACK_SCRIPT)
