"""The analysis report: what it holds, and how it is written (JSON, Markdown, PNG, a terminal summary).

Every generated kernel is a :class:`KernelRecord` keyed by (module, name), blockfuse's own Triton kernels
(which Inductor emits and launches like its own once a blockfuse op is compiled on CUDA) among them, with
``owner == "blockfuse"``; every launch in a wrapper's ``call()`` is a
:class:`~blockfuse.analyze.wrapper.Launch` (library calls included: ``report.externs``);
each step (inference, training forward, backward) has a :class:`PassSummary` with its launch counts
from the wrapper and, on CUDA, from the profiler, reconciled.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from blockfuse.analyze.ceilings import rates
from blockfuse.analyze.graph_breaks import GraphBreak
from blockfuse.analyze.markdown import report_markdown, summary_renderable
from blockfuse.analyze.recompiles import RecompileReport
from blockfuse.analyze.roofline import write_roofline
from blockfuse.analyze.wrapper import Launch, WrapperModule

BACKEND_TITLES = {"triton": "Triton", "cpp": "C++"}


@dataclass
class KernelRecord:
    module: str
    phase: str  # inference, forward or backward
    name: str
    backend: str  # triton or cpp
    kind: str  # pointwise, reduction, persistent reduction, template, user Triton kernel, foreach, C++ ...
    description: str
    aten_ops: list[str]
    post_grad_ops: list[str]
    source_nodes: list[str]
    ops_source: str  # provenance, comments or kernel name
    user_lines: list[str]
    loads: int | None
    stores: int | None
    reductions: int | None
    inputs: int
    outputs: int
    numel: int | None
    launches: int
    bytes: float | None = None  # all launches together
    bytes_source: str | None = None
    flops: float | None = None
    time_us: float | None = None  # all launches together (median step)
    gbps: float | None = None
    tflops: float | None = None
    frac_copy: float | None = None
    frac_gemm: float | None = None
    owner: str | None = None  # "blockfuse" for blockfuse's own kernels (``name`` is Inductor's variable for it)
    source_name: str | None = None  # a user kernel's Triton function, as its author named it


def build_kernels(modules: list[WrapperModule], ceilings: dict | None) -> list[KernelRecord]:
    records = []
    for module in modules:
        for kernel in module.kernels.values():
            launches = [launch for launch in module.launches if launch.target == kernel.name]
            user_lines = list(dict.fromkeys(line for launch in launches for line in launch.user_lines))
            record = KernelRecord(
                module=module.id, phase=module.kind, name=kernel.name, backend=kernel.backend, kind=kernel.kind,
                description=module.description(kernel.name), aten_ops=kernel.aten_ops,
                post_grad_ops=kernel.post_grad_ops,
                source_nodes=kernel.source_nodes, ops_source=kernel.ops_source, user_lines=user_lines,
                loads=kernel.num_load, stores=kernel.num_store, reductions=kernel.num_reduction,
                inputs=sum(p.role in ("in", "inout", "ptr") for p in kernel.params),
                outputs=sum(p.role in ("out", "inout") for p in kernel.params),
                numel=launches[0].numel if launches else kernel.total_numel, launches=len(launches),
                owner=kernel.owner, source_name=kernel.source_name,
            )
            if launches and all(launch.bytes is not None for launch in launches):
                record.bytes = sum(launch.bytes for launch in launches)
                record.bytes_source = launches[0].bytes_source
            if launches and all(launch.flops for launch in launches):
                record.flops = sum(launch.flops for launch in launches)
            if launches and all(launch.time_us is not None for launch in launches):
                record.time_us = sum(launch.time_us for launch in launches)
            for key, value in rates(record.bytes, record.flops, record.time_us, ceilings).items():
                setattr(record, key, value)
            records.append(record)
    return records


@dataclass
class PassSummary:
    name: str
    modules: list[str]
    fused_kernels: int  # distinct generated kernels
    fused_launches: int
    fused_backend: str  # Triton, C++ or both
    fused: list[str]  # what each launch of a generated kernel does, in launch order
    gemms: int  # library GEMM calls plus GEMM templates
    gemm_ops: list[str]
    attention: list[str]  # the backend of each attention call
    custom_ops: list[str]
    fallbacks: list[str]
    wrapper_ops: list[str]
    other_calls: list[str]
    wrapper_launches: int
    fused_bytes: float | None = None
    flops: float | None = None
    compile_s: float | None = None
    pass_ms: float | None = None  # one step, CUDA events (idle gaps included) or wall clock on CPU
    kernel_ms: float | None = None  # the sum of the GPU kernels' times (profiler)
    time_ms: dict = field(default_factory=dict)  # kernel time by category
    device_kernels: int | None = None
    reconciliation: str | None = None
    reconciliation_detail: dict | None = None
    blockfuse_kernels: list[str] = field(default_factory=list)  # each launch of a blockfuse kernel, by name

    def headline(self) -> str:
        backend = self.fused_backend
        launches = f" ({self.fused_launches} launches)" if self.fused_launches != self.fused_kernels else ""
        parts = [f"{self.fused_kernels} fused {backend} kernel{'s' if self.fused_kernels != 1 else ''}{launches}"]
        if self.fused:
            parts[0] += ": " + "; ".join(self.fused)
        ops = ", ".join(f"{op} x{self.gemm_ops.count(op)}" for op in dict.fromkeys(self.gemm_ops))
        parts.append(f"{self.gemms} GEMM{'s' if self.gemms != 1 else ''}" + (f" ({ops})" if ops else ""))
        backends = ", ".join(dict.fromkeys(self.attention))
        parts.append(f"{len(self.attention)} attention call{'s' if len(self.attention) != 1 else ''}"
                     + (f" ({backends})" if backends else ""))
        if self.blockfuse_kernels:
            names = ", ".join(f"{name} x{self.blockfuse_kernels.count(name)}"
                              for name in dict.fromkeys(self.blockfuse_kernels))
            parts.append(f"{len(self.blockfuse_kernels)} of the fused launches are blockfuse kernels ({names})")
        if self.custom_ops:
            parts.append(f"{len(self.custom_ops)} custom-op call(s) ({', '.join(dict.fromkeys(self.custom_ops))})")
        if self.fallbacks:
            parts.append(f"{len(self.fallbacks)} ATen fallback(s) ({', '.join(dict.fromkeys(self.fallbacks))})")
        if self.wrapper_ops:
            parts.append(f"{len(self.wrapper_ops)} ATen op(s) run by the wrapper "
                         f"({', '.join(dict.fromkeys(self.wrapper_ops))})")
        if self.other_calls:
            parts.append(f"{len(self.other_calls)} other call(s) ({', '.join(dict.fromkeys(self.other_calls))})")
        return "; ".join(parts[:1]) + " -- " + ", ".join(parts[1:])


def build_pass(name: str, modules: list[WrapperModule], compile_s: float | None, measured: dict,
               ceilings: dict | None) -> PassSummary:
    launches = [launch for module in modules for launch in module.launches]
    kernels = {(m.id, k.name): k for m in modules for k in m.kernels.values()}
    by_id = {m.id: m for m in modules}
    fused = [launch for launch in launches if launch.kind in ("triton", "cpp")]
    templates = [launch for launch in fused if kernels[(launch.module, launch.target)].kind == "template"]
    gemm_templates = [launch for launch in templates
                      if any(op.split(".")[-1] in ("mm", "addmm", "bmm", "baddbmm") for op in launch.aten_ops)]
    attention = [launch.attention or "?" for launch in launches if launch.category == "attention"]
    attention += ["flex (Triton template)" for launch in templates if any("flex" in op for op in launch.aten_ops)]
    gemm_calls = [launch for launch in launches if launch.category == "gemm"]
    if not attention and any("softmax" in op for launch in fused for op in launch.aten_ops) and \
            any(launch.target.endswith("bmm") for launch in gemm_calls):
        attention.append("math (bmm + softmax, decomposed)")
    backends = sorted({BACKEND_TITLES.get(launch.kind, launch.kind) for launch in fused}) or \
        sorted({BACKEND_TITLES.get(k.backend, k.backend) for k in kernels.values()}) or ["Triton"]
    summary = PassSummary(
        name=name,
        modules=[m.id for m in modules],
        fused_kernels=len({(launch.module, launch.target) for launch in fused}),
        fused_launches=len(fused),
        fused_backend=" / ".join(backends),
        fused=[by_id[launch.module].description(launch.target) for launch in fused],
        gemms=len(gemm_calls) + len(gemm_templates),
        gemm_ops=[launch.target for launch in gemm_calls] + ["Triton template"] * len(gemm_templates),
        attention=attention,
        custom_ops=[launch.target for launch in launches if launch.category == "custom op"],
        blockfuse_kernels=[kernels[(launch.module, launch.target)].source_name for launch in fused
                           if launch.owner == "blockfuse"],
        fallbacks=[launch.target for launch in launches if launch.category == "fallback"],
        wrapper_ops=[launch.target for launch in launches if launch.kind == "wrapper op"],
        other_calls=[launch.target for launch in launches
                     if launch.category in ("extern", "convolution", "collective")],
        wrapper_launches=len(launches),
        compile_s=compile_s,
    )
    known = [launch.bytes for launch in fused if launch.bytes is not None]
    summary.fused_bytes = sum(known) if known and len(known) == len(fused) else None
    flops = [launch.flops for launch in launches if launch.flops]
    summary.flops = sum(flops) if flops else None
    summary.pass_ms = measured.get("pass_ms")
    summary.kernel_ms = measured.get("kernel_ms")
    summary.device_kernels = measured.get("device_kernels")
    reconciliation = measured.get("reconciliation")
    if reconciliation is not None:
        summary.reconciliation = reconciliation.text()
        summary.reconciliation_detail = asdict(reconciliation)
        by_category: dict[str, float] = {}
        for launch in launches:
            if launch.time_us is not None:
                key = "fused kernels" if launch.kind in ("triton", "cpp") else launch.category
                by_category[key] = by_category.get(key, 0.0) + launch.time_us / 1e3
        unattributed = (summary.kernel_ms or 0.0) - sum(by_category.values())
        if unattributed > 1e-6:
            by_category["outside the graphs"] = unattributed
        summary.time_ms = by_category
    return summary


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@dataclass
class Report:
    meta: dict
    graph_breaks: list[GraphBreak]
    graph_count: int
    passes: dict[str, PassSummary]
    kernels: list[KernelRecord]
    launches: list[Launch]
    modules: list[dict]
    ceilings: dict | None = None
    recompiles: RecompileReport | None = None
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict, repr=False)  # module id -> wrapper code

    @property
    def externs(self) -> list[Launch]:
        """Library and op calls (GEMMs, attention, custom ops, fallbacks), not generated kernels."""
        return [launch for launch in self.launches if launch.kind == "extern"]

    def kernel(self, module: str, name: str) -> KernelRecord:
        for record in self.kernels:
            if (record.module, record.name) == (module, name):
                return record
        raise KeyError(f"no kernel {name!r} in module {module!r}")

    def launches_per_pass(self) -> dict[str, dict]:
        """Per step: wrapper launches, and the GPU kernels the profiler saw (None without CUDA)."""
        return {name: {"wrapper": p.wrapper_launches, "profiler": p.device_kernels} for name, p in self.passes.items()}

    def to_dict(self) -> dict:
        launches = []
        for launch in self.launches:
            entry = asdict(launch)
            entry.update(rates(launch.bytes, launch.flops, launch.time_us, self.ceilings))
            launches.append(entry)
        return _finite({
            "meta": self.meta,
            "ceilings": self.ceilings,
            "graph_breaks": {"count": sum(b.count for b in self.graph_breaks), "graphs": self.graph_count,
                             "breaks": [{**asdict(b), "where": b.where} for b in self.graph_breaks]},
            "modules": self.modules,
            "passes": {name: {**asdict(p), "headline": p.headline()} for name, p in self.passes.items()},
            "kernels": [asdict(k) for k in self.kernels],
            "launches": launches,
            "recompiles": None if self.recompiles is None else {**asdict(self.recompiles),
                                                                "verdict": self.recompiles.verdict()},
            "notes": self.notes,
        })

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_markdown(self, plot: str | None = None) -> str:
        return report_markdown(self, plot)

    def summary(self):
        """A rich renderable: the headline of each step and the kernels table."""
        return summary_renderable(self)

    def print_summary(self, console=None) -> None:
        from rich.console import Console

        (Console(width=160) if console is None else console).print(self.summary())

    def stem(self) -> str:
        return str(self.meta.get("target", "analysis")).replace("/", "_").replace(":", "_")

    def write(self, out: str | Path, stem: str | None = None) -> dict[str, Path]:
        """Write ``<stem>.json``, ``<stem>.md``, ``<stem>.png`` (where kernels were timed) and the
        wrapper modules under ``<stem>-code/``; returns the paths written."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        stem = stem or self.stem()
        paths = {"json": out / f"{stem}.json", "markdown": out / f"{stem}.md"}
        png = out / f"{stem}.png"
        if write_roofline(self, png):
            paths["png"] = png
        self.to_json(paths["json"])
        paths["markdown"].write_text(self.to_markdown(png.name if "png" in paths else None))
        if self.sources:
            code = out / f"{stem}-code"
            code.mkdir(exist_ok=True)
            for module, source in self.sources.items():
                (code / f"{module}.py").write_text(source)
            paths["code"] = code
        return paths
