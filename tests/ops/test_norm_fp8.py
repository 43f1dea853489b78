"""Tests of the norms' FP8 output option (``fp8="rowwise"`` / ``"tensorwise"``, ``blockfuse/ops/norm.py``).

The option writes the normalized output in e4m3 with its scale in the same pass as the norm. It is checked
two ways:

* exactly, against the op's own high-precision output: for float32 inputs at the widths tested here the FP8
  kernel computes the same fp32 output as the op without FP8 (the same code, the same order: the same tile; at
  widths where the FP8 forward takes a tile of its own, e.g. LayerNorm at 1152, 1280, 2880 or 5120, the rows are
  summed in another order and the scales differ by 1-4 fp32 ulps, a fuzz of unlisted shapes found), so its scale
  must equal that output's
  amax / 448 (rowwise) or the history's (tensorwise) bit for bit, and its values must be
  ``(y * (1 / scale)).to(float8_e4m3fn)`` bit for bit: the kernel multiplies by the reciprocal of the scale
  (ops/fp8.py, ``to_e4m3``). In Triton's interpreter the FP8 rounding is emulated exactly (ops/fp8.py's
  ``_to_fp8``); on a GPU the compiler may contract the two kernels' arithmetic differently, so there one FP8
  step is allowed;
* against the reference (``rms_norm_ref(..., fp8=...)`` and the others) on low-precision inputs: the reference's
  fp32 output differs from the kernel's in the last bits (another order of operations, PyTorch's GELU), so a
  value may land one FP8 step away where it sits near a rounding tie; scales agree to a few fp32 ulps.

And the recipe: the delayed scaling's history (scale 1.0 before any amax, then max(history) / 448; each call's
amax rolled in, newest first; values past the history's range saturate), every norm form, the residual streams
written beside the FP8 output, wide rows (the chunked path's extra pass), 3-D and non-contiguous inputs,
``torch.compile(fullgraph=True)``, a norm feeding ``fp8_linear`` within FP8's error of bf16, and bad inputs.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

import blockfuse
from blockfuse.ops import fp8, launch, norm
from blockfuse.ops.fp8 import Float8Scaling, fp8_linear
from blockfuse.runtime import COMPILED_INFERENCE_MAX_ELEMENTS
from tests.helpers import assert_compiles_like_eager, downcast, interpreter_truncates, random_tensor, relative_error

E4M3 = torch.float8_e4m3fn
RECIPES = ("rowwise", "tensorwise")
# Forms of the norms: (functional, keyword arguments beside x, weight and bias, has weight, has bias).
FORMS = {
    "ln": ("layer_norm", {}, True, True),
    "ln-nobias": ("layer_norm", {}, True, False),
    "ln-noaffine": ("layer_norm", {}, False, False),
    "rms": ("rms_norm", {}, True, False),
    "rms-castfirst": ("rms_norm", {"cast_before_weight": True}, True, False),
    "rms-noweight": ("rms_norm", {}, False, False),
    "ln-gelu": ("layer_norm_gelu", {}, True, True),
    "ln-gelu-erf": ("layer_norm_gelu", {"approximate": "none"}, True, True),
}


def _width_with_a_tail() -> int:
    """A width the forward holds as a head and a tail (norm.row_pieces), under the launch rule norm._tile has now
    (rows past TAIL_FROM_LANES lanes only, as it stands: 8264 -> 8192 + 128)."""
    for n in (760, 4304, 8264, 11008):
        if norm.fp8_forward_tile(n).tail:
            return n
    raise AssertionError("no width with a tail: update the candidates to norm._tile's rule")


# Widths that are not powers of two, padded to one tile or held as a head and a tail.
TAIL_WIDTH = _width_with_a_tail()
WIDTHS = tuple(sorted({72, 760, 4304, TAIL_WIDTH}))
# Past FWD_MAX_LANES: rows in chunks, the rowwise scale from an extra pass.
WIDE = norm.TUNING.fwd_max_lanes + 16


def inputs(shape, dtype=torch.bfloat16, *, seed=0, layout="contiguous", device="cpu", residual=False):
    """x with a nonzero mean, a weight around 1, a bias around 0 (never constant), a residual."""
    n = shape[-1]
    x = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=0.5, layout=layout)
    w = random_tensor((n,), dtype, device, seed=seed + 1, scale=0.5, offset=1.0)
    b = random_tensor((n,), dtype, device, seed=seed + 2, scale=0.5)
    r = random_tensor(shape, dtype, device, seed=seed + 3, scale=2.0, offset=-0.25) if residual else None
    return x, w, b, r


def call(form, x, w, b, reference=False, **kwargs):
    name, extra, has_w, has_b = FORMS[form]
    fn = getattr(blockfuse, name + ("_ref" if reference else ""))
    args = (x, w if has_w else None) + ((b if has_b else None,) if name != "rms_norm" else ())
    return fn(*args, **extra, **kwargs)


def bits(t):
    return t.view(torch.uint8)


def fp8_steps(a, b):
    """How many e4m3 steps apart two FP8 tensors are, elementwise (codes of one sign are ordered like the values;
    +0 and -0 are the same point)."""
    def ordinal(t):
        code = bits(t).int()
        magnitude = code & 127
        return torch.where(code >= 128, -magnitude, magnitude)

    return (ordinal(a) - ordinal(b)).abs()


def cast(y, scale):
    """The cast the kernels make: ``y`` times the reciprocal of its scale, clamped, to e4m3."""
    return (y.float() * (1.0 / scale)).clamp(-448, 448).to(E4M3)


def assert_quantized(q, scale, y, device, name="y"):
    """``q`` is ``cast(y, scale)``: bit for bit in the interpreter, within one FP8 step on a GPU (module doc)."""
    assert q.dtype == E4M3 and q.shape == y.shape, (q.dtype, q.shape)
    expected = cast(y, scale)
    if device == "cpu":
        assert torch.equal(bits(q), bits(expected)), f"{name}: {(bits(q) != bits(expected)).sum().item()} codes differ"
    else:
        assert fp8_steps(q, expected).max().item() <= 1, name


def assert_same(actual, expected, device, name="value"):
    """Equal bit for bit in the interpreter; on a GPU within a few fp32 ulps: there the FP8 kernel and the op
    without FP8 may sum and contract their fp32 arithmetic in another order (module docstring)."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected)
    if device == "cpu":
        assert torch.equal(actual, expected.to(actual.device)), f"{name}: {actual} != {expected}"
    else:  # NOTE: an absolute part too: y = residual + norm(x) may cancel to near 0 (a relative error without
        # bound); 1e-6 of the largest value is still far below a wrong column's or row's error.
        expected = expected.to(actual)
        atol = 1e-6 * expected.abs().max().item() if expected.is_floating_point() else 0
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=atol, msg=name)


