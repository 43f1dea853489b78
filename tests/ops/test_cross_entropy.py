"""``blockfuse.linear_cross_entropy``: the LM head and its cross-entropy without the logits, against
``F.cross_entropy`` on materialized float64 logits, and against PyTorch's own result in the low dtype
(logits made by ``F.linear`` in that dtype, the loss in fp32, as Hugging Face computes it)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import blockfuse
from blockfuse.ops import cross_entropy
from tests.helpers import (
    as_layout, assert_all_close_to_reference, assert_compiles_like_eager, random_tensor, relative_error,
)

VOCAB = 203  # odd: the row kernel's last block of columns is partly masked
WIDTH = 40
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def make_inputs(lead, dtype, device, *, vocab=VOCAB, width=WIDTH, bias=False, seed=0, ignored=0.1):
    """hidden (*lead, width), weight (vocab, width) scaled so the logits are a few units, target with
    about ``ignored`` of its entries -100, bias or None."""
    hidden = random_tensor((*lead, width), dtype, device, seed=seed)
    weight = random_tensor((vocab, width), dtype, device, seed=seed + 1, scale=2.0 / width**0.5)
    b = random_tensor((vocab,), dtype, device, seed=seed + 2, scale=0.5) if bias else None
    generator = torch.Generator().manual_seed(seed + 3)
    target = torch.randint(0, vocab, lead, generator=generator)
    target[torch.rand(lead, generator=generator) < ignored] = -100
    return hidden, weight, target.to(device), b


def run(fn, hidden, weight, target, bias, grad_seed=9, **kwargs):
    """(loss, d hidden, d weight, d bias) of ``fn`` on fresh leaves of the inputs (in their dtype)."""
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (hidden, weight, bias)]
    h, w, b = leaves
    loss = fn(h, w, target, b, **kwargs)
    grad = random_tensor(loss.shape, torch.float32, loss.device, seed=grad_seed) if loss.dim() else None
    wanted = [t for t in leaves if t is not None]
    grads = torch.autograd.grad(loss, wanted, grad)
    grads = iter(grads)
    return [loss.detach()] + [next(grads) if t is not None else None for t in leaves]


def check_against_reference(hidden, weight, target, bias, **kwargs):
    ours = run(blockfuse.linear_cross_entropy, hidden, weight, target, bias, **kwargs)
    kwargs.pop("chunk_size", None)
    baseline = run(blockfuse.linear_cross_entropy_ref, hidden, weight, target, bias, **kwargs)
    oracle = run(blockfuse.linear_cross_entropy_ref, *(t.double() if t is not None else None
                                                        for t in (hidden, weight)), target,
                 None if bias is None else bias.double(), **kwargs)
    names = ["loss", "d hidden", "d weight", "d bias"]
    # The loss is fp32 (ours and PyTorch's); the gradients are in the inputs' dtype.
    assert_all_close_to_reference([ours[0]], [baseline[0]], [oracle[0].float()], names[:1],
                                  rounded_through=hidden.dtype)
    assert_all_close_to_reference(ours[1:], baseline[1:], oracle[1:], names[1:])


FORMS = {
    "plain": {},
    "bias": {"bias": True},
    "smoothing": {"label_smoothing": 0.1},
    "softcap": {"softcap": 3.0},
    "z_loss": {"z_loss": 1e-3},
    "sum": {"reduction": "sum"},
    "none": {"reduction": "none"},
    "everything": {"bias": True, "label_smoothing": 0.2, "softcap": 5.0, "z_loss": 1e-2},
}


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_float64_logits(form, dtype, device):
    options = dict(FORMS[form])
    hidden, weight, target, bias = make_inputs((2, 20), dtype, device, bias=options.pop("bias", False))
    # 40 tokens in chunks of 16: three chunks, the last one partial, the weight gradient summed over them (NOTE: were
    # 123 tokens in eight chunks: the same paths at a third of the interpreter's time)
    check_against_reference(hidden, weight, target, bias, chunk_size=16, **options)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("vocab,width,tokens", [(1, 8, 5), (7, 72, 199), (1000, 24, 3), (4099, 16, 19)])
def test_odd_sizes(vocab, width, tokens, device):
    """A vocabulary of one class, one under a block of columns, one over several blocks of columns."""
    hidden, weight, target, bias = make_inputs((tokens,), torch.float32, device, vocab=vocab, width=width,
                                               bias=True, ignored=0.0)
    check_against_reference(hidden, weight, target, bias, chunk_size=64)


def test_vocab_split_gives_the_gemms_aligned_sides():
    """The GEMMs run on the vocabulary's largest multiple of 8 and on the 1-7 classes left (GPT-2's 50257: 50256
    + 1); a multiple of 8, or fewer than 8 classes, takes one GEMM."""
    assert cross_entropy._parts(50257) == (slice(0, 50256), slice(50256, 50257))
    assert cross_entropy._parts(50264) == (slice(0, 50264),) and cross_entropy._parts(7) == (slice(0, 7),)
    assert cross_entropy._parts(4099) == (slice(0, 4096), slice(4096, 4099))


def test_logits_buffer_rows_are_padded_to_16():
    """A chunk's logits rows start every round_up(vocab, 16) elements, so that the row kernel and cuBLAS see aligned
    rows at any vocabulary (the odd sizes above run through it); a multiple of 16 is not padded."""
    like = torch.empty(0, dtype=torch.bfloat16)
    odd, even = cross_entropy.logits_buffer(like, 3, 301), cross_entropy.logits_buffer(like, 3, 320)
    assert odd.shape == (3, 301) and odd.stride() == (304, 1)
    assert even.shape == (3, 320) and even.is_contiguous()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_non_contiguous_hidden(layout, device):
    hidden, weight, target, _ = make_inputs((4, 9), torch.float32, device)
    check_against_reference(as_layout(hidden, layout), weight, target, None, chunk_size=8)


@pytest.mark.usefixtures("requires_triton")
def test_a_chunk_with_every_target_ignored(device):
    hidden, weight, target, _ = make_inputs((40,), torch.float32, device)
    target[:16] = -100  # the whole first chunk
    check_against_reference(hidden, weight, target, None, chunk_size=16)
    ours = run(blockfuse.linear_cross_entropy, hidden, weight, target, None, chunk_size=16, reduction="none")
    assert torch.equal(ours[0][:16], torch.zeros(16, device=device))
    assert torch.equal(ours[1][:16], torch.zeros_like(ours[1][:16]))  # no gradient from an ignored token


@pytest.mark.usefixtures("requires_triton")
def test_every_target_ignored(device):
    """Mean over no token is NaN, as PyTorch's; the gradients are zero (nothing contributes); sum is 0."""
    hidden, weight, target, _ = make_inputs((6,), torch.float32, device)
    target.fill_(-100)
    loss, dh, dw, _ = run(blockfuse.linear_cross_entropy, hidden, weight, target, None)
    assert torch.isnan(loss) and torch.isnan(F.cross_entropy(F.linear(hidden, weight), target))
    assert torch.equal(dh, torch.zeros_like(dh)) and torch.equal(dw, torch.zeros_like(dw))
    loss, dh, _, _ = run(blockfuse.linear_cross_entropy, hidden, weight, target, None, reduction="sum")
    assert loss.item() == 0.0 and torch.equal(dh, torch.zeros_like(dh))


