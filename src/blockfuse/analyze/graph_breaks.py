"""Graph breaks, from Dynamo's API: ``torch._dynamo.explain`` (reasons with the user's stack) and
``torch._dynamo.utils.counters["graph_break"]`` (every break, also those after which the resumed
function traced no op, which ``explain`` leaves out)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

# (pattern on the reason, advice): the known reasons, first match wins.
SUGGESTIONS = (
    (r"Tensor\.item\(\)|\.item\(\)|call_method .* item",
     "data-dependent `.item()`: keep the value a tensor (e.g. `torch.where` instead of an `if`), or set "
     "`torch._dynamo.config.capture_scalar_outputs = True`"),
    (r"tolist|numpy\(\)|\.numpy",
     "the tensor leaves the graph (`.tolist()` / `.numpy()`): keep the computation in torch ops"),
    (r"dynamic output shape|Dynamic shape operator|nonzero|unique|masked_select",
     "an op whose output shape depends on the data: set "
     "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`, or use a fixed-size form"),
    (r"Data-dependent branching|generic_jump|data dependent",
     "Python control flow on a tensor's value: use `torch.where` or `torch.cond`"),
    (r"builtin operator `print`|builtin print|print\b",
     "`print()` in the compiled region: remove it, move it out, or add it to "
     "`torch._dynamo.config.reorderable_logging_functions`"),
    (r"logging|logger", "logging in the compiled region: move it out or add the function to "
                        "`torch._dynamo.config.reorderable_logging_functions`"),
    (r"graph_break\(\)|torch\._dynamo\.graph_break", "an explicit `torch._dynamo.graph_break()` call"),
    (r"marked as skipped|skip_files|torch\._dynamo\.disable", "a function Dynamo skips "
     "(`torch._dynamo.disable` or a skipped module): register it as a `torch.library.custom_op` instead"),
    (r"autograd\.Function|autograd Function",
     "a custom `autograd.Function` Dynamo cannot trace: register the op with `torch.library.custom_op` "
     "and `register_autograd`"),
    (r"Failed to trace builtin operator|builtin",
     "an unsupported Python builtin: replace it with a torch op or move it out of the compiled function"),
    (r"context manager", "an unsupported context manager: move it out of the compiled function"),
    (r"copy\.deepcopy|deepcopy", "`copy.deepcopy` in the compiled region: move it out"),
    (r"Unsupported.*(?:C|c)all.*(?:numpy|np\.)", "a NumPy call: use the torch equivalent"),
)


@dataclass
class GraphBreak:
    reason: str  # the first line of Dynamo's reason
    gb_id: str | None = None  # PyTorch's graph-break id (GB0124), where the reason gives one
    file: str | None = None
    line: int | None = None
    function: str | None = None
    code: str | None = None  # the user's source line
    count: int = 1
    suggestion: str | None = None
    hints: list[str] = field(default_factory=list)  # PyTorch's own "Hint:" lines
    stack: list[str] = field(default_factory=list)  # "file:line in function", outermost first

    @property
    def where(self) -> str:
        if self.file is None:
            return "unknown (the resumed code traced no op)"
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line} in {self.function}"


def graph_break_id(text: str) -> str | None:
    match = re.search(r"\b(gb\d{3,5})\b", text, re.IGNORECASE)
    return match.group(1).upper() if match else None


def suggest(text: str) -> str | None:
    for pattern, advice in SUGGESTIONS:
        if re.search(pattern, text):
            return advice
    return None


def from_reason(text: str, user_stack=None) -> GraphBreak:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first = lines[0].strip() if lines else text.strip()
    hints = [line.strip()[len("Hint:"):].strip() for line in lines if line.strip().startswith("Hint:")]
    item = GraphBreak(reason=first, gb_id=graph_break_id(text), suggestion=suggest(text), hints=hints)
    frames = list(user_stack or [])
    if frames:
        last = frames[-1]
        item.file, item.line, item.function = last.filename, last.lineno, last.name
        item.code = (last.line or "").strip() or None
        item.stack = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames]
    return item


@dataclass
class GraphBreakReport:
    graph_count: int
    breaks: list[GraphBreak]
    ops_per_graph: list[int]

    @property
    def break_count(self) -> int:
        return sum(b.count for b in self.breaks)


def find_graph_breaks(fn, inputs: tuple) -> GraphBreakReport:
    """Trace ``fn(*inputs)`` with Dynamo only (no Inductor) and list its graph breaks.

    NOTE: calls ``torch._dynamo.reset()`` first (``explain`` needs a fresh cache to see every frame)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    explained = torch._dynamo.explain(fn)(*inputs)
    breaks: list[GraphBreak] = []
    for reason in explained.break_reasons:
        item = from_reason(reason.reason, reason.user_stack)
        same = next((b for b in breaks if (b.reason, b.file, b.line) == (item.reason, item.file, item.line)), None)
        if same is not None:
            same.count += 1
        else:
            breaks.append(item)
    merge_counted_breaks(breaks, dict(counters["graph_break"]))
    ops = [len(graph_ops) for graph_ops in getattr(explained, "ops_per_graph", None) or []]
    return GraphBreakReport(graph_count=explained.graph_count, breaks=breaks, ops_per_graph=ops)


def merge_counted_breaks(breaks: list[GraphBreak], counted: dict[str, int]) -> None:
    """Add the breaks Dynamo counted but ``explain`` did not list (a break after which the resumed
    function traced no op compiles no graph, so ``explain`` never sees its reason)."""
    for text, count in counted.items():
        first = text.strip().splitlines()[0].strip() if text.strip() else text
        listed = sum(b.count for b in breaks if b.reason == first)
        if count > listed:
            missing = from_reason(text)
            missing.count = count - listed
            breaks.append(missing)
