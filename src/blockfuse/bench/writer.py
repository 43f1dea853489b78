"""The one writer of every benchmark's files: JSON, CSV, Markdown tables and bar-chart PNGs.

Every kind (``bench ops`` in ``report``, ``bench host``, ``bench block`` / ``model`` in ``block_report``, the
Hugging Face models through ``hf_harness``, the multi-GPU step in ``distributed.tables``, the sweep, and
``blockfuse report``) says what its tables and panels hold; how a number, a noisy median, a failure, a table,
the card and the versions are written, and how a figure is drawn and saved, lives here once.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from blockfuse.analyze.png import write_png

# ---------------------------------------------------------------- numbers and noise

# NOTE: a median whose p80 is more than this many times its p20 is not a figure to compare: on a small
# or busy CPU (2 cores: the timed code shares them with the OS and Inductor's threads) a single run reads
# e.g. p20 0.72 ms, p80 40.2 ms. Such medians are shown with their spread, without a speed-up.
NOISE_RATIO = 2.0
NOISE_NOTE = (f"`noisy`: the p80 time is more than {NOISE_RATIO:g}x the p20 time, so the median is not a reliable "
              "figure (a small or busy CPU); no speed-up is computed from it.")


def spread(record) -> tuple[float, float] | None:
    """(p20, p80) ms of a timed record (ops: ``ms_p20`` / ``ms_p80``; blocks: ``p20`` / ``p80``), or None."""
    if record is None or record.get("error"):
        return None
    low = record.get("ms_p20", record.get("p20"))
    high = record.get("ms_p80", record.get("p80"))
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or low <= 0:
        return None
    return float(low), float(high)


def noisy(record) -> bool:
    """True when the record's p20-p80 spread is too wide for its median to be compared (``NOISE_RATIO``)."""
    bounds = spread(record)
    return bounds is not None and bounds[1] > NOISE_RATIO * bounds[0]


def spread_text(record) -> str:
    low, high = spread(record)
    return f"noisy: p20-p80 {low:.3g}-{high:.3g} ms"


def number(value, spec: str, missing: str = "") -> str:
    """``value`` formatted by ``spec``, or ``missing`` where it is None."""
    return missing if value is None else format(value, spec)


def shape_text(shape) -> str:
    return "x".join(str(d) for d in shape)


# ---------------------------------------------------------------- JSON and CSV


def finite(value):
    """JSON has no NaN or infinity: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def write_json(path: Path, document: dict) -> None:
    """``document`` as indented JSON (NaN and infinity as strings; what JSON cannot hold, as its text)."""
    path.write_text(json.dumps(finite(document), indent=1, default=str) + "\n")


def write_csv(path: Path, records: list[dict], fields: Sequence[str]) -> None:
    """One row per record, the ``fields`` (empty where not measured)."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


# ---------------------------------------------------------------- Markdown


def card_text(meta: dict, memory: bool = False) -> str:
    """``**card** (compute capability, SMs[, GiB])`` of a run's meta, for the reports' first lines."""
    card = f"**{meta['card']}**"
    if meta.get("compute_capability"):
        size = f", {meta['memory_gib']} GiB" if memory else ""
        card += f" (compute capability {meta['compute_capability']}, {meta['sm_count']} SMs{size})"
    return card


def code(text: str) -> str:
    """``text`` as inline code that a table cell can hold (no backquote, no column bar)."""
    return f"`{text.replace('`', chr(39)).replace('|', '/')}`"


def failure_cell(error: str) -> str:
    return f"failed: {code(error)}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table: the header row, the rule, a line per row."""
    return ["| " + " | ".join(header) + " |", "| --- " * len(header) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def record_table(columns: Sequence[tuple[str, Callable[[dict], str]]], records: Sequence[dict]) -> list[str]:
    """A Markdown table, one row per record: ``columns`` are (header, cell of a record); the first two
    cells (provider, mode) of a failed record, then its error."""
    rows = []
    for record in records:
        if record.get("error"):
            cells = [cell(record) for _, cell in columns[:2]] + [failure_cell(record["error"])]
            rows.append(cells + [""] * (len(columns) - len(cells)))
        else:
            rows.append([cell(record) for _, cell in columns])
    return table([header for header, _ in columns], rows)


def checks_lines(checks: list[dict], empty: str = "(none for this workload)") -> list[str]:
    """A target check a line (``- **met**: text``): what ``--targets`` adds to a benchmark's Markdown."""
    return [f"- **{check['status']}**: {check['text']}" for check in checks] or [empty]


# ---------------------------------------------------------------- plots


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def versions_title(meta: dict) -> str:
    return f"{meta['card']}, torch {meta['torch']}, triton {meta['triton']}"


def save(figure, path: Path, title: str | None = None, rect=None) -> bool:
    """Gives ``figure`` its title, lays it out, writes it to ``path`` (:func:`write_png`) and closes it; True."""
    plt = pyplot()
    if title is not None:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout(**({"rect": rect} if rect else {}))
    write_png(figure, path)
    plt.close(figure)
    return True


def grouped_bars(ax, labels: Sequence[str], series: dict[str, Sequence[float]], rotation: int = 35) -> list:
    """A group of bars per label (x axis), a bar per series in each (with a legend); the bar containers."""
    width = 0.8 / max(len(series), 1)
    containers = [ax.bar([i + k * width for i in range(len(labels))], values, width, label=name)
                  for k, (name, values) in enumerate(series.items())]
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels(labels, rotation=rotation, ha="right" if rotation else "center", fontsize=8)
    if series:
        ax.legend(fontsize=8)
    return containers


def missing_panel(ax, text: str) -> None:
    """Says in the panel why it holds no bars (CUDA memory on the CPU, say)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=11, color="gray")
    ax.set_yticks([])


@dataclass(frozen=True)
class Panel:
    """One panel of ``panel_plot``: a record field, bars grouped by mode, per provider."""

    field: str
    ylabel: str
    line: float | None = None  # a dashed horizontal line (1.0 for a speed-up)
    missing: str = "not measured"  # the text of a panel with no value


def panel_plot(path: Path, title: str, records: list[dict], modes: Sequence[str], mode_titles: dict,
               panels: Sequence[Panel]) -> bool:
    """One bar chart per panel, a bar per provider and mode. False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    index = {(r["provider"], r["mode"]): r for r in records if not r.get("error")}
    providers = list(dict.fromkeys(r["provider"] for r in records))
    figure, axes = plt.subplots(1, len(panels), figsize=(max(5.5 * len(panels), 9), 4.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        shown = [m for m in modes if any(index.get((p, m), {}).get(panel.field) for p in providers)]
        ax.set_ylabel(panel.ylabel)
        if not shown:
            missing_panel(ax, panel.missing)
            continue
        grouped_bars(ax, providers, {mode_titles[m]: [index.get((p, m), {}).get(panel.field) or 0 for p in providers]
                                     for m in shown})
        if panel.line is not None:
            ax.axhline(panel.line, color="black", linewidth=0.8, linestyle="--")
        for centre, provider in zip(ax.get_xticks(), providers):
            if not any((provider, mode) in index for mode in modes):
                ax.text(centre, 0.05, "failed", rotation=90, ha="center", va="bottom", fontsize=8)
    return save(figure, path, title)
