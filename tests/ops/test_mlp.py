"""Tests of ``gated_mlp``: ``fused_mlp``'s gated forms under their gated names, the MLP whose backward
recomputes the activation (``tests/ops/test_linear_act.py`` tests ``fused_mlp`` with every activation).

Oracle: PyTorch's composition (two ``F.linear`` around ``act(gate) * up``) in float64 on ``.double()``
copies; baseline: the same composition in the low dtype. The fused op may be at most about 2x as
wrong as the baseline, for the output and for every gradient (x, both weights, both biases).
"""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn.functional as F

from blockfuse.ops.activation import GATED as ACTIVATIONS
from blockfuse.ops.mlp import fused_mlp, gated_mlp, gated_mlp_ref
from tests.helpers import (
    as_layout, assert_all_close_to_reference, assert_compiles_like_eager, assert_runs_without_interpreter, grads,
    leaves, random_tensor,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _composition(x, wgu, bgu, wd, bd, wu=None, bu=None, *, activation):
    if wu is None:
        gate, up = F.linear(x, wgu, bgu).chunk(2, dim=-1)
    else:
        gate, up = F.linear(x, wgu, bgu), F.linear(x, wu, bu)
    if activation == "swiglu":
        hidden = F.silu(gate) * up
    else:
        hidden = F.gelu(gate, approximate="tanh" if activation == "geglu" else "none") * up
    return F.linear(hidden, wd, bd)


def _inputs(shape, d, hidden, d_out, dtype, device, bias, separate=False):
    """(x, gate|up weight, its bias, down weight, down bias) packed, plus (up weight, up bias) when
    ``separate`` (the first weight is then the gate's alone)."""
    rows = hidden if separate else 2 * hidden
    x = random_tensor((*shape, d), dtype, device, seed=1)
    wgu = random_tensor((rows, d), dtype, device, seed=2, scale=d**-0.5)
    wd = random_tensor((d_out, hidden), dtype, device, seed=3, scale=hidden**-0.5)
    bgu = random_tensor((rows,), dtype, device, seed=4, scale=0.1) if bias else None
    bd = random_tensor((d_out,), dtype, device, seed=5, scale=0.1) if bias else None
    if not separate:
        return x, wgu, bgu, wd, bd
    wu = random_tensor((hidden, d), dtype, device, seed=7, scale=d**-0.5)
    bu = random_tensor((hidden,), dtype, device, seed=8, scale=0.1) if bias else None
    return x, wgu, bgu, wd, bd, wu, bu


def _call(inputs, activation="swiglu"):
    x, wgu, bgu, wd, bd, *up = inputs
    if up:
        return gated_mlp(x, wgu, bgu, wd, bd, activation, up_weight=up[0], up_bias=up[1])
    return gated_mlp(x, wgu, bgu, wd, bd, activation)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("form", ["packed", "separate"])
@pytest.mark.parametrize("shape, d, hidden, d_out", [((1,), 64, 96, 72), ((3, 7), 24, 40, 16), ((199,), 72, 36, 72)])
def test_forward_and_gradients(activation, dtype, bias, form, shape, d, hidden, d_out, device):
    dtype = DTYPES[dtype]
    inputs = _inputs(shape, d, hidden, d_out, dtype, device, bias, separate=form == "separate")
    dy = random_tensor((*shape, d_out), dtype, device, seed=6)
    ours = leaves(*inputs)
    out = _call(ours, activation)
    ours_grads = grads(out, ours, dy)
    base = leaves(*inputs)
    out_base = _composition(*base, activation=activation)
    base_grads = grads(out_base, base, dy)
    ref = leaves(*inputs, dtype=torch.float64)
    out_ref = _composition(*ref, activation=activation)
    ref_grads = grads(out_ref, ref, dy.double())
    names = ["out", "dx", "d gate_up_weight", "d gate_up_bias", "d down_weight", "d down_bias", "d up_weight",
             "d up_bias"][: len(ours) + 1]
    assert_all_close_to_reference([out, *ours_grads], [out_base, *base_grads], [out_ref, *ref_grads], names,
                                  rounded_through=torch.bfloat16 if dtype == torch.bfloat16 else None)


@pytest.mark.usefixtures("requires_triton")
def test_non_contiguous_input_and_3d_gradient(device):
    inputs = list(_inputs((5, 3), 16, 20, 16, torch.float32, device, True))
    inputs[0] = as_layout(inputs[0], "strided")  # on the device: a copy to another device is contiguous
    x = inputs[0]
    assert not x.is_contiguous()
    ours = leaves(*inputs)
    out = gated_mlp(*ours)
    assert out.dim() == 3 and out._base is None  # a tensor of its own, as F.linear's of 3-D rows
    out.square().sum().backward()
    ref = leaves(*inputs, dtype=torch.float64)
    _composition(*ref, activation="swiglu").square().sum().backward()
    for mine, expected in zip(ours, ref):
        torch.testing.assert_close(mine.grad.double(), expected.grad, rtol=1e-4, atol=1e-5)


def test_reference_matches_the_composition():
    inputs = _inputs((4,), 8, 6, 5, torch.float64, "cpu", True)
    for activation in ACTIVATIONS:
        torch.testing.assert_close(gated_mlp_ref(*inputs, activation=activation), _composition(*inputs, activation=activation))


@pytest.mark.usefixtures("requires_triton")
def test_backward_keeps_no_activation(device):
    """The saved tensors are x and the pre-activation (and the weights), not the activation."""
    for separate, pre in ((False, [(6, 20)]), (True, [(6, 10), (6, 10)])):
        inputs = leaves(*_inputs((6,), 8, 10, 8, torch.float32, device, True, separate=separate))
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
            _call(inputs)
        activations = [shape for shape in saved if shape == (6, 10)]
        assert activations == [shape for shape in pre if shape == (6, 10)], saved  # only the pre-activations
        assert all(shape in saved for shape in pre) and (6, 8) in saved  # pre-activation(s) and x


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("separate", [False, True], ids=["packed", "separate"])
def test_compiles_fullgraph(backend, bias, separate):
    """torch.compile(fullgraph=True): no graph break, and the forward and every gradient of eager (the
    same two autograd Functions and launchers), which also match PyTorch's composition."""
    inputs = _inputs((3, 5), 16, 12, 16, torch.float32, "cpu", bias, separate=separate)
    dy = random_tensor((3, 5, 16), torch.float32, "cpu", seed=6)

    def run(fn):
        parameters = leaves(*inputs)
        out = fn(*parameters)
        return [out, *grads(out, parameters, dy)]

    names = ["out", "dx", "d gate_up_weight", "d gate_up_bias", "d down_weight", "d down_bias", "d up_weight",
             "d up_bias"][:len(inputs) + 1]
    # aot_eager: the same kernels and GEMMs on the same inputs
    compiled, _ = assert_compiles_like_eager(lambda *a: _call(a, "geglu"), run, names, backend=backend,
                                             exact=backend == "aot_eager", rtol=1e-5, atol=1e-5)
    for name, mine, composition in zip(names, compiled, run(lambda *a: _composition(*a, activation="geglu")),
                                       strict=True):
        if composition is None:  # an absent bias
            continue
        torch.testing.assert_close(mine, composition, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.usefixtures("requires_triton")
def test_compiled_inference_takes_no_autograd_node(monkeypatch):
    """Under torch.no_grad the compiled MLP runs the GEMMs and the launcher alone, with eager's values. (The
    small-input rule, which would send this tiny input to the reference, is off here: tests/test_runtime.py
    tests it.)"""
    from blockfuse import runtime

    monkeypatch.setattr(runtime, "COMPILED_INFERENCE_MAX_ELEMENTS", 0)
    inputs = _inputs((7,), 16, 12, 16, torch.float32, "cpu", True, separate=True)
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(lambda *a: _call(a), backend="aot_eager", fullgraph=True)(*inputs)
        expected = _call(inputs)
    assert out.grad_fn is None
    assert torch.equal(out, expected)
    torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
def test_launcher_ops_pass_opcheck(device):
    """Schema, fake tensors (symbolic shapes too), declared mutation and AOT dispatch of
    ``blockfuse::gated_mlp_down_fwd`` and of the in-place backward ``gated_mlp_down_bwd_`` (opaque under
    torch.compile: its fake is its own)."""
    from blockfuse.ops.launch import OPAQUE_LAUNCHERS
    from blockfuse.ops.mlp import _down_backward, _down_forward

    assert str(_down_forward.op) == "blockfuse.gated_mlp_down_fwd.default"
    assert str(_down_backward.op) == "blockfuse.gated_mlp_down_bwd_.default"
    assert "gated_mlp_down_bwd_" in OPAQUE_LAUNCHERS and "gated_mlp_down_fwd" not in OPAQUE_LAUNCHERS
    wd, bd = random_tensor((8, 6), device=device, seed=3), random_tensor((8,), device=device, seed=4)
    packed, gate, up = (random_tensor(shape, device=device, seed=seed) for shape, seed in (((5, 12), 1), ((5, 6), 2),
                                                                                             ((5, 6), 5)))
    dy = random_tensor((5, 8), device=device, seed=6)
    for pre, up_pre, bias, act in ((packed, None, bd, "swiglu"), (gate, up, None, "geglu_erf"), (gate, None, bd, "relu")):
        torch.library.opcheck(_down_forward.op, (pre, up_pre, wd, bias, act))
        torch.library.opcheck(_down_backward.op, (dy, pre.clone(), None if up_pre is None else up_pre.clone(), wd,
                                                  act, bias is not None))
    from blockfuse.ops.mlp import _gate_up_forward

    assert "mlp_gate_up_fwd" in OPAQUE_LAUNCHERS
    x2, wg, wu, bg = (random_tensor(shape, device=device, seed=seed) for shape, seed in (((5, 6), 7), ((12, 6), 8),
                                                                                         ((6, 6), 9), ((12,), 10)))
    for args in ((x2, wg, bg, None, None), (x2, wg[:6], None, wu, bg[:6])):
        torch.library.opcheck(_gate_up_forward.op, args)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("activation, separate", [("gelu_tanh", False), ("swiglu", False), ("geglu", True)])
def test_compiled_gradients_survive_inductor_padding(activation, separate, device):
    """Inductor pads the row stride of buffers wider than ``padding_stride_threshold`` elements to 128 bytes
    (comprehensive padding; on the CPU only when asked, as here). The pre-activation the backward overwrites
    must keep its dense layout: padded, Inductor once copied it into itself and every gradient was garbage
    (see ``_gate_up_forward``). Compiled with Inductor, the MLP gives eager's gradients."""
    import torch._inductor.config as inductor_config

    hidden = 1076 if device == "cuda" else 100  # padded: above the threshold and not a multiple of 64 elements
    inputs = _inputs((64,), 48, hidden, 48, torch.float32, device, True, separate=separate)
    if activation == "gelu_tanh":  # ungated: fc1 of hidden rows
        x, wgu, bgu, wd, bd = inputs
        inputs = (x, wgu[:hidden].contiguous(), bgu[:hidden].contiguous(), wd, bd)
    dy = random_tensor((64, 48), torch.float32, device, seed=6)

    def call(x, wgu, bgu, wd, bd, *up):
        extra = dict(up_weight=up[0], up_bias=up[1]) if up else {}
        return fused_mlp(x, wgu, bgu, wd, bd, activation, **extra)

    def run(fn):
        parameters = leaves(*inputs)
        out = fn(*parameters)
        return [out, *grads(out, parameters, dy)]

    torch._dynamo.reset()
    try:
        with inductor_config.patch(comprehensive_padding=True, disable_padding_cpu=False,
                                   padding_stride_threshold=16 if device == "cpu" else 1024):
            compiled = run(torch.compile(call, fullgraph=True))
    finally:
        torch._dynamo.reset()
    for i, (mine, expected) in enumerate(zip(compiled, run(call), strict=True)):
        torch.testing.assert_close(mine, expected, rtol=1e-4, atol=1e-5, msg=lambda m, i=i: f"output {i}: {m}")


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"activation": "relu"}, ValueError, "activation: expected one of"),
        ({"x": torch.randn(3, 7)}, ValueError, r"gate_up_weight: expected \(out_features, 7\) for the 7 features"),
        ({"down_weight": torch.randn(8, 5)}, ValueError, r"down_weight: expected \(out_features, 6\)"),
        ({"gate_up_bias": torch.randn(11)}, ValueError, r"gate_up_bias: expected shape \(12,\)"),
        ({"down_bias": torch.randn(8, dtype=torch.float64)}, TypeError, "down_bias: expected dtype"),
        ({"x": torch.randn(3, 8, dtype=torch.float16)}, TypeError, "gate_up_weight: expected dtype"),
        ({"x": torch.ones(3, 8, dtype=torch.int32)}, TypeError, "x: expected a float16, bfloat16, float32"),
        ({"up_bias": torch.randn(6)}, ValueError, "up_bias: given without up_weight"),
        ({"up_weight": torch.randn(12, 8)}, ValueError, r"down_weight: expected \(out_features, 12\)"),
        ({"up_weight": torch.randn(5, 8), "gate_up_weight": torch.randn(6, 8), "gate_up_bias": None},
         ValueError, r"up_weight: expected shape \(6, 8\)"),
    ],
)
def test_bad_arguments(change, error, message):
    arguments = {"x": torch.randn(3, 8), "gate_up_weight": torch.randn(12, 8), "gate_up_bias": torch.randn(12),
                 "down_weight": torch.randn(8, 6), "down_bias": torch.randn(8), "activation": "swiglu"}
    arguments.update(change)
    with pytest.raises(error, match=message):
        gated_mlp(**arguments)


