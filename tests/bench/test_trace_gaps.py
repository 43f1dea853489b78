"""benchmarks/trace_gaps.py on a made-up Chrome trace: the GPU's idle gaps, where they are, and the runtime calls
that make the host wait for the GPU."""

from __future__ import annotations

import json

from tests.helpers import load_benchmark


def load():
    return load_benchmark("trace_gaps")


def event(name, cat, ts, dur, tid=1):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 0, "tid": tid}


def test_gaps_and_the_calls_that_wait_on_the_gpu(tmp_path):
    trace = [
        event("gemm_a", "kernel", 1000.0, 100.0, tid=7),
        event("norm", "kernel", 1105.0, 20.0, tid=7),  # 5 us after: not a gap
        event("cast", "kernel", 1325.0, 50.0, tid=7),  # 200 us idle: the host
        event("aten::linear", "cpu_op", 990.0, 40.0),
        event("aten::item", "cpu_op", 1130.0, 190.0),
        event("cudaStreamSynchronize", "cuda_runtime", 1131.0, 150.0),
        event("cudaMalloc", "cuda_runtime", 1290.0, 20.0),
        event("cudaMalloc", "cuda_runtime", 1390.0, 10.0),
        event("cudaLaunchKernel", "cuda_runtime", 1320.0, 4.0),
    ]
    path = tmp_path / "trace-fused.json"
    path.write_text(json.dumps({"traceEvents": trace}))
    result = load().analyse(path)
    assert abs(result["span_ms"] - 0.375) < 1e-9
    assert abs(result["compute_busy_ms"] - 0.170) < 1e-9
    assert abs(result["idle_waiting_on_host_ms"] - 0.200) < 1e-9
    assert result["short_gaps"] == 1 and abs(result["short_gaps_ms"] - 0.005) < 1e-9
    (gap,) = result["largest_gaps"]
    assert gap["before"] == "cast" and abs(gap["at_ms"] - 0.125) < 1e-9 and abs(gap["us"] - 200.0) < 1e-9
    calls = {c["name"]: (c["count"], round(c["ms"], 6)) for c in result["blocking_calls"]}
    assert calls == {"cudaStreamSynchronize": (1, 0.15), "cudaMalloc": (2, 0.03)}


def test_phases_begin_where_a_different_mark_appears():
    compute = [event(name, "kernel", ts, 10.0) for name, ts in
               (("warm", 0.0), ("fwd_norm", 100.0), ("gemm", 120.0), ("fwd_norm", 140.0), ("bwd_cast", 200.0),
                ("gemm", 215.0), ("fwd_norm", 400.0), ("gemm", 450.0))]
    got = [(p["mark"], p["kernels"], round(p["span_ms"], 6), round(p["busy_ms"], 6))
           for p in load().phases(compute, ["fwd_norm", "bwd_cast"])]
    assert got == [("", 1, 0.01, 0.01), ("fwd_norm", 3, 0.05, 0.03), ("bwd_cast", 2, 0.025, 0.02),
                   ("fwd_norm", 2, 0.06, 0.02)]
