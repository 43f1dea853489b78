"""benchmarks/sweep_compare.py: two sweeps' cells paired, verdict flips and time ratios per op."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from tests.helpers import load_benchmark


def _cell(op, shape, modes):
    return {"op": op, "shape": shape, "modes": {
        mode: {"ratio": ratio, "providers": {name: {"ms": ms} for name, ms in times.items()}}
        for mode, (ratio, times) in modes.items()}}


def _write(path: Path, cells) -> Path:
    path.write_text(json.dumps({"meta": {}, "targets": [], "cells": cells}))
    return path


def _sides(tmp_path):
    then = [_cell("swiglu", [8, 16], {"fwd": (1.02, {"blockfuse": 2.0, "compile": 2.04, "liger": 2.1}),
                                      "fwdbwd": (0.97, {"blockfuse": 4.0, "compile": 3.88, "liger": 4.5})}),
            _cell("swiglu", [8, 32], {"fwd": (0.9, {"blockfuse": 3.0, "compile": 2.7, "liger": None})})]
    rope = [_cell("rotary", [1, 2, 3], {"fwdbwd": (1.2, {"blockfuse": 1.0, "compile": 1.2})})]
    now = [_cell("swiglu", [8, 16], {"fwd": (0.98, {"blockfuse": 2.1, "compile": 2.06, "liger": 2.2}),
                                     "fwdbwd": (1.01, {"blockfuse": 4.0, "compile": 4.04, "liger": 4.5})}),
           _cell("swiglu", [8, 32], {"fwd": (0.92, {"blockfuse": 3.0, "compile": 2.76, "liger": 3.3})}),
           _cell("swiglu", [8, 64], {"fwd": (1.5, {"blockfuse": 1.0, "compile": 1.5})}),  # unpaired: left out
           _cell("rotary", [1, 2, 3], {"fwdbwd": (1.1, {"blockfuse": 1.1, "compile": 1.21})})]
    return (_write(tmp_path / "then.json", then), _write(tmp_path / "rope.json", rope),
            _write(tmp_path / "now.json", now))


def test_counts_verdicts_flips_and_time_ratios_per_op(tmp_path):
    sc = load_benchmark("sweep_compare")
    then, rope, now = _sides(tmp_path)
    rows = {row["op"]: row for row in sc.compare(sc.cells([then, rope]), sc.cells([now]))}
    swiglu = rows["swiglu"]
    assert (swiglu["paired"], swiglu["then"], swiglu["now"], swiglu["flipped"]) == (3, 1, 1, 2)
    assert swiglu["ratios"]["blockfuse"] == [2.1 / 2.0, 1.0, 1.0]
    assert swiglu["ratios"]["liger"] == [2.2 / 2.1, 1.0]  # a missing time pairs with nothing
    rotary = rows["rotary"]
    assert (rotary["paired"], rotary["then"], rotary["now"], rotary["flipped"]) == (1, 1, 1, 0)
    lines = sc.table(list(rows.values()))
    assert lines[0].startswith("| op | cell-modes paired |")
    mean = math.exp(sum(map(math.log, [1.05, 1.0, 1.0])) / 3)
    assert f"| swiglu | 3 | 1 -> 1 | 2 | {mean:.3f} (1.00-1.05) |" in "\n".join(lines)


def test_command_line_writes_the_table_and_needs_two_files(tmp_path):
    then, rope, now = _sides(tmp_path)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep_compare.py"
    out = tmp_path / "compare.md"
    done = subprocess.run([sys.executable, str(script), str(then), str(rope), str(now), "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert done.stdout == out.read_text()
    assert "| rotary | 1 | 1 -> 1 | 0 |" in done.stdout
    refused = subprocess.run([sys.executable, str(script), str(now)], capture_output=True, text=True)
    assert refused.returncode != 0 and "at least two" in refused.stderr
