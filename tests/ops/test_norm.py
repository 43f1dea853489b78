"""Tests of the fused norm ops: ``blockfuse.layer_norm`` and ``blockfuse.rms_norm``.

The oracle is PyTorch's own norm (``F.layer_norm`` / ``F.rms_norm``) composed with the residual
add and the dropout in float64, on ``.double()`` copies of the low-precision inputs; the baseline
is the same composition run by PyTorch in the low dtype (autograd for its grads). A fused result
may be at most about 2x as wrong as the baseline (``tests.helpers.assert_close_to_reference``).
The references beside the kernels (``layer_norm_ref``, ``rms_norm_ref``) are checked against the
same oracle in ``test_reference_*``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import textwrap
import warnings

import pytest
import torch
import torch.nn.functional as F

import blockfuse
from blockfuse.ops import norm
from blockfuse.ops.dropout import draw_seed, keep_mask
from tests.helpers import (
    assert_compiles_like_eager,
    assert_runs_without_interpreter,
    as_double,
    assert_all_close_to_reference,
    assert_close_to_reference,
    downcast,
    grads,
    leaves,
    random_tensor,
    record_results,
    relative_error,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}
LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6


# ---------------------------------------------------------------------------------------------
# What is called: a norm variant, its inputs, and the three ways to compute it.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way to call a norm: which norm, which affine parameters, which RMSNorm convention."""

    norm: str  # "layer" or "rms"
    weight: bool = True
    bias: bool = False  # LayerNorm only
    cast_before_weight: bool = False  # RMSNorm only
    eps: float | None = None  # None: the op's default

    def __post_init__(self):
        if self.eps is None:
            object.__setattr__(self, "eps", LAYER_NORM_EPS if self.norm == "layer" else RMS_NORM_EPS)


VARIANTS = {
    "ln": Variant("layer", weight=True, bias=True),
    "ln-nobias": Variant("layer", weight=True, bias=False),
    "ln-noaffine": Variant("layer", weight=False, bias=False),
    "ln-biasonly": Variant("layer", weight=False, bias=True),
    "rms": Variant("rms", weight=True, cast_before_weight=False),  # OLMo-2
    "rms-castfirst": Variant("rms", weight=True, cast_before_weight=True),  # Llama
    "rms-noweight": Variant("rms", weight=False),
}
MAIN_VARIANTS = ["ln", "rms", "rms-castfirst"]
OTHER_VARIANTS = ["ln-nobias", "ln-noaffine", "ln-biasonly", "rms-noweight"]


@dataclasses.dataclass
class Inputs:
    x: torch.Tensor
    weight: torch.Tensor | None
    bias: torch.Tensor | None
    residual: torch.Tensor | None

    def tensors(self) -> list[torch.Tensor | None]:
        """The differentiable inputs, in the order of the grads (dx, dweight, dbias, dresidual)."""
        return [self.x, self.weight, self.bias, self.residual]


GRAD_NAMES = ["dx", "dweight", "dbias", "dresidual"]


def make_inputs(
    variant: Variant,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str,
    *,
    residual: bool = False,
    param_dtype: torch.dtype | None = None,
    x_layout: str = "contiguous",
    residual_layout: str = "contiguous",
    seed: int = 0,
) -> Inputs:
    """Random inputs, never zeros: LayerNorm's x has a nonzero mean (``randn*2+0.5``) so that the
    centering matters; the weight is around 1 and the bias around 0, both far from constant."""
    width = shape[-1]
    param_dtype = param_dtype or dtype
    offset = 0.5 if variant.norm == "layer" else 0.0
    x = random_tensor(shape, dtype, device, seed=seed, scale=2.0, offset=offset, layout=x_layout)
    weight = bias = res = None
    if variant.weight:
        weight = random_tensor((width,), param_dtype, device, seed=seed + 1, scale=0.5, offset=1.0)
    if variant.bias:
        bias = random_tensor((width,), param_dtype, device, seed=seed + 2, scale=0.5)
    if residual:
        res = random_tensor(shape, dtype, device, seed=seed + 3, scale=2.0, offset=-0.25, layout=residual_layout)
    return Inputs(x, weight, bias, res)


def make_grad_outputs(output_shapes: list[tuple[int, ...]], dtype, device, *, layout="contiguous", seed=100):
    return [random_tensor(shape, dtype, device, seed=seed + i, layout=layout) for i, shape in enumerate(output_shapes)]


def call_blockfuse(variant: Variant, inputs: Inputs, mode: str = "pre", **kwargs):
    """The op under test."""
    if variant.norm == "layer":
        return blockfuse.layer_norm(
            inputs.x, inputs.weight, inputs.bias, variant.eps, residual=inputs.residual, residual_mode=mode, **kwargs
        )
    return blockfuse.rms_norm(
        inputs.x,
        inputs.weight,
        variant.eps,
        residual=inputs.residual,
        residual_mode=mode,
        cast_before_weight=variant.cast_before_weight,
        **kwargs,
    )


def call_reference(variant: Variant, inputs: Inputs, mode: str = "pre", **kwargs):
    """The pure-PyTorch reference beside the kernels."""
    if variant.norm == "layer":
        return blockfuse.layer_norm_ref(
            inputs.x, inputs.weight, inputs.bias, variant.eps, residual=inputs.residual, residual_mode=mode, **kwargs
        )
    return blockfuse.rms_norm_ref(
        inputs.x,
        inputs.weight,
        variant.eps,
        residual=inputs.residual,
        residual_mode=mode,
        cast_before_weight=variant.cast_before_weight,
        **kwargs,
    )


def call_pytorch(variant: Variant, inputs: Inputs, mode: str = "pre", dropout_mask=None, dropout_p=0.0):
    """PyTorch's own composition, in the inputs' dtype: float64 gives the oracle, a low dtype
    the baseline. ``dropout_mask`` (True = keep) applies dropout with ``dropout_p``."""
    x, weight, bias, residual = inputs.tensors()
    width = x.shape[-1]

    def norm(t):
        if variant.norm == "layer":
            params = [p for p in (weight, bias) if p is not None]
            if params and params[0].dtype != t.dtype:
                # Mixed precision as autocast runs it (CUDA's layer_norm refuses mixed dtypes):
                # upcast, normalize, cast back.
                return F.layer_norm(t.to(params[0].dtype), (width,), weight, bias, variant.eps).to(t.dtype)
            return F.layer_norm(t, (width,), weight, bias, variant.eps)
        with warnings.catch_warnings():  # "Mismatch dtype between input and weight"
            warnings.simplefilter("ignore", UserWarning)
            if variant.cast_before_weight and weight is not None:
                # Llama's convention, as PyTorch users write it: round x-hat, then scale.
                return (F.rms_norm(t, (width,), None, variant.eps) * weight).to(t.dtype)
            return F.rms_norm(t, (width,), weight, variant.eps)

    def dropout(t):
        if dropout_mask is None:
            return t
        return t * dropout_mask.to(t.dtype) * (1.0 / (1.0 - dropout_p))

    if residual is None:
        return norm(x)
    if mode == "pre":
        s = residual + dropout(x)
        return norm(s), s
    return residual + dropout(norm(x))


def as_list(outputs) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def output_names(inputs: Inputs, mode: str) -> list[str]:
    if inputs.residual is not None and mode == "pre":
        return ["y", "s"]
    return ["y"]


def forward_backward(fn, inputs: Inputs, grad_outputs, *, as_dtype=None):
    """Run ``fn(leaf inputs)`` and autograd; returns (outputs, grads in GRAD_NAMES order)."""
    leaf_list = leaves(*inputs.tensors(), dtype=as_dtype)
    leaf_inputs = Inputs(*leaf_list)
    outputs = as_list(fn(leaf_inputs))
    input_grads = grads(outputs, leaf_list, grad_outputs)
    return [o.detach() for o in outputs], input_grads


def check_against_pytorch(
    variant: Variant,
    inputs: Inputs,
    mode: str = "pre",
    *,
    grad_layout: str = "contiguous",
    dropout_p: float = 0.0,
    dropout_mask: torch.Tensor | None = None,
    run_ours=None,
    floor: float | None = None,
):
    """Forward and backward of blockfuse against the fp64 oracle, relative to PyTorch's own error.

    ``run_ours(grad_outputs) -> (outputs, grads)`` replaces the plain call of the op when it must
    run in a particular way (under a fixed seed). ``floor``: the tolerance's absolute floor (default the
    dtype's, ``helpers.ERROR_FLOOR``).
    """
    x = inputs.x
    names = output_names(inputs, mode)
    grad_outputs = make_grad_outputs([tuple(x.shape)] * len(names), x.dtype, x.device, layout=grad_layout)

    if run_ours is None:
        ours = forward_backward(lambda t: call_blockfuse(variant, t, mode, dropout_p=dropout_p), inputs, grad_outputs)
    else:
        ours = run_ours(grad_outputs)
    baseline = forward_backward(lambda t: call_pytorch(variant, t, mode, dropout_mask, dropout_p), inputs, grad_outputs)
    oracle = forward_backward(
        lambda t: call_pytorch(variant, t, mode, dropout_mask, dropout_p),
        inputs,
        [g.double() for g in grad_outputs],
        as_dtype=torch.float64,
    )

    our_outputs, our_grads = ours
    assert len(our_outputs) == len(names), f"expected outputs {names}, got {len(our_outputs)} tensor(s)"
    for output, name in zip(our_outputs, names):
        assert output.dtype == x.dtype, f"{name}: dtype {output.dtype}, expected x's dtype {x.dtype}"
        assert output.shape == x.shape, f"{name}: shape {tuple(output.shape)}, expected {tuple(x.shape)}"
    for grad, tensor, name in zip(our_grads, inputs.tensors(), GRAD_NAMES):
        if grad is not None:
            assert grad.dtype == tensor.dtype, f"{name}: dtype {grad.dtype}, expected {tensor.dtype}"
    assert_all_close_to_reference(
        our_outputs + our_grads,
        baseline[0] + baseline[1],
        oracle[0] + oracle[1],
        names + GRAD_NAMES,
        rounded_through=x.dtype,
        floor=floor,
    )


# ---------------------------------------------------------------------------------------------
# Accuracy of every mode against float64, relative to PyTorch's own error
# ---------------------------------------------------------------------------------------------

# (rows, width): every width, every awkward row count.
SHAPES = [(199, 72), (3, 760), (1, 1128), (3, 4304)]
RESIDUAL_SHAPES = [(199, 760), (3, 4304)]


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("variant", MAIN_VARIANTS)
def test_norm(variant, shape, dtype, device):
    check_against_pytorch(VARIANTS[variant], make_inputs(VARIANTS[variant], shape, dtype, device))


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", [(199, 72), (3, 4304)], ids=shape_id)
@pytest.mark.parametrize("variant", OTHER_VARIANTS)
def test_norm_without_affine_parameters(variant, shape, dtype, device):
    check_against_pytorch(VARIANTS[variant], make_inputs(VARIANTS[variant], shape, dtype, device))


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", RESIDUAL_SHAPES, ids=shape_id)
@pytest.mark.parametrize("variant", MAIN_VARIANTS)
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_norm_with_residual(mode, variant, shape, dtype, device):
    inputs = make_inputs(VARIANTS[variant], shape, dtype, device, residual=True)
    check_against_pytorch(VARIANTS[variant], inputs, mode)


@pytest.mark.parametrize("dtype", LOW_PRECISION.values(), ids=LOW_PRECISION.keys())
@pytest.mark.parametrize("variant", OTHER_VARIANTS)
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_norm_with_residual_without_affine_parameters(mode, variant, dtype, device):
    inputs = make_inputs(VARIANTS[variant], (3, 1128), dtype, device, residual=True)
    check_against_pytorch(VARIANTS[variant], inputs, mode)


@pytest.mark.parametrize("dtype", LOW_PRECISION.values(), ids=LOW_PRECISION.keys())
@pytest.mark.parametrize("variant", ["ln", "rms", "rms-castfirst"])
@pytest.mark.parametrize("mode", ["none", "pre"])
def test_float32_parameters_with_low_precision_input(mode, variant, dtype, device):
    """Weight and bias in fp32 (mixed-precision training) while x is fp16/bf16: outputs stay in
    x's dtype, dweight/dbias come back in fp32."""
    inputs = make_inputs(
        VARIANTS[variant], (199, 760), dtype, device, residual=(mode != "none"), param_dtype=torch.float32
    )
    check_against_pytorch(VARIANTS[variant], inputs, "pre")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", [(3, 5504), (3, 6144), (2, 11008)], ids=shape_id)
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_norm_wide_tails(variant, shape, dtype, device):
    """Rows whose forward takes a wide tail (5504 and 6144 as 4096 + 2048 lanes, 11008 as 8192 + 4096): LayerNorm on
    one warp per 2048 lanes (FWD_TAIL_PIECE_LANES_PER_WARP), RMSNorm on the width's warps (and 11008 in chunks)."""
    n = shape[1]
    assert norm.forward_rule(n).num_warps == {5504: 4, 6144: 4, 11008: 8}[n]
    check_against_pytorch(VARIANTS[variant], make_inputs(VARIANTS[variant], shape, dtype, device))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["none", "pre", "post"])
@pytest.mark.parametrize("width", [4096, 8201, 10240, 11008, 12288, 20000])
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_fp32_within_twice_pytorchs_error_without_a_floor(variant, width, mode, device):
    """fp32 forward and backward within twice PyTorch's error, with a floor of 1e-9 where the other tests' fp32 floor
    (1e-6) is ten times PyTorch's error at these widths and would hide a statistic a few ulps off: the padded tile
    (4096), the one-row pieces of the forward and the backward (8201 = 8192 + 9, 10240, 11008, 12288) and the
    chunks (20000), 64 rows. GPU only: Triton's interpreter (numpy) sums a reduction over a non-contiguous axis in
    sequence, and LayerNorm's variance is such a reduction in the pieces and the chunks (``_row_sums``: the joined
    tiles summed over the row): there y's error is 4-6e-7 against PyTorch's 7e-8 (RMSNorm's plain ``tl.sum``, and
    LayerNorm at 4096, pass on the CPU too)."""
    inputs = make_inputs(VARIANTS[variant], (64, width), torch.float32, device, residual=mode != "none")
    check_against_pytorch(VARIANTS[variant], inputs, "pre" if mode == "none" else mode, floor=1e-9)


@pytest.mark.parametrize("n", [9001, 11007])
@pytest.mark.parametrize("variant,mode", [("ln", "none"), ("rms", "pre"), ("ln", "post")])
def test_odd_wide_rows_in_pieces(variant, mode, n, device):
    """Odd widths past 8192 lanes (9001 = 8192 + 809, 11007 = 8192 + 2815), whose backward takes the two pieces on
    16 warps with one-element vectors, in fp16, x's rows read at an odd stride (a view of wider rows): forward and
    backward within twice PyTorch's error of float64."""
    assert norm.backward_rule(n, is_rms=variant == "rms", element_size=2).tail
    inputs = make_inputs(VARIANTS[variant], (5, n), torch.float16, device, residual=mode != "none")
    inputs.x = random_tensor((5, n + 7), torch.float16, device, scale=2.0, offset=0.5, seed=31)[:, :n]
    assert inputs.x.stride(0) == n + 7
    check_against_pytorch(VARIANTS[variant], inputs, "pre" if mode == "none" else mode)


@pytest.mark.parametrize("width", [760, 11008, 20000, 24576])
def test_layer_norm_of_input_with_large_mean(width, device):
    """x = 300 + randn: a variance taken as E[x^2] - E[x]^2 in fp32 loses ~3 digits here, where
    PyTorch (Welford / two-pass) does not. 11008 covers a row in two pieces (8192 + 4096 lanes, its statistics
    corrected by the deviations' mean), 20000 and 24576 the chunked path (Welford's update per lane, Chan's merge
    of the lanes), with a partial last chunk and without."""
    inputs = make_inputs(VARIANTS["ln"], (3, width), torch.float32, device, residual=True)
    inputs.x = random_tensor((3, width), torch.float32, device, seed=9, offset=300.0)
    check_against_pytorch(VARIANTS["ln"], inputs, "pre")
    check_against_pytorch(VARIANTS["ln"], Inputs(inputs.x, inputs.weight, inputs.bias, None))


@pytest.mark.parametrize("width", [760, 1001, 4096])
def test_fp32_rows_with_large_mean_in_one_tile(width, device):
    """fp32 rows of 300 + randn held in one tile: y within 1.5x PyTorch's error of float64 in each of 20 seeds. Before
    the one tile corrected its mean by the deviations' mean (the NOTE in _norm_fwd_body), 1-3 seeds of 20 went past
    2x at each of these widths (at most 2.5-3.0x): the check above, one seed, had passed."""
    worst = 0.0
    for seed in range(20):
        x = random_tensor((4, width), torch.float32, device, seed=100 + seed, offset=300.0)
        weight = random_tensor((width,), torch.float32, device, seed=200 + seed)
        bias = random_tensor((width,), torch.float32, device, seed=300 + seed)
        exact = F.layer_norm(x.double(), (width,), weight.double(), bias.double(), LAYER_NORM_EPS)
        ours = relative_error(blockfuse.layer_norm(x, weight, bias, LAYER_NORM_EPS), exact)
        torch_error = relative_error(F.layer_norm(x, (width,), weight, bias, LAYER_NORM_EPS), exact)
        worst = max(worst, ours / torch_error)
    assert worst <= 1.5, f"y's error up to {worst:.2f}x PyTorch's"


@pytest.fixture
def chunks_from_2049():
    """The backward's chunks from 2049 lanes, 1024 lanes each (the GELU form's too), and the weight kernel with them,
    on more programs a multiprocessor than the rule's (so that the CPU's one gets several row groups): the chunked
    path at widths the interpreter runs quickly."""
    with norm.tuned(BWD_MAX_LANES=2048, BWD_MAX_LANES_PRE=2048, CHUNK_CHOICES=(1024,),
                    BWD_WEIGHT_KERNEL_FROM_LANES=2049, ACT_BWD_PIECES_FROM_LANES=0, BWD_WEIGHT_PROGRAMS_PER_SM=200):
        yield


