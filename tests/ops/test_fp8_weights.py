"""Tests of the grouped weight casts (``blockfuse/ops/fp8_weights.py``): several weights' e4m3 casts in two launches,
kept where the FP8 layers find them. They must be the layers' own casts bit for bit (the same amax, scale and
rounding), be made only for weights whose kept cast is missing or stale, and leave alone what the layers must cast
themselves."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

import blockfuse.fp8
import blockfuse.models.fused as fused_module
from blockfuse.models import PRESETS, TransformerBlock, convert
from blockfuse.ops import fp8, fp8_weights
from blockfuse.ops.launch import Kernel

pytestmark = pytest.mark.usefixtures("requires_triton")

# Shapes past one block of a small tile (64 elements: the ``small_tile`` fixture) and past several blocks a program (the
# interpreter's 16 amax programs in all), odd sizes, a single row and a single element.
SHAPES = [(48, 32), (33, 17), (7, 300), (130, 129), (1, 5), (1, 1)]


@pytest.fixture
def small_tile(monkeypatch):
    """Blocks of 64 elements in the interpreter (its own tile is a few blocks a weight, for the tests' speed): many
    programs a weight and several blocks a program at the tests' sizes, as a GPU's tile has at a model's."""
    monkeypatch.setitem(fp8_weights.TILE, "interpreted", (64, 64, 4))


def _own_cast(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's own cast of ``weight`` (ops/fp8.py's _weight_operands, the cache cleared first)."""
    fp8.clear_weight_cache(weight)
    w_q, w_s, _, _ = fp8._weight_operands(weight, False, False, False)
    return w_q, w_s


def _kept(weight: torch.Tensor):
    return getattr(weight, fp8._CACHE_ATTRIBUTE, None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_grouped_casts_are_the_layers_casts_bit_for_bit(dtype, device, small_tile):
    generator = torch.Generator().manual_seed(0)
    weights = [torch.nn.Parameter((torch.randn(shape, generator=generator) * 3 ** i).to(device, dtype))
               for i, shape in enumerate(SHAPES)]
    weights[2].data[3, 7] = -1000.0  # the amax in one element, negative, in the middle of a program's block
    assert fp8_weights.cast_weights(weights) == len(SHAPES)  # two groups: 4 weights, then 2
    for weight in weights:
        key, w_q, w_s = _kept(weight)
        assert key == fp8.weight_cache_key(weight, False)
        own_q, own_s = _own_cast(weight)
        assert w_q.dtype == torch.float8_e4m3fn and w_q.shape == weight.shape and w_s.dim() == 0
        # (the reference on the CPU, whose division by a scalar is IEEE's; CUDA's multiplies by the reciprocal)
        expected = (weight.detach().abs().max().float().cpu().clamp_min(1e-12) / 448.0).item()
        assert w_s.item() == own_s.item() == expected
        assert torch.equal(w_q.view(torch.uint8), own_q.view(torch.uint8))
        assert w_s.data_ptr() % 16 == 0  # each 0-d scale aligned as the GEMM's own scales are


def test_only_missing_or_stale_casts_are_made(device, small_tile):
    weights = [torch.nn.Parameter(torch.randn(40, 24, device=device)) for _ in range(3)]
    assert fp8_weights.cast_weights(weights) == 3
    kept = [_kept(w) for w in weights]
    assert fp8_weights.cast_weights(weights) == 0  # all kept and current: nothing made
    assert all(_kept(w) is entry for w, entry in zip(weights, kept))
    with torch.no_grad():
        weights[1].mul_(2.0)  # an in-place write bumps the version: that cast alone is stale
    assert fp8_weights.cast_weights(weights) == 1
    assert _kept(weights[0]) is kept[0] and _kept(weights[2]) is kept[2]
    assert _kept(weights[1]) is not kept[1]
    assert torch.equal(_kept(weights[1])[1].view(torch.uint8), _own_cast(weights[1])[0].view(torch.uint8))
    torch.optim.SGD([weights[0]], lr=0.1).step()  # any optimizer step: every kept cast is stale
    assert fp8_weights.cast_weights(weights) == 3


def test_weights_the_layers_cast_themselves_are_skipped(device):
    plain = torch.nn.Parameter(torch.randn(16, 8, device=device))
    transposed = torch.nn.Parameter(torch.randn(8, 16, device=device)).t()  # not contiguous
    with torch.inference_mode():
        inference = torch.randn(16, 8, device=device)  # an inference tensor: its casts are never kept
    empty = torch.nn.Parameter(torch.randn(0, 8, device=device))
    assert fp8_weights.cast_weights([None, transposed, inference, empty, plain]) == 1
    assert _kept(plain) is not None
    assert all(_kept(t) is None for t in (transposed, inference, empty))


def test_nothing_is_cast_while_tracing(device):
    weight = torch.nn.Parameter(torch.randn(16, 8, device=device))

    def traced(w):
        return torch.tensor(float(fp8_weights.cast_weights([w])))

    assert torch.compile(traced, backend="eager", fullgraph=True)(weight).item() == 0.0
    assert _kept(weight) is None


def _counted_launches(patch) -> list[str]:
    """The names of the kernels launched from now on (the interpreter's launches: every one takes _launch_slow)."""
    names = []
    original = Kernel._launch_slow

    def counting(self, grid, args, constexprs, options):
        names.append(self.name)
        return original(self, grid, args, constexprs, options)

    patch.setattr(Kernel, "_launch_slow", counting)
    return names


def _small_block(recipe: str, device: str, dtype=torch.bfloat16):
    config = replace(PRESETS["te-4layer"].config, d_model=64, n_heads=4, ffn_hidden=128)
    torch.manual_seed(0)
    return blockfuse.fp8.convert(convert(TransformerBlock(config, "eager").to(device, dtype), "fused"), recipe=recipe)


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed"])
def test_a_fused_block_casts_its_weights_in_two_launches(recipe, monkeypatch, device):
    """A fused FP8 block's training step makes its four weights' casts in one amax launch and one cast launch instead
    of four of each, and the step's output and every gradient equal those of the same block casting weight by
    weight."""
    if device == "cuda":
        pytest.skip("counts the interpreter's launches (on a GPU launches take the cached path)")
    grouped = _small_block(recipe, device)
    alone = copy.deepcopy(grouped)
    x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(1)).bfloat16().to(device)
    dy = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(2)).bfloat16().to(device)
    results = {}
    for name, block in (("alone", alone), ("grouped", grouped)):
        with monkeypatch.context() as patch:
            if name == "alone":
                patch.setattr(fused_module, "cast_weights", lambda weights: 0)
            launches = _counted_launches(patch)
            xi = x.clone().requires_grad_()
            out = block(xi)
            forward = list(launches)
            out.backward(dy)
        results[name] = (out, xi.grad, [p.grad for p in block.parameters()], forward)
    out, dx, grads, forward = results["grouped"]
    assert forward.count("_fp8_weights_amax_kernel") == forward.count("_fp8_weights_cast_kernel") == 1
    alone_forward = results["alone"][3]
    for kernel in ("_fp8_tensor_amax_kernel", "_fp8_cast_kernel"):  # the layers' own weight casts: 4 of each fewer
        assert alone_forward.count(kernel) - forward.count(kernel) == 4, (kernel, forward, alone_forward)
    assert len(alone_forward) - len(forward) == 6
    assert torch.equal(out, results["alone"][0]) and torch.equal(dx, results["alone"][1])
    for grad, other in zip(grads, results["alone"][2]):
        assert torch.equal(grad, other)


