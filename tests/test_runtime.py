"""The one dispatch rule (``blockfuse.runtime.use_triton``): where an op runs its kernels and where its
reference, including small inputs without autograd under torch.compile (left to Inductor's fusion)."""

from __future__ import annotations

import pytest
import torch

import blockfuse
from blockfuse import runtime
from tests.helpers import random_tensor


def _launches_kernels(graph: str) -> bool:
    """True when a traced graph calls blockfuse's kernels: its launcher ops (custom ops under the
    interpreter, opaque ones) or, on CUDA, the Triton kernels its ``triton_op`` launchers decompose into."""
    return "blockfuse" in graph or "triton_kernel_wrapper" in graph


def _forward_graph(fn, *args):
    """The code of the forward graph AOTAutograd makes of ``fn(*args)`` under torch.compile."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def record(graph_module, example_inputs):
        graphs.append(graph_module.code)
        return make_boxed_func(graph_module.forward)

    torch._dynamo.reset()
    out = torch.compile(fn, backend=aot_autograd(fw_compiler=record), fullgraph=True)(*args)
    torch._dynamo.reset()
    return out, graphs[0]


@pytest.mark.usefixtures("requires_triton")
def test_small_inputs_without_autograd_under_compile_take_the_reference(device):
    width = 64
    weight = random_tensor((width,), seed=1).to(device) + 1
    small = random_tensor((3, width), seed=2).to(device)
    large = random_tensor((runtime.COMPILED_INFERENCE_MAX_ELEMENTS // width + 1, width), seed=3).to(device)

    def norm(x, w):
        return blockfuse.rms_norm(x, w)

    with torch.no_grad():
        out, graph = _forward_graph(norm, small, weight)
        assert not _launches_kernels(graph) and "rsqrt" in graph, graph  # the reference, for Inductor to fuse
        torch.testing.assert_close(out, blockfuse.rms_norm(small, weight), rtol=1e-5, atol=1e-5)
        _, graph = _forward_graph(norm, large, weight)
        assert _launches_kernels(graph), graph  # large enough for the kernel to pay
    leaf = small.clone().requires_grad_()
    _, graph = _forward_graph(norm, leaf, weight)
    assert _launches_kernels(graph), graph  # training keeps the kernels


@pytest.mark.usefixtures("requires_triton")
def test_a_call_that_draws_dropout_keeps_the_kernels_seeded_stream(device):
    x, residual = random_tensor((3, 64), seed=4).to(device), random_tensor((3, 64), seed=5).to(device)

    def add(x, r):
        return blockfuse.bias_dropout_add(x, None, r, 0.5, True)

    with torch.no_grad():
        _, graph = _forward_graph(add, x, residual)
    assert _launches_kernels(graph), graph


def test_eager_calls_are_not_affected():
    x = torch.randn(3, 8)
    assert runtime.use_triton(x) == runtime.use_triton(x, draws_random=True)
    assert not runtime.use_triton(x.double())
