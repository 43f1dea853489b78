"""Tests of the FP8 linear layer with its activation (``blockfuse/ops/fp8_act.py``): the activation kernels that
fold the tensorwise amax of what they write, ``fp8_linear(x_amax=...)`` that takes it, and the fused MLP that
wires them.

The claim is that nothing changes but the passes: the kernels compute what ``ops/gated.py``'s kernels compute,
in the same order, so their outputs must equal those bit for bit (in Triton's interpreter; on a GPU the
compiler may contract the two kernels' arithmetic differently, so there one bf16 rounding); the amax must be
the maximum of the values as written, exactly; and a layer fed that amax must give what it gives when it takes
the amax itself, bit for bit. The bias gradient is a sum of the same values in another order (fp32 partial
sums): a few fp32 roundings.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from blockfuse.ops import fp8, fp8_act
from blockfuse.ops.activation import ACTIVATIONS
from blockfuse.ops.fp8 import fp8_linear
from blockfuse.ops.fp8_act import fp8_linear_act, fp8_linear_act_ref
from blockfuse.ops.gated import _gated_backward, _gated_forward
from tests.helpers import FreeHooks, as_layout, random_tensor, relative_error

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ON_GPU = torch.cuda.is_available()


def pre_activation(m, width, dtype, device, seed, row_stride=None):
    """A (m, width) pre-activation of an MLP's scale, no zeros; ``row_stride``: rows of a wider buffer."""
    full = random_tensor((m, row_stride or width), dtype, seed=seed, scale=2.0).to(device)
    return full[:, :width]


def assert_same(actual, expected, name, dtype):
    """Bit for bit in the interpreter; on a GPU within one rounding of ``dtype`` (module docstring)."""
    if ON_GPU:
        torch.testing.assert_close(actual, expected, rtol=2 * torch.finfo(dtype).eps, atol=0, msg=name)
    else:
        assert torch.equal(actual, expected), f"{name}: not bit for bit"


def gated_kernel_outputs(pre, dy, activation):
    """What ops/gated.py's kernels write for the same inputs: (y, dpre), both of pre's layout."""
    pointwise, gated = ACTIVATIONS[activation]
    if gated:
        return _gated_forward(pre, None, pointwise), _gated_backward(dy, pre, None, pointwise, True, True)[0]
    from blockfuse.ops.gated import launch_gated_backward, launch_gated_forward

    y = torch.empty_like(pre, memory_format=torch.contiguous_format)
    launch_gated_forward(pre, None, y, pointwise)
    d = torch.empty_like(y)
    launch_gated_backward(dy, pre, None, d, None, pointwise)
    return y, d


# ---------------------------------------------------------------------------------------------
# The kernels
# ---------------------------------------------------------------------------------------------