def test_cpu_without_the_interpreter_uses_the_reference():
    assert_runs_without_interpreter(textwrap.dedent("""
        import torch
        from blockfuse.ops.mlp import gated_mlp, gated_mlp_ref
        x, wgu, wd = torch.randn(4, 8, requires_grad=True), torch.randn(12, 8), torch.randn(8, 6)
        out = gated_mlp(x, wgu, None, wd)
        assert torch.equal(out, gated_mlp_ref(x, wgu, None, wd))
        out.sum().backward()
        print("reference fallback ok")
    """))


@pytest.mark.usefixtures("requires_triton")
def test_a_second_backward_through_the_same_graph_raises(device):
    """The backward writes the pre-activation's gradient over the saved pre-activation: a second
    backward (retain_graph=True) must fail loudly, not read the overwritten values."""
    x, wgu, bgu, wd, bd = leaves(*_inputs((4,), 8, 6, 8, torch.float32, device, True))
    out = gated_mlp(x, wgu, bgu, wd, bd)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("separate", [False, True], ids=["packed", "separate"])
def test_empty_input_trains(separate, device):
    """No tokens: an empty output, and zero gradients for the weights (the two autograd nodes hand an
    empty pre-activation gradient along in both weight forms)."""
    x, wgu, bgu, wd, bd, *up = leaves(*_inputs((0,), 8, 6, 8, torch.float32, device, True, separate=separate))
    out = _call((x, wgu, bgu, wd, bd, *up))
    assert out.shape == (0, 8)
    out.sum().backward()
    for name, t in [("x", x), ("gate_up_weight", wgu), ("gate_up_bias", bgu), ("down_weight", wd),
                    ("down_bias", bd), *zip(("up_weight", "up_bias"), up)]:
        assert t.grad is not None and t.grad.shape == t.shape and not t.grad.any(), name


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("separate", [False, True], ids=["packed", "separate"])
def test_eager_backward_is_two_nodes_sharing_the_pre_activation(separate, device):
    """Eagerly the MLP is two autograd nodes, the down part first, so the engine frees its incoming
    gradient before the gate|up part runs; the gradient handed between them is the saved
    pre-activation's own storage (overwritten), not a new tokens x 2 hidden buffer."""
    inputs = leaves(*_inputs((5,), 8, 6, 8, torch.float32, device, True, separate=separate))
    out = _call(inputs)
    down = out.grad_fn
    gate_up = down.next_functions[0][0]
    assert "_DownFunction" in down.name() and "_GateUpFunction" in gate_up.name(), (down, gate_up)
    pre_storages = {t.untyped_storage().data_ptr() for t in down.saved_tensors[:2] if t.numel()}
    handed = []
    gate_up.register_prehook(lambda grads: handed.extend(g for g in grads if g is not None and g.numel()))
    out.backward(torch.randn_like(out))
    assert handed and {g.untyped_storage().data_ptr() for g in handed} == pre_storages


