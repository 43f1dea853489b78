"""``blockfuse bench ops --sweep``: every op over the widths and head sizes real models use (issue 22).

The grid. An op's declared shapes say which grid it sweeps (``KINDS``):

* ops declared on (rows, hidden), the norms in every declared form (``rms_norm``, ``layer_norm``, their
  residual forms, ``layer_norm_gelu``, ``layer_norm_post``), the gated activations (the width is the hidden
  width; the packed input is twice as wide) and ``bias_dropout_add``: d_model and MLP widths ``WIDTHS`` x
  rows ``ROWS``, 14 x 3 = 42 cells each;
* RoPE, declared on (batch, seq, q_heads, kv_heads, head_dim): head_dim ``HEAD_DIMS`` x (heads, kv heads)
  ``HEADS`` x seq ``SEQS`` at batch ``ROTARY_BATCH``, 6 x 3 x 2 = 36 cells;
* the GEMM-bound ops (the fused cross-entropy on (tokens, d, vocab), ``linear_act`` and the MLPs on (tokens,
  d, hidden)) are not swept.

Ten (rows, hidden) ops and RoPE: 10 x 42 + 36 = 456 cells, each timed in every mode (forward and
forward+backward by default). ``--quick`` sweeps ``QUICK`` (the widths 768, 1152, 2560, 4096, 4304, 11008
and 14336 at 8192 rows; RoPE at every head_dim and head configuration at seq 4096: 10 x 7 + 18 = 88 cells)
with the runner's short timing, and stops starting cells after ``QUICK_BUDGET_S`` seconds. Estimate, not
measured: about 3 s a cell on an H200 with ``--quick``, most of it torch.compile's two compiles of the
cell's static shape, so the quick sweep fits in about 6 minutes; the whole grid takes about half an hour
(run it in parts with ``--op``). ``blockfuse bench ops --sweep --list`` prints the cell counts. Without
CUDA the sweep runs ``CPU``, a grid of tiny shapes (the reference path, or the Triton interpreter with
``TRITON_INTERPRET=1``): the numbers check the harness, not the speed.

Each cell runs through the op benchmark's one runner (``runner.run``: the declared inputs, providers,
byte counts, CUDA-graph timing and errors against an fp32 reference), then times a device copy that
moves the same bytes as the op in each mode, in the same run: ``fraction`` = copy ms / op ms (1.0: the
op moves its bytes as fast as a copy of that size does), ``ratio`` = the faster of torch.compile and
Liger / blockfuse (``report.ratio_to_peers``; above 1: blockfuse is faster). A cell whose tensors would
not fit in the device's free memory is skipped, and so is a cell not started within the time budget;
the JSON says why. ``targets`` checks the issue's targets cell by cell.

The warm-up (``--warm-jobs N``, ``warm_up``). Most of a cell's time is torch.compile compiling (the runner's
``torch.compiler.reset()`` per shape: a fresh static-shape compile, as a user with one shape gets). Before the
first measurement, N spawned processes (``runner.warm_up``) build and call every provider of every cell once
in each mode, as the measuring will and untimed, filling the on-disk FX graph, AOTAutograd and Triton caches
(the parent's folders: the workers inherit its environment); the measuring, one cell at a time as without,
then compiles from them. Every worker is done before the first measurement; on CUDA each may hold 1 / N of
the free memory, and a cell too large for that share compiles cold when measured. The budget counts from
the first measurement. ``meta`` says what the warm-up did (``warm_up``: cells, warmed, failures, seconds) and
the cache hits and misses while measuring (``compile_cache``, also without a warm-up). Measured (rms_norm and
layer_norm, empty caches): on an H200, 14 quick cells, 69.8 s without, 37.0 s of warm-up (N = 8) then 19.1 s
measuring with (benchmarks/results/sweep/2026-11-28-h200-warm-up/); on a 2-core CPU, 8 cells, measuring 46-53 s
without, 10-11 s after a 38 s warm-up with N = 2 (the same total on 2 cores).

Files: ``sweep.json`` (every cell), ``sweep.md`` (the targets, the worst cells, a table per op) and
``sweep-<op>.png`` (heat maps of the fraction and the ratio, a panel per mode).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from blockfuse.bench import report, runner, timing
from blockfuse.bench.report import MODE_TITLES
from blockfuse.bench.writer import card_text, noisy, pyplot, save, shape_text
from blockfuse.bench.writer import write_json as write_document
from blockfuse.bench.spec import OpBenchmark, Shape, mode_bytes

WIDTHS = (768, 1024, 1152, 1536, 2048, 2560, 3072, 4096, 4304, 5120, 6144, 8192, 11008, 14336)
ROWS = (2048, 8192, 32768)
HEAD_DIMS = (64, 72, 80, 96, 128, 256)
HEADS = ((32, 32), (32, 8), (16, 4))  # (q heads, kv heads)
SEQS = (1024, 4096)
ROTARY_BATCH = 4  # the op benchmark's first RoPE shape's batch

# The sweep's modes unless --modes says otherwise: the ones the targets read.
DEFAULT_MODES = ("fwd", "fwdbwd")
# The providers on CUDA: the peers the targets name and blockfuse (eager is slower than both everywhere).
CUDA_PROVIDERS = ("compile", "liger", "blockfuse")


@dataclass(frozen=True)
class Grid:
    widths: tuple[int, ...]  # (rows, hidden) ops: the hidden widths
    rows: tuple[int, ...]
    head_dims: tuple[int, ...]  # RoPE
    heads: tuple[tuple[int, int], ...]  # RoPE: (q heads, kv heads)
    seqs: tuple[int, ...]  # RoPE
    batch: int  # RoPE


FULL = Grid(WIDTHS, ROWS, HEAD_DIMS, HEADS, SEQS, ROTARY_BATCH)
# Widths: the smallest, SigLIP's 1152 and 4304, a Phi-2 2560, the listed 4096, Llama's MLP 11008 and 14336;
# at 8192 rows two are below 32 MiB (judged against the peers) and five above (against the copy).
QUICK = Grid(widths=(768, 1152, 2560, 4096, 4304, 11008, 14336), rows=(8192,), head_dims=HEAD_DIMS, heads=HEADS,
             seqs=(4096,), batch=ROTARY_BATCH)
CPU = Grid(widths=(72, 200), rows=(3, 64), head_dims=(64, 72), heads=((4, 4), (4, 2)), seqs=(16,), batch=1)
QUICK_BUDGET_S = 330.0

# What the rank of an op's declared shapes says it sweeps: (rows, hidden) the widths, RoPE's
# (batch, seq, q_heads, kv_heads, head_dim) the head sizes.
KINDS = {2: "width", 5: "heads"}

# ---------------------------------------------------------------- the targets
LARGE_TENSOR_BYTES = 32 * 2**20  # a cell whose largest input has at least this many bytes is judged against the copy
COPY_FRACTION_FLOOR = {"fwd": 0.85, "fwdbwd": 0.80}
PEER_SHARE = 0.95  # of the cells at least as fast as the faster peer
PEER_FLOOR = 0.95  # and never slower than this
TARGET_MODES = ("fwd", "fwdbwd")
TARGETS = {  # key: (name, what it asks)
    "copy_fraction": ("copy fraction", "tensors of 32 MiB and more: forward >= 0.85 and forward+backward >= 0.80 "
                      "of a same-size copy's bandwidth"),
    "small_vs_peers": ("small vs peers", "tensors below 32 MiB: no slower than the faster of torch.compile and "
                       "Liger"),
    "vs_peers": ("vs peers", f"at least as fast as the faster of torch.compile and Liger in {PEER_SHARE:.0%} of "
                 f"the cells and never below {PEER_FLOOR:.2f}x"),
    "rotary_vs_compile": ("RoPE vs compile", "RoPE forward+backward at least as fast as torch.compile at every "
                          "head_dim and GQA ratio"),
}
WORST = 10  # the lowest cells listed per target

# NOTE: a cell holds about this many times its forward+backward bytes at once: the fp32 reference's inputs,
# outputs and gradients beside the provider's own, and the float64 copies the error check makes. An
# estimate: a cell that runs out of memory anyway is skipped too.
FOOTPRINT = 4

# How the runner describes a provider (or the reference) that ran out of memory: such a cell is skipped.
OUT_OF_MEMORY = ("OutOfMemoryError", "reference: OutOfMemoryError")

# The fields of a runner record kept for each provider of a cell.
PROVIDER_FIELDS = ("ms", "ms_p20", "ms_p80", "ms_eager", "timing", "gbps", "peak_mib", "rel_err_out", "rel_err_grad",
                   "rel_err", "error")


def kind_of(bench: OpBenchmark) -> str | None:
    """``"width"``, ``"heads"`` or None (not swept), from the rank of the op's declared shapes."""
    return KINDS.get(len(bench.shapes[0])) if bench.shapes else None