@pytest.mark.parametrize("variant,mode,dtype", [("ln", "none", torch.bfloat16),
                                                ("rms-castfirst", "post", torch.float32),
                                                ("ln-nobias", "pre", torch.float16)])
@pytest.mark.usefixtures("chunks_from_2049")
def test_wide_rows_weight_gradients_by_their_own_kernel(variant, mode, dtype, device):
    """Rows in chunks take their weight / bias gradients from _norm_bwd_weight_kernel (the NOTE above
    BWD_WEIGHT_KERNEL_FROM_LANES): 37 rows in three row groups of 16 rows (the last one partial; more programs a
    multiprocessor than the rule's), within twice PyTorch's error of float64, each form's gradients (a weight without
    a bias, the residual's). Chunks of 1024 lanes from 2049 here (2100: three, the last mostly masked); the real
    widths' chunks are the 20000 / 24576 / 65536 tests'."""
    assert norm.weight_grid(37, 2100, 1)[1:] == (3, 16)
    assert norm.backward_rule(2100).num_chunks == 3
    inputs = make_inputs(VARIANTS[variant], (37, 2100), dtype, device, residual=mode != "none")
    check_against_pytorch(VARIANTS[variant], inputs, "pre" if mode == "none" else mode)


@pytest.mark.parametrize("activation", [False, True])
@pytest.mark.usefixtures("chunks_from_2049")
def test_wide_rows_weight_kernel_matches_the_in_place_partials(activation, device):
    """The weight kernel against the chunked backward's own partial rows (BWD_WEIGHT_KERNEL_FROM_LANES = 0: read and
    written in place a row block), post-residual with dropout under one seed (the kernel draws the same mask as the
    backward), and LayerNorm + GELU (the activation's derivative): dx equal, dweight / dbias equal to fp32's
    summation-order rounding."""
    from blockfuse.ops.norm import layer_norm_gelu

    x = random_tensor((21, 2100), torch.bfloat16, device, scale=2.0, offset=0.5, seed=3)
    res = random_tensor((21, 2100), torch.bfloat16, device, seed=4)
    w = random_tensor((2100,), torch.bfloat16, device, seed=5)
    b = random_tensor((2100,), torch.bfloat16, device, seed=6)
    dy = random_tensor((21, 2100), torch.bfloat16, device, seed=7)
    assert norm.backward_rule(2100, norm.GELU_CODES["tanh"] if activation else 0).num_chunks == 3

    def grads(from_lanes):
        leaves = [t.clone().requires_grad_() for t in (x, res, w, b)]
        torch.manual_seed(11)
        with norm.tuned(BWD_WEIGHT_KERNEL_FROM_LANES=from_lanes):
            if activation:
                out = layer_norm_gelu(leaves[0], leaves[2], leaves[3])
                leaves = [leaves[0], leaves[2], leaves[3]]
            else:
                out = blockfuse.layer_norm(leaves[0], leaves[2], leaves[3], residual=leaves[1], residual_mode="post",
                                           dropout_p=0.25)
            return torch.autograd.grad(out, leaves, dy)

    theirs, ours = grads(0), grads(2049)
    assert torch.equal(ours[0], theirs[0])
    for mine, old in zip(ours[1:], theirs[1:]):
        assert old.abs().max() > 0
        torch.testing.assert_close(mine.float(), old.float(), rtol=2**-7, atol=1e-3 * old.float().abs().max().item())