def test_hooked_or_rowwise_layers_cast_their_own(device):
    block = _small_block("tensorwise", device, torch.float32)
    block.attn.o_proj.register_forward_pre_hook(lambda module, args: None)  # FSDP2 of a lone layer gathers here
    fused_module.cast_fp8_weights(block)
    assert _kept(block.attn.o_proj.weight) is None
    others = (block.attn.qkv_proj, block.ffn.gate_up_proj, block.ffn.down_proj)
    assert all(_kept(layer.weight) is not None for layer in others)
    rowwise = _small_block("rowwise", device, torch.float32)
    fused_module.cast_fp8_weights(rowwise)
    assert all(_kept(p) is None for p in rowwise.parameters())


@pytest.mark.parametrize("blocks", [[1], [7, 3], [28672, 4096, 6144, 14336], [10**6, 1, 1, 1], [3000, 3000]])
def test_amax_programs_are_bounded_and_balanced(blocks):
    """Every amax program takes the same number of blocks, no weight has more partials than a cast program reduces
    (MAX_PARTIALS), and the programs in all come near the target (a huge weight beside small ones: the bound rules)."""
    iters = fp8_weights.amax_iterations(blocks, torch.device("cpu"))
    programs = [-(-b // iters) for b in blocks]
    assert all(p <= fp8_weights.MAX_PARTIALS for p in programs)
    assert all((p - 1) * iters < b <= p * iters for p, b in zip(programs, blocks))  # each program has blocks
    if max(blocks) <= fp8_weights.MAX_PARTIALS * -(-sum(blocks) // fp8_weights.INTERPRETED_AMAX_PROGRAMS):
        assert sum(programs) <= fp8_weights.INTERPRETED_AMAX_PROGRAMS + len(blocks)


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed"])
def test_a_models_weights_cast_ahead(recipe, device):
    """``blockfuse.fp8.cast_weights(model)`` on any model (a stack of Linear layers here, no fused block): every
    layer's cast made ahead, found by the layers (none cast again), and the step's output and gradients those of the
    same model casting as it runs; made again only after an optimizer step."""
    torch.manual_seed(0)
    stack = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 64),
                                torch.nn.Linear(64, 48), torch.nn.Linear(48, 32), torch.nn.Linear(32, 16))
    ahead = blockfuse.fp8.convert(stack.to(device, torch.bfloat16), recipe=recipe)
    alone = copy.deepcopy(ahead)
    assert blockfuse.fp8.cast_weights(ahead) == 5  # five layers: two launch pairs
    kept = [_kept(layer.weight) for layer in ahead if isinstance(layer, blockfuse.fp8.Float8Linear)]
    x = torch.randn(4, 8, 64, generator=torch.Generator().manual_seed(3)).to(device, torch.bfloat16)
    outs = []
    for model in (ahead, alone):
        xi = x.clone().requires_grad_()
        y = model(xi)
        y.float().square().sum().backward()
        outs.append((y, xi.grad, [p.grad for p in model.parameters()]))
    after = [_kept(layer.weight) for layer in ahead if isinstance(layer, blockfuse.fp8.Float8Linear)]
    assert all(entry is before for entry, before in zip(after, kept))  # the layers made none of their own
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert all(torch.equal(a, b) for a, b in zip(outs[0][2], outs[1][2]))
    assert blockfuse.fp8.cast_weights(ahead) == 0
    torch.optim.SGD(ahead.parameters(), lr=1e-3).step()
    assert blockfuse.fp8.cast_weights(ahead) == 5


def test_a_models_weights_cast_ahead_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="model: expected a torch.nn.Module"):
        blockfuse.fp8.cast_weights([torch.nn.Parameter(torch.randn(16, 16))])
    rowwise = blockfuse.fp8.convert(torch.nn.Linear(32, 16), recipe="rowwise")
    assert blockfuse.fp8.cast_weights(rowwise) == 0  # rowwise layers cast by rows, their own
