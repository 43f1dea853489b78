"""Two settings of benchmarks/norm_tiles.py (``--fwd-setting`` / ``--bwd-setting``) side by side over one or more
runs: for every (shape, form, pass), each setting's time and fraction of copy (the mean of its rounds over all runs)
and the speed-up of NEW over OLD in each run (OLD's mean time over NEW's: above 1, NEW is faster), as a Markdown
table, and a bar chart of the speed-ups (PNG) with ``--plot``.

    python benchmarks/settings_table.py RUN/bwd.json [RUN2/bwd.json ...] --old pieces --new joint \
        [--plot speedups.png] [--title TEXT]

Runs of one call on one card only: ratios across cards compare the cards as much as the settings.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def cells(paths: list[Path], old: str, new: str) -> list[dict]:
    """One dict per (shape, form, pass) that every run timed in both settings: ``old_ms`` / ``new_ms`` and
    ``old_fraction`` / ``new_fraction`` (means over every round of every run) and ``speedups`` (one a run)."""
    timed = defaultdict(lambda: defaultdict(list))  # (shape, form, pass) -> (run, setting) -> rows
    for run, path in enumerate(paths):
        for row in json.loads(path.read_text())["rows"]:
            if row.get("setting") in (old, new) and row.get("ms"):
                timed[(tuple(row["shape"]), row["op"], row["pass_"])][(run, row["setting"])].append(row)
    out = []
    for (shape, form, pass_), rows in timed.items():
        if any(not rows[(run, setting)] for run in range(len(paths)) for setting in (old, new)):
            continue

        def mean(setting: str, key: str, run=None) -> float:
            runs = range(len(paths)) if run is None else (run,)
            return statistics.mean(row[key] for one in runs for row in rows[(one, setting)])

        out.append(dict(shape=list(shape), form=form, pass_=pass_, old_ms=mean(old, "ms"), new_ms=mean(new, "ms"),
                        old_fraction=mean(old, "frac"), new_fraction=mean(new, "frac"),
                        speedups=[mean(old, "ms", run) / mean(new, "ms", run) for run in range(len(paths))]))
    return out


def markdown(table: list[dict], old: str, new: str) -> str:
    lines = [f"| rows x width | form | pass | {old}: us, of copy | {new}: us, of copy | {new} speed-up, each run |",
             "| --- | --- | --- | --- | --- | --- |"]
    for cell in table:
        speedups = " / ".join(f"{value:.3f}x" for value in cell["speedups"])
        lines.append(f"| {cell['shape'][0]} x {cell['shape'][1]} | {cell['form']} | {cell['pass_'].split('-')[0]} | "
                     f"{cell['old_ms'] * 1e3:.1f}, {cell['old_fraction']:.2f} | "
                     f"{cell['new_ms'] * 1e3:.1f}, {cell['new_fraction']:.2f} | {speedups} |")
    return "\n".join(lines)


def plot(table: list[dict], old: str, new: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{c['form']} {c['shape'][0]}x{c['shape'][1]} {c['pass_'].split('-')[0]}" for c in table]
    runs = len(table[0]["speedups"])
    figure, axes = plt.subplots(figsize=(10, 0.28 * len(table) + 1.2))
    height = 0.8 / runs
    for run in range(runs):
        axes.barh([i + run * height for i in range(len(table))], [c["speedups"][run] - 1 for c in table], height,
                  left=1.0, label=f"run {run + 1}")
    axes.axvline(1.0, color="black", linewidth=0.8)
    values = [value for c in table for value in c["speedups"]]
    axes.set_xlim(min(min(values), 1.0) - 0.01, max(max(values), 1.0) + 0.01)
    axes.set_yticks([i + 0.4 - height / 2 for i in range(len(table))], labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(f"{new} speed-up over {old} ({old} time / {new} time)")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="norm_tiles.py JSON files, one a run")
    parser.add_argument("--old", required=True, help="the baseline setting's name")
    parser.add_argument("--new", required=True, help="the candidate setting's name")
    parser.add_argument("--plot", type=Path, help="write the speed-ups as a bar chart (PNG)")
    parser.add_argument("--title", default="", help="the plot's title")
    args = parser.parse_args(argv)
    table = cells(args.runs, args.old, args.new)
    if not table:
        parser.error(f"no cell timed in both settings {args.old!r} and {args.new!r} in every run")
    print(markdown(table, args.old, args.new))
    if args.plot:
        plot(table, args.old, args.new, args.plot, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
