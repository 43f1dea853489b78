"""Delayed scaling (``ops/fp8.py``): the one-pass tensorwise cast whose scale comes from an amax history
(``quantize(..., fp8_scaling=)``, ``blockfuse::fp8_quantize_delayed``), and ``fp8_linear(recipe="delayed")`` /
``Float8Linear(recipe="delayed")`` on it.

The casts are exact arithmetic and are checked bit for bit against the reference, call after call (the history
moves with each), with the semantics spelled out once by hand: the first call's scale is 1.0, a later call's
``max(history) / fp8_max``, values past that range saturate, and each call's amax enters the history. The layer
is checked against float64 with the bounds of ``tests/ops/test_fp8.py`` (its module docstring): a delayed scale is
a tensorwise scale from another tensor, so only values past its range (saturated) could err more, and the data
here stay within the history's range after the first call.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import blockfuse.fp8 as bf_fp8
from blockfuse.ops import fp8
from blockfuse.ops.fp8 import FP8_MAX, Float8Scaling, fp8_linear, quantize, quantize_ref
from tests.helpers import random_tensor, relative_error
from tests.ops.test_fp8 import FORWARD_BOUND, GRADIENT_BOUND, bits, operands, wide_range

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}
MAGNITUDES = (1.0, 3.0, 0.25, 40.0)  # one call each: the history grows, holds, and is outgrown


def states(device, history_len=4):
    """Two fresh states: the kernels' and the reference's."""
    return Float8Scaling.new(history_len, device), Float8Scaling.new(history_len, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("shape, layout", [((37, 72), "contiguous"), ((1, 1), "contiguous"),
                                           ((130, 300), "contiguous"), ((45, 40), "transposed")])
def test_the_delayed_cast_is_the_references_call_after_call(fmt, dtype, shape, layout, device):
    """Both layouts, their scales, the column sums and the history, after each of several calls."""
    mine, theirs = states(device)
    for call, magnitude in enumerate(MAGNITUDES):
        x = wide_range(shape, torch.float32, seed=call, layout=layout) * magnitude
        x = x.clamp(-6e4, 6e4).to(dtype).to(device)  # finite in fp16
        got = fp8._quantize_2d_sum(x, FORMATS[fmt], False, True, True, 16, sum_dtype=torch.float32, scaling=mine)
        want = fp8._quantize_delayed_ref(x, FORMATS[fmt], True, True, 16, *theirs, torch.float32)
        for name, a, b in zip(("y", "y_scale", "yt", "yt_scale"), got[:4], want[:4]):
            assert torch.equal(bits(a), bits(b)) if a.dtype in FP8_MAX else torch.equal(a, b), (call, name)
        # fp32 sums of at most 300 terms in another order: within 1e-5 of the magnitudes summed
        bound = 1e-5 * x.double().abs().sum(0) + 1e-30
        assert ((got[4].double() - x.double().sum(0)).abs() <= bound).all(), call
        assert torch.equal(mine.history, theirs.history), call
        assert torch.equal(mine.amax, torch.zeros_like(mine.amax)), call
        assert mine.history[0] == x.float().abs().max(), call  # this call's amax, newest first


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_first_scale_is_one_then_the_historys_and_larger_values_saturate(fmt, device):
    dtype, fp8_max = FORMATS[fmt], FP8_MAX[FORMATS[fmt]]
    state = Float8Scaling.new(3, device)
    x = random_tensor((20, 48), seed=5).to(device)
    q, scale = quantize(x, dtype, fp8_scaling=state)
    assert scale.item() == 1.0 and torch.equal(bits(q), bits(x.clamp(-fp8_max, fp8_max).to(dtype)))
    first = x.abs().max()
    assert state.history.tolist() == [first.item(), 0.0, 0.0]
    # A tensor four times larger: scaled by the first call's amax, so a quarter of its range saturates.
    big = x * 4
    q, scale = quantize(big, dtype, fp8_scaling=state)
    assert scale == torch.tensor(first.item()) / torch.tensor(fp8_max)
    values = q.float() * scale
    inside = big.abs() <= first
    assert (q.float().abs()[~inside] == fp8_max).all() and (~inside).any()
    assert relative_error(values[inside], big[inside]) < 0.06
    assert state.history.tolist() == [big.abs().max().item(), first.item(), 0.0]
    # The history's maximum rules until it leaves the history: two calls later the small x is scaled by 4 first
    for _ in range(2):
        _, scale = quantize(x, dtype, fp8_scaling=state)
    assert scale == torch.tensor((4 * first).item()) / torch.tensor(fp8_max)


@pytest.mark.usefixtures("requires_triton")
def test_quantize_with_fp8_scaling_is_quantize_refs(device):
    mine, theirs = states(device)
    for call, magnitude in enumerate(MAGNITUDES):
        x = (random_tensor((3, 5, 24), torch.bfloat16, seed=20 + call) * magnitude).to(device)
        q, scale = quantize(x, E4M3, fp8_scaling=mine)
        q_ref, scale_ref = quantize_ref(x, E4M3, fp8_scaling=theirs)
        assert q.shape == x.shape and scale.shape == () and torch.equal(scale, scale_ref)
        assert torch.equal(bits(q), bits(q_ref)) and torch.equal(mine.history, theirs.history)


@pytest.mark.usefixtures("requires_triton")
def test_the_delayed_launcher_passes_opcheck(device):
    """Schema (the history and amax written in place), fake implementation and AOT dispatch."""
    if device != "cpu":
        pytest.skip("the interpreter's custom op")
    x = wide_range((19, 48), torch.bfloat16, seed=2)
    history = torch.tensor([3.0, 0.5, 0.0])
    for rows, transposed, sum_dtype in ((True, False, None), (True, True, torch.bfloat16), (False, True, None)):
        torch.library.opcheck(torch.ops.blockfuse.fp8_quantize_delayed.default,
                              (x, E5M2, rows, transposed, 16, history.clone(), torch.zeros(1), sum_dtype),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


# ---------------------------------------------------------------------------------------------
# fp8_linear(recipe="delayed") and Float8Linear
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_delayed_layer_trains_within_fp8_error_and_records_its_amaxes(dtype, device):
    """Three steps of one layer: output and gradients against float64 within tensorwise FP8's bounds, and the
    histories holding x's and the output gradient's amaxes, newest first."""
    x, weight, bias = operands((3, 13, 64), 48, dtype, device, seed=30)
    layer = bf_fp8.Float8Linear(64, 48, recipe="delayed", device=device, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    amaxes = {"x": [], "grad": []}
    for step in range(3):
        leaf = (x * (1.0, 0.9, 0.8)[step]).detach().requires_grad_()  # within the first call's range
        layer.zero_grad()
        out = layer(leaf)
        dy = random_tensor(out.shape, dtype, seed=40 + step).to(device)
        out.backward(dy)
        exact = [t.detach().double().requires_grad_() for t in (leaf, layer.weight, layer.bias)]
        out64 = F.linear(*exact)
        out64.backward(dy.double())
        assert relative_error(out, out64) < FORWARD_BOUND, step
        for got, want in zip((leaf.grad, layer.weight.grad, layer.bias.grad), exact):
            assert relative_error(got, want.grad) < GRADIENT_BOUND["tensorwise"], step
        amaxes["x"].insert(0, leaf.float().abs().max().item())
        amaxes["grad"].insert(0, dy.float().abs().max().item())
        x_state, grad_state = layer.fp8_scaling()
        assert x_state.history[:step + 1].tolist() == amaxes["x"], step
        assert grad_state.history[:step + 1].tolist() == amaxes["grad"], step


def test_a_delayed_layers_state_dict_is_a_linears(device):
    linear = nn.Linear(32, 16, device=device)
    layer = bf_fp8.Float8Linear.from_linear(copy.deepcopy(linear), "delayed", history_len=5)
    assert layer.weight.device == layer.fp8_x_history.device and layer.fp8_grad_history.shape == (5,)
    assert set(layer.state_dict()) == set(linear.state_dict()) == {"weight", "bias"}
    layer.load_state_dict(linear.state_dict())
    assert bf_fp8.convert(copy.deepcopy(linear), recipe="delayed").recipe == "delayed"
    assert "recipe='delayed'" in repr(layer)


def test_a_delayed_layers_states_are_kept_while_its_buffers_are_and_checked_when_they_change(device):
    """``fp8_scaling()`` hands out one pair for as long as the buffers are the same tensors (checked when made); a
    buffer replaced gives a new pair, a wrong one a clear error; an input on another device than the states is
    refused by each call."""
    layer = bf_fp8.Float8Linear(32, 16, recipe="delayed", device=device)
    first = layer.fp8_scaling()
    assert layer.fp8_scaling() is first and first[0].history is layer.fp8_x_history
    layer.fp8_grad_history = torch.zeros(6, device=device)
    second = layer.fp8_scaling()
    assert second is not first and second[1].history is layer.fp8_grad_history and second[0] == first[0]
    layer.fp8_x_history = torch.zeros(6, dtype=torch.bfloat16, device=device)
    with pytest.raises(TypeError, match=r"fp8_scaling\.history: expected a float32 tensor"):
        layer.fp8_scaling()
    layer.fp8_x_history = torch.zeros(6, device=device)
    x = random_tensor((5, 32), torch.float32, "cpu", seed=1).to("meta")
    with pytest.raises(ValueError, match="fp8_scaling.history: expected a tensor on meta"):
        fp8.check_fp8_output("tensorwise", layer.fp8_scaling()[0], x)


@pytest.mark.parametrize("cast", ["bfloat16", "half", "to"])
def test_a_delayed_model_cast_to_another_dtype_keeps_its_histories_in_fp32(cast, device):
    """``blockfuse.fp8.convert(model, recipe="delayed").bfloat16()`` (the usual order) must not turn the amax
    histories into bf16: the casts refuse them (they were a TypeError on the first call), and a bf16 round trip
    would coarsen every scale. The histories stay fp32 and bit for bit what they were; the parameters take the
    dtype; the model then trains."""
    model = bf_fp8.convert(nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.Linear(48, 16)).to(device), recipe="delayed")
    x = random_tensor((9, 32), torch.float32, device, seed=111)
    model(x).sum().backward()  # amaxes in the histories (values a bf16 round trip would change)
    before = {name: buffer.clone() for name, buffer in model.named_buffers()}
    assert before and all(b.dtype == torch.float32 for b in before.values())
    dtype = {"bfloat16": torch.bfloat16, "half": torch.float16, "to": torch.bfloat16}[cast]
    model = model.to(device, dtype) if cast == "to" else getattr(model, cast)()
    assert all(p.dtype == dtype for p in model.parameters())
    for name, buffer in model.named_buffers():
        assert buffer.dtype == torch.float32 and buffer.device == before[name].device, name
        assert torch.equal(buffer, before[name]), name
    model(x.to(dtype)).float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == dtype for p in model.parameters())
    assert not torch.equal(model[0].fp8_x_history, before["0.fp8_x_history"])  # the step rolled it


def test_delayed_bad_arguments_raise_clear_errors(device):
    x, weight, bias = operands((7, 32), 16, torch.float32, device, seed=110)
    pair = (Float8Scaling.new(device=device), Float8Scaling.new(device=device))
    q, scale = quantize(x)
    layer = bf_fp8.Float8Linear(32, 16, recipe="delayed", device=device)
    tensorwise = bf_fp8.Float8Linear(32, 16, device=device)
    calls = [
        (lambda: fp8_linear(x, weight, recipe="delayed"), TypeError, "fp8_scaling: recipe 'delayed' needs"),
        (lambda: fp8_linear(x, weight, recipe="delayed", fp8_scaling=pair[0]), TypeError, "(x_state, grad_state)"),
        (lambda: fp8_linear(x, weight, recipe="delayed", fp8_scaling=(pair[0], "no")), TypeError,
         "(x_state, grad_state)"),
        (lambda: fp8_linear(x, weight, recipe="delayed",
                            fp8_scaling=(pair[0], Float8Scaling(torch.zeros(4, device=device),
                                                                torch.zeros(2, device=device)))),
         ValueError, "fp8_scaling.amax: expected shape (1,)"),
        (lambda: fp8_linear(x, weight, fp8_scaling=pair), ValueError, "fp8_scaling: only for recipe 'delayed'"),
        (lambda: fp8_linear(q, weight, x_scale=scale, recipe="delayed", fp8_scaling=pair), ValueError,
         "x: recipe 'delayed' casts a high-precision x"),
        (lambda: fp8_linear(x, weight, recipe="delayed", fp8_scaling=pair, x_amax=x.abs().amax().reshape(1)),
         ValueError, "x_amax / x_cast"),
        (lambda: fp8_linear(x, weight.t(), recipe="delayed", fp8_scaling=pair), ValueError,
         "weight: expected shape (out_features, 32)"),
        (lambda: fp8_linear(x, weight, recipe="late"), ValueError, "recipe: expected one of 'tensorwise', "
         "'rowwise', 'delayed'"),
        (lambda: quantize(x, recipe="rowwise", fp8_scaling=pair[0]), ValueError, "fp8_scaling: recipe 'rowwise'"),
        (lambda: quantize(x, fp8_scaling=(torch.zeros(4, dtype=torch.float64, device=device),
                                          torch.zeros(1, device=device))), TypeError, "fp8_scaling:"),
        (lambda: layer(x, activation="silu"), ValueError, "activation: a layer with recipe 'delayed'"),
        (lambda: layer(x, None, x), ValueError, "proxy: stands for an e4m3 x with its x_scale"),
        (lambda: fp8.fp8_linear_quantized(q, scale, None, weight, recipe="columnwise"), ValueError, "recipe: expected "
         "'rowwise' or 'tensorwise'"),
        (lambda: fp8.fp8_linear_quantized(q, scale, None, weight, x_cast=lambda: None), ValueError,
         "x_cast / grad_scaling: for a tensorwise q"),
        (lambda: tensorwise.fp8_scaling(), ValueError, "fp8_scaling: only recipe 'delayed'"),
        (lambda: bf_fp8.Float8Linear(32, 16, recipe="late"), ValueError, "recipe: expected one of"),
    ]
    for call, error, message in calls:
        with pytest.raises(error) as raised:
            call()
        assert message in str(raised.value), (message, str(raised.value))


def test_a_fused_block_with_delayed_layers_trains_like_its_eager_block(device):
    """te-4layer's block shape, small: the fused block with delayed layers (its norms and activation in x's
    dtype, each layer casting in one pass) against the eager block with delayed layers, both against fp32."""
    from dataclasses import replace

    from blockfuse.models import PRESETS, TransformerBlock, convert

    torch.manual_seed(0)
    config = replace(PRESETS["te-4layer"].config, d_model=64, n_heads=4, ffn_hidden=128)
    eager = TransformerBlock(config, "eager").to(device)
    oracle = copy.deepcopy(eager)
    eager_fp8 = bf_fp8.convert(copy.deepcopy(eager).bfloat16(), recipe="delayed")
    fused_fp8 = bf_fp8.convert(convert(copy.deepcopy(eager), "fused").bfloat16(), recipe="delayed")
    errors = {}
    for step in range(3):
        x = random_tensor((2, 16, 64), torch.bfloat16, seed=60 + step).to(device)
        dy = random_tensor((2, 16, 64), torch.bfloat16, seed=70 + step).to(device)
        x32 = x.float().requires_grad_()
        out32 = oracle(x32)
        out32.backward(dy.float())
        for name, module in (("eager", eager_fp8), ("fused", fused_fp8)):
            leaf = x.clone().requires_grad_()
            out = module(leaf)
            out.backward(dy)
            errors[name, step] = (relative_error(out, out32), relative_error(leaf.grad, x32.grad))
    for step in range(3):
        for index in (0, 1):
            assert errors["fused", step][index] < 0.08 and errors["eager", step][index] < 0.08, errors
            assert errors["fused", step][index] <= 1.5 * errors["eager", step][index] + 1e-3, errors
    layers = [m for m in fused_fp8.modules() if isinstance(m, bf_fp8.Float8Linear)]
    assert len(layers) == 4 and all((m.fp8_x_history[:3] > 0).all() for m in layers)


def test_a_delayed_layer_compiles_fullgraph(device):
    """``torch.compile(fullgraph=True)`` of a delayed layer (aot_eager: the same ops): the histories, updated in
    place inside the graph, follow eager's call for call, and the values are eager's within FP8's error (traced, a
    small tensor's casts may run their references: another fp32 order, an FP8 value a step away)."""
    layer = bf_fp8.Float8Linear(64, 48, recipe="delayed", device=device)
    twin = copy.deepcopy(layer)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(twin, backend="aot_eager", fullgraph=True)
        for step in range(3):
            x = random_tensor((37, 64), seed=80 + step).to(device)
            dy = random_tensor((37, 48), seed=90 + step).to(device)
            results = []
            for run in (layer, compiled):
                leaf = x.clone().requires_grad_()
                out = run(leaf)
                out.backward(dy)
                results.append((out.detach(), leaf.grad))
            (out, grad), (compiled_out, compiled_grad) = results
            assert relative_error(compiled_out, out) < 2e-2 and relative_error(compiled_grad, grad) < 5e-2, step
            for name in ("fp8_x_history", "fp8_grad_history"):
                assert torch.equal(getattr(layer, name), getattr(twin, name)), (step, name)
            assert relative_error(twin.weight.grad, layer.weight.grad) < 5e-2, step
            layer.zero_grad()
            twin.zero_grad()
    finally:
        torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("residual", [False, True], ids=["alone", "pre"])
