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


@pytest.mark.parametrize("estimate_ms,expected", [(0.01, (2500, 5000)), (24.0, (3, 7)), (200.0, (3, 7))])
def test_call_counts_keep_the_minimums_for_long_calls(estimate_ms, expected):
    """Budgets of 25 / 50 ms (bench block --quick) give a fast call thousands of calls, and a 24 ms training step the
    minimums (3 warm-up, 7 timed) where they gave 1 and 2; without minimums, at least one of each."""
    from blockfuse.analyze.timing import call_counts

    assert call_counts(25, 50, estimate_ms, min_warmup=3, min_reps=7) == expected
    assert call_counts(25, 50, 200.0) == (1, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("with_setup", [False, True])
def test_time_cuda_makes_at_least_the_minimum_calls(with_setup):
    """A call longer than both budgets still gets ``min_warmup`` + ``min_reps`` calls, with and without a setup."""
    import torch

    from blockfuse.analyze.timing import time_cuda

    calls = []

    def fn(*_):
        torch.cuda._sleep(2_000_000)  # a few milliseconds
        calls.append(1)

    timing = time_cuda(fn, warmup_ms=0.01, rep_ms=0.01, setup=(lambda: None) if with_setup else None,
                       min_reps=5, min_warmup=2)
    assert len(calls) >= 5 + 2
    assert 0 < timing.p20 <= timing.median <= timing.p80