def test_weight_kernel_grid_rule():
    """weight_grid: BWD_WEIGHT_COLUMNS columns a program, row groups of whole BWD_WEIGHT_ROWS blocks covering every
    row, about BWD_WEIGHT_PROGRAMS_PER_SM programs a multiprocessor where the rows allow; the chunked backward's own
    tile (the NOTE above BWD_CHUNK_WARPS): 16 warps, one row a block in 4096-lane chunks; the GELU form's unchanged."""
    for m, n, sms in ((37, 16400, 1), (16384, 28672, 132), (5, 20000, 132), (100000, 16385, 132), (16384, 18944, 78)):
        blocks, groups, rows = norm.weight_grid(m, n, sms)
        assert blocks == -(-n // norm.TUNING.bwd_weight_columns) and rows % norm.TUNING.bwd_weight_rows == 0
        assert (groups - 1) * rows < m <= groups * rows
        # (one group a column block at least)
        assert blocks * groups < norm.TUNING.bwd_weight_programs_per_sm * sms + blocks
    assert norm.weight_grid(16384, 28672, 132) == (112, 5, 3280)  # 560 programs for 528 wanted
    assert norm.weight_grid(5, 20000, 132) == (79, 1, 16)  # (5 rows: one group)
    assert norm.weight_grid(37, 16400, 1) == (65, 1, 48)
    for n in (16400, 18944, 28672, 65536):
        for is_rms in (False, True):
            tile = norm.backward_rule(n, is_rms=is_rms)
            assert tile.num_chunks > 1 and tile.num_warps == norm.TUNING.bwd_chunk_warps == 16
            assert tile.block_m == (1 if tile.block_n >= 4096 else norm.TUNING.chunk_tile_elements // tile.block_n)
        gelu = norm.backward_rule(n, 1)
        assert (gelu.block_m, gelu.num_warps) == (norm.TUNING.chunk_tile_elements // gelu.block_n, 16)


@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_eps_is_used(variant, device):
    """A large eps changes the result a lot: the kernels must use the one they are given."""
    large_eps = dataclasses.replace(VARIANTS[variant], eps=0.5)
    check_against_pytorch(large_eps, make_inputs(large_eps, (3, 760), torch.float32, device, residual=True))


@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("needs_grad", ["x", "weight", "none"])
def test_grads_of_some_inputs(needs_grad, variant, device):
    """Only some inputs require grad (frozen weights, frozen activations, inference): the grads
    that are asked for equal those of the full backward, bit for bit; so do the outputs, except under
    no_grad, where the forward is compiled without the statistics' stores and the GPU compiler may
    contract its arithmetic differently (one ulp: measured on an H200)."""
    inputs = make_inputs(VARIANTS[variant], (3, 760), torch.float32, device, residual=True)
    grad_outputs = make_grad_outputs([tuple(inputs.x.shape)] * 2, torch.float32, device)
    full_outputs, full_grads = forward_backward(lambda t: call_blockfuse(VARIANTS[variant], t), inputs, grad_outputs)
    tensors = [None if t is None else t.detach().clone() for t in inputs.tensors()]
    chosen = {"x": [0], "weight": [1], "none": []}[needs_grad]
    for index in chosen:
        tensors[index].requires_grad_(True)
    if not chosen:
        with torch.no_grad():
            outputs = call_blockfuse(VARIANTS[variant], Inputs(*tensors))
    else:
        outputs = call_blockfuse(VARIANTS[variant], Inputs(*tensors))
        # s = residual + x does not depend on the weight: only differentiate what may.
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        computed = torch.autograd.grad([o for o, _ in pairs], [tensors[i] for i in chosen], [g for _, g in pairs])
        for index, grad in zip(chosen, computed):
            assert torch.equal(grad, full_grads[index]), GRAD_NAMES[index]
    for output, full_output in zip(outputs, full_outputs):
        if chosen or device == "cpu":
            assert torch.equal(output.detach(), full_output)
        else:
            torch.testing.assert_close(output, full_output, rtol=4 * 2**-24, atol=4 * 2**-24)


# ---------------------------------------------------------------------------------------------
# RMSNorm conventions: where the weight multiply happens relative to the cast
# ---------------------------------------------------------------------------------------------


def rms_norm_convention(x, weight, eps, cast_before_weight):
    """The two conventions as written in the API: statistics in fp32, then either
    ``(xhat * w).to(dtype)`` (multiply in fp32) or ``w * xhat.to(dtype)``. Casts round the way
    the kernels' platform rounds (``downcast``); the product of two fp16/bf16 values is exact in
    fp32, so the second form is computed as one fp32 multiply and one cast."""
    x32 = x.float()
    xhat = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    if cast_before_weight:
        return downcast(weight.float() * downcast(xhat, x.dtype).float(), x.dtype)
    return downcast(xhat * weight.float(), x.dtype)


@pytest.mark.parametrize("dtype", LOW_PRECISION.values(), ids=LOW_PRECISION.keys())
@pytest.mark.parametrize("cast_before_weight", [False, True], ids=["multiply-fp32", "cast-first"])
def test_rms_norm_convention(cast_before_weight, dtype, device):
    """Each convention rounds where the API says: the result equals its own formula except for
    rare 1-ulp flips (a different reduction order), and differs from the other convention's.
    The two conventions disagree on ~25% of the elements at these dtypes."""
    inputs = make_inputs(VARIANTS["rms"], (64, 760), dtype, device)
    ours = blockfuse.rms_norm(inputs.x, inputs.weight, RMS_NORM_EPS, cast_before_weight=cast_before_weight)
    same = rms_norm_convention(inputs.x, inputs.weight, RMS_NORM_EPS, cast_before_weight)
    other = rms_norm_convention(inputs.x, inputs.weight, RMS_NORM_EPS, not cast_before_weight)
    differs_from_same = (ours != same).float().mean().item()
    differs_from_other = (ours != other).float().mean().item()
    conventions_differ = (same != other).float().mean().item()
    assert conventions_differ > 0.05, "test inputs do not separate the two conventions"
    assert differs_from_same < 0.01, (
        f"{differs_from_same:.1%} of elements differ from the formula of cast_before_weight="
        f"{cast_before_weight} (and {differs_from_other:.1%} from the other convention's)"
    )


# ---------------------------------------------------------------------------------------------
# Layouts and ranks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["none", "pre", "post"])
def test_non_contiguous_inputs(mode, variant, dtype, device):
    """x is a transposed view (last-dim stride > 1), the residual a strided view of a wider
    buffer, and the incoming grads are transposed views."""
    inputs = make_inputs(
        VARIANTS[variant],
        (5, 760),
        dtype,
        device,
        residual=(mode != "none"),
        x_layout="transposed",
        residual_layout="strided",
    )
    x_before = inputs.x.clone()
    check_against_pytorch(VARIANTS[variant], inputs, "post" if mode == "post" else "pre", grad_layout="transposed")
    assert torch.equal(inputs.x, x_before), "x was modified in place"


@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["none", "pre", "post"])
@pytest.mark.parametrize(
    "shape,layout",
    [((2, 5, 760), "contiguous"), ((2, 3, 3, 72), "contiguous"), ((3, 5, 72), "transposed")],
    ids=["3d", "4d", "3d-transposed"],
)
def test_higher_rank_inputs(shape, layout, mode, variant, device):
    inputs = make_inputs(
        VARIANTS[variant],
        shape,
        torch.bfloat16,
        device,
        residual=(mode != "none"),
        x_layout=layout,
        residual_layout=layout,
    )
    check_against_pytorch(VARIANTS[variant], inputs, "post" if mode == "post" else "pre")


def test_batch_dims_permuted(device):
    """A 3-D x whose leading dims are permuted (rows not evenly strided) with a contiguous last dim."""
    x = random_tensor((5, 2, 1128), torch.float16, device, scale=2.0, offset=0.5).transpose(0, 1)
    inputs = make_inputs(VARIANTS["ln"], (2, 5, 1128), torch.float16, device, residual=True)
    inputs.x = x
    assert not x.is_contiguous() and x.stride(-1) == 1
    check_against_pytorch(VARIANTS["ln"], inputs, "pre", grad_layout="transposed")


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize(
    "shape,dtype,mode",
    [((3, 20000), torch.float32, "none"), ((1, 65536), torch.float32, "none"), ((3, 20000), torch.bfloat16, "pre"),
     ((5, 11008), torch.bfloat16, "post"), ((5, 11008), torch.bfloat16, "pre")],
    ids=["3x20000-fp32", "1x65536-fp32", "3x20000-bf16-pre", "5x11008-bf16-post", "5x11008-bf16-pre"],
)
def test_large_width(shape, dtype, mode, variant, device):
    """Widths beyond one block (11008: the forward holds it as 8192 + 4096 lanes in registers, the backward
    as one tile of 16384, reading it twice where it has two gradient accumulators)."""
    inputs = make_inputs(VARIANTS[variant], shape, dtype, device, residual=(mode != "none"))
    check_against_pytorch(VARIANTS[variant], inputs, mode if mode != "none" else "pre")


def forward_width_tile(n: int, *rule, **named) -> norm.Tile:
    """norm._tile with the forward's knobs: the width's tile (``rule``, ``named``: _tile's min_warps, vector_tail)."""
    tuning = norm.TUNING
    return norm._tile(n, tuning.fwd_tile_elements, tuning.fwd_elements_per_warp, tuning.fwd_max_lanes,
                      tuning.tail_from_lanes, *rule, **named)


def backward_width_tile(n: int, pre: bool = False, activation: int = 0) -> norm.Tile:
    """norm._tile with the backward's knobs: its padded tile (``pre``: the pre-residual form's width limit;
    ``activation``: the GELU form's warps)."""
    tuning = norm.TUNING
    per_warp = tuning.act_bwd_elements_per_warp if activation else tuning.bwd_elements_per_warp
    max_lanes = tuning.bwd_max_lanes_pre if pre else tuning.bwd_max_lanes
    return norm._tile(n, tuning.bwd_tile_elements, per_warp, max_lanes, float("inf"))


@pytest.mark.parametrize("n", [72, 760, 1024, 1152, 2048, 2560, 2880, 4096, 4304, 5120, 6144, 8192, 9000, 14336])
@pytest.mark.parametrize("element_size", [2, 4])
def test_backward_pipeline_depth_rule(n, element_size):
    """The backward's pipeline depth from bytes: the tuned depth at a full 4096-lane bf16 row (3 stages, 2
    programs a multiprocessor); deeper where the tile pads (4304 in 8192 lanes: 5); never past the stage buffers'
    budget or BWD_MAX_STAGES; at least BWD_BYTES_IN_FLIGHT real bytes in flight a multiprocessor unless a limit
    stops it; none (1 stage) for rows past 8192 lanes (BWD_PIPELINE_MAX_LANES)."""
    tile = backward_width_tile(n)
    per_sm = norm._programs_per_sm(tile.block_n, norm.TUNING.bwd_programs_per_sm)
    stages = norm._bwd_stages(tile, n, element_size, per_sm)
    if tile.block_m * tile.block_n > norm.TUNING.bwd_pipeline_max_lanes:  # one program of 16 warps: no pipeline
        assert n > 8192 and stages == 1 and norm._bwd_stages(tile, n, element_size, per_sm, 3) == 1, (n, stages)
        return
    padded = 2 * tile.block_m * tile.block_n * element_size
    real = 2 * tile.block_m * n * element_size
    assert 2 <= stages <= norm.TUNING.bwd_max_stages
    assert per_sm * stages * padded <= max(norm.TUNING.bwd_smem_bytes, 2 * per_sm * padded)
    limited = stages in (norm.TUNING.bwd_max_stages, norm.TUNING.bwd_smem_bytes // (per_sm * padded))
    assert limited or per_sm * (stages - 1) * real >= norm.TUNING.bwd_bytes_in_flight
    assert per_sm * (stages - 2) * real < norm.TUNING.bwd_bytes_in_flight  # the fewest that do
    if element_size == 2:
        assert stages == {4096: 3, 2048: 3, 4304: 5, 8192: 3}.get(n, stages)
    # pre mode streams ds too: its buffers are counted, and it keeps the 3 stages measured there
    pre = backward_width_tile(n, pre=True)
    if pre.num_chunks == 1:
        per_sm = norm._programs_per_sm(pre.block_n, norm.TUNING.bwd_programs_per_sm)
        pre_stages = norm._bwd_stages(pre, n, element_size, per_sm, 3)
        assert (per_sm * pre_stages * 3 * pre.block_m * pre.block_n * element_size <= norm.TUNING.bwd_smem_bytes
                or pre_stages == 2)
        if element_size == 2 and 1024 <= n <= 8192:  # (a 16384-lane tile's three streams fit 2 stages)
            assert pre_stages == 3, (n, pre_stages)


@pytest.mark.parametrize("n", [72, 4096, 8192, 11008, 14336])
def test_forward_register_cap_rule(n):
    """Forward programs of 16 warps (rows past 8192 lanes, one a program) are capped so that two fit a
    multiprocessor's 65536 registers; narrower tiles are not capped."""
    tile = forward_width_tile(n)
    cap = norm._fwd_maxnreg(tile)
    if tile.num_warps >= 16:
        assert n > 8192 and cap is not None and 2 * tile.num_warps * 32 * cap <= 65536
    else:
        assert cap is None


@pytest.mark.parametrize("n", [4096, 8192, 8960, 9215, 9216, 10240, 11007, 11008, 12288, 12289, 14336, 20000])
def test_forward_row_cap_rule(n):
    """One-row forward programs past 8192 lanes on fewer than 16 warps (LayerNorm and its GELU form in two pieces) are
    capped so that FWD_ROW_WARPS_PER_SM warps of them share a multiprocessor's 65536 registers (the NOTE above it: 4
    warps at 96, 8 at 80), in 16-bit rows of vector accesses; the residual forms, fp32 rows, odd widths' rows of
    one-element accesses, 16-warp tiles (FWD_WIDE_MAXNREG), persistent programs and narrower rows keep theirs."""
    scalar = n % 2 == 1
    tile = norm.forward_rule(n, scalar=scalar)
    row = tile.block_m == 1 and tile.num_chunks == 1 and tile.lanes > 8192 and tile.num_warps < 16
    assert row == (8192 < n <= 12288)
    cap = norm._fwd_maxnreg(tile, 0, norm.NONE, 2, scalar)
    if row and scalar:  # (one-element accesses: not capped)
        assert cap is None and norm._fwd_maxnreg(tile, 0, norm.NONE, 2) is not None
    elif row:
        programs = -(-norm.TUNING.fwd_row_warps_per_sm // tile.num_warps)
        assert cap % 8 == 0 and programs * tile.num_warps * 32 * cap <= 65536
        assert {4: 96, 8: 80}[tile.num_warps] == cap
        assert {8960: 4, 9216: 4, 10240: 8, 11008: 8, 12288: 8}.get(n, tile.num_warps) == tile.num_warps
        for mode in (norm.PRE, norm.POST):
            assert norm._fwd_maxnreg(tile, 0, mode) is None
        assert norm._fwd_maxnreg(tile, 0, norm.NONE, 4) is None  # (fp32 rows: not measured)
        with norm.tuned(FWD_ROW_WARPS_PER_SM=0):
            assert norm._fwd_maxnreg(tile, 0, norm.NONE) is None
    elif tile.num_warps >= 16:
        assert cap == norm.TUNING.fwd_wide_maxnreg
    else:
        assert cap is None
    assert norm._fwd_maxnreg(tile._replace(num_warps=16), 3) == 65536 // 512


@pytest.mark.parametrize("n", [72, 1152, 4096, 4304, 8192, 11008, 14336, 20000])
def test_backward_two_fma_rule(n):
    """dz's two-multiply-add form only where a thread's registers are not capped at 128: tiles of at most
    BWD_TWO_FMA_MAX_WARPS warps without the GELU form (its maxnreg); the 16-warp tile of rows past 8192 lanes
    keeps the three-instruction form, which spilled half as much there (ops/norm.py's NOTE). Both forms run in
    this file's accuracy tests (5 x 11008 takes the 16-warp tile)."""
    tile = backward_width_tile(n)
    assert norm._two_fma(tile, 0) == (tile.num_warps <= norm.TUNING.bwd_two_fma_max_warps)
    assert not norm._two_fma(tile, norm.GELU_CODES["tanh"])
    if 8192 < norm.next_power_of_2(n) <= norm.TUNING.bwd_max_lanes:
        assert tile.num_warps == 16 and not norm._two_fma(tile, 0)
    if n <= 8192:
        assert norm._two_fma(tile, 0)


@pytest.mark.parametrize("n", [4300, 8192, 8200, 9000, 9216, 10240, 11008, 14336])
def test_forward_tail_warps_rule(n):
    """A row in two pieces takes at most one 16-byte vector (8 elements) of its tail a thread when the tail fills 4
    warps so (9000: 8192 + 1024 lanes in 4 warps, measured 1.7x the 16 before for LayerNorm); other tiles keep one
    warp a FWD_ELEMENTS_PER_WARP lanes."""
    tile = forward_width_tile(n)
    lanes = tile.block_m * tile.block_n + (tile.block_t if tile.tail else 0)
    whole_row = min(16, max(4, norm.next_power_of_2(-(-lanes // norm.TUNING.fwd_elements_per_warp))))
    if tile.tail and tile.block_t >= 4 * 32 * norm.TUNING.tail_vector:
        assert tile.num_warps == min(whole_row, tile.block_t // (32 * norm.TUNING.tail_vector))
        assert tile.block_t // (tile.num_warps * 32) >= norm.TUNING.tail_vector
    else:
        assert tile.num_warps == whole_row
    assert {9000: 4, 9216: 4, 10240: 8, 11008: 16, 8200: 16, 4300: 8}.get(n, tile.num_warps) == tile.num_warps


@pytest.mark.parametrize("n", [2880, 5120, 5504, 6144, 8192, 9000, 10240, 11008, 12288, 14336])
def test_forward_wide_tail_warps_rule(n):
    """A LayerNorm forward row without a residual, in two pieces with a tail of FWD_VECTOR_TAIL_LANES or more, takes one
    warp per FWD_TAIL_PIECE_LANES_PER_WARP lanes (at least FWD_MIN_WARPS, never more than the width's tile gave), its
    tail still at least one 16-byte vector a thread; padded tiles, smaller tails, the residual forms and RMSNorm keep
    the width's tile."""
    tile = norm.forward_rule(n)
    width_tile = forward_width_tile(n, norm.TUNING.fwd_min_warps, norm.TUNING.fwd_vector_tail_lanes)
    assert norm.forward_rule(n, residual=True) == width_tile or norm.forward_rule(n, residual=True).tail is False
    if n < norm.TUNING.fwd_rms_chunks_from_lanes:
        assert norm.forward_rule(n, is_rms=True) == norm.forward_rule(n, residual=True)
    with norm.tuned(FWD_TAIL_PIECE_LANES_PER_WARP=0):
        before = norm.forward_rule(n)
    assert tile._replace(num_warps=before.num_warps) == before
    if tile.tail and tile.block_t >= norm.TUNING.fwd_vector_tail_lanes:
        assert tile.num_warps <= before.num_warps and tile.block_t // (tile.num_warps * 32) >= norm.TUNING.tail_vector
    else:
        assert tile == before
    assert {5504: 4, 6144: 4, 9000: 4, 10240: 8, 11008: 8, 12288: 8, 14336: 16, 8192: 8}.get(n, before.num_warps) \
        == tile.num_warps, tile
    assert {5504: 8, 6144: 8, 11008: 16, 12288: 16}.get(n, tile.num_warps) == before.num_warps


@pytest.mark.parametrize("n", [768, 1152, 1536, 2560, 2880, 3072, 4096, 4304, 4608, 4864, 5120, 6144, 6400, 8192])
def test_forward_vector_tail_rule(n):
    """Below TAIL_FROM_LANES (and without the one-row pieces of the next test) the forward takes two pieces exactly
    where the tail fills 4 warps with 16-byte vectors (FWD_VECTOR_TAIL_LANES: 5120 = 4096 + 1024, not 8192; 2880 =
    2048 + 1024), at most one vector a thread of the tail; a smaller tail keeps the padded tile (4304 in 8192 lanes);
    the backward's tiles do not change; the FP8 forward takes these tails from FP8_FWD_PIECES_FROM_LANES (the plain
    forward's rows: the NOTE above FP8_FWD_PLAIN_ROWS), narrower rows keep its padded tile."""
    fwd, padded = forward_width_tile(n, vector_tail=norm.TUNING.fwd_vector_tail_lanes), forward_width_tile(n)
    head, tail = norm.row_pieces(n)
    if tail >= norm.TUNING.fwd_vector_tail_lanes:
        assert (fwd.block_n, fwd.tail, fwd.block_t) == (head, True, tail), fwd
        assert fwd.block_t // (fwd.num_warps * 32) >= norm.TUNING.tail_vector, fwd
    else:
        assert fwd == padded
    expected = {5120: (4096, 1024), 4864: (4096, 1024), 6144: (4096, 2048), 2880: (2048, 1024), 3072: (2048, 1024)}
    assert ((fwd.block_n, fwd.block_t) if fwd.tail else None) == expected.get(n), (n, fwd)
    assert fwd.num_warps in (4, 8), fwd
    fp8, plain = norm.fp8_forward_tile(n), norm.forward_rule(n)
    if n >= norm.TUNING.fp8_fwd_pieces_from_lanes:
        assert (fp8.block_m, fp8.block_n, fp8.tail, fp8.block_t) == (1, plain.block_n, plain.tail, plain.block_t), fp8
    else:
        assert not fp8.tail, fp8


@pytest.mark.parametrize("n", [640, 768, 1024, 1152, 1280, 1536, 2048, 2304, 2560, 2880, 4096, 4160, 4304, 4608, 5120,
                               6656, 8192, 11008])
def test_forward_one_row_pieces_rule(n):
    """From FWD_PIECES_FROM_LANES up to TAIL_FROM_LANES the forward takes two pieces at a tail of any size, one row a
    program, one warp per FWD_PIECE_LANES_PER_WARP lanes, at least FWD_PIECE_MIN_WARPS (1152 = 1024 + 128 on 2 warps,
    4304 = 4096 + 256 on 4, not one padded tile of 8192 lanes on 8); a tail of 4 warps' vectors keeps the vector
    tails' rule, rows without a tail and narrower rows keep their tiles, and 0 turns it off."""
    with norm.tuned(FWD_TAIL_PIECE_LANES_PER_WARP=0):  # (the wide tails' warps: the test above)
        tile = norm.forward_rule(n)
        with norm.tuned(FWD_PIECES_FROM_LANES=0):
            off = norm.forward_rule(n)
    head, tail = norm.row_pieces(n)
    expected = {1152: (1024, 128, 2), 1280: (1024, 256, 2), 1536: (1024, 512, 2), 2304: (2048, 256, 2),
                2560: (2048, 512, 2), 4160: (4096, 64, 4), 4304: (4096, 256, 4), 4608: (4096, 512, 4)}
    if n in expected:
        assert (tile.block_m, tile.block_n, tile.tail, tile.block_t, tile.num_warps) == (1, *expected[n][:1], True,
                                                                                         *expected[n][1:]), tile
        assert tail < norm.LAYOUT_TAIL_LANES.value
        assert norm.TUNING.fwd_pieces_from_lanes <= n <= norm.TUNING.tail_from_lanes
        lanes_a_warp = -(-(head + tail) // tile.num_warps)
        assert lanes_a_warp <= norm.TUNING.fwd_piece_lanes_per_warp < 2 * lanes_a_warp or tile.num_warps == 2
    assert off == forward_width_tile(n, norm.TUNING.fwd_min_warps, norm.TUNING.fwd_vector_tail_lanes)
    assert (off == tile) == (n not in expected), (off, tile)
    if n in expected:
        assert not off.tail and off.block_n == norm.next_power_of_2(n)  # the padded tile it replaces
    # the FP8 forward takes the same pieces from FP8_FWD_PIECES_FROM_LANES (its warps: test_norm_fp8.py's
    # test_fp8_forward_warps_follow_the_lanes)
    fp8 = norm.fp8_forward_tile(n)
    if n in expected and n >= norm.TUNING.fp8_fwd_pieces_from_lanes:
        assert (fp8.block_m, fp8.block_n, fp8.tail, fp8.block_t) == (tile.block_m, tile.block_n, True,
                                                                     tile.block_t), fp8
    elif n < norm.TUNING.fp8_fwd_pieces_from_lanes:
        assert not fp8.tail, fp8


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [1152, 2304, 2880, 4304, 5120])
@pytest.mark.parametrize("form", ["ln", "rms", "ln-post", "ln-gelu"])
def test_forward_in_pieces_matches_the_reference(form, n, device):
    """The forward's two pieces below 8192 lanes compute what the reference does in every form, on rows read with a
    stride (x a slice of a wider tensor): one row a program with a tail of another layout than the head (1152 =
    1024 + 128, 2304 = 2048 + 256, 4304 = 4096 + 256: the statistics reduced piece by piece) and the vector tails
    (2880 = 2048 + 1024, 5120 = 4096 + 1024)."""
    assert norm.forward_rule(n).tail
    m = 5
    x = random_tensor((m, n + 64), torch.bfloat16, device, scale=2.0, offset=0.5, seed=11)[:, :n]
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=12)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=13)
    r = random_tensor((m, n), torch.bfloat16, device, seed=14)
    out = _norm_form(form, False, x, w, b, r)
    expected = _norm_form(form, True, x.double(), w.double(), b.double(), r.double())
    own = _norm_form(form, True, x, w, b, r)  # PyTorch in bf16
    assert expected.abs().max() > 0
    assert_close_to_reference(out, own, expected)


@pytest.mark.parametrize("n", [4096, 8200, 9000, 11008, 12288, 13312, 14336, 16384, 20000])
def test_forward_persistent_rule(n):
    """Persistent forward programs (the NOTE above FWD_PERSIST_STAGES): rows past 8192 lanes held in registers on
    16 warps, in the post-residual form and LayerNorm without a residual or activation; never the pre-residual form,
    the GELU form, RMSNorm (its wide rows go in chunks), fp32, narrower rows or rows in chunks; the stages' rows
    within FWD_PERSIST_SMEM_BYTES; a persistent program's register cap is what one a multiprocessor leaves."""
    for form, (is_rms, mode, activation) in {"ln": (False, norm.NONE, 0), "ln-post": (False, norm.POST, 0),
                                             "ln-pre": (False, norm.PRE, 0),
                                             "ln-gelu": (False, norm.NONE, norm.GELU_CODES["tanh"]),
                                             "rms": (True, norm.NONE, 0), "rms-post": (True, norm.POST, 0)}.items():
        tile = norm.forward_rule(n, is_rms, mode != norm.NONE)
        stages = norm.forward_stages(tile, n, mode, activation, 2)
        wanted = (tile.num_chunks == 1 and tile.block_m == 1 and tile.lanes > 8192 and tile.num_warps >= 16
                  and (mode == norm.POST or (mode == norm.NONE and not activation and not tile.tail
                                             and tile.lanes > n)))
        assert bool(stages) == wanted, (form, tile, stages)
        assert norm.forward_stages(tile, n, mode, activation, 4) == 0  # fp32: not measured
        if stages:
            streams = 2 if mode == norm.POST else 1
            assert stages >= 3 and (stages - 1) * streams * tile.lanes * 2 <= norm.TUNING.fwd_persist_smem_bytes
            assert norm._fwd_maxnreg(tile, stages) == 65536 // (32 * tile.num_warps)
    # which widths take it: LayerNorm in one padded 16384-lane tile (not in pieces: 11008 / 12288 as 8192 + 4096 on 8
    # warps, 8200 as 8192 + 16 on 16; not 16384, no lane padded); the post-residual form in every 16-warp row
    takes = {n_: bool(norm.forward_stages(norm.forward_rule(n_), n_, norm.NONE, 0))
             for n_ in (8200, 11008, 12288, 13312, 14336, 16384)}
    assert takes == {8200: False, 11008: False, 12288: False, 13312: True, 14336: True, 16384: False}
    for n_ in (11008, 14336, 16384):
        stages = norm.forward_stages(norm.forward_rule(n_, False, True), n_, norm.POST, 0)
        assert stages == norm.TUNING.fwd_persist_stages


def test_forward_persistent_rule_on_scalar_rows():
    """On one-element rows (odd widths) the post-residual form's pieces take no persistent pipeline (the NOTE above
    FWD_PERSIST_SCALAR_PIECES), its padded tile and vector rows keep theirs, and the knob turns the pieces' back on."""
    def stages(n, scalar):
        return norm.forward_stages(norm.forward_rule(n, False, True, False, scalar), n, norm.POST, 0, 2, scalar)

    for n in (8447, 8703, 11007, 12287):  # (pieces on 16 warps: pipelined on vector rows)
        assert norm.forward_rule(n, False, True, False, True).tail and stages(n - 1, False) > 0, n
        assert stages(n, True) == 0, n
    assert stages(12345, True) == stages(12346, False) == norm.TUNING.fwd_persist_stages  # (the padded tile keeps it)
    with norm.tuned(FWD_PERSIST_SCALAR_PIECES=True):
        assert stages(8447, True) == norm.TUNING.fwd_persist_stages


@pytest.mark.usefixtures("requires_triton")
def test_post_residual_scalar_pieces_forward_matches_the_reference(device, monkeypatch):
    """The post-residual form on odd bf16 rows in two pieces without the persistent pipeline (and with it, the knob
    on): y within twice PyTorch's error of float64, and the rows' gradients."""
    n = 8447
    seen = record_results(monkeypatch, norm, "forward_stages")
    x = random_tensor((5, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=91)
    r = random_tensor((5, n), torch.bfloat16, device, scale=1.5, seed=92)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=93)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=94)
    expected = norm.layer_norm_ref(x.double(), w.double(), b.double(), residual=r.double(), residual_mode="post")
    torch_out = norm.layer_norm_ref(x, w, b, residual=r, residual_mode="post")
    for pieces_persist in (False, True):
        with norm.tuned(FWD_PERSIST_SCALAR_PIECES=pieces_persist):
            out = blockfuse.layer_norm(x, w, b, residual=r, residual_mode="post")
        assert seen and (seen[-1] > 0) == pieces_persist, seen
        for a, t, e in zip(*(o if isinstance(o, tuple) else (o,) for o in (out, torch_out, expected))):
            assert_close_to_reference(a, t, e)
    with norm.tuned(FWD_PERSIST_SCALAR_PIECES=False):
        _odd_rows_match_the_reference("ln-post", n, 5, 95, device)


@pytest.mark.parametrize("rows", [2, 40])
def test_forward_persistent_rows(rows):
    """A persistent launch needs FWD_PERSIST_STAGES rows a program; fewer rows keep a program a row."""
    tile = norm.forward_rule(14336)
    x = torch.empty(rows, 14336, dtype=torch.bfloat16)
    programs, stages = norm._forward_programs(x, rows, tile, norm.NONE, 0)
    if rows >= norm.TUNING.fwd_persist_stages * 4:  # (4 programs on the CPU: _num_programs)
        assert (programs, stages) == (4, norm.TUNING.fwd_persist_stages)
    else:
        assert (programs, stages) == (rows, 0)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form,n", [("ln-post", 11008), ("ln", 14336)])
def test_forward_persistent_equals_a_program_a_row(form, n, device):
    """Persistent programs compute each row as a program a row does, bit for bit: the same statistics, the weight and
    bias loaded once in the same fp32, the post form's dropout mask drawn from the row and column, not the program."""
    m = 4 * norm.TUNING.fwd_persist_stages + 1 if torch.device(device).type == "cpu" else 2000
    x = random_tensor((m, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=31)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=32)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=33)
    r = random_tensor((m, n), torch.bfloat16, device, seed=34)
    tile = norm.forward_rule(n, False, form == "ln-post")
    mode = norm.POST if form == "ln-post" else norm.NONE
    outs = []
    for stages in (norm.TUNING.fwd_persist_stages, 0):
        with norm.tuned(FWD_PERSIST_STAGES=stages):
            assert bool(norm._forward_programs(x, m, tile, mode, 0)[1]) == bool(stages)
            torch.manual_seed(7)
            if form == "ln-post":
                outs.append(blockfuse.layer_norm(x, w, b, residual=r, residual_mode="post", dropout_p=0.25))
            else:
                outs.append(blockfuse.layer_norm(x, w, b))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("form,n", [("ln-post", 11008), ("ln-post", 14336), ("ln", 14336), ("ln-post", 12289)])
def test_forward_persistent_matches_the_reference(form, n, dtype, device):
    """The persistent forward (rows walked by 4 programs on the CPU, more on a GPU) computes what the reference
    does: rows read with a stride (x a slice of a wider tensor), a residual of its own stride, a row count that does
    not divide among the programs; and its statistics feed the backward as the one-row programs' do."""
    dt = DTYPES[dtype]
    m = 4 * norm.TUNING.fwd_persist_stages + 3 if torch.device(device).type == "cpu" else 4099
    tile = norm.forward_rule(n, False, form == "ln-post")
    mode = norm.POST if form == "ln-post" else norm.NONE
    assert norm._forward_programs(torch.empty(m, n, dtype=dt, device=device), m, tile, mode, 0)[1]
    x = random_tensor((m, n + 40), dt, device, scale=2.0, offset=0.5, seed=21)[:, :n]
    w = random_tensor((n,), dt, device, scale=0.5, offset=1.0, seed=22)
    b = random_tensor((n,), dt, device, scale=0.5, seed=23)
    r = random_tensor((m, n + 8), dt, device, seed=24)[:, :n]
    out = _norm_form(form, False, x, w, b, r)
    expected = _norm_form(form, True, x.double(), w.double(), b.double(), r.double())
    own = _norm_form(form, True, x, w, b, r)  # PyTorch in the same dtype
    assert expected.abs().max() > 0
    assert_close_to_reference(out, own, expected)
    variant = Variant("layer", bias=True)
    inputs = Inputs(x.contiguous(), w, b, r.contiguous() if mode == norm.POST else None)
    check_against_pytorch(variant, inputs, "post" if mode == norm.POST else "pre")


def _norm_form(form, reference, x, w, b, r):
    """The normalized output of ``form`` (ln, rms, ln-post, ln-gelu): blockfuse's op, or the PyTorch reference."""
    layer_norm = norm.layer_norm_ref if reference else blockfuse.layer_norm
    if form == "ln":
        return layer_norm(x, w, b)
    if form == "rms":
        return (norm.rms_norm_ref if reference else blockfuse.rms_norm)(x, w)
    if form == "ln-post":
        return layer_norm(x, w, b, residual=r, residual_mode="post")  # (the post form returns y alone)
    return (norm.layer_norm_gelu_ref if reference else blockfuse.layer_norm_gelu)(x, w, b)


@pytest.mark.parametrize("n", [72, 768, 1000, 1024, 1152, 1536, 2176, 2304, 2560, 2880, 4096, 4160, 4304, 4608, 5120,
                               6144, 7000, 8192, 8200, 11008, 14336])
@pytest.mark.parametrize("element_size", [2, 4])
def test_backward_pieces_rule(n, element_size):
    """The backward takes two pieces (row_pieces, one row a block) from BWD_PIECES_FROM_LANES wide wherever the row has
    a tail under LAYOUT_TAIL_LANES and the pieces fit BWD_PIECES_MAX_LANES lanes; warps one per
    BWD_PIECE_LANES_PER_WARP lanes within BWD_PIECE_MIN_WARPS-16, the tail at least BWD_PIECE_TAIL_BYTES a thread (the
    GELU form's, from ACT_BWD_PIECES_FROM_LANES: the fewest warps that hold ACT_BWD_PIECE_LANES_PER_THREAD lanes a
    thread or fewer, within ACT_BWD_PIECE_MIN_WARPS-ACT_BWD_PIECE_MAX_WARPS, any tail, at most
    ACT_BWD_PIECES_MAX_LANES lanes), a power of two; other rows keep the padded tile (no tail) or chunks."""
    head, tail = norm.row_pieces(n)
    tuning = norm.TUNING
    assert tuning.act_bwd_pieces_any_tail
    for activation, per_warp, least, most, max_lanes in (
            (0, tuning.bwd_piece_lanes_per_warp, tuning.bwd_piece_min_warps, 16, tuning.bwd_pieces_max_lanes),
            (1, tuning.act_bwd_piece_lanes_per_warp, tuning.act_bwd_piece_min_warps, tuning.act_bwd_piece_max_warps,
             tuning.act_bwd_pieces_max_lanes)):
        if n > (max_lanes if activation else norm.TUNING.bwd_pieces_max_lanes):
            continue  # (test_backward_wide_pieces_rule)
        tile = norm.backward_rule(n, activation, element_size=element_size)
        if activation:
            fits = n >= norm.TUNING.act_bwd_pieces_from_lanes and tail > 0 and head + tail <= max_lanes
        else:
            fits = (n >= norm.TUNING.bwd_pieces_from_lanes and 0 < tail < norm.LAYOUT_TAIL_LANES
                    and head + tail <= max_lanes)
        if tile.tail:
            assert fits
            assert (tile.block_m, tile.block_n, tile.block_t, tile.num_chunks) == (1, head, tail, 1)
            assert tile.lanes < norm.next_power_of_2(n) and tile.lanes >= n
            warps = tile.num_warps
            assert warps & (warps - 1) == 0 and least <= warps <= most
            assert warps in (least, most) or (warps // 2) * per_warp < tile.lanes <= warps * per_warp
            assert activation or tail * element_size >= norm.TUNING.bwd_piece_tail_bytes * 32 * warps
            assert not activation or tile.lanes <= warps * 32 * norm.TUNING.act_bwd_piece_lanes_per_thread
            assert not norm._bwd_reload(tile)
        else:
            assert not fits or (not activation and tail * element_size < norm.TUNING.bwd_piece_tail_bytes * 32 * 4)
            assert tile == backward_width_tile(n, activation=activation)
    if n in (2304, 2560, 4304, 4608):  # 2048 + 256, 2048 + 512, 4096 + 256 / 512: 4 warps; with GELU 8 (4608: 16)
        assert norm.backward_rule(n).num_warps == 4 and norm.backward_rule(n).tail
        assert norm.backward_rule(n, 1).tail and norm.backward_rule(n, 1).num_warps == (16 if n == 4608 else 8)
    if n in (2176, 4160):  # tails of 128 and 64 lanes: under 4 bytes a thread in bf16 on 4 warps, 4 or more in fp32
        assert not norm.backward_rule(n).tail and norm.backward_rule(n, 1).tail
        assert norm.backward_rule(n, element_size=4).tail == (n == 2176)
    if n in (1152, 2880, 5120, 6144):  # under 2048 lanes; tails of 1024 and 2048 lanes: GELU's pieces only
        assert not norm.backward_rule(n).tail
        assert norm.backward_rule(n, 1).tail == (n != 1152)
        assert n == 1152 or norm.backward_rule(n, 1).num_warps == (8 if n == 2880 else 16)


@pytest.mark.parametrize("n", [8192, 8200, 8704, 9000, 9216, 9728, 10240, 10752, 11008, 12288, 12300, 14336])
@pytest.mark.parametrize("element_size", [2, 4])
def test_backward_wide_pieces_rule(n, element_size):
    """Rows past BWD_PIECES_MAX_LANES up to BWD_WIDE_PIECES_MAX_LANES in two pieces (8192 + a tail) on
    BWD_WIDE_PIECE_WARPS warps, read once: the plain forms at any tail of BWD_PIECE_TAIL_BYTES a thread or more
    (RMSNorm's up to BWD_WIDE_PIECES_RMS_MAX_TAIL), the GELU form at any tail past its own pieces' 8704 lanes; wider
    rows and thinner tails keep the padded tile, read twice (RELOAD). Pipelined by the depth rule in 16-bit dtypes
    where two stages fit BWD_SMEM_BYTES (bf16: 3 stages, 2 with the pre-residual form's third stream; fp32: none); the
    GELU form's wide pieces with ACT_BWD_STAGES where the tail gives a thread 8 bytes and they fit; the padded tile
    without (1 stage)."""
    head, tail = norm.row_pieces(n)
    for is_rms in (False, True):
        tile = norm.backward_rule(n, element_size=element_size, is_rms=is_rms)
        if tile.block_u > 1:
            continue  # (three pieces: test_backward_three_pieces_rule)
        thick = tail * element_size >= norm.TUNING.bwd_piece_tail_bytes * 32 * norm.TUNING.bwd_wide_piece_warps
        fits = (norm.TUNING.bwd_pieces_max_lanes < n and head + tail <= norm.TUNING.bwd_wide_pieces_max_lanes and thick
                and (not is_rms or tail <= norm.TUNING.bwd_wide_pieces_rms_max_tail))
        assert tile.tail == fits
        if fits:
            assert (tile.block_m, tile.block_n, tile.block_t, tile.num_warps) == (1, 8192, tail,
                                                                                norm.TUNING.bwd_wide_piece_warps)
            assert tile.lanes <= 32 * norm.TUNING.bwd_wide_piece_warps * 24 and not norm._bwd_reload(tile)
            for streams in (2, 3):
                stages = norm._bwd_depth(tile, n, element_size, norm.TUNING.bwd_programs_per_sm, streams, 0)
                buffers = streams * tile.lanes * element_size
                assert stages == 1 or norm.TUNING.bwd_smem_bytes >= stages * buffers
                assert (stages > 1) == (element_size == 2 and 2 * buffers <= norm.TUNING.bwd_smem_bytes)
                if element_size == 2:
                    assert stages == (3 if streams == 2 else 2)
        elif n > 8192:
            assert tile.block_n == 16384 and norm._bwd_reload(tile)
            assert norm._bwd_depth(tile, n, element_size, norm.TUNING.bwd_programs_per_sm, 2, 0) == 1
    gelu = norm.backward_rule(n, 1, element_size=element_size)
    assert gelu == norm.backward_rule(n, 1, is_rms=True, element_size=element_size)
    three = element_size == 2 and n in (10752, 11008, 12300, 14336)  # (test_gelu_backward_three_pieces_rule)
    assert gelu.tail == (8192 < n <= norm.TUNING.bwd_wide_pieces_max_lanes or three) and (gelu.block_u > 1) == three
    if gelu.tail and not three:
        assert gelu.block_n == 8192 and gelu.num_warps == 16 and gelu.lanes <= 16 * 32 * 24
        # pipelined where the tail gives a thread 8 bytes (2048 lanes of bf16) and the stages fit: not in fp32
        thick = gelu.block_t * element_size >= norm.TUNING.act_bwd_pipeline_tail_bytes * 32 * 16
        stages = norm._bwd_depth(gelu, n, element_size, 1, 2, 1)
        assert stages == (norm.TUNING.act_bwd_stages if thick and element_size == 2 else 1)
        assert stages == 1 or stages * 2 * gelu.lanes * element_size <= norm.TUNING.bwd_smem_bytes
    # (the widths the rule was measured at)
    if element_size == 2 and n in (9216, 10240, 11008, 12288):
        assert norm.backward_rule(n).tail and norm.backward_rule(n, is_rms=True).tail
    if element_size == 2 and n in (8200, 8704):
        assert not norm.backward_rule(n).tail


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form,n", [("ln", 9000), ("ln-post-dropout", 11008), ("rms-pre", 10240), ("ln-gelu", 11008),
                                    ("ln", 13312), ("ln", 4304)])
def test_backward_early_accumulators_match(form, n, device):
    """The pieces' weight / bias gradients added before the row sums (BWD_EARLY_ACC) or after the stores: the same
    sums in the same order, so the same bits in the interpreter (within an ulp of bf16 compiled), every gradient."""
    is_rms, activation = form.startswith("rms"), norm.GELU_CODES["tanh"] if form == "ln-gelu" else 0
    assert norm.backward_rule(n, activation, form == "rms-pre", is_rms=is_rms).tail
    _backward_both_ways(form, (7, n), device, "BWD_EARLY_ACC")


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["ln", "rms", "ln-post-dropout"])
def test_three_pieces_weight_read_each_row_matches(form, device):
    """Three pieces (13312 = 8192 + 4096 + 1024) with the weight read again each row (RELOAD: the rule there) or held
    in registers: the same gradients, bit for bit in the interpreter."""
    assert norm.backward_rule(13312, is_rms=form == "rms").block_u > 1
    _backward_both_ways(form, (5, 13312), device, "BWD_RELOAD")


@pytest.mark.parametrize("n", [2304, 4304, 8200, 9000, 11008, 12288, 13312])
def test_backward_early_accumulators_rule(n):
    """The accumulators added before the row sums (the NOTE above BWD_EARLY_ACC) in the wide pieces (past
    BWD_PIECES_MAX_LANES, two pieces) where pipelined, never in the pre-residual form, the narrower pieces, three
    pieces or a padded tile."""
    for mode in (norm.NONE, norm.PRE, norm.POST):
        for activation in (0, norm.GELU_CODES["tanh"]):
            tile = norm.backward_rule(n, activation, mode == norm.PRE)
            for stages in (1, 3):
                wanted = (tile.tail and tile.block_u == 1 and tile.lanes > norm.TUNING.bwd_pieces_max_lanes
                          and mode != norm.PRE and stages > 1)
                assert norm._early_acc(tile, mode, stages) == wanted
    assert norm._early_acc(norm.backward_rule(11008), norm.NONE, 3)
    assert not norm._early_acc(norm.backward_rule(4304), norm.NONE, 3)


@pytest.mark.parametrize("n", [12288, 12289, 12800, 13312, 13313, 14336, 15360, 16384])
@pytest.mark.parametrize("element_size", [2, 4])
def test_backward_three_pieces_rule(n, element_size):
    """Rows past BWD_WIDE_PIECES_MAX_LANES in three pieces (the NOTE above BWD_THREE_PIECES_MAX_LANES): the largest
    power of two below the row, the largest in the rest and a power-of-two tail of BWD_PIECE_TAIL_BYTES a thread or
    more, on BWD_WIDE_PIECE_WARPS warps, fewer lanes than the padded tile; taken by LayerNorm, RMSNorm and the
    post-residual form where BWD_THREE_PIECES_MIN_STAGES stages of z and dy fit BWD_THREE_PIECES_SMEM_BYTES (bf16,
    held across the row sums: to 14336 lanes) or else BWD_SMEM_BYTES (fp16: to 13312 lanes), then read once, the
    weight again each row (RELOAD) and pipelined by the depth rule (three stages); by the GELU form in bf16 only
    (ACT_BWD_THREE_PIECES: the NOTE above it), with its own stages; by the pre-residual forms in bf16
    (BWD_THREE_PIECES_PRE: two stages of their three streams), whose fp16 rows keep the padded tile read twice."""
    three = norm._three_pieces(n, norm.TUNING.bwd_piece_tail_bytes // element_size)
    if three is not None:
        warps = norm.TUNING.bwd_wide_piece_warps
        assert (three.block_m, three.num_chunks, three.num_warps, three.tail) == (1, 1, warps, True)
        head, mid, tail = three.block_n, three.block_t, three.block_u
        assert head > mid > 0 and tail > 1 and all(p & (p - 1) == 0 for p in (head, mid, tail))
        assert head + mid < n <= three.lanes < norm.next_power_of_2(n)
        thick = norm.TUNING.bwd_piece_tail_bytes // element_size * 32 * 16
        assert tail == max(norm.next_power_of_2(n - head - mid), thick)
    assert (three is None) == (n in (12288, 15360, 16384))  # (12288: two pieces; 15360 would take 16384 lanes)
    stage_bytes = norm.TUNING.bwd_three_pieces_min_stages * 2 * (three.lanes if three else 0) * element_size
    fits = three is not None and stage_bytes <= norm.TUNING.bwd_three_pieces_smem_bytes
    fits_fp16 = three is not None and stage_bytes <= norm.TUNING.bwd_smem_bytes
    assert fits == (element_size == 2 and n in (12289, 12800, 13312, 13313, 14336))
    assert fits_fp16 == (element_size == 2 and n in (12289, 12800, 13312))
    for is_rms in (False, True):
        tile = norm.backward_rule(n, element_size=element_size, is_rms=is_rms)
        assert (tile.block_u > 1) == fits
        if fits:
            assert tile == three and norm._bwd_reload(tile)
            assert norm._bwd_depth(tile, n, element_size, norm.TUNING.bwd_programs_per_sm, 2, 0) == 3
            assert norm._bwd_hold(tile, n, torch.bfloat16, torch.bfloat16, 0, norm.NONE)
        assert (norm.backward_rule(n, element_size=element_size, is_rms=is_rms, bf16=False).block_u > 1) == fits_fp16
        # the pre-residual forms: the same pieces in bf16 (BWD_THREE_PIECES_PRE), pipelined with their third stream
        pre = norm.backward_rule(n, pre=True, element_size=element_size, is_rms=is_rms)
        assert (pre.block_u > 1) == fits and (not fits or pre == tile)
        if fits:
            assert norm._bwd_depth(pre, n, element_size, norm.TUNING.bwd_programs_per_sm, 3, 0) == 2
        assert norm.backward_rule(n, pre=True, element_size=element_size, is_rms=is_rms, bf16=False).block_u == 1
        with norm.tuned(BWD_THREE_PIECES_PRE=False):
            assert norm.backward_rule(n, pre=True, element_size=element_size, is_rms=is_rms).block_u == 1
    gelu = norm.backward_rule(n, 1, element_size=element_size)
    assert (gelu.block_u > 1) == fits and (not fits or gelu == three)
    assert norm.backward_rule(n, 1, element_size=element_size, bf16=False).block_u == 1
    if fits:  # (pipelined where ACT_BWD_STAGES of them fit BWD_SMEM_BYTES: 13312, not 14336)
        stages = norm._bwd_depth(gelu, n, element_size, norm._act_programs_per_sm(gelu), 2, 1)
        assert stages == (norm.TUNING.act_bwd_stages if n <= 13312 else 1)
    with norm.tuned(ACT_BWD_THREE_PIECES=False):
        assert norm.backward_rule(n, 1, element_size=element_size).block_u == 1
        with norm.tuned(BWD_THREE_PIECES_MAX_LANES=0):
            assert norm.backward_rule(n, element_size=element_size).block_u == 1


@pytest.mark.parametrize("n", [8704, 9000, 9216, 10240, 10752, 11008, 11264, 11520, 12288, 12289, 14336, 15000])
def test_gelu_backward_three_pieces_rule(n):
    """The GELU form's backward takes three pieces past 8192 lanes (up to BWD_THREE_PIECES_MAX_LANES) only where they
    hold fewer lanes than the tile it takes without them (the NOTE above ACT_BWD_THREE_PIECES): 10241-11264 as 8192 +
    2048 + 1024 (not 8192 + 4096), 12289-14336 as 8192 + 4096 + up to 2048 (not 16384); bf16 only."""
    tile = norm.backward_rule(n, 1)
    with norm.tuned(ACT_BWD_THREE_PIECES=False):
        other = norm.backward_rule(n, 1)
        assert norm.backward_rule(n, 1, bf16=False) == other and other.block_u == 1
    three = norm._three_pieces(n, norm.TUNING.bwd_piece_tail_bytes // 2)
    takes = three is not None and three.lanes < other.lanes
    assert (tile == three) == takes and (tile == other) == (not takes)
    assert takes == (10240 < n <= 11264 or 12288 < n <= 14336)


# NOTE: the rows of test_backward_in_pieces_matches_the_reference: as few as keep every launch that 15 rows make (each
# kernel's constants and warps, compared launch by launch on 2026-12-07), the interpreter's time going with the rows.
# On the CPU's 4 programs the backward pipelines its walk (STAGES, EARLY_ACC) only with STAGES row blocks a program:
# 3 at most widths (12 rows), 2 at these forms' (8). 2304 keeps 15 (fewer fit DIRECT_MAX_ELEMENTS: one program), 2560
# takes 6 (one program writing the weight gradients: DIRECT). 15 rows everywhere took 65-87 s of CI's time.
PIECES_ROWS = {2304: 15, 2560: 6, ("ln-pre", 12288): 8, ("ln-pre", 12800): 8, ("ln-pre", 14336): 8,
               ("ln-gelu", 14336): 8, ("rms-pre-dropout", 9728): 8, ("rms-pre-dropout", 14336): 8}


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form, n", [
    (form, n) for n in (2304, 2560, 4304) for form in ("ln", "rms", "ln-post-dropout", "rms-pre-dropout", "ln-pre",
                                                       "ln-gelu")] + [("ln-gelu", 3072), ("ln-gelu", 6144)] + [
    ("ln", 11008), ("ln-pre", 12288), ("ln-post-dropout", 9000), ("rms", 11008), ("rms-pre-dropout", 9728),
    ("ln-gelu", 11008), ("ln", 13312), ("rms", 13312), ("ln-post-dropout", 12800), ("ln", 12289), ("ln", 14336),
    ("ln-gelu", 14336), ("ln-pre", 12800), ("ln-pre", 14336), ("rms-pre-dropout", 14336)])
def test_backward_in_pieces_matches_the_reference(form, n, device):
    """The backward of rows in pieces (2304 = 2048 + 256, 2560 = 2048 + 512, 4304 = 4096 + 256; past 8192 lanes
    8192 + up to 4096 on 16 warps; past 12288 three: 8192 + 4096 + 1024, masked at 12289 and 12800, and 8192 + 4096
    + 2048 at 14336) gives every gradient (x, the residual, weight, bias) within twice PyTorch's error of a float64
    reference, rows read with a stride; and every gradient within a bf16 rounding of the padded tile's
    (with dropout: the same mask, regenerated from the seed; where the GELU form holds its rounded gradient across
    the row sums, ACT_BWD_HOLD, within a rounding of it as a whole)."""
    # (3072, 6144: GELU's only)
    assert norm.backward_rule(n, form == "ln-gelu", "-pre" in form, is_rms=form.startswith("rms")).tail
    m = PIECES_ROWS.get(n, PIECES_ROWS.get((form, n), 12))
    assert (m * n <= norm.TUNING.direct_max_elements) == (n == 2560)  # (one program's weight gradients, or partials)
    is_rms = form.startswith("rms")
    mode = "pre" if "-pre" in form else "post" if "-post" in form else None
    p = 0.25 if form.endswith("dropout") else 0.0
    x = random_tensor((m, n + 64), torch.bfloat16, device, scale=2.0, offset=0.5, seed=21)[:, :n]
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=22)
    b = None if is_rms else random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=23)
    r = random_tensor((m, n), torch.bfloat16, device, seed=24) if mode else None

    def run(reference, dtype=None, padded=False):
        """The leaves' gradients; with ``padded``, also the padded tile's from the same forward."""
        leaves = [t.detach().to(dtype or t.dtype).requires_grad_() for t in (x, w, b, r) if t is not None]
        xx, ww = leaves[0], leaves[1]
        bb = None if is_rms else leaves[2]
        rr = leaves[-1] if mode else None
        kw = dict(residual=rr, residual_mode=mode or "pre", dropout_p=p, training=True) if mode else {}
        torch.manual_seed(5)
        if form == "ln-gelu":
            op = norm.layer_norm_gelu_ref if reference else blockfuse.layer_norm_gelu
            outs = op(xx, ww, bb)
        elif is_rms:
            outs = (norm.rms_norm_ref if reference else blockfuse.rms_norm)(xx, ww, **kw)
        else:
            outs = (norm.layer_norm_ref if reference else blockfuse.layer_norm)(xx, ww, bb, **kw)
        outs = outs if isinstance(outs, tuple) else (outs,)
        grads = [random_tensor(o.shape, o.dtype, device, seed=30 + i) for i, o in enumerate(outs)]
        pieces = list(torch.autograd.grad(outs, leaves, grads, retain_graph=padded))
        if not padded:
            return pieces
        # NOTE: the backward's knobs, which its launcher reads when it runs: the forward they would run again is the
        # same launches (checked at every width and form here, 2026-12-07), a third of the time with dropout's masks
        with norm.tuned(BWD_PIECES_FROM_LANES=0, ACT_BWD_PIECES_FROM_LANES=0):
            assert not norm.backward_rule(n, form == "ln-gelu").tail
            return pieces, list(torch.autograd.grad(outs, leaves, grads))

    # and the padded tile (its kernels checked by the other tests): the same arithmetic summed in another order, and
    # with dropout the same mask, where the reference draws another
    ours, padded = run(False, padded=True)
    gelu = norm.GELU_CODES["tanh"]
    rounded = form == "ln-gelu" and norm._bwd_hold(norm.backward_rule(n, gelu), n, x.dtype, x.dtype, gelu, norm.NONE)
    for one, two in zip(ours, padded):
        if rounded:  # (the pieces hold the gradient after GELU rounded to bf16, ACT_BWD_HOLD 2: a rounding apart)
            assert (one.float() - two.float()).norm() <= 2 ** -7 * two.float().norm()
        else:
            torch.testing.assert_close(one.float(), two.float(), rtol=2 ** -7, atol=1e-5)
    if p:
        return
    expected = run(True, torch.float64)
    own = run(True)
    for name, a, e, t in zip(("x", "w", "b" if not is_rms else "r", "r"), ours, expected, own):
        assert e.abs().max() > 0
        assert_close_to_reference(a, t, e, name=f"d{name}")


def test_joint_row_sums_rule():
    """With JOINT_SUMS the pieces' row sums are reduced across the program once (norm.joint_sums_threads: the
    NOTE above JOINT_SUMS) where every piece spans the program's threads, never for scalar rows or one-tile rows;
    without it, never."""
    with norm.tuned(JOINT_SUMS=True):
        for n, activation in ((2304, 0), (4304, 0), (4304, 1), (11008, 0), (11008, 1), (14336, 0), (14336, 1),
                              (13313, 0)):
            tile = norm.backward_rule(n, activation)
            assert tile.tail
            pieces = (tile.block_n, tile.block_t) + ((tile.block_u,) if tile.block_u > 1 else ())
            assert norm.joint_sums_threads(tile) == 32 * tile.num_warps <= min(pieces)
            assert norm.joint_sums_threads(tile, scalar=True) == 0
        assert norm.joint_sums_threads(norm.backward_rule(4096)) == 0  # (one tile: one reduction already)
        narrow = norm.Tile(1, 2048, 1, 16, True, 256)  # (a 256-lane tail on 512 threads)
        assert norm.joint_sums_threads(narrow) == 0
    with norm.tuned(JOINT_SUMS=False):
        assert norm.joint_sums_threads(norm.backward_rule(14336)) == 0


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form, n, dtype", [
    ("ln", 1152, torch.bfloat16), ("rms", 1536, torch.float32),
    ("ln", 2304, torch.bfloat16), ("rms", 4304, torch.float16), ("ln-pre", 2560, torch.float32),
    ("ln-gelu", 4304, torch.bfloat16), ("ln", 11008, torch.float32), ("ln-gelu", 14336, torch.bfloat16),
    ("rms-pre", 13312, torch.bfloat16)])
