import numpy as np
import pytest

from blockfuse.bench.timing import Timing, quantile, summarize, time_cpu


@pytest.mark.parametrize(
    "samples", [[3.0], [2.0, 1.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.random.default_rng(0).random(37))]
)
@pytest.mark.parametrize("q", [0.0, 0.2, 0.5, 0.8, 1.0])
def test_quantile_matches_numpy(samples, q):
    assert quantile(samples, q) == pytest.approx(float(np.quantile(samples, q)))


def test_summarize_median_p20_p80():
    timing = summarize([float(v) for v in range(1, 12)])  # 1 .. 11
    assert timing == Timing(median=6.0, p20=3.0, p80=9.0)
    assert summarize([4.0, 4.0, 4.0]) == Timing(4.0, 4.0, 4.0)


def test_summarize_rejects_empty():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_time_cpu_times_only_fn_after_setup():
    calls = {"setup": 0, "fn": 0}

    def setup():
        calls["setup"] += 1
        return calls["setup"]

    def fn(state):
        assert state == calls["setup"]  # fn gets what this round's setup made
        calls["fn"] += 1

    timing = time_cpu(fn, setup=setup, warmup=2, rep_ms=0.0, min_reps=5)
    assert calls == {"setup": 7, "fn": 7}
    assert 0.0 <= timing.p20 <= timing.median <= timing.p80


def test_time_cpu_stops_at_max_reps():
    calls = []
    time_cpu(lambda: calls.append(1), warmup=0, rep_ms=1e9, min_reps=1, max_reps=4)
    assert len(calls) == 4


@pytest.mark.gpu
def test_time_cuda_loop_summarizes_like_the_others():
    import torch

    from blockfuse.bench.timing import time_cuda_loop

    x = torch.randn(1024, device="cuda")
    t = time_cuda_loop(lambda: x.mul_(1.0), calls=5, samples=3)
    assert 0 < t.p20 <= t.median <= t.p80
