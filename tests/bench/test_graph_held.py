"""benchmarks/graph_held.py: what a block's autograd graph keeps for its backward, eager against compiled."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from blockfuse.models import PRESETS, TransformerBlock
from tests.helpers import load_benchmark, run_benchmark_main


def test_held_storages_finds_what_attention_and_the_linears_save_and_no_parameter():
    """An eager block's graph keeps the input for the norm, q/k/v for attention and inputs for the Linear layers'
    weight gradients: storages of the activations' size are found, and no parameter is among them."""
    config = replace(PRESETS["standard"].config, d_model=32, n_heads=2, ffn_hidden=64)
    block = TransformerBlock(config, "eager")
    parameters = {p.untyped_storage().data_ptr() for p in block.parameters()}
    x = torch.randn(2, 8, 32, requires_grad=True)
    held = load_benchmark("graph_held").held_storages(block(x), parameters)
    assert held and not parameters & held.keys()
    assert x.untyped_storage().data_ptr() in held  # the first norm keeps its input
    nodes = {node for *_, node in held.values()}
    assert any("Attention" in node for node in nodes) and any("Mm" in node or "Addmm" in node for node in nodes), nodes
    assert all(nbytes > 0 for nbytes, *_ in held.values())


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("recipe", ["delayed", "tensorwise"])
def test_the_tool_compares_both_sides_of_an_fp8_block(recipe, monkeypatch, capsys):
    import triton

    if tuple(int(part) for part in triton.__version__.split(".")[:2]) < (3, 7):
        # e.g. the lent GPU's triton 3.6: `range(tl.program_id(1) * B, ...)` raises "only 0-dimensional arrays can
        # be converted to Python scalars" there (3.7-3.9 run it); the tool runs on CPU, in the interpreter only.
        pytest.skip(f"triton {triton.__version__}'s interpreter cannot bound a loop by a program id (3.7+ can)")
    # NOTE: the tool's main in this process (the interpreter on, as the tool needs): a process of its own spent 3-4 s
    # of CI's time a recipe importing torch and blockfuse
    run_benchmark_main(monkeypatch, "graph_held", "te-4layer", "--linear", f"fp8:{recipe}", "--shape", "1x16x64",
                       "--ffn", "128", "--top", "3", reset_dynamo=True)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if "held for the backward" in line] == ["eager", "compiled"]
    assert sum(line.startswith("  held by ") for line in lines) == 2
    # Traced, the four projections keep nothing of their e4m3 inputs (fp8.Recast: x^T's cast made again in the
    # backward from what the norms, the activation and attention keep, as eagerly): the compiled graph holds only
    # scales (tensorwise: and amaxes) more than the eager one.
    compiled_only = next(line for line in lines if line.startswith("  held by compiled only"))
    assert set(compiled_only.split("bytes: ", 1)[1].split(", ")) <= {"() float32", "(1,) float32"}, compiled_only
