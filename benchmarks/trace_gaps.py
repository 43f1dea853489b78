"""Where a profiled step's GPU time goes: busy, waiting on NCCL, or waiting on the host.

Reads Chrome traces of the torch profiler: ``blockfuse bench model ... --profile``'s
(``trace-<parallel>-<provider>-rank0.json``, one step of rank 0) or ``benchmarks/profile_block.py --trace DIR``'s
(three steps of one GPU; gzipped or not), and prints, per trace: the step's GPU span, the union of its compute
kernels' busy time, the idle gaps over 10 us on the compute streams split into "NCCL" (a collective kernel on
another stream ends within 30 us of the gap's end: the compute stream waited for it) and "host" (nothing to run:
the CPU had not launched it yet), the shorter gaps apart (a kernel starting after the one before it, both queued),
the largest gaps (where in the trace, and the kernel after each), the top host-side ops (outermost CPU ops per
thread), the top kernels, the CUDA runtime calls that make the host wait for the GPU (synchronizations, blocking
copies, cudaMalloc / cudaFree: after one the GPU's queue is empty and its next kernels wait on the host), and with
``--phases KERNEL...`` the kernels cut into phases (e.g. each step's forward and backward) with their spans and
busy times.

    python benchmarks/trace_gaps.py benchmarks/results/distributed/fsdp-traces/*.json [--json OUT.json]

No GPU needed. NOTE: host times come from a profiled step (the profiler's own cost per op inflates them); use
them to rank costs, and the unprofiled step times of the benchmark for the totals.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
from pathlib import Path

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cpu_op", "user_annotation")
BLOCKING = ("Synchronize", "cudaMalloc", "cudaFree", "cudaMemcpy", "cudaHostAlloc")  # cudaMemcpyAsync: listed too
WAIT_SLACK_US = 30.0
MIN_GAP_US = 10.0


def is_collective(event: dict) -> bool:
    return "nccl" in event["name"].lower()


def busy_union(intervals: list[tuple[float, float]]) -> float:
    """Microseconds covered by the union of (start, end) intervals."""
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    return total + (current[1] - current[0] if current else 0.0)


def outermost_host_ops(events: list[dict]) -> tuple[collections.Counter, collections.Counter]:
    """Total microseconds and count of each CPU op that no other op on its thread contains."""
    by_thread = collections.defaultdict(list)
    for event in events:
        by_thread[event["tid"]].append(event)
    time, count = collections.Counter(), collections.Counter()
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list[float] = []
        for event in thread_events:
            while open_ends and open_ends[-1] <= event["ts"]:
                open_ends.pop()
            if not open_ends:
                time[event["name"]] += event["dur"]
                count[event["name"]] += 1
            open_ends.append(event["ts"] + event["dur"])
    return time, count


def phases(compute: list[dict], marks: list[str]) -> list[dict]:
    """The kernels (sorted by start) cut into phases: a phase begins at a kernel whose name starts with one of
    ``marks`` other than the current phase's (e.g. the forward's first kernel and the backward's: the steps'
    forwards and backwards alternate); each phase's span, busy time and kernel count. Kernels before the first
    mark are a phase of their own, named ""."""
    out, current = [], None
    for event in compute:
        mark = next((m for m in marks if event["name"].startswith(m)), None)
        if current is None or (mark is not None and mark != current["mark"]):
            current = {"mark": mark or "", "begin": event["ts"], "end": event["ts"], "intervals": []}
            out.append(current)
        current["end"] = max(current["end"], event["ts"] + event["dur"])
        current["intervals"].append((event["ts"], event["ts"] + event["dur"]))
    return [{"mark": p["mark"], "span_ms": (p["end"] - p["begin"]) / 1e3,
             "busy_ms": busy_union(p["intervals"]) / 1e3, "kernels": len(p["intervals"])} for p in out]


def analyse(path: Path, top: int = 8, marks: tuple[str, ...] = ()) -> dict:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    events = [e for e in json.loads(text)["traceEvents"] if e.get("ph") == "X"]
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    compute = sorted((e for e in gpu if not is_collective(e)), key=lambda e: e["ts"])
    collectives = [e for e in gpu if is_collective(e)]
    begin, end = min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu)
    waits = {"nccl": 0.0, "host": 0.0}
    gaps = []
    last_end = compute[0]["ts"] + compute[0]["dur"]
    short = [0, 0.0]  # gaps up to MIN_GAP_US: count and microseconds (a kernel after the one before it, queued)
    for event in compute[1:]:
        gap = event["ts"] - last_end
        if 0 < gap <= MIN_GAP_US:
            short[0] += 1
            short[1] += gap
        if gap > MIN_GAP_US:
            on_nccl = any(c["ts"] < event["ts"] and abs(c["ts"] + c["dur"] - event["ts"]) < WAIT_SLACK_US
                          for c in collectives)
            kind = "nccl" if on_nccl else "host"
            waits[kind] += gap
            gaps.append({"us": gap, "at_ms": (last_end - begin) / 1e3, "waits_on": kind, "before": event["name"][:80]})
        last_end = max(last_end, event["ts"] + event["dur"])
    host_time, host_count = outermost_host_ops([e for e in events if e.get("cat") in HOST_CATEGORIES])
    blocking_us, blocking_count = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("cat") == "cuda_runtime" and any(word in event["name"] for word in BLOCKING):
            blocking_us[event["name"]] += event["dur"]
            blocking_count[event["name"]] += 1
    kernels = collections.Counter()
    for event in compute:
        kernels[event["name"][:80]] += event["dur"]
    return {
        "trace": path.name,
        "span_ms": (end - begin) / 1e3,
        "compute_busy_ms": busy_union([(e["ts"], e["ts"] + e["dur"]) for e in compute]) / 1e3,
        "collective_ms": sum(e["dur"] for e in collectives) / 1e3,
        "idle_waiting_on_nccl_ms": waits["nccl"] / 1e3,
        "idle_waiting_on_host_ms": waits["host"] / 1e3,
        "short_gaps": short[0],
        "short_gaps_ms": short[1] / 1e3,
        "largest_gaps": sorted(gaps, key=lambda g: -g["us"])[:top],
        "host_ops": [{"name": name[:80], "ms": us / 1e3, "count": host_count[name]}
                     for name, us in host_time.most_common(top)],
        "kernels": [{"name": name, "ms": us / 1e3} for name, us in kernels.most_common(top)],
        "phases": phases(compute, list(marks)) if marks else [],
        "blocking_calls": [{"name": name, "count": blocking_count[name], "ms": us / 1e3}
                           for name, us in blocking_us.most_common()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the analyses here")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--phases", nargs="+", default=(), metavar="KERNEL",
                        help="cut the kernels into phases, each beginning at a kernel named KERNEL... (its name's "
                             "start): e.g. the forward's first kernel and the backward's")
    args = parser.parse_args()
    results = [analyse(path, args.top, tuple(args.phases)) for path in args.traces]
    for r in results:
        print(f"== {r['trace']}: GPU span {r['span_ms']:.1f} ms, compute busy {r['compute_busy_ms']:.1f} ms, "
              f"NCCL kernels {r['collective_ms']:.1f} ms; compute idle waiting on NCCL "
              f"{r['idle_waiting_on_nccl_ms']:.1f} ms, on the host {r['idle_waiting_on_host_ms']:.1f} ms; "
              f"{r['short_gaps']} gaps of {MIN_GAP_US:.0f} us or less between queued kernels, "
              f"{r['short_gaps_ms']:.2f} ms")
        print("   host (outermost ops): " + "; ".join(f"{o['name']} {o['ms']:.1f} ms x{o['count']}"
                                                    for o in r["host_ops"]))
        print("   largest gaps: " + "; ".join(f"{g['us']:.0f} us at {g['at_ms']:.1f} ms before {g['before'][:40]}"
                                              for g in r["largest_gaps"]))
        for phase in r["phases"]:
            print(f"   phase {phase['mark'] or '(before the first mark)'}: span {phase['span_ms']:.2f} ms, "
                  f"busy {phase['busy_ms']:.2f} ms, {phase['kernels']} kernels")
        print("   runtime calls that wait: " + ("; ".join(f"{b['name']} x{b['count']} {b['ms']:.2f} ms"
                                                          for b in r["blocking_calls"]) or "none"))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