def assert_near_reference(q, scale, y_ref, name="y", equal_fraction=0.98):
    """Against the reference's fp32 output ``y_ref``: the codes within one FP8 step of its cast with the kernel's
    scale, almost all equal (a kernel off by a step everywhere fails)."""
    steps = fp8_steps(q, cast(y_ref, scale))
    assert steps.max().item() <= 1, f"{name}: {steps.max().item()} FP8 steps from the reference's cast"
    off = (steps > 0).float().mean().item()
    assert off < 1 - equal_fraction, f"{name}: {off:.3f} of the values one step off"


def amax_scale(y, dim=None):
    """``max(amax, 1e-12) / 448`` in fp32, keepdim (the whole tensor, 0-d, for dim None)."""
    a = y.float().abs().amax() if dim is None else y.float().abs().amax(dim, keepdim=True)
    # By a tensor: CUDA divides by a Python number as a product with its reciprocal (one ulp off at times).
    return a.clamp(min=1e-12) / torch.full((), 448.0, device=a.device)


@pytest.fixture
def captured_reference(monkeypatch):
    """Runs a norm's reference and returns its fp32 output, the value it quantizes (the FP8 arguments'
    reference path captures it where it quantizes)."""

    def run(form, x, w, b, **kwargs):
        seen = {}
        original = norm.quantize_output_ref

        def capture(y, recipe, scaling=None):
            seen["y"] = y.detach().clone()
            return original(y, recipe, scaling)

        monkeypatch.setattr(norm, "quantize_output_ref", capture)
        try:
            with torch.no_grad():
                call(form, x, w, b, reference=True, fp8="rowwise", **kwargs)
        finally:
            monkeypatch.setattr(norm, "quantize_output_ref", original)
        return seen["y"]

    return run


@pytest.fixture(autouse=True)
def plain_forward_sums_like_the_fp8_one():
    """The op without FP8 sums a row in pieces in the FP8 forward's order (FWD_JOINT_SUMS = FP8_FWD_JOINT_SUMS, the
    NOTE above the latter): the exact comparisons here need the same arithmetic in both (module docstring);
    test_joint_sums_in_both_forwards covers the FP8 forward's joint sums."""
    with norm.tuned(FWD_JOINT_SUMS=norm.TUNING.fp8_fwd_joint_sums):
        yield


# ---------------------------------------------------------------------------------------------
# Every form, against the op's own output (float32: exact) and against the reference (bf16)
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("form", FORMS)
def test_fp32_input_quantizes_its_own_output_exactly(form, n, device):
    """Rowwise: scales = amax / 448 of the op's own fp32 output, values its cast. Tensorwise: the first call's
    scale is 1.0 (no history), the second's the first's amax / 448, each call's amax recorded."""
    x, w, b, _ = inputs((3, n) if n > 100 else (37, n), torch.float32, seed=n, device=device)
    with torch.no_grad():
        y = call(form, x, w, b)
        q, scale = call(form, x, w, b, fp8="rowwise")
        assert scale.shape == (x.shape[0], 1) and scale.dtype == torch.float32
        assert_same(scale, amax_scale(y, -1), device, "scale")
        assert_quantized(q, scale, y, device)
        scaling = Float8Scaling.new(device=device)
        q1, scale1 = call(form, x, w, b, fp8="tensorwise", fp8_scaling=scaling)
        assert scale1.shape == () and scale1.item() == 1.0
        assert_quantized(q1, scale1, y, device)
        assert_same(scaling.history[0], y.abs().amax(), device, "recorded amax")
        assert not scaling.history[1:].any()
        assert scaling.amax.item() == 0.0  # the scratch is zero again for the next call
        q2, scale2 = call(form, x, w, b, fp8="tensorwise", fp8_scaling=scaling)
        assert_same(scale2, amax_scale(y), device, "scale")
        assert_quantized(q2, scale2, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ("rms", "ln"))
