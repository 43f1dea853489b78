"""Tests of the fused gated activations: ``swiglu`` and ``geglu`` (separate and packed inputs).

The oracle is PyTorch's own composition (``F.silu(g) * u``, ``F.gelu(g, approximate=...) * u``,
the packed form split with ``chunk``) in float64, on ``.double()`` copies of the low-precision
inputs; the baseline is the same composition run by PyTorch in the low dtype (autograd for its
grads). A fused result may be at most about 2x as wrong as the baseline
(``tests.helpers.assert_close_to_reference``). The references beside the kernels (``swiglu_ref``,
``geglu_ref``) are checked against the same oracle in ``test_reference_*``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from blockfuse.ops.gated import _halves, geglu, geglu_ref, swiglu, swiglu_ref
from blockfuse.runtime import use_triton
from tests.helpers import (
    assert_compiles_like_eager,
    assert_runs_without_interpreter,
    as_layout,
    assert_all_close_to_reference,
    grads,
    leaves,
    random_tensor,
    relative_error,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# ---------------------------------------------------------------------------------------------
# What is called: an op (activation), its inputs in one of two forms, and three ways to run it.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Op:
    name: str  # "swiglu" or "geglu"
    approximate: str | None = None  # geglu only

    def blockfuse(self, gate, up=None):
        if self.name == "swiglu":
            return swiglu(gate, up)
        return geglu(gate, up, approximate=self.approximate)

    def reference(self, gate, up=None):
        if self.name == "swiglu":
            return swiglu_ref(gate, up)
        return geglu_ref(gate, up, approximate=self.approximate)

    def pytorch(self, gate, up=None):
        """PyTorch's own composition in the inputs' dtype: float64 gives the oracle, a low dtype
        the baseline. ``up=None``: ``gate`` is packed [..., 2 * hidden] (gate then up)."""
        if up is None:
            gate, up = gate.chunk(2, dim=-1)
        if self.name == "swiglu":
            return F.silu(gate) * up
        return F.gelu(gate, approximate=self.approximate) * up


OPS = {"swiglu": Op("swiglu"), "geglu-tanh": Op("geglu", "tanh"), "geglu-none": Op("geglu", "none")}


def make_inputs(shape, dtype, device, form, *, seed=0, layouts=("contiguous", "contiguous")):
    """Random, never-zero inputs: ``[gate, up]`` of ``shape`` (form "separate"), or ``[packed]``
    of ``shape[:-1] + (2 * shape[-1],)`` (form "packed"). The gate spans [-6, 6] or so, where
    both activations bend; up is around 0.5."""
    if form == "packed":
        packed_shape = (*shape[:-1], 2 * shape[-1])
        return [random_tensor(packed_shape, dtype, device, seed=seed, scale=2.0, offset=0.25, layout=layouts[0])]
    gate = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=0.25, layout=layouts[0])
    up = random_tensor(shape, dtype, device, seed=seed + 1, scale=1.0, offset=0.5, layout=layouts[1])
    return [gate, up]


def forward_backward(fn, inputs, grad_output, *, as_dtype=None):
    """``fn(*leaf inputs)`` and autograd; returns (output, grads of the inputs)."""
    leaf_list = leaves(*inputs, dtype=as_dtype)
    output = fn(*leaf_list)
    return output.detach(), grads(output, leaf_list, grad_output)


def grad_names(inputs):
    return ["dgate_up"] if len(inputs) == 1 else ["dgate", "dup"]


def check_against_pytorch(op: Op, inputs, *, grad_layout="contiguous", run_ours=None):
    """Forward and backward of blockfuse against the fp64 oracle, relative to PyTorch's own error."""
    first = inputs[0]
    out_shape = (*first.shape[:-1], first.shape[-1] // 2 if len(inputs) == 1 else first.shape[-1])
    grad_output = random_tensor(out_shape, first.dtype, first.device, seed=100, layout=grad_layout)

    ours = forward_backward(run_ours or op.blockfuse, inputs, grad_output)
    baseline = forward_backward(op.pytorch, inputs, grad_output)
    oracle = forward_backward(op.pytorch, inputs, grad_output.double(), as_dtype=torch.float64)

    output, input_grads = ours
    assert output.dtype == first.dtype, f"out: dtype {output.dtype}, expected {first.dtype}"
    assert output.shape == out_shape, f"out: shape {tuple(output.shape)}, expected {out_shape}"
    for grad, tensor, name in zip(input_grads, inputs, grad_names(inputs)):
        assert grad.dtype == tensor.dtype and grad.shape == tensor.shape, (
            f"{name}: {grad.dtype} {tuple(grad.shape)}, expected {tensor.dtype} {tuple(tensor.shape)}"
        )
    assert_all_close_to_reference(
        [output, *input_grads],
        [baseline[0], *baseline[1]],
        [oracle[0], *oracle[1]],
        ["out", *grad_names(inputs)],
        rounded_through=first.dtype,
    )


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


# ---------------------------------------------------------------------------------------------
# Accuracy against float64, relative to PyTorch's own error
# ---------------------------------------------------------------------------------------------

# (rows, hidden): every awkward width, every awkward row count.
SHAPES = [(199, 72), (3, 760), (1, 4304)]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", OPS)
def test_gated(op, form, shape, dtype, device):
    check_against_pytorch(OPS[op], make_inputs(shape, dtype, device, form))


@pytest.mark.parametrize("shape", [(72,), (2, 5, 72), (2, 3, 4, 760)], ids=shape_id)
@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", OPS)
def test_leading_dimensions(op, form, shape, device):
    """No leading dimension, 3-D (batch, seq, hidden) and 4-D inputs."""
    check_against_pytorch(OPS[op], make_inputs(shape, torch.bfloat16, device, form, seed=3))


@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", ["swiglu", "geglu-none"])
def test_empty_input(op, form, device):
    """Zero rows: an empty output of the right shape, and empty grads."""
    inputs = [t[:0].requires_grad_() for t in make_inputs((3, 72), torch.float32, device, form)]
    out = OPS[op].blockfuse(*inputs)
    assert out.shape == (0, 72) and out.dtype == torch.float32
    for grad, tensor in zip(grads(out, inputs, torch.ones_like(out)), inputs):
        assert grad.shape == tensor.shape


# ---------------------------------------------------------------------------------------------
# Memory layouts
# ---------------------------------------------------------------------------------------------


def row_padded(t: torch.Tensor, pad: int = 8) -> torch.Tensor:
    """``t``'s values in the first columns of a wider buffer: rows with a stride, a contiguous
    last dimension (what a slice of a wider GEMM output looks like)."""
    buffer = torch.full((*t.shape[:-1], t.shape[-1] + pad), float("nan"), dtype=t.dtype, device=t.device)
    view = buffer[..., : t.shape[-1]]
    view.copy_(t)
    assert not view.is_contiguous() and view.stride(-1) == 1
    return view


def leading_permuted(t: torch.Tensor) -> torch.Tensor:
    """``t`` (3-D) stored with its first two dimensions swapped: its rows cannot be one strided view."""
    result = t.transpose(0, 1).contiguous().transpose(0, 1)
    assert not result.is_contiguous() and result.stride(-1) == 1
    return result


LAYOUT_CASES = {
    # name: (form, shape, gate/packed layout, up layout)
    "gate-row-padded": ("separate", (199, 72), row_padded, None),
    "up-row-padded": ("separate", (3, 760), None, row_padded),
    "gate-strided": ("separate", (3, 760), "strided", None),
    "up-transposed": ("separate", (3, 760), None, "transposed"),
    "both-leading-permuted": ("separate", (3, 5, 72), leading_permuted, leading_permuted),
    "packed-row-padded": ("packed", (3, 760), row_padded, None),
    "packed-transposed": ("packed", (3, 760), "transposed", None),
    "packed-leading-permuted": ("packed", (3, 5, 72), leading_permuted, None),
}


def _apply_layout(t, layout):
    if layout is None:
        return t
    if callable(layout):
        return layout(t)
    return as_layout(t, layout)


@pytest.mark.parametrize("case", LAYOUT_CASES)
@pytest.mark.parametrize("op", ["swiglu", "geglu-tanh"])
def test_non_contiguous_inputs(op, case, device):
    form, shape, *layouts = LAYOUT_CASES[case]
    inputs = make_inputs(shape, torch.float16, device, form, seed=5)
    inputs = [_apply_layout(t, layout) for t, layout in zip(inputs, layouts)]
    assert not all(t.is_contiguous() for t in inputs)
    check_against_pytorch(OPS[op], inputs)


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous_output_grad(op, device):
    check_against_pytorch(OPS[op], make_inputs((3, 760), torch.bfloat16, device, "separate"), grad_layout="strided")
    check_against_pytorch(OPS[op], make_inputs((3, 760), torch.bfloat16, device, "packed"), grad_layout="transposed")


@pytest.mark.parametrize("op", OPS)
def test_halves_of_a_packed_tensor_passed_separately(op, device):
    """``op(p[..., :h], p[..., h:])`` with p a leaf: the same output and the same packed gradient
    of p, bit for bit, as ``op(p)``, and as accurate as PyTorch."""
    (packed,) = make_inputs((199, 72), torch.bfloat16, device, "packed", seed=7)
    hidden = packed.shape[-1] // 2
    grad_output = random_tensor((199, hidden), torch.bfloat16, device, seed=8)

    def as_halves(p):
        return OPS[op].blockfuse(p[..., :hidden], p[..., hidden:])

    check_against_pytorch(OPS[op], [packed], run_ours=as_halves)
    halves = forward_backward(as_halves, [packed], grad_output)
    whole = forward_backward(OPS[op].blockfuse, [packed], grad_output)
    assert torch.equal(halves[0], whole[0])
    assert torch.equal(halves[1][0], whole[1][0])


@pytest.mark.usefixtures("requires_triton")
def test_packed_input_is_read_in_place(device):
    """The kernels read the two halves of a packed tensor (contiguous, or with padded rows) as
    views of it: no copy."""
    (packed,) = make_inputs((5, 760), torch.bfloat16, device, "packed")
    for tensor in (packed, row_padded(packed)):
        gate, up, hidden = _halves(tensor, None)
        assert hidden == 760
        assert gate.data_ptr() == tensor.data_ptr()
        assert up.data_ptr() == tensor.data_ptr() + hidden * tensor.element_size()
        assert gate.stride() == up.stride() == (tensor.stride(0), 1)


# ---------------------------------------------------------------------------------------------
# Gradients: packed layout, some inputs only, nothing saved beyond the inputs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("op", OPS)
def test_packed_gradient_layout(op, dtype, device):
    """The packed form's gradient is one [..., 2 * hidden] tensor: dgate in the first half, dup in
    the second, each equal bit for bit to the separate form's; the outputs are equal too."""
    gate, up = make_inputs((2, 3, 760), dtype, device, "separate", seed=11)
    packed = torch.cat([gate, up], dim=-1)
    grad_output = random_tensor((2, 3, 760), dtype, device, seed=12)
    separate = forward_backward(OPS[op].blockfuse, [gate, up], grad_output)
    whole = forward_backward(OPS[op].blockfuse, [packed], grad_output)
    (dpacked,) = whole[1]
    assert dpacked.shape == (2, 3, 1520) and dpacked.dtype == dtype
    # The reference path (CPU without the interpreter) may take another vectorized loop for the
    # chunked halves than for whole tensors: the same values up to the last bit.
    exact = use_triton(gate)
    for a, b, name in ((whole[0], separate[0], "out"), (dpacked[..., :760], separate[1][0], "first half: dgate"),
                       (dpacked[..., 760:], separate[1][1], "second half: dup")):
        if exact:
            assert torch.equal(a, b), name
        else:
            torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("needs_grad", ["gate", "up", "none"])
@pytest.mark.parametrize("op", ["swiglu", "geglu-none"])
def test_grads_of_some_inputs(op, needs_grad, device):
    """Only one input requires grad (a frozen branch), or none (inference): the grad that is asked
    for equals that of the full backward, bit for bit, and the output is unchanged."""
    inputs = make_inputs((3, 760), torch.float32, device, "separate")
    grad_output = random_tensor((3, 760), torch.float32, device, seed=100)
    full_output, full_grads = forward_backward(OPS[op].blockfuse, inputs, grad_output)
    tensors = [t.detach().clone() for t in inputs]
    if needs_grad == "none":
        output = OPS[op].blockfuse(*tensors)
        assert not output.requires_grad
    else:
        index = ["gate", "up"].index(needs_grad)
        tensors[index].requires_grad_(True)
        output = OPS[op].blockfuse(*tensors)
        (grad,) = torch.autograd.grad(output, [tensors[index]], grad_output)
        assert torch.equal(grad, full_grads[index]), f"d{needs_grad}"
        output.detach_()
    assert torch.equal(output, full_output)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", ["swiglu", "geglu-tanh"])
def test_backward_saves_only_the_inputs(op, form, device):
    """The activation is recomputed in backward: autograd keeps gate and up (or the packed tensor)
    and nothing else, in particular not the output."""
    inputs = [t.requires_grad_() for t in make_inputs((3, 72), torch.bfloat16, device, form)]
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = OPS[op].blockfuse(*inputs)
    assert len(saved) == len(inputs), [tuple(t.shape) for t in saved]
    for tensor, expected in zip(saved, inputs):
        assert tensor.data_ptr() == expected.data_ptr() and tensor.shape == expected.shape
    assert all(t.data_ptr() != out.data_ptr() for t in saved)


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def block(gate, up, packed):
    """Both ops, both forms, both GELU approximations, with ops around them to fuse."""
    a = swiglu(gate, up)
    b = swiglu(packed * 0.5)
    c = geglu(gate, up * 2.0)
    d = geglu(packed, approximate="none")
    return a * b + c - d


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no graph breaks, and the same forward and backward as eager."""
    gate, up = make_inputs((5, 72), torch.float32, device, "separate", seed=1)
    (packed,) = make_inputs((5, 72), torch.float32, device, "packed", seed=3)
    inputs = [gate, up, packed]
    grad_output = random_tensor((5, 72), torch.float32, device, seed=6)

    def run(fn):
        leaf_list = leaves(*inputs)
        out = fn(*leaf_list)
        return [out.detach()] + grads(out, leaf_list, grad_output)

    # Inductor fuses the ops around the activations, so the last bits may differ; aot_eager runs
    # eager's kernels.
    assert_compiles_like_eager(block, run, ["out", "dgate", "dup", "dpacked"], backend=backend,
                               exact=backend == "aot_eager", rtol=1e-5, atol=1e-5, explain_args=inputs)


def test_torch_compile_inference(device):
    """Under torch.no_grad the compiled ops call the forward launcher alone: no autograd node, eager's
    values. A small input (runtime.COMPILED_INFERENCE_MAX_ELEMENTS) takes the reference instead, for
    Inductor to fuse: the reference's values."""
    from blockfuse import runtime

    rows = runtime.COMPILED_INFERENCE_MAX_ELEMENTS // 72 + 1
    for shape in ((rows, 72), (5, 72)):
        gate, up = make_inputs(shape, torch.bfloat16, device, "separate", seed=1)
        (packed,) = make_inputs(shape, torch.bfloat16, device, "packed", seed=3)
        torch._dynamo.reset()
        with torch.no_grad():
            out = torch.compile(block, backend="aot_eager", fullgraph=True)(gate, up, packed)
            expected = block(gate, up, packed)
        assert out.grad_fn is None
        if shape[0] == rows:
            assert torch.equal(out, expected)
        else:
            torch.testing.assert_close(out, expected, rtol=1.6e-2, atol=1e-2)  # bf16: the reference's rounding
    torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
def test_launcher_ops_pass_opcheck(device):
    """Schema, fake tensors (the launchers are their own fake implementations, also with symbolic
    shapes) and AOT dispatch of the launcher ops ``blockfuse::gated_fwd`` / ``gated_bwd``, as
    ``torch.library.opcheck`` checks them. They have no autograd of their own: that is
    ``_GatedFunction``'s, so the inputs do not require grad."""
    from blockfuse.ops.gated import _gated_backward, _gated_forward

    assert str(_gated_forward.op) == "blockfuse.gated_fwd.default"
    assert str(_gated_backward.op) == "blockfuse.gated_bwd.default"
    gate, up = make_inputs((3, 72), torch.float32, device, "separate")
    (packed,) = make_inputs((3, 72), torch.float32, device, "packed")
    for args in ((gate, up, "silu"), (packed, None, "gelu_tanh"), (gate, up, "gelu")):
        torch.library.opcheck(_gated_forward.op, args)
    dy = random_tensor((3, 72), torch.float32, device, seed=9)
    backward_cases = [(dy, gate, up, "silu", False, True), (dy, gate, up, "gelu_tanh", True, True),
                      (dy, packed, None, "gelu", True, False)]
    for args in backward_cases:
        torch.library.opcheck(_gated_backward.op, args)


# ---------------------------------------------------------------------------------------------
# CUDA: the performance path and big tensors
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", OPS)
def test_cuda_runs_the_triton_kernels(op, form):
    from blockfuse.runtime import implementation

    assert implementation("cuda") == "triton"
    check_against_pytorch(OPS[op], make_inputs((2048, 14336), torch.bfloat16, "cuda", form))
    check_against_pytorch(OPS[op], make_inputs((199, 4304), torch.bfloat16, "cuda", form))


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["separate", "packed"])
def test_cuda_one_kernel_each_way_and_no_host_sync(form):
    """Forward and backward launch one kernel each (the packed halves are not copied), and
    nothing synchronizes with the host."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    inputs = [t.requires_grad_() for t in make_inputs((4096, 1024), torch.bfloat16, "cuda", form)]
    dy = random_tensor((4096, 1024), torch.bfloat16, "cuda", seed=2)
    torch.autograd.grad(swiglu(*inputs), inputs, dy)  # warm-up: compiles
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda.set_sync_debug_mode("error")  # a synchronizing call raises
        try:
            torch.autograd.grad(swiglu(*inputs), inputs, dy)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
    assert len(kernels) == 2, kernels
    assert sum("_gated_fwd_kernel" in k for k in kernels) == 1 and sum("_gated_bwd_kernel" in k for k in kernels) == 1


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("shape", [(199, 72), (9, 4400), (5, 760)], ids=shape_id)
@pytest.mark.parametrize("form", ["separate", "packed"])
def test_two_dimensional_grid_gives_the_same_values(form, shape, device):
    """``activation.TILES.grid_2d`` (each program's tile from two program ids, no division) computes bit for bit what
    the one-dimensional grid does, forward and backward, where the pass has several row blocks and, at 4400 wide,
    several column blocks (small tiles, so that 199 rows take many programs)."""
    from blockfuse.ops import activation, gated

    inputs = make_inputs(shape, torch.bfloat16, device, form)
    grad_output = random_tensor(shape, torch.bfloat16, device, seed=100)
    results = {}
    for grid_2d in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(activation, "TILES", dataclasses.replace(activation.TILES, grid_2d=grid_2d))
            patch.setattr(gated, "TILES", dataclasses.replace(gated.TILES, forward=512, forward_per_warp=256,
                                                              backward=1024, backward_per_warp=256))
            results[grid_2d] = forward_backward(OPS["swiglu"].blockfuse, inputs, grad_output)
    (out_1d, grads_1d), (out_2d, grads_2d) = results[False], results[True]
    assert torch.equal(out_1d, out_2d)
    assert all(torch.equal(a, b) for a, b in zip(grads_1d, grads_2d))
    assert out_1d.abs().max() > 0 and all(g.abs().max() > 0 for g in grads_1d)


def test_tile_grid_falls_back_to_one_dimension_past_the_grids_rows(monkeypatch):
    from blockfuse.ops import activation

    monkeypatch.setattr(activation, "TILES", dataclasses.replace(activation.TILES, grid_2d=True))
    assert activation.tile_grid(2048, 4400, 1, 512) == ((9, 2048), True)
    assert activation.tile_grid(65535 * 4, 1024, 4, 1024) == ((1, 65535), True)
    assert activation.tile_grid(65535 * 4 + 1, 1024, 4, 1024) == ((65536,), False)
    monkeypatch.setattr(activation, "TILES", dataclasses.replace(activation.TILES, grid_2d=False))
    assert activation.tile_grid(2048, 4400, 1, 512) == ((9 * 2048,), False)


@pytest.mark.gpu
def test_cuda_offsets_beyond_int32():
    """A packed [32769, 65536] bf16 tensor: its last rows start past 2**31 elements."""
    rows, hidden = 32769, 32768
    g = torch.Generator(device="cuda").manual_seed(0)
    packed = torch.randn((rows, 2 * hidden), generator=g, device="cuda", dtype=torch.bfloat16).requires_grad_()
    out = swiglu(packed)
    dy = torch.randn((rows, hidden), generator=g, device="cuda", dtype=torch.bfloat16)
    (dpacked,) = torch.autograd.grad(out, [packed], dy)
    tail = packed.detach()[-3:].double().requires_grad_()
    expected = swiglu_ref(tail)
    (expected_grad,) = torch.autograd.grad(expected, [tail], dy[-3:].double())
    assert relative_error(out[-3:], expected) < 1e-2
    assert relative_error(dpacked[-3:], expected_grad) < 1e-2


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _bad_calls():
    g = random_tensor((3, 8), torch.float32)
    u = random_tensor((3, 8), torch.float32, seed=1)
    int_g = torch.randint(1, 5, (3, 8), generator=torch.Generator().manual_seed(0))
    meta_u = torch.empty((3, 8), device="meta")
    return [
        ("swiglu-up-shape", lambda: swiglu(g, u[:, :7]), ValueError, "up: expected shape"),
        ("geglu-up-rows", lambda: geglu(g, u[:2]), ValueError, "up: expected shape"),
        ("swiglu-packed-odd", lambda: swiglu(g[:, :7]), ValueError, "gate: .*even"),
        ("geglu-packed-odd", lambda: geglu(g[:, :5]), ValueError, "gate: .*even"),
        ("swiglu-int-gate", lambda: swiglu(int_g, int_g), TypeError, "gate: expected a float"),
        ("geglu-int-packed", lambda: geglu(int_g), TypeError, "gate: expected a float"),
        ("swiglu-int-up", lambda: swiglu(g, int_g), TypeError, "up: expected dtype"),
        ("geglu-up-dtype", lambda: geglu(g, u.half()), TypeError, "up: expected dtype"),
        ("geglu-approximate", lambda: geglu(g, u, approximate="erf"), ValueError, "approximate"),
        ("geglu-approximate-none", lambda: geglu(g, u, approximate=None), ValueError, "approximate"),
        ("swiglu-up-device", lambda: swiglu(g, meta_u), ValueError, "up: expected a tensor on cpu"),
        ("swiglu-gate-not-tensor", lambda: swiglu([1.0, 2.0], u), TypeError, "gate: expected a Tensor"),
        ("geglu-up-not-tensor", lambda: geglu(g, 2.0), TypeError, "up: expected a Tensor"),
        ("swiglu-scalar", lambda: swiglu(g[0, 0], u[0, 0]), ValueError, "gate: expected at least one"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    _, call, error, message = _bad_calls()[case]
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------------------------
# The references beside the kernels, float64, and the CPU fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", OPS)
def test_reference_in_float64_matches_pytorch(op, form):
    """``*_ref`` on float64 inputs (the documented oracle) equals PyTorch's composition in float64."""
    inputs = make_inputs((3, 760), torch.float64, "cpu", form)
    grad_output = random_tensor((3, 760), torch.float64, "cpu", seed=100)
    reference = forward_backward(OPS[op].reference, inputs, grad_output)
    expected = forward_backward(OPS[op].pytorch, inputs, grad_output)
    for a, b, name in zip([reference[0], *reference[1]], [expected[0], *expected[1]], ["out", *grad_names(inputs)]):
        assert a.dtype == torch.float64, f"{name}: {a.dtype}"
        assert relative_error(a, b) < 1e-14, f"{name}: relative error {relative_error(a, b):.3e}"


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("op", OPS)
def test_reference_in_low_precision(op, dtype):
    """The reference (what CPU tensors use without Triton) is as accurate as PyTorch, forward and
    backward, and keeps the input dtype."""
    inputs = make_inputs((3, 760), dtype, "cpu", "separate")
    check_against_pytorch(OPS[op], inputs, run_ours=OPS[op].reference)


@pytest.mark.parametrize("form", ["separate", "packed"])
@pytest.mark.parametrize("op", ["swiglu", "geglu-none"])
def test_float64_runs_the_reference(op, form, device):
    """float64 inputs take the reference path on every device (no fp64 kernels): bit for bit."""
    inputs = make_inputs((3, 72), torch.float64, device, form)
    grad_output = random_tensor((3, 72), torch.float64, device, seed=100)
    ours = forward_backward(OPS[op].blockfuse, inputs, grad_output)
    reference = forward_backward(OPS[op].reference, inputs, grad_output)
    for a, b in zip([ours[0], *ours[1]], [reference[0], *reference[1]]):
        assert torch.equal(a, b)



FALLBACK_SCRIPT = textwrap.dedent(
    """
    import torch
    from blockfuse.ops.gated import geglu, geglu_ref, swiglu, swiglu_ref
    from blockfuse.runtime import implementation

    assert implementation("cpu") == "reference", implementation("cpu")
    gen = torch.Generator().manual_seed(0)
    g = (torch.randn(3, 760, generator=gen) * 2).bfloat16()
    u = torch.randn(3, 760, generator=gen).bfloat16()
    p = torch.cat([g, u], dim=-1)
    dy = torch.randn(3, 760, generator=gen).bfloat16()
    calls = [
        (swiglu, swiglu_ref, {}),
        (geglu, geglu_ref, {"approximate": "tanh"}),
        (geglu, geglu_ref, {"approximate": "none"}),
    ]
    for ours, ref, kwargs in calls:
        for inputs in ((g, u), (p,)):
            a = [t.clone().requires_grad_() for t in inputs]
            b = [t.clone().requires_grad_() for t in inputs]
            out, expected = ours(*a, **kwargs), ref(*b, **kwargs)
            assert torch.equal(out, expected), (ours.__name__, kwargs, len(inputs))
            out.backward(dy)
            expected.backward(dy)
            for x, y in zip(a, b):
                assert torch.equal(x.grad, y.grad), (ours.__name__, kwargs, len(inputs))
    print("reference fallback ok")
    """
)


def test_cpu_without_interpreter_uses_the_reference():
    assert_runs_without_interpreter(FALLBACK_SCRIPT)


@pytest.mark.parametrize("knob, inline", [(None, True), ("0", False)])
def test_fast_mufu_knob_picks_the_activations_forms(knob, inline):
    """``BLOCKFUSE_FAST_MUFU=0`` (read at import) gives the compiled kernels the plain exp2 and division; by default
    they take the inline-asm MUFU forms (a fresh process without the interpreter: the choice is made at import)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "BLOCKFUSE_FAST_MUFU")}
    if knob is not None:
        env["BLOCKFUSE_FAST_MUFU"] = knob
    code = ("import inspect, blockfuse.ops.activation as a; "
            "print(a.FAST_MUFU, 'inline_asm' in inspect.getsource(a.fast_exp2.fn), "
            "'inline_asm' in inspect.getsource(a.fast_rcp.fn))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(inline)] * 3
