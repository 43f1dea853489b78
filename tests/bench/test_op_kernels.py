"""``benchmarks/op_kernels.py`` (GPU-only): the runner's cases it profiles are built as the op benchmark builds them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import op_kernels  # noqa: E402 (benchmarks/ is no package)


@pytest.mark.parametrize("mode", ["fwd", "fwdbwd"])
def test_the_profiled_call_is_the_runners(mode):
    """The case ``op_kernels`` profiles runs the provider as the runner times it: forward in no_grad, or forward and
    the input gradients."""
    case = op_kernels._case("swiglu", (3, 40), "blockfuse", device="cpu")
    setup, call, leaves = case.callable(mode)
    assert setup is None
    call()
    assert (leaves == []) == (mode == "fwd")


def test_without_cuda_it_says_so(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["op_kernels.py", "swiglu:8x8"])
    assert op_kernels.main() == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