def test_joint_sums_in_both_forwards(form, device):
    """FP8_FWD_JOINT_SUMS (off by default: the NOTE above it) with FWD_JOINT_SUMS: both forwards sum a row in pieces
    jointly, and the FP8 one's scale and values are again the plain output's, exactly (the interpreter's sums of
    the two orders differ in the last bits for these rows, so an FP8 forward summing piece by piece fails here)."""
    n = TAIL_WIDTH
    x, w, b, _ = inputs((8, n), torch.float32, seed=n + 2, device=device)
    assert not norm.joint_sums_threads(norm.fp8_forward_tile(n, 8), forward=True, fp8=True)  # the default: pieces
    with torch.no_grad():
        y_pieces = call(form, x, w, b)
    with norm.tuned(FWD_JOINT_SUMS=True, FP8_FWD_JOINT_SUMS=True), torch.no_grad():
        assert norm.joint_sums_threads(norm.fp8_forward_tile(n, 8), forward=True, fp8=True) > 0
        y = call(form, x, w, b)
        q, scale = call(form, x, w, b, fp8="rowwise")
    if device == "cpu":
        assert not torch.equal(y, y_pieces), "inputs whose two summation orders agree test nothing here"
    assert_same(scale, amax_scale(y, -1), device, "scale")
    assert_quantized(q, scale, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("form", FORMS)
def test_bf16_input_against_the_reference(form, n, recipe, device, captured_reference):
    x, w, b, _ = inputs((5, n), seed=2 * n, device=device)
    y_ref = captured_reference(form, x, w, b)
    # NOTE: cast_before_weight rounds the normalized row to bf16 before the weight; Triton's interpreter rounds
    # toward zero there (tests/helpers.py, interpreter_truncates), the reference to nearest: an output one bf16
    # ulp (2^-8) apart at about half the values, so more of them cross an FP8 rounding boundary.
    truncated = FORMS[form][1].get("cast_before_weight", False) and interpreter_truncates(torch.bfloat16, device)
    rtol, equal_fraction = (2.0**-7, 0.9) if truncated else (1e-5, 0.98)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        if scaling is not None:
            call(form, x, w, b, fp8=recipe, fp8_scaling=scaling)  # records the amax the next call scales by
            assert scaling.history[0].item() == pytest.approx(y_ref.abs().amax().item(), rel=rtol)
        q, scale = call(form, x, w, b, fp8=recipe, fp8_scaling=scaling)
    expected = amax_scale(y_ref, -1 if recipe == "rowwise" else None)
    torch.testing.assert_close(scale, expected, rtol=rtol, atol=0)
    assert_near_reference(q, scale, y_ref, equal_fraction=equal_fraction)
    # The reference itself quantizes the same way (same scale's cast).
    ref_scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        if ref_scaling is not None:
            call(form, x, w, b, reference=True, fp8=recipe, fp8_scaling=ref_scaling)
        q_ref, scale_ref = call(form, x, w, b, reference=True, fp8=recipe, fp8_scaling=ref_scaling)
    torch.testing.assert_close(scale_ref, expected, rtol=1e-6, atol=0)
    assert fp8_steps(q, q_ref).max().item() <= 1


# ---------------------------------------------------------------------------------------------
# The residual forms: the FP8 output and the residual stream beside it
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("n", tuple(sorted({760, TAIL_WIDTH})))
@pytest.mark.parametrize("variant", ("ln", "rms", "rms-castfirst"))
@pytest.mark.parametrize("mode", ("pre", "post"))
def test_residual_forms_write_the_stream_and_the_fp8_output(mode, variant, n, recipe, device):
    """Pre: ``((y_fp8, scale), s)``; post: ``((y_fp8, scale), y)`` with y the output in x's dtype (the next
    residual stream). Both streams equal the op's without FP8 bit for bit; the FP8 output is the cast of the
    normalized output (pre: norm(s); post: residual + norm(x)) in fp32 (float32 inputs: exactly)."""
    for dtype in (torch.float32, torch.bfloat16):
        x, w, b, r = inputs((3, n), dtype, seed=n + 7, device=device, residual=True)
        scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
        with torch.no_grad():
            plain = call(variant, x, w, b, residual=r, residual_mode=mode)
            if scaling is not None:
                call(variant, x, w, b, residual=r, residual_mode=mode, fp8=recipe, fp8_scaling=scaling)
            (q, scale), stream = call(variant, x, w, b, residual=r, residual_mode=mode, fp8=recipe, fp8_scaling=scaling)
        y_plain, expected_stream = plain if mode == "pre" else (plain, plain)
        assert stream.dtype == dtype
        assert_same(stream, expected_stream, device, "stream")
        if dtype == torch.float32:
            assert_same(scale, amax_scale(y_plain, -1 if recipe == "rowwise" else None), device, "scale")
            assert_quantized(q, scale, y_plain, device)
        else:  # the FP8 output comes from the fp32 output, not from its bf16 rounding: within a step of that
            assert fp8_steps(q, cast(y_plain, scale)).max().item() <= 1


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("mode", ("pre", "post"))
def test_dropout_with_an_fp8_output(mode, device):
    """Dropout (training=True, forward only) draws the same mask as the op without FP8: the same streams."""
    x, w, b, r = inputs((5, 760), torch.float32, seed=3, device=device, residual=True)
    with torch.no_grad():
        torch.manual_seed(11)
        plain = blockfuse.layer_norm(x, w, b, residual=r, residual_mode=mode, dropout_p=0.3, training=True)
        torch.manual_seed(11)
        (q, scale), stream = blockfuse.layer_norm(x, w, b, residual=r, residual_mode=mode, dropout_p=0.3,
                                                  training=True, fp8="rowwise")
    y_plain, expected_stream = plain if mode == "pre" else (plain, plain)
    assert_same(stream, expected_stream, device, "stream")
    assert_same(scale, amax_scale(y_plain, -1), device, "scale")
    assert_quantized(q, scale, y_plain, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("n", WIDTHS)
def test_masked_lanes_do_not_count(n, recipe, device):
    """Rows whose mean is large: a LayerNorm without affine parameters would give the masked lanes past N (the
    tail's, and the rows past M's) -mean * rstd, about -100 here, against outputs of a few units. The scale
    must see only the real ones."""
    x = random_tensor((5, n), torch.float32, device, seed=43, offset=100.0)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        y = blockfuse.layer_norm(x)
        if scaling is not None:
            blockfuse.layer_norm(x, fp8=recipe, fp8_scaling=scaling)
        q, scale = blockfuse.layer_norm(x, fp8=recipe, fp8_scaling=scaling)
    assert y.abs().amax() < 10
    assert_same(scale, amax_scale(y, -1 if recipe == "rowwise" else None), device, "scale")
    assert_quantized(q, scale, y, device)


# ---------------------------------------------------------------------------------------------
# The tensorwise recipe: delayed scaling
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("rows", (37, 20000))
@pytest.mark.parametrize("history_len", (1, 3, 16))
def test_the_history_rolls_newest_first(history_len, rows, device):
    """Calls on inputs of growing magnitude: the history holds the last ``history_len`` amaxes, newest first, and
    each call's scale is the max of the history before it, with every program's amax folded (10 programs, and
    on CUDA 5000), and the amax scratch zero after each call."""
    if rows > 1000 and device != "cuda":
        pytest.skip("thousands of programs at once: on CUDA (the interpreter runs one after another)")
    scaling = Float8Scaling.new(history_len, device=device)
    x, w, b, _ = inputs((rows, 760), torch.float32, seed=5, device=device)
    amaxes = []
    with torch.no_grad():
        for k in range(5):
            xk = x * (k + 1)  # LayerNorm is scale-invariant: the bias-free output's amax does not grow ...
            bk = b * (k + 1)  # ... but the bias's share does
            y = blockfuse.layer_norm(xk, w, bk)
            expected_scale = amax_scale(torch.tensor(amaxes[-history_len:])) if amaxes else torch.tensor(1.0)
            q, scale = blockfuse.layer_norm(xk, w, bk, fp8="tensorwise", fp8_scaling=scaling)
            assert_same(scale, expected_scale, device, f"scale of call {k}")
            assert_quantized(q, scale, y, device)
            amaxes.append(y.abs().amax().item())
            newest_first = list(reversed(amaxes))[:history_len]
            expected_history = newest_first + [0.0] * (history_len - len(newest_first))
            assert_same(scaling.history, torch.tensor(expected_history), device, "history")
            assert not scaling.amax.any()
    assert len(set(amaxes)) == len(amaxes)  # the amaxes differ: the order is checked


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ("rms", "ln"))
def test_the_history_rolls_in_cuda_graph_replays(form, device):
    """A tensorwise norm captured in a CUDA graph rolls its history once a replay: after 3 replays of one input,
    the history holds its amax 3 times and the scratch is zero."""
    if device != "cuda":
        pytest.skip("CUDA graphs")
    x, w, b, _ = inputs((4099, 4096), torch.bfloat16, seed=41, device=device)
    scaling = Float8Scaling.new(4, device=device)
    with torch.no_grad():
        y = call(form, x, w, b)
        call(form, x, w, b, fp8="tensorwise", fp8_scaling=Float8Scaling.new(4, device=device))  # compiled
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(form, x, w, b, fp8="tensorwise", fp8_scaling=scaling)
        scaling.history.zero_()
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    amax = y.float().abs().amax()
    torch.testing.assert_close(scaling.history, torch.stack([amax, amax, amax, torch.zeros_like(amax)]),
                               rtol=2e-2, atol=0)
    assert not scaling.amax.any()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ("rms", "ln"))