@pytest.mark.usefixtures("requires_triton")
def test_forward_and_backward_in_blocks(monkeypatch, device):
    """The forward makes the activation in blocks of rows for the down GEMM; the backward recomputes
    it in blocks of columns and makes the hidden gradient in blocks of rows: 199 tokens in blocks of
    64 rows (the last one 7), 27 hidden in one block of columns (64-aligned), same result (on the session's
    device: on a GPU machine CPU tensors would take the reference and test nothing here)."""
    import dataclasses

    import blockfuse.ops.mlp as mlp

    monkeypatch.setattr(mlp, "BLOCKS", dataclasses.replace(mlp.BLOCKS, forward_min_rows=2, backward_min_rows=2,
                                                           backward_min_columns=2, min_block_bytes=0))
    assert len(mlp.column_blocks(199, mlp.BLOCKS.forward, mlp.BLOCKS.forward_min_rows)) == 4
    for separate in (False, True):
        inputs = _inputs((199,), 16, 27, 16, torch.float32, device, True, separate=separate)
        ours = leaves(*inputs)
        out = _call(ours)
        out.square().sum().backward()
        ref = leaves(*inputs, dtype=torch.float64)
        expected_out = _composition(*ref, activation="swiglu")
        expected_out.square().sum().backward()
        torch.testing.assert_close(out.double(), expected_out, rtol=1e-4, atol=1e-5)
        for mine, expected in zip(ours, ref):
            torch.testing.assert_close(mine.grad.double(), expected.grad, rtol=1e-4, atol=1e-5)


