"""Tensor parallelism with blockfuse.distributed.tp_plan: two processes (tests/multiprocess.py) against one process
running the same model on the same batch, eager and fused stacks, with and without sequence parallelism.

The fused stack runs the Triton kernels where they run (two GPUs, or the CPU under TRITON_INTERPRET=1) and the ops'
pure-PyTorch references otherwise: the plan and the DTensor plumbing are the same either way."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from tests import multiprocess

# (two processes a minute or more between them: started first, not left to the end of CI's run; tests/conftest.py)
pytestmark = pytest.mark.long

SHAPE = (2, 9, 64)  # an odd sequence: sequence-parallel shards of 5 and 4 tokens
TINY = {"d_model": 64, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 96, "dropout": 0.0}
# (preset, overrides): pre-norm LayerNorm with biases; reordered RMSNorm without biases; an encoder (GELU MLP,
# no RoPE, bidirectional, a key-padding mask)
CASES = [("standard", {}), ("reordered", {"norm": "rms", "bias": False}), ("siglip2", {"head_dim": None})]


def _model(preset, overrides, impl, device, seed=0):
    from blockfuse.models import build_model

    model, inputs = build_model(preset, SHAPE, torch.float32, device, layers=2, impl=impl, seed=seed,
                                **TINY, **overrides)
    g = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():  # norm weights and biases away from ones and zeros: replicated or not shows
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g).to(device))
    return model, inputs


def _packed_rows(name, config, tp):
    """The rank-major row order of a fused packed parameter (None for the others)."""
    from blockfuse.distributed import rank_major_rows

    if ".qkv_proj." in name:
        return rank_major_rows((config.q_width, config.kv_width, config.kv_width), tp)
    if ".gate_up_proj." in name:
        return rank_major_rows((config.ffn_hidden, config.ffn_hidden), tp)
    return None


_COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d_functional", "_c10d_functional_autograd", "c10d")


def collective_counter():
    """A dispatch mode counting the collectives run in its context (``counts``: op -> calls), as CommDebugMode's
    ``get_comm_counts`` does but without its module tracker: that tracker registers a forward hook on each module
    at each call and fails (IndexError) on a module called twice in one forward, as transformers 5.25's hub-kernel
    functions are (``apply_rotary_pos_emb`` is an ``nn.Module`` there, called by every attention layer)."""
    from torch.distributed.tensor import DTensor
    from torch.utils._python_dispatch import TorchDispatchMode

    class CollectiveCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.counts = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(t is DTensor for t in types):
                return NotImplemented  # DTensor desugars into the collectives first, then they come here
            kwargs = kwargs or {}
            if isinstance(func, torch._ops.HigherOrderOperator):
                return func(*args, **kwargs)
            namespace, _, name = str(func.overloadpacket).partition(".")
            if namespace in _COLLECTIVE_NAMESPACES and "wait" not in name:
                key = str(func.overloadpacket)
                self.counts[key] = self.counts.get(key, 0) + 1
            return func(*args, **kwargs)

    return CollectiveCounter()


@contextlib.contextmanager
def gradient_reductions():
    """Counts the replicated weights' gradients that blockfuse.distributed all-reduces in the backward (torch before
    2.13 only: ``distributed._replicated_gradients_reduced``), so that the collectives' counts can be checked
    against the plan's: plan and step the model inside it, and take the count from the backward's all-reduces."""
    import blockfuse.distributed as distributed
    from torch.distributed.tensor import DTensor

    counted = {"all_reduce": 0}
    reduce = distributed._partial_reduced

    def counting(grad):
        if isinstance(grad, DTensor) and any(p.is_partial() for p in grad.placements):
            counted["all_reduce"] += 1
        return reduce(grad)

    distributed._partial_reduced = counting
    try:
        yield counted
    finally:
        distributed._partial_reduced = reduce


def without_gradient_reductions(collectives: dict, counted: dict) -> dict:
    """``collectives`` with the backward's all-reduces of :func:`gradient_reductions` taken out."""
    backward = dict(collectives["backward"], all_reduce=collectives["backward"]["all_reduce"] - counted["all_reduce"])
    return {**collectives, "backward": backward}


def _collectives(counts) -> dict:
    totals = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}
    for op, count in counts.items():
        for kind in totals:
            if kind in str(op):
                totals[kind] += count
    return totals


def _inputs(preset, overrides, impl):
    """The case's model, its inputs and the probe its output is summed against."""
    device = multiprocess.device()
    model, (x, *mask) = _model(preset, overrides, impl, device)
    probe = torch.randn(x.shape, generator=torch.Generator().manual_seed(7)).to(device)
    return model, x, mask, probe


def _step(module, x, mask, probe):
    """(output, loss, x's gradient, the collectives run forward and backward) of one step of ``module``."""
    x_ = x.clone().requires_grad_()
    forward, backward = collective_counter(), collective_counter()
    with forward:
        out = module(x_, *mask)
    loss = (out * probe).sum()
    with backward:
        loss.backward()
    collectives = {"forward": _collectives(forward.counts), "backward": _collectives(backward.counts)}
    return out.detach(), loss.detach(), x_.grad, collectives