def grid_for(cuda: bool, quick: bool) -> Grid:
    return (QUICK if quick else FULL) if cuda else CPU


def describe(grid: Grid) -> str:
    heads = ", ".join(f"({q}, {kv})" for q, kv in grid.heads)
    return (f"widths {{{', '.join(map(str, grid.widths))}}} x rows {{{', '.join(map(str, grid.rows))}}}; RoPE: "
            f"head_dim {{{', '.join(map(str, grid.head_dims))}}} x (heads, kv heads) {{{heads}}} x seq "
            f"{{{', '.join(map(str, grid.seqs))}}} at batch {grid.batch}")


@dataclass(frozen=True)
class Cell:
    """One op at one shape of the grid, with its place in the op's heat map."""

    bench: OpBenchmark
    shape: Shape
    row: str  # the width, or "head_dim, heads/kv heads"
    column: str  # the rows, or the seq


def cells_of(bench: OpBenchmark, grid: Grid) -> list[Cell]:
    if kind_of(bench) == "width":
        return [Cell(bench, (rows, width), str(width), str(rows)) for width in grid.widths for rows in grid.rows]
    return [Cell(bench, (grid.batch, seq, heads, kv_heads, head_dim), f"{head_dim}, {heads}/{kv_heads}", str(seq))
            for head_dim in grid.head_dims for heads, kv_heads in grid.heads for seq in grid.seqs]


