"""benchmarks/ab_compare.py: two runs' records paired into one table."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import load_benchmark


def _load():
    return load_benchmark("ab_compare")


def _write(folder: Path, records: list[dict]) -> None:
    (folder / "ops").mkdir(parents=True)
    (folder / "ops" / "ops.json").write_text(json.dumps({"meta": {}, "records": records}))
    (folder / "notes.json").write_text(json.dumps([1, 2]))  # not a results document: skipped


def test_pairs_records_and_gives_the_ratio(tmp_path):
    ab = _load()
    old = [{"op": "rms_norm", "shape": [4, 8], "provider": "blockfuse", "mode": "fwd", "ms": 2.0, "peak_mib": 10.0,
            "rel_err": {"out": 1e-3, "dx": 3e-3}},
           {"op": "rms_norm", "shape": [4, 8], "provider": "blockfuse", "mode": "bwd", "ms": 1.0},
           {"op": "swiglu", "shape": [4, 8], "provider": "blockfuse", "mode": "fwd", "ms": 1.0}]
    new = [{**old[0], "ms": 1.6, "peak_mib": None, "rel_err": {"out": 2e-3}}, {**old[1], "ms": None, "error": "boom"}]
    _write(tmp_path / "old", old)
    _write(tmp_path / "new", new)
    lines = ab.table(ab.records(tmp_path / "old"), ab.records(tmp_path / "new"))
    fwd = next(line for line in lines if "| fwd |" in line)
    assert "| 2.0000 | 1.6000 | 1.250 | 10 | - | 3.00e-03 | 2.00e-03 |" in fwd
    assert "failed: boom" in next(line for line in lines if "| bwd |" in line)
    assert "Only in the old run: ops/ops.json swiglu 4x8 blockfuse fwd" in lines[-1]