def _reference(preset, overrides, impl) -> tuple:
    """One process's step of the case's model (the same with or without sequence parallelism): (output, loss, x's
    gradient, every parameter's gradient by name)."""
    model, x, mask, probe = _inputs(preset, overrides, impl)
    out, loss, dx, _ = _step(model, x, mask, probe)
    return out, loss, dx, {name: p.grad for name, p in model.named_parameters()}


def references(rank, cases, impl) -> dict:
    """``_reference`` of each distinct (preset, overrides) of ``cases`` (preset, overrides, ...), keyed by
    ``repr((preset, overrides))``: each made on one rank (multiprocess.split), not on both, and once for the two
    layouts of the residual stream."""
    keys = {repr((preset, overrides)): (preset, overrides) for preset, overrides, *_ in cases}
    return multiprocess.split(rank, {key: lambda case=case: _reference(*case, impl) for key, case in keys.items()})


def _case(rank, mesh, preset, overrides, impl, sequence_parallel, reference):
    """The sharded step against ``reference`` (``_reference``'s): errors, the output's type, the collectives."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    model, x, mask, probe = _inputs(preset, overrides, impl)
    expected_out, expected_loss, expected_dx, expected_grads = reference
    sharded = copy.deepcopy(model)
    with gradient_reductions() as counted:
        parallelize_module(sharded, mesh, tp_plan(sharded, sequence_parallel=sequence_parallel))
        out, loss, dx, collectives = _step(sharded, x, mask, probe)
    collectives = without_gradient_reductions(collectives, counted)

    def error(a, b):  # relative to b's largest element, absolute below 1 (a k bias's gradient is zero but for noise)
        return float((a - b).abs().max() / b.abs().max().clamp(min=1.0))

    errors = {"output": error(out, expected_out), "loss": error(loss, expected_loss),
              "input grad": error(dx, expected_dx)}
    for name, p in sharded.named_parameters():
        grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad  # a Partial() one is summed here
        expected = expected_grads[name]
        rows = _packed_rows(name, model.config, multiprocess.WORLD)
        errors[name] = error(grad, expected if rows is None else expected[rows.to(expected.device)])
    return {"errors": errors, "output type": type(out).__name__, "collectives": collectives}


def _worker(rank, impl):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    cases = [(preset, overrides, sp) for preset, overrides in CASES for sp in (True, False)]
    expected = references(rank, cases, impl)
    return {f"{preset} {overrides} sequence_parallel={sp}": _case(rank, mesh, preset, overrides, impl, sp,
                                                                  expected[repr((preset, overrides))])
            for preset, overrides, sp in cases}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(worker, *args)``: that case's results by rank, from one pair of processes for the file's three (the
    stacks eager and fused, the layout; spawning a pair costs CI's two cores seconds of imports a time)."""
    return multiprocess.run_each([(_worker, ("eager",)), (_worker, ("fused",)), (_layout_worker, ())], timeout=600,
                                 once=("test_distributed", tmp_path_factory))


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_tensor_parallel_stack_matches_one_process(impl, runs):
    """Output, loss, the input's gradient and every parameter's gradient (gathered; a fused packed one in the
    rank-major layout) match one process. The communication is the plan's and no more, forward and backward
    alike: per block one all-gather into attention and one into the MLP and a reduce-scatter out of each
    (sequence parallel: the norms gather nothing), plus the stack's output gathered (its input's gradient in the
    backward); without sequence parallelism one all-reduce out of each. The norms' weight gradients stay
    partial sums until used (here: gathered for the comparison, after the count)."""
    for rank, results in enumerate(runs(_worker, impl)):
        for case, result in results.items():
            worst = max(result["errors"], key=result["errors"].get)
            assert result["errors"][worst] < 1e-5, f"rank {rank}, {case}: {worst} {result['errors'][worst]:.2e}"
            assert result["output type"] == "Tensor", (case, result["output type"])
            layers = 2
            if "sequence_parallel=True" in case:
                expected = {"all_gather": 2 * layers + 1, "reduce_scatter": 2 * layers, "all_reduce": 0}
            else:
                expected = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 2 * layers}
            assert result["collectives"] == {"forward": expected, "backward": expected}, (rank, case, result)