def tensor_bytes(bench: OpBenchmark, shape: Shape, dtype: torch.dtype) -> int:
    """Bytes of the op's largest input (x of a norm, gate_up of the packed SwiGLU, q of RoPE), read from
    its inputs made on the meta device: what the 32 MiB rule reads."""
    inputs = bench.make_inputs(shape, dtype, torch.device("meta"))
    return max(t.numel() * t.element_size() for t in inputs.values())


def unfit(bench: OpBenchmark, shape: Shape, itemsize: int, memory_bytes: int | None) -> str | None:
    """Why a cell would not fit in ``memory_bytes`` (None: no limit), or None."""
    need = FOOTPRINT * mode_bytes(bench, shape, itemsize, "fwdbwd")
    if memory_bytes is None or need <= memory_bytes:
        return None
    return (f"does not fit: needs about {need / 2**30:.1f} GiB ({FOOTPRINT}x its forward+backward bytes), "
            f"{memory_bytes / 2**30:.1f} GiB free")


# ---------------------------------------------------------------- measuring


def measure_cell(bench: OpBenchmark, shape: Shape, settings: runner.Settings) -> list[dict]:
    """The op benchmark's records of one op and shape: every provider x mode (``runner.run``)."""
    return runner.run([bench], dataclasses.replace(settings, shapes=(shape,)), None, show_progress=False)


def copy_ms(nbytes: int, settings: runner.Settings) -> float:
    """Median ms of a device copy that moves ``nbytes``: nbytes / 2 read and written elsewhere."""
    source = torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device=settings.device)
    target = torch.empty_like(source)
    quick = settings.quick
    if settings.device.type == "cuda":
        # NOTE: do_bench (the L2 flushed before each call), as the op benchmark's 1 GiB copy ceiling is timed,
        # not a CUDA graph: captured, the copy becomes a memcpy node that may run on a copy engine, slower.
        return timing.time_cuda(lambda: target.copy_(source), warmup_ms=5 if quick else 25,
                                rep_ms=20 if quick else 100).median
    return timing.time_cpu(lambda: target.copy_(source), warmup=1, rep_ms=20 if quick else 200,
                           max_reps=20 if quick else 200).median


def _measured(bench, shape, settings, itemsize, measure, time_copy) -> tuple[list[dict], dict[str, float], str | None]:
    """(the runner's records, the copy's ms per mode, None) of one cell, or ([], {}, why) when it ran out of memory."""
    try:
        records = measure(bench, shape, settings)
        for record in records:
            # NOTE: out of memory in a provider or the reference is the harness's footprint (the fp32 reference,
            # the float64 error checks) more than the op's: the cell is skipped, not counted as a failure.
            if (record.get("error") or "").startswith(OUT_OF_MEMORY):
                return [], {}, f"out of memory: {record['provider']} {record['mode']}: {record['error']}"
        copies = {mode: time_copy(mode_bytes(bench, shape, itemsize, mode), settings) for mode in settings.modes}
    except torch.OutOfMemoryError as error:  # the inputs or the copy did not fit
        torch.cuda.empty_cache()
        return [], {}, f"out of memory: {str(error).strip().splitlines()[0][:200]}"
    return records, copies, None