def test_the_norms_delayed_output_is_cast_again_for_the_weight_gradient(is_rms, residual, device):
    """A norm writing e4m3 with a delayed scale for a delayed projection (``norm_for_fp8_projection`` with
    ``fp8_scaling``): its q and scale are the reference's, and the weight gradient's operand made again from the
    norm's input and statistics (``cast_again_quantized``) is q's bytes transposed without a residual (y is made
    the same way from the same input); in pre mode it is y of the kept stream (the fp32 sum rounded to bf16) with
    the forward's statistics, quantized with the forward's scale."""
    from blockfuse.ops.norm import cast_again_quantized, norm_for_fp8_projection

    n = 48
    x = random_tensor((2, 9, n), torch.bfloat16, seed=3).to(device).requires_grad_()
    res = random_tensor((2, 9, n), torch.bfloat16, seed=4).to(device) if residual else None
    weight = (1 + 0.1 * random_tensor((n,), seed=5)).to(device).requires_grad_()
    bias = None if is_rms else (0.1 * random_tensor((n,), seed=6)).to(device).requires_grad_()
    state = Float8Scaling.new(4, device)
    state.history.fill_(3.0)  # as after earlier steps
    (q, scale, proxy), stream = norm_for_fp8_projection(x, weight, bias, 1e-5, res, "pre", 0.0, True,
                                                        is_rms, fp8_scaling=state)
    assert q.dtype == E4M3 and scale.shape == () and scale == torch.tensor(3.0) / torch.tensor(448.0)
    z = (x.float() + res.float()) if residual else x.float()
    y = F.rms_norm(z, (n,), weight.float(), 1e-5) if is_rms else F.layer_norm(z, (n,), weight.float(), bias.float(),
                                                                                   1e-5)
    assert state.history[0] == y.abs().max() or abs(state.history[0] - y.abs().max()) < 1e-5 * y.abs().max()
    assert relative_error(q.float() * scale, y) < 0.05
    cast = cast_again_quantized(proxy, scale, bias)
    assert cast is not None
    yt, yt_scale = cast()
    assert torch.equal(yt_scale, scale) and yt.shape == (n, 32)  # 18 rows padded to 32
    forward = q.reshape(-1, n).t()
    if residual:
        # y of the kept (bf16) stream with the forward's statistics, quantized with the scale: the recast is that,
        # within one FP8 step (another order of fp32 operations may round a value the other way)
        kept, _, _, mean, rstd, _ = proxy.grad_fn.saved_tensors
        centered = kept.float() if is_rms else kept.float() - mean[..., None]
        y_kept = centered * rstd[..., None] * weight.float() + (0.0 if is_rms else bias.float())
        want = (y_kept.reshape(-1, n).t() / scale).clamp(-448, 448)
        assert (yt[:, :18].float() - want).abs().le(want.abs() * 2**-3 + 2**-9).all()
        assert relative_error(yt[:, :18].float(), forward.float()) < 0.02  # and close to the forward's bytes
    else:
        assert torch.equal(bits(yt[:, :18]), bits(forward))
    assert not yt[:, 18:].float().any()
    proxy.sum().backward()  # the norm's gradient flows through the proxy
    assert x.grad is not None and weight.grad is not None