def test_joint_row_sums_match_the_sums_piece_by_piece(form, n, dtype, device):
    """Rows in pieces with their sums reduced jointly (the forward's statistics, the backward's row sums) give the
    outputs and gradients of the sums reduced piece by piece (the same elements added in another order: within a few
    ulps of their dtype), 16-bit and fp32 rows (a thread's vector of 8 / 4 elements: _thread_partials), rows read with
    a stride. (1152, 1536: the forward's pieces only; 13312-14336 the backward's only.)"""
    # NOTE: 5 rows (were 7): the same launches (each kernel's constants and warps, 2026-12-07), a masked last row block
    # of 2, and on the CPU's 4 programs one walking two rows
    m, is_rms = 5, form.startswith("rms")
    backward = norm.backward_rule(n, form == "ln-gelu", "-pre" in form, dtype.itemsize, is_rms=is_rms,
                                  bf16=dtype == torch.bfloat16)
    forward = norm.forward_rule(n, is_rms, "-pre" in form, "-pre" in form)
    with norm.tuned(JOINT_SUMS=True):
        assert forward.tail == (n <= 11008)
        assert norm.joint_sums_threads(forward) == 32 * forward.num_warps * forward.tail
        assert (norm.joint_sums_threads(backward) > 0) == (n > 1536)
    x = random_tensor((m, n + 32), dtype, device, scale=2.0, offset=0.5, seed=41)[:, :n]
    w = random_tensor((n,), dtype, device, scale=0.5, offset=1.0, seed=42)
    b = None if is_rms else random_tensor((n,), dtype, device, scale=0.5, seed=43)
    r = random_tensor((m, n), dtype, device, seed=44) if "-pre" in form else None

    def grads(joint):
        leaves = [t.detach().requires_grad_() for t in (x, w, b, r) if t is not None]
        xx, ww, bb, rr = leaves[0], leaves[1], None if is_rms else leaves[2], leaves[-1] if r is not None else None
        with norm.tuned(JOINT_SUMS=joint, FWD_JOINT_SUMS=joint):
            if form == "ln-gelu":
                outs = blockfuse.layer_norm_gelu(xx, ww, bb)
            elif is_rms:
                outs = blockfuse.rms_norm(xx, ww, residual=rr)
            else:
                outs = blockfuse.layer_norm(xx, ww, bb, residual=rr)
            outs = outs if isinstance(outs, tuple) else (outs,)
            return outs + torch.autograd.grad(outs, leaves, [random_tensor(o.shape, o.dtype, device, seed=50 + i)
                                                             for i, o in enumerate(outs)])

    for one, two in zip(grads(True), grads(False)):
        assert two.float().abs().max() > 0
        torch.testing.assert_close(one.float(), two.float(), rtol=4 * torch.finfo(dtype).eps, atol=1e-5)


