"""te-4layer's fused FP8 training step ("delayed" layers), one point a process, every call of this folder, against
the bf16 compile baseline and the 1.35x target (the baseline's time / 1.35). Reads the bench block JSONs here:

    python benchmarks/results/fp8/17-targets-2026-12-02-h200/plot_processes.py     (writes processes.png beside it)
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
# (folder, label, the runs of the delayed fused step in the order they ran, that call's bf16 compile runs)
CALLS = (
    ("targets", "targets/ (72f1d9e)", ["te-delayed"], ["te-bf16"]),
    ("ab-c737e11", "ab-c737e11/: new", ["te-new-1", "te-new-2", "te-new-3"], []),
    ("ab-c737e11", "ab-c737e11/: old (c737e11)", ["te-old-1", "te-old-2", "te-old-3"], []),
    ("ab-pdl", "ab-pdl/: new, PDL", ["te-pdl-1", "te-pdl-2"], []),
    ("ab-pdl", "ab-pdl/: new, no PDL", ["te-nopdl-1", "te-nopdl-2"], []),
    ("ab-pdl", "ab-pdl/: old (c737e11)", ["te-old-1", "te-old-2"], []),
    ("te-rounds", "te-rounds/ (72f1d9e)", ["delayed-1", "delayed-2", "delayed-3"], ["bf16-1", "bf16-2"]),
)


def training_ms(run: Path) -> float:
    """The fwd+bwd median of the one provider in a bench block JSON folder."""
    (path,) = run.glob("*.json")
    records = [r for r in json.loads(path.read_text())["records"] if r.get("mode") == "fwdbwd"]
    return float(records[0]["ms"])


def main() -> None:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    baselines = []
    for i, (folder, label, runs, bf16) in enumerate(CALLS):
        times = [training_ms(HERE / folder / run) for run in runs]
        ax.scatter([i] * len(times), times, s=40, zorder=3)
        for k, t in enumerate(times):
            ax.annotate(f"{t:.1f}", (i, t), textcoords="offset points", xytext=(8, -3 + 9 * (k % 2)), fontsize=7)
        baselines += [training_ms(HERE / folder / run) for run in bf16]
    bf16 = sum(baselines) / len(baselines)
    ax.axhline(bf16 / 1.35, color="tab:red", linestyle="--", label=f"1.35x bf16 compile ({bf16:.1f} ms / 1.35)")
    ax.axhline(21.45, color="tab:gray", linestyle=":", label="the step's kernels (profiler, 21.45 ms)")
    ax.set_xticks(range(len(CALLS)), [label for _, label, _, _ in CALLS], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("training step, ms (median of one process)")
    ax.set_title("te-4layer fused FP8 (delayed) step by process, one H200, torch 2.11, triton 3.6", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(HERE / "processes.png", dpi=120)
    print(f"wrote {HERE / 'processes.png'} (bf16 compile {bf16:.2f} ms, the mean of {len(baselines)} runs)")


if __name__ == "__main__":
    main()