def _free_bytes(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info(device)[0]


def run(
    benchmarks: list[OpBenchmark],
    settings: runner.Settings,
    grid: Grid,
    *,
    budget_s: float | None = None,
    memory_bytes: int | None = None,
    on_update: Callable[[list[dict]], None] | None = None,
    show_progress: bool = True,
    measure: Callable[[OpBenchmark, Shape, runner.Settings], list[dict]] = measure_cell,
    time_copy: Callable[[int, runner.Settings], float] = copy_ms,
) -> list[dict]:
    """Every swept op over ``grid``: one cell (a dict, see ``cell_record``) per op and shape.

    ``budget_s``: no cell starts after this many seconds; each op gets the share of what is left that its
    cells are of the cells left, so a cut drops the tail of every op, not whole ops. ``memory_bytes``: what a
    cell may use (default: the CUDA device's free memory; no limit on the CPU). ``measure`` and ``time_copy``:
    the runner's records of one op and shape, and a copy's ms (``measure_cell``, ``copy_ms``; tests pass fakes).
    ``on_update`` gets the cells so far after each one."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    dtype = runner.DTYPES[settings.dtype]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if memory_bytes is None:
        memory_bytes = _free_bytes(settings.device)
    plan = [(bench, cells_of(bench, grid)) for bench in benchmarks if kind_of(bench)]
    left = sum(len(cells) for _, cells in plan)
    # NOTE: the sizes first, before the budget's clock: the first meta-device inputs took 1.2 s on a CPU (one-time
    # setup), which the first op's share of a small budget paid.
    sizes = {(bench.name, cell.shape): tensor_bytes(bench, cell.shape, dtype) for bench, cells in plan
             for cell in cells}
    began = time.perf_counter()
    results: list[dict] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, disable=not show_progress, transient=True) as progress:
        task = progress.add_task("sweep", total=left)
        for bench, cells in plan:
            deadline = None
            if budget_s is not None:
                now = time.perf_counter()
                deadline = now + max(budget_s - (now - began), 0.0) * len(cells) / max(left, 1)
            for cell in cells:
                progress.update(task, description=f"{bench.name} {shape_text(cell.shape)}")
                size = sizes[bench.name, cell.shape]
                skipped = unfit(bench, cell.shape, itemsize, memory_bytes)
                if skipped is None and deadline is not None and time.perf_counter() >= deadline:
                    skipped = "time budget spent (--budget)"
                records, copies = [], {}
                if skipped is None:
                    records, copies, skipped = _measured(bench, cell.shape, settings, itemsize, measure, time_copy)
                results.append(cell_record(cell, settings, size, records, copies, skipped))
                progress.advance(task)
                if on_update is not None:
                    on_update(results)
            left -= len(cells)
    return results


def _ms(record: dict | None) -> float | None:
    """A record's median ms, None where it failed or its median is noisy (``writer.noisy``)."""
    if record is None or record.get("error") or noisy(record):
        return None
    return record.get("ms") or None


def cell_record(cell: Cell, settings: runner.Settings, size: int, records: list[dict], copies: dict[str, float],
                skipped: str | None) -> dict:
    """The JSON cell: shape, dtype, the largest input's bytes, and per mode the bytes moved, the copy's ms,
    each provider's record (time, errors against fp32) with its fraction of the copy, blockfuse's fraction,
    its ratio against the faster peer and against torch.compile."""
    bench = cell.bench
    out = {
        "op": bench.name,
        "grid": kind_of(bench),
        "shape": list(cell.shape),
        "row": cell.row,
        "column": cell.column,
        "dtype": settings.dtype,
        "tensor_bytes": size,
        "large": size >= LARGE_TENSOR_BYTES,
        "skipped": skipped,
        "modes": {},
    }
    if skipped is not None:
        return out
    itemsize = torch.empty((), dtype=runner.DTYPES[settings.dtype]).element_size()
    index = {(r["op"], tuple(r["shape"]), r["mode"], r["provider"]): r for r in records}
    for mode in settings.modes:
        moved, copy = mode_bytes(bench, cell.shape, itemsize, mode), copies[mode]
        providers = {}
        for record in records:
            if record["mode"] != mode:
                continue
            entry = {key: record.get(key) for key in PROVIDER_FIELDS}
            entry["fraction"] = copy / record["ms"] if record.get("ms") and not record.get("error") else None
            providers[record["provider"]] = entry
        ratio, peer = report.ratio_to_peers(index, bench.name, tuple(cell.shape), mode)
        mine, compiled = (_ms(index.get((bench.name, tuple(cell.shape), mode, p))) for p in ("blockfuse", "compile"))
        out["modes"][mode] = {
            "bytes": moved,
            "copy_ms": copy,
            "copy_gbps": moved / copy / 1e6 if copy else None,
            "fraction": providers.get("blockfuse", {}).get("fraction"),
            "ratio": ratio,
            "peer": peer,
            "vs_compile": compiled / mine if mine and compiled else None,
            "providers": providers,
        }
    return out


# ---------------------------------------------------------------- targets


def _checked(target: str, cell: dict, mode: str) -> tuple[float | None, float] | None:
    """(blockfuse's value, the floor it must reach) of one cell and mode under ``target``; None where the
    target does not apply or there is nothing to compare with. A value of None: blockfuse failed (a miss)."""
    entry = cell["modes"].get(mode)
    if cell.get("skipped") or entry is None or mode not in TARGET_MODES:
        return None
    mine = entry["providers"].get("blockfuse")
    if mine is None:
        return None
    failed = bool(mine.get("error")) or not mine.get("ms")
    if target == "copy_fraction":
        return (entry["fraction"], COPY_FRACTION_FLOOR[mode]) if cell["large"] else None
    if target == "rotary_vs_compile":
        if cell["grid"] != "heads" or mode != "fwdbwd":
            return None
        value = entry["vs_compile"]
    elif target == "small_vs_peers" and cell["large"]:
        return None
    else:
        value = entry["ratio"]
    return None if value is None and not failed else (value, 1.0)


def _verdict(target: str, op: str, items: list[tuple], device: str) -> dict:
    values = [value for _, _, value, _ in items]
    passed = sum(1 for _, _, value, floor in items if value is not None and value >= floor)
    lowest = min((v for v in values if v is not None), default=None)
    if device != "cuda" or not items:
        status = "n/a"
    elif target == "vs_peers":
        good = None not in values and passed >= PEER_SHARE * len(items) and lowest >= PEER_FLOOR
        status = "met" if good else "missed"
    else:
        status = "met" if passed == len(items) else "missed"
    ranked = sorted(items, key=lambda item: -math.inf if item[2] is None else item[2] - item[3])
    worst = [{"op": cell["op"], "shape": cell["shape"], "mode": mode, "value": value, "floor": floor}
             for cell, mode, value, floor in ranked[:WORST]]
    name, text = TARGETS[target]
    return {"target": target, "op": op, "status": status, "passed": passed, "evaluated": len(items),
            "lowest": lowest, "worst": worst, "name": name, "text": text}


def targets(cells: list[dict], device: str) -> list[dict]:
    """Each of the issue's targets (``TARGETS``) over every op together (op ``"all"``), then per op where it
    applies: cells passing, cells evaluated, the lowest value, the worst cells; status met, missed or n/a
    (n/a off CUDA, or where no cell was evaluated). Skipped cells are not evaluated."""
    ops = list(dict.fromkeys(cell["op"] for cell in cells))
    out = []
    for target in TARGETS:
        for op in (None, *ops):
            chosen = [cell for cell in cells if op is None or cell["op"] == op]
            items = [(cell, mode, *checked) for cell in chosen for mode in TARGET_MODES
                     if (checked := _checked(target, cell, mode)) is not None]
            if op is not None and not items:
                continue
            out.append(_verdict(target, op or "all", items, device))
    return out


# ---------------------------------------------------------------- files


def _number(value, spec: str, suffix: str = "") -> str:
    return "–" if value is None else format(value, spec) + suffix


def _cell_text(cell: dict, modes: list[str]) -> str:
    """A table cell: blockfuse's fraction per mode · its ratio per mode; * below 32 MiB."""
    if cell["skipped"]:
        return "skipped"
    entries = [cell["modes"].get(mode, {}) for mode in modes]
    if any(entry.get("providers", {}).get("blockfuse", {}).get("error") for entry in entries):
        return "error"
    fractions = " / ".join(_number(entry.get("fraction"), ".2f") for entry in entries)
    ratios = " / ".join(_number(entry.get("ratio"), ".2f", "x") for entry in entries)
    return f"{fractions} · {ratios}" + ("" if cell["large"] else " *")


def _axes(cells: list[dict]) -> tuple[list[str], list[str]]:
    return list(dict.fromkeys(c["row"] for c in cells)), list(dict.fromkeys(c["column"] for c in cells))


AXIS_NAMES = {"width": ("width", "rows"), "heads": ("head_dim, heads/kv heads", "seq")}


def markdown(meta: dict, cells: list[dict]) -> str:
    modes = list(meta["settings"]["modes"])
    ops = list(dict.fromkeys(cell["op"] for cell in cells))
    skipped = [cell for cell in cells if cell["skipped"]]
    card = f"- card: {card_text(meta, memory=True)}"
    lines = [
        "# blockfuse op sweep",
        "",
        card,
        f"- torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, Liger-Kernel {meta['liger_kernel']}, "
        f"python {meta['python']}",
        f"- blockfuse path: {meta['blockfuse_implementation']}, commit {meta.get('git_commit')} (source digest "
        f"{meta.get('source_digest')}); date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- grid: {meta['grid']['text']}; dtype {meta['settings']['dtype']}; {len(cells)} cells, "
        f"{len(cells) - len(skipped)} measured, {len(skipped)} skipped; {meta.get('elapsed_s')} s",
    ]
    warm = meta.get("warm_up")
    if warm:
        lines.append(f"- warm-up: {warm['jobs']} processes compiled {warm['warmed']} of {warm['cells']} cells first "
                     f"({warm['elapsed_s']} s of the above, {len(warm['failures'])} failures)")
    lines += [
        "",
        "Each cell runs through `blockfuse bench ops`' runner (on CUDA the median of CUDA-graph replays with the L2"
        " flushed, errors against a float32 reference of the same inputs), then a device copy that moves the same"
        " bytes as the op in that mode is timed in the same run (do_bench, L2 flushed). Fraction: copy ms / op ms"
        " (blockfuse's). Ratio: the faster of torch.compile and Liger divided by blockfuse (above 1: blockfuse is"
        " faster; none where a median is noisy). Cells: `fraction per mode · ratio per mode` over the modes "
        f"{', '.join(MODE_TITLES[m] for m in modes)}; `*`: the op's largest input is below 32 MiB, so the"
        " peers judge it, not the copy. Every provider's time and error is in `sweep.json`.",
        "",
        "## Targets",
        "",
    ]
    checks = targets(cells, meta["device"])
    if meta["device"] != "cuda":
        lines += ["The targets are for CUDA: n/a on the CPU (the counts check the harness).", ""]
    lines += [f"- **{name}**: {text}." for name, text in TARGETS.values()]
    lines += ["", "Each: status, cell-modes passing / evaluated (forward and forward+backward; skipped cells are not "
              "evaluated), the lowest value.", ""]
    lines.append("| op | " + " | ".join(name for name, _ in TARGETS.values()) + " |")
    lines.append("| --- " * (len(TARGETS) + 1) + "|")
    by_op = {(check["op"], check["target"]): check for check in checks}
    for op in ("all", *ops):
        texts = []
        for target in TARGETS:
            check = by_op.get((op, target))
            texts.append("" if check is None else f"**{check['status']}** {check['passed']}/{check['evaluated']}"
                         + (f" (lowest {check['lowest']:.2f})" if check["lowest"] is not None else ""))
        lines.append(f"| {op} | " + " | ".join(texts) + " |")
    lines += ["", "## Worst cells", "", f"The {WORST} lowest cell-modes of each target, every op together:", ""]
    listed = [check for check in checks if check["op"] == "all" and check["worst"]]
    for check in listed:
        worst = ", ".join(f"{w['op']} {shape_text(w['shape'])} {w['mode']} {_number(w['value'], '.2f')}"
                          for w in check["worst"])
        lines.append(f"- {check['name']}: {worst}")
    if not listed:
        lines.append("No cell evaluated.")
    for op in ops:
        mine = [cell for cell in cells if cell["op"] == op]
        rows, columns = _axes(mine)
        by_place = {(cell["row"], cell["column"]): cell for cell in mine}
        row_name, column_name = AXIS_NAMES[mine[0]["grid"]]
        lines += ["", f"## {op}", "", f"![{op}](sweep-{op}.png)", ""]
        lines.append(f"| {row_name} \\ {column_name} | " + " | ".join(columns) + " |")
        lines.append("| --- " * (len(columns) + 1) + "|")
        for row in rows:
            texts = [_cell_text(by_place[(row, column)], modes) if (row, column) in by_place else ""
                     for column in columns]
            lines.append(f"| {row} | " + " | ".join(texts) + " |")
    if skipped:
        lines += ["", "## Skipped cells", ""]
        lines += [f"- {cell['op']} {shape_text(cell['shape'])}: {cell['skipped']}" for cell in skipped]
    failures = [(cell, mode, provider, entry["error"]) for cell in cells for mode, m in cell["modes"].items()
                for provider, entry in m["providers"].items() if entry.get("error")]
    if failures:
        lines += ["", "## Errors", ""]
        lines += [f"- {cell['op']} {shape_text(cell['shape'])} {mode} {provider}: `{error.replace('`', chr(39))}`"
                  for cell, mode, provider, error in failures]
    return "\n".join(lines) + "\n"


def write_json(path: Path, meta: dict, cells: list[dict]) -> None:
    document = {"meta": meta, "targets": targets(cells, meta["device"]), "cells": cells}
    write_document(path, document)


def write_heat_map(path: Path, meta: dict, cells: list[dict], op: str) -> bool:
    """One op's heat maps: rows the widths (or head configurations), columns the rows (or seq); blockfuse's
    fraction of a same-size copy in the top panels, its ratio against the faster peer below, a column of
    panels per mode; every cell annotated. Returns False, quietly, when matplotlib is missing."""
    plt = pyplot()
    mine = [cell for cell in cells if cell["op"] == op]
    if plt is None or not mine:
        return False
    import numpy as np
    from matplotlib.colors import Normalize, TwoSlopeNorm

    modes = list(meta["settings"]["modes"])
    rows, columns = _axes(mine)
    by_place = {(cell["row"], cell["column"]): cell for cell in mine}
    row_name, column_name = AXIS_NAMES[mine[0]["grid"]]
    metrics = (("fraction", "fraction of a same-size copy", Normalize(vmin=0.5, vmax=1.0)),
               ("ratio", "vs the faster of compile, Liger", TwoSlopeNorm(vcenter=1.0, vmin=0.8, vmax=1.25)))
    colors = plt.get_cmap("RdYlGn").with_extremes(bad="#d9d9d9")
    width, height = max(2.8, 1.4 + 0.7 * len(columns)), 1.0 + 0.28 * len(rows)
    figure, axes = plt.subplots(len(metrics), len(modes), figsize=(0.8 + width * len(modes), 0.6 + height * 2),
                                squeeze=False)
    for (key, title, norm), panels in zip(metrics, axes):
        for column_index, (ax, mode) in enumerate(zip(panels, modes)):
            values = np.full((len(rows), len(columns)), np.nan)
            for i, row in enumerate(rows):
                for j, column in enumerate(columns):
                    cell = by_place.get((row, column))
                    entry = cell["modes"].get(mode, {}) if cell else {}
                    value = entry.get(key)
                    if value is not None:
                        values[i, j] = value
                    if cell is None:
                        text = ""
                    elif cell["skipped"]:
                        text = "skip"
                    elif entry.get("providers", {}).get("blockfuse", {}).get("error"):
                        text = "error"
                    else:
                        text = _number(value, ".2f") + ("" if cell["large"] else "*")
                    ax.text(j, i, text, ha="center", va="center", fontsize=7)
            ax.imshow(np.ma.masked_invalid(values), cmap=colors, norm=norm, aspect="auto")
            ax.set_xticks(range(len(columns)))
            ax.set_xticklabels(columns, fontsize=7)
            ax.set_yticks(range(len(rows)))
            ax.set_yticklabels(rows if column_index == 0 else [], fontsize=7)
            ax.set_xlabel(column_name, fontsize=8)
            ax.set_title(f"{MODE_TITLES[mode]}\n{title}", fontsize=8)
        panels[0].set_ylabel(row_name, fontsize=8)
    return save(figure, path, f"{op} ({meta['settings']['dtype']}), {meta['card']}, torch {meta['torch']}, triton "
                              f"{meta['triton']}\n*: largest input below 32 MiB (judged against the peers); grey: none")


def write(out: Path, meta: dict, cells: list[dict], heat_maps: bool = True) -> list[Path]:
    """``sweep.json``, ``sweep.md`` and (``heat_maps``) ``sweep-<op>.png`` for every op; the paths written."""
    written = [out / "sweep.json", out / "sweep.md"]
    write_json(written[0], meta, cells)
    written[1].write_text(markdown(meta, cells))
    if heat_maps:
        for op in dict.fromkeys(cell["op"] for cell in cells):
            if write_heat_map(out / f"sweep-{op}.png", meta, cells, op):
                written.append(out / f"sweep-{op}.png")
    return written


def warm_up(benchmarks: list[OpBenchmark], settings: runner.Settings, grid: Grid, jobs: int, *,
            show_progress: bool = True) -> dict:
    """``runner.warm_up`` of the cells ``run`` measures, in ``jobs`` processes, but those too large for a
    worker's share (1 / ``jobs``) of the device's free memory: they compile cold when measured. Its report
    gains ``too_large``, their count."""
    itemsize = torch.empty((), dtype=runner.DTYPES[settings.dtype]).element_size()
    free = _free_bytes(settings.device)
    share = None if free is None else free // jobs
    cells = [cell for bench in benchmarks if kind_of(bench) for cell in cells_of(bench, grid)]
    fitting = [(cell.bench.name, cell.shape) for cell in cells
               if unfit(cell.bench, cell.shape, itemsize, share) is None]
    report = runner.warm_up(fitting, settings, jobs, show_progress=show_progress)
    return {**report, "too_large": len(cells) - len(fitting)}


def run_and_write(benchmarks: list[OpBenchmark], settings: runner.Settings, grid: Grid, meta: dict, out: Path, *,
                  budget_s: float | None = None, warm_jobs: int = 0,
                  show_progress: bool = True) -> tuple[list[dict], list[Path]]:
    """``run``, writing ``sweep.json`` and ``sweep.md`` after every cell, an op's heat map once its cells are done
    and all of them again at the end; first, with ``warm_jobs``, ``warm_up`` in that many processes (the budget
    counts from the first measurement).
    ``meta`` gains the grid, the warm-up's report (``warm_up``, None without), the compile cache hits and
    misses while measuring (``compile_cache``) and the elapsed time, the warm-up's included. Returns (cells,
    files written)."""
    began = time.perf_counter()
    plan = {bench.name: len(cells_of(bench, grid)) for bench in benchmarks if kind_of(bench)}
    meta["grid"] = {**dataclasses.asdict(grid), "text": describe(grid), "cells": plan, "budget_s": budget_s}
    meta["warm_up"] = warm_up(benchmarks, settings, grid, warm_jobs, show_progress=show_progress) if warm_jobs else None

    drawn = set()

    def update(cells):
        meta["elapsed_s"] = round(time.perf_counter() - began, 1)
        write(out, meta, cells, heat_maps=False)
        # An op's heat map once its last cell is in (a later op's first cell has come), so that a run cut short
        # (a call's time limit) leaves the maps of the ops it finished.
        for op in list(dict.fromkeys(cell["op"] for cell in cells))[:-1]:
            if op not in drawn:
                drawn.add(op)
                write_heat_map(out / f"sweep-{op}.png", meta, cells, op)

    before = runner.cache_counts()
    cells = run(benchmarks, settings, grid, budget_s=budget_s, on_update=update, show_progress=show_progress)
    meta["compile_cache"] = {name: count - before[name] for name, count in runner.cache_counts().items()}
    meta["elapsed_s"] = round(time.perf_counter() - began, 1)
    return cells, write(out, meta, cells)


def plan_text(benchmarks: list[OpBenchmark]) -> str:
    """What ``--sweep --list`` prints: each swept op's grid and cell counts, and the totals."""
    lines = [f"grid: {describe(FULL)}", f"--quick: {describe(QUICK)}, at most {QUICK_BUDGET_S:.0f} s of cells",
             f"without CUDA: {describe(CPU)}", ""]
    swept = [bench for bench in benchmarks if kind_of(bench)]
    for bench in swept:
        lines.append(f"{bench.name:<18} {kind_of(bench):<6} {len(cells_of(bench, FULL)):>4} cells, "
                     f"--quick {len(cells_of(bench, QUICK)):>3}, CPU {len(cells_of(bench, CPU)):>3}")
    counts = [sum(len(cells_of(bench, grid)) for bench in swept) for grid in (FULL, QUICK, CPU)]
    lines.append(f"{'total':<25} {counts[0]:>4} cells, --quick {counts[1]:>3}, CPU {counts[2]:>3}")
    lines.append("not swept: " + (", ".join(b.name for b in benchmarks if not kind_of(b)) or "none"))
    return "\n".join(lines)