def test_scalar_rows_rule():
    """16-bit rows of one-element accesses (odd widths: the NOTE above BWD_SCALAR_WARPS) in one-row pieces take
    twice the warps, and so do they in padded tiles of 8192 lanes or more (not in narrower ones, where that was
    slower); rows past 8192 lanes go in one whole row on 32 warps (the weight gradients from the weight kernel but
    plain RMSNorm's, in the kernel; with the whole rows off, one-row chunks with the weight kernel, or the pre-residual
    RMSNorm's pieces; with the chunks off, the pre-residual form's chunks); the GELU form takes the whole row where its
    own pieces' tail is wider than 256 lanes, up to 16384."""
    def doubled(n, pre):
        plain, scalar = norm.backward_rule(n, 0, pre), norm.backward_rule(n, 0, pre, scalar=True)
        return scalar._replace(num_warps=plain.num_warps) == plain and scalar.num_warps == 2 * plain.num_warps

    for n in (4511, 4567, 4607):  # (pieces: 4096 + 512)
        assert norm.backward_rule(n).tail and doubled(n, False) and doubled(n, True)
    for n in (4097, 7777, 8191):  # (one padded tile of 8192 lanes)
        assert not norm.backward_rule(n, scalar=True).tail and doubled(n, False) and doubled(n, True)
    for n in (1001, 2049, 3001, 3999):  # (padded tiles of 1024-4096 lanes)
        assert norm.backward_rule(n, 0, True, scalar=True) == norm.backward_rule(n, 0, True)
        assert norm.backward_rule(n, scalar=True) == norm.backward_rule(n)
    for n, pre, is_rms in itertools.product((8193, 8447, 9999, 12345, 15001), (False, True), (False, True)):
        # (past 8192 lanes)
        plain = norm.backward_rule(n, 0, pre, is_rms=is_rms)
        tile = norm.backward_rule(n, 0, pre, is_rms=is_rms, scalar=True)
        # (one whole row on 32 warps, read once)
        whole = norm.Tile(1, norm.next_power_of_2(n), 1, norm.TUNING.bwd_scalar_whole_row_warps, False, 1)
        assert tile == whole and whole.num_warps == 32 and not norm._bwd_reload(tile), (n, pre, is_rms)
        assert norm.weight_kernel_rule(tile, n, True, is_rms=is_rms, pre=pre) == (pre or not is_rms)
        assert not norm.weight_kernel_rule(tile, n, False, is_rms=is_rms, pre=pre)  # (vector rows: not theirs)
        assert not norm.weight_kernel_rule(plain, n, is_rms=is_rms, pre=pre)
        # (the whole rows off: chunks with the weight kernel, RMSNorm's pieces)
        with norm.tuned(BWD_SCALAR_WHOLE_ROW_WARPS=0):
            tile = norm.backward_rule(n, 0, pre, is_rms=is_rms, scalar=True)
            if is_rms and plain.tail:
                assert tile == plain and not norm.weight_kernel_rule(tile, n, True, is_rms=True, pre=pre)
            else:
                lanes = norm.TUNING.bwd_scalar_chunk_lanes
                assert (tile.block_m, tile.block_n, tile.num_chunks) == (1, lanes, norm.cdiv(n, lanes)), (n, pre)
                assert norm.weight_kernel_rule(tile, n, True, is_rms=is_rms, pre=pre)
    assert norm.backward_rule(9999, 0, True, is_rms=True).tail  # (pieces, which the pre-residual RMSNorm kept)
    assert not norm.backward_rule(8447, 0, True, is_rms=True).tail
    with norm.tuned(BWD_SCALAR_WHOLE_ROW_RMS_PRE=False):  # (the pre-residual RMSNorm's rule before: pieces, or chunks)
        rule = norm.backward_rule(9999, 0, True, is_rms=True)
        assert norm.backward_rule(9999, 0, True, is_rms=True, scalar=True) == rule and rule.tail
        assert norm.backward_rule(8447, 0, True, is_rms=True, scalar=True) == norm._scalar_chunk_tile(8447)
    for n in (7777, 8191, 8192):  # (up to 8192 lanes: the padded tile)
        assert norm.backward_rule(n, scalar=True).num_chunks == 1
    for n in (1001, 3001, 4567, 7777, 8193, 8447, 20000):  # (the GELU form's own: narrow, a tail <= 256, past 16384)
        assert norm.backward_rule(n, 1, scalar=True) == norm.backward_rule(n, 1), n
    for n in (8703, 9215, 9999, 12345, 15001, 16383):  # (a wider tail, or its padded tile: the whole row)
        tile = norm.backward_rule(n, 1, scalar=True)
        assert (tile.num_chunks, tile.num_warps, tile.tail) == (1, 32, False), n
        assert norm.weight_kernel_rule(tile, n, True, 1)
    for n in (9999, 12345):  # (the whole rows off: one-row chunks, the GELU form's too; LayerNorm's rule before)
        with norm.tuned(BWD_SCALAR_WHOLE_ROW_RMS_ONLY=True):
            for pre, activation in ((False, 0), (True, 0), (False, 1)):
                assert norm.backward_rule(n, activation, pre, scalar=True) == norm._scalar_chunk_tile(n)
            with norm.tuned(BWD_SCALAR_ROW_CHUNKS_ACT=False):
                assert norm.backward_rule(n, 1, scalar=True) == norm.backward_rule(n, 1)
    with norm.tuned(BWD_SCALAR_ROW_CHUNKS_FROM_LANES=0):
        for n in (9999, 12345, 15001):  # (the one-row chunks off: pieces, or one padded tile)
            assert norm.backward_rule(n, scalar=True) == norm.backward_rule(n)
        assert norm.backward_rule(9999, 0, True, scalar=True) == norm.backward_rule(9999, 0, True)  # (wide pieces)
        # (the pre-residual form's padded tile: chunks instead; at 12345 its three pieces, BWD_THREE_PIECES_PRE)
        padded = norm.backward_rule(15001, 0, True)
        assert norm.backward_rule(15001, 0, True, scalar=True).num_chunks > 1 == padded.num_chunks
        assert norm.backward_rule(12345, 0, True, scalar=True) == norm.backward_rule(12345, 0, True)
        assert norm.backward_rule(12345, 0, True).block_u > 1
        assert not any(norm.weight_kernel_rule(norm.backward_rule(n, 0, pre, scalar=True), n, True)
                       for n in (9999, 12345) for pre in (False, True))
        with norm.tuned(BWD_SCALAR_TILE_WARPS=1, BWD_SCALAR_MAX_LANES_PRE=0):
            for n in (7777, 12345):  # (the knobs off)
                assert norm.backward_rule(n, 0, True, scalar=True) == norm.backward_rule(n, 0, True)
            assert norm.backward_rule(12345, 1, scalar=True) == norm.backward_rule(12345, 1)  # (the GELU form's own)


