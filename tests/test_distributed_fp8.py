"""FP8 Linear layers under tensor parallelism (``Float8Linear``'s sharded forward, ``blockfuse.distributed.tp_plan``):
two processes (tests/multiprocess.py) against one process running the same FP8 model, and both against the model in
fp32 without FP8.

Each rank scales its own shards (the NOTE in ``Float8Linear._forward_sharded``), so the two-process run is not the
one-process run bit for bit: it must be as close to fp32 as the one-process FP8 run is (its error within a few times
that run's, tensor by tensor, and about the same in their geometric mean), and different from it (a test that would
pass with the layers falling back to bf16 GEMMs would prove nothing: the FP8 runs' error against fp32 is checked to
be FP8's, not bf16's). What the stack test cannot see at FP8's noise the layer test checks bit for bit: each rank's
GEMMs are ``fp8_linear``'s on its shards."""

from __future__ import annotations

import copy

import pytest
import torch

from tests import multiprocess

# (two processes a minute or more between them: started first, not left to the end of CI's run; tests/conftest.py)
pytestmark = pytest.mark.long

SHAPE = (2, 9, 64)  # an odd sequence: sequence-parallel shards of 5 and 4 tokens
TINY = {"d_model": 64, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 96, "dropout": 0.0}
# (preset, overrides): pre-norm LayerNorm with biases and a GELU MLP; reordered RMSNorm, SwiGLU, no biases
CASES = [("standard", {"mlp": "gelu_tanh"}), ("reordered", {"norm": "rms", "bias": False})]