def test_the_rolls_by_programmatic_dependent_launch_change_no_bit(form, device, monkeypatch):
    """Eight tensorwise calls back to back, no synchronization between them, on outputs whose amax grows a call:
    with the rolls launched as programmatic dependent launches (sm_90 and later: each may start while its norm's
    last programs run) every e4m3 byte, scale and history entry is what plain launches give. 20000 rows: the
    programs' atomics are still landing when the roll is placed."""
    if device != "cuda":
        pytest.skip("programmatic dependent launch is a CUDA launch")
    x, w, b, _ = inputs((20000, 2048), torch.bfloat16, seed=43, device=device)

    def calls():
        scaling = Float8Scaling.new(4, device=device)
        outputs = [call(form, x, w * (k + 1), b * (k + 1), fp8="tensorwise", fp8_scaling=scaling)
                   for k in range(8)]
        torch.cuda.synchronize()
        return outputs, scaling

    with torch.no_grad():
        with_pdl, scaling_pdl = calls()
        monkeypatch.setattr(launch, "PDL", False)
        plain, scaling = calls()
    for k, ((q, scale), (q_plain, scale_plain)) in enumerate(zip(with_pdl, plain)):
        assert torch.equal(bits(q), bits(q_plain)), f"call {k}: e4m3 bytes"
        assert torch.equal(scale, scale_plain), f"call {k}: scale"
    assert torch.equal(scaling_pdl.history, scaling.history) and not scaling_pdl.amax.any()
    assert len(set(scaling.history.tolist())) == 4  # four different amaxes, newest first
    assert scaling.history[0] > scaling.history[3]
    if torch.cuda.get_device_capability(device) >= (9, 0) and not fp8._roll_kernel._plain:  # (cached launches)
        launched = [c.metadata.launch_pdl for c in fp8._roll_kernel.compiled()]
        assert any(launched) and not all(launched), launched  # both ways were launched


def test_traced_launches_take_no_programmatic_launch_branch(monkeypatch):
    """While torch.compile traces, the producers and the roll take their non-PDL branch (Inductor launches
    without PDL; triton 3.6's ``gdc_*`` are impure inline asm, which makes torch take every input of the kernel
    as written), and eagerly on a card with PDL they take it: one decision for both sides."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(fp8._roll_kernel, "_interpreted", False)  # as on a GPU
    monkeypatch.setattr(launch, "_has_pdl", lambda index: True)
    with FakeTensorMode():
        traced = fp8.roll_pdl(torch.empty(4, device="cuda"))
    eager = fp8.roll_pdl(mock.Mock(spec=torch.Tensor, is_cuda=True, get_device=lambda: 0))
    assert (traced, eager) == (False, True)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", tuple(sorted({760, TAIL_WIDTH})))
def test_values_past_the_history_saturate(n, device):
    """A history whose amax is a quarter of this call's: the largest values clamp to +-448 (no inf, no NaN),
    the others are their cast, and the call's true amax is what is recorded."""
    x, w, b, _ = inputs((4, n), torch.float32, seed=9, device=device)
    with torch.no_grad():
        y = blockfuse.rms_norm(x, w)
        scaling = Float8Scaling.new(4, device=device)
        amax = y.abs().amax()
        scaling.history[2] = amax / 4
        q, scale = blockfuse.rms_norm(x, w, fp8="tensorwise", fp8_scaling=scaling)
    assert torch.equal(scale, amax_scale(amax / 4))
    saturated = y.abs() * (1.0 / scale) >= 448
    assert saturated.any() and (~saturated).any()
    assert (q.float()[saturated].abs() == 448).all() and torch.isfinite(q.float()).all()
    assert_quantized(q, scale, y, device)
    assert_same(scaling.history, torch.stack((amax, amax * 0, amax * 0, amax / 4)), device, "history")


@pytest.mark.usefixtures("requires_triton")
def test_a_state_object_per_call_site(device):
    """Two norms with states of their own: each history holds its own tensor's amaxes."""
    x, w, b, _ = inputs((5, 72), torch.float32, seed=4, device=device)
    first, second = Float8Scaling.new(device=device), Float8Scaling.new(device=device)
    with torch.no_grad():
        blockfuse.layer_norm(x, w, b, fp8="tensorwise", fp8_scaling=first)
        blockfuse.rms_norm(x * 3, w * 2, fp8="tensorwise", fp8_scaling=second)
        assert_same(first.history[0], blockfuse.layer_norm(x, w, b).abs().amax(), device, "first")
        assert_same(second.history[0], blockfuse.rms_norm(x * 3, w * 2).abs().amax(), device, "second")
    assert first.history[0] != second.history[0]
    assert first.scale().item() == pytest.approx(first.history[0].item() / 448)


