"""The op benchmark's report (``blockfuse bench ops``): its targets, ops.json, ops.md, ops.png and the table
printed at the end; written with ``bench.writer``."""

from __future__ import annotations

from pathlib import Path

from blockfuse.analyze.ceilings import GEMM_SIZE
from blockfuse.bench.spec import MODES, PROVIDERS
from blockfuse.bench.writer import (NOISE_NOTE, NOISE_RATIO, card_text, checks_lines, noisy, pyplot, save, shape_text,
                                    spread_text, versions_title, write_json as write_document)

MODE_TITLES = {"fwd": "forward", "bwd": "backward", "fwdbwd": "forward+backward"}
PEERS = ("compile", "liger", "cce")  # blockfuse must be at least as fast as the fastest of these an op declares
TARGET_COPY_FRACTION = {"fwd": 0.90, "fwdbwd": 0.80}  # at each op's largest shape (the most bytes)
SMALL_SHAPE = [2048, 1024]
# Ops with a speed-up target of their own: (mode, peer, at least this peer's ms / blockfuse's) at the
# op's largest shape. RoPE forward+backward against torch.compile (issue 3).
SPEEDUP_TARGETS = {"rotary": ("fwdbwd", "compile", 1.2)}


def _index(records) -> dict:
    return {(r["op"], tuple(r["shape"]), r["mode"], r["provider"]): r for r in records}


def _ops(records) -> list[str]:
    return list(dict.fromkeys(r["op"] for r in records))


def _shapes(records, op) -> list[tuple]:
    return list(dict.fromkeys(tuple(r["shape"]) for r in records if r["op"] == op))


def _modes(records, op) -> list[str]:
    present = {r["mode"] for r in records if r["op"] == op}
    return [m for m in MODES if m in present]


def _providers(records, op) -> list[str]:
    present = {r["provider"] for r in records if r["op"] == op}
    return [p for p in PROVIDERS if p in present] + sorted(present - set(PROVIDERS))


def _gemm_bound(records, op) -> bool:
    """True for an op that declares FLOPs (its records carry ``flops``): rated against the GEMM ceiling."""
    return any(r.get("flops") is not None for r in records if r["op"] == op)


def _gemm_ceiling(records) -> float | None:
    """The large GEMM's TFLOP/s measured in the run (records of ops that declare FLOPs carry it), or None."""
    return next((r["gemm_ceiling_tflops"] for r in records if r.get("gemm_ceiling_tflops")), None)


def _rate(record) -> str:
    """A GEMM-bound record's TFLOP/s, with its fraction of the GEMM ceiling where measured."""
    text = f"{record['tflops']:.3g} TFLOP/s"
    return text + (f" ({record['frac_gemm']:.2f} of GEMM)" if record.get("frac_gemm") is not None else "")


def _ms(record, key: str = "ms") -> float | None:
    return record[key] if record is not None and record.get("error") is None and record.get(key) else None


def ratio_to_peers(index, op, shape, mode) -> tuple[float | None, str | None]:
    """(faster peer's ms / blockfuse ms, that peer): above 1 means blockfuse is faster. None when any of
    the medians is noisy (``noisy``)."""
    records = [index.get((op, shape, mode, p)) for p in ("blockfuse", *PEERS)]
    if any(noisy(r) for r in records):
        return None, None
    mine = _ms(index.get((op, shape, mode, "blockfuse")))
    peers = [(ms, p) for p in PEERS if (ms := _ms(index.get((op, shape, mode, p)))) is not None]
    if mine is None or not peers:
        return None, None
    best_ms, best = min(peers)
    return best_ms / mine, best


# ---------------------------------------------------------------- targets


def _largest_shape(records, op) -> tuple:
    """The op's shape that moves the most bytes (the blockfuse forward's), else its first shape."""
    moved = {tuple(r["shape"]): r.get("bytes") or 0 for r in records
             if r["op"] == op and r["provider"] == "blockfuse" and r["mode"] == "fwd"}
    shapes = _shapes(records, op)
    return max(shapes, key=lambda shape: moved.get(shape, 0)) if moved else shapes[0]


