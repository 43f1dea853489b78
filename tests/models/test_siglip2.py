"""Tests of the SigLIP-2 vision encoder (``blockfuse.models.siglip2``): the fixed-shape position
resize against ``F.interpolate(antialias=True)``, the encoder against transformers, eager against
fused, torch.compile, masking and argument checks. Tiny shapes throughout."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from blockfuse.models.siglip2 import (
    Siglip2Encoder,
    build_siglip2,
    position_weights,
    resize_position_embedding,
    resize_position_embedding_loop,
)
from tests.helpers import assert_all_close_to_reference, assert_close_to_reference, random_tensor

# A 4x4 position grid, 2x2 RGB patches (patch_dim 12), d 64 with 4 heads of 16, MLP 96.
TINY = {"d_model": 64, "n_heads": 4, "head_dim": None, "ffn_hidden": 96}
GEOMETRY = {"patch_dim": 12, "num_positions": 16}
MAX_PATCHES = 20
# Up- and down-sampling of the 4x4 grid, square and not, one image without padding, width 1.
SHAPES = [[4, 5], [2, 3], [1, 7], [3, 1], [5, 4]]
# NOTE: no image of width 1 against transformers: versions that resize with F.interpolate inherit
# its CPU antialias kernel's error there (every output row is row 0; see resize_position_embedding_loop).
HF_SHAPES = [[4, 5], [2, 3], [1, 7], [5, 4], [3, 2]]


def tiny_encoder(impl="eager", dtype=torch.float32, device="cpu", layers=2, seed=0):
    """A seeded tiny encoder whose LayerNorms and biases are moved off identity and zero (the same
    weights for every impl and dtype: the eager fp32 weights, converted)."""
    eager, _ = build_siglip2(batch=1, max_patches=MAX_PATCHES, layers=layers, dtype=torch.float32, seed=seed,
                             **GEOMETRY, **TINY)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed + 1)
        for parameter in eager.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))
    encoder = eager
    if impl != "eager":
        encoder = Siglip2Encoder(eager.config, layers, impl, **GEOMETRY)
        encoder.load_state_dict(eager.state_dict())
    return encoder.to(device=device, dtype=dtype)


def inputs_for(shapes, device="cpu", dtype=torch.float32, seed=0):
    spatial_shapes = torch.tensor(shapes, dtype=torch.int64, device=device)
    patch_mask = torch.arange(MAX_PATCHES, device=device)[None, :] < spatial_shapes.prod(-1)[:, None]
    pixels = random_tensor((len(shapes), MAX_PATCHES, GEOMETRY["patch_dim"]), dtype, device, seed=seed)
    return pixels * patch_mask[..., None], patch_mask, spatial_shapes


# ---------------------------------------------------------------------------------------------
# The position resize
# ---------------------------------------------------------------------------------------------


def interpolate_axis(out: int, grid: int) -> torch.Tensor:
    """F.interpolate's antialiased bilinear weights along one axis (out, grid) in fp64: each
    column is the resize of a unit impulse."""
    impulses = torch.eye(grid, dtype=torch.float64).reshape(grid, 1, 1, grid)
    resized = F.interpolate(impulses, size=(1, out), mode="bilinear", align_corners=False, antialias=True)
    return resized.reshape(grid, out).T


@pytest.mark.parametrize("grid", [4, 16])
def test_axis_weights_are_interpolates(grid):
    """Per axis, the weights are F.interpolate's for every output length from 1 to 40 (up- and
    downsampling), to fp64 rounding; each row sums to 1."""
    lengths = list(range(1, 41))
    shapes = torch.tensor([[out, 1] for out in lengths])  # rows only: columns are a single 1-wide pass
    weights = position_weights(shapes, grid, max(lengths), torch.float64)  # (batch, 40, grid * grid)
    for b, out in enumerate(lengths):
        rows = weights[b, :out].reshape(out, grid, grid).sum(-1)  # column weights sum to 1
        torch.testing.assert_close(rows, interpolate_axis(out, grid), rtol=0, atol=1e-14)
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(lengths), max(lengths), dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_resize_matches_interpolate_per_image(dtype):
    """Against one F.interpolate(antialias=True) per image, padding set to patch 0: fp32 to a few
    ulps (the GEMM sums the 256 terms in another order than the two separable passes)."""
    shapes = [[1, 1], [3, 5], [16, 16], [7, 30], [32, 8], [20, 20], [1, 400], [400, 1], [17, 13], [5, 1], [2, 200]]
    table = random_tensor((256, 72), dtype, seed=3)
    spatial_shapes = torch.tensor(shapes)
    ours = resize_position_embedding(table, spatial_shapes, 400)
    expected = resize_position_embedding_loop(table, spatial_shapes, 400)
    assert ours.shape == (len(shapes), 400, 72) and ours.dtype == dtype
    tolerance = 1e-6 if dtype == torch.float32 else 1e-13
    torch.testing.assert_close(ours, expected, rtol=tolerance, atol=tolerance)


def test_resize_keeps_the_table_dtype_and_computes_in_fp32():
    table = random_tensor((16, 24), torch.bfloat16, seed=4)
    spatial_shapes = torch.tensor([[3, 6], [8, 2]])
    ours = resize_position_embedding(table, spatial_shapes, 18)
    assert ours.dtype == torch.bfloat16
    assert torch.equal(ours, resize_position_embedding(table.float(), spatial_shapes, 18).to(torch.bfloat16))
    exact = resize_position_embedding_loop(table.double(), spatial_shapes, 18)
    # one rounding of the fp32 result: within half a bf16 ulp (2^-8 relative) plus fp32 noise
    assert ((ours.double() - exact).abs() <= exact.abs() * (2**-8 + 1e-6) + 1e-7).all()


def test_unresized_grid_is_the_table():
    table = random_tensor((16, 8), seed=5)
    ours = resize_position_embedding(table, torch.tensor([[4, 4]]), 16)
    torch.testing.assert_close(ours[0], table, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Against transformers
# ---------------------------------------------------------------------------------------------


def test_matches_transformers_siglip2_vision_model():
    """Same weights, padded NaFlex inputs: the last hidden state of transformers'
    Siglip2VisionModel (its key-padding mask from pixel_attention_mask) on every valid patch;
    the weights convert both ways; the attention-pooling head is skipped."""
    pytest.importorskip("transformers.models.siglip2")
    from transformers import Siglip2VisionConfig, Siglip2VisionModel

    config = Siglip2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                 num_channels=3, patch_size=2, num_patches=16)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        hf = Siglip2VisionModel(config).eval()
        with torch.no_grad():
            for parameter in hf.parameters():
                parameter.add_(0.1 * torch.randn_like(parameter))
    encoder = Siglip2Encoder.from_hf(hf)
    assert encoder.config.d_model == 64 and len(encoder.encoder.blocks) == 2 and encoder.grid == 4
    pixels, patch_mask, spatial_shapes = inputs_for(HF_SHAPES)
    with torch.no_grad():
        expected = hf(pixel_values=pixels, pixel_attention_mask=patch_mask.to(torch.int32),
                      spatial_shapes=spatial_shapes).last_hidden_state
        ours = encoder(pixels, patch_mask, spatial_shapes)
    torch.testing.assert_close(ours[patch_mask], expected[patch_mask], rtol=1e-5, atol=1e-5)

    back = Siglip2VisionModel(config).eval()
    missing, unexpected = back.load_state_dict(encoder.to_hf_state_dict(), strict=False)
    assert not unexpected and all(key.startswith("head.") for key in missing)
    for key, value in encoder.to_hf_state_dict().items():
        assert torch.equal(hf.state_dict()[key], value), key


def test_materialized_attention_matches_transformers_eager_attention():
    """``attention="eager"``: the same numbers as transformers' Siglip2VisionModel with
    ``attn_implementation="eager"`` (the benchmarks' HF-eager-style baseline), on every patch."""
    pytest.importorskip("transformers.models.siglip2")
    from transformers import Siglip2VisionConfig, Siglip2VisionModel

    config = Siglip2VisionConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                 num_channels=3, patch_size=2, num_patches=16, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        hf = Siglip2VisionModel(config).eval()
    assert hf.config._attn_implementation == "eager"
    sdpa = Siglip2Encoder.from_hf(hf)
    encoder = Siglip2Encoder(replace(sdpa.config, attention="eager"), 2, "eager", 12, 16).eval()
    encoder.load_state_dict(sdpa.state_dict())
    pixels, patch_mask, spatial_shapes = inputs_for(HF_SHAPES)
    with torch.no_grad():
        expected = hf(pixel_values=pixels, pixel_attention_mask=patch_mask.to(torch.int32),
                      spatial_shapes=spatial_shapes).last_hidden_state
        ours = encoder(pixels, patch_mask, spatial_shapes)
        torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ours, sdpa(pixels, patch_mask, spatial_shapes), rtol=1e-5, atol=1e-5)