def _odd_rows_match_the_reference(form: str, n: int, rows: int, seed: int, device) -> None:
    """bf16 rows of ``n`` (``form``: "ln", "ln-pre", "ln-post", "rms" or "rms-pre") through the op: every gradient
    within twice PyTorch's error of a float64 reference."""
    is_rms, mode = form.startswith("rms"), {"ln-pre": "pre", "ln-post": "post", "rms-pre": "pre"}.get(form)
    x = random_tensor((rows, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=seed)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=seed + 1)
    b = None if is_rms else random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=seed + 2)
    r = random_tensor((rows, n), torch.bfloat16, device, seed=seed + 3) if mode else None

    def run(fn, dtype=None):
        leaves = [t.detach().to(dtype or t.dtype).requires_grad_() for t in (x, w, b, r) if t is not None]
        kw = dict(residual=leaves[-1], residual_mode=mode) if mode else {}
        args = (leaves[0], leaves[1]) if is_rms else (leaves[0], leaves[1], leaves[2])
        outs = fn(*args, **kw)
        outs = outs if isinstance(outs, tuple) else (outs,)
        grads = [random_tensor(o.shape, o.dtype, device, seed=seed + 9 + i) for i, o in enumerate(outs)]
        return list(torch.autograd.grad(outs, leaves, grads))

    ops = (blockfuse.rms_norm, norm.rms_norm_ref) if is_rms else (blockfuse.layer_norm, norm.layer_norm_ref)
    for a, e, t in zip(run(ops[0]), run(ops[1], torch.float64), run(ops[1])):
        assert_close_to_reference(a, t, e)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["ln", "ln-pre", "rms"])
@pytest.mark.parametrize("n", [1001, 4567, 7777, 12345])
def test_scalar_rows_take_their_rule_and_match_the_reference(form, n, device, monkeypatch):
    """The launcher hands the rule its rows' access width (odd widths in bf16: one element), and the gradients of the
    rule's tiles for them (a padded tile of 1024 lanes, pieces and a padded 8192-lane tile on twice the warps, wide
    pieces, the pre-residual form's chunks) are within twice PyTorch's error of a float64 reference."""
    seen = []
    rule = norm.backward_rule
    monkeypatch.setattr(norm, "backward_rule", lambda *args, **kw: seen.append(
        args[5] if len(args) > 5 else kw.get("scalar")) or rule(*args, **kw))
    _odd_rows_match_the_reference(form, n, 3, 41, device)
    assert seen and all(s is True for s in seen), seen


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["ln", "ln-pre", "ln-post", "rms"])
@pytest.mark.parametrize("n", [9999, 12345])
def test_scalar_row_chunks_match_the_reference(form, n, device, monkeypatch):
    """Odd bf16 rows past 8192 lanes in one-row chunks with the weight gradients from their own kernel
    (BWD_SCALAR_ROW_CHUNKS_FROM_LANES; RMSNorm's here too, its whole rows and pieces off): every gradient within
    twice PyTorch's error of float64."""
    seen = record_results(monkeypatch, norm, "weight_kernel_rule")
    with norm.tuned(BWD_SCALAR_RMS_KEEPS_PIECES=False, BWD_SCALAR_WHOLE_ROW_WARPS=0):
        _odd_rows_match_the_reference(form, n, 5, 61, device)
    assert seen == [True], seen  # (the launcher took the one-row chunks' weight kernel)


def test_scalar_pre_chunks_rule():
    """The pre-residual LayerNorm's forward on scalar rows in a padded tile past 8192 lanes takes one-row chunks of
    FWD_SCALAR_PRE_CHUNK_LANES on FWD_SCALAR_PRE_CHUNK_WARPS warps; pieces (8193-12288), vector rows, the post-residual
    and plain forms and RMSNorm keep the rule's tiles; 0 turns it off."""
    chunks = norm.Tile(1, norm.TUNING.fwd_scalar_pre_chunk_lanes, 0, norm.TUNING.fwd_scalar_pre_chunk_warps, False, 1)
    for n in (12289, 12345, 15001, 16383, 16384):
        tile = norm.forward_rule(n, False, True, pre=True, scalar=True)
        assert tile == chunks._replace(num_chunks=norm.cdiv(n, norm.TUNING.fwd_scalar_pre_chunk_lanes)), (n, tile)
        assert norm.forward_rule(n, False, True) == norm.forward_rule(n, False, True, pre=True) != tile
        assert norm.forward_rule(n, False, True, scalar=True) == norm.forward_rule(n, False, True)  # (post)
        assert norm.forward_rule(n, True, True, pre=True, scalar=True) == norm.forward_rule(n, True, True)
        assert norm.forward_rule(n, False, False, scalar=True) == norm.forward_rule(n)
    for n in (4567, 8193, 8447, 9999, 12288, 20001):  # (pieces, or past FWD_MAX_LANES: the chunks' own rule)
        assert norm.forward_rule(n, False, True, pre=True, scalar=True) == norm.forward_rule(n, False, True), n
    with norm.tuned(FWD_SCALAR_PRE_CHUNK_LANES=0):
        assert norm.forward_rule(12345, False, True, pre=True, scalar=True) == norm.forward_rule(12345, False, True)


def test_scalar_rms_chunks_rule():
    """RMSNorm's plain forward on scalar rows from FWD_SCALAR_RMS_CHUNKS_FROM_LANES lanes up to FWD_MAX_LANES takes
    one-row chunks of FWD_SCALAR_RMS_CHUNK_LANES on FWD_SCALAR_RMS_CHUNK_WARPS warps; narrower or wider rows, vector
    rows, the pre-residual RMSNorm and LayerNorm keep the rule's tiles; FWD_CHUNK_LANES (an A/B's knob) and 0 turn it
    off."""
    lanes, warps = norm.TUNING.fwd_scalar_rms_chunk_lanes, norm.TUNING.fwd_scalar_rms_chunk_warps
    assert warps < norm.TUNING.fwd_chunk_warps  # (else the rule changes nothing but the width)
    for n in (12289, 12345, 15001, 16383):
        tile = norm.forward_rule(n, True, False, False, True)
        assert tile == norm.Tile(1, lanes, norm.cdiv(n, lanes), warps, False, 1), (n, tile)
        assert norm.forward_rule(n, True).num_warps == norm.TUNING.fwd_chunk_warps != tile.num_warps  # (vector rows)
        assert norm.forward_rule(n, True, True, True, True) == norm.forward_rule(n, True, True, True)  # (pre)
        assert norm.forward_rule(n, False, False, False, True) == norm.forward_rule(n)  # (LayerNorm)
    for n in (8193, 8447, 9999, 12287, 20001):
        assert norm.forward_rule(n, True, False, False, True) == norm.forward_rule(n, True), n
    with norm.tuned(FWD_CHUNK_LANES=4096):
        assert norm.forward_rule(12345, True, False, False, True) == norm.forward_rule(12345, True)
    with norm.tuned(FWD_CHUNK_LANES=0, FWD_SCALAR_RMS_CHUNKS_FROM_LANES=0):
        assert norm.forward_rule(12345, True, False, False, True) == norm.forward_rule(12345, True)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [12345, 15001])
def test_scalar_rms_chunks_match_the_reference(n, device, monkeypatch):
    """RMSNorm's forward on odd bf16 rows in the rule above's chunks: y within twice PyTorch's error of float64, on
    the chunks (and off them with the constant 0); the rows' gradients too."""
    seen = record_results(monkeypatch, norm, "forward_rule")
    x = random_tensor((3, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=81)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=82)
    expected, torch_out = norm.rms_norm_ref(x.double(), w.double()), norm.rms_norm_ref(x, w)
    for start in (norm.TUNING.fwd_scalar_rms_chunks_from_lanes, 0):
        with norm.tuned(FWD_SCALAR_RMS_CHUNKS_FROM_LANES=start):
            y = blockfuse.rms_norm(x, w)
        assert (seen[-1].num_warps == norm.TUNING.fwd_scalar_rms_chunk_warps) == bool(start), seen[-1]
        assert_close_to_reference(y, torch_out, expected)
    with norm.tuned(FWD_SCALAR_RMS_CHUNKS_FROM_LANES=12289):
        _odd_rows_match_the_reference("rms", n, 3, 85, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [12345, 15001])
def test_scalar_pre_chunks_match_the_reference(n, device, monkeypatch):
    """The pre-residual LayerNorm's forward on odd bf16 rows in one-row chunks (the rule above): y and s within twice
    PyTorch's error of float64, the launcher on the chunks (and off them with the constant 0), and the gradients."""
    seen = record_results(monkeypatch, norm, "forward_rule")
    x = random_tensor((3, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=71)
    r = random_tensor((3, n), torch.bfloat16, device, scale=1.5, seed=72)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=73)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=74)
    expected = norm.layer_norm_ref(x.double(), w.double(), b.double(), residual=r.double())
    torch_out = norm.layer_norm_ref(x, w, b, residual=r)
    for chunk_lanes in (norm.TUNING.fwd_scalar_pre_chunk_lanes, 0):
        with norm.tuned(FWD_SCALAR_PRE_CHUNK_LANES=chunk_lanes):
            y, s = blockfuse.layer_norm(x, w, b, residual=r)
        assert (seen[-1].num_chunks > 1) == bool(chunk_lanes), seen[-1]
        assert_close_to_reference(y, torch_out[0], expected[0])
        assert_close_to_reference(s, torch_out[1], expected[1])
    with norm.tuned(FWD_SCALAR_PRE_CHUNK_LANES=2048):
        _odd_rows_match_the_reference("ln-pre", n, 3, 75, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["ln", "ln-pre", "rms"])
def test_scalar_whole_row_in_kernel_weights_match_the_reference(form, device, monkeypatch):
    """Odd bf16 rows past 8192 lanes in one padded row on 32 warps, read once (BWD_SCALAR_WHOLE_ROW_WARPS), the
    weight / bias gradients accumulated in the kernel (RMSNorm's rule; the LayerNorm forms' with
    BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL off, the A/B's `whole32`): the tile, and every gradient within twice PyTorch's
    error of float64."""
    with norm.tuned(BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL=False):
        is_rms = form == "rms"
        tile = norm.backward_rule(9999, 0, form == "ln-pre", is_rms=is_rms, scalar=True)
        assert (tile.block_m, tile.block_n, tile.num_chunks, tile.num_warps) == (1, 16384, 1, 32)
        assert not norm._bwd_reload(tile) and not norm.weight_kernel_rule(tile, 9999, True, is_rms=is_rms)
        assert norm.backward_rule(9999, 0, form == "ln-pre", is_rms=is_rms) != tile  # (vector accesses: not it)
        seen = record_results(monkeypatch, norm, "weight_kernel_rule")
        _odd_rows_match_the_reference(form, 9999, 3, 83, device)
    assert seen == [False], seen


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", ["ln", "ln-pre", "ln-post", "rms", "rms-pre"])
def test_scalar_whole_row_weight_kernel_matches_the_reference(form, device, monkeypatch):
    """Odd bf16 rows past 8192 lanes in one whole row on 32 warps writing dx only, the weight / bias gradients from
    the weight kernel (the rule but for plain RMSNorm, BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL; plain RMSNorm's with the
    knob BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS); rows in pieces and vector rows keep their own; every gradient within
    twice PyTorch's error of float64, with 5 rows (more than one program: the weight kernel's row groups) and with 2."""
    is_rms, pre = form.startswith("rms"), form.endswith("pre")
    assert norm.TUNING.bwd_scalar_whole_row_weight_kernel and not norm.TUNING.bwd_scalar_whole_row_weight_kernel_rms
    with norm.tuned(**({"BWD_SCALAR_WHOLE_ROW_WEIGHT_KERNEL_RMS": True} if form == "rms" else {})):
        tile = norm.backward_rule(9999, 0, pre, is_rms=is_rms, scalar=True)
        assert tile.num_chunks == 1 and tile.num_warps == 32
        assert norm.weight_kernel_rule(tile, 9999, True, is_rms=is_rms, pre=pre)
        vector_rows = norm.backward_rule(9999, 0, pre, is_rms=is_rms)
        assert not norm.weight_kernel_rule(vector_rows, 9999, is_rms=is_rms, pre=pre)
        assert not norm.weight_kernel_rule(norm.backward_rule(4567, 0, scalar=True), 4567, True)  # (pieces)
        seen = record_results(monkeypatch, norm, "weight_kernel_rule")
        for rows, seed in ((5, 91), (2, 95)):
            _odd_rows_match_the_reference(form, 9999, rows, seed, device)
    assert seen == [True, True], seen


@pytest.mark.parametrize("n", [72, 1152, 4096, 8192, 9000, 11008, 14336, 20000])
def test_backward_reload_rule(n):
    """The backward reads a row twice (RELOAD) exactly where one program holds 16384 lanes or more in one tile (rows
    past 8192, 16 warps, every form; those tiles run without the pipeliner)."""
    for per_warp in (norm.TUNING.bwd_elements_per_warp, norm.TUNING.act_bwd_elements_per_warp):
        tile = norm._tile(n, norm.TUNING.bwd_tile_elements, per_warp, norm.TUNING.bwd_max_lanes, float("inf"))
        wide = tile.num_chunks == 1 and norm.next_power_of_2(n) > 8192
        assert norm._bwd_reload(tile) == wide
        assert not wide or norm._bwd_stages(tile, n, 2, 1, 3) == 1


@pytest.mark.parametrize("form", ["ln", "rms", "ln-post-dropout", "rms-pre", "ln-gelu"])
def test_backward_reload_matches_one_read(form, device):
    """The wide rows' backward that reads each row twice (RELOAD) computes what the one-read kernel does, in the same
    order: the same bits (in the interpreter) for dx and the weight / bias gradients (3 rows of 8200:
    a 16384-lane tile, masked past 8200; post-residual dropout regenerates its mask in both reads; pre-residual adds
    the residual stream's gradient; the GELU form recomputes its input from the bias in both)."""
    m, n = 3, 8200
    with norm.tuned(ACT_BWD_PIECES_FROM_LANES=0):  # (the GELU form's rule would take 8192 + 16 in pieces)
        assert not norm.backward_rule(n, form == "ln-gelu").tail
        _backward_both_ways(form, (m, n), device, "BWD_RELOAD")


@pytest.mark.parametrize("n", [4096, 5120, 8193, 11008])
@pytest.mark.parametrize("is_rms", [False, True], ids=["ln", "rms"])
def test_statistics_of_rows_in_pieces_are_exact(n, is_rms, device):
    """The forward's row statistics (mean, rstd) of rows held as a head and a tail piece (5120 = 4096 + 1024, 8193,
    11008) as close to float64's as those of a row in one tile (4096): a few fp32 ulps. Triton's interpreter had
    summed the paired row sums (``norm._row_sums``) element after element, 7-15x further off (NOTE above it)."""
    torch.manual_seed(n)
    x = torch.randn(7, n, device=device).to(torch.bfloat16)
    _, _, mean, rstd = norm._norm_fwd(x, None, None, None, None, 1e-5, norm.NONE, 0.0, is_rms, False, 0, True)
    x64 = x.double()
    center = torch.zeros_like(x64[:, :1]) if is_rms else x64.mean(-1, keepdim=True)
    rstd64 = torch.rsqrt(((x64 - center) ** 2).mean(-1) + 1e-5)
    assert ((rstd.double() - rstd64).abs() / rstd64).max().item() < 4 * 2.0**-24 * 4
    if not is_rms:  # (deviations of 1: the mean's error in units of the row's spread)
        assert (mean.double() - center[:, 0]).abs().max().item() < 2.0**-24 * 4


@pytest.mark.parametrize("n", [2560, 4304, 8192, 9000, 10240, 11008, 12288, 13312, 14336, 16384])
def test_backward_hold_rule(n):
    """The bf16 row is held across its sums and widened again (the NOTE above BWD_HOLD_PIECES) in the plain forms'
    wide pieces of 24 lanes a thread or more (11008-14336 wide; 9000-10240 do not spill) and in the 16384-lane tile
    where it pads no lane (not in pre mode); the GELU form's pieces past 16 lanes a thread (z and its rounded
    gradient: ACT_BWD_HOLD 2); never in rows of 8192 lanes or fewer without GELU, in a padded tile, or for fp16 / fp32
    rows."""
    bf16, fp16 = torch.bfloat16, torch.float16
    for mode in (norm.NONE, norm.POST, norm.PRE):
        tile = norm.backward_rule(n, 0, mode == norm.PRE, 2)
        held = norm._bwd_hold(tile, n, bf16, bf16, 0, mode)
        if tile.tail:
            assert held == (n > 8192 and tile.lanes >= 24 * 32 * tile.num_warps)
            assert held == (11008 <= n <= 14336)
        else:
            assert held == (n == 16384 and mode != norm.PRE)
        assert not norm._bwd_hold(tile, n, fp16, fp16, 0, mode)
        assert not norm._bwd_hold(tile, n, torch.float32, torch.float32, 0, mode)
        gelu = norm.GELU_CODES["tanh"]
        act_tile = norm.backward_rule(n, gelu, False, 2)
        act_held = norm._bwd_hold(act_tile, n, bf16, bf16, gelu, norm.NONE)
        assert act_held == (2 if act_tile.tail and act_tile.lanes > 16 * 32 * act_tile.num_warps else 0)
        # (8192: one tile; 2560: 10 a thread; 13312 / 14336: three pieces)
        assert act_held == (2 if n in (4304, 9000, 10240, 11008, 12288, 13312, 14336) else 0)
        assert not norm._bwd_hold(act_tile, n, fp16, fp16, gelu, norm.NONE)
    if n in (11008, 13312, 16384):
        assert norm._bwd_hold(norm.backward_rule(n, 0, False, 2), n, bf16, bf16, 0, norm.NONE)