@pytest.mark.usefixtures("requires_triton")
def test_a_delayed_fused_block_keeps_no_fp8_copies_of_the_norms_outputs(device):
    """te-4layer's block, fused, delayed layers: the norms write the QKV and gate|up inputs in e4m3 and the
    activation the down projection's, and those layers keep nothing of them for their weight gradients (the
    backward casts y^T again from the norm's input, act^T from the pre-activation); the output layer keeps
    attention's output, which attention keeps anyway, and casts its transpose again with the forward's scale."""
    from dataclasses import replace

    from blockfuse.models import PRESETS, TransformerBlock, convert
    from tests.models.test_fused_fp8 import _fp8_nodes

    torch.manual_seed(0)
    config = replace(PRESETS["te-4layer"].config, d_model=64, n_heads=4, ffn_hidden=128)
    fused = bf_fp8.convert(convert(TransformerBlock(config, "eager").bfloat16().to(device), "fused"),
                           recipe="delayed")
    x = random_tensor((2, 16, 64), torch.bfloat16, seed=7).to(device).requires_grad_()
    out = fused(x)
    kept = {node: [t.dtype for t in node.saved_tensors if t is not None] for node in _fp8_nodes(out)}
    assert len(kept) == 4
    assert all(E4M3 not in dtypes for dtypes in kept.values()), kept
    out.float().sum().backward()
    assert all(p.grad is not None for p in fused.parameters())


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation", ["swiglu", "geglu", "gelu_tanh"])
def test_the_activations_delayed_output_and_its_transposed_cast(activation, device):
    """``act_fp8_delayed``: q and scale are the reference's bit for bit, call after call with the history; the
    transposed cast made again from pre (``cast_again_quantized``) is q's bytes transposed; pre's gradient
    through the proxy is the activation's backward."""
    from blockfuse.ops.fp8_act import act_backward_ref, act_fp8_delayed, act_forward_delayed_ref, cast_again_quantized

    width = 2 * 40 if activation != "gelu_tanh" else 40
    mine, theirs = states(device)
    for call, magnitude in enumerate((1.0, 2.0, 0.5)):
        pre = (random_tensor((3, 7, width), torch.bfloat16, seed=30 + call) * magnitude).to(device)
        leaf = pre.clone().requires_grad_()
        q, scale, proxy = act_fp8_delayed(leaf, activation, mine)
        q_ref, scale_ref = act_forward_delayed_ref(pre.reshape(-1, width), activation, *theirs)
        assert q.shape == (3, 7, 40) and torch.equal(scale, scale_ref), call
        assert torch.equal(bits(q.reshape(-1, 40)), bits(q_ref)), call
        # fp32 activations of another implementation (exp, tanh): the amaxes within a few ulps; the next call
        # then starts both from the kernels' history, so that its scale and bytes can be compared exactly
        torch.testing.assert_close(mine.history, theirs.history, rtol=1e-5, atol=0)
        theirs.history.copy_(mine.history)
        cast = cast_again_quantized(proxy, scale)
        yt, yt_scale = cast()
        assert torch.equal(yt_scale, scale) and yt.shape == (40, 32), call
        assert torch.equal(bits(yt[:, :21]), bits(q.reshape(-1, 40).t())) and not yt[:, 21:].float().any(), call
        dy = random_tensor((3, 7, 40), torch.bfloat16, seed=40 + call).to(device)
        proxy.backward(dy)
        want = act_backward_ref(dy.reshape(-1, 40), pre.reshape(-1, width), activation, None)[0]
        assert relative_error(leaf.grad.reshape(-1, width), want) < 1e-2, call  # bf16 gradients, any order