@pytest.mark.usefixtures("requires_triton")
def test_custom_ignore_index_and_int32_targets(device):
    hidden, weight, target, _ = make_inputs((21,), torch.float32, device, ignored=0.0)
    target[::4] = 7  # class 7 ignored
    ours = run(blockfuse.linear_cross_entropy, hidden, weight, target.int(), None, ignore_index=7)
    expected = run(blockfuse.linear_cross_entropy_ref, hidden.double(), weight.double(), target, None, ignore_index=7)
    for a, b in zip(ours[:3], expected[:3]):
        assert relative_error(a, b) < 1e-5


@pytest.mark.usefixtures("requires_triton")
def test_return_lse_is_the_logits_logsumexp(device):
    hidden, weight, target, bias = make_inputs((2, 7), torch.float32, device, bias=True)
    loss, lse = blockfuse.linear_cross_entropy(hidden, weight, target, bias, softcap=4.0, return_lse=True,
                                               chunk_size=5)
    logits = F.linear(hidden.double(), weight.double(), bias.double())
    expected = torch.logsumexp(4.0 * torch.tanh(logits / 4.0), dim=-1)
    assert lse.shape == (2, 7) and lse.dtype == torch.float32 and not lse.requires_grad
    assert relative_error(lse, expected) < 1e-6