KERNEL_CASES = [  # (rows, hidden, row stride of pre or None)
    (37, 48, None),
    (5, 200, None),  # masked columns in the last block
    (130, 96, 256),  # rows of a wider buffer; more rows than a program's tiles
    (1, 16, None),
]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation", ["swiglu", "geglu", "geglu_erf", "gelu_tanh", "gelu", "silu", "relu"])
@pytest.mark.parametrize("m, hidden, stride", KERNEL_CASES)
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_kernels_write_the_gated_kernels_values_and_their_amax(activation, m, hidden, stride, dtype, device):
    dtype = DTYPES[dtype]
    gated = ACTIVATIONS[activation].gated
    width = 2 * hidden if gated else hidden
    pre = pre_activation(m, width, dtype, device, seed=m + hidden, row_stride=stride and stride * (2 if gated else 1))
    dy = random_tensor((m, hidden), dtype, seed=7).to(device)
    y, amax = fp8_act._act_forward(pre, activation)
    dpre, dpre_amax, col_sum = fp8_act._act_backward(dy, pre, activation, torch.float32)
    y_gated, dpre_gated = gated_kernel_outputs(pre, dy, activation)
    assert y.shape == (m, hidden) and dpre.shape == (m, width) and y.dtype == dpre.dtype == dtype
    assert_same(y, y_gated, "forward", dtype)
    assert_same(dpre, dpre_gated, "backward", dtype)
    # The amaxes of the values as written, exactly; the column sums of them, in fp32.
    assert amax.shape == dpre_amax.shape == (1,) and amax.dtype == dpre_amax.dtype == torch.float32
    assert amax.item() == y.float().abs().max().item()
    assert dpre_amax.item() == dpre.float().abs().max().item()
    torch.testing.assert_close(col_sum, dpre.double().sum(0).float(), rtol=1e-6, atol=1e-6 * dpre.abs().max().item())
    # The references: the same numbers up to one rounding of the output.
    y_ref, amax_ref = fp8_act.act_forward_ref(pre, activation)
    dpre_ref, _, _ = fp8_act.act_backward_ref(dy, pre, activation, None)
    # fp32: the kernels' activation math (a tanh from exp2, say) errs by a few 1e-6 (the gated ops' tests bound
    # it); absolute, as a derivative near its zero cancels terms of the row's scale.
    tol = 2 * torch.finfo(dtype).eps if dtype != torch.float32 else 1e-5
    torch.testing.assert_close(y, y_ref, rtol=tol, atol=tol * y_ref.abs().max().item())
    torch.testing.assert_close(dpre, dpre_ref, rtol=tol, atol=tol * dpre_ref.abs().max().item())
    assert abs(amax_ref.item() - amax.item()) <= tol * amax.item()


@pytest.mark.usefixtures("requires_triton")
def test_kernels_on_empty_inputs(device):
    pre = torch.empty((0, 64), device=device, dtype=torch.bfloat16)
    y, amax = fp8_act._act_forward(pre, "swiglu")
    dpre, dpre_amax, col_sum = fp8_act._act_backward(torch.empty((0, 32), device=device, dtype=torch.bfloat16), pre,
                                                      "swiglu", torch.bfloat16)
    assert y.shape == (0, 32) and dpre.shape == (0, 64) and amax.item() == dpre_amax.item() == 0.0
    assert col_sum.shape == (64,) and not col_sum.any()


