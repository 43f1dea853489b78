"""Benchmarks of the norm ops: RMSNorm, LayerNorm, their fused residual-add forms, and LayerNorm + GELU.

Byte counts: each input read once, each output written once; ``n`` is the number of
elements of x (rows x hidden), ``hidden`` its last dimension, ``b`` bytes per element.
The per-row statistics (mean, rstd: 4 bytes each a row) are not counted: at these
shapes they are below 0.1% of the traffic.

Liger-Kernel conventions: ``LigerRMSNormFunction.apply(x, w, eps, offset, casting_mode,
in_place)`` with ``offset=0.0`` (our weight is applied as is, no Gemma ``1 + w``) and
``casting_mode="gemma"`` (everything in fp32, one cast of the output at the end), which
is ``blockfuse.rms_norm``'s default ``cast_before_weight=False``; ``"llama"`` would cast
the normalized row to the input dtype before the weight multiply (our
``cast_before_weight=True``). ``in_place=True`` (Liger's default: dx overwrites dy).
``LigerFusedAddRMSNormFunction.apply(x, residual, w, eps, offset, casting_mode,
in_place)`` returns ``(y, s)`` with ``s = x + residual``, as our ``residual_mode="pre"``;
``in_place=False`` is its default. ``LigerLayerNormFunction.apply(x, w, b, eps)`` has no
options (fp32 statistics and affine). Liger has no fused add + LayerNorm, so
``add_layer_norm`` and ``layer_norm_post`` have no ``liger`` provider; nor has
``layer_norm_gelu`` (``gelu(layer_norm(x) * weight + bias, approximate="tanh")``, SigLIP-2's
form), which Liger does not fuse.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blockfuse.bench.spec import OpBenchmark, Shape, compiled

RMS_EPS = 1e-6
LAYER_EPS = 1e-5

SHAPES: tuple[Shape, ...] = ((16384, 4096), (8192, 1024), (2048, 1024), (4096, 8192))  # (rows, hidden)
# LayerNorm + GELU: the headline shape and the small (launch-bound) ones.
LAYER_NORM_GELU_SHAPES: tuple[Shape, ...] = ((16384, 4096), (8192, 1024), (2048, 1024))
CPU_SHAPES: tuple[Shape, ...] = ((64, 256), (8, 1024))


# ---------------------------------------------------------------- inputs


def _activation(shape, dtype, device):
    return torch.randn(shape, dtype=dtype, device=device)  # (..., hidden)


def _weight(shape, dtype, device):
    return 1.0 + 0.1 * torch.randn(shape[-1], dtype=dtype, device=device)  # (hidden,)


def _bias(shape, dtype, device):
    return 0.1 * torch.randn(shape[-1], dtype=dtype, device=device)  # (hidden,)


def _rms_inputs(shape, dtype, device):
    return {"x": _activation(shape, dtype, device), "weight": _weight(shape, dtype, device)}


def _layer_inputs(shape, dtype, device):
    return {
        "x": _activation(shape, dtype, device),
        "weight": _weight(shape, dtype, device),
        "bias": _bias(shape, dtype, device),
    }


def _add_rms_inputs(shape, dtype, device):
    return {
        "x": _activation(shape, dtype, device),
        "residual": _activation(shape, dtype, device),
        "weight": _weight(shape, dtype, device),
    }


def _add_layer_inputs(shape, dtype, device):
    return {**_add_rms_inputs(shape, dtype, device), "bias": _bias(shape, dtype, device)}


# ---------------------------------------------------------------- byte counts


def _rms_norm_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (2 * n + hidden) * b  # read x, weight; write y
    backward = (3 * n + 2 * hidden) * b  # read dy, x, weight; write dx, dweight
    return forward, backward


def _layer_norm_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (2 * n + 2 * hidden) * b  # read x, weight, bias; write y
    backward = (3 * n + 3 * hidden) * b  # read dy, x, weight; write dx, dweight, dbias
    return forward, backward


def _add_rms_norm_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (4 * n + hidden) * b  # read x, residual, weight; write y, s
    backward = (4 * n + 2 * hidden) * b  # read dy, ds, s, weight; write dx (= dresidual, once), dweight
    return forward, backward


def _add_layer_norm_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (4 * n + 2 * hidden) * b  # read x, residual, weight, bias; write y, s
    backward = (4 * n + 3 * hidden) * b  # read dy, ds, s, weight; write dx (= dresidual, once), dweight, dbias
    return forward, backward


def _layer_norm_post_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (3 * n + 2 * hidden) * b  # read x, residual, weight, bias; write out
    backward = (
        3 * n + 3 * hidden
    ) * b  # read dout, x, weight; write dx, dweight, dbias (dresidual is dout itself)
    return forward, backward


def _layer_norm_gelu_bytes(shape, b):
    n, hidden = math.prod(shape), shape[-1]
    forward = (2 * n + 2 * hidden) * b  # read x, weight, bias; write y
    # The backward recomputes the GELU's input, so it reads the bias as well.
    backward = (3 * n + 4 * hidden) * b  # read dy, x, weight, bias; write dx, dweight, dbias
    return forward, backward


# ---------------------------------------------------------------- providers


def _eager_rms_norm():
    return lambda x, weight: F.rms_norm(x, (x.shape[-1],), weight, RMS_EPS)


def _eager_layer_norm():
    return lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_EPS)


def _eager_add_rms_norm():
    def add_rms_norm(x, residual, weight):
        s = residual + x
        return F.rms_norm(s, (s.shape[-1],), weight, RMS_EPS), s

    return add_rms_norm


def _eager_add_layer_norm():
    def add_layer_norm(x, residual, weight, bias):
        s = residual + x
        return F.layer_norm(s, (s.shape[-1],), weight, bias, LAYER_EPS), s

    return add_layer_norm


def _eager_layer_norm_post():
    return lambda x, residual, weight, bias: residual + F.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_EPS)


def _eager_layer_norm_gelu():
    return lambda x, weight, bias: F.gelu(F.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_EPS), approximate="tanh")


def _calls(rms_norm, layer_norm, layer_norm_gelu) -> dict:
    """Each benchmark's call on one implementation's three functions: blockfuse's ops or their references, which
    take the same arguments."""
    return {
        "rms_norm": lambda x, weight: rms_norm(x, weight, RMS_EPS),
        "layer_norm": lambda x, weight, bias: layer_norm(x, weight, bias, LAYER_EPS),
        "add_rms_norm": lambda x, residual, weight: rms_norm(x, weight, RMS_EPS, residual=residual,
                                                             residual_mode="pre"),
        "add_layer_norm": lambda x, residual, weight, bias: layer_norm(x, weight, bias, LAYER_EPS, residual=residual,
                                                                       residual_mode="pre"),
        "layer_norm_post": lambda x, residual, weight, bias: layer_norm(x, weight, bias, LAYER_EPS, residual=residual,
                                                                        residual_mode="post"),
        "layer_norm_gelu": lambda x, weight, bias: layer_norm_gelu(x, weight, bias, LAYER_EPS, approximate="tanh"),
    }


def _reference(name: str):
    """The provider factory of benchmark ``name``'s pure-PyTorch reference."""

    def factory():
        from blockfuse import layer_norm_gelu_ref, layer_norm_ref, rms_norm_ref

        return _calls(rms_norm_ref, layer_norm_ref, layer_norm_gelu_ref)[name]

    return factory