def _models(preset, overrides, impl, recipe, device):
    """(the fp32 model without FP8, the bf16 model with FP8 layers), the same weights, and the inputs."""
    import blockfuse.fp8
    from blockfuse.models import build_model

    model, (x, *mask) = build_model(preset, SHAPE, torch.float32, device, layers=2, impl=impl, seed=0,
                                    **TINY, **overrides)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # norm weights and biases away from ones and zeros: replicated or not shows
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g).to(device))
    fp8 = blockfuse.fp8.convert(copy.deepcopy(model).bfloat16(), recipe=recipe)
    return model, fp8, x, mask


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(worker, *args)``: that case's results by rank, from one pair of processes for the whole file (spawning a
    pair costs CI's two cores seconds of imports a time), run once however xdist spreads the tests (``once``). The
    compiled stack first: it checks what a process that has run nothing on DTensors eagerly finds when it traces."""
    cases = [(_compiled_worker, ()), (_worker, ("eager",)), (_worker, ("fused",)), (_convert_after_worker, ())]
    cases += [(_layer_worker, (recipe,)) for recipe in ("tensorwise", "rowwise", "delayed")]
    return multiprocess.run_each(cases, timeout=600, once=("test_distributed_fp8", tmp_path_factory))


def _step(module, x, mask, probe, dtype, steps=1):
    """Output and every gradient of ``steps`` forward + backward calls (delayed scaling: the second call scales by the
    first's amaxes), the last call's."""
    from torch.distributed.tensor import DTensor

    for _ in range(steps):
        module.zero_grad(set_to_none=True)
        x_ = x.to(dtype).clone().requires_grad_()
        out = module(x_, *mask)
        (out.float() * probe).sum().backward()
    grads = {"output": out.detach().float(), "input grad": x_.grad.float()}
    for name, p in module.named_parameters():
        grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        grads[name] = grad.float()
    return grads


def _inputs(preset, overrides, impl, recipe):
    """``_models``' (fp32 model, FP8 model, x, mask) on this process's device, and the probe."""
    device = multiprocess.device()
    fp32, fp8, x, mask = _models(preset, overrides, impl, recipe, device)
    return fp32, fp8, x, mask, torch.randn(x.shape, generator=torch.Generator().manual_seed(7)).to(device)


def _reference(preset, overrides, impl, recipe) -> tuple:
    """One process's runs of the case (the same with or without sequence parallelism): (the fp32 model's gradients,
    the FP8 model's)."""
    fp32, fp8, x, mask, probe = _inputs(preset, overrides, impl, recipe)
    steps = 2 if recipe == "delayed" else 1
    return _step(fp32, x, mask, probe, torch.float32), _step(fp8, x, mask, probe, torch.bfloat16, steps)


def _case(rank, mesh, preset, overrides, impl, recipe, sequence_parallel, reference):
    """The sharded FP8 run against ``reference`` (``_reference``'s)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan
    from blockfuse.nn.fp8 import Float8Linear

    _, fp8, x, mask, probe = _inputs(preset, overrides, impl, recipe)
    steps = 2 if recipe == "delayed" else 1
    expected, single = reference
    sharded_model = copy.deepcopy(fp8)
    parallelize_module(sharded_model, mesh, tp_plan(sharded_model, sequence_parallel=sequence_parallel))
    layers = [m for m in sharded_model.modules() if isinstance(m, Float8Linear)]
    sharded = _step(sharded_model, x, mask, probe, torch.bfloat16, steps)
    tp = multiprocess.WORLD

    def rows_of(name, t):  # a fused packed gradient in the rank-major layout of the sharded one
        from blockfuse.distributed import rank_major_rows

        cfg = fp8.config
        if ".qkv_proj." in name:
            return t[rank_major_rows((cfg.q_width, cfg.kv_width, cfg.kv_width), tp).to(t.device)]
        if ".gate_up_proj." in name:
            return t[rank_major_rows((cfg.ffn_hidden, cfg.ffn_hidden), tp).to(t.device)]
        return t

    def error(a, b):  # relative to b's largest element
        return float((a - b).abs().max() / b.abs().max().clamp(min=1e-6))

    return {"single": {k: error(rows_of(k, v), rows_of(k, expected[k])) for k, v in single.items()},
            "sharded": {k: error(v, rows_of(k, expected[k])) for k, v in sharded.items()},
            "sharded vs single": {k: error(v, rows_of(k, single[k])) for k, v in sharded.items()},
            "fp8 layers": len(layers), "sharded layers": sum(isinstance(m.weight, DTensor) for m in layers)}


# (preset, recipe, sequence parallel) a stack runs: every recipe, both presets, both layouts of the residual stream
COMBOS = {"eager": [(0, "tensorwise", True), (1, "rowwise", False), (1, "delayed", True)],
          "fused": [(1, "tensorwise", False), (0, "rowwise", True), (0, "delayed", False)]}


def _worker(rank, impl):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    # each combination's one-process runs on one rank, shared with the other (multiprocess.split)
    references = multiprocess.split(rank, {
        index: lambda case=case, recipe=recipe: _reference(*CASES[case], impl, recipe)
        for index, (case, recipe, _) in enumerate(COMBOS[impl])})
    results = {}
    for index, (case, recipe, sp) in enumerate(COMBOS[impl]):
        preset, overrides = CASES[case]
        results[f"{preset} {overrides} {recipe} sequence_parallel={sp}"] = _case(rank, mesh, preset, overrides, impl,
                                                                                recipe, sp, references[index])
    return results


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_fp8_stack_under_tensor_parallelism_matches_one_process(impl, runs):
    """Two ranks' FP8 stack is as close to the fp32 model as one process's: output, x's gradient and every
    parameter's, each within 3x the one-process run's error + 0.02 (each tensor's error is FP8's noise at this size:
    5-30% of its largest element, either run up to 2.4x the other's on single tensors), 1.5x in their geometric mean;
    and it is an FP8 run (one-process error > 1%) that is not the one-process run (the shards' own scales)."""
    for rank, results in enumerate(runs(_worker, impl)):
        for case, result in results.items():
            assert result["fp8 layers"] > 0 and result["sharded layers"] == result["fp8 layers"], (case, result)
            ratios = []
            for name, single in result["single"].items():
                sharded = result["sharded"][name]
                assert sharded <= 3 * single + 0.02, (rank, case, name, sharded, single)
                ratios.append(max(sharded, 1e-6) / max(single, 1e-6))
            geometric_mean = torch.tensor(ratios).log().mean().exp().item()
            assert geometric_mean <= 1.5, (rank, case, geometric_mean)
            worst = max(result["single"].values())
            assert worst > 1e-2, f"{case}: the FP8 run is within {worst:.1e} of fp32: its GEMMs did not run in FP8"
            differs = max(result["sharded vs single"].values())
            assert differs > 0, f"{case}: the sharded run equals the one-process run bit for bit"


def _layer_worker(rank, recipe):
    """One Float8Linear under PyTorch's ColwiseParallel / RowwiseParallel and in the local form a fused MLP uses,
    against ``fp8_linear`` on the same shard in one process: the same FP8 GEMMs on the same operands, so the same
    bits (the row-parallel output and the column-parallel input gradient: the two ranks' bf16 partials summed)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import blockfuse.fp8
    from blockfuse.ops.fp8 import Float8Scaling

    device, tp = multiprocess.device(), multiprocess.WORLD
    mesh = init_device_mesh(device, (tp,))
    g = torch.Generator().manual_seed(11)
    full = torch.nn.Linear(64, 96).bfloat16().to(device)
    with torch.no_grad():  # (the same on both ranks: the styles broadcast rank 0's)
        full.weight.copy_(torch.randn(96, 64, generator=g) / 8)
        full.bias.copy_(torch.randn(96, generator=g))
    x = torch.randn(2, 7, 64, generator=g).bfloat16().to(device)
    probe = torch.randn(2, 7, 96, generator=g).bfloat16().to(device)
    checks = {}

    def expected(weight, bias, x_, probe_, steps):
        """Output, x's gradient, the weight's and the bias's of fp8_linear on these operands (delayed: a history of
        its own, ``steps`` calls, the last one's)."""
        states = (Float8Scaling.new(16, device), Float8Scaling.new(16, device)) if recipe == "delayed" else None
        for _ in range(steps):
            w = weight.detach().clone().requires_grad_()
            b = None if bias is None else bias.detach().clone().requires_grad_()
            xx = x_.detach().clone().requires_grad_()
            scaling = None if states is None else tuple(Float8Scaling(*s) for s in states)
            y = blockfuse.fp8.fp8_linear(xx, w, b, recipe=recipe, fp8_scaling=scaling)
            y.backward(probe_)
        return y.detach(), xx.grad, w.grad, None if b is None else b.grad

    steps = 2 if recipe == "delayed" else 1
    for style in ("colwise", "rowwise"):
        layer = blockfuse.fp8.convert(copy.deepcopy(full), recipe=recipe)
        if style == "colwise":
            parallelize_module(layer, mesh, ColwiseParallel())  # output: this rank's columns, a plain tensor
            rows = slice(rank * 48, (rank + 1) * 48)
            want = expected(full.weight[rows], full.bias[rows], x, probe[..., rows], steps)
            for _ in range(steps):
                layer.zero_grad(set_to_none=True)
                xx = x.clone().requires_grad_()
                y = layer(xx)
                y.backward(probe[..., rows])
            partial_dx = [torch.zeros_like(want[1]) for _ in range(tp)]
            torch.distributed.all_gather(partial_dx, want[1])
            got = (y, xx.grad, layer.weight.grad.to_local(), layer.bias.grad.to_local())
            want = (want[0], partial_dx[0] + partial_dx[1], want[2], want[3])
        else:
            layer = torch.nn.Sequential(layer)
            parallelize_module(layer, mesh, {"0": RowwiseParallel(input_layouts=Shard(-1))})
            cols = slice(rank * 32, (rank + 1) * 32)
            outs = [expected(full.weight[:, c], None, x[..., c], probe, steps)
                    for c in (slice(0, 32), slice(32, 64))]
            for _ in range(steps):
                layer.zero_grad(set_to_none=True)
                xx = x[..., cols].clone().requires_grad_()
                y = layer(xx)
                y.backward(probe)
            bias_grad = layer[0].bias.grad
            bias_grad = bias_grad.full_tensor() if isinstance(bias_grad, DTensor) else bias_grad
            got = (y, xx.grad, layer[0].weight.grad.to_local(), bias_grad)
            want = ((outs[0][0] + outs[1][0]) + full.bias, outs[rank][1], outs[rank][2],
                    probe.float().sum((0, 1)).to(probe.dtype))
        for name, a, b in zip(("output", "x grad", "weight grad", "bias grad"), got, want):
            checks[f"{style} {name}"] = float((a.detach().float() - b.float()).abs().max() / b.float().abs().max())
    # the local form (a plain x, the weight a DTensor): a fused MLP's, under FeedForwardParallel
    layer = blockfuse.fp8.convert(copy.deepcopy(full), recipe=recipe)
    parallelize_module(layer, mesh, ColwiseParallel())
    rows = slice(rank * 48, (rank + 1) * 48)
    want = expected(full.weight[rows], full.bias[rows], x, probe[..., rows], steps)
    for _ in range(steps):
        layer.zero_grad(set_to_none=True)
        xx = x.clone().requires_grad_()
        y = layer._forward_sharded(xx, None, None, None, None, None)  # (no hooks: a plain x)
        y.backward(probe[..., rows])
    for name, a, b in zip(("output", "x grad", "weight grad", "bias grad"),
                          (y, xx.grad, layer.weight.grad.to_local(), layer.bias.grad.to_local()), want):
        checks[f"local {name}"] = float((a.detach().float() - b.float()).abs().max() / b.float().abs().max())
    # the weight's cast is kept across calls (on the local tensor, not on each call's view of it), until it changes
    if recipe != "rowwise":
        from blockfuse.ops import fp8 as fp8_ops

        def kept():
            entry = getattr(layer.weight._local_tensor, fp8_ops._CACHE_ATTRIBUTE, None)
            return None if entry is None else entry[1]

        with torch.no_grad():
            layer(x)
            first = kept()
            layer(x)
            checks["cast kept (0: yes)"] = float(first is None or kept() is not first)
            layer.weight.to_local().mul_(0.5)
            layer(x)
            checks["cast made again after an update (0: yes)"] = float(kept() is first)
    return checks


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "delayed"])
def test_fp8_layer_shards_run_the_one_process_gemms_on_their_shards(recipe, runs):
    """Each rank's FP8 GEMMs are fp8_linear's on its shard, bit for bit, column- and row-parallel and in the local
    form; the summed parts (the row-parallel output, the column-parallel x gradient) equal the one-process sums
    within a bf16 rounding of the sum."""
    for rank, checks in enumerate(runs(_layer_worker, recipe)):
        for name, err in checks.items():
            limit = 8e-3 if name in ("rowwise output", "colwise x grad") else 0.0
            assert err <= limit, (rank, recipe, name, err)


def _convert_after_worker(rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    import blockfuse.fp8

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    layer = parallelize_module(torch.nn.Linear(64, 64), mesh, ColwiseParallel())
    try:
        blockfuse.fp8.convert(torch.nn.Sequential(layer))
    except ValueError as error:
        return str(error)
    return "no error"


def test_convert_after_parallelizing_raises(runs):
    """The styles' hooks are on the Linear: a Float8Linear swapped in afterwards would run without them."""
    for message in runs(_convert_after_worker):
        assert "0's weight is a DTensor" in message and "convert the model first" in message, message


def _compiled_worker(rank):
    """A fused stack under tp_plan compiled (aot_eager: the same kernels) before any eager call, in bf16 and with
    tensorwise FP8 layers: (its output's and x gradient's largest difference from the same stack eagerly)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    from blockfuse.distributed import tp_plan

    mesh = init_device_mesh(multiprocess.device(), (multiprocess.WORLD,))
    fp32, fp8, x, mask = _models("standard", {"mlp": "gelu_tanh"}, "fused", "tensorwise", multiprocess.device())
    results = {}
    for name, model in (("bf16", copy.deepcopy(fp32).bfloat16()), ("fp8 tensorwise", fp8)):
        parallelize_module(model, mesh, tp_plan(model, sequence_parallel=True))
        eager = copy.deepcopy(model)
        for index, block in enumerate(model.blocks):
            model.blocks[index] = torch.compile(block, backend="aot_eager")
        outs = []
        for module in (model, eager):  # (compiled first: nothing has run on DTensors eagerly in this process)
            x_ = x.bfloat16().clone().requires_grad_()
            out = module(x_, *mask)
            out.float().sum().backward()
            outs.append((out.detach(), x_.grad))
        results[name] = [float((a - b).abs().max()) for a, b in zip(*outs)]
    return results


def test_compiled_fused_stack_under_tensor_parallelism_equals_eager(runs):
    """Compiled before any eager call, a tensor-parallel fused stack's ops find their DTensor rules (registered when
    blockfuse.distributed is imported: lazily, at the first eager DTensor call, they were missing while Dynamo traced:
    "blockfuse.norm_fwd.default does not have a sharding strategy registered"), and its FP8 MLP takes the layers'
    sharded path (the traced forms that read a layer's weight themselves met a DTensor: "_scaled_mm got mixed
    torch.Tensor and DTensor"). Output and x gradient equal to eager's, bit for bit."""
    for rank, results in enumerate(runs(_compiled_worker)):
        for name, differences in results.items():
            assert differences == [0.0, 0.0], (rank, name, differences)

