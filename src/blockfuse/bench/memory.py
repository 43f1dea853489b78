"""What is alive in CUDA memory during one call, grouped by the line that allocated it: at the call's peak and
after it. Records the caching allocator's history (``torch.cuda.memory._record_memory_history``) around the
call and replays the trace. Used by ``benchmarks/memory_block.py`` (one block) and ``blockfuse bench model
--parallel ... --memory-snapshot`` (a sharded training step)."""

from __future__ import annotations

import gc
import linecache
from collections import defaultdict
from typing import Callable

import torch


def release_provider(cuda: bool) -> None:
    """Frees what a benchmarked provider left behind before the next one is built: Dynamo's caches (its graphs,
    CUDA-graph pools, and the compiled modules), then the cyclic collector (a module, its hooks and an FSDP2
    state refer to each other: only the collector frees them, and it may not run on its own for a while), then
    the allocator's cached blocks. The caller drops its own references first."""
    torch._dynamo.reset()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def _frame(frames: list[dict]) -> str:
    """The innermost frame in blockfuse or torch.nn / torch.distributed / autograd code, or in Inductor's generated
    code (with its text: the buffer it allocates): the line responsible."""
    for frame in frames:
        name = frame.get("filename", "")
        if "torchinductor" in name:
            text = linecache.getline(name, frame.get("line", 0)).strip()[:90]
            return f"inductor {name.split('/')[-1]}:{frame.get('line')} {text}"
        if "blockfuse" in name or "torch/nn/modules" in name or "torch/distributed" in name or "torch/optim" in name:
            return f"{name.split('/')[-1]}:{frame.get('line')} {frame.get('name')}"
    return "(autograd engine / C++)" if frames else "(no stack)"


def replay(events: list[dict]) -> tuple[int, dict, int, dict]:
    """``(peak bytes, {address: (size, where)} alive at the peak, bytes alive at the end, alive at the end)`` of
    the allocator's ``alloc`` / ``free_completed`` events of one call, counted from what the call allocated
    (memory allocated before it is not in the trace)."""
    live: dict[int, tuple[int, str]] = {}
    current = peak = 0
    at_peak: dict[int, tuple[int, str]] = {}
    for event in events:
        if event["action"] == "alloc":
            live[event["addr"]] = (event["size"], _frame(event.get("frames", [])))
            current += event["size"]
        elif event["action"] == "free_completed" and event["addr"] in live:
            current -= live.pop(event["addr"])[0]
        if current > peak:
            peak, at_peak = current, dict(live)
    return peak, at_peak, current, live


def grouped(allocations: dict, top: int) -> list[dict]:
    """The ``top`` lines by bytes: ``[{"mib", "count", "where"}]``."""
    groups: dict[str, list[int]] = defaultdict(list)
    for size, where in allocations.values():
        groups[where].append(size)
    ordered = sorted(groups.items(), key=lambda item: -sum(item[1]))[:top]
    return [{"mib": sum(sizes) / 2**20, "count": len(sizes), "where": where} for where, sizes in ordered]


def _block_frames(block: dict) -> list[dict]:
    """The allocation stack of one block of a snapshot's segments (``frames``, or older torch's ``history``)."""
    if block.get("frames"):
        return block["frames"]
    history = block.get("history") or []
    return history[-1].get("frames", []) if history else []


def live_blocks(snapshot: dict, device: int) -> dict:
    """``{(segment, index): (size, where)}`` of every allocated block of ``device`` in an allocator snapshot
    (``torch.cuda.memory._snapshot()``), where: the line that allocated it (:func:`_frame`; "(no stack)" for a
    block allocated while the history was off)."""
    blocks = {}
    for segment in snapshot.get("segments", []):
        if segment.get("device", device) != device:
            continue
        for index, block in enumerate(segment.get("blocks", [])):
            if block.get("state") == "active_allocated":
                blocks[(segment.get("address", id(segment)), index)] = (block.get("size", 0),
                                                                         _frame(_block_frames(block)))
    return blocks


RECORD_ENTRIES = 2_000_000  # the trace's ring buffer: a 1B model's training steps make ~10^4 events each


def start_recording() -> None:
    """Records the allocator's history from now on (every allocation's stack), for a later :func:`snapshot_call`
    with ``recording=True`` to say where memory alive long before its call came from. NOTE: recording costs host
    time at every allocation: steps timed while it is on are not comparable with others."""
    torch.cuda.memory._record_memory_history(max_entries=RECORD_ENTRIES)


def snapshot_call(call: Callable[[], object], top: int = 12, recording: bool = False) -> dict:
    """Runs ``call()`` once with the allocator's history recorded (CUDA): ``{"before_mib", "peak_mib" (above
    before), "at_peak", "after_mib" (what the call allocated and left alive), "after", "alive_mib" (all memory
    allocated when it returns), "alive"}`` (``at_peak`` / ``after`` / ``alive``: :func:`grouped`). ``recording``: the
    history has been on since :func:`start_recording` (then ``alive`` names the lines of allocations made long
    before the call too; else those show as "(no stack)"). Stops the recording."""
    if not torch.cuda.is_available():
        raise RuntimeError("a memory snapshot records the CUDA caching allocator: needs CUDA")
    device = torch.cuda.current_device()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if recording:
        traces = torch.cuda.memory._snapshot()["device_traces"]
        skip = len(traces[device]) if device < len(traces) else 0
    else:
        start_recording()
        skip = 0
    try:
        call()
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    traces = snapshot["device_traces"]
    events = [e for e in (traces[device][skip:] if device < len(traces) else [])
              if e["action"] in ("alloc", "free_completed")]
    peak, at_peak, after, alive = replay(events)
    everything = live_blocks(snapshot, device)
    return {"before_mib": before / 2**20, "peak_mib": peak / 2**20, "at_peak": grouped(at_peak, top),
            "after_mib": after / 2**20, "after": grouped(alive, top),
            "alive_mib": sum(size for size, _ in everything.values()) / 2**20, "alive": grouped(everything, top)}


def snapshot_lines(label: str, snapshot: dict) -> list[str]:
    """Markdown bullet lines of :func:`snapshot_call`'s result."""
    lines = [f"- {label}: peak {snapshot['peak_mib']:.0f} MiB above the {snapshot['before_mib']:.0f} MiB allocated "
             f"before; {snapshot['after_mib']:.0f} MiB of what the step allocated still alive after it"]
    lines.append(f"  - all memory allocated after the step: {snapshot['alive_mib']:.0f} MiB")
    for title, key in (("at the peak", "at_peak"), ("the step's, alive after it", "after"),
                       ("everything alive after the step", "alive")):
        if snapshot[key]:
            lines.append(f"  - {title}: " + "; ".join(f"{g['mib']:.0f} MiB {g['count']}x `{g['where']}`"
                                                      for g in snapshot[key][:6]))
    return lines
