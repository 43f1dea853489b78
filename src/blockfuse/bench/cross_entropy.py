"""Benchmark of the fused LM head + cross-entropy: ``loss = cross_entropy(hidden @ weight.T, target)``.

Shapes are (tokens, d, vocab): ``hidden`` (tokens, d), ``weight`` (vocab, d), ``target`` (tokens,) int64
classes with about 5% of them ``IGNORE_INDEX`` (no loss); the loss is the fp32 mean over the other tokens.
The weight is scaled so that the logits have a standard deviation of 2 (an LM head's O(1..5) logits).

The op is GEMM-bound, so it declares FLOPs: its roofline is its three GEMMs, the logits (2 * tokens * d *
vocab FLOPs, the inference forward) and the two of the backward (dhidden = dlogits @ weight, dweight =
dlogits.T @ hidden). Each record carries TFLOP/s and, on CUDA, the fraction of an 8192^3 GEMM's TFLOP/s
measured in the same run. Bytes (not the bound; in the JSON only): forward reads hidden, weight and
target once and writes the fp32 loss; backward reads the fp32 dloss, hidden, weight and target and writes
dhidden and dweight. The logits, which the fused providers never write whole, are not counted.

Providers: ``eager`` is what Hugging Face's loss does (the logits made whole in the input dtype, cast to
fp32, ``F.cross_entropy``); ``compile`` is ``torch.compile`` of that function; ``reference`` is
``blockfuse.linear_cross_entropy_ref`` (the same math, the oracle's). Liger-Kernel:
``LigerFusedLinearCrossEntropyLoss(ignore_index, reduction="mean")`` called as ``loss_fn(weight, hidden,
target)`` (its forward takes the weight first), defaults otherwise (``accum_dtype=None``: dweight accumulated
in the weight's dtype). Cut Cross-Entropy: ``cut_cross_entropy.linear_cross_entropy(e, c, targets,
ignore_index, softcap, reduction, shift, filter_eps)`` with e = hidden, c = weight, ``ignore_index=-100``
and ``reduction="mean"`` (its defaults, spelled out) and its default gradient filtering
(``filter_eps="high"``: vocabulary blocks whose softmax is below the input dtype's eps / 32 are skipped in the
backward, so its gradients are not exact). Liger and CCE need CUDA: as Liger for the other ops, they are among
the CUDA default providers only, and a CPU run that names them records their error.

NOTE: ``bwd`` alone is not comparable across providers here: blockfuse and Liger compute the gradients in
their forward and the backward only scales them. Compare ``fwd`` and ``fwdbwd``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blockfuse.bench.spec import OpBenchmark, Shape

IGNORE_INDEX = -100
IGNORED_FRACTION = 0.05
LOGIT_STD = 2.0

# (tokens, d, vocab): Llama-3 8B's head, a 2k-wide model with a 32k vocabulary, Gemma-3's 262k vocabulary.
SHAPES: tuple[Shape, ...] = ((8192, 4096, 128256), (16384, 2048, 32000), (4096, 4096, 262144))
CPU_SHAPES: tuple[Shape, ...] = ((67, 32, 301), (5, 72, 1129))


# ---------------------------------------------------------------- inputs


def _inputs(shape, dtype, device):
    tokens, d, vocab = shape
    target = torch.randint(0, vocab, (tokens,), device=device)  # (tokens,)
    target[torch.rand(tokens, device=device) < IGNORED_FRACTION] = IGNORE_INDEX
    return {
        "hidden": torch.randn(tokens, d, dtype=dtype, device=device),  # (tokens, d)
        "weight": torch.randn(vocab, d, dtype=dtype, device=device) * (LOGIT_STD / math.sqrt(d)),  # (vocab, d)
        "target": target,
    }


# ---------------------------------------------------------------- byte and FLOP counts


def _bytes(shape, b):
    tokens, d, vocab = shape
    inputs = (tokens * d + vocab * d) * b + 8 * tokens  # hidden, weight; the int64 target
    forward = inputs + 4  # read hidden, weight, target; write the fp32 loss
    backward = 4 + inputs + (tokens * d + vocab * d) * b  # read dloss, hidden, weight, target; write dhidden, dweight
    return forward, backward


def _flops(shape):
    tokens, d, vocab = shape
    gemm = 2 * tokens * d * vocab
    return gemm, 2 * gemm  # the logits; dhidden and dweight


# ---------------------------------------------------------------- providers


def _eager():
    # Hugging Face's ForCausalLMLoss (the shift aside): logits in the model's dtype, upcast, cross-entropy.
    return lambda hidden, weight, target: F.cross_entropy(
        F.linear(hidden, weight).float(), target, ignore_index=IGNORE_INDEX
    )


def _compile():
    return torch.compile(_eager())


def _reference():
    from blockfuse import linear_cross_entropy_ref

    return lambda hidden, weight, target: linear_cross_entropy_ref(hidden, weight, target, ignore_index=IGNORE_INDEX)


def _blockfuse():
    from blockfuse import linear_cross_entropy

    return lambda hidden, weight, target: linear_cross_entropy(hidden, weight, target, ignore_index=IGNORE_INDEX)


def _liger():
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    loss = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="mean")
    # forward(lin_weight, _input, target, bias=None): the weight first
    return lambda hidden, weight, target: loss(weight, hidden, target)


def _cce():
    from cut_cross_entropy import linear_cross_entropy

    # linear_cross_entropy(e, c, targets, ignore_index=-100, softcap=None, reduction="mean", shift=False,
    # filter_eps="high", impl="cce")
    return lambda hidden, weight, target: linear_cross_entropy(
        hidden, weight, target, ignore_index=IGNORE_INDEX, reduction="mean"
    )


# ---------------------------------------------------------------- declaration


BENCHMARKS = (
    # loss = cross_entropy(hidden @ weight.T, target, ignore_index=-100), fp32 mean; only with --op
    OpBenchmark(
        name="linear_cross_entropy",
        make_inputs=_inputs,
        outputs=("loss",),
        reference=_reference,
        providers={
            "eager": _eager,
            "reference": _reference,
            "compile": _compile,
            "liger": _liger,
            "cce": _cce,
            "blockfuse": _blockfuse,
        },
        bytes_moved=_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        grad_of="hidden",
        default=False,
        flops=_flops,
    ),
)
