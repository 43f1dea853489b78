"""Delayed scaling's amax histories rolled without a launch each: after a column sum, or deferred and grouped.

A delayed-scaling cast (``ops/fp8.py``: the norms', the activations' and the FP8 linear's) folds its output's amax
into a one-element scratch, and then a one-program launch rolls it into the history (``history = [amax,
*history[:-1]]``, ``amax = 0``: :func:`blockfuse.ops.fp8.roll_amax_history`). A fused FP8 block's training step makes
eight such casts (the four projections' inputs in the forward, their output gradients in the backward), so eight
launches that each cost the host a launch and move four bytes. Two ways here take them off the host path:

* **after a column sum** (:func:`roll_program`): a cast that also sums its columns (a layer's bias gradient, in
  the backward) is followed by the launch that adds its programs' partial sums
  (:func:`blockfuse.ops.reduce.sum_partials`); one more program of that launch rolls the history. It runs after
  the cast has ended, as the roll's own launch did, so nothing changes but the launch count.
* **deferred** (:func:`deferred_rolls`): inside the scope (a fused block's eager forward) a roll is recorded
  instead of launched, and the scope's end launches the recorded ones, :data:`GROUP` a launch
  (:func:`_fp8_rolls_kernel`). A history is read only by the next cast of the same tensor, so a roll may wait
  until then; it waits no longer than the block's forward, and a cast that reads a history whose roll is
  pending (a layer called twice in one scope) has the pending rolls launched first (:func:`settle`). Nothing
  is deferred while anything traces (``torch.compile`` records the rolls as ops in its graph) or outside a scope.
"""

from __future__ import annotations

import threading

import torch
import triton
import triton.language as tl
from torch import Tensor

from blockfuse.ops.launch import Kernel, next_power_of_2, tracing

GROUP = 4  # rolls a grouped launch takes (its pointer arguments): a block's forward makes four


@triton.jit
def roll_program(HISTORY, AMAX, history_len, BLOCK_H: tl.constexpr):
    """One program's roll: ``HISTORY = [AMAX, *HISTORY[:-1]]`` and ``AMAX = 0``, after whatever wrote AMAX has
    ended (an earlier launch)."""
    offs = tl.arange(0, BLOCK_H)
    older = tl.load(HISTORY + offs - 1, mask=(offs > 0) & (offs < history_len), other=0.0)
    newest = tl.load(AMAX)
    tl.debug_barrier()  # every element read before any thread overwrites one
    tl.store(HISTORY + offs, tl.where(offs == 0, newest, older), mask=offs < history_len)
    tl.store(AMAX, 0.0)


@triton.jit
def _fp8_rolls_kernel(
    H0, H1, H2, H3,  # (len_i,) fp32 amax histories, newest first (past the launch's count: any of them, unused)
    A0, A1, A2, A3,  # (1,) fp32 each history's recorded amax, zeroed here
    len0, len1, len2, len3,
    BLOCK_H: tl.constexpr,  # the longest history, rounded up to a power of two
):
    # One program a history.
    i = tl.program_id(0)
    if i == 0:
        roll_program(H0, A0, len0, BLOCK_H)
    elif i == 1:
        roll_program(H1, A1, len1, BLOCK_H)
    elif i == 2:
        roll_program(H2, A2, len2, BLOCK_H)
    else:
        roll_program(H3, A3, len3, BLOCK_H)


_rolls_kernel = Kernel(_fp8_rolls_kernel)


class _Deferred(threading.local):
    depth = 0  # open deferred_rolls scopes on this thread
    pending: list  # (history, amax) of the rolls recorded on this thread, in order

    def __init__(self):
        self.pending = []


_deferred = _Deferred()


def launch_rolls(pairs: list[tuple[Tensor, Tensor]]) -> None:
    """Rolls each ``(history, amax)`` of ``pairs`` (one device), GROUP a launch, in order."""
    for begin in range(0, len(pairs), GROUP):
        group = pairs[begin:begin + GROUP]
        lengths = [int(history.shape[0]) for history, _ in group]
        padded = group + [group[0]] * (GROUP - len(group))
        _rolls_kernel((len(group),), *[h for h, _ in padded], *[a for _, a in padded],
                      *(lengths + [0] * (GROUP - len(group))), BLOCK_H=next_power_of_2(max(lengths)), num_warps=1)


def _launch_pending() -> None:
    pending = _deferred.pending
    if not pending:
        return
    _deferred.pending = []
    by_device: dict = {}
    for pair in pending:
        by_device.setdefault(pair[0].device, []).append(pair)
    for pairs in by_device.values():
        launch_rolls(pairs)


class _Scope:
    __slots__ = ()

    def __enter__(self):
        _deferred.depth += 1

    def __exit__(self, *exc):
        _deferred.depth -= 1
        if not _deferred.depth:
            _launch_pending()  # (on an error too: the casts that ran have their amaxes recorded)
        return False


_SCOPE = _Scope()


def deferred_rolls() -> _Scope:
    """A scope (``with deferred_rolls(): ...``) whose histories' rolls are launched together at its end (module
    docstring). Eager code only: open it where nothing traces (see :func:`can_defer`)."""
    return _SCOPE


def can_defer() -> bool:
    """Whether a caller may open :func:`deferred_rolls` here: not while ``torch.compile`` or a dispatch mode
    traces (Dynamo would meet a context manager it does not know; the traced rolls belong in the graph)."""
    return not torch.compiler.is_compiling() and not tracing()


def deferring() -> bool:
    """Whether a roll made here now would be deferred (:func:`defer`)."""
    return bool(_deferred.depth) and not tracing()


def defer(history: Tensor, amax: Tensor) -> bool:
    """Records the roll of ``history`` for its scope's end where one is open (and nothing traces): True then;
    False where the caller must launch it now."""
    if not _deferred.depth or tracing():
        return False
    _deferred.pending.append((history, amax))
    return True


def settle(history: Tensor) -> None:
    """Before a launch that reads ``history``: launches the pending rolls if its own is among them."""
    pending = _deferred.pending
    if pending and any(h is history for h, _ in pending):
        _launch_pending()
