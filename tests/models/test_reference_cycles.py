"""A fused stack's training step frees its activations by reference counting: no reference cycle keeps a tensor's
storage until Python's cyclic collector runs (which may not run between steps at all). Written when the fused
eager stack under FSDP2 held 2 GB more than the compiled one in the optimizer step (2 x H200,
benchmarks/results/distributed/README.md); it passed there, so cycles are not that cause. GPU only: Triton's
interpreter makes cycles of its own (its argument copies' closures), so on the CPU this would measure the
interpreter."""

from __future__ import annotations

import collections
import gc
from dataclasses import replace

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import blockfuse.fp8
from blockfuse.models import PRESETS, TransformerStack


_COMPILE_STATE = {"MetaConverter", "GraphModule", "GraphModuleImpl"}


def _reachable_from(roots: list, garbage: list) -> set[int]:
    """ids of the objects in ``garbage`` that ``roots`` reach through other objects in ``garbage``."""
    inside = {id(o) for o in garbage}
    seen, todo = set(), list(roots)
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        todo.extend(r for r in gc.get_referents(o) if id(r) in inside and id(r) not in seen)
    return seen


def _holders(objs: list, garbage: list) -> collections.Counter:
    """Type names of what holds ``objs`` in ``garbage``, two levels up ("Outer<Inner"): for the failure message."""
    inside = {id(o) for o in garbage}
    held = collections.Counter()
    for o in objs:
        for r in gc.get_referrers(o):
            if id(r) in inside:
                ups = [type(u).__name__ for u in gc.get_referrers(r) if id(u) in inside][:2]
                held[f"{'/'.join(ups) or '-'}<{type(r).__name__}"] += 1
    return held


def _cycle_garbage(step) -> tuple[int, collections.Counter]:
    """(storage bytes, names: the functions in the cycles and what holds the tensors) that only the cyclic
    collector would free after ``step()``."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        step()
        gc.collect()
        # meta storages (a fake tensor's, of some tracing the step set off in torch's own caches) hold no memory;
        # and an earlier test's torch.compile state in this process (its fake-tensor memo, a MetaConverter; its FX
        # graphs, GraphModule) can become garbage during the step, holding real tensors that test traced: seen on
        # the H200 after tests/ops/test_norm.py's compile test, 389504 then 4360 bytes
        # (benchmarks/results/session-check/2026-11-28-h200-b/). Not the step's: the test resets Dynamo first,
        # and what it still finds reachable from such state is left out. Fake tensors (a FakeTensor reports the
        # device it stands for, cuda, and holds a meta storage) are tracing state too: 4288 bytes of them, held by
        # a ShapeEnv's TrackedFake records, in the same order on the H200
        # (benchmarks/results/session-check/2026-11-28-h200-c/).
        traced = _reachable_from([o for o in gc.garbage if type(o).__name__ in _COMPILE_STATE], gc.garbage)
        storages = [o for o in gc.garbage if isinstance(o, torch.UntypedStorage) and o.device.type != "meta"
                    and id(o) not in traced]
        tensors = [o for o in gc.garbage if isinstance(o, torch.Tensor) and o.device.type != "meta"
                   and not isinstance(o, FakeTensor) and id(o) not in traced]
        size = sum(s.nbytes() for s in storages) + sum(t.untyped_storage().nbytes() for t in tensors)
        names = collections.Counter(getattr(o, "__qualname__", type(o).__name__) for o in gc.garbage
                                    if callable(o) or isinstance(o, torch.autograd.function.FunctionCtx))
        names.update(_holders(storages + tensors, gc.garbage))
        return size, names
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.gpu
@pytest.mark.parametrize("linear", ["bf16", "fp8:rowwise", "fp8:tensorwise"])
@pytest.mark.parametrize("preset", ["olmo2-1b", "te-4layer"])
def test_training_step_leaves_no_cycles_holding_tensors(preset, linear):
    torch._dynamo.reset()  # an earlier test's compiled graphs, not this step's (the NOTE in _cycle_garbage)
    gc.collect()
    config = replace(PRESETS[preset].config, d_model=256, n_heads=4, ffn_hidden=512)
    torch.manual_seed(0)
    stack = TransformerStack(config, 2, "fused").to("cuda", torch.bfloat16)
    if linear != "bf16":
        stack = blockfuse.fp8.convert(stack, recipe=linear.split(":")[1])
    x = torch.randn(2, 64, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step():
        stack(x).float().square().mean().backward()
        with torch.no_grad():
            stack(x)

    step()  # warm-up: compiles, caches
    size, names = _cycle_garbage(step)
    assert size == 0, f"{size} bytes of tensor storage freed only by the cyclic collector; in the cycles: " \
                      f"{names.most_common(16)}"