def test_block_count_by_the_activation_s_bytes(monkeypatch):
    """With the rule on, one block per 32 MiB of the tokens x hidden activation at most, BLOCKS' count at most, one
    at least: the presets' MLPs in bf16: standard / reordered (8192 x 4096, 64 MiB) 2, olmo2-1b and te-4layer
    (128 MiB and more) 4, a small layer 1 (the default since an H200 timed it); 0 bytes: the count at any size."""
    import dataclasses

    import blockfuse.ops.mlp as mlp

    assert mlp.BLOCKS.min_block_bytes == mlp.BLOCK_BYTES_RULE == 32 << 20
    monkeypatch.setattr(mlp, "BLOCKS", dataclasses.replace(mlp.BLOCKS, min_block_bytes=0))
    assert mlp.block_count(4, 64, 128, 2) == 4
    monkeypatch.setattr(mlp, "BLOCKS", dataclasses.replace(mlp.BLOCKS, min_block_bytes=mlp.BLOCK_BYTES_RULE))
    assert mlp.block_count(4, 8192, 4096, 2) == 2
    assert mlp.block_count(4, 8192, 8192, 2) == 4 and mlp.block_count(4, 16384, 4096, 2) == 4
    assert mlp.block_count(4, 65536, 4304, 2) == 4 and mlp.block_count(4, 8192, 4096, 4) == 4  # (fp32: 128 MiB)
    assert mlp.block_count(4, 8192, 3072, 2) == 1 and mlp.block_count(4, 64, 128, 2) == 1
    assert mlp.block_count(4, 8192, 6144, 2) == 3


