"""benchmarks/profile_block.py's allocator count (its --cpu line): the driver calls between two memory_stats."""

from __future__ import annotations

from tests.helpers import load_benchmark


def test_allocator_calls_counts_the_deltas():
    profile_block = load_benchmark("profile_block")
    before = {"num_device_alloc": 7, "num_device_free": 2, "num_alloc_retries": 0}
    after = {"num_device_alloc": 10, "num_device_free": 6, "num_alloc_retries": 1}
    assert profile_block.allocator_calls(before, after) == "3 cudaMalloc, 4 cudaFree, 1 allocation retries"
    assert profile_block.allocator_calls({}, {}) == "0 cudaMalloc, 0 cudaFree, 0 allocation retries"