def _layout_worker(rank):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    device, tp = multiprocess.device(), multiprocess.WORLD
    mesh = init_device_mesh(device, (tp,))
    fused, _ = _model("standard", {}, "fused", device)
    cfg = fused.config
    full = {name: t.clone() for name, t in fused.state_dict().items()}  # the eager names: q_proj, gate_proj, ...
    parallelize_module(fused, mesh, tp_plan(fused))
    attn, ffn = fused.blocks[0].attn, fused.blocks[0].ffn
    checks = {"shards": (attn.shards, ffn.shards) == (tp, tp)}

    def rows_of(name, units, unit_rows):  # rank's rows of an eager projection: its heads (hidden columns)
        t = full[f"blocks.0.{name}"]
        per_rank = units // tp * unit_rows
        return t[rank * per_rank:(rank + 1) * per_rank]

    for suffix in ("weight", "bias"):
        expected_qkv = torch.cat([rows_of(f"attn.q_proj.{suffix}", cfg.n_heads, cfg.head_size),
                                  rows_of(f"attn.k_proj.{suffix}", cfg.kv_heads, cfg.head_size),
                                  rows_of(f"attn.v_proj.{suffix}", cfg.kv_heads, cfg.head_size)])
        checks[f"local qkv {suffix}"] = torch.equal(getattr(attn.qkv_proj, suffix).to_local(), expected_qkv)
        expected_gate_up = torch.cat([rows_of(f"ffn.gate_proj.{suffix}", cfg.ffn_hidden, 1),
                                      rows_of(f"ffn.up_proj.{suffix}", cfg.ffn_hidden, 1)])
        checks[f"local gate|up {suffix}"] = torch.equal(getattr(ffn.gate_up_proj, suffix).to_local(), expected_gate_up)

    # the sharded state dict: the eager names, each projection sharded on its own rows (columns for the row-parallel
    # ones), every tensor's whole equal to the unsharded model's
    state = fused.state_dict()
    checks["state dict names"] = sorted(state) == sorted(full)
    placements = {"q_proj.weight": Shard(0), "v_proj.bias": Shard(0), "gate_proj.weight": Shard(0),
                  "up_proj.bias": Shard(0), "o_proj.weight": Shard(1), "down_proj.weight": Shard(1),
                  "down_proj.bias": Replicate(), "attn_norm.weight": Replicate()}
    for name, t in state.items():
        checks[f"whole {name}"] = isinstance(t, DTensor) and torch.equal(t.full_tensor(), full[name])
        for suffix, placement in placements.items():
            if name.endswith(suffix):
                checks[f"placement {name}"] = tuple(t.placements) == (placement,)

    # the fused and eager models' sharded state dicts load into each other
    eager, _ = _model("standard", {}, "eager", device, seed=1)
    parallelize_module(eager, mesh, tp_plan(eager))
    fused.load_state_dict(eager.state_dict())
    again = fused.state_dict()
    checks["eager state dict into fused"] = all(torch.equal(again[name].full_tensor(), t.full_tensor())
                                                for name, t in eager.state_dict().items())

    # a full (unsharded) checkpoint loads through torch.distributed.checkpoint, each rank taking its rows
    checkpoint = _model("standard", {}, "eager", device, seed=2)[0].state_dict()
    set_model_state_dict(fused, dict(checkpoint), options=StateDictOptions(full_state_dict=True))
    loaded = fused.state_dict()
    checks["full checkpoint into fused"] = all(torch.equal(loaded[name].full_tensor(), t)
                                               for name, t in checkpoint.items())
    return checks


def test_packed_weights_are_sharded_head_aligned(runs):
    """Rank r's local qkv rows are [its q heads | its k heads | its v heads] (heads r * h / tp on, GQA's kv heads
    likewise), its gate|up rows [its gate rows | its up rows]; the state dict holds the eager names, sharded, and
    loads the eager model's sharded state dict and a full checkpoint (torch.distributed.checkpoint)."""
    for rank, checks in enumerate(runs(_layout_worker)):
        failed = [name for name, ok in checks.items() if not ok]
        assert not failed, f"rank {rank}: {failed}"


class _Mesh:
    """A stand-in for a 2-rank mesh: the checks run before any communication."""

    def size(self) -> int:
        return 2


@pytest.mark.parametrize("heads, kv_heads", [(6, 3), (3, 1)])
def test_heads_not_divisible_by_the_ranks_raise(heads, kv_heads):
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan
    from blockfuse.models import TransformerStack
    from blockfuse.models.config import BlockConfig

    for impl in ("eager", "fused"):
        model = TransformerStack(BlockConfig(d_model=64, n_heads=heads, n_kv_heads=kv_heads, head_dim=16,
                                             ffn_hidden=96), 1, impl)
        with pytest.raises(ValueError, match=f"n_heads={heads} and n_kv_heads={kv_heads} must both be multiples of 2"):
            parallelize_module(model, _Mesh(), tp_plan(model, sequence_parallel=False))


def test_hidden_not_divisible_and_unsupported_models_raise():
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan
    from blockfuse.models import TransformerBlock
    from blockfuse.models.config import BlockConfig

    block = TransformerBlock(BlockConfig(d_model=64, n_heads=4, ffn_hidden=97), "fused")
    plan = tp_plan(block, sequence_parallel=False)
    del plan["attn"]
    with pytest.raises(ValueError, match="ffn_hidden=97 must be a multiple of 2"):
        parallelize_module(block, _Mesh(), plan)
    with pytest.raises(NotImplementedError, match="qk_norm"):  # a LayerNorm QK-norm (an RMSNorm one is sharded)
        tp_plan(TransformerBlock(BlockConfig(d_model=64, n_heads=4, ffn_hidden=96, qk_norm=True, norm="layer"),
                                 "fused"))
    with pytest.raises(TypeError, match="TransformerStack or TransformerBlock"):
        tp_plan(torch.nn.Linear(4, 4))
