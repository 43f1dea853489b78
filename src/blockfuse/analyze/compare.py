"""Two analyses side by side: kernels, launches, bytes and time per step, and the kernels one has and
the other has not (the way one compares a pre-norm block with a reordered-norm block by hand)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from blockfuse.analyze.report import Report
from blockfuse.analyze.wrapper import PASS_TITLES

METRICS = (
    ("graphs", "graphs", lambda s: len(s.modules)),
    ("fused_kernels", "fused kernels", lambda s: s.fused_kernels),
    ("fused_launches", "fused-kernel launches", lambda s: s.fused_launches),
    ("gemms", "GEMMs", lambda s: s.gemms),
    ("attention", "attention calls", lambda s: len(s.attention)),
    ("custom_ops", "custom-op calls", lambda s: len(s.custom_ops)),
    ("wrapper_launches", "wrapper launches", lambda s: s.wrapper_launches),
    ("device_kernels", "GPU kernels (profiler)", lambda s: s.device_kernels),
    ("fused_mb", "fused kernels: MB moved", lambda s: None if s.fused_bytes is None else s.fused_bytes / 1e6),
    ("gflop", "GFLOP (GEMMs, attention)", lambda s: None if s.flops is None else s.flops / 1e9),
    ("fused_ms", "fused kernels: ms", lambda s: s.time_ms.get("fused kernels")),
    ("gemm_ms", "GEMMs: ms", lambda s: s.time_ms.get("gemm")),
    ("attention_ms", "attention: ms", lambda s: s.time_ms.get("attention")),
    ("kernel_ms", "all kernels: ms", lambda s: s.kernel_ms),
    ("pass_ms", "step: ms", lambda s: s.pass_ms),
)


def _text(value) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.4g}"


@dataclass
class Comparison:
    a: Report
    b: Report

    @property
    def names(self) -> tuple[str, str]:
        return self.a.meta["target"], self.b.meta["target"]

    def steps(self) -> list[str]:
        return [name for name in PASS_TITLES if name in self.a.passes or name in self.b.passes]

    def rows(self, step: str) -> list[dict]:
        first, second = self.a.passes.get(step), self.b.passes.get(step)
        rows = []
        for key, title, read in METRICS:
            left = read(first) if first is not None else None
            right = read(second) if second is not None else None
            if left is None and right is None:
                continue
            difference = right - left if left is not None and right is not None else None
            rows.append({"metric": key, "title": title, "a": left, "b": right, "b_minus_a": difference})
        return rows

    def differences(self, step: str) -> dict[str, list[str]]:
        """What each side's generated-kernel launches do that the other's do not (multiset difference)."""
        first = Counter(self.a.passes[step].fused) if step in self.a.passes else Counter()
        second = Counter(self.b.passes[step].fused) if step in self.b.passes else Counter()
        return {"only_a": sorted((first - second).elements()), "only_b": sorted((second - first).elements())}

    def sentence(self, step: str) -> str:
        first, second = self.a.passes.get(step), self.b.passes.get(step)
        if first is None or second is None:
            return ""
        name_a, name_b = self.names
        more = second.wrapper_launches - first.wrapper_launches
        text = (f"{name_b} makes {second.wrapper_launches} launches against {first.wrapper_launches} for {name_a}"
                + (f" ({more:+d})" if more else ""))
        diff = self.differences(step)
        if diff["only_b"]:
            text += f"; only {name_b} runs: " + "; ".join(diff["only_b"])
        if diff["only_a"]:
            text += f"; only {name_a} runs: " + "; ".join(diff["only_a"])
        if first.pass_ms and second.pass_ms:
            ratio = second.pass_ms / first.pass_ms
            text += (f"; step time {name_b} {second.pass_ms:.3f} ms against {name_a} {first.pass_ms:.3f} ms "
                     f"({name_b} / {name_a} = {ratio:.2f}x)")
        return text

    def to_dict(self) -> dict:
        return {
            "a": self.a.meta, "b": self.b.meta,
            "steps": {step: {"rows": self.rows(step), **self.differences(step), "sentence": self.sentence(step)}
                      for step in self.steps()},
        }

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_markdown(self) -> str:
        name_a, name_b = self.names
        meta = self.a.meta
        lines = [f"# torch.compile analysis: {name_a} vs {name_b}", "",
                 f"- {meta['card']}; torch {meta['torch']}, triton {meta['triton']}; mode {meta['mode']!r}; "
                 f"{meta['dtype']}; inputs {name_a}: {self.a.meta['input_shapes']}, "
                 f"{name_b}: {self.b.meta['input_shapes']}",
                 f"- full reports: `{self.a.stem()}.md`, `{self.b.stem()}.md`"]
        for step in self.steps():
            lines += ["", f"## {PASS_TITLES[step]}", "", self.sentence(step) + ".", "",
                      f"| | {name_a} | {name_b} | {name_b} - {name_a} |", "| --- | --- | --- | --- |"]
            for row in self.rows(step):
                lines.append(f"| {row['title']} | {_text(row['a'])} | {_text(row['b'])} | {_text(row['b_minus_a'])} |")
            first, second = self.a.passes.get(step), self.b.passes.get(step)
            lines += ["", f"| # | {name_a}: generated kernels in launch order | {name_b} |", "| --- | --- | --- |"]
            left = first.fused if first else []
            right = second.fused if second else []
            for index in range(max(len(left), len(right))):
                lines.append(f"| {index} | {left[index] if index < len(left) else ''} "
                             f"| {right[index] if index < len(right) else ''} |")
        return "\n".join(lines) + "\n"

    def print_summary(self, console=None) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(width=160) if console is None else console
        name_a, name_b = self.names
        for step in self.steps():
            table = Table(title=f"{PASS_TITLES[step]}: {name_a} vs {name_b}")
            for column in ("", name_a, name_b, f"{name_b} - {name_a}"):
                table.add_column(column, justify="left" if not column else "right")
            for row in self.rows(step):
                table.add_row(row["title"], _text(row["a"]), _text(row["b"]), _text(row["b_minus_a"]))
            console.print(table)
            console.print(self.sentence(step))

    def write(self, out: str | Path, stem: str | None = None) -> dict[str, Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        stem = stem or f"compare-{self.a.stem()}-{self.b.stem()}"
        paths = {"json": out / f"{stem}.json", "markdown": out / f"{stem}.md"}
        self.to_json(paths["json"])
        paths["markdown"].write_text(self.to_markdown())
        return paths


def compare(a: Report, b: Report) -> Comparison:
    """Side by side: ``a`` (e.g. the reordered block) and ``b`` (e.g. the standard one)."""
    return Comparison(a, b)