def _speedup_target(index, records, op, largest, mode, peer, floor) -> dict:
    """blockfuse against one peer in one mode: met at ``floor`` times the peer's speed at the largest
    shape; the text gives every shape's ratio."""
    ratios = {}
    for shape in _shapes(records, op):
        mine, theirs = (_ms(index.get((op, shape, mode, p))) for p in ("blockfuse", peer))
        if mine and theirs:
            ratios[shape] = theirs / mine
    value = ratios.get(largest)
    text = f"{op} {MODE_TITLES[mode]} vs {peer}, target >= {floor:.2f}x at the largest shape: "
    text += ", ".join(f"{shape_text(shape)} {ratio:.2f}x" for shape, ratio in ratios.items()) or "n/a"
    status = "n/a" if value is None else ("met" if value >= floor else "missed")
    return {"op": op, "target": f"{mode}_vs_{peer}", "status": status, "value": value, "text": text}


def targets(records: list[dict], device: str) -> list[dict]:
    """The issue's targets for blockfuse, one entry per op and target: met, missed or n/a.
    None on the CPU: the targets are about CUDA speed."""
    if device != "cuda":
        return []
    index = _index(records)
    out = []
    for op in _ops(records):
        largest = _largest_shape(records, op)
        # A GEMM-bound op's bound is the GEMM, not the copy bandwidth: no copy-fraction target.
        for mode, floor in ({} if _gemm_bound(records, op) else TARGET_COPY_FRACTION).items():
            record = index.get((op, largest, mode, "blockfuse"))
            fraction = record.get("frac_copy") if record is not None and record.get("error") is None else None
            text = f"{op} {shape_text(largest)} (largest) {MODE_TITLES[mode]}: blockfuse at "
            text += (
                f"{fraction:.2f} of copy bandwidth (target >= {floor:.2f})"
                if fraction is not None
                else "n/a of copy bandwidth"
            )
            status = "n/a" if fraction is None else ("met" if fraction >= floor else "missed")
            out.append(
                {"op": op, "target": f"copy_fraction_{mode}", "status": status, "value": fraction, "text": text}
            )
        if op in SPEEDUP_TARGETS:
            out.append(_speedup_target(index, records, op, largest, *SPEEDUP_TARGETS[op]))

        ratios, missed = [], []
        for shape in _shapes(records, op):
            for mode in _modes(records, op):
                ratio, peer = ratio_to_peers(index, op, shape, mode)
                if ratio is not None:
                    ratios.append(ratio)
                    if ratio < 1.0:
                        missed.append(f"{shape_text(shape)} {mode} {ratio:.2f}x of {peer}")
        worst = min(ratios, default=None)
        text = f"{op} vs the fastest of torch.compile, Liger and CCE (those run), every shape and mode: "
        if not ratios:
            status, text = "n/a", text + "n/a"
        elif missed:
            status, text = "missed", text + f"slower in {len(missed)}/{len(ratios)}: " + ", ".join(missed)
        else:
            status, text = "met", text + f"at least as fast in {len(ratios)}/{len(ratios)} (closest {worst:.2f}x)"
        out.append({"op": op, "target": "vs_peers", "status": status, "value": worst, "text": text})

        # Launch overhead counts here: the eager-call time (do_bench), not the graph replay.
        if tuple(SMALL_SHAPE) not in _shapes(records, op):
            continue
        mine = _ms(index.get((op, tuple(SMALL_SHAPE), "fwdbwd", "blockfuse")), "ms_eager")
        theirs = _ms(index.get((op, tuple(SMALL_SHAPE), "fwdbwd", "compile")), "ms_eager")
        ratio = theirs / mine if mine and theirs else None
        text = f"{op} {shape_text(SMALL_SHAPE)} forward+backward vs torch.compile, host overhead included: "
        text += f"{ratio:.2f}x (target >= 1.00)" if ratio is not None else "n/a"
        status = "n/a" if ratio is None else ("met" if ratio >= 1.0 else "missed")
        out.append({"op": op, "target": "small_fwdbwd_vs_compile", "status": status, "value": ratio, "text": text})
    return out


# ---------------------------------------------------------------- files


def write_json(path: Path, meta: dict, copy: dict | None, records: list[dict]) -> None:
    write_document(path, {"meta": meta, "copy": copy, "targets": targets(records, meta["device"]),
                          "records": records})


def _cell(record, copy_known: bool) -> str:
    if record is None:
        return ""
    if record.get("error"):
        return "error"
    parts = [f"{record['ms']:.4g} ms"]
    if record.get("tflops") is not None:
        parts.append(_rate(record))
    else:
        parts.append(
            f"{record['frac_copy']:.2f}"
            if copy_known and record.get("frac_copy") is not None
            else f"{record['gbps']:.3g} GB/s"
        )
    if noisy(record):
        parts.append(spread_text(record))
    error = record.get("rel_err_out") if record["mode"] == "fwd" else record.get("rel_err_grad")
    parts.append(f"err {error:.1e}" if isinstance(error, float) else "err n/a")
    if record.get("peak_mib") is not None:
        parts.append(f"{record['peak_mib']:.0f} MiB")
    return " · ".join(parts)


