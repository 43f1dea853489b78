"""blockfuse.bench.memory: the allocator trace's replay (peak, what is alive at it and after), grouping by the
allocating line, the Markdown lines; on synthetic traces (the recording itself needs CUDA)."""

from __future__ import annotations

import pytest
import torch

from blockfuse.bench import memory


def _alloc(addr, size, filename="/x/blockfuse/ops/mlp.py", line=7, name="_gate_up_forward"):
    return {"action": "alloc", "addr": addr, "size": size,
            "frames": [{"filename": filename, "line": line, "name": name}]}


def _free(addr):
    return {"action": "free_completed", "addr": addr}


def test_replay_finds_the_peak_and_what_outlives_the_call():
    events = [
        _alloc(1, 100), _alloc(2, 300, line=9, name="_down_forward"), _free(1),
        _alloc(3, 50, filename="/t/torch/distributed/fsdp/_fsdp_param.py", line=3, name="alloc_storage"),
        _free(2), _alloc(4, 10), _free(99),  # a free of memory allocated before the trace: ignored
    ]
    peak, at_peak, after, alive = memory.replay(events)
    assert peak == 400 and set(at_peak) == {1, 2}  # 100 + 300, before the first free
    assert after == 60 and set(alive) == {3, 4}
    groups = memory.grouped(alive, top=5)
    assert [g["where"] for g in groups] == ["_fsdp_param.py:3 alloc_storage", "mlp.py:7 _gate_up_forward"]
    assert groups[0]["mib"] == pytest.approx(50 / 2**20) and groups[0]["count"] == 1
    assert memory._frame([]) == "(no stack)"
    assert memory._frame([{"filename": "/usr/lib/python3.11/threading.py", "line": 1, "name": "run"}]) == \
        "(autograd engine / C++)"


def test_live_blocks_of_a_snapshot():
    """Allocated blocks of the asked device, by allocating line (either torch's ``frames`` or older ``history``);
    free blocks and other devices' are left out."""
    frames = [{"filename": "/x/torch/distributed/fsdp/_fully_shard/_fsdp_param.py", "line": 5, "name": "alloc"}]
    snapshot = {"segments": [
        {"device": 0, "address": 100, "blocks": [
            {"state": "active_allocated", "size": 64, "frames": frames},
            {"state": "inactive", "size": 32},
            {"state": "active_allocated", "size": 16, "history": [{"frames": frames}]},
            {"state": "active_allocated", "size": 8}]},
        {"device": 1, "address": 200, "blocks": [{"state": "active_allocated", "size": 1000, "frames": frames}]}]}
    blocks = memory.live_blocks(snapshot, 0)
    assert sorted(size for size, _ in blocks.values()) == [8, 16, 64]
    groups = memory.grouped(blocks, top=5)
    assert groups[0]["where"] == "_fsdp_param.py:5 alloc" and groups[0]["count"] == 2
    assert groups[1]["where"] == "(no stack)"


def test_snapshot_lines_name_the_lines_and_sizes():
    snapshot = {"before_mib": 4100.0, "peak_mib": 5600.0, "after_mib": 2048.0, "alive_mib": 6148.0,
                "at_peak": [{"mib": 256.0, "count": 8, "where": "mlp.py:268 _gate_up_forward"}],
                "after": [{"mib": 2048.0, "count": 8, "where": "fused.py:10 pack"}],
                "alive": [{"mib": 4100.0, "count": 80, "where": "(no stack)"}]}
    text = "\n".join(memory.snapshot_lines("fused", snapshot))
    assert "- fused: peak 5600 MiB above the 4100 MiB allocated before; 2048 MiB" in text
    assert "2048 MiB 8x `fused.py:10 pack`" in text and "all memory allocated after the step: 6148 MiB" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's refusal")
def test_snapshot_refuses_without_cuda():
    with pytest.raises(RuntimeError, match="needs CUDA"):
        memory.snapshot_call(lambda: None)


@pytest.mark.gpu
def test_snapshot_of_a_call_on_the_gpu():
    kept = []

    def call():
        temporary = torch.empty(2**20, device="cuda")  # 4 MiB, freed
        kept.append(torch.empty(2**18, device="cuda"))  # 1 MiB, kept
        del temporary

    result = memory.snapshot_call(call)
    assert result["peak_mib"] == pytest.approx(5.0) and result["after_mib"] == pytest.approx(1.0)
    assert result["alive_mib"] >= 1.0
