"""The SigLIP-2 vision encoder (NaFlex inputs) on the blocks of ``blockfuse.models``.

:class:`Siglip2Encoder` is transformers' ``Siglip2VisionModel`` without the attention-pooling head:
patch embedding (a Linear on flattened patches), a learned position grid resized to each image's
patch grid, pre-norm blocks with a key-padding mask, a final LayerNorm. It returns the last hidden
state; the pooled output (``head``, a multi-head attention-pooling probe) is not implemented.

NaFlex inputs: each image is cut into ``h x w`` patches (its own aspect ratio) in row-major order,
padded to ``max_patches``; ``spatial_shapes`` holds ``(h, w)`` per image.

The position grid is resized by :func:`resize_position_embedding`: the same numbers as a per-image
``F.interpolate(grid, size=(h, w), mode="bilinear", align_corners=False, antialias=True)``, but as
fixed-shape tensor math: per-patch filter weights over the grid's rows and columns, their outer
product, and one GEMM with the table. No shape depends on the values of ``spatial_shapes``, so
``torch.compile(fullgraph=True)`` traces one graph with no host sync, and new image shapes of the
same ``(batch, max_patches)`` never recompile.

The state dict is blockfuse's (``patch_embedding``, ``position_embedding``, ``encoder.blocks.{i}.…``,
``post_layernorm``); :meth:`Siglip2Encoder.load_hf_state_dict` and :meth:`~Siglip2Encoder.to_hf_state_dict`
convert from and to transformers' names.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Optional

import torch
from torch import Tensor, nn

import blockfuse.nn
from blockfuse.models.blocks import IMPLS, TransformerStack
from blockfuse.models.config import PRESETS, BlockConfig
from blockfuse.ops.norm import layer_norm

# ----------------------------------------------------------------------------------------
# Position-embedding resize
# ----------------------------------------------------------------------------------------


def _axis_weights(index: Tensor, size: Tensor, grid: int, dtype: torch.dtype) -> Tensor:
    """Antialiased bilinear weights along one axis: (batch, max_patches, grid), rows summing to 1.

    ``index`` (batch, max_patches) int64: each patch's output row (or column); ``size`` (batch, 1):
    the output length of the axis. This is PyTorch's antialiased bilinear filter
    (``upsample_bilinear2d_aa``): scale ``s = grid / size``, a triangle of half-width
    ``max(1, s)`` centred at ``(index + 0.5) * s`` in source coordinates, evaluated at the
    source pixel centres ``j + 0.5`` and normalized.
    """
    scale = grid / size.to(dtype)  # (batch, 1)
    inverse_support = 1.0 / scale.clamp(min=1.0)  # the triangle widens only when downsampling (s > 1)
    center = (index.to(dtype) + 0.5) * scale  # (batch, max_patches)
    source = torch.arange(grid, device=index.device, dtype=dtype) + 0.5  # (grid,)
    distance = (source - center[..., None]).abs() * inverse_support[..., None]  # (batch, max_patches, grid)
    weights = (1.0 - distance).clamp(min=0.0)
    return weights / weights.sum(-1, keepdim=True)


def position_weights(spatial_shapes: Tensor, grid: int, max_patches: int,
                     dtype: torch.dtype = torch.float32) -> Tensor:
    """The resize as a matrix per image: (batch, max_patches, grid * grid) in ``dtype``.

    Row ``i`` of image ``b`` holds the weights of the ``grid x grid`` source positions for patch
    ``i`` at row ``i // w_b``, column ``i % w_b``. Padding patches (``i >= h_b * w_b``) take the
    weights of patch 0, as transformers pads them. ``spatial_shapes`` (batch, 2) integer.
    """
    shapes = spatial_shapes.to(torch.int64).clamp(min=1)  # a 0 would divide by zero; only bad inputs have it
    heights, widths = shapes[:, 0:1], shapes[:, 1:2]  # (batch, 1)
    positions = torch.arange(max_patches, device=shapes.device)[None, :]  # (1, max_patches)
    valid = positions < heights * widths  # (batch, max_patches)
    rows = torch.where(valid, torch.div(positions, widths, rounding_mode="floor"), 0)
    cols = torch.where(valid, positions - rows * widths, 0)
    row_weights = _axis_weights(rows, heights, grid, dtype)  # (batch, max_patches, grid)
    col_weights = _axis_weights(cols, widths, grid, dtype)
    return (row_weights[..., :, None] * col_weights[..., None, :]).flatten(-2)


def resize_position_embedding(table: Tensor, spatial_shapes: Tensor, max_patches: int) -> Tensor:
    """The position grid resized to each image: (batch, max_patches, d) in ``table``'s dtype.

    ``table`` (grid * grid, d): the learned grid in row-major order; ``spatial_shapes`` (batch, 2)
    integer: (h, w) patches per image, ``h * w <= max_patches``. Patch ``i < h * w`` of image ``b``
    gets ``F.interpolate(grid, size=(h, w), mode="bilinear", align_corners=False,
    antialias=True)`` at row ``i // w``, column ``i % w``; padding patches get the value of patch 0.

    NOTE: weights and GEMM in fp32 (fp64 for an fp64 table), rounded once to the table's dtype, as
    transformers does: a bf16 GEMM would round every weight to 8 bits first. The values of
    ``spatial_shapes`` are never read on the host (no sync, no data-dependent shape).
    """
    if not isinstance(table, Tensor) or table.dim() != 2 or not table.is_floating_point():
        raise ValueError("table: expected a floating (grid * grid, d) tensor, got "
                         f"{tuple(table.shape) if isinstance(table, Tensor) else type(table).__name__}")
    grid = _grid_side(table.shape[0], "table")
    _check_spatial_shapes(spatial_shapes, None, table.device)
    if not isinstance(max_patches, int) or max_patches <= 0:
        raise ValueError(f"max_patches: expected a positive int, got {max_patches!r}")
    _check_spatial_values(spatial_shapes, max_patches)
    compute = torch.float64 if table.dtype == torch.float64 else torch.float32
    weights = position_weights(spatial_shapes, grid, max_patches, compute)  # (batch, max_patches, grid * grid)
    return (weights @ table.to(compute)).to(table.dtype)


def resize_position_embedding_loop(table: Tensor, spatial_shapes: Tensor, max_patches: int) -> Tensor:
    """The reference: one ``F.interpolate(antialias=True)`` per image (host loop, data-dependent
    shapes), padding patches set to patch 0 (transformers < 5 ``resize_positional_embeddings``).

    NOTE: an output width of 1 resizes the transposed grid to (1, h) instead: the same filter,
    but PyTorch's CPU antialias kernel returns the first output row for every row when the
    output width is 1 and the height changes (seen in torch 2.13).
    """
    import torch.nn.functional as F

    grid = _grid_side(table.shape[0], "table")
    compute = torch.float64 if table.dtype == torch.float64 else torch.float32
    square = table.to(compute).reshape(grid, grid, -1).permute(2, 0, 1)[None]  # (1, d, grid, grid)
    out = table.new_empty(spatial_shapes.shape[0], max_patches, table.shape[1], dtype=compute)
    for b, (height, width) in enumerate(spatial_shapes.tolist()):
        if width == 1:
            resized = F.interpolate(square.transpose(-1, -2), size=(1, height), mode="bilinear",
                                    align_corners=False, antialias=True).transpose(-1, -2)
        else:
            resized = F.interpolate(square, size=(height, width), mode="bilinear", align_corners=False,
                                    antialias=True)
        resized = resized[0].reshape(table.shape[1], height * width).T  # (h * w, d)
        out[b, : height * width] = resized
        out[b, height * width:] = resized[0]
    return out.to(table.dtype)


def _grid_side(count: int, name: str) -> int:
    side = math.isqrt(count)
    if side * side != count:
        raise ValueError(f"{name}: expected a square number of positions (a side x side grid), got {count}")
    return side


# ----------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------


def _check_spatial_shapes(spatial_shapes, batch: Optional[int], device: torch.device) -> None:
    if not isinstance(spatial_shapes, Tensor):
        raise TypeError(f"spatial_shapes: expected an int64 tensor (batch, 2), got {type(spatial_shapes).__name__}")
    if spatial_shapes.is_floating_point() or spatial_shapes.is_complex() or spatial_shapes.dtype == torch.bool:
        raise TypeError(f"spatial_shapes: expected an integer (int64) tensor of (h, w) patch counts, "
                        f"got {spatial_shapes.dtype}")
    expected = "(batch, 2)" if batch is None else f"(batch, 2) = ({batch}, 2)"
    if spatial_shapes.dim() != 2 or spatial_shapes.shape[1] != 2 or (batch is not None
                                                                     and spatial_shapes.shape[0] != batch):
        raise ValueError(f"spatial_shapes: expected shape {expected}, got {tuple(spatial_shapes.shape)}")
    if spatial_shapes.device != device:
        raise ValueError(f"spatial_shapes: expected a tensor on {device}, got {spatial_shapes.device}")


def _check_spatial_values(spatial_shapes: Tensor, max_patches: int) -> None:
    """Value checks, only where they cost nothing: eager and on the CPU (a CUDA check would sync
    the host; under torch.compile it would break the graph)."""
    if torch.compiler.is_compiling() or spatial_shapes.device.type != "cpu":
        return
    if not bool((spatial_shapes > 0).all()):
        raise ValueError(f"spatial_shapes: expected positive (h, w), got {spatial_shapes.tolist()}")
    if not bool((spatial_shapes.prod(-1) <= max_patches).all()):
        raise ValueError(f"spatial_shapes: expected h * w <= max_patches = {max_patches}, "
                         f"got {spatial_shapes.tolist()}")


# ----------------------------------------------------------------------------------------
# The encoder
# ----------------------------------------------------------------------------------------


class Siglip2Encoder(nn.Module):
    """The SigLIP-2 vision encoder on NaFlex inputs, without the attention-pooling head.

    ``Siglip2Encoder(config, layers, impl, patch_dim, num_positions)``: ``config`` one block (default:
    the ``siglip2`` preset, so400m: d 1152, 16 heads of 72, GELU-tanh MLP 4304, LayerNorm eps 1e-6);
    ``impl`` ``"eager"`` (plain PyTorch, the reference) or ``"fused"`` (blockfuse ops);
    ``patch_dim`` the flattened patch (channels * patch_size**2, 768 for 16x16 RGB);
    ``num_positions`` the learned grid (256: 16x16).

    ``forward(pixel_patches, patch_mask, spatial_shapes)`` -> last hidden state (batch, max_patches,
    d_model): ``pixel_patches`` (batch, max_patches, patch_dim); ``patch_mask`` (batch, max_patches)
    bool, True for real patches (None: the first ``h * w`` of each image); ``spatial_shapes``
    (batch, 2) int64, ``(h, w)`` patches per image, patches in row-major order, padding after
    ``h * w``. Outputs at padding patches are finite and meaningless.

    The fused impl also folds the position embeddings and the patch bias into the patch GEMM
    (``addmm``) and the last residual add into the final LayerNorm.
    """

    def __init__(self, config: BlockConfig = PRESETS["siglip2"].config, layers: int = 4, impl: str = "eager",
                 patch_dim: int = 768, num_positions: int = 256):
        super().__init__()
        if impl not in IMPLS:
            raise ValueError(f"impl: expected one of {IMPLS}, got {impl!r}")
        if not isinstance(patch_dim, int) or patch_dim <= 0:
            raise ValueError(f"patch_dim: expected a positive int, got {patch_dim!r}")
        if not isinstance(num_positions, int) or num_positions <= 0:
            raise ValueError(f"num_positions: expected a positive int, got {num_positions!r}")
        self.grid = _grid_side(num_positions, "num_positions")
        self.config = config
        self.impl = impl
        self.patch_dim = patch_dim
        d = config.d_model
        self.patch_embedding = nn.Linear(patch_dim, d)
        self.position_embedding = nn.Embedding(num_positions, d)
        nn.init.normal_(self.position_embedding.weight, std=d**-0.5)  # as transformers initializes it
        self.encoder = TransformerStack(config, layers, impl)
        norm = blockfuse.nn.LayerNorm if impl == "fused" else nn.LayerNorm
        self.post_layernorm = norm(d, eps=config.norm_eps, bias=config.bias)

    def forward(self, pixel_patches: Tensor, patch_mask: Optional[Tensor], spatial_shapes: Tensor) -> Tensor:
        patch_mask = self._check_inputs(pixel_patches, patch_mask, spatial_shapes)
        max_patches = pixel_patches.shape[1]
        x = pixel_patches.to(self.patch_embedding.weight.dtype)  # (batch, max_patches, patch_dim)
        if self.impl == "eager":
            positions = resize_position_embedding(self.position_embedding.weight, spatial_shapes, max_patches)
            hidden = self.patch_embedding(x) + positions  # (batch, max_patches, d_model)
            return self.post_layernorm(self.encoder(hidden, patch_mask))
        return self._forward_fused(x, patch_mask, spatial_shapes)

    def _forward_fused(self, x: Tensor, patch_mask: Tensor, spatial_shapes: Tensor) -> Tensor:
        batch, max_patches, _ = x.shape
        table = self.position_embedding.weight  # (grid * grid, d_model)
        compute = torch.float64 if table.dtype == torch.float64 else torch.float32
        weights = position_weights(spatial_shapes, self.grid, max_patches, compute)
        # NOTE: no elementwise pass for the embeddings: the patch bias rides in the position GEMM
        # (fp32, as in resize_position_embedding) and the positions in the patch GEMM's accumulator.
        positions = torch.addmm(self.patch_embedding.bias.to(compute), weights.flatten(0, 1), table.to(compute))
        hidden = torch.addmm(positions.to(x.dtype), x.flatten(0, 1), self.patch_embedding.weight.t())
        # NOTE: nothing keeps the fp32 positions for the backward; held by this frame they would
        # stay alive through the whole encoder (288 MiB of its forward peak for 256 x 256 patches).
        del positions
        hidden = hidden.view(batch, max_patches, -1)  # (batch, max_patches, d_model)
        if self.config.placement != "pre":
            return self.post_layernorm(self.encoder(hidden, patch_mask))
        # The stack's fused pre-norm protocol, with its last residual add fused into post_layernorm.
        residual, branch = self.encoder.forward_pre_parts(hidden, patch_mask)
        norm = self.post_layernorm
        out, _ = layer_norm(branch, norm.weight, norm.bias, norm.eps, residual=residual, residual_mode="pre",
                            dropout_p=self.config.dropout, training=self.training)
        return out

    def _check_inputs(self, pixel_patches, patch_mask, spatial_shapes) -> Tensor:
        if not isinstance(pixel_patches, Tensor) or not pixel_patches.is_floating_point():
            got = pixel_patches.dtype if isinstance(pixel_patches, Tensor) else type(pixel_patches).__name__
            raise TypeError(f"pixel_patches: expected a floating tensor (batch, max_patches, patch_dim), got {got}")
        if pixel_patches.dim() != 3 or pixel_patches.shape[-1] != self.patch_dim:
            raise ValueError(f"pixel_patches: expected shape (batch, max_patches, patch_dim={self.patch_dim}), "
                             f"got {tuple(pixel_patches.shape)}")
        batch, max_patches, _ = pixel_patches.shape
        _check_spatial_shapes(spatial_shapes, batch, pixel_patches.device)
        _check_spatial_values(spatial_shapes, max_patches)
        if patch_mask is None:
            counts = spatial_shapes.to(torch.int64).prod(-1, keepdim=True)  # (batch, 1)
            return torch.arange(max_patches, device=pixel_patches.device)[None, :] < counts
        if not isinstance(patch_mask, Tensor) or patch_mask.is_floating_point() or patch_mask.is_complex():
            raise TypeError("patch_mask: expected a bool tensor (True marks real patches), got "
                            f"{patch_mask.dtype if isinstance(patch_mask, Tensor) else type(patch_mask).__name__}")
        if tuple(patch_mask.shape) != (batch, max_patches):
            raise ValueError(f"patch_mask: expected shape (batch, max_patches) = {(batch, max_patches)}, "
                             f"got {tuple(patch_mask.shape)}")
        if patch_mask.device != pixel_patches.device:
            raise ValueError(f"patch_mask: expected a tensor on {pixel_patches.device}, got {patch_mask.device}")
        return patch_mask if patch_mask.dtype == torch.bool else patch_mask != 0  # transformers passes int masks

    # ------------------------------------------------------------------------------------
    # transformers checkpoints
    # ------------------------------------------------------------------------------------

    @classmethod
    def from_hf(cls, hf_model: nn.Module, impl: str = "eager") -> Siglip2Encoder:
        """An encoder with the config and weights of a transformers ``Siglip2VisionModel`` (or a
        ``Siglip2Model`` / ``Siglip2ForImageClassification``: their ``vision_model``), on the same
        device and dtype. The attention-pooling head, if any, is not loaded."""
        vision = getattr(hf_model, "vision_model", hf_model)
        hf_config = vision.config
        if hf_config.hidden_act != "gelu_pytorch_tanh":
            raise ValueError(f"hf_model: expected hidden_act 'gelu_pytorch_tanh' (GELU, tanh form), "
                             f"got {hf_config.hidden_act!r}")
        config = replace(PRESETS["siglip2"].config, d_model=hf_config.hidden_size,
                         n_heads=hf_config.num_attention_heads, head_dim=None,
                         ffn_hidden=hf_config.intermediate_size, norm_eps=hf_config.layer_norm_eps)
        embeddings = vision.embeddings
        encoder = cls(config, len(vision.encoder.layers), impl, embeddings.patch_embedding.in_features,
                      embeddings.position_embedding.num_embeddings)
        reference = embeddings.patch_embedding.weight
        encoder = encoder.to(device=reference.device, dtype=reference.dtype)
        encoder.load_hf_state_dict(vision.state_dict())
        return encoder.train(hf_model.training)

    def load_hf_state_dict(self, state_dict: dict[str, Tensor]) -> None:
        """Load transformers' names: a ``Siglip2VisionModel`` state dict, or any with a ``vision_model.``
        prefix (a ``Siglip2Model``: the text tower, logit scale and bias are skipped). ``head.*``
        (the attention-pooling head) is skipped; any other unknown or missing key is an error."""
        if any(key.startswith("vision_model.") for key in state_dict):
            state_dict = {key[len("vision_model."):]: value for key, value in state_dict.items()
                          if key.startswith("vision_model.")}
        ours, unknown = {}, []
        for key, value in state_dict.items():
            if key.startswith("head."):
                continue
            name = _from_hf_key(key)
            if name is None:
                unknown.append(key)
            else:
                ours[name] = value
        if unknown:
            raise ValueError(f"state_dict: keys not in a Siglip2VisionModel: {unknown}")
        self.load_state_dict(ours)

    def to_hf_state_dict(self) -> dict[str, Tensor]:
        """The weights under a ``Siglip2VisionModel``'s names (no head)."""
        return {_to_hf_key(key): value for key, value in self.state_dict().items()}


