"""The roofline plot: every timed kernel as a point against the ceilings measured in the same run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from blockfuse.analyze.ceilings import rates
from blockfuse.analyze.png import write_png

if TYPE_CHECKING:  # report.py imports this module to write a Report
    from blockfuse.analyze.report import Report

MARKERS = {"inference": "o", "forward": "s", "backward": "^"}


def points(report: Report) -> list[dict]:
    """One point per timed launch: intensity (FLOP/byte), TFLOP/s, GB/s, and what it is."""
    result = []
    descriptions = {(k.module, k.name): k.description for k in report.kernels}
    phases = {m["id"]: m["kind"] for m in report.modules}
    for launch in report.launches:
        if not launch.time_us or not launch.bytes:
            continue
        measured = rates(launch.bytes, launch.flops, launch.time_us, report.ceilings)
        if launch.category == "gemm":
            label = f"GEMM ({launch.target})"
        elif launch.category == "attention":
            label = f"attention ({launch.attention})"
        else:
            label = descriptions.get((launch.module, launch.target)) or launch.target
        label = label.lstrip("_")  # matplotlib hides legend labels that start with "_"
        result.append({"phase": phases.get(launch.module, "?"), "label": label, "category": launch.category,
                       "intensity": (launch.flops or 0.0) / launch.bytes, "tflops": measured["tflops"],
                       "gbps": measured["gbps"], "bytes": launch.bytes})
    return result


def write_roofline(report: Report, path: str | Path) -> bool:
    """Write the PNG; False (and nothing written) without timings, ceilings or matplotlib."""
    found = points(report)
    if not found or not report.ceilings:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    copy_gbps = report.ceilings["copy"]["gbps"]
    peak = report.ceilings["gemm"]["tflops"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    colors = {}
    palette = plt.get_cmap("tab10")

    def color(label: str):
        return colors.setdefault(label, palette(len(colors) % 10))

    compute = [p for p in found if p["tflops"]]
    memory = [p for p in found if not p["tflops"]]
    lowest = min([p["intensity"] for p in compute] + [1.0]) / 4
    highest = max([p["intensity"] for p in compute] + [peak * 1e3 / copy_gbps]) * 4
    xs = [lowest, peak * 1e3 / copy_gbps, highest]
    left.plot(xs, [min(peak, x * copy_gbps / 1e3) for x in xs], color="black", linewidth=1)
    left.annotate(f"copy {copy_gbps:.0f} GB/s", (xs[0], xs[0] * copy_gbps / 1e3), fontsize=7)
    left.annotate(f"GEMM {peak:.0f} TFLOP/s", (xs[1], peak), fontsize=7, va="bottom")
    for p in compute:
        left.scatter(p["intensity"], p["tflops"], marker=MARKERS.get(p["phase"], "o"), color=color(p["label"]),
                     label=p["label"], s=28)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("FLOP per byte moved")
    left.set_ylabel("TFLOP/s")
    left.set_title("kernels with a FLOP count (GEMMs, attention)", fontsize=9)
    for p in memory:
        right.scatter(p["bytes"] / 1e6, p["gbps"], marker=MARKERS.get(p["phase"], "o"), color=color(p["label"]),
                      label=p["label"], s=28)
    right.axhline(copy_gbps, color="black", linewidth=1, linestyle="--")
    right.text(0.01, copy_gbps, f"copy {copy_gbps:.0f} GB/s", fontsize=7, va="bottom",
               transform=right.get_yaxis_transform())
    right.set_xscale("log")
    right.set_xlabel("MB moved per launch")
    right.set_ylabel("GB/s")
    right.set_ylim(0, copy_gbps * 1.15)
    right.set_title("memory-bound kernels: achieved bandwidth", fontsize=9)
    handles, labels = [], []
    for axis in (left, right):
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    meta = report.meta
    steps = ", ".join(f"{marker} {name}" for name, marker in MARKERS.items() if name in report.passes)
    figure.suptitle(f"{meta['target']} {meta['dtype']} on {meta['card']}, torch {meta['torch']}, "
                    f"mode {meta['mode']} (markers: {steps})", fontsize=10)
    figure.tight_layout(rect=(0, 0.12, 1, 0.95))
    write_png(figure, path)
    plt.close(figure)
    return True