@pytest.mark.usefixtures("requires_triton")
def test_only_the_gradients_asked_for(device):
    """A frozen head (LoRA, say) gets no weight gradient; frozen hidden states get none either."""
    hidden, weight, target, _ = make_inputs((30,), torch.float32, device)
    h = hidden.clone().requires_grad_()
    loss = blockfuse.linear_cross_entropy(h, weight, target, chunk_size=8)
    (dh,) = torch.autograd.grad(loss, [h])
    w = weight.clone().requires_grad_()
    loss = blockfuse.linear_cross_entropy(hidden, w, target, chunk_size=8)
    (dw,) = torch.autograd.grad(loss, [w])
    expected = run(blockfuse.linear_cross_entropy_ref, hidden.double(), weight.double(), target, None)
    assert relative_error(dh, expected[1]) < 1e-5 and relative_error(dw, expected[2]) < 1e-5
    with torch.no_grad():
        loss = blockfuse.linear_cross_entropy(hidden, weight, target, chunk_size=8)
    assert relative_error(loss, expected[0]) < 1e-6


@pytest.mark.usefixtures("requires_triton")
def test_upstream_gradient_scales_the_gradients(device):
    """The gradients made in the forward are scaled by the loss's incoming gradient (here 3)."""
    hidden, weight, target, _ = make_inputs((30,), torch.float32, device)
    h = hidden.clone().requires_grad_()
    (dh,) = torch.autograd.grad(3.0 * blockfuse.linear_cross_entropy(h, weight, target), [h])
    h64 = hidden.double().requires_grad_()
    (expected,) = torch.autograd.grad(3.0 * blockfuse.linear_cross_entropy_ref(h64, weight.double(), target), [h64])
    assert relative_error(dh, expected) < 1e-5


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("as_tensor", [False, True], ids=["number", "tensor"])
def test_divisor_divides_the_sum_in_the_forward(as_tensor, dtype, device, monkeypatch):
    """reduction="sum" with divisor=k (Hugging Face's num_items_in_batch): the loss is the sum / k, the gradients
    those of it within 2x PyTorch's error (in bf16 too: one rounding of each, made in the forward), and a plain
    loss.backward() leaves them as the forward made them (no scaling pass)."""
    hidden, weight, target, bias = make_inputs((3, 9), dtype, device, bias=True)
    k = torch.tensor(13) if as_tensor else 13
    scaled = []
    original = cross_entropy.scale_gradients
    monkeypatch.setattr(cross_entropy, "scale_gradients", lambda *args: scaled.append(args[-1]) or original(*args))

    def summed(h, w, t, b, **kwargs):
        return blockfuse.linear_cross_entropy(h, w, t, b, reduction="sum", divisor=k)

    def reference(h, w, t, b, **kwargs):
        return blockfuse.linear_cross_entropy_ref(h, w, t, b, reduction="sum") / 13

    leaves = [t.detach().clone().requires_grad_() for t in (hidden, weight, bias)]
    summed(*leaves[:2], target, leaves[2]).backward()
    assert all(float(g) == 1.0 for g in scaled)
    ours = run(summed, hidden, weight, target, bias)
    baseline = run(reference, hidden, weight, target, bias)
    oracle = run(reference, hidden.double(), weight.double(), target, bias.double())
    names = ["loss", "d hidden", "d weight", "d bias"]
    assert_all_close_to_reference([ours[0]], [baseline[0]], [oracle[0].float()], names[:1], rounded_through=dtype)
    assert_all_close_to_reference(ours[1:], baseline[1:], oracle[1:], names[1:])