_HF_TOP = {"embeddings.patch_embedding": "patch_embedding", "embeddings.position_embedding": "position_embedding",
           "post_layernorm": "post_layernorm"}
_HF_LAYER = {"self_attn.q_proj": "attn.q_proj", "self_attn.k_proj": "attn.k_proj", "self_attn.v_proj": "attn.v_proj",
             "self_attn.out_proj": "attn.o_proj", "layer_norm1": "attn_norm", "layer_norm2": "ffn_norm",
             "mlp.fc1": "ffn.fc1", "mlp.fc2": "ffn.fc2"}
_HF_KEY = re.compile(r"^(?:encoder\.layers\.(\d+)\.)?(.+)\.(weight|bias)$")
_OUR_KEY = re.compile(r"^(?:encoder\.blocks\.(\d+)\.)?(.+)\.(weight|bias)$")


def _rename(key: str, pattern: re.Pattern, top: dict, layer: dict, layer_prefix: str) -> Optional[str]:
    match = pattern.match(key)
    if match is None:
        return None
    index, module, suffix = match.groups()
    name = top.get(module) if index is None else layer.get(module)
    if name is None:
        return None
    return f"{name}.{suffix}" if index is None else f"{layer_prefix}.{index}.{name}.{suffix}"


def _from_hf_key(key: str) -> Optional[str]:
    return _rename(key, _HF_KEY, _HF_TOP, _HF_LAYER, "encoder.blocks")