def test_loads_a_prefixed_state_dict_and_rejects_unknown_keys():
    encoder = tiny_encoder()
    hf_state = {f"vision_model.{key}": value for key, value in encoder.to_hf_state_dict().items()}
    hf_state["text_model.embeddings.token_embedding.weight"] = torch.zeros(3, 64)
    hf_state["logit_scale"] = torch.zeros(1)
    other = Siglip2Encoder(encoder.config, 2, "fused", **GEOMETRY)
    other.load_hf_state_dict(hf_state)
    theirs = other.state_dict()
    assert all(torch.equal(value, theirs[key]) for key, value in encoder.state_dict().items())
    with pytest.raises(ValueError, match="state_dict: keys not in a Siglip2VisionModel"):
        other.load_hf_state_dict({**encoder.to_hf_state_dict(), "encoder.layers.0.self_attn.rope.weight": 0})


# ---------------------------------------------------------------------------------------------
# Eager against fused
# ---------------------------------------------------------------------------------------------


def grads_by_name(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters' grads under the eager state-dict names (the fused qkv grad split in three)."""
    clone = copy.deepcopy(module)
    with torch.no_grad():
        for parameter, original in zip(clone.parameters(), module.parameters(), strict=True):
            parameter.copy_(original.grad)
    return clone.state_dict()


def run(encoder, inputs, grad_output):
    encoder.zero_grad(set_to_none=True)
    out = encoder(*inputs)
    out.backward(grad_output.to(out.dtype))
    return out.detach(), grads_by_name(encoder)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_matches_eager_forward_and_grads(dtype, device):
    """Forward and every parameter grad, against the fp64 eager encoder: the fused encoder at most
    2x as wrong as the eager one in the same dtype. Without TRITON_INTERPRET (CPU) the fused ops
    run their references, which still checks the fused wiring (folded embeddings, stack protocol,
    final add + LayerNorm); with it, the Triton kernels."""
    pixels, patch_mask, spatial_shapes = inputs_for(SHAPES, device)
    grad_output = random_tensor((*pixels.shape[:2], 64), torch.float32, device, seed=9) * patch_mask[..., None]
    eager64 = tiny_encoder("eager", torch.float64, device)
    eager = tiny_encoder("eager", dtype, device)
    fused = tiny_encoder("fused", dtype, device)
    assert isinstance(fused.encoder.blocks[0].attn.qkv_proj, torch.nn.Linear)

    out64, grads64 = run(eager64, (pixels.double(), patch_mask, spatial_shapes), grad_output)
    out_eager, grads_eager = run(eager, (pixels.to(dtype), patch_mask, spatial_shapes), grad_output)
    out_fused, grads_fused = run(fused, (pixels.to(dtype), patch_mask, spatial_shapes), grad_output)
    valid = patch_mask.cpu()
    assert_close_to_reference(out_fused.cpu()[valid], out_eager.cpu()[valid], out64.cpu()[valid], name="output")
    names = sorted(grads64)
    assert names == sorted(grads_fused) and len(names) == 5 + 2 * 16  # embeddings, post_layernorm, 2 blocks
    assert_all_close_to_reference([grads_fused[n] for n in names], [grads_eager[n] for n in names],
                                  [grads64[n] for n in names], names)


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_compiles_in_one_graph_and_new_image_shapes_do_not_recompile(impl, device):
    """No graph break (the resize never reads spatial_shapes on the host), and new (h, w) values in
    tensors of the same shapes reuse the compiled graph; forward and backward as eager."""
    import torch._dynamo
    from torch._dynamo.backends.registry import lookup_backend

    encoder = tiny_encoder(impl, device=device)
    first = inputs_for(SHAPES, device)
    second = inputs_for([[5, 3], [1, 1], [2, 10], [4, 4], [1, 20]], device, seed=1)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(encoder)(*first)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1

    torch._dynamo.reset()
    compiles = []

    def counting_aot_eager(graph_module, example_inputs):
        compiles.append(graph_module)
        return lookup_backend("aot_eager")(graph_module, example_inputs)

    compiled = torch.compile(encoder, backend=counting_aot_eager, fullgraph=True)
    try:
        for inputs in (first, second):
            out = compiled(*inputs)
            out.sum().backward()
            torch.testing.assert_close(out, encoder(*inputs), rtol=1e-6, atol=1e-6)
        assert len(compiles) == 1, f"{len(compiles)} compilations for one input shape"
    finally:
        torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# Masking, construction, argument checks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_padding_patches_do_not_change_valid_outputs(impl, device):
    encoder = tiny_encoder(impl, device=device)
    pixels, patch_mask, spatial_shapes = inputs_for(SHAPES, device)
    noisy = torch.where(patch_mask[..., None], pixels, 100 * random_tensor(pixels.shape, device=device, seed=7))
    with torch.no_grad():
        clean_out = encoder(pixels, patch_mask, spatial_shapes)
        noisy_out = encoder(noisy, patch_mask, spatial_shapes)
        derived_mask_out = encoder(pixels, None, spatial_shapes)
    assert torch.isfinite(noisy_out).all()
    torch.testing.assert_close(noisy_out[patch_mask], clean_out[patch_mask], rtol=1e-6, atol=1e-6)
    assert torch.equal(derived_mask_out, clean_out)


def test_build_siglip2_is_seeded_naflex():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    eager, (pixels, patch_mask, spatial_shapes) = build_siglip2(batch=32, max_patches=64, layers=1,
                                                               dtype=torch.float32, seed=4, **GEOMETRY, **TINY)
    assert torch.equal(torch.rand(1), before)
    fused, inputs = build_siglip2(batch=32, max_patches=64, layers=1, dtype=torch.float32, impl="fused", seed=4,
                                  **GEOMETRY, **TINY)
    fused_state = fused.state_dict()
    assert torch.equal(inputs[0], pixels)
    assert all(torch.equal(value, fused_state[key]) for key, value in eager.state_dict().items())
    assert spatial_shapes.dtype == torch.int64 and spatial_shapes.shape == (32, 2)
    counts = spatial_shapes.prod(-1)
    assert spatial_shapes[0].tolist() == [8, 8]
    assert (counts <= 64).all() and (counts >= 16).all() and len(set(map(tuple, spatial_shapes.tolist()))) > 8
    assert (spatial_shapes[:, 0] != spatial_shapes[:, 1]).any()  # mixed aspect ratios
    assert torch.equal(patch_mask, torch.arange(64)[None, :] < counts[:, None])
    assert not pixels[~patch_mask].any()


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda x, m, s: (x[..., :8], m, s), ValueError,
         r"pixel_patches: expected shape \(batch, max_patches, patch_dim=12\)"),
        (lambda x, m, s: (x.long(), m, s), TypeError, "pixel_patches: expected a floating tensor"),
        (lambda x, m, s: (x, m[:, :-1], s), ValueError, r"patch_mask: expected shape \(batch, max_patches\)"),
        (lambda x, m, s: (x, m.float(), s), TypeError, "patch_mask: expected a bool tensor"),
        (lambda x, m, s: (x, m, s.float()), TypeError, "spatial_shapes: expected an integer"),
        (lambda x, m, s: (x, m, s[:, :1]), ValueError, r"spatial_shapes: expected shape \(batch, 2\)"),
        (lambda x, m, s: (x, m, s[:2]), ValueError, r"spatial_shapes: expected shape \(batch, 2\) = \(5, 2\)"),
        (lambda x, m, s: (x, m, s * 5), ValueError, "spatial_shapes: expected h \\* w <= max_patches = 20"),
        (lambda x, m, s: (x, m, s - 1), ValueError, r"spatial_shapes: expected positive \(h, w\)"),
    ],
)
def test_bad_inputs_name_the_argument(change, error, message):
    encoder = tiny_encoder()
    with pytest.raises(error, match=message):
        encoder(*change(*inputs_for(SHAPES)))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Siglip2Encoder(num_positions=250), "num_positions: expected a square number"),
        (lambda: Siglip2Encoder(impl="compiled"), "impl: expected one of"),
        (lambda: resize_position_embedding(torch.zeros(15, 4), torch.ones(1, 2, dtype=torch.int64), 4),
         "table: expected a square number"),
        (lambda: resize_position_embedding(torch.zeros(16, 4), torch.ones(1, 2, dtype=torch.int64), 0),
         "max_patches: expected a positive int"),
    ],
)
def test_bad_construction_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