def test_tiles_follow_the_rule():
    """Tiles from the width: at most an eighth of a row's lanes masked, a thread holding at most
    lanes_per_thread input values, rows a program capped (the interpreter's table)."""
    cpu = torch.device("cpu")
    tiles = fp8_act.INTERPRETED_TILES
    for n in (16, 48, 760, 1152, 2560, 4096, 4304, 5120, 14336):
        for inputs in (1, 2, 3):
            block_m, block_n, iters, warps = fp8_act.act_tile(8192, n, inputs, cpu)
            assert block_n & (block_n - 1) == 0 and block_n <= tiles.max_block_n
            assert block_n <= tiles.min_block_n or (-(-n // block_n) * block_n - n) * 8 <= n
            lanes = max(1, block_n // (32 * warps))
            assert block_m * lanes * inputs <= tiles.lanes_per_thread
            assert block_m * iters <= tiles.max_rows_per_program
    assert fp8_act.act_tile(3, 4096, 1, cpu)[0] <= 4  # no taller than the rows


@pytest.mark.usefixtures("requires_triton")
def test_tiles_follow_the_table(monkeypatch, device):
    """The launchers read the table of the device's kernels (``TILES`` compiled, ``INTERPRETED_TILES`` in the
    interpreter) at each call: a table swapped in (benchmarks/fp8_delayed_tiles.py's) is the one launched."""
    name = "TILES" if device == "cuda" else "INTERPRETED_TILES"
    launched = []
    kernel = fp8_act._bwd_delayed_kernel

    def spy(grid, *args, **constexprs):
        launched.append((constexprs["BLOCK_M"], constexprs["BLOCK_N"], constexprs["num_warps"]))
        return kernel(grid, *args, **constexprs)

    monkeypatch.setattr(fp8_act, "_bwd_delayed_kernel", spy)
    monkeypatch.setattr(fp8_act, name, dataclasses.replace(getattr(fp8_act, name), max_block_n=64,
                                                           bwd_delayed=(16, 32, 2)))
    assert fp8_act.act_tile(8192, 4096, 1, torch.device(device))[1] == 64
    pre = pre_activation(21, 80, torch.bfloat16, device, seed=1)
    dy = pre_activation(21, 40, torch.bfloat16, device, seed=2)
    fp8_act._act_backward_delayed(dy, pre, "swiglu", *fp8.Float8Scaling.new(4, device), True, True, 16, torch.float32)
    assert launched == [(16, 32, 2)]


# ---------------------------------------------------------------------------------------------
# fp8_linear with a known amax
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_a_given_amax_changes_nothing(dtype, device):
    dtype = DTYPES[dtype]
    x = random_tensor((37, 64), dtype, seed=1).to(device)
    weight = random_tensor((48, 64), dtype, seed=2, scale=0.125).to(device)
    bias = random_tensor((48,), dtype, seed=3, scale=0.1).to(device)
    dy = random_tensor((37, 48), dtype, seed=4).to(device)
    results = []
    for amax in (None, x.float().abs().amax().reshape(1)):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        y = fp8_linear(*leaves, x_amax=amax)
        y.backward(dy)
        results.append([y.detach()] + [t.grad for t in leaves])
    for name, with_amax, without in zip(("y", "dx", "dweight", "dbias"), results[1], results[0]):
        assert torch.equal(with_amax, without), name


def test_x_amax_bad_arguments(device):
    x = random_tensor((8, 32), torch.float32, seed=5).to(device)
    weight = random_tensor((16, 32), torch.float32, seed=6).to(device)
    amax = x.abs().amax().reshape(1)
    q, scale = fp8.quantize(x)
    calls = [
        (lambda: fp8_linear(x, weight, x_amax=amax, recipe="rowwise"), ValueError,
         "x_amax: only for recipe 'tensorwise'"),
        (lambda: fp8_linear(q, weight, x_scale=scale, x_amax=amax), ValueError, "x_amax: only for"),
        (lambda: fp8_linear(x, weight, x_amax=amax.double()), TypeError, "x_amax: expected a float32 tensor"),
        (lambda: fp8_linear(x, weight, x_amax=amax.reshape(())), ValueError, "x_amax: expected shape (1,)"),
        (lambda: fp8_linear(x, weight, x_amax=1.0), TypeError, "x_amax: expected a float32 tensor, got float"),
    ]
    for call, error, message in calls:
        with pytest.raises(error) as raised:
            call()
        assert message in str(raised.value), (message, str(raised.value))


# ---------------------------------------------------------------------------------------------
# fp8_linear_act
# ---------------------------------------------------------------------------------------------


def layer(shape, hidden, activation, dtype, device, seed=0, bias=True):
    k = shape[-1]
    rows = 2 * hidden if ACTIVATIONS[activation].gated else hidden
    x = random_tensor(shape, dtype, seed=seed).to(device)
    weight = random_tensor((rows, k), dtype, seed=seed + 1, scale=k**-0.5).to(device)
    b = random_tensor((rows,), dtype, seed=seed + 2, scale=0.1).to(device) if bias else None
    return x, weight, b


class _PointwiseKernels(torch.autograd.Function):
    """A pointwise activation on ops/gated.py's kernels (the MLP ops run them so), with autograd."""

    @staticmethod
    def forward(ctx, pre, pointwise):
        from blockfuse.ops.gated import launch_gated_forward

        pre2 = pre.reshape(-1, pre.shape[-1])
        y = torch.empty_like(pre2)
        launch_gated_forward(pre2, None, y, pointwise)
        ctx.save_for_backward(pre2)
        ctx.pointwise, ctx.shape = pointwise, pre.shape
        return y.view(pre.shape)

    @staticmethod
    def backward(ctx, dy):
        from blockfuse.ops.gated import launch_gated_backward

        (pre2,) = ctx.saved_tensors
        d = torch.empty_like(pre2)
        launch_gated_backward(dy.reshape(pre2.shape).contiguous(), pre2, None, d, None, ctx.pointwise)
        return d.view(ctx.shape), None


def composed(x, weight, bias, activation):
    """The two-pass path: ``fp8_linear``'s own casts (an amax pass each) around ops/gated.py's kernels."""
    pre = fp8_linear(x, weight, bias)
    pointwise, gated = ACTIVATIONS[activation]
    if gated:
        from blockfuse.ops.gated import _run_gated

        return _run_gated(pre, None, pointwise)
    return _PointwiseKernels.apply(pre, pointwise)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation", ["swiglu", "geglu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("shape, hidden, layout", [((37, 64), 48, "contiguous"), ((2, 9, 32), 16, "strided")])
def test_forward_and_backward_are_the_two_pass_paths(activation, shape, hidden, layout, device):
    """x contiguous, or strided (NaN between its elements: a read of the gaps would show)."""
    dtype = torch.bfloat16
    x, weight, bias = layer(shape, hidden, activation, dtype, device, seed=10)
    dy = random_tensor((*shape[:-1], hidden), dtype, seed=13).to(device)
    runs = []
    for fn in (lambda *a: fp8_linear_act(*a, activation)[0], lambda *a: composed(*a, activation)):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        strided = as_layout(leaves[0], layout)  # (a copy into the layout: the gradient flows back through it)
        assert strided.is_contiguous() == (layout == "contiguous")
        y = fn(strided, *leaves[1:])
        y.backward(dy)
        runs.append([y.detach()] + [t.grad for t in leaves])
    (y, dx, dw, db), (y0, dx0, dw0, db0) = runs
    assert y.shape == (*shape[:-1], hidden) and y.dtype == dtype
    # The same kernels' arithmetic: the same values, the same amaxes, the same casts.
    for name, a, b in (("y", y, y0), ("dx", dx, dx0), ("dweight", dw, dw0)):
        assert_same(a, b, name, dtype)
    torch.testing.assert_close(db, db0, rtol=2**-7, atol=1e-3)  # fp32 sums in another order, rounded to bf16


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation", ["swiglu", "gelu_tanh"])
def test_amax_is_the_outputs_and_feeds_the_next_layer(activation, device):
    x, weight, bias = layer((33, 64), 48, activation, torch.bfloat16, device, seed=20)
    y, amax = fp8_linear_act(x, weight, bias, activation)
    assert amax.item() == y.float().abs().max().item() and not amax.requires_grad
    y_ref, amax_ref = fp8_linear_act_ref(x, weight, bias, activation)
    assert relative_error(y, y_ref) < 2**-6  # the references' GEMM (fp32 of the same casts) and one rounding
    w2 = random_tensor((32, 48), torch.bfloat16, seed=23, scale=48**-0.5).to(device)
    assert torch.equal(fp8_linear(y, w2, x_amax=amax), fp8_linear(y, w2))


@pytest.mark.usefixtures("requires_triton")
def test_within_fp8_error_of_float64(device):
    """Against the float64 layer and activation: the forward within e4m3's error, the gradients within the
    tensorwise recipe's (bounds of tests/ops/test_fp8.py)."""
    from tests.ops.test_fp8 import FORWARD_BOUND, GRADIENT_BOUND

    x, weight, bias = layer((96, 128), 64, "swiglu", torch.float32, device, seed=30)
    dy = random_tensor((96, 64), torch.float32, seed=33).to(device)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    y, _ = fp8_linear_act(*leaves, "swiglu")
    y.backward(dy)
    exact = [t.double().requires_grad_() for t in (x, weight, bias)]
    gate, up = F.linear(*exact).chunk(2, dim=-1)
    y64 = F.silu(gate) * up
    y64.backward(dy.double())
    assert relative_error(y, y64) < FORWARD_BOUND * 2  # two e4m3 operands, and SiLU(gate) * up of both halves
    for leaf, expected, name in zip(leaves, exact, ("dx", "dweight", "dbias")):
        assert relative_error(leaf.grad, expected.grad) < GRADIENT_BOUND["tensorwise"] * 2, name


@pytest.mark.usefixtures("requires_triton")
def test_only_the_gradients_asked_for_and_no_grad(device):
    x, weight, bias = layer((40, 32), 16, "swiglu", torch.float32, device, seed=40)
    w = weight.clone().requires_grad_()
    y, _ = fp8_linear_act(x, w, bias, "swiglu")
    y.sum().backward()
    assert x.grad is None and bias.grad is None and w.grad is not None
    with torch.no_grad():
        y2, amax = fp8_linear_act(x, w, bias, "swiglu")
    assert y2.grad_fn is None and torch.equal(y2, y.detach()) and amax.item() == y2.abs().max().item()


def test_sizes_that_are_not_multiples_of_16_run_a_plain_linear(device):
    x, weight, bias = layer((7, 40), 12, "gelu_tanh", torch.float32, device, seed=50)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    y, amax = fp8_linear_act(*leaves, "gelu_tanh")
    torch.testing.assert_close(y, F.gelu(F.linear(x, weight, bias), approximate="tanh"))
    assert amax.item() == y.detach().abs().max().item()
    y.sum().backward()
    assert all(t.grad is not None for t in leaves)


def test_the_reference_runs_where_the_kernels_do_not(device):
    """float64 runs no kernel (``runtime.use_triton``): the activation's reference, with its amax."""
    x, weight, bias = layer((24, 32), 16, "geglu", torch.float32, device, seed=55)
    pre = F.linear(x, weight, bias).double()
    y, amax = fp8_act.act_forward(pre, "geglu", fp8_act.use_triton(pre))
    assert y.dtype == torch.float64 and amax.item() == y.abs().max().float().item()


def _act_node(y):
    """The fp8_linear_act Function's node behind ``y`` (through the output's view)."""
    node = y.grad_fn
    while "Fp8LinearAct" not in type(node).__name__:
        node = node.next_functions[0][0]
    return node


@pytest.mark.usefixtures("requires_triton")
def test_backward_writes_the_gradient_over_the_pre_activation(device, monkeypatch):
    """Eagerly the pre-activation is kept on the node, not saved, and the backward writes its gradient over it
    (the in-place launcher) and drops it before the GEMMs (module docstring: a second M x 2 hidden buffer fewer
    through them): the gradients are those of the traced choice (a fresh gradient, the pre-activation saved),
    bit for bit. A second backward through the graph raises a clear error instead of reading the gradient as
    the pre-activation."""
    calls = []
    for name in ("_act_backward", "_act_backward_"):
        monkeypatch.setattr(fp8_act, name, lambda *a, _o=getattr(fp8_act, name), _n=name: calls.append(_n) or _o(*a))
    x, weight, bias = layer((37, 64), 48, "swiglu", torch.bfloat16, device, seed=80)
    dy = random_tensor((37, 48), torch.bfloat16, seed=83).to(device)

    def run():
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        y, _ = fp8_linear_act(*leaves, "swiglu")
        node = _act_node(y)
        kept = node.pre is not None, len(node.saved_tensors)
        y.backward(dy)
        assert node.pre is None
        return kept, [t.grad for t in leaves]

    kept, in_place = run()
    # x^T, its scale, the weight's transposed cast and scale (None: the backward makes them), the weight
    assert calls == ["_act_backward_"] and kept == (True, 5)
    calls.clear()
    monkeypatch.setattr(fp8_act, "tracing", lambda: True)
    kept, fresh = run()
    assert calls == ["_act_backward"] and kept == (False, 6)
    for name, a, b in zip(("dx", "dweight", "dbias"), in_place, fresh):
        assert torch.equal(a, b), name
    monkeypatch.undo()
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    y, _ = fp8_linear_act(*leaves, "swiglu")
    y.backward(dy, retain_graph=True)
    with pytest.raises(RuntimeError, match="second time .retain_graph=True. is not supported"):
        y.backward(dy)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_recompute_keeps_no_pre_activation_and_changes_nothing(bias, device):
    """``recompute=True``: the node keeps x's e4m3 cast (and the parameters) and no pre-activation, the backward
    runs the forward GEMM again with the same operands: output and gradients equal to the kept path's, bit for
    bit; a second backward through the graph works (nothing was overwritten that it needs)."""
    x, weight, b = layer((37, 64), 48, "swiglu", torch.bfloat16, device, seed=100, bias=bias)
    dy = random_tensor((37, 48), torch.bfloat16, seed=103).to(device)
    runs = []
    for recompute in (False, True):
        leaves = [t.clone().requires_grad_() if t is not None else None for t in (x, weight, b)]
        y, amax = fp8_linear_act(*leaves, "swiglu", recompute=recompute)
        node = _act_node(y)
        kept = [(tuple(t.shape), t.dtype) for t in node.saved_tensors if t is not None]
        y.backward(dy, retain_graph=recompute)
        runs.append([y.detach(), amax] + [t.grad for t in leaves if t is not None])
    assert (37, 96) not in [shape for shape, _ in kept] and node.pre is None  # no (M, 2 hidden) pre-activation
    assert ((37, 64), torch.float8_e4m3fn) in kept  # x's cast, the forward GEMM's operand
    for name, a, c in zip(("y", "amax", "dx", "dweight", "dbias"), runs[1], runs[0]):
        assert torch.equal(a, c), name
    y.backward(dy)  # retain_graph: the second backward recomputes again
    with pytest.raises(TypeError, match="recompute: expected a bool"):
        fp8_linear_act(x, weight, b, "swiglu", recompute="yes")


@pytest.mark.usefixtures("requires_triton")
def test_activation_checkpointing_sees_the_pre_activation(device):
    """Under torch.utils.checkpoint (saved-tensor hooks of its own) the pre-activation is saved, so checkpointing
    drops it like every saved tensor; under blockfuse's own recompute hooks (models/recompute.py, which keep what
    they do not recompute) it stays on the node. Gradients equal to the plain call's either way."""
    from torch.utils.checkpoint import checkpoint

    from blockfuse.models.recompute import _RecomputedOutput

    x, weight, bias = layer((37, 64), 48, "swiglu", torch.bfloat16, device, seed=90)
    dy = random_tensor((37, 48), torch.bfloat16, seed=93).to(device)
    nodes = []

    def call(*leaves):
        y, _ = fp8_linear_act(*leaves, "swiglu")
        nodes.append(_act_node(y))
        return y

    runs = []
    for wrap in ("plain", "checkpoint", "blockfuse"):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        nodes.clear()
        if wrap == "checkpoint":
            y = checkpoint(call, *leaves, use_reentrant=False)
        elif wrap == "blockfuse":
            # NOTE: the hooks' "y" held while they run: freed at once, its 4 bytes went to the next 4-byte tensor
            # on CUDA (a 0-d scale), which the hooks then took for y and recomputed (with None: a failure).
            held = torch.empty(1, device=device)
            with _RecomputedOutput(held, lambda: None):
                y = call(*leaves)
        else:
            y = call(*leaves)
        on_ctx = nodes[0].pre is not None
        assert on_ctx == (wrap != "checkpoint"), wrap
        y.backward(dy)
        runs.append([t.grad for t in leaves])
    for run in runs[1:]:
        for name, a, b in zip(("dx", "dweight", "dbias"), run, runs[0]):
            assert torch.equal(a, b), name


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recompute", [False, True], ids=["kept", "recomputed"])
def test_an_input_kept_for_free_is_kept_not_its_cast(recompute, device):
    """Under hooks that keep x for free (a fused block's recomputed norm output) the layer keeps x and no e4m3 cast
    of it (with ``recompute``, not even the forward GEMM's operand: both casts are made again from x): output and
    gradients equal to the plain call's, bit for bit."""
    x, weight, bias = layer((37, 64), 48, "swiglu", torch.bfloat16, device, seed=120)
    dy = random_tensor((37, 48), torch.bfloat16, seed=123).to(device)
    runs = []
    for free in (False, True):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        hooks = FreeHooks()
        with hooks if free else contextlib.nullcontext():
            y, amax = fp8_linear_act(*leaves, "swiglu", recompute=recompute)
        y.backward(dy)
        runs.append([y.detach(), amax] + [t.grad for t in leaves])
    assert ((37, 64), torch.bfloat16) in hooks.packed
    assert torch.float8_e4m3fn not in [dtype for _, dtype in hooks.packed], hooks.packed
    for name, a, b in zip(("y", "amax", "dx", "dweight", "dbias"), runs[1], runs[0]):
        assert torch.equal(a, b), name


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation, shape, hidden, whole_life", [
    ("swiglu", (3, 13, 64), 48, True), ("gelu_tanh", (37, 64), 80, True), ("geglu", (16, 32), 24, True),
    # real models' FFN widths (SigLIP-2's 4304, Llama-3-8B's 14336), few rows: the cast itself (NOTE below)
    ("gelu_tanh", (21, 48), 4304, False), ("swiglu", (5, 32), 14336, False)])
def test_cast_again_is_the_outputs_cast(activation, shape, hidden, whole_life, device):
    """``cast_again(y, amax)()``: y^T's tensorwise e4m3 cast and scale, padded to 16 rows, from the pre-activation
    the node keeps (the activation computed again and cast in one pass): what casting y itself gives, bit for bit in
    the interpreter (on a GPU the two kernels' arithmetic may contract differently: within one FP8 step of the
    values); after the layer's backward, a clear error; None for a tensor that is not such an output, and for a
    layer that keeps no pre-activation (``recompute=True``).
    NOTE: the last two (``whole_life``) at the narrow widths only: what the node keeps and when it lets go of it
    does not depend on the width (ops/fp8_act.py, _Fp8LinearActFunction), and at 14336 the backward and the second
    forward were 8 of the test's 14 s in the interpreter."""
    x, weight, bias = layer(shape, hidden, activation, torch.bfloat16, device, seed=110)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    y, amax = fp8_linear_act(*leaves, activation)
    again = fp8_act.cast_again(y, amax)
    yt, scale = again()
    want_t, want_s = fp8._quantize_2d(y.detach().reshape(-1, hidden), torch.float8_e4m3fn, False, False, True,
                                      fp8.GEMM_MULTIPLE, None, amax)[2:]
    assert yt.shape == want_t.shape and yt.dtype == torch.float8_e4m3fn and torch.equal(scale, want_s)
    if ON_GPU:
        torch.testing.assert_close(yt.float(), want_t.float(), rtol=0.07, atol=0, msg="y^T")
    else:
        assert torch.equal(yt.view(torch.uint8), want_t.view(torch.uint8))
    assert fp8_act.cast_again(y * 2, amax) is None and fp8_act.cast_again(x, amax) is None
    if not whole_life:
        return
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after the layer's backward"):
        again()
    y, amax = fp8_linear_act(*[t.clone().requires_grad_() for t in (x, weight, bias)], activation, recompute=True)
    assert fp8_act.cast_again(y, amax) is None


@pytest.mark.usefixtures("requires_triton")
def test_a_layer_given_x_cast_keeps_nothing_of_x(device):
    """``fp8_linear(x, w, x_amax=amax, x_cast=cast_again(x, amax))`` for x an activation's output: the layer keeps
    no tensor of x's size, calls the function once in its backward, and gives what the plain call gives, bit for bit;
    a second backward through the graph raises a clear error; x_cast without x_amax is refused."""
    x, weight, bias = layer((37, 64), 48, "swiglu", torch.bfloat16, device, seed=130)
    w2 = random_tensor((32, 48), torch.bfloat16, seed=133, scale=0.1).to(device)
    dy = random_tensor((37, 32), torch.bfloat16, seed=134).to(device)
    runs = []
    for given in (False, True):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias, w2)]
        act, amax = fp8_linear_act(*leaves[:3], "swiglu")
        calls = []
        cast = fp8_act.cast_again(act, amax)
        out = fp8_linear(act, leaves[3], x_amax=amax,
                         x_cast=(lambda: calls.append(1) or cast()) if given else None)
        node = out.grad_fn
        while "Fp8LinearFunction" not in type(node).__name__:
            node = node.next_functions[0][0]
        shapes = [tuple(t.shape) for t in node.saved_tensors if t is not None]
        out.backward(dy, retain_graph=given)
        runs.append([out.detach()] + [t.grad for t in leaves])
    assert calls == [1] and (37, 48) not in shapes and (48, 48) not in shapes, shapes
    for name, a, b in zip(("out", "dx", "dweight", "dbias", "dw2"), runs[1], runs[0]):
        assert torch.equal(a, b), name
    with pytest.raises(RuntimeError, match="second time"):
        out.backward(dy)
    with pytest.raises(ValueError, match="x_cast"):
        fp8_linear(act.detach(), w2, x_cast=cast)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recompute", [False, True], ids=["kept", "recomputed"])