def test_divisor_checks():
    hidden, weight, target, _ = make_inputs((4,), torch.float32, "cpu")
    with pytest.raises(ValueError, match="divisor: the sum's divisor goes with reduction='sum', got "
                                         "reduction='mean'"):
        blockfuse.linear_cross_entropy(hidden, weight, target, divisor=2)
    for bad in (0, -1.0, float("inf"), True, "2"):
        with pytest.raises(ValueError, match="divisor: expected a positive finite number"):
            blockfuse.linear_cross_entropy(hidden, weight, target, reduction="sum", divisor=bad)
    with pytest.raises(ValueError, match="divisor: expected a number or a one-element real tensor"):
        blockfuse.linear_cross_entropy(hidden, weight, target, reduction="sum", divisor=torch.ones(2))


@pytest.mark.usefixtures("requires_triton")
def test_a_second_backward_through_the_graph_is_refused(device):
    hidden, weight, target, _ = make_inputs((10,), torch.float32, device)
    h = hidden.clone().requires_grad_()
    loss = blockfuse.linear_cross_entropy(h, weight, target)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, reduction, device):
    """One graph, no graph break, the same loss and gradients as eager (the chunk loop is one opaque op)."""
    hidden, weight, target, bias = make_inputs((2, 11), torch.float32, device, bias=True)

    def loss_of(h, w, t, b, **kwargs):
        return blockfuse.linear_cross_entropy(h, w, t, b, reduction=reduction, chunk_size=8, label_smoothing=0.1)

    assert_compiles_like_eager(loss_of, lambda fn: run(fn, hidden, weight, target, bias),
                               ["loss", "d hidden", "d weight", "d bias"], backend=backend, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("backend, reduction", [("aot_eager", "mean"), ("inductor", "none")])
def test_torch_compile_fullgraph_low_memory_two_passes(backend, reduction, device, monkeypatch):
    """``chunk_size="low-memory"`` where it takes the two-pass loop (40 tokens in chunks of 16, 203 classes in blocks
    of 64): one graph, no break, eager's loss and gradients."""
    monkeypatch.setattr(cross_entropy, "low_memory_plan", lambda *shape: (16, 64))
    two_pass, calls = cross_entropy._two_pass_loop, []
    monkeypatch.setattr(cross_entropy, "_two_pass_loop", lambda *a, **k: calls.append(1) or two_pass(*a, **k))
    hidden, weight, target, bias = make_inputs((2, 20), torch.float32, device, bias=True)
    target[0, :20] = -100

    def loss_of(h, w, t, b, **kwargs):
        return blockfuse.linear_cross_entropy(h, w, t, b, reduction=reduction, chunk_size="low-memory",
                                              label_smoothing=0.1, z_loss=1e-3)

    assert_compiles_like_eager(loss_of, lambda fn: run(fn, hidden, weight, target, bias),
                               ["loss", "d hidden", "d weight", "d bias"], backend=backend, rtol=1e-5, atol=1e-6)
    assert calls  # the two-pass loop ran (compiled and eager)


def test_default_chunk_size_rule():
    # the chunk's logits within a quarter of the inputs (hidden and weight), at least 64 MiB, whole GEMM tiles
    assert cross_entropy.default_chunk_size(8192, 4096, 128256, 2) == 1024  # 250 of 1088 MiB
    assert cross_entropy.default_chunk_size(16384, 2048, 32000, 2) == 1024  # 64 MiB (a quarter is 47)
    assert cross_entropy.default_chunk_size(4096, 4096, 262144, 2) == 1024  # 512 of 2080 MiB
    assert cross_entropy.default_chunk_size(8192, 256, 2000000, 2) == 128  # never under a GEMM tile of rows
    assert cross_entropy.default_chunk_size(50, 4096, 32000, 2) == 50  # no more than the tokens


TWO_PASS_CASES = [(form, torch.bfloat16) for form in FORMS] + [("everything", torch.float32),
                                                                 ("everything", torch.float16)]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form,dtype", TWO_PASS_CASES, ids=[f"{f}-{d}" for f, d in TWO_PASS_CASES])
def test_two_pass_loop_matches_float64_logits(form, dtype, device, monkeypatch):
    """The low-memory two-pass loop: 40 tokens in chunks of 16 (three, the last partial), 203 classes in blocks of
    64 (four, the last of 11), every form, against the float64 logits."""
    monkeypatch.setattr(cross_entropy, "low_memory_plan", lambda *shape: (16, 64))
    options = dict(FORMS[form])
    # NOTE: 40 tokens (were 123 in eight chunks): three chunks keep a first one all ignored, one summed after it and
    # a partial last one, at a third of the interpreter's time
    hidden, weight, target, bias = make_inputs((2, 20), dtype, device, bias=options.pop("bias", False))
    target[0, :20] = -100  # a chunk (and more) with every target ignored
    check_against_reference(hidden, weight, target, bias, chunk_size="low-memory", **options)


@pytest.mark.parametrize("tokens,width,vocab,plan", [
    (4096, 4096, 262144, (1024, 7680)),  # 64-token chunks: two passes, 35 blocks
    (8192, 4096, 151936, (1024, 10240)),  # 128-token chunks (Qwen's vocabulary): two passes
    (8192, 4096, 128256, (256, 0)),  # 256-token chunks: one pass
    (16384, 2048, 32000, (1024, 0)),  # 1024-token chunks: one pass
    (300, 4096, 128256, (16, 0)),  # fewer tokens than 4 x 128: one pass
    (4096, 256, 262144, (1024, 3072)),  # a narrow model: within the 16 tokens' logits (low_memory_min_chunk)
])
def test_low_memory_plan(tokens, width, vocab, plan):
    """The two-pass loop where a low-memory chunk would have fewer than 256 tokens, its logits block and fp32 d hidden
    rows within the one-pass loop's logits (Liger-Kernel's memory)."""
    assert cross_entropy.low_memory_plan(tokens, width, vocab, 2) == plan
    chunk, block = plan
    if block:
        rows = cross_entropy.low_memory_chunk_size(tokens, width, vocab)
        assert chunk * block * 2 + chunk * width * 4 <= rows * vocab * 2
        assert cross_entropy.chunk_plan("low-memory", tokens, width, vocab, 2) == plan


def test_chunk_rules_follow_the_table(monkeypatch):
    """The chunk rules read TUNING at each call: a table swapped in (benchmarks/cross_entropy_chunks.py's
    low_memory_two_pass) is the one they follow."""
    shipped = cross_entropy.TUNING

    def swap(**fields):
        monkeypatch.setattr(cross_entropy, "TUNING", dataclasses.replace(shipped, **fields))

    swap(min_chunk_bytes=256 << 20)
    assert cross_entropy.default_chunk_size(16384, 2048, 32000, 2) == 4096  # (shipped, 64 MiB: 1024)
    swap(low_memory_min_chunk=64)
    assert cross_entropy.low_memory_chunk_size(100, 64, 256000) == 64  # (shipped: 16)
    swap(low_memory_two_pass=True)
    assert cross_entropy.low_memory_plan(8192, 4096, 128256, 2) == (1024, 23296)  # (shipped: one pass)
    swap(low_memory_two_pass=False)
    assert cross_entropy.low_memory_plan(4096, 4096, 262144, 2) == (64, 0)  # (shipped: two passes)
    swap(low_memory_two_pass_below=128)
    assert cross_entropy.low_memory_plan(8192, 4096, 151936, 2) == (128, 0)  # (shipped: two, under 256)


@pytest.mark.usefixtures("requires_triton")
def test_kernel_blocks_follow_the_table(monkeypatch, device):
    """The row kernel's block of classes and the gradients' scale's block come from TUNING at each call."""
    launched = {}

    def spy(name, kernel):
        def call(grid, *args, **constexprs):
            launched.setdefault(name, set()).add(constexprs["BLOCK_V" if name == "rows" else "BLOCK"])
            return kernel(grid, *args, **constexprs)
        return call

    monkeypatch.setattr(cross_entropy, "_rows_kernel", spy("rows", cross_entropy._rows_kernel))
    monkeypatch.setattr(cross_entropy, "_scale", spy("scale", cross_entropy._scale))
    monkeypatch.setattr(cross_entropy, "TUNING", dataclasses.replace(cross_entropy.TUNING, max_block_v=64,
                                                                     scale_block=128))
    hidden, weight, target, bias = make_inputs((9,), torch.float32, device)
    check_against_reference(hidden, weight, target, bias)
    assert launched == {"rows": {64}, "scale": {128}}, launched  # (256 and 4096 shipped, at 203 classes)


def liger_chunk(tokens, width, vocab):
    """Liger-Kernel 0.8.5's fused loss's chunk, as its documentation states the rule (the facts the low-memory
    rule is checked against, not its code): next_power_of_2(cdiv(tokens, cdiv(vocab, width)))."""
    per = -(-vocab // width)
    return 1 << (-(-tokens // per) - 1).bit_length()


@pytest.mark.parametrize("tokens,width,vocab", [(8192, 4096, 128256), (16384, 2048, 32000), (4096, 4096, 262144)])
def test_low_memory_chunks_hold_what_liger_holds(tokens, width, vocab):
    """chunk_size="low-memory" at the issue's shapes: Liger's chunk (256, 1024, 64 tokens), logits within the hidden
    states' elements."""
    chunk = cross_entropy.low_memory_chunk_size(tokens, width, vocab)
    assert chunk == liger_chunk(tokens, width, vocab)
    assert chunk * vocab <= tokens * width and 2 * chunk * vocab > tokens * width


def test_low_memory_chunk_rule_bounds():
    rule = cross_entropy.low_memory_chunk_size
    assert rule(8192, 2560, 151936) == 128  # 137.9 -> a power of two under it (Liger's: 256, logits 1.9x hidden)
    assert rule(100, 64, 256000) == 16  # never under TUNING.low_memory_min_chunk tokens
    assert rule(10, 64, 256000) == 10  # nor more than the tokens
    assert rule(300, 4096, 1000) == 300
    assert cross_entropy.chunk_rows("low-memory", 8192, 4096, 128256, 2) == 256
    assert cross_entropy.chunk_rows(None, 8192, 4096, 128256, 2) == 1024
    assert cross_entropy.chunk_rows(77, 8192, 4096, 128256, 2) == 77


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_low_memory_chunks_match_float64_logits(dtype, device):
    """123 tokens of width 40 over 203 classes: low-memory chunks of 16 tokens (24.2 would fit), eight of them."""
    hidden, weight, target, bias = make_inputs((3, 41), dtype, device, bias=True)
    assert cross_entropy.low_memory_chunk_size(123, WIDTH, VOCAB) == 16
    check_against_reference(hidden, weight, target, bias, chunk_size="low-memory", label_smoothing=0.1)


BAD = [
    (dict(target=torch.tensor([0, 1, 203, 2])), ValueError, r"target: expected class indices in \[0, 203\)"),
    (dict(target=torch.tensor([0, -5, 1, 2])), ValueError, "target: expected class indices"),
    (dict(target=torch.zeros(3, dtype=torch.long)), ValueError, r"target: expected shape \(4,\)"),
    (dict(target=torch.zeros(4)), TypeError, "target: expected an integer tensor"),
    (dict(weight=torch.randn(203, 41)), ValueError, r"weight: expected shape \(vocab, 40\)"),
    (dict(weight=torch.randn(203, 40, dtype=torch.float64)), TypeError, "weight: expected torch.float32"),
    (dict(bias=torch.randn(202)), ValueError, r"bias: expected shape \(203,\)"),
    (dict(reduction="avg"), ValueError, "reduction: expected one of"),
    (dict(label_smoothing=1.5), ValueError, "label_smoothing"),
    (dict(softcap=0.0), ValueError, "softcap: expected a positive finite number"),
    (dict(z_loss=-1.0), ValueError, "z_loss"),
    (dict(chunk_size=0), ValueError, "chunk_size: expected a positive int"),
    (dict(chunk_size="low"), ValueError, "chunk_size: expected a positive int, None or 'low-memory'"),
    (dict(ignore_index=1.5), TypeError, "ignore_index: expected an int"),
]


@pytest.mark.parametrize("change,error,match", BAD, ids=[m.split(":")[0] + str(i) for i, (_, _, m) in enumerate(BAD)])
def test_bad_arguments_are_named(change, error, match):
    arguments = dict(hidden=torch.randn(4, 40), weight=torch.randn(203, 40), target=torch.tensor([0, 1, -100, 202]),
                     bias=None)
    arguments.update(change)
    positional = [arguments.pop(name) for name in ("hidden", "weight", "target", "bias")]
    with pytest.raises(error, match=match):
        blockfuse.linear_cross_entropy(*positional, **arguments)
