"""Pointwise activations and their derivatives, shared by every fused kernel that applies one.

Each helper takes and returns fp32 values. The GELU helpers implement both of PyTorch's
forms, ``approximate="tanh"`` and ``approximate="none"`` (erf), so a fused op matches
``torch.nn.functional.gelu`` with the same argument.
"""

from __future__ import annotations

import triton
import triton.language as tl

# NOTE: the constants are literals inside the kernels: a compiled kernel may only read
# constexpr globals, and the interpreter mishandles constexpr * tensor. They are
# 2 sqrt(2 / pi) = 1.5957691216057308, 1 / sqrt(2) = 0.7071067811865476,
# 1 / sqrt(2 pi) = 0.3989422804014327, and the cubic coefficient of the tanh form, 0.044715.

GELU_APPROXIMATIONS = ("tanh", "none")


@triton.jit
def silu(x):
    """``x * sigmoid(x)``."""
    return x * tl.sigmoid(x)


@triton.jit
def silu_grad(x):
    """d silu / dx ``= s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``."""
    s = tl.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


@triton.jit
def _gelu_tanh(x):
    # NOTE: 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u): one exp, no tanh (which Triton only
    # offers through libdevice), and no cancellation in 1 + tanh(u) for negative x.
    s = tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    return x * s


@triton.jit
def _gelu_tanh_grad(x):
    s = tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    return s + x * s * (1.0 - s) * 1.5957691216057308 * (1.0 + 3.0 * 0.044715 * x * x)


@triton.jit
def _gelu_erf(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_erf_grad(x):
    cdf = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
    return cdf + x * 0.3989422804014327 * tl.exp(-0.5 * x * x)


@triton.jit
def gelu(x, TANH: tl.constexpr):
    """GELU: the tanh approximation when ``TANH``, else the exact erf form."""
    if TANH:
        return _gelu_tanh(x)
    else:
        return _gelu_erf(x)


@triton.jit
def gelu_grad(x, TANH: tl.constexpr):
    """d gelu / dx, in the same form as :func:`gelu`."""
    if TANH:
        return _gelu_tanh_grad(x)
    else:
        return _gelu_erf_grad(x)


def check_gelu_approximation(approximate) -> bool:
    """Validate ``approximate`` (PyTorch's GELU argument); True for ``"tanh"``."""
    if approximate not in GELU_APPROXIMATIONS:
        raise ValueError(f"approximate: expected 'tanh' or 'none' (as torch.nn.functional.gelu), "
                         f"got {approximate!r}")
    return approximate == "tanh"