def test_torch_compile_fullgraph(recompute, device):
    from tests.helpers import assert_compiles_like_eager

    x, weight, bias = layer((37, 64), 48, "swiglu", torch.float32, device, seed=60)
    w2 = random_tensor((32, 48), torch.float32, seed=63, scale=0.1).to(device)
    grad_output = random_tensor((37, 32), torch.float32, seed=64).to(device)

    def mlp(x, weight, bias):
        act, amax = fp8_linear_act(x * 2.0, weight, bias, "swiglu", recompute=recompute)
        return fp8_linear(act, w2, x_amax=amax)

    def run(fn):
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        out = fn(*leaves)
        out.backward(grad_output)
        return [out.detach()] + [t.grad for t in leaves]

    # Bit for bit but the bias gradient (traced at this size its sum may take the reference's order).
    assert_compiles_like_eager(mlp, run, ["out", "dx", "dweight", "dbias"], backend="aot_eager",
                               rtol=[0, 0, 0, 1e-5], atol=[0, 0, 0, 1e-5], explain_args=[x, weight, bias])


def test_bad_arguments_raise_clear_errors(device):
    x, weight, bias = layer((7, 32), 8, "swiglu", torch.float32, device, seed=70)  # weight (16, 32)
    q, scale = fp8.quantize(x)
    calls = [
        (lambda: fp8_linear_act(x, weight, bias, "swish"), ValueError, "activation: expected one of"),
        (lambda: fp8_linear_act(x, weight[:15], None, "swiglu"), ValueError, "an even number of them; got 15"),
        (lambda: fp8_linear_act(q, weight, bias, "swiglu"), TypeError, "x: expected a float32"),
        (lambda: fp8_linear_act(x, weight.t(), bias, "swiglu"), ValueError, "weight: expected shape"),
        (lambda: fp8_linear_act(x.double(), weight, bias, "swiglu"), TypeError, "x: expected"),
    ]
    for call, error, message in calls:
        with pytest.raises(error) as raised:
            call()
        assert message in str(raised.value), (message, str(raised.value))
