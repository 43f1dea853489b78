"""LayerNorm and RMSNorm modules: parameters plus a call to the fused functional.

Their state dicts are those of ``torch.nn.LayerNorm`` and ``torch.nn.RMSNorm``.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from blockfuse.ops.norm import layer_norm, rms_norm


def _width(normalized_shape) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(f"normalized_shape: blockfuse normalizes over the last dimension only, got {shape}")
    return int(shape[0])


class LayerNorm(nn.Module):
    """``torch.nn.LayerNorm`` over the last dimension, with an optional fused residual and dropout.

    ``forward(x)`` returns ``norm(x)``; ``forward(x, residual)`` returns ``(norm(s), s)`` with
    ``s = residual + dropout(x)`` when ``residual_mode="pre"``, and
    ``residual + dropout(norm(x))`` when ``residual_mode="post"``.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 residual_mode: str = "pre", dropout_p: float = 0.0, device=None, dtype=None):
        super().__init__()
        n = _width(normalized_shape)
        self.normalized_shape = (n,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.residual_mode = residual_mode
        self.dropout_p = dropout_p
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(n, **factory))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = nn.Parameter(torch.zeros(n, **factory))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor, residual: Optional[Tensor] = None):
        return layer_norm(x, self.weight, self.bias, self.eps, residual=residual,
                          residual_mode=self.residual_mode, dropout_p=self.dropout_p, training=self.training)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"residual_mode={self.residual_mode!r}, dropout_p={self.dropout_p}")


class RMSNorm(nn.Module):
    """``torch.nn.RMSNorm`` over the last dimension, with an optional fused residual and dropout.

    The default multiplies by the weight in fp32 and casts once (OLMo-2, and what
    ``torch.nn.functional.rms_norm`` computes); ``cast_before_weight=True`` casts the normalized
    row to x's dtype first, then multiplies (Hugging Face Llama).

    ``weight_offset``: the row is multiplied by ``weight_offset + weight``, the sum taken in fp32 (Gemma's
    zero-centred weights: ``weight_offset=1.0``, stored weights near 0; its ``(1 + w)`` in fp32 and one cast
    after it, with the default ``cast_before_weight=False``). The parameter and the state dict are the stored
    weight, as Hugging Face keeps it.
    """

    def __init__(self, normalized_shape, eps: float = 1e-6, elementwise_affine: bool = True,
                 cast_before_weight: bool = False, residual_mode: str = "pre", dropout_p: float = 0.0,
                 device=None, dtype=None, weight_offset: float = 0.0):
        super().__init__()
        n = _width(normalized_shape)
        if not isinstance(weight_offset, (int, float)) or not abs(weight_offset) < float("inf"):
            raise ValueError(f"weight_offset: expected a finite number, got {weight_offset!r}")
        if weight_offset and not elementwise_affine:
            raise ValueError("weight_offset: an offset of the weight needs a weight (elementwise_affine=True)")
        self.normalized_shape = (n,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.cast_before_weight = cast_before_weight
        self.weight_offset = float(weight_offset)
        self.residual_mode = residual_mode
        self.dropout_p = dropout_p
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(n, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def multiplier(self) -> Optional[Tensor]:
        """What the normalized row is multiplied by: the weight, or ``weight_offset + weight`` in fp32 (a new
        tensor each call, through which the weight's gradient flows)."""
        if not self.weight_offset:
            return self.weight
        return self.weight.float() + self.weight_offset

    def forward(self, x: Tensor, residual: Optional[Tensor] = None):
        return rms_norm(x, self.multiplier(), self.eps, residual=residual, residual_mode=self.residual_mode,
                        dropout_p=self.dropout_p, training=self.training,
                        cast_before_weight=self.cast_before_weight)

    def extra_repr(self) -> str:
        offset = f", weight_offset={self.weight_offset}" if self.weight_offset else ""
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"cast_before_weight={self.cast_before_weight}, residual_mode={self.residual_mode!r}, "
                f"dropout_p={self.dropout_p}{offset}")