def markdown(meta: dict, copy: dict | None, records: list[dict], with_targets: bool = True) -> str:
    """ops.md: versions, command, ceilings, how it was timed, (``with_targets``) the project's targets, a
    table per op and mode, the errors."""
    index = _index(records)
    copy_known = copy is not None
    card = f"- card: {card_text(meta)}"
    ceiling = "not measured (no CUDA)"
    if copy_known:
        ceiling = (
            f"{copy['gbps']:.0f} GB/s ({copy['bytes'] / 2**30:.0f} GiB read + written in {copy['ms']:.3f} ms)"
        )
    lines = [
        "# blockfuse op benchmarks",
        "",
        card,
        f"- torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, "
        f"Liger-Kernel {meta['liger_kernel']}, "
        + (f"Cut Cross-Entropy {meta['cut_cross_entropy']}, " if meta.get("cut_cross_entropy") else "")
        + f"python {meta['python']}",
        f"- blockfuse path: {meta['blockfuse_implementation']}, commit {meta.get('git_commit')} (source digest "
        f"{meta.get('source_digest')}: `python -c 'from blockfuse.bench.runner import source_digest; "
        f"print(source_digest())'`); date {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- device-to-device copy: {ceiling}",
    ]
    if _gemm_ceiling(records):
        lines.append(f"- GEMM: {_gemm_ceiling(records):.0f} TFLOP/s ({GEMM_SIZE}^3 matmul in the benchmark dtype, "
                     "measured in the same run)")
    lines += [
        "",
        "Timing: on CUDA, the median of CUDA-graph replays with the L2 cache flushed before each call"
        " (the kernels' own time, without host launch overhead); the eager-call time, host overhead"
        " included (median of 9 loops of 50 back-to-back calls; backward only: do_bench after a fresh"
        " forward), is `ms_eager` in the JSON and is what the small-shape target uses. "
        "Each cell: median ms · "
        + ("fraction of the copy bandwidth" if copy_known else "GB/s")
        + " · relative error against a float32 reference of the same inputs, ||out - ref|| / ||ref|| in float64"
        " (forward: the outputs; backward and forward+backward: the gradient of the op's main input, x for most)"
        " · peak memory above the inputs."
        " Bytes: each input read once, each output written once (formulas in `blockfuse/bench/`)."
        " A GEMM-bound op (one that declares FLOPs: its GEMMs' 2 FLOPs per multiply-add) shows TFLOP/s instead,"
        " with its fraction of the GEMM's TFLOP/s above where measured (CUDA)."
        " Last column: the fastest of torch.compile, Liger and Cut Cross-Entropy (those run) divided by blockfuse"
        " (above 1: blockfuse is faster).",
    ]
    if with_targets:
        lines += ["", "## Targets", "", *checks_lines(targets(records, meta["device"]),
                                                    "The targets are for CUDA: n/a on the CPU.")]
    if any(noisy(r) for r in records):
        lines += ["", NOISE_NOTE]
    for op in _ops(records):
        providers = _providers(records, op)
        for mode in _modes(records, op):
            dtype = next(r["dtype"] for r in records if r["op"] == op)
            lines += ["", f"## {op}, {MODE_TITLES[mode]} ({dtype})", ""]
            lines.append("| shape | " + " | ".join(providers) + " | blockfuse vs best peer |")
            lines.append("| --- " * (len(providers) + 2) + "|")
            for shape in _shapes(records, op):
                cells = [_cell(index.get((op, shape, mode, p)), copy_known) for p in providers]
                ratio, peer = ratio_to_peers(index, op, shape, mode)
                cells.append(f"{ratio:.2f}x ({peer})" if ratio is not None else "")
                lines.append(f"| {shape_text(shape)} | " + " | ".join(cells) + " |")
    failures = [r for r in records if r.get("error")]
    if failures:
        lines += ["", "## Errors", ""]
        for r in failures:
            message = r["error"].replace("`", "'")
            lines.append(f"- {r['op']} {shape_text(r['shape'])} {r['mode']} {r['provider']}: `{message}`")
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, meta: dict, copy: dict | None, records: list[dict], with_targets: bool = True) -> None:
    path.write_text(markdown(meta, copy, records, with_targets))