@pytest.mark.usefixtures("requires_triton")
def test_the_delayed_activation_launcher_passes_opcheck(device):
    if device != "cpu":
        pytest.skip("the interpreter's custom op")
    pre = random_tensor((19, 96), torch.bfloat16, seed=2)
    torch.library.opcheck(torch.ops.blockfuse.fp8_act_fwd_delayed.default,
                          (pre, "swiglu", torch.tensor([3.0, 0.5, 0.0]), torch.zeros(1)),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("shape", [(37, 72), (130, 48), (1, 16)])
def test_a_delayed_cast_made_again_with_its_scale_is_the_same_bytes(shape, device):
    """``transposed_cast_with_scale``: x^T cast with the scale an earlier delayed cast of x had gives that cast's
    transposed bytes (what a layer keeping x instead of x^T's cast uses in its backward); and a delayed layer whose
    input is kept for free (a fused block's attention output) gives the gradients of one that keeps its cast."""
    state = Float8Scaling.new(4, device)
    state.history.fill_(2.5)
    x = random_tensor(shape, torch.bfloat16, seed=9).to(device)
    _, scale, yt, _, _ = fp8._quantize_2d_sum(x, E4M3, False, True, True, 16, scaling=state)
    again, again_scale = fp8.transposed_cast_with_scale(x, scale, 16)
    assert torch.equal(again_scale, scale) and torch.equal(bits(again), bits(yt))


@pytest.mark.usefixtures("requires_triton")
def test_a_delayed_layer_keeping_its_input_gives_the_same_gradients(monkeypatch, device):
    x, weight, bias = operands((40, 64), 48, torch.bfloat16, device, seed=12)
    dy = random_tensor((40, 48), torch.bfloat16, seed=13).to(device)
    grads = []
    for kept in (False, True):
        monkeypatch.setattr(fp8, "_kept_for_free", lambda t, kept=kept: kept)
        pair = (Float8Scaling.new(4, device), Float8Scaling.new(4, device))
        pair[0].history.fill_(3.0)
        pair[1].history.fill_(2.0)
        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        fp8_linear(*leaves, recipe="delayed", fp8_scaling=pair).backward(dy)
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation, width", [("swiglu", 2 * 40), ("geglu", 2 * 24), ("gelu_tanh", 40)])
@pytest.mark.parametrize("rows, transposed", [(True, True), (True, False), (False, True)])
def test_the_activations_delayed_backward_is_the_references(activation, width, rows, transposed, device):
    """``blockfuse::fp8_act_bwd_delayed``: pre's gradient through the activation in e5m2 with the history's scale,
    both layouts and the column sums, against the reference (the fp32 gradient quantized as it is): the bytes
    within one e5m2 step (the activations' fp32 arithmetic is another implementation's), the sums within fp32's,
    the amax rolled in."""
    from blockfuse.ops.fp8_act import _act_backward_delayed, act_backward_delayed_ref

    hidden = width // 2 if activation != "gelu_tanh" else width
    mine, theirs = states(device)
    for call in range(2):
        pre = random_tensor((21, width), torch.bfloat16, seed=50 + call).to(device)
        dy = random_tensor((21, hidden), torch.bfloat16, seed=60 + call).to(device)
        got = _act_backward_delayed(dy, pre, activation, *mine, rows, transposed, 16, torch.float32)
        want = act_backward_delayed_ref(dy, pre, activation, *theirs, rows, transposed, 16, torch.float32)
        for index in ((0, 2) if rows and transposed else (0,) if rows else (2,)):
            a, b = got[index].float(), want[index].float()
            assert a.shape == b.shape and (a - b).abs().le(b.abs() * 2**-2 + 2**-16).all(), (call, index)
            assert torch.equal(got[index + 1], want[index + 1]), (call, index)
        if transposed:
            assert not got[2][:, 21:].float().any()
        torch.testing.assert_close(got[4], want[4], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(mine.history, theirs.history, rtol=1e-5, atol=0)
        theirs.history.copy_(mine.history)  # (the next call's scale from one history)


@pytest.mark.usefixtures("requires_triton")
def test_a_delayed_mlps_backward_hands_the_gradient_casts_to_its_first_layer(monkeypatch, device):
    """In a fused block with delayed layers the activation's backward writes the gate|up layer's e5m2 gradient
    operands itself (one call a step) and that layer casts nothing: no cast of a zero-stride stand-in, and the
    gradients are as close to the block's in fp32 as those of a step where nothing is handed (each layer casting its
    own gradient: the activation's plain backward)."""
    from blockfuse.ops import fp8_act

    step = handed_and_own_steps(monkeypatch, device, fp8_act, "_act_backward_delayed")
    assert len(step["handed_calls"]) == 1 and all(0 not in x.stride() for x in step["handed_casts"]), step


def handed_and_own_steps(monkeypatch, device, module, launcher: str) -> dict:
    """A small te-4layer block with delayed FP8 layers, fused, bf16: one training step with ``module.launcher`` (an
    op's backward that hands its producer the e5m2 gradient operands) counted, then the same step from the same
    states with nothing handed (``fp8.delayed_producer`` finding no producer: each layer casts its own gradient).
    Checks that handing loses nothing against the block in fp32 (:func:`assert_handing_loses_nothing`); returns
    the launcher's calls of the first step, the inputs of the layers' own casts (``fp8._quantize_2d_sum``) in each,
    and the buffers after each."""
    from dataclasses import replace

    from blockfuse.models import PRESETS, TransformerBlock, convert, named_gradients

    config = replace(PRESETS["te-4layer"].config, d_model=64, n_heads=4, ffn_hidden=128)
    torch.manual_seed(0)
    block = bf_fp8.convert(convert(TransformerBlock(config, "eager").bfloat16().to(device), "fused"),
                           recipe="delayed")
    x = random_tensor((2, 16, 64), torch.bfloat16, seed=8).to(device)
    states_before = {name: t.clone() for name, t in block.named_buffers()}
    record = {"handed_calls": [], "handed_casts": [], "own_casts": []}
    casts = record["handed_casts"]
    original_handed, original_cast = getattr(module, launcher), fp8._quantize_2d_sum

    def counting_handed(*args):
        record["handed_calls"].append(args[0].shape)
        return original_handed(*args)

    def counting_cast(x, *args, **kwargs):
        casts.append(x)
        return original_cast(x, *args, **kwargs)

    monkeypatch.setattr(module, launcher, counting_handed)
    monkeypatch.setattr(fp8, "_quantize_2d_sum", counting_cast)
    grads, states = [], []
    for handing in (True, False):
        if not handing:  # the same step, the layers casting their own gradients (the states as before the first)
            block.zero_grad(set_to_none=True)
            for name, t in block.named_buffers():
                t.copy_(states_before[name])
            monkeypatch.setattr(fp8, "delayed_producer", lambda out: None)
            casts = record["own_casts"]
        leaf = x.clone().requires_grad_()
        block(leaf).float().sum().backward()
        grads.append({"x": leaf.grad, **named_gradients(block)})
        states.append({name: t.clone() for name, t in block.named_buffers()})
    assert_handing_loses_nothing(*grads, config, x)
    return dict(record, handed_states=states[0], own_states=states[1])


def assert_handing_loses_nothing(handed: dict, own: dict, config, x: torch.Tensor) -> None:
    """The gradients of a delayed fused block's step in which ops hand their producers the e5m2 gradient operands
    (``handed``) are as close to the same block's in fp32 without FP8 (its weights made under seed 0, as the tests
    make theirs) as those of the step in which every layer casts its own (``own``: quantized from the bf16 rounding
    instead of from fp32; the two differ from each other by up to FP8's error, ~5% at a first step's scale of 1)."""
    from blockfuse.models import TransformerBlock, convert, named_gradients

    torch.manual_seed(0)
    plain = convert(TransformerBlock(config, "eager").to(x.device), "fused")
    leaf = x.float().requires_grad_()
    plain(leaf).sum().backward()
    reference = {"x": leaf.grad, **named_gradients(plain)}
    for name in own:
        theirs = relative_error(own[name].float(), reference[name])
        assert relative_error(handed[name].float(), reference[name]) <= 1.1 * theirs + 5e-3, name
        assert theirs < 0.15, name  # (FP8's error at a first step: the reference is the same block)
