"""What the tile sweeps (benchmarks/*_tiles.py) share: the run's header, module constants set for one
variant (and the ``LABEL:NAME=V,...`` settings that name them), a forward / backward timing as a row, and the JSON
they write. GPU only."""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path
from typing import Callable, Optional

import torch
import triton

from blockfuse.bench.timing import time_cuda_graph


def header(copy_gbps: Optional[float] = None) -> dict:
    """The results dict: card, versions, the copy bandwidth measured in the run (when given), rows."""
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    if copy_gbps is not None:
        results["copy_gbps"] = copy_gbps
    return {**results, "rows": []}


def parse_setting(setting: str) -> tuple[str, dict]:
    """'LABEL:NAME=V,NAME=V' -> (LABEL, {NAME: V}) (values as Python literals; a list becomes a tuple, as the rules'
    caches need and a comma cannot be written: CHUNK_CHOICES=[2048]); a ValueError for an assignment with no value."""
    label, _, assignments = setting.partition(":")
    values = {}
    for item in filter(None, assignments.split(",")):
        name, _, literal = item.partition("=")
        if not literal.strip():
            raise ValueError(f"--setting {setting!r}: {name.strip()!r} has no value (NAME=V)")
        value = ast.literal_eval(literal.strip())
        values[name.strip()] = tuple(value) if isinstance(value, list) else value
    return label, values


@contextlib.contextmanager
def constants(module, **values):
    """``module``'s constants set to ``values`` inside the block, restored after."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def forward_backward(forward: Callable, backward: Callable, flush: Callable, fwd_bytes: int, bwd_bytes: int,
                     copy_gbps: float) -> dict:
    """Kernel times (CUDA-graph replays, L2 flushed) of one forward and one backward call, in us, and
    their fractions of the copy bandwidth."""
    tf = time_cuda_graph(lambda: (flush(), forward()), flush)
    tb = time_cuda_graph(lambda: (flush(), backward()), flush)
    return {"fwd_us": 1e3 * tf.median, "bwd_us": 1e3 * tb.median,
            "fwd_of_copy": fwd_bytes / (tf.median * 1e6) / copy_gbps,
            "bwd_of_copy": bwd_bytes / (tb.median * 1e6) / copy_gbps}


def add(results: dict, row: dict) -> None:
    """Keeps ``row`` and prints it (floats to 3 places)."""
    results["rows"].append(row)
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)


def write(out: Optional[Path], name: str, results: dict) -> None:
    """Writes ``results`` as ``out/name`` (nothing without ``out``)."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(results, indent=1))