def write_plot(path: Path, meta: dict, copy: dict | None, records: list[dict]) -> bool:
    """Fraction of the copy bandwidth (GB/s without CUDA) per provider, one panel per op and mode; for a
    GEMM-bound op, the fraction of the GEMM's TFLOP/s (TFLOP/s without CUDA). Returns False, quietly, when
    matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    index = _index(records)
    ops = _ops(records)
    modes = [m for m in MODES if any(r["mode"] == m for r in records)]
    if not ops or not modes:
        return False
    # One color per provider across every panel, also where a provider has no such op.
    everyone = list(dict.fromkeys(p for op in ops for p in _providers(records, op)))
    colors = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(everyone)}
    figure, axes = plt.subplots(len(ops), len(modes), figsize=(4.2 * len(modes), 3.0 * len(ops)), squeeze=False)
    for row, op in enumerate(ops):
        shapes, providers = _shapes(records, op), _providers(records, op)
        width = 0.8 / max(len(providers), 1)
        if _gemm_bound(records, op):  # against the GEMM ceiling where measured, else TFLOP/s
            fraction = _gemm_ceiling(records) is not None
            key, label = ("frac_gemm", "fraction of GEMM TFLOP/s") if fraction else ("tflops", "TFLOP/s")
        else:
            fraction = copy is not None
            key, label = ("frac_copy", "fraction of copy bandwidth") if fraction else ("gbps", "GB/s")
        for column, mode in enumerate(modes):
            ax = axes[row][column]
            for k, provider in enumerate(providers):
                values = []
                for shape in shapes:
                    record = index.get((op, shape, mode, provider))
                    values.append(record.get(key) or 0.0 if record is not None else 0.0)
                ax.bar([i + k * width for i in range(len(shapes))], values, width, label=provider,
                       color=colors[provider])
            if fraction:
                ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            ax.set_xticks([i + width * (len(providers) - 1) / 2 for i in range(len(shapes))])
            ax.set_xticklabels([shape_text(s) for s in shapes], fontsize=7)
            ax.set_title(f"{op} {MODE_TITLES[mode]}", fontsize=9)
            ax.set_ylabel(label, fontsize=8)
    from matplotlib.patches import Patch

    figure.legend(handles=[Patch(color=colors[p], label=p) for p in everyone], loc="upper right",
                  ncol=len(everyone), fontsize=8, frameon=False)
    return save(figure, path, versions_title(meta), rect=(0, 0, 1, 0.97))


def print_table(records: list[dict], copy: dict | None) -> None:
    """The compact table printed at the end of a run: median ms (fraction of copy) per provider."""
    from rich.console import Console
    from rich.table import Table

    index = _index(records)
    providers = [p for p in PROVIDERS if any(r["provider"] == p for r in records)]
    table = Table(title="median ms (fraction of copy bandwidth)" if copy else "median ms (GB/s)")
    for column in ("op", "mode", "shape", *providers, "vs best peer"):
        table.add_column(column, justify="left" if column in ("op", "mode", "shape") else "right")
    for op in _ops(records):
        for mode in _modes(records, op):
            for shape in _shapes(records, op):
                cells = []
                for provider in providers:
                    record = index.get((op, shape, mode, provider))
                    if record is None:
                        cells.append("")
                    elif record.get("error"):
                        cells.append("error")
                    elif noisy(record):
                        cells.append(f"{record['ms']:.4g} (noisy)")
                    elif record.get("frac_gemm") is not None:
                        cells.append(f"{record['ms']:.4g} ({record['frac_gemm']:.2f} GEMM)")
                    elif record.get("tflops") is not None:
                        cells.append(f"{record['ms']:.4g} ({record['tflops']:.3g} TFLOP/s)")
                    elif copy and record.get("frac_copy") is not None:
                        cells.append(f"{record['ms']:.4g} ({record['frac_copy']:.2f})")
                    else:
                        cells.append(f"{record['ms']:.4g} ({record['gbps']:.3g})")
                ratio, _ = ratio_to_peers(index, op, shape, mode)
                table.add_row(op, mode, shape_text(shape), *cells, f"{ratio:.2f}x" if ratio else "")
    Console(width=max(Console().width, 150)).print(table)
    if any(r.get("flops") is not None for r in records):
        print("GEMM-bound ops: median ms (fraction of the GEMM's TFLOP/s, or TFLOP/s without CUDA)")
    if any(noisy(r) for r in records):
        print(f"noisy: p80 more than {NOISE_RATIO:g}x p20, the median is not a reliable figure (no ratio given)")
