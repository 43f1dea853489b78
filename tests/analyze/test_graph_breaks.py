"""Graph-break detection from Dynamo's API, on functions with known breaks."""

from __future__ import annotations

import inspect

import pytest
import torch

from blockfuse.analyze.graph_breaks import find_graph_breaks, from_reason, graph_break_id, merge_counted_breaks


def breaks_twice(x):
    y = x.sin() + 2.0
    if y.sum().item() > 0:  # data-dependent .item(): a break
        y = y * 2
    print("side effect")  # an unsupported builtin: a second break
    return y.cos()


def no_break(x):
    return torch.nn.functional.silu(x) * x.sum(-1, keepdim=True)


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_two_known_breaks_with_reason_location_and_suggestion(capsys):
    x = torch.rand(3, 5) + 0.5  # positive, so the branch is taken and both graphs hold ops
    found = find_graph_breaks(breaks_twice, (x,))
    assert found.break_count == 2
    assert found.graph_count == 3
    item, printed = found.breaks
    assert "item()" in item.reason
    assert item.file == __file__ and item.line == _line_of(breaks_twice, "if y.sum().item()")
    assert item.function == "breaks_twice" and "item()" in item.code
    assert "capture_scalar_outputs" in item.suggestion
    assert "print" in printed.reason or "builtin" in printed.reason
    assert printed.line == _line_of(breaks_twice, 'print("side effect")')
    assert "print" in printed.suggestion
    if tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 11):
        for found_break in found.breaks:  # torch 2.11+ gives every reason a graph-break id
            assert found_break.gb_id is not None and found_break.gb_id.startswith("GB")


def test_no_break_is_one_graph():
    found = find_graph_breaks(no_break, (torch.randn(4, 6),))
    assert found.break_count == 0 and found.breaks == []
    assert found.graph_count == 1


def test_break_after_which_nothing_traces_comes_from_the_counters():
    """A break followed by no op: ``explain`` compiles no graph for the rest and lists no reason,
    the counters still count it; the report keeps it with an unknown location."""
    x = -(torch.rand(3, 5) + 0.5)  # negative: the branch is skipped, the resumed code after print() has one op
    found = find_graph_breaks(breaks_twice, (x,))
    assert found.break_count == 2
    reasons = " ".join(b.reason for b in found.breaks)
    assert "item()" in reasons and ("print" in reasons or "builtin" in reasons)


def test_reason_text_parsing():
    text = ("Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
            "  Explanation: Dynamo does not support tracing `Tensor.item()`.\n"
            "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True`.\n\n"
            " For more details about this graph break, please visit: "
            "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html")
    item = from_reason(text)
    assert item.reason.startswith("Unsupported Tensor.item()")
    assert item.gb_id == "GB0124"
    assert item.hints == ["Set `torch._dynamo.config.capture_scalar_outputs = True`."]
    assert item.file is None and "unknown" in item.where
    assert graph_break_id("no id here") is None


@pytest.mark.parametrize("listed, counted, added", [(0, 1, 1), (1, 1, 0), (1, 3, 2)])
def test_merge_adds_only_what_explain_missed(listed, counted, added):
    text = "Failed to trace builtin operator\n  Explanation: print"
    breaks = [from_reason(text) for _ in range(listed)]
    merge_counted_breaks(breaks, {text: counted})
    assert sum(b.count for b in breaks) == max(listed, counted)
    assert len(breaks) == listed + (1 if added else 0)
