"""Two op sweeps (``blockfuse bench ops --sweep``'s ``sweep.json``) cell by cell: how much the verdict "at least as
fast as the faster peer" and each provider's time move between them.

    python benchmarks/sweep_compare.py THEN.json [THEN2.json ...] NOW.json [--out FILE.md]

Every file but the last is one side (several files: their cells together, e.g. the gated grid and the RoPE grid of
two earlier calls); the last file is the other side. Cells are paired by op, shape and mode.
Per op: cell-modes paired, how many were at least as fast as the faster of torch.compile and Liger on each side, how
many of them flipped, and each provider's time now over then (geometric mean, lowest, highest).

Two sweeps of the same kernels in two calls say how much of a target decided by a few percent is the calls' noise
(``results/sweep/2026-12-06-h200-gated-rope/``); two sweeps of two code versions say what a change moved, with that
noise beside it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

PROVIDERS = ("blockfuse", "compile", "liger")


def cells(paths: list[Path]) -> dict:
    """(op, shape, mode) -> that cell-mode's record (``ratio``, ``providers``), over every file in ``paths``."""
    found = {}
    for path in paths:
        for cell in json.loads(Path(path).read_text())["cells"]:
            for mode, record in cell.get("modes", {}).items():
                found[(cell["op"], "x".join(map(str, cell["shape"])), mode)] = record
    return found


def _ms(record: dict, provider: str):
    entry = record.get("providers", {}).get(provider) or {}
    return None if entry.get("error") else entry.get("ms") or None


def _spread(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return f"{mean:.3f} ({min(ratios):.2f}-{max(ratios):.2f})"


def compare(then: dict, now: dict) -> list[dict]:
    """One row per op: paired cell-modes, verdicts on each side, flips, and each provider's now / then times."""
    rows = {}
    for key in sorted(set(then) & set(now)):
        op = key[0]
        row = rows.setdefault(op, {"op": op, "paired": 0, "then": 0, "now": 0, "flipped": 0,
                                   "ratios": {p: [] for p in PROVIDERS}})
        a, b = then[key].get("ratio"), now[key].get("ratio")
        if a is not None and b is not None:
            row["paired"] += 1
            row["then"] += a >= 1.0
            row["now"] += b >= 1.0
            row["flipped"] += (a >= 1.0) != (b >= 1.0)
        for provider in PROVIDERS:
            x, y = _ms(then[key], provider), _ms(now[key], provider)
            if x and y:
                row["ratios"][provider].append(y / x)
    return list(rows.values())


def table(rows: list[dict]) -> list[str]:
    lines = ["| op | cell-modes paired | at least as fast as the faster peer: then -> now | verdicts flipped | "
             + " | ".join(f"{p} now / then" for p in PROVIDERS) + " |", "| --- " * (4 + len(PROVIDERS)) + "|"]
    for row in rows:
        lines.append(f"| {row['op']} | {row['paired']} | {row['then']} -> {row['now']} | {row['flipped']} | "
                     + " | ".join(_spread(row["ratios"][p]) for p in PROVIDERS) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("then", nargs="+", type=Path, help="the earlier sweep.json file(s), then the later one last")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args()
    if len(args.then) < 2:
        raise SystemExit("give at least two sweep.json files: the earlier one(s), then the later one")
    lines = table(compare(cells(args.then[:-1]), cells(args.then[-1:])))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