# ---------------------------------------------------------------------------------------------
# Shapes: wide rows, 3-D, non-contiguous, no rows, float64
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("form", ("ln", "rms", "ln-gelu"))
def test_wide_rows_take_the_chunked_path(form, recipe, device):
    """Rows past FWD_MAX_LANES go in chunks; rowwise takes an extra pass for the row's amax."""
    assert norm.fp8_forward_tile(WIDE).num_chunks > 1
    x, w, b, _ = inputs((3, WIDE), torch.float32, seed=13, device=device)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        y = call(form, x, w, b)
        if scaling is not None:
            call(form, x, w, b, fp8=recipe, fp8_scaling=scaling)
        q, scale = call(form, x, w, b, fp8=recipe, fp8_scaling=scaling)
    assert_same(scale, amax_scale(y, -1 if recipe == "rowwise" else None), device, "scale")
    assert_quantized(q, scale, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("plain_rows", (False, True), ids=("own-rows", "plain-rows"))
@pytest.mark.parametrize("n", (2880, 5120, 11008))
@pytest.mark.parametrize("form", ("ln", "rms", "ln-post", "rms-pre"))
def test_both_rows_rules(form, n, plain_rows, device):
    """The FP8 forward's rows from its own rule or from the plain forward's (FP8_FWD_PLAIN_ROWS: the vector tails
    2880 = 2048 + 1024 and 5120 = 4096 + 1024, LayerNorm's 11008 on fewer warps, RMSNorm's chunks at 11008 with the
    rowwise scale's extra pass), both recipes, the residual forms' streams too. On the plain rows (but LayerNorm's
    where those are chunks: RMSNorm's at 11008) the FP8 output is the plain output's cast exactly (float32 inputs:
    the same rows, the same arithmetic; on a GPU only where the warps are the same too, since they shape the
    reductions); else within an FP8 step and the scale within a few fp32 ulps (another summation order: the module
    docstring)."""
    variant, _, mode = form.partition("-")
    residual = {"residual_mode": mode} if mode else {}
    x, w, b, r = inputs((3, n), torch.float32, seed=n + 5, device=device, residual=bool(mode))
    if mode:
        residual["residual"] = r
    with norm.tuned(FP8_FWD_PLAIN_ROWS=plain_rows):
        tile = norm.fp8_forward_tile(n, residual=bool(mode), is_rms=variant == "rms", pre=mode == "pre")
        plain_tile = norm.forward_rule(n, variant == "rms", bool(mode), mode == "pre")
        rows = tile._replace(num_warps=plain_tile.num_warps) == plain_tile  # (its warps: the lanes rule)
        if plain_rows:
            assert rows != (plain_tile.num_chunks > 1) and tile.num_chunks == 1, (tile, plain_tile)
        else:
            own = norm.fp8_forward_rows(n)
            assert (tile.block_m, tile.block_n, tile.tail, tile.block_t) == (own.block_m, own.block_n, own.tail,
                                                                             own.block_t), (tile, own)
        for recipe in RECIPES:
            scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
            with torch.no_grad():
                plain = call(variant, x, w, b, **residual)
                if scaling is not None:
                    call(variant, x, w, b, fp8=recipe, fp8_scaling=scaling, **residual)
                out = call(variant, x, w, b, fp8=recipe, fp8_scaling=scaling, **residual)
            (q, scale), stream = out if mode else (out, None)
            y = plain[0] if mode == "pre" else plain
            if mode:
                assert_same(stream, plain[1] if mode == "pre" else plain, device, "stream")
            expected = amax_scale(y, -1 if recipe == "rowwise" else None)
            # (the same rows: the same arithmetic in the interpreter, and on a GPU with the same warps too)
            if rows and (device == "cpu" or tile == plain_tile):
                assert_same(scale, expected, device, "scale")
                assert_quantized(q, scale, y, device)
            else:
                torch.testing.assert_close(scale, expected, rtol=1e-6, atol=0)
                assert fp8_steps(q, cast(y, scale)).max().item() <= 1


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("layout", ("contiguous", "transposed", "strided"))
def test_higher_rank_and_non_contiguous_inputs(layout, device):
    x, w, b, r = inputs((2, 3, 760), torch.float32, seed=17, layout=layout, device=device, residual=True)
    with torch.no_grad():
        y, s = blockfuse.rms_norm(x, w, residual=r)
        (q, scale), s8 = blockfuse.rms_norm(x, w, residual=r, fp8="rowwise")
    assert q.shape == (2, 3, 760) and q.is_contiguous() and scale.shape == (2, 3, 1)
    assert torch.equal(s8, s)  # pre mode's s: residual + x, the same sum either way
    assert_same(scale, amax_scale(y, -1), device, "scale")
    assert_quantized(q, scale, y, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
def test_no_rows(recipe, device):
    x = torch.empty((0, 760), device=device)
    w = random_tensor((760,), torch.float32, device, seed=1, offset=1.0)
    scaling = Float8Scaling.new(3, device=device) if recipe == "tensorwise" else None
    if scaling is not None:
        scaling.history[0] = 5.0
    with torch.no_grad():
        q, scale = blockfuse.rms_norm(x, w, fp8=recipe, fp8_scaling=scaling)
    assert q.shape == (0, 760) and q.dtype == E4M3
    if recipe == "rowwise":
        assert scale.shape == (0, 1)
    else:  # the history's scale; an amax of 0 recorded, as the reference does
        assert_same(scale, amax_scale(torch.tensor(5.0)), device, "scale")
        assert scaling.history.tolist() == [0.0, 5.0, 0.0]


@pytest.mark.parametrize("recipe", RECIPES)
def test_float64_runs_the_reference(recipe, device):
    """float64 inputs run the reference (the kernels take none): an e4m3 output and fp32 scales all the same."""
    x, w, b, _ = inputs((5, 72), torch.float64, seed=19, device=device)
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        q, scale = blockfuse.layer_norm(x, w, b, fp8=recipe, fp8_scaling=scaling)
        y = F.layer_norm(x, (72,), w, b, 1e-5)
    assert q.dtype == E4M3 and scale.dtype == torch.float32
    if recipe == "rowwise":
        torch.testing.assert_close(scale, amax_scale(y, -1), rtol=1e-6, atol=0)
    else:
        assert scale.item() == 1.0 and scaling.history[0].item() == pytest.approx(y.abs().amax().item())
    assert fp8_steps(q, cast(y, scale)).max().item() <= 1


# ---------------------------------------------------------------------------------------------
# The chain: a norm's FP8 output into fp8_linear
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("mode", (None, "pre", "post"))
def test_norm_into_fp8_linear_is_within_fp8_error_of_bf16(mode, recipe, device):
    """``fp8_linear(y_fp8, w, x_scale=scale)`` as the norm hands them over: within FP8's error of the bf16 chain
    (test_fp8.py's bound for a GEMM of two e4m3 operands: 0.05 relative), and within a rounding's worth of
    ``fp8_linear`` quantizing the bf16 output itself."""
    x, w, _, r = inputs((3, 41, 256), seed=23, device=device, residual=mode is not None)
    weight = random_tensor((96, 256), torch.bfloat16, device, seed=24, scale=256**-0.5)
    kwargs = {} if mode is None else {"residual": r, "residual_mode": mode}
    scaling = Float8Scaling.new(device=device) if recipe == "tensorwise" else None
    with torch.no_grad():
        y = blockfuse.rms_norm(x, w, **kwargs)
        y = y[0] if mode == "pre" else y  # post: the output is the GEMM's input and the residual stream
        if scaling is not None:
            blockfuse.rms_norm(x, w, **kwargs, fp8=recipe, fp8_scaling=scaling)  # the history's first amax
        out = blockfuse.rms_norm(x, w, **kwargs, fp8=recipe, fp8_scaling=scaling)
        q, scale = out if mode is None else out[0]
        chained = fp8_linear(q, weight, x_scale=scale, recipe=recipe)
        exact = F.linear(y.double(), weight.double())
        bf16 = F.linear(y, weight)
        own_cast = fp8_linear(y, weight, recipe=recipe)
    assert chained.shape == (3, 41, 96) and chained.dtype == torch.bfloat16
    assert relative_error(chained, exact) < 0.05
    assert relative_error(chained, bf16) < 0.05
    assert relative_error(chained, own_cast) < 0.02


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def chain(x, residual, w, b, weight, scaling):
    """A pre-norm into an FP8 projection (tensorwise, delayed) and a LayerNorm + GELU into one (rowwise)."""
    (q, scale), s = blockfuse.rms_norm(x, w, residual=residual, fp8="tensorwise", fp8_scaling=scaling)
    h = fp8_linear(q, weight, x_scale=scale, recipe="tensorwise")
    q2, scale2 = blockfuse.layer_norm_gelu(h + s, w, b, fp8="rowwise")
    return fp8_linear(q2, weight, x_scale=scale2, recipe="rowwise"), s


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("rows", (5, 300), ids=("small-reference", "kernels"))
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, rows, device):
    """One graph, no break, eager's results and state. 300 x 256 elements run the kernels; 5 x 256 is below
    runtime.COMPILED_INFERENCE_MAX_ELEMENTS and runs the reference inside the graph (the history updated there
    too), compared with the reference run eagerly."""
    x, w, b, r = inputs((rows, 256), seed=29, device=device, residual=True)
    weight = random_tensor((256, 256), torch.bfloat16, device, seed=30, scale=256**-0.5)
    small = x.numel() <= COMPILED_INFERENCE_MAX_ELEMENTS
    states = {}

    def run(fn):
        scaling = Float8Scaling.new(4, device=device)
        reference = mock.patch.object(norm, "use_triton", lambda *args, **kwargs: False)  # eagerly, the reference
        with torch.no_grad(), reference if small and fn is chain else contextlib.nullcontext():
            results = [t.float() for _ in range(2) for t in fn(x, r, w, b, weight, scaling)]
        states[fn] = scaling.history.clone()
        return results

    # NOTE: aot_eager runs eager's kernels (or reference ops): the same bits. Under Inductor an FP8 value may land
    # one step (2^-3 of it) away: the small case's reference is generated (fp32 sums in another order), and in
    # either case the weights' tensorwise scale may be computed as 448 * (1 / amax) instead of 448 / amax (one
    # fp32 ulp, which moves a weight at a rounding boundary by a step). A step moves an output of the 256-wide
    # projection by up to about 0.08 (measured on an H200: 86 of 76800 outputs past 0.02), and through the
    # second norm the next projection's outputs too. So the streams are compared element by element, the
    # projections' outputs as a whole: a relative error (norm-wise) under 2% (half of FP8's own against fp32)
    # and at most 1% of them past 0.02.
    exact = backend == "aot_eager"
    loose = float("inf")  # the projections, checked below
    compiled, eager = assert_compiles_like_eager(chain, run, ["out1", "s1", "out2", "s2"], backend=backend,
                                                 exact=exact, rtol=(loose, 2e-2, loose, 2e-2),
                                                 atol=(loose, 2e-2, loose, 2e-2))
    for name, mine, theirs in zip(["out1", "s1", "out2", "s2"], compiled, eager):
        if not exact and name.startswith("out"):
            error = ((mine - theirs).norm() / theirs.norm()).item()
            off = ((mine - theirs).abs() > 2e-2 + 2e-2 * theirs.abs()).float().mean().item()
            assert error < 2e-2 and off <= 1e-2, f"{name}: relative error {error:.2e}, {off:.2%} of it past 0.02"
    histories = list(states.values())
    assert histories[0][:2].gt(0).all() and histories[0][2:].eq(0).all()  # two calls recorded
    torch.testing.assert_close(histories[0], histories[1], rtol=1e-5, atol=0)


# ---------------------------------------------------------------------------------------------
# The launcher op, and bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
def test_the_launcher_passes_opcheck(device):
    """Schema (the history and its scratch declared mutated), fake implementation and AOT dispatch of
    ``blockfuse::norm_fwd_fp8`` agree with the kernels."""
    if device != "cpu":
        pytest.skip("the interpreter's custom op")
    x, w, b, r = inputs((6, 72), seed=31, residual=True)
    scaling = Float8Scaling.new(4)
    for residual, mode, history, amax, stats in ((None, norm.NONE, None, None, False), (r, norm.PRE, *scaling, True),
                                                 (r, norm.POST, None, None, True)):
        torch.library.opcheck(torch.ops.blockfuse.norm_fwd_fp8.default,
                              (x, w, b, residual, None, 1e-5, mode, 0.0, False, False, 0, history, amax, stats),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


@pytest.mark.parametrize("tail_warps", (False, True))
def test_fp8_forward_warps_follow_the_lanes(tail_warps):
    """The FP8 forward's warps (norm.fp8_forward_tile's rule) at real models' widths and others: a warp per
    1024-2048 lanes of a one-piece tile (4 warps at 8192 lanes where the plain forward takes 8), the residual
    forms at least 2 warps a row, at most 16; a row in two pieces keeps the plain forward's warps, or with
    FP8_FWD_TAIL_WARPS (on by default: the NOTE above it) counts its head and tail together by the same rule; rows
    in chunks keep the plain forward's warps. Its rows from FP8_FWD_PIECES_FROM_LANES are the plain forward's: 2304,
    4304 in one-row pieces, 5120 in a vector tail, 11008 a wide tail; 1152 in its padded tile."""
    widths = (64, 72, 768, 1000, 1152, 2048, 2304, 2560, 2880, 3072, 4096, 4304, 5120, 6144, 8192, 11008, 14336, 20000)
    with norm.tuned(FP8_FWD_TAIL_WARPS=tail_warps):
        _check_fp8_forward_warps(widths, tail_warps)


def _check_fp8_forward_warps(widths, tail_warps):
    """test_fp8_forward_warps_follow_the_lanes under the FP8_FWD_TAIL_WARPS given."""
    assert norm.fp8_forward_tile(4096).num_warps == 2 and norm.fp8_forward_tile(8192).num_warps == 4
    assert norm.fp8_forward_tile(4304).tail and norm.fp8_forward_tile(2304).tail
    assert not norm.fp8_forward_tile(1152).tail and norm.fp8_forward_tile(5120).tail
    assert norm.fp8_forward_tile(11008, is_rms=True).num_warps == 8  # (RMSNorm's plain chunks: LayerNorm's rows)
    assert norm.fp8_forward_tile(11008, residual=True).num_warps == (8 if tail_warps else 16)  # (the plain: 16)
    assert norm.fp8_forward_tile(3072).num_warps == (2 if tail_warps else 4)
    assert norm.fp8_forward_tile(5632, residual=True).num_warps == (4 if tail_warps else 8)
    for n in widths:
        for residual in (False, True):
            plain = norm.fp8_forward_rows(n, residual=residual)
            tile = norm.fp8_forward_tile(n, residual=residual)
            assert tile._replace(num_warps=plain.num_warps) == plain, (n, residual)  # the same rows and pieces
            if plain.num_chunks > 1 or (plain.tail and not tail_warps):
                assert tile.num_warps == plain.num_warps, n
                continue
            lanes = tile.block_m * tile.lanes
            assert 1 <= tile.num_warps <= 16 and tile.num_warps & (tile.num_warps - 1) == 0, (n, tile)
            assert lanes <= tile.num_warps * norm.TUNING.fp8_fwd_lanes_per_warp, (n, tile)
            if residual:
                assert tile.num_warps >= min(16, 2 * tile.block_m), (n, tile)
            if tile.num_warps > max(1, 2 * tile.block_m if residual else 1):
                assert lanes > (tile.num_warps // 2) * norm.TUNING.fp8_fwd_lanes_per_warp, (n, tile)  # no warp to spare


@pytest.mark.long
@pytest.mark.usefixtures("requires_triton")
def test_every_fp8_launch_compiles_for_sm90(monkeypatch, device):
    """The FP8 kernels as the ops launch them (the norms' forms and tiles: one tile, head + tail with several rows
    and with one row a program, chunked rows; the gated activations; the history's roll), compiled for sm_90
    with Triton's compiler and ptxas in a subprocess, as tests/ops/test_sm90_compile.py does for the others:
    the interpreter accepts code the GPU compiler refuses."""
    if device != "cpu":
        pytest.skip("on a GPU the tests above compile every kernel for real")
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.ops import test_sm90_compile

    monkeypatch.setitem(test_sm90_compile._DTYPES, E4M3, "fp8e4nv")
    launches = test_sm90_compile._record_launches(monkeypatch)
    calls = [  # (form, width, dtype, residual mode)
        ("ln", 72, torch.bfloat16, None), ("rms", 760, torch.bfloat16, "pre"), ("ln", 4304, torch.bfloat16, "post"),
        ("ln-gelu", 4304, torch.bfloat16, None), ("rms-castfirst", WIDE, torch.float32, None),
    ]
    with torch.no_grad():
        for recipe in RECIPES:
            for form, n, dtype, mode in calls:
                x, w, b, r = inputs((3, n), dtype, seed=n, residual=mode is not None)
                kwargs = {} if mode is None else {"residual": r, "residual_mode": mode}
                scaling = Float8Scaling.new() if recipe == "tensorwise" else None
                call(form, x, w, b, fp8=recipe, fp8_scaling=scaling, **kwargs)
            scaling = Float8Scaling.new() if recipe == "tensorwise" else None
            gate = random_tensor((5, 2 * 760), torch.bfloat16, seed=3)
            blockfuse.swiglu(gate, fp8=recipe, fp8_scaling=scaling)
            gate, up = random_tensor((3, 9000), seed=4), random_tensor((3, 9000), seed=5)
            blockfuse.geglu(gate, up, fp8=recipe, fp8_scaling=scaling)
        # a training step's forms: the statistics too, and an FP8 input's columns cast from it (with its row scales)
        x, w, b, r = inputs((3, 760), torch.bfloat16, seed=9, residual=True)
        norm._norm_fwd_fp8(x, w, b, r, None, 1e-5, norm.PRE, 0.0, False, False, 0, None, None, True)
        q, scale = fp8.quantize(x, recipe="rowwise")
        fp8._fp8_quantize(q, E4M3, True, False, True, 16, scale.reshape(-1))
    kernels = {record["kernel"] for record in launches.values()}
    assert {"_norm_fwd_fp8_kernel", "_gated_fwd_fp8_kernel", "_fp8_roll_kernel", "_fp8_cast_kernel",
            "_fp8_amax_kernel"} <= kernels, kernels
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", test_sm90_compile.COMPILE_SCRIPT],
                            input=json.dumps(list(launches.values())), env=env, cwd=Path(__file__).resolve().parents[2],
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["compiled"] == len(launches) and not report["failures"], "\n".join(report["failures"])


def _linear_of(fp8_output, recipe):
    q, scale = fp8_output
    return fp8_linear(q, random_tensor((16, 16)), x_scale=scale, recipe=recipe)


def _bad_calls():
    x, w, b, r = inputs((3, 16), torch.float32, seed=37, residual=True)
    ok = Float8Scaling.new()
    rms = blockfuse.rms_norm
    return [
        ("recipe", lambda: rms(x, w, fp8="blockwise"), ValueError, "fp8"),
        ("dtype-as-recipe", lambda: rms(x, w, fp8=torch.float8_e4m3fn), ValueError, "fp8"),
        ("tensorwise-without-state", lambda: rms(x, w, fp8="tensorwise"), TypeError, "fp8_scaling"),
        ("tensorwise-tensor-as-state", lambda: rms(x, w, fp8="tensorwise", fp8_scaling=ok.history), TypeError,
         "fp8_scaling"),
        ("rowwise-with-state", lambda: rms(x, w, fp8="rowwise", fp8_scaling=ok), ValueError, "fp8_scaling"),
        ("state-without-fp8", lambda: rms(x, w, fp8_scaling=ok), ValueError, "fp8_scaling"),
        ("history-dtype", lambda: rms(x, w, fp8="tensorwise", fp8_scaling=Float8Scaling(ok.history.double(), ok.amax)),
         TypeError, "history"),
        ("history-empty", lambda: rms(x, w, fp8="tensorwise", fp8_scaling=Float8Scaling(ok.history[:0], ok.amax)),
         ValueError, "history"),
        ("amax-shape", lambda: rms(x, w, fp8="tensorwise", fp8_scaling=Float8Scaling(ok.history, ok.history)),
         ValueError, "amax"),
        ("history-strided", lambda: rms(x, w, fp8="tensorwise", fp8_scaling=Float8Scaling(ok.history[::2], ok.amax)),
         ValueError, "history"),
        ("history-length", lambda: Float8Scaling.new(0), ValueError, "history_len"),
        ("grad", lambda: rms(x.clone().requires_grad_(), w, fp8="rowwise"), NotImplementedError, "forward only"),
        ("grad-weight", lambda: blockfuse.layer_norm(x, w.clone().requires_grad_(), b, fp8="rowwise"),
         NotImplementedError, "forward only"),
        ("grad-residual", lambda: rms(x, w, residual=r.clone().requires_grad_(), fp8="rowwise"), NotImplementedError,
         "forward only"),
        ("grad-gelu", lambda: blockfuse.layer_norm_gelu(x.clone().requires_grad_(), fp8="rowwise"),
         NotImplementedError, "forward only"),
        ("int-x", lambda: rms(x.int(), w, fp8="rowwise"), TypeError, "x"),
        # A recipe mismatch between the norm and the GEMM: fp8_linear's own check of the scale's shape.
        ("recipe-mismatch", lambda: _linear_of(rms(x, w, fp8="tensorwise", fp8_scaling=Float8Scaling.new()),
                                               "rowwise"), ValueError, "x_scale"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    _, fn, error, match = _bad_calls()[case]
    with torch.no_grad() if "grad" not in _bad_calls()[case][0] else torch.enable_grad():
        with pytest.raises(error, match=match):
            fn()


def test_under_no_grad_a_parameter_that_requires_grad_is_fine(device):
    """Inference with trainable parameters: no gradient is asked for under no_grad / inference_mode."""
    x, w, b, _ = inputs((3, 72), torch.float32, seed=41, device=device)
    w = w.clone().requires_grad_()
    for context in (torch.no_grad, torch.inference_mode):
        with context():
            q, scale = blockfuse.layer_norm(x, w, b, fp8="rowwise")
        assert q.dtype == E4M3 and not q.requires_grad
    assert fp8.FP8_OUTPUT_CODES == {"rowwise": 1, "tensorwise": 2}


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("mode", [norm.NONE, norm.PRE, norm.POST], ids=["none", "pre", "post"])
def test_statistics_of_the_fp8_forward_are_the_plain_forwards(is_rms, mode, device):
    """With ``stats`` the FP8 forward writes the statistics a training step's backward reads (the fused blocks'
    norms in front of FP8 projections): the plain forward's, at a width with a tail, within a few fp32 roundings.
    NOTE: not bit for bit on a GPU: the two kernels' tiles get different register layouts (the FP8 one loads the
    weight in the tile's shape, ops/norm.py's _column_vector), so their row sums add in another order (sm_90:
    rstd a few ulps apart). The backward reads the statistics the FP8 forward normalized with, its own."""
    x, w, b, r = inputs((7, 200), seed=41, residual=True, device=device)
    b = None if is_rms else b
    r = None if mode == norm.NONE else r
    fp8_outputs = norm._norm_fwd_fp8(x, w, b, r, None, 1e-5, mode, 0.0, is_rms, False, 0, None, None, True)
    plain = norm._norm_fwd(x, w, b, r, None, 1e-5, mode, 0.0, is_rms, False, 0, True)
    mean, rstd = fp8_outputs[4:]
    assert rstd.shape == x.shape[:-1] and rstd.dtype == plain[3].dtype == torch.float32
    torch.testing.assert_close(rstd, plain[3], rtol=1e-6, atol=0)  # fp32's unit roundoff is 6e-8
    if is_rms:
        assert mean.numel() == 0
    else:  # the mean of 200 values of scale 1: a few roundings of the sum, relative to the row's spread
        torch.testing.assert_close(mean, plain[2], rtol=0, atol=1e-6)
    without = norm._norm_fwd_fp8(x, w, b, r, None, 1e-5, mode, 0.0, is_rms, False, 0, None, None, False)
    assert without[4].numel() == 0 and without[5].numel() == 0
    assert torch.equal(without[0].view(torch.uint8), fp8_outputs[0].view(torch.uint8))


# ---------------------------------------------------------------------------------------------
# The output for a tensorwise FP8 projection: x's dtype, its amax folded (norm_for_tensorwise_projection)
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("is_rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("mode", ["none", "pre"])
@pytest.mark.parametrize("n", [72, TAIL_WIDTH])
def test_the_output_with_its_amax_is_the_plain_norms(is_rms, mode, n, device):
    """The normalized output in x's dtype as the plain norm writes it (the same arithmetic in the FP8 forward's
    kernel: within a rounding, as the statistics above), its amax that output's exactly, pre mode's stream the plain
    one's, and the gradients those of the plain norm's backward (it is the same backward)."""
    x, w, b, r = inputs((7, n), seed=43, residual=mode == "pre", device=device)
    b = None if is_rms else b
    dy = random_tensor((7, n), torch.bfloat16, device, seed=44)
    results = []
    for tensorwise in (True, False):
        leaves = [None if t is None else t.clone().requires_grad_() for t in (x, w, b, r)]
        if tensorwise:
            (y, amax), stream = norm.norm_for_tensorwise_projection(leaves[0], leaves[1], leaves[2], 1e-5, leaves[3],
                                                                    "pre", 0.0, True, is_rms)
            assert amax.shape == (1,) and amax.dtype == torch.float32 and not amax.requires_grad
            assert amax.item() == y.detach().float().abs().max().item()
        else:
            out = call("rms" if is_rms else "ln", leaves[0], leaves[1], leaves[2], residual=leaves[3])
            y, stream = out if mode == "pre" else (out, None)
        assert (stream is None) == (mode == "none")
        y.backward(dy, retain_graph=stream is not None)
        if stream is not None:
            stream.backward(dy)
        results.append([y.detach()] + ([stream.detach()] if stream is not None else [])
                       + [t.grad for t in leaves if t is not None])
    for a, c in zip(*results):
        torch.testing.assert_close(a, c, rtol=2 * 2**-8, atol=1e-5)


def test_the_output_with_its_amax_refuses_post_mode(device):
    x, w, b, r = inputs((3, 64), seed=45, residual=True, device=device)
    with pytest.raises(ValueError, match="post mode's output is the residual stream"):
        norm._norm_fwd_amax(x, w, b, r, None, 1e-5, norm.POST, 0.0, False, False, False)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("is_rms, has_weight, has_bias, cast_before_weight", [
    (False, True, True, False), (False, True, False, False), (False, False, False, False), (True, True, False, False),
    (True, True, False, True)], ids=["ln", "ln-nobias", "ln-noaffine", "rms", "rms-castfirst"])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "pre"])
@pytest.mark.parametrize("width", [72, 1152, 4304], ids=lambda w: f"n{w}")  # and SigLIP-2's widths, d and FFN
def test_norm_cast_again_is_the_outputs_cast(is_rms, has_weight, has_bias, cast_before_weight, residual, width,
                                             device):
    """``norm.cast_again(y, amax, bias)()`` for the output of ``norm_for_tensorwise_projection``: y^T's tensorwise
    e4m3 cast and scale, padded to 16 rows, made in one pass from what the norm's node keeps (its input, or pre mode's
    stream rounded to x's dtype, and the forward's statistics). Without a residual that is y's own cast, bit for bit
    in the interpreter; in pre mode (y normalized the fp32 sum) the cast of the kept stream normalized with those
    statistics, computed here in PyTorch. On a GPU within one FP8 step. None for a tensor that is not such an output,
    and without autograd."""
    # NOTE: 21 rows (two groups of 16, the second padded): 39 made the same launches (each kernel's constants and warps,
    # 2026-12-07) in twice the interpreter's time
    x = random_tensor((3, 7, width), torch.bfloat16, seed=140, scale=2.0).to(device) + 0.5
    weight = (1.0 + 0.2 * random_tensor((width,), torch.bfloat16, seed=141)).to(device) if has_weight else None
    bias = (0.2 * random_tensor((width,), torch.bfloat16, seed=142)).to(device) if has_bias else None
    res = random_tensor((3, 7, width), torch.bfloat16, seed=143).to(device) if residual else None
    leaves = [t.clone().requires_grad_() if t is not None else None for t in (x, weight, bias, res)]
    (y, amax), _ = norm.norm_for_tensorwise_projection(leaves[0], leaves[1], leaves[2], 1e-5, leaves[3], "pre", 0.0,
                                                       True, is_rms, cast_before_weight)
    cast = norm.cast_again(y, amax, leaves[2])
    yt, scale = cast()
    if residual:
        z, _, _, mean, rstd, _ = y.grad_fn.saved_tensors
        v = (z.float() - (0.0 if mean is None else mean[..., None])) * rstd[..., None]
        if has_weight:
            v = (downcast(v, torch.bfloat16).float() if cast_before_weight else v) * weight.float()
        if has_bias:
            v = v + bias.float()
        written = downcast(v, torch.bfloat16)  # (rounded as a kernel on this device rounds)
    else:
        written = y.detach()
    want_t, want_s = fp8._quantize_2d_ref(written.reshape(-1, width), E4M3, False, False, True, fp8.GEMM_MULTIPLE,
                                          amax)[2:]
    assert yt.shape == want_t.shape == (width, 32) and yt.dtype == E4M3 and torch.equal(scale, want_s)
    if torch.cuda.is_available():
        torch.testing.assert_close(yt.float(), want_t.float(), rtol=0.07, atol=0, msg="y^T")
    else:
        assert torch.equal(yt.view(torch.uint8), want_t.view(torch.uint8))
    assert norm.cast_again(y * 2, amax, leaves[2]) is None
    with torch.no_grad():
        (y_plain, amax_plain), _ = norm.norm_for_tensorwise_projection(x, weight, bias, 1e-5, res, "pre", 0.0, True,
                                                                       is_rms, cast_before_weight)
    assert norm.cast_again(y_plain, amax_plain, bias) is None