def _blockfuse(name: str):
    """The provider factory of benchmark ``name`` on blockfuse's ops."""

    def factory():
        from blockfuse import layer_norm, layer_norm_gelu, rms_norm

        return _calls(rms_norm, layer_norm, layer_norm_gelu)[name]

    return factory


def _liger_rms_norm():
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    # apply(X, W, eps, offset, casting_mode, in_place)
    return lambda x, weight: LigerRMSNormFunction.apply(x, weight, RMS_EPS, 0.0, "gemma", True)


def _liger_layer_norm():
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    # apply(X, W, B, eps)
    return lambda x, weight, bias: LigerLayerNormFunction.apply(x, weight, bias, LAYER_EPS)


def _liger_add_rms_norm():
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

    # apply(X, R, W, eps, offset, casting_mode, in_place) -> (Y, S), S = X + R
    return lambda x, residual, weight: LigerFusedAddRMSNormFunction.apply(
        x, residual, weight, RMS_EPS, 0.0, "gemma", False
    )


# ---------------------------------------------------------------- declarations


def _declare(name, make_inputs, outputs, eager, bytes_moved, liger=None, default=True, shapes=SHAPES):
    reference = _reference(name)
    providers = {"eager": eager, "reference": reference, "compile": compiled(reference), "blockfuse": _blockfuse(name)}
    if liger is not None:
        providers["liger"] = liger
    return OpBenchmark(
        name=name,
        make_inputs=make_inputs,
        outputs=outputs,
        reference=reference,
        providers=providers,
        bytes_moved=bytes_moved,
        shapes=shapes,
        cpu_shapes=CPU_SHAPES,
        default=default,
    )


BENCHMARKS = (
    # y = rms_norm(x) * weight
    _declare(
        "rms_norm",
        _rms_inputs,
        ("y",),
        _eager_rms_norm,
        _rms_norm_bytes,
        liger=_liger_rms_norm,
    ),
    # y = layer_norm(x) * weight + bias
    _declare(
        "layer_norm",
        _layer_inputs,
        ("y",),
        _eager_layer_norm,
        _layer_norm_bytes,
        liger=_liger_layer_norm,
    ),
    # s = residual + x; y = rms_norm(s) * weight
    _declare(
        "add_rms_norm",
        _add_rms_inputs,
        ("y", "s"),
        _eager_add_rms_norm,
        _add_rms_norm_bytes,
        liger=_liger_add_rms_norm,
    ),
    # s = residual + x; y = layer_norm(s) * weight + bias
    _declare(
        "add_layer_norm",
        _add_layer_inputs,
        ("y", "s"),
        _eager_add_layer_norm,
        _add_layer_norm_bytes,
    ),
    # y = gelu(layer_norm(x) * weight + bias), tanh form
    _declare(
        "layer_norm_gelu",
        _layer_inputs,
        ("y",),
        _eager_layer_norm_gelu,
        _layer_norm_gelu_bytes,
        shapes=LAYER_NORM_GELU_SHAPES,
    ),
    # out = residual + layer_norm(x) * weight + bias (the reordered block's norm); only with --op
    _declare(
        "layer_norm_post",
        _add_layer_inputs,
        ("out",),
        _eager_layer_norm_post,
        _layer_norm_post_bytes,
        default=False,
    ),
)
