"""Two runs of the same benchmarks side by side: the records of every ``*.json`` under OLD and NEW (written
by ``blockfuse bench ops`` / ``bench block``), paired by file, op, shape, provider and mode, as one Markdown
table: median ms of each, the speed ratio old / new (above 1: the new code is faster), peak memory and
relative error of each.

    python benchmarks/ab_compare.py OLD_DIR NEW_DIR [--out FILE.md]

Meant for two runs in one call on one machine (``scripts/issue16_ab_gpu.sh``): ratios across machines
compare hosts as much as code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def records(folder: Path) -> dict:
    """(relative file, op, shape, provider, mode) -> record, for every record of every JSON under ``folder``."""
    found = {}
    for path in sorted(folder.rglob("*.json")):
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or "records" not in document:
            continue
        for record in document["records"]:
            key = (str(path.relative_to(folder)), record.get("op", "-"), "x".join(map(str, record.get("shape", []))),
                   record.get("provider"), record.get("mode"))
            found[key] = record
    return found


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _error(record: dict):
    """The record's relative error: ``rel_err`` (the largest over outputs and gradients where it is a dict),
    else that of the gradients or of the output."""
    error = record.get("rel_err", record.get("rel_err_grad", record.get("rel_err_out")))
    if isinstance(error, dict):
        values = [v for v in error.values() if isinstance(v, (int, float))]
        return max(values) if values else None
    return error


def table(old: dict, new: dict) -> list[str]:
    lines = ["| file | op | shape | provider | mode | old ms | new ms | old / new | old peak MiB | new peak MiB | "
             "old rel. err | new rel. err |", "| --- " * 12 + "|"]
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        if a.get("error") or b.get("error") or a.get("ms") is None or b.get("ms") is None:
            ratio = "failed: " + str(a.get("error") or b.get("error"))[:60]
        else:
            ratio = f"{a['ms'] / b['ms']:.3f}"
        lines.append("| " + " | ".join([*key, _number(a.get("ms"), ".4f"), _number(b.get("ms"), ".4f"), ratio,
                                        _number(a.get("peak_mib"), ".0f"), _number(b.get("peak_mib"), ".0f"),
                                        _number(_error(a), ".2e"), _number(_error(b), ".2e")]) + " |")
    for name, only in (("old", set(old) - set(new)), ("new", set(new) - set(old))):
        if only:
            lines.append(f"\nOnly in the {name} run: " + "; ".join(" ".join(k) for k in sorted(only)))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = "\n".join(table(records(args.old), records(args.new))) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