@pytest.mark.parametrize("form, n", [(form, n) for form in ("ln", "rms", "ln-post-dropout", "rms-pre")
                                     for n in (11008, 13312, 16384) if form != "rms-pre" or n == 11008])
def test_backward_hold_matches_fp32_rows(form, n, device):
    """The backward that holds its bf16 row across the row sums and widens it again computes what the one that keeps
    fp32 tiles (pieces, 11008 / 13312) or reads the row twice (the 16384-lane tile) does: the same bits in the
    interpreter, within an ulp of bf16 compiled (3 rows; dropout regenerates its mask, pre mode adds ds)."""
    mode = norm.PRE if form == "rms-pre" else norm.NONE
    tile = norm.backward_rule(n, 0, mode == norm.PRE, 2)
    knob = "BWD_HOLD_PIECES" if tile.tail else "BWD_HOLD"
    with norm.tuned(**{knob: True}):
        assert norm._bwd_hold(tile, n, torch.bfloat16, torch.bfloat16, 0, mode)
        _backward_both_ways(form, (3, n), device, knob)


@pytest.mark.parametrize("n", [4304, 11008])
def test_gelu_backward_holding_its_rounded_gradient(n, device):
    """The GELU form's pieces holding z and d(affine output) rounded to bf16 across the row sums (ACT_BWD_HOLD 2,
    the NOTE above it): every gradient within twice PyTorch's bf16 error against float64 (PyTorch's GELU backward
    rounds that gradient to bf16 too)."""
    with norm.tuned(ACT_BWD_HOLD=2):
        gelu = norm.GELU_CODES["tanh"]
        assert norm._bwd_hold(norm.backward_rule(n, gelu, False, 2), n, torch.bfloat16, torch.bfloat16, gelu,
                              norm.NONE) == 2
        x = random_tensor((7, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=41)
        w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=42)
        b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=43)
        dy = random_tensor((7, n), torch.bfloat16, device, seed=44)

        def grads(op, dtype=torch.bfloat16):
            leaves = [t.detach().to(dtype).requires_grad_() for t in (x, w, b)]
            return torch.autograd.grad(op(*leaves), leaves, dy.to(dtype))

        ours = grads(blockfuse.layer_norm_gelu)
    eager = grads(lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b), approximate="tanh"))
    expected = grads(lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b), approximate="tanh"), torch.float64)
    for name, a, t, e in zip("xwb", ours, eager, expected):
        assert e.abs().max() > 0
        assert_close_to_reference(a, t, e, name=f"d{name}")


