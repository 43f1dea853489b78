"""Surgical compilation: ``torch.compile`` on the elementwise pieces of an eager block only.

The strategy of the project's source documents (their 4-layer model): compile RoPE, the MLP's
activation and the norms; leave the Linear layers and attention eager (cuBLAS and the attention
kernels gain nothing from Inductor, and a whole-model compile is slower to build and harder to debug).

:func:`compile_surgically` does that to an eager :class:`~blockfuse.models.TransformerBlock` or
``TransformerStack`` in place: each attention module's ``rope``, each MLP's ``activation`` and each
norm's ``forward`` becomes a compiled function (one compiled function per piece, shared by every
layer, so a stack of N layers compiles each piece once).

NOTE: CUDA-graph modes (``reduce-overhead``, ``max-autotune``) and small pieces called many times per
step do not mix: CUDA-graph trees reuse a graph's output memory at its next replay, and RoPE runs twice
per layer (q, then k), each norm once per layer, while attention keeps q and k (and the norms' outputs
are kept by the next GEMM) for the backward. Reading such an output after the next replay fails with
"accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run". In those modes
every piece's output is cloned right after the call (``clone_outputs``, on by default there): correct,
at the cost of one more read and write of each piece's output, which is most of what compiling the
piece saved; the benchmarks report it as such. (On an H200 with torch 2.11 a training loop that clears
its gradients ran and matched eager without the clones too: CUDA-graph trees recorded a separate graph
for a call whose earlier outputs were still alive. The clones stay on as a guard for other versions.)

NOTE: in those modes the parameter gradients that the compiled backward returns also live in the
graph's memory. Clear them before each step (``zero_grad(set_to_none=True)``, the optimizer default):
accumulating into them over several steps reads memory a later replay overwrote and fails with the same
error. Whole-model ``torch.compile(mode="reduce-overhead")`` does the same (seen on an H200, torch 2.11,
for both, with 1 and 2 layers); the clones here do not change it.
"""

from __future__ import annotations

import torch
from torch import nn

from blockfuse.models.blocks import TransformerBlock, TransformerStack
from blockfuse.models.eager import Attention, FeedForward, RMSNorm, layer_norm_eager, rms_norm_eager

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def _cloning(fn):
    def call(*args):
        return fn(*args).clone()

    return call


def compile_surgically(module: nn.Module, mode: str = "default", clone_outputs: bool | None = None) -> nn.Module:
    """Compiles RoPE, the MLP activation and the norms of an eager block or stack in place; returns it.

    ``mode``: a ``torch.compile`` mode. ``clone_outputs`` (default: True for the CUDA-graph modes,
    False otherwise) clones each compiled piece's output (see the module notes)."""
    if not isinstance(module, (TransformerBlock, TransformerStack)) or module.impl != "eager":
        raise TypeError(f"module: expected an eager TransformerBlock or TransformerStack, got "
                        f"{type(module).__name__} {getattr(module, 'impl', '')}".rstrip())
    if clone_outputs is None:
        clone_outputs = mode in CUDA_GRAPH_MODES
    options = {} if mode == "default" else {"mode": mode}
    compiled: dict[object, object] = {}

    def compile_once(fn):
        if fn not in compiled:
            piece = torch.compile(fn, **options)
            compiled[fn] = _cloning(piece) if clone_outputs else piece
        return compiled[fn]

    for child in list(module.modules()):
        if isinstance(child, Attention) and child.cos is not None:
            child.rope = compile_once(child.rope)
        elif isinstance(child, FeedForward):
            child.activation = compile_once(child.activation)
        elif isinstance(child, nn.LayerNorm):
            # NOTE: an instance forward calling one compiled function shared by every norm: the module
            # and its state-dict names stay as they are, and N layers compile it once.
            child.forward = _layer_norm_forward(compile_once(layer_norm_eager), child)
        elif isinstance(child, RMSNorm):
            child.forward = _rms_norm_forward(compile_once(rms_norm_eager), child)
    return module


def _layer_norm_forward(fn, norm: nn.LayerNorm):
    def forward(x):
        return fn(x, norm.weight, norm.bias, norm.eps)

    return forward


def _rms_norm_forward(fn, norm: RMSNorm):
    def forward(x):
        return fn(x, norm.weight, norm.eps, norm.cast_before_weight)

    return forward
