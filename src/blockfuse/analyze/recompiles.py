"""Recompiles over several input shapes: which guards failed, and whether ``dynamic=True`` or marking
the changing dimensions dynamic (``torch._dynamo.mark_dynamic``) avoids them.

NOTE: the probe compiles with the ``aot_eager`` backend: recompiles are decided by Dynamo's guards
(and the shape guards AOTAutograd adds), not by Inductor, and ``aot_eager`` compiles in a fraction of
Inductor's time, so three variants over several shapes stay cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch


@dataclass
class Variant:
    name: str  # "as compiled", "dynamic=True", "mark_dynamic(...)"
    compiles: int | None = None
    guard_failures: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class RecompileReport:
    shapes: list[list[list[int]]]  # per call, the shapes of its tensor inputs
    varying: list[tuple[int, int]]  # (input index, dim) whose size changes between calls
    backend: str
    variants: list[Variant]
    tensor_positions: list[int] = field(default_factory=list)

    def verdict(self) -> str:
        calls = len(self.shapes)
        base = self.variants[0]
        lines = [f"{calls} input shapes: {base.compiles} compiles as compiled"
                 + (f" (guards failed: {'; '.join(base.guard_failures)})" if base.guard_failures else "")]
        for variant in self.variants[1:]:
            if variant.error:
                lines.append(f"{variant.name}: fails ({variant.error})")
            else:
                avoided = "avoids the recompiles" if variant.compiles == 1 else "does not avoid them"
                lines.append(f"{variant.name}: {variant.compiles} compile(s), {avoided}")
        ones = sorted({f"input {i}, dim {d}" for i, d in self.varying for s in self.shapes
                       if d < len(s[self._slot(i)]) and s[self._slot(i)][d] == 1})
        if ones:
            lines.append("Dynamo specializes sizes 0 and 1, so a size of 1 in a changing dimension "
                         f"({', '.join(ones)}) compiles its own graph even when marked dynamic")
        return "; ".join(lines)

    def _slot(self, index: int) -> int:
        return self.tensor_positions.index(index) if index in self.tensor_positions else index


def _tensor_shapes(inputs) -> list[list[int]]:
    return [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)]


def _compiles(fn, calls, *, dynamic, mark, backend) -> Variant:
    from torch._dynamo.utils import counters

    failures = getattr(torch._dynamo.utils, "guard_failures", None)
    torch._dynamo.reset()
    counters.clear()
    if failures is not None:
        failures.clear()
    compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
    variant = Variant(name="")
    try:
        with torch.no_grad():
            for inputs in calls:
                for index, dim in mark:
                    torch._dynamo.mark_dynamic(inputs[index], dim)
                compiled(*inputs)
    except Exception as error:  # marking a dimension the code specializes on raises: that is the finding
        variant.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
    variant.compiles = int(counters["frames"].get("ok", 0))
    if failures is not None:
        for reasons in failures.values():
            for reason in reasons:
                text = re.sub(r"^\d+/\d+: ", "", str(reason)).splitlines()[0]
                if text not in variant.guard_failures:
                    variant.guard_failures.append(text)
    return variant


def probe(fn, calls: list[tuple], *, dynamic=None, backend: str = "aot_eager") -> RecompileReport:
    """Call ``fn`` compiled on each input tuple of ``calls`` in turn, as compiled (``dynamic``), with
    ``dynamic=True``, and with the varying dimensions marked dynamic; count the compiles of each."""
    shapes = [_tensor_shapes(inputs) for inputs in calls]
    varying = []
    tensor_positions = [i for i, t in enumerate(calls[0]) if isinstance(t, torch.Tensor)]
    for slot, index in enumerate(tensor_positions):
        for dim in range(len(shapes[0][slot])):
            if len({tuple(s[slot])[dim] if dim < len(s[slot]) else None for s in shapes}) > 1:
                varying.append((index, dim))
    variants = []
    base = _compiles(fn, calls, dynamic=dynamic, mark=[], backend=backend)
    base.name = f"as compiled (dynamic={dynamic})"
    variants.append(base)
    if dynamic is not True:
        forced = _compiles(fn, calls, dynamic=True, mark=[], backend=backend)
        forced.name = "dynamic=True"
        variants.append(forced)
    if varying:
        marked = _compiles(fn, calls, dynamic=dynamic, mark=varying, backend=backend)
        marked.name = "mark_dynamic(" + ", ".join(f"input {i}, dim {d}" for i, d in varying) + ")"
        variants.append(marked)
    torch._dynamo.reset()
    return RecompileReport(shapes=shapes, varying=varying, backend=backend, variants=variants,
                           tensor_positions=tensor_positions)
