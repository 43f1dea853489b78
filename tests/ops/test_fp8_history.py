"""Delayed scaling's amax histories rolled without a launch each (``ops/fp8_history.py``): several in one launch,
after a column sum in the sum's launch, and deferred to the end of a fused block's forward. Each is checked bit for
bit against the one-roll-a-launch path (a roll moves values, it computes nothing), and the launch counts that are the
point of it are checked too."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

import blockfuse.fp8 as bf_fp8
from blockfuse.ops import fp8, fp8_history, launch
from blockfuse.ops.fp8 import Float8Scaling, quantize
from blockfuse.ops.reduce import sum_partials
from tests.helpers import random_tensor

E4M3 = torch.float8_e4m3fn


def rolled(history: torch.Tensor, amax: torch.Tensor) -> torch.Tensor:
    """The reference roll: ``[amax, *history[:-1]]``."""
    return torch.cat((amax, history[:-1]))


def filled(history_len: int, seed: int, device) -> Float8Scaling:
    """A state with a history and a recorded amax of positive, distinct values."""
    g = torch.Generator().manual_seed(seed)
    return Float8Scaling(torch.rand(history_len, generator=g).add_(0.5).to(device),
                         torch.rand(1, generator=g).add_(2.0).to(device))


@pytest.fixture
def launches(monkeypatch):
    """The names of the kernels launched while the test runs, in order."""
    names = []
    call = launch.Kernel.__call__

    def recording(self, *args, **kwargs):
        names.append(self.name)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(launch.Kernel, "__call__", recording)
    return names


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("count", [1, 3, 6])
def test_grouped_rolls_are_each_historys_own_roll(count, launches, device):
    """Histories of different lengths (1 to 16), more than a launch's GROUP of them: each rolled as alone."""
    states = [filled(length, seed, device) for seed, length in enumerate([1, 3, 4, 16, 5, 2][:count])]
    want = [(rolled(*state), torch.zeros(1, device=device)) for state in states]
    fp8_history.launch_rolls(list(states))
    for (history, amax), (want_history, want_amax) in zip(states, want):
        assert torch.equal(history, want_history) and torch.equal(amax, want_amax)
    assert launches == ["_fp8_rolls_kernel"] * -(-count // fp8_history.GROUP)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("groups, n", [(3, 40), (70, 5), (1, 1)])
def test_a_column_sum_rolls_its_casts_history_in_the_same_launch(groups, n, launches, device):
    partial = random_tensor((1, groups, n), torch.float32, seed=groups).to(device)
    alone, with_roll = partial.new_empty(n), partial.new_empty(n)
    state = filled(7, groups, device)
    want_history = rolled(*state)
    sum_partials(partial, alone, None)
    sum_partials(partial, with_roll, None, roll=state)
    assert torch.equal(with_roll, alone)
    assert torch.equal(state.history, want_history) and state.amax.item() == 0.0
    assert launches == ["_sum_partials_kernel"] * 2


@pytest.mark.usefixtures("requires_triton")
def test_a_scope_defers_its_rolls_to_its_end_and_a_read_of_a_pending_history_settles_it(launches, device):
    """Two casts with one state inside a scope: the second reads the history with the first's amax in it (settled
    first), as it would with no scope; the history stands still between a cast and its settling."""
    mine, theirs = Float8Scaling.new(4, device), Float8Scaling.new(4, device)
    xs = [random_tensor((37, 72), torch.float32, seed=s).to(device) * m for s, m in ((1, 1.0), (2, 30.0))]
    want = [quantize(x, E4M3, fp8_scaling=theirs) for x in xs]  # no scope: each call rolls at once
    launches.clear()
    with fp8_history.deferred_rolls():
        first = quantize(xs[0], E4M3, fp8_scaling=mine)
        assert torch.equal(mine.history, torch.zeros(4, device=device))  # deferred: not rolled yet
        assert launches.count("_fp8_roll_kernel") == 0
        second = quantize(xs[1], E4M3, fp8_scaling=mine)  # reads the history: the pending roll goes first
        assert mine.history[0] == xs[0].abs().max()
        assert launches == ["_fp8_cast_kernel", "_fp8_rolls_kernel", "_fp8_cast_kernel"]
    for (q, scale), (want_q, want_scale) in zip((first, second), want):
        assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(scale, want_scale)
    assert launches[-1] == "_fp8_rolls_kernel"  # the second cast's roll, at the scope's end
    assert torch.equal(mine.history, theirs.history) and mine.amax.item() == 0.0
    assert fp8_history._deferred.pending == [] and fp8_history._deferred.depth == 0


@pytest.mark.usefixtures("requires_triton")
def test_a_scope_launches_its_rolls_even_when_its_body_raises(device):
    state = Float8Scaling.new(4, device)
    x = random_tensor((16, 32), torch.float32, seed=3).to(device)
    with pytest.raises(RuntimeError, match="in the body"):
        with fp8_history.deferred_rolls():
            quantize(x, E4M3, fp8_scaling=state)
            raise RuntimeError("in the body")
    assert state.history[0] == x.abs().max() and fp8_history._deferred.pending == []


@pytest.mark.usefixtures("requires_triton")
def test_a_fused_delayed_blocks_step_rolls_in_one_launch_and_is_the_same_bit_for_bit(monkeypatch, launches, device):
    """te-4layer's block, small: its forward's four rolls in one launch at its end, its backward's four in the
    bias gradients' sums; outputs, gradients and histories equal to the block whose forward rolls each at once; and
    no zero fills for the FP8 ops' stand-ins."""
    from blockfuse.models import PRESETS, TransformerBlock, convert

    torch.manual_seed(0)
    config = replace(PRESETS["te-4layer"].config, d_model=64, n_heads=4, ffn_hidden=128)
    block = bf_fp8.convert(convert(TransformerBlock(config, "eager").to(device), "fused").bfloat16(),
                           recipe="delayed")
    twin = copy.deepcopy(block)
    results, fills = {}, []
    new_zeros = torch.Tensor.new_zeros
    monkeypatch.setattr(torch.Tensor, "new_zeros", lambda *a, **k: fills.append(a[1:]) or new_zeros(*a, **k))
    for name, module, deferring in (("one launch", block, True), ("each at once", twin, False)):
        monkeypatch.setattr(fp8_history, "can_defer", lambda deferring=deferring: deferring)
        for step in range(3):  # the histories fill: later steps' scales come from them
            x = random_tensor((2, 16, 64), torch.bfloat16, seed=10 + step).to(device).requires_grad_()
            dy = random_tensor((2, 16, 64), torch.bfloat16, seed=20 + step).to(device)
            launches.clear()
            if step == 1:  # (the first step may make the cached zero itself)
                fills.clear()
            out = module(x)
            forward = list(launches)
            out.backward(dy)
            backward = launches[len(forward):]
        results[name] = (out, x.grad, [p.grad for p in module.parameters()],
                         [b for n, b in module.named_buffers() if "history" in n], forward, backward)
    mine, theirs = results["one launch"], results["each at once"]
    assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1])
    assert all(torch.equal(a, b) for a, b in zip(mine[2], theirs[2]))
    assert len(mine[3]) == 8 and all(torch.equal(a, b) for a, b in zip(mine[3], theirs[3]))
    assert all((h[:3] > 0).all() for h in mine[3])  # three steps recorded in every history
    forward, backward = mine[4], mine[5]
    assert forward.count("_fp8_rolls_kernel") == 1 and forward[-1] == "_fp8_rolls_kernel"
    assert "_fp8_roll_kernel" not in forward + backward
    assert theirs[4].count("_fp8_roll_kernel") == 4 and len(theirs[4]) == len(forward) + 3
    # (the backward's rolls ride on the bias gradients' sums with or without a scope)
    assert backward == theirs[5] and backward.count("_sum_partials_kernel") == 4
    assert fills == []  # the stand-ins for autograd: one cached zero (launch.zero_stand_in), no fill a step
