"""``blockfuse env``: versions, device, and which implementation each op uses."""

from __future__ import annotations

import torch

from blockfuse import runtime
from blockfuse.cli import main
from blockfuse.envinfo import OPS, collect_env


def test_env_names_every_op_and_its_implementation(capsys):
    assert main(["env"]) == 0
    printed = capsys.readouterr().out
    assert f"torch         {torch.__version__}" in printed
    for op in OPS:
        assert f"{op:<18} cpu   -> {runtime.implementation('cpu')}" in printed
    if not torch.cuda.is_available() and not runtime.interpreter_enabled():
        assert "need CUDA (or TRITON_INTERPRET=1" in printed


def test_collect_env_matches_the_runtime():
    info = collect_env()
    assert info["triton_interpret"] == runtime.interpreter_enabled()
    assert info["implementation"]["cpu"] == {op: runtime.implementation("cpu") for op in OPS}


def test_env_lists_every_public_op():
    import blockfuse

    assert {"linear_act", "fused_mlp", "gated_mlp"} <= set(OPS)
    assert all(callable(getattr(blockfuse, op)) for op in OPS)