def _to_hf_key(key: str) -> str:
    name = _rename(key, _OUR_KEY, {v: k for k, v in _HF_TOP.items()}, {v: k for k, v in _HF_LAYER.items()},
                   "encoder.layers")
    if name is None:
        raise KeyError(f"no transformers name for {key!r}")
    return name


# ----------------------------------------------------------------------------------------
# Seeded construction
# ----------------------------------------------------------------------------------------


def naflex_inputs(batch: int, max_patches: int, patch_dim: int, generator: torch.Generator
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """``(pixel_patches, patch_mask, spatial_shapes)`` like a NaFlex processor's, fp32 on the CPU.

    Each image gets an aspect ratio h / w drawn log-uniformly in [1/4, 4] and about n patches, n
    drawn in [max_patches / 2, max_patches] (h * w <= n); image 0 is the full square grid when
    max_patches is a square, so the unpadded path is always exercised. Pixels are uniform in
    [-1, 1] (SigLIP's normalization), padding patches zero.
    """
    counts = torch.randint(max(1, max_patches // 2), max_patches + 1, (batch,), generator=generator)
    aspect = torch.exp((2 * torch.rand(batch, generator=generator, dtype=torch.float64) - 1) * math.log(4))
    heights = torch.minimum((counts * aspect).sqrt().round().clamp(min=1).long(), counts)
    widths = counts // heights
    side = math.isqrt(max_patches)
    heights[0], widths[0] = side, max_patches // side
    spatial_shapes = torch.stack([heights, widths], dim=1)  # (batch, 2)
    patch_mask = torch.arange(max_patches)[None, :] < (heights * widths)[:, None]  # (batch, max_patches)
    pixels = 2 * torch.rand(batch, max_patches, patch_dim, generator=generator) - 1
    return pixels * patch_mask[..., None], patch_mask, spatial_shapes


def build_siglip2(
    batch: int = 256,
    max_patches: int = 256,
    layers: int = 4,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    impl: str = "eager",
    seed: int = 0,
    *,
    patch_dim: int = 768,
    num_positions: int = 256,
    **config_overrides,
) -> tuple[Siglip2Encoder, tuple[Tensor, Tensor, Tensor]]:
    """``(encoder, (pixel_patches, patch_mask, spatial_shapes))``: a seeded encoder of the ``siglip2``
    preset and NaFlex inputs (see :func:`naflex_inputs`). ``config_overrides`` replace fields of the
    preset's :class:`BlockConfig` (e.g. ``d_model=64, n_heads=4, head_dim=None, ffn_hidden=96``).
    The same ``seed`` gives the same weights for ``impl="eager"`` and ``"fused"``; the global RNG is
    left alone."""
    config = replace(PRESETS["siglip2"].config, **config_overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        eager = Siglip2Encoder(config, layers, "eager", patch_dim, num_positions)
    encoder = eager
    if impl != "eager":
        encoder = Siglip2Encoder(config, layers, impl, patch_dim, num_positions)
        encoder.load_state_dict(eager.state_dict())
    encoder = encoder.to(device=device, dtype=dtype)
    pixel_patches, patch_mask, spatial_shapes = naflex_inputs(batch, max_patches, patch_dim,
                                                              torch.Generator().manual_seed(seed))
    inputs = (pixel_patches.to(device=device, dtype=dtype), patch_mask.to(device), spatial_shapes.to(device))
    return encoder, inputs