@pytest.mark.usefixtures("requires_triton")
def test_blocks_follow_the_activation_s_bytes(monkeypatch, device):
    """The forward, the backward's recompute and its hidden gradient each take block_count's blocks: with 1 KiB a
    block, 199 x 27 fp32 (21 KiB) takes BLOCKS' four row blocks (min rows 2) where 64 KiB a block takes one; the
    recompute's launches counted (one a block) and the results equal either way."""
    import dataclasses

    import blockfuse.ops.mlp as mlp

    results, launches = {}, {}
    real = mlp.launch_gated_forward
    for block_bytes in (1024, 64 << 10):
        monkeypatch.setattr(mlp, "BLOCKS", dataclasses.replace(mlp.BLOCKS, forward_min_rows=2, backward_min_rows=2,
                                                               backward_min_columns=2, min_block_bytes=block_bytes))
        calls = []
        monkeypatch.setattr(mlp, "launch_gated_forward", lambda *a, real=real: (calls.append(a[0].shape), real(*a)))
        inputs = _inputs((199,), 16, 27, 16, torch.float32, device, True)
        ours = leaves(*inputs)
        out = _call(ours)
        out.square().sum().backward()
        results[block_bytes] = [out.detach(), *(t.grad for t in ours)]
        launches[block_bytes] = calls
    assert [shape[0] for shape in launches[1024][:4]] == [64, 64, 64, 7]  # the forward's four row blocks
    assert len(launches[1024]) == 4 + 1 and len(launches[64 << 10]) == 1 + 1  # (+ the recompute: 27 columns, one)
    for blocked, whole in zip(results[1024], results[64 << 10], strict=True):
        torch.testing.assert_close(blocked, whole)


def test_column_blocks_cover_the_columns_aligned():
    from blockfuse.ops.mlp import column_blocks

    for n, blocks, min_width in ((4304, 4, 512), (8192, 4, 512), (700, 4, 512), (100, 4, 512), (2816, 4, 512)):
        slices = column_blocks(n, blocks, min_width)
        assert slices[0].start == 0 and slices[-1].stop == n
        assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))
        assert all((s.stop - s.start) % 64 == 0 for s in slices[:-1]) and all(s.start % 64 == 0 for s in slices)
        assert len(slices) <= blocks and all(s.stop - s.start >= min(min_width, n) for s in slices[:-1])