def _backward_both_ways(form, shape, device, knob):
    """The backward launcher's outputs (dx, dres, dw, db) with the boolean knob ``knob`` (norm.tuned) off and on, for
    ``form`` (ln, rms, ln-post-dropout, rms-pre, ln-gelu) at ``shape``: the same bits in the interpreter (it runs both
    in the same fp32 operations), within an ulp of bf16 compiled (the multiply-adds may contract differently)."""
    m, n = shape
    is_rms = form.startswith("rms")
    x = random_tensor((m, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=1)
    w = random_tensor((n,), torch.bfloat16, device, seed=2)
    b = None if is_rms else random_tensor((n,), torch.bfloat16, device, seed=3)
    mode, p = {"ln-post-dropout": (norm.POST, 0.25), "rms-pre": (norm.PRE, 0.0)}.get(form, (norm.NONE, 0.0))
    activation = norm.GELU_CODES["tanh"] if form == "ln-gelu" else 0
    outs = norm._norm_fwd(x, w, b, x.flip(0) if mode else None, None, 1e-5, mode, 0.0, is_rms, False, activation,
                          True)
    mean, rstd = (None if is_rms else outs[-2]), outs[-1]
    dy = random_tensor((m, n), torch.bfloat16, device, seed=4)
    ds = random_tensor((m, n), torch.bfloat16, device, seed=5) if mode == norm.PRE else None
    seed = draw_seed(device) if p else None
    results = {}
    for value in (False, True):
        with norm.tuned(**{knob: value}):
            results[value] = norm._norm_bwd(dy, ds, x, w, b if activation else None, b is not None, mean, rstd, seed,
                                            mode, p, is_rms, False, activation)
    for one, two in zip(results[False], results[True]):
        if device == "cpu":
            assert torch.equal(one, two)
        else:
            torch.testing.assert_close(two, one, rtol=2 ** -7, atol=1e-6)
    assert results[True][0].abs().sum() > 0 and results[True][2].abs().sum() > 0


@pytest.mark.parametrize("n", [72, 760, 768, 1152, 2048, 4096, 4304, 11008])
@pytest.mark.parametrize("m", [1, 7, 300, 2048, 8192, 32768])
@pytest.mark.parametrize("sms", [16, 132])
def test_forward_rows_follow_the_row_count(n, m, sms):
    """The forward's rows a program come down (powers of two, at least one) until m rows make
    FWD_MIN_PROGRAMS_PER_SM programs a multiprocessor, and only then; the warps follow the lanes within 4 and
    the width's own."""
    tile = forward_width_tile(n)
    ruled = norm.rows_for_count(tile, m, sms)
    wanted = sms * norm.TUNING.fwd_min_programs_per_sm
    assert (ruled.block_n, ruled.tail, ruled.block_t, ruled.num_chunks) == \
        (tile.block_n, tile.tail, tile.block_t, tile.num_chunks)
    assert ruled.block_m & (ruled.block_m - 1) == 0 and 1 <= ruled.block_m <= tile.block_m
    assert 4 <= ruled.num_warps <= tile.num_warps
    if -(-m // tile.block_m) >= wanted:
        assert ruled == tile
    else:
        assert ruled.block_m == 1 or -(-m // ruled.block_m) >= wanted, (m, ruled)
        assert ruled.block_m == tile.block_m or -(-m // (2 * ruled.block_m)) < wanted, (m, ruled)
    if (n, m, sms) == (768, 2048, 132):  # 4 rows of 1024 lanes a program: 512 programs; 2 rows: 1024 >= 528
        assert (tile.block_m, ruled.block_m, ruled.num_warps) == (4, 2, 4)


@pytest.mark.parametrize("form", ["ln", "rms-pre"])
def test_forward_with_fewer_rows_a_program_matches_the_reference(form, device, monkeypatch):
    """The row-count rule's tiles (one row a program where the width's tile packs four; forced here, on a card of
    16 multiprocessors, also in the interpreter) compute what the reference does."""
    monkeypatch.setattr(norm, "_forward_tile", lambda tile, m, dev: norm.rows_for_count(tile, m, 16))
    m, n = 37, 768
    x = random_tensor((m, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=1)
    w = random_tensor((n,), torch.bfloat16, device, seed=2)
    tile = forward_width_tile(n)
    assert tile.block_m > 1 and norm.rows_for_count(tile, m, 16).block_m == 1
    if form == "ln":
        b = random_tensor((n,), torch.bfloat16, device, seed=3)
        out = blockfuse.layer_norm(x, w, b)
        ref = norm.layer_norm_ref(x.double(), w.double(), b.double())
        own = norm.layer_norm_ref(x, w, b)  # PyTorch in bf16
    else:
        r = random_tensor((m, n), torch.bfloat16, device, seed=4)
        out = blockfuse.rms_norm(x, w, residual=r, residual_mode="pre")[0]
        ref = norm.rms_norm_ref(x.double(), w.double(), residual=r.double(), residual_mode="pre")[0]
        own = norm.rms_norm_ref(x, w, residual=r, residual_mode="pre")[0]
    assert ref.abs().max() > 0
    assert_close_to_reference(out, own, ref)


@pytest.mark.parametrize("n", [72, 760, 768, 1128, 1152, 2560, 2880, 4096, 4304, 5120, 6144, 11008, 14336, 20000])
def test_launch_rule(n):
    """The tile rule, from the width alone: rows up to TAIL_FROM_LANES padded take one power-of-two tile;
    wider ones held in registers take two pieces that pad at most 1/5 (11008: 8192 + 4096, not 16384); the
    pre-residual backward takes rows past BWD_MAX_LANES_PRE in chunks, the others past BWD_MAX_LANES; chunks pad at
    most 1/4; warps are a power of two within 4-16."""
    fwd = forward_width_tile(n)
    plain = backward_width_tile(n)
    extra = backward_width_tile(n, pre=True)
    whole = 1 << (n - 1).bit_length()
    tuning = norm.TUNING
    for tile, max_lanes in ((fwd, tuning.fwd_max_lanes), (plain, tuning.bwd_max_lanes),
                            (extra, tuning.bwd_max_lanes_pre)):
        assert tile.num_warps in (4, 8, 16)
        if tile.num_chunks == 1:
            lanes = tile.block_n + (tile.block_t if tile.tail else 0)
            assert lanes <= max_lanes and lanes >= n
            if whole <= norm.TUNING.tail_from_lanes or tile is not fwd:
                assert (tile.block_n, tile.tail) == (whole, False), (n, tile)
            else:
                assert lanes <= n * 6 // 5, (n, tile)
        else:
            assert whole > max_lanes and tile.num_chunks * tile.block_n <= n * 5 // 4, (n, tile)
    assert norm.row_pieces(11008) == (8192, 4096) and norm.row_pieces(4096) == (4096, 0)
    assert norm.row_pieces(4304) == (4096, 256) and norm.row_pieces(7000) == (8192, 0)


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------


def regenerate_mask(seed_value: int, shape, p: float, device) -> torch.Tensor:
    """The keep-mask the op drew after ``torch.manual_seed(seed_value)`` (its seed is the first draw)."""
    torch.manual_seed(seed_value)
    seed = draw_seed(device)
    return keep_mask(seed, math.prod(shape), p).view(shape)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize(
    "dtype,layout", [(torch.float32, "contiguous"), (torch.bfloat16, "transposed")], ids=["fp32", "bf16-transposed"]
)
@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_dropout_matches_reference_with_the_kernel_mask(mode, variant, dtype, layout, device):
    """Forward and backward equal the oracle computed with the mask from ``keep_mask``: the
    forward draws the mask it says it draws, and the backward regenerates the same one."""
    p = 0.3
    inputs = make_inputs(
        VARIANTS[variant], (7, 760), dtype, device, residual=True, x_layout=layout, residual_layout=layout
    )
    ours = {}

    def run_ours(grad_outputs):
        # The seed the op draws is the first draw after this: the mask regenerated below.
        torch.manual_seed(1234)
        ours["result"] = forward_backward(
            lambda t: call_blockfuse(VARIANTS[variant], t, mode, dropout_p=p), inputs, grad_outputs
        )
        return ours["result"]

    mask = regenerate_mask(1234, tuple(inputs.x.shape), p, device)
    assert 0.6 < mask.float().mean().item() < 0.8, "keep_mask does not keep ~70% of the elements"
    check_against_pytorch(VARIANTS[variant], inputs, mode, dropout_p=p, dropout_mask=mask, run_ours=run_ours)

    # The reference beside the kernel, given the same mask, agrees as well.
    reference = as_list(call_reference(VARIANTS[variant], inputs, mode, dropout_p=p, dropout_mask=mask))
    for ours_output, reference_output in zip(ours["result"][0], reference):
        assert relative_error(ours_output, reference_output) < 1e-2


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_dropout_keep_rate(variant, p, device):
    """Pre mode returns s = residual + dropout(x): a dropped element of s equals the residual
    exactly, a kept one does not. The kept fraction is within 5 binomial sigmas of 1 - p."""
    inputs = make_inputs(VARIANTS[variant], (31, 1128), torch.float32, device, residual=True)
    torch.manual_seed(7)
    _, s = call_blockfuse(VARIANTS[variant], inputs, "pre", dropout_p=p)
    kept = s != inputs.residual
    n = kept.numel()
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(kept.sum().item() - n * (1 - p)) <= 5 * sigma, f"kept {kept.sum().item()} of {n} at p={p}"
    # Kept elements carry the 1/(1-p) scale.
    scaled = (s - inputs.residual)[kept]
    expected = (inputs.x / (1 - p))[kept]
    assert relative_error(scaled, expected) < 1e-5
    # The mask keep_mask reports is the one applied.
    assert torch.equal(kept, regenerate_mask(7, tuple(inputs.x.shape), p, device))


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_mask_rate(p, device):
    """keep_mask itself, on a larger sample: the kept fraction within 5 binomial sigmas of 1 - p. (Once a rate: in
    test_dropout_keep_rate it drew the same mask for each norm, 1.6 s apiece in the interpreter.)"""
    torch.manual_seed(8)
    mask = keep_mask(draw_seed(device), 1 << 18, p)
    n = mask.numel()
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(mask.sum().item() - n * (1 - p)) <= 5 * sigma


@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_dropout_seeding(mode, variant, device):
    """Same torch seed -> the same outputs and grads, bit for bit; another seed, or the next
    call without reseeding -> another mask."""
    inputs = make_inputs(VARIANTS[variant], (3, 760), torch.float32, device, residual=True)
    grad_outputs = make_grad_outputs([tuple(inputs.x.shape)] * len(output_names(inputs, mode)), torch.float32, device)

    def run(seed=None):
        if seed is not None:
            torch.manual_seed(seed)
        return forward_backward(
            lambda t: call_blockfuse(VARIANTS[variant], t, mode, dropout_p=0.5), inputs, grad_outputs
        )

    first, again, other = run(11), run(11), run(12)
    following = run()
    for a, b in zip(first[0] + first[1], again[0] + again[1]):
        assert (a is None and b is None) or torch.equal(a, b)
    for changed, before, what in ((other, first, "another torch seed"), (following, other, "the next call")):
        differing = (changed[0][0] != before[0][0]).float().mean().item()
        # Two independent masks at p=0.5 disagree on about half the elements.
        assert differing > 0.25, f"only {differing:.1%} of the outputs changed with {what}"


@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_dropout_off_equals_no_dropout(mode, variant, device):
    """``dropout_p=0`` and ``training=False`` both give exactly the result without dropout,
    forward and backward."""
    inputs = make_inputs(VARIANTS[variant], (3, 760), torch.bfloat16, device, residual=True)
    grad_outputs = make_grad_outputs([tuple(inputs.x.shape)] * len(output_names(inputs, mode)), torch.bfloat16, device)

    def run(**kwargs):
        return forward_backward(lambda t: call_blockfuse(VARIANTS[variant], t, mode, **kwargs), inputs, grad_outputs)

    plain = run()
    for kwargs in ({"dropout_p": 0.0}, {"dropout_p": 0.0, "training": False}, {"dropout_p": 0.5, "training": False}):
        result = run(**kwargs)
        for a, b, name in zip(result[0] + result[1], plain[0] + plain[1], ["out"] * len(result[0]) + GRAD_NAMES):
            assert (a is None and b is None) or torch.equal(a, b), f"{name} differs with {kwargs}"


# ---------------------------------------------------------------------------------------------
# Determinism of the weight gradients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("variant", ["ln", "rms"])
@pytest.mark.parametrize("mode", ["none", "pre"])
def test_weight_grads_are_deterministic(mode, variant, dtype, device):
    """Two identical runs give the same weight gradients bit for bit (partial sums in a fixed order, no atomics)."""
    if device != "cuda":
        pytest.skip("needs CUDA: the interpreter runs a kernel's programs one after another, so two runs there "
                    "cannot differ in their order of additions")
    inputs = make_inputs(VARIANTS[variant], (199, 1128), dtype, device, residual=(mode != "none"))
    names = output_names(inputs, "pre")
    grad_outputs = make_grad_outputs([tuple(inputs.x.shape)] * len(names), dtype, device)

    def fn(t):
        return call_blockfuse(VARIANTS[variant], t, "pre")

    first = forward_backward(fn, inputs, grad_outputs)[1]
    second = forward_backward(fn, inputs, grad_outputs)[1]
    for a, b, name in zip(first, second, GRAD_NAMES):
        assert (a is None and b is None) or torch.equal(a, b), f"{name} differs between two identical runs"


@pytest.mark.parametrize("n", [1, 3])
def test_pre_mode_rows_narrower_than_16_take_the_reference(n, monkeypatch):
    """16-bit pre-mode rows under PRE_MIN_LANES run the reference (the NOTE above it): at width 1, where x-hat is 0,
    dx is 0 (the kernel's backward gave -134: its x-hat of the rounded sum with the fp32 sum's statistics); at
    width 3 the weight gradient within 2x PyTorch's error (the kernel's was up to 11x)."""
    g = torch.Generator().manual_seed(29)
    x = (torch.randn(7, n, generator=g) * 2 + 0.5).half().requires_grad_()
    r = (torch.randn(7, n, generator=g) * 2 - 0.25).half()
    w = (torch.randn(n, generator=g) * 0.5 + 1).requires_grad_()
    b = torch.randn(n, generator=g) * 0.5
    dy = torch.randn(7, n, generator=g).half()
    launched = []
    monkeypatch.setattr(norm, "_run_norm", lambda *a, **k: launched.append(1))
    y, _ = blockfuse.layer_norm(x, w, b, residual=r)
    assert not launched
    dx, dw = torch.autograd.grad(y, [x, w], dy)
    if n == 1:
        assert dx.abs().max() < 1e-3 and dw.abs().max() < 1e-3
        return
    w64 = w.detach().double().requires_grad_()
    oracle = torch.autograd.grad(F.layer_norm(r.double() + x.double(), (n,), w64, b.double()), [w64], dy.double())[0]
    w32 = w.detach().clone().requires_grad_()
    theirs = torch.autograd.grad(F.layer_norm((r + x).float(), (n,), w32, b).half(), [w32], dy)[0]
    assert relative_error(dw, oracle) <= 2 * relative_error(theirs, oracle)
    assert not norm._narrow_pre(x.float(), r.float(), "pre") and not norm._narrow_pre(x, r, "post")


@pytest.mark.parametrize("weight", [False, True], ids=["bias-only", "bf16-weight"])
@pytest.mark.parametrize("mode", ["none", "pre", "post"])
def test_bias_gradient_in_the_bias_dtype(mode, weight, device):
    """An fp32 bias beside bf16 x (and no weight, or a bf16 one): its gradient, a column sum of dy, comes back
    as exact as fp32 sums make it, not rounded to x's or the weight's dtype (it was, to bf16: 3e-3 relative)."""
    n, shape = 1000, (3, 5, 1000)
    x = random_tensor(shape, torch.bfloat16, device, seed=1, scale=2.0).requires_grad_()
    residual = None if mode == "none" else random_tensor(shape, torch.bfloat16, device, seed=2)
    w = random_tensor((n,), torch.bfloat16, device, seed=3, scale=0.5, offset=1.0) if weight else None
    b = random_tensor((n,), torch.float32, device, seed=4, scale=0.5).requires_grad_()
    kwargs = {} if residual is None else {"residual": residual, "residual_mode": mode}
    out = blockfuse.layer_norm(x, w, b, **kwargs)
    y = out[0] if mode == "pre" else out
    dy = random_tensor(shape, torch.bfloat16, device, seed=5)
    y.backward(dy)
    assert b.grad.dtype == torch.float32
    exact = dy.double().reshape(-1, n).sum(0)
    assert relative_error(b.grad, exact) < 1e-6


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def block(x, residual, ln_weight, ln_bias, rms_weight):
    """A small block that uses both ops in every mode, with dropout on one branch."""
    y, s = blockfuse.layer_norm(x, ln_weight, ln_bias, residual=residual, dropout_p=0.25)
    z = blockfuse.rms_norm(y * 1.5, rms_weight, residual=s, residual_mode="post")
    u = blockfuse.layer_norm(z, ln_weight)
    v, t = blockfuse.rms_norm(u, rms_weight, residual=z, cast_before_weight=True, dropout_p=0.1)
    return blockfuse.rms_norm(v + t) + blockfuse.layer_norm(v, residual=t, residual_mode="post")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no graph breaks, and the same forward and backward as eager (same torch seed:
    the dropout seed is the first draw both ways; inductor is told to use eager's RNG)."""
    import torch._inductor.config

    shape = (5, 72)
    inputs = [
        random_tensor(shape, torch.float32, device, seed=1, scale=2.0, offset=0.5),
        random_tensor(shape, torch.float32, device, seed=2),
        random_tensor(shape[-1:], torch.float32, device, seed=3, scale=0.5, offset=1.0),
        random_tensor(shape[-1:], torch.float32, device, seed=4, scale=0.5),
        random_tensor(shape[-1:], torch.float32, device, seed=5, scale=0.5, offset=1.0),
    ]
    grad_output = random_tensor(shape, torch.float32, device, seed=6)

    def run(fn):
        torch.manual_seed(21)
        leaf_list = leaves(*inputs)
        out = fn(*leaf_list)
        return [out.detach()] + grads(out, leaf_list, grad_output)

    # Inductor fuses the ops around the norms (and the reference's ops on the reference path), so
    # the last bits may differ; aot_eager runs eager's kernels.
    with torch._inductor.config.patch(fallback_random=True):
        assert_compiles_like_eager(block, run, ["out", "dx", "dresidual", "dln_weight", "dln_bias", "drms_weight"],
                                   backend=backend, exact=backend == "aot_eager", rtol=1e-5, atol=1e-5,
                                   explain_args=inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_cuda_runs_the_triton_kernels(variant):
    from blockfuse.runtime import implementation

    assert implementation("cuda") == "triton"
    inputs = make_inputs(VARIANTS[variant], (199, 4304), torch.bfloat16, "cuda", residual=True)
    check_against_pytorch(VARIANTS[variant], inputs, "pre")


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _bad_calls():
    x = random_tensor((3, 8), torch.float32)
    w = random_tensor((8,), torch.float32, seed=1, offset=1.0)
    r = random_tensor((3, 8), torch.float32, seed=2)
    wrong = random_tensor((7,), torch.float32, seed=3)
    ln, rms = blockfuse.layer_norm, blockfuse.rms_norm
    int_x = torch.randint(1, 5, (3, 8), generator=torch.Generator().manual_seed(0))
    return [
        ("ln-weight-shape", lambda: ln(x, wrong), ValueError, "weight"),
        ("ln-weight-2d", lambda: ln(x, w.view(1, 8)), ValueError, "weight"),
        ("rms-weight-shape", lambda: rms(x, wrong), ValueError, "weight"),
        ("ln-bias-shape", lambda: ln(x, w, wrong), ValueError, "bias"),
        ("ln-residual-shape", lambda: ln(x, w, residual=r[:, :7]), ValueError, "residual"),
        ("rms-residual-shape", lambda: rms(x, w, residual=r[:2]), ValueError, "residual"),
        ("ln-residual-dtype", lambda: ln(x, w, residual=r.half()), TypeError, "residual"),
        ("rms-residual-dtype", lambda: rms(x.bfloat16(), w, residual=r.half()), TypeError, "residual"),
        ("ln-int-x", lambda: ln(int_x, w), TypeError, "x"),
        ("rms-int-x", lambda: rms(int_x), TypeError, "x"),
        ("ln-int-weight", lambda: ln(x, int_x[0]), TypeError, "weight"),
        ("rms-int-weight", lambda: rms(x, int_x[0]), TypeError, "weight"),
        ("ln-eps-zero", lambda: ln(x, w, eps=0.0), ValueError, "eps"),
        ("rms-eps-negative", lambda: rms(x, w, eps=-1e-6), ValueError, "eps"),
        ("ln-dropout-negative", lambda: ln(x, w, residual=r, dropout_p=-0.1), ValueError, "dropout_p"),
        ("ln-dropout-one", lambda: ln(x, w, residual=r, dropout_p=1.0), ValueError, "dropout_p"),
        ("rms-dropout-above-one", lambda: rms(x, w, residual=r, dropout_p=1.5), ValueError, "dropout_p"),
        ("ln-dropout-no-residual", lambda: ln(x, w, dropout_p=0.1), ValueError, "dropout_p"),
        ("rms-dropout-no-residual", lambda: rms(x, w, dropout_p=0.1), ValueError, "dropout_p"),
        ("ln-residual-mode", lambda: ln(x, w, residual=r, residual_mode="middle"), ValueError, "residual_mode"),
        ("rms-residual-mode", lambda: rms(x, w, residual=r, residual_mode="Pre"), ValueError, "residual_mode"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())), ids=[c[0] for c in _bad_calls()])
def test_bad_input_raises(case):
    _, call, error, argument = _bad_calls()[case]
    with pytest.raises(error, match=argument):
        call()


# ---------------------------------------------------------------------------------------------
# The references beside the kernels, and the CPU fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("mode", ["none", "pre", "post", "pre-dropout", "post-dropout"])
def test_reference_in_float64_matches_pytorch(mode, variant):
    """``*_ref`` on float64 inputs (the documented oracle) equals PyTorch's composition in float64."""
    p = 0.3 if "dropout" in mode else 0.0
    inputs = make_inputs(VARIANTS[variant], (3, 760), torch.float64, "cpu", residual=(mode != "none"))
    mask = None
    if p:
        mask = torch.rand(inputs.x.shape, generator=torch.Generator().manual_seed(0)) >= p
    residual_mode = "post" if mode.startswith("post") else "pre"
    grad_outputs = make_grad_outputs(
        [tuple(inputs.x.shape)] * len(output_names(inputs, residual_mode)), torch.float64, "cpu"
    )
    reference = forward_backward(
        lambda t: call_reference(VARIANTS[variant], t, residual_mode, dropout_p=p, dropout_mask=mask),
        inputs,
        grad_outputs,
    )
    expected = forward_backward(
        lambda t: call_pytorch(VARIANTS[variant], t, residual_mode, mask, p), inputs, grad_outputs
    )
    names = output_names(inputs, residual_mode) + GRAD_NAMES
    for a, b, name in zip(reference[0] + reference[1], expected[0] + expected[1], names, strict=True):
        if b is None:
            assert a is None, f"{name}: unexpected grad"
            continue
        assert a.dtype == torch.float64, f"{name}: {a.dtype}"
        assert relative_error(a, b) < 1e-12, f"{name}: relative error {relative_error(a, b):.3e}"


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("variant", MAIN_VARIANTS)
def test_reference_in_low_precision(variant, dtype):
    """The reference (what CPU tensors use without Triton) is as accurate as PyTorch."""
    inputs = make_inputs(VARIANTS[variant], (3, 760), dtype, "cpu", residual=True)
    ours = call_reference(VARIANTS[variant], inputs, "pre")
    baseline = call_pytorch(VARIANTS[variant], inputs, "pre")
    oracle = call_pytorch(VARIANTS[variant], Inputs(*as_double(*inputs.tensors())), "pre")
    assert_all_close_to_reference(list(ours), list(baseline), list(oracle), ["y", "s"])



FALLBACK_SCRIPT = textwrap.dedent(
    """
    import torch
    import blockfuse
    from blockfuse.runtime import implementation

    assert implementation("cpu") == "reference", implementation("cpu")
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 760, generator=g) * 2 + 0.5).bfloat16()
    r = torch.randn(3, 760, generator=g).bfloat16()
    w = torch.randn(760, generator=g).bfloat16()
    b = torch.randn(760, generator=g).bfloat16()

    def leaves():
        return [t.clone().requires_grad_() for t in (x, r, w, b)]

    for mode in ("pre", "post"):
        a, c = leaves(), leaves()
        ours = blockfuse.layer_norm(a[0], a[2], a[3], residual=a[1], residual_mode=mode)
        ref = blockfuse.layer_norm_ref(c[0], c[2], c[3], residual=c[1], residual_mode=mode)
        ours = ours if isinstance(ours, tuple) else (ours,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for o, e in zip(ours, ref):
            assert torch.equal(o, e), (mode, (o.float() - e.float()).abs().max())
        sum(o.float().sum() for o in ours).backward()
        sum(e.float().sum() for e in ref).backward()
        for t, u in zip(a, c):
            assert torch.equal(t.grad, u.grad), mode
    assert torch.equal(blockfuse.layer_norm(x, w, b), blockfuse.layer_norm_ref(x, w, b))
    assert torch.equal(blockfuse.rms_norm(x, w), blockfuse.rms_norm_ref(x, w))
    assert torch.equal(
        blockfuse.rms_norm(x, w, cast_before_weight=True), blockfuse.rms_norm_ref(x, w, cast_before_weight=True)
    )
    print("reference fallback ok")
    """
)


def test_cpu_without_interpreter_uses_the_reference():
    assert_runs_without_interpreter(FALLBACK_SCRIPT)


@pytest.mark.parametrize("n", [4096, 8191, 8192, 9000, 11008, 14336, 16384, 16385, 20000, 32768, 65536])
@pytest.mark.parametrize("is_rms", [False, True])
def test_forward_chunks_rule(n, is_rms):
    """The forward reads a row in chunks past FWD_MAX_LANES, RMSNorm's from FWD_RMS_CHUNKS_FROM_LANES: one row a
    program of FWD_CHUNK_WARPS warps, chunks of the CHUNK_CHOICES width that pads least (never a quarter of the row),
    covering the row; narrower rows keep the tiles that hold them in registers, and 0 turns RMSNorm's off."""
    tile = norm.forward_rule(n, is_rms)
    chunked = n > norm.TUNING.fwd_max_lanes or (is_rms and n >= norm.TUNING.fwd_rms_chunks_from_lanes)
    assert (tile.num_chunks > 1) == chunked, tile
    if chunked:
        assert (tile.block_m, tile.num_warps, tile.tail) == (1, norm.TUNING.fwd_chunk_warps, False)
        assert tile.block_n in norm.TUNING.chunk_choices
        assert n <= tile.num_chunks * tile.block_n < n + tile.block_n
        assert tile.num_chunks * tile.block_n <= n * 5 // 4, tile
    else:  # (the width's tile: LayerNorm's residual forms take it too)
        assert tile == norm.forward_rule(n, False, residual=is_rms)
    with norm.tuned(FWD_RMS_CHUNKS_FROM_LANES=0):
        assert norm.forward_rule(n, is_rms) == norm.forward_rule(n, False, residual=is_rms)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [8192, 9000, 20000])
@pytest.mark.parametrize("form", ["ln", "rms", "ln-post", "ln-gelu", "rms-pre"])
def test_forward_in_chunks_matches_the_reference(form, n, device):
    """The forward's chunks (one row a program; LayerNorm's statistics per lane, merged) compute what the reference
    does in every form, on rows read with a stride (x a slice of a wider tensor), with a partial last chunk (9000,
    20000) and without (8192: RMSNorm's chunks; LayerNorm holds it in registers)."""
    m = 3
    x = random_tensor((m, n + 64), torch.bfloat16, device, scale=2.0, offset=0.5, seed=21)[:, :n]
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=22)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=23)
    r = random_tensor((m, n), torch.bfloat16, device, seed=24)

    def run(reference, x, w, b, r):
        if form != "rms-pre":
            return _norm_form(form, reference, x, w, b, r)
        y, s = (norm.rms_norm_ref if reference else blockfuse.rms_norm)(x, w, residual=r)
        return torch.cat([y, s])

    out = run(False, x, w, b, r)
    expected = run(True, x.double(), w.double(), b.double(), r.double())
    own = run(True, x, w, b, r)  # PyTorch in bf16
    assert expected.abs().max() > 0
    assert_close_to_reference(out, own, expected)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [760, 2048, 4304, 11008])
@pytest.mark.parametrize("mode", [None, "pre", "post"])
def test_weight_hint_changes_no_value(n, mode, device, monkeypatch):
    """The plain forward's launch passes the weight's and bias's cache hint (the NOTE above FWD_WB_EVICT), and the hint
    changes no value: every form, LayerNorm and RMSNorm, with and without it, bit for bit (on a GPU, two compiled
    kernels; the interpreter ignores hints)."""
    m = 5
    x = random_tensor((m, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=51)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=52)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=53)
    r = random_tensor((m, n), torch.bfloat16, device, seed=54)
    kwargs = {} if mode is None else dict(residual=r, residual_mode=mode)
    hints = _record_weight_hints(monkeypatch)
    outs = []
    for hint in (norm.TUNING.fwd_wb_evict, ""):
        with norm.tuned(FWD_WB_EVICT=hint):
            outs.append((blockfuse.layer_norm(x, w, b, **kwargs), blockfuse.rms_norm(x, w, **kwargs)))
    assert hints == ["evict_last", "evict_last", "", ""]
    for first, second in zip(*outs):
        for a, c in zip(*(t if isinstance(t, tuple) else (t,) for t in (first, second))):
            assert torch.equal(a, c)


def _record_weight_hints(monkeypatch) -> list:
    """The WB_EVICT of each forward launch from now on, in order (the launches still run)."""
    hints = []
    launch = norm._fwd_kernel

    def recording(grid, *args, **constexprs):
        hints.append(constexprs["WB_EVICT"])
        return launch(grid, *args, **constexprs)

    monkeypatch.setattr(norm, "_fwd_kernel", recording)
    return hints


@pytest.mark.parametrize("n", [1152, 8192])
def test_gelu_form_takes_its_own_weight_hint(n, device, monkeypatch):
    """LayerNorm + GELU's forward passes ACT_FWD_WB_EVICT (none: the NOTE above it), the plain forms FWD_WB_EVICT; the
    GELU form's output is the same bits under either hint."""
    x = random_tensor((3, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=61)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=62)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=63)
    assert norm.forward_weight_hint(norm.GELU_CODES["tanh"]) == "" and norm.forward_weight_hint(0) == "evict_last"
    hints = _record_weight_hints(monkeypatch)
    outs = []
    for hint in ("", "evict_last"):
        with norm.tuned(ACT_FWD_WB_EVICT=hint):
            outs.append(blockfuse.layer_norm_gelu(x, w, b))
    blockfuse.layer_norm(x, w, b)
    assert hints == ["", "evict_last", "evict_last"]
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("n,early", [(760, True), (1024, True), (1152, True), (1536, True), (2048, False),
                                     (2560, True), (4096, False), (4304, True), (6144, True), (8192, False),
                                     (20000, False)])
def test_early_residual_rule(n, early):
    """The post-residual forward loads its residual with x except in one whole power-of-two tile past 1024 lanes
    (the NOTE above FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES); a row read in chunks never does."""
    assert norm.early_residual(norm.forward_rule(n, False, True), n) == early


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("n", [760, 1152, 2048, 4304])
def test_early_residual_equals_the_late_load(n, device):
    """The residual loaded with x gives the post-residual forward's output bit for bit as loaded after the
    statistics: the same sum in the same fp32, the dropout mask drawn from the row and column."""
    # NOTE: 9 rows on the CPU, where 37 made the same launches (each kernel's constants and warps, 2026-12-07) and the
    # same masked last row block (one row of 4, of 2) in a quarter of the interpreter's time; a GPU's tile takes its
    # rows from the count (rows_for_count)
    m = 9 if device == "cpu" else 37
    x = random_tensor((m, n), torch.bfloat16, device, scale=2.0, offset=0.5, seed=41)
    w = random_tensor((n,), torch.bfloat16, device, scale=0.5, offset=1.0, seed=42)
    b = random_tensor((n,), torch.bfloat16, device, scale=0.5, seed=43)
    r = random_tensor((m, n), torch.bfloat16, device, seed=44)
    outs = []
    for whole_lanes in (norm.TUNING.fwd_early_residual_max_whole_lanes, 1 << 20, 0):
        with norm.tuned(FWD_EARLY_RESIDUAL_MAX_WHOLE_LANES=whole_lanes):
            torch.manual_seed(7)
            outs.append(blockfuse.layer_norm(x, w, b, residual=r, residual_mode="post", dropout_p=0.25))
    assert torch.equal(outs[0], outs[2]) and torch.equal(outs[1], outs[2])
