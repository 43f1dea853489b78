"""``blockfuse.analyze``: what torch.compile did to a module (graph breaks, generated kernels and the
ops each fuses, library calls, launches per step, bytes, FLOPs and time against measured ceilings).

    report = blockfuse.analyze(module, x, mode="default", backward=True)   # the package is callable
    report.to_markdown(); report.to_json(); report.kernels; report.graph_breaks; report.externs
    blockfuse.analyze.compare(report, other_report).to_markdown()
"""

import sys
import types

from blockfuse.analyze.api import analyze
from blockfuse.analyze.compare import Comparison, compare
from blockfuse.analyze.graph_breaks import GraphBreak, find_graph_breaks
from blockfuse.analyze.report import KernelRecord, PassSummary, Report
from blockfuse.analyze.wrapper import Launch, WrapperModule, parse_wrapper

__all__ = [
    "Comparison",
    "GraphBreak",
    "KernelRecord",
    "Launch",
    "PassSummary",
    "Report",
    "WrapperModule",
    "analyze",
    "compare",
    "find_graph_breaks",
    "parse_wrapper",
]


class _CallablePackage(types.ModuleType):
    """NOTE: the issue's API is ``blockfuse.analyze(module, *inputs, ...)`` while ``blockfuse.analyze`` is
    also this package (``blockfuse.analyze.compare``, ...): calling the package runs :func:`analyze`.
    Python makes ``blockfuse.analyze`` this module object when the package is first imported (by
    ``blockfuse.__getattr__`` or by any ``import blockfuse.analyze...``), so only the module's own type
    can make it callable; ``import blockfuse`` alone does not load this package."""

    def __call__(self, *args, **kwargs):
        return analyze(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
