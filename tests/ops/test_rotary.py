"""Tests of the fused rotary position embedding ``blockfuse.ops.rotary.rotary``.

The oracle is the rotation written as Hugging Face writes it (``x * cos + rotate_half(x) *
sin``, generalized to interleaved pairs and partial rotary) in float64 on ``.double()``
copies of the inputs and of the table values the op was given; the baseline is the same
formula run by PyTorch in the low dtype with the tables cast to it (Hugging Face's eager
path). A fused result may be at most about 2x as wrong as the baseline
(``tests.helpers.assert_close_to_reference``). Independent checks: Hugging Face's own
``apply_rotary_pos_emb`` / ``LlamaRotaryEmbedding`` / GPT-NeoX partial rotary, and Meta's
complex-number form for the interleaved convention. The reference beside the kernel
(``rotary_ref``) is checked against the oracle in ``test_reference_*``.
"""

from __future__ import annotations

import dataclasses
import textwrap

import pytest
import torch

from blockfuse.ops.rotary import rotary, rotary_ref
from tests.helpers import (
    assert_compiles_like_eager,
    assert_runs_without_interpreter,
    as_layout,
    assert_all_close_to_reference,
    downcast,
    grads,
    leaves,
    make_generator,
    random_tensor,
    relative_error,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LAYOUT_PAIRS = [("bshd", "bshd"), ("bshd", "bhsd"), ("bhsd", "bshd"), ("bhsd", "bhsd")]


# ---------------------------------------------------------------------------------------------
# A call of the op: shapes, tables, positions, memory layout of q and k
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    batch: int = 3
    seq: int = 7
    q_heads: int = 6
    k_heads: int = 2
    head_dim: int = 72
    rotary_dim: int | None = None  # None: head_dim
    interleaved: bool = False
    layout: str = "bshd"
    out_layout: str | None = None
    # half: (max_seq, r/2) fp32; full: HF's duplicated (max_seq, r) fp32; full-lowp: the same in
    # q's dtype; half-view: the half read out of a full table by slicing (a strided view);
    # per-token: HF's (batch, seq, r) in q's dtype; per-token-1: (1, seq, r)
    table: str = "half"
    # none; offset: seq_offset=5; ids: (batch, seq) int64, shuffled with repeats; ids-1d:
    # (seq,); ids-int32; ids-row: (1, seq)
    positions: str = "none"
    # contiguous; qkv: slices of a fused projection output; transposed: head_dim not contiguous
    source: str = "contiguous"
    grad_layout: str = "contiguous"  # or "transposed": non-contiguous incoming grads
    pass_rotary_dim: bool = False  # give rotary_dim= explicitly

    @property
    def rot(self) -> int:
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    def shape(self, heads: int, layout: str | None = None) -> tuple[int, int, int, int]:
        layout = layout or self.layout
        if layout == "bshd":
            return (self.batch, self.seq, heads, self.head_dim)
        return (self.batch, heads, self.seq, self.head_dim)

    def max_seq(self) -> int:
        return self.seq + 9

    def kwargs(self) -> dict:
        return {"interleaved": self.interleaved, "layout": self.layout, "out_layout": self.out_layout}


def case_id(case: Case) -> str:
    default = Case()
    parts = [f"{f.name}={getattr(case, f.name)}" for f in dataclasses.fields(Case)
             if getattr(case, f.name) != getattr(default, f.name)]
    return ",".join(parts) or "default"


def make_qk(case: Case, dtype, device, seed=0):
    """q, k in ``case.layout`` with the memory layout ``case.source``; values ~ randn * 2."""
    q_shape, k_shape = case.shape(case.q_heads, "bshd"), case.shape(case.k_heads, "bshd")
    if case.source == "qkv":
        width = (case.q_heads + 2 * case.k_heads) * case.head_dim
        qkv = random_tensor((case.batch, case.seq, width), dtype, device, seed=seed, scale=2.0)
        q = qkv[..., : case.q_heads * case.head_dim].unflatten(-1, (case.q_heads, case.head_dim))
        k = qkv[..., case.q_heads * case.head_dim:(case.q_heads + case.k_heads) * case.head_dim]
        k = k.unflatten(-1, (case.k_heads, case.head_dim))
        assert not q.is_contiguous() and not k.is_contiguous()
    else:
        q = random_tensor(q_shape, dtype, device, seed=seed, scale=2.0)
        k = random_tensor(k_shape, dtype, device, seed=seed + 1, scale=2.0)
    if case.layout == "bhsd":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        if case.source == "contiguous":
            q, k = q.contiguous(), k.contiguous()
    if case.source == "transposed":
        q, k = as_layout(q, "transposed"), as_layout(k, "transposed")
    return q, k


def make_positions(case: Case, device, seed=7):
    """(position_ids or None, seq_offset, positions (batch or 1, seq) int64 for the oracle)."""
    generator = make_generator(seed)
    offset = 0
    if case.positions in ("none", "offset"):
        offset = 5 if case.positions == "offset" else 0
        return None, offset, (torch.arange(case.seq) + offset)[None]
    rows = case.batch if case.positions in ("ids", "ids-int32") else 1
    ids = torch.randint(0, case.max_seq(), (rows, case.seq), generator=generator)
    if case.seq > 2:
        ids[:, 1] = ids[:, 0]  # a repeated position
    positions = ids
    if case.positions == "ids-1d":
        ids = ids[0]
    if case.positions == "ids-int32":
        ids = ids.to(torch.int32)
    return ids.to(device), 0, positions


def make_tables(case: Case, dtype, device, positions, seed=11):
    """(cos, sin as passed to the op, cos and sin half values (batch or 1, seq, r/2) in float64).

    The angles are random (not a frequency ladder), so every pair sees a different rotation."""
    r = case.rot
    angles = random_tensor((case.max_seq(), r // 2), torch.float32, seed=seed, scale=3.0)
    half_cos, half_sin = angles.cos(), angles.sin()  # (max_seq, r/2) fp32
    table_dtype = dtype if case.table in ("full-lowp", "per-token", "per-token-1") else torch.float32
    half_cos, half_sin = half_cos.to(table_dtype), half_sin.to(table_dtype)

    def full(half):
        return half.repeat_interleave(2, dim=-1) if case.interleaved else torch.cat((half, half), dim=-1)

    if case.table == "half":
        cos, sin = half_cos, half_sin
    elif case.table in ("full", "full-lowp"):
        cos, sin = full(half_cos), full(half_sin)
    elif case.table == "half-view":
        slice_half = (lambda t: t[:, 0::2]) if case.interleaved else (lambda t: t[:, : r // 2])
        cos, sin = slice_half(full(half_cos)), slice_half(full(half_sin))
        assert not cos.is_contiguous() or not case.interleaved
    elif case.table in ("per-token", "per-token-1"):
        rows = positions if case.table == "per-token-1" else positions.expand(case.batch, -1)
        if case.table == "per-token-1":
            rows = rows[:1]
        cos, sin = full(half_cos)[rows], full(half_sin)[rows]  # (batch or 1, seq, r)
    else:
        raise ValueError(case.table)
    gathered = (half_cos.double()[positions], half_sin.double()[positions])
    return cos.to(device), sin.to(device), gathered


def formula(x, cos_half, sin_half, case: Case, layout: str, out_layout: str):
    """Hugging Face's rotation in x's dtype: ``x * cos + swap(x) * sin`` on the first r elements
    of each head (swap = rotate_half, or (-x_odd, x_even) pairs), the rest passed through."""
    r = case.rot
    x = x if layout == "bshd" else x.transpose(1, 2)  # (batch, seq, heads, head_dim)
    c = cos_half.to(x.dtype)[:, :, None, :]
    s = sin_half.to(x.dtype)[:, :, None, :]
    rot, rest = x[..., :r], x[..., r:]
    if case.interleaved:
        c, s = c.repeat_interleave(2, dim=-1), s.repeat_interleave(2, dim=-1)
        swapped = torch.stack((-rot[..., 1::2], rot[..., 0::2]), dim=-1).flatten(-2)
    else:
        c, s = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
        swapped = torch.cat((-rot[..., r // 2:], rot[..., : r // 2]), dim=-1)
    y = torch.cat((rot * c + swapped * s, rest), dim=-1)
    return y if out_layout == "bshd" else y.transpose(1, 2)


def check_case(case: Case, dtype, device, *, run=None):
    """Forward and backward of the op against the float64 oracle, relative to PyTorch's error.

    ``run(q, k, cos, sin, position_ids, seq_offset) -> (q_out, k_out)`` replaces the plain call."""
    q, k = make_qk(case, dtype, device)
    position_ids, seq_offset, positions = make_positions(case, device)
    cos, sin, (cos_half, sin_half) = make_tables(case, dtype, device, positions)
    cos_half, sin_half = cos_half.to(device), sin_half.to(device)
    out_layout = case.out_layout or case.layout
    grad_outputs = [
        random_tensor(case.shape(h, out_layout), dtype, device, seed=20 + i, layout=case.grad_layout)
        for i, h in enumerate((case.q_heads, case.k_heads))
    ]
    extra = {"rotary_dim": case.rot} if case.pass_rotary_dim else {}
    if run is None:
        def run(q, k, cos, sin, position_ids, seq_offset):
            return rotary(q, k, cos, sin, position_ids=position_ids, seq_offset=seq_offset, **case.kwargs(), **extra)

    q_before, k_before = q.clone(), k.clone()
    leaf_q, leaf_k = leaves(q, k)
    ours = run(leaf_q, leaf_k, cos, sin, position_ids, seq_offset)
    our_grads = grads(ours, [leaf_q, leaf_k], grad_outputs)
    assert torch.equal(q, q_before) and torch.equal(k, k_before), "the inputs were modified"

    def reference(dtype_):
        lq, lk = leaves(q, k, dtype=dtype_)
        outs = [formula(t, cos_half, sin_half, case, case.layout, out_layout) for t in (lq, lk)]
        return [o.detach() for o in outs] + grads(outs, [lq, lk], [g.to(dtype_) for g in grad_outputs])

    for output, heads, name in zip(ours, (case.q_heads, case.k_heads), ("q_out", "k_out")):
        assert output.dtype == dtype, f"{name}: dtype {output.dtype}, expected {dtype}"
        assert tuple(output.shape) == case.shape(heads, out_layout), f"{name}: shape {tuple(output.shape)}"
        assert output.is_contiguous(), f"{name}: not contiguous in out_layout {out_layout!r}"
    for grad, leaf, name in zip(our_grads, (leaf_q, leaf_k), ("dq", "dk")):
        assert grad.dtype == dtype and grad.shape == leaf.shape, f"{name}: {grad.dtype} {tuple(grad.shape)}"
    baseline = reference(dtype) if dtype != torch.float64 else reference(torch.float64)
    assert_all_close_to_reference(
        [o.detach() for o in ours] + our_grads, baseline, reference(torch.float64),
        ["q_out", "k_out", "dq", "dk"],
    )


# ---------------------------------------------------------------------------------------------
# Accuracy against float64, relative to PyTorch's own error
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("layout,out_layout", LAYOUT_PAIRS, ids=[f"{a}-to-{b}" for a, b in LAYOUT_PAIRS])
@pytest.mark.parametrize("interleaved", [False, True], ids=["rotate-half", "interleaved"])
def test_rotary(interleaved, layout, out_layout, dtype, device):
    """Every dtype x layout x out_layout x convention at head_dim 72 with grouped-query heads."""
    check_case(Case(interleaved=interleaved, layout=layout, out_layout=out_layout), dtype, device)


SHAPE_CASES = [
    Case(batch=1, seq=199, q_heads=4, k_heads=4, head_dim=128),
    Case(batch=3, seq=1, q_heads=6, k_heads=1, head_dim=128, layout="bhsd"),
    Case(batch=1, seq=1, q_heads=2, k_heads=2, head_dim=72, interleaved=True),
    Case(batch=1, seq=199, q_heads=2, k_heads=1, head_dim=72, interleaved=True, layout="bhsd", out_layout="bshd"),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16], ids=["bf16"])
@pytest.mark.parametrize("case", SHAPE_CASES, ids=case_id)
def test_rotary_shapes(case, dtype, device):
    """Odd sequence lengths (1, 199), batch 1 and 3, head_dim 72 and 128, MQA / GQA / MHA."""
    check_case(case, dtype, device)


TABLE_CASES = [
    Case(table=table, positions=positions, interleaved=interleaved)
    for interleaved in (False, True)
    for table, positions in [
        ("half", "offset"), ("half", "ids"), ("full", "none"), ("full", "ids-1d"), ("full-lowp", "ids-int32"),
        ("full-lowp", "offset"), ("half-view", "ids-row"), ("per-token", "none"), ("per-token-1", "none"),
    ]
]


@pytest.mark.parametrize("case", TABLE_CASES, ids=case_id)
def test_tables_and_positions(case, device):
    """Half, full (fp32 and bf16) and per-token tables; seq_offset and position_ids of every shape
    and int dtype, non-monotonic with a repeated position."""
    check_case(case, torch.bfloat16, device)


PARTIAL_CASES = [
    Case(head_dim=72, rotary_dim=32, table="half"),  # 2-D half table, 40 elements passed through
    Case(head_dim=72, rotary_dim=32, table="half", interleaved=True, layout="bhsd", out_layout="bshd"),
    Case(head_dim=128, rotary_dim=96, table="full", positions="ids"),  # full table wider than head_dim / 2
    Case(head_dim=128, rotary_dim=96, table="full", interleaved=True, positions="offset"),
    Case(head_dim=128, rotary_dim=32, table="full-lowp", pass_rotary_dim=True),  # narrow full: rotary_dim=
    Case(head_dim=128, rotary_dim=32, table="full-lowp", interleaved=True, pass_rotary_dim=True),
    Case(head_dim=72, rotary_dim=24, table="per-token", layout="bhsd", out_layout="bhsd"),  # HF partial
    Case(head_dim=72, rotary_dim=36, table="half-view", positions="ids-1d", interleaved=True),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("case", PARTIAL_CASES, ids=case_id)
def test_partial_rotary(case, dtype, device):
    """rotary_dim < head_dim: the first rotary_dim elements rotate, the rest pass through."""
    check_case(case, dtype, device)


NON_CONTIGUOUS_CASES = [
    Case(source="qkv", grad_layout="transposed"),
    Case(source="qkv", layout="bhsd", out_layout="bhsd", interleaved=True),
    Case(source="qkv", layout="bhsd", out_layout="bshd", head_dim=128, rotary_dim=64, table="full",
         pass_rotary_dim=True),
    Case(source="transposed", out_layout="bhsd", grad_layout="transposed"),
    Case(source="transposed", layout="bhsd", interleaved=True, rotary_dim=32),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("case", NON_CONTIGUOUS_CASES, ids=case_id)
def test_non_contiguous(case, dtype, device):
    """q and k sliced from a fused qkv projection output (``qkv[..., :hq*d].unflatten``, both
    layouts), head_dim not contiguous, and non-contiguous incoming grads; inputs untouched."""
    check_case(case, dtype, device)


@pytest.mark.parametrize("case", [Case(), Case(interleaved=True, layout="bhsd", out_layout="bshd", rotary_dim=32)],
                         ids=case_id)
def test_float64_runs_the_reference(case, device):
    check_case(case, torch.float64, device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["rotate-half", "interleaved"])
def test_math_in_float32_with_one_rounding(interleaved, dtype, device):
    """The output is the fp32 rotation rounded once to the input dtype (OLMo-2's convention), not
    the input-dtype formula (three roundings, Hugging Face eager): equal but for rare 1-ulp flips
    (a fused multiply-add on the GPU), while the input-dtype formula differs on many elements."""
    case = Case(batch=2, seq=16, q_heads=4, k_heads=4, head_dim=128, interleaved=interleaved, positions="offset")
    q, k = make_qk(case, dtype, device)
    _, seq_offset, positions = make_positions(case, device)
    cos, sin, (cos_half, sin_half) = make_tables(case, dtype, device, positions)
    cos_half, sin_half = cos_half.to(device), sin_half.to(device)
    q_out, _ = rotary(q, k, cos, sin, interleaved=interleaved, seq_offset=seq_offset)
    one_rounding = downcast(formula(q.float(), cos_half.float(), sin_half.float(), case, "bshd", "bshd"), dtype)
    input_dtype = formula(q, cos_half, sin_half, case, "bshd", "bshd")
    assert (input_dtype != one_rounding).float().mean().item() > 0.05, "inputs do not separate the two"
    differing = (q_out != one_rounding).float().mean().item()
    assert differing < 0.01, f"{differing:.1%} of the elements differ from fp32 math rounded once"


def test_only_some_grads(device):
    """Only q_out is used: dq is the full backward's, dk is None (no gradient reaches k); only k
    requires grad: dk is the full backward's; no_grad: the same outputs."""
    case = Case(positions="ids")
    q, k = make_qk(case, torch.float32, device)
    position_ids, _, positions = make_positions(case, device)
    cos, sin, _ = make_tables(case, torch.float32, device, positions)
    dq_out = random_tensor(q.shape, torch.float32, device, seed=3)
    dk_out = random_tensor(k.shape, torch.float32, device, seed=4)

    def call(q_, k_):
        return rotary(q_, k_, cos, sin, position_ids=position_ids)

    lq, lk = leaves(q, k)
    full_out = call(lq, lk)
    full = grads(full_out, [lq, lk], [dq_out, dk_out])
    lq, lk = leaves(q, k)
    q_out, _ = call(lq, lk)
    dq, dk = torch.autograd.grad(q_out, [lq, lk], dq_out, allow_unused=True)
    assert torch.equal(dq, full[0]) and dk is None
    (lk,) = leaves(k)
    _, k_out = call(q, lk)
    assert torch.equal(torch.autograd.grad(k_out, lk, dk_out)[0], full[1])
    with torch.no_grad():
        plain = call(q, k)
    assert all(torch.equal(a, b.detach()) for a, b in zip(plain, full_out))


FLAT_CASES = [
    Case(),  # head_dim 72: 36 pairs, GQA 6 / 2, half table
    Case(head_dim=80, seq=13, layout="bhsd", table="per-token", batch=2),  # 40 pairs, HF's (batch, seq, r) table
    Case(head_dim=96, seq=9, table="full", positions="ids", layout="bhsd", out_layout="bshd"),  # 48 pairs
    Case(head_dim=72, seq=11, rotary_dim=56, table="half", positions="offset"),  # 28 pairs, 16 passed through
    Case(head_dim=200, seq=5, q_heads=3, k_heads=3, table="full-lowp", positions="ids-1d", grad_layout="transposed"),
]


@pytest.mark.parametrize("splits", [1, 4], ids=["one-split", "heads-split"])
@pytest.mark.parametrize("case", FLAT_CASES, ids=case_id)
def test_flat_kernel(case, splits, device, monkeypatch):
    """Rotate-half at pair counts that are not powers of two runs the flat kernel (no padded pair lanes), with
    the heads in one program or split over the grid (forced here: a CPU has one "multiprocessor"); against the
    float64 oracle like every other case, forward and backward. A partial rotary with a pass-through part
    takes the padded kernel, which copies that part."""
    from blockfuse.ops import rotary as module

    launched = []
    launch_flat = module._launch_flat
    monkeypatch.setattr(module, "_launch_flat", lambda *a: launched.append(a[-1]) or launch_flat(*a))
    one_program = splits == 1
    tiles = dataclasses.replace(module.TILES, flat_programs_per_sm=0 if one_program else 4096,
                                flat_heads_per_program=10**6 if one_program else 1)
    monkeypatch.setattr(module, "TILES", tiles)
    check_case(case, torch.bfloat16, device)
    if case.rot < case.head_dim:
        assert not launched, "a partial rotary with a pass-through part took the flat kernel"
        return
    assert launched, "the flat kernel did not run"
    assert {tile[1] > 1 for tile in launched} == {splits > 1}, f"head splits {[t[1] for t in launched]}"


def test_flat_tile_rule():
    """Where the flat kernel applies: pair counts that are not powers of two, in runs of 4 or more, with at
    least flat_min_tile (token, pair) elements a batch row; its tile shrinks for short rows, its heads split
    until the grid fills the GPU and a program rotates at most flat_heads_per_program heads, never past the
    heads there are (rotary.TILES)."""
    from blockfuse.ops.rotary import TILES, _flat_tile

    assert _flat_tile(4096, 64, 32, 8, 4, 132) is None  # head_dim 128: the padded kernel pads nothing
    assert _flat_tile(4096, 35, 32, 8, 4, 132) is None  # head_dim 70: pairs in runs of 1 (2-byte accesses)
    assert _flat_tile(1, 36, 32, 8, 4, 132) is None  # decoding: 36 elements a batch row
    for heads1, heads2 in ((32, 32), (32, 8), (16, 4), (2, 1)):
        block_g, splits, warps = _flat_tile(4096, 36, heads1, heads2, 4, 132)
        assert block_g == TILES.flat_tile and warps >= 1
        blocks = -(-4096 * 36 // block_g) * 4
        per_program = -(-heads1 // splits) + -(-heads2 // splits)
        assert splits <= max(heads1, heads2)
        assert splits == max(heads1, heads2) or (
            blocks * splits >= TILES.flat_programs_per_sm * 132 and per_program <= TILES.flat_heads_per_program)
        half_splits = splits // 2
        assert splits == 1 or blocks * half_splits < TILES.flat_programs_per_sm * 132 or (
            -(-heads1 // half_splits) + -(-heads2 // half_splits) > TILES.flat_heads_per_program)
    assert _flat_tile(7, 36, 6, 2, 1, 132)[0] == 256  # 252 elements: the smallest power of two tile covering them
    assert _flat_tile(TILES.flat_min_tile // 36 + 1, 36, 2, 1, 1, 10**6)[1] == 2  # splits stop at the heads
    assert _flat_tile(1000, 36, 32, 8, 4, 132)[0] == TILES.flat_tile


def test_tables_get_no_gradient(device):
    """cos / sin are constant buffers: even when they require grad none flows to them (documented),
    on the kernel path and in the reference alike, and dq, dk are unaffected."""
    case = Case(table="full")
    q, k = make_qk(case, torch.float32, device)
    _, _, positions = make_positions(case, device)
    cos, sin, _ = make_tables(case, torch.float32, device, positions)
    for fn in (rotary, rotary_ref):
        lq, lk, lcos, lsin = leaves(q, k, cos, sin)
        q_out, k_out = fn(lq, lk, cos=lcos, sin=lsin)
        (q_out.sum() + (k_out * 2).sum()).backward()
        assert lcos.grad is None and lsin.grad is None, fn.__name__
        plain_q, plain_k = leaves(q, k)
        q_ref, k_ref = rotary_ref(plain_q, plain_k, cos, sin)
        (q_ref.sum() + (k_ref * 2).sum()).backward()
        assert relative_error(lq.grad, plain_q.grad) < 1e-6 and relative_error(lk.grad, plain_k.grad) < 1e-6


def test_empty_sequence(device):
    q = torch.empty((2, 0, 4, 8), device=device)
    k = torch.empty((2, 0, 2, 8), device=device)
    cos = torch.ones((5, 4), device=device)
    q_out, k_out = rotary(q, k, cos, cos, out_layout="bhsd")
    assert q_out.shape == (2, 4, 0, 8) and k_out.shape == (2, 2, 0, 8)


# ---------------------------------------------------------------------------------------------
# Against Hugging Face transformers and Meta's complex-number form
# ---------------------------------------------------------------------------------------------


def hf_llama(head_dim, heads, kv_heads, theta=10000.0, max_positions=64):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads,
                                      num_key_value_heads=kv_heads, head_dim=head_dim,
                                      max_position_embeddings=max_positions, rope_theta=theta)
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("table", ["per-token", "full-2d"])
def test_matches_hugging_face_llama(table, dtype, device):
    """HF's cos / sin (per token, or the 2-D table of every position with position_ids) fed to our
    op give HF's ``apply_rotary_pos_emb`` (layout (b, h, s, d), unsqueeze_dim=1), forward and
    backward, within 2x of HF's own error against float64."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    batch, seq, heads, kv_heads, head_dim = 3, 7, 6, 2, 72
    embedding = hf_llama(head_dim, heads, kv_heads, theta=5e5).to(device)
    q = random_tensor((batch, heads, seq, head_dim), dtype, device, seed=1, scale=2.0)
    k = random_tensor((batch, kv_heads, seq, head_dim), dtype, device, seed=2, scale=2.0)
    position_ids = torch.randint(0, 64, (batch, seq), generator=make_generator(3)).to(device)
    cos, sin = embedding(q, position_ids)  # (batch, seq, head_dim), q's dtype
    grad_outputs = [random_tensor(t.shape, dtype, device, seed=5 + i) for i, t in enumerate((q, k))]
    if table == "per-token":
        ours_call = {"cos": cos, "sin": sin}
    else:
        every = torch.arange(64, device=device)[None]
        full_cos, full_sin = embedding(q, every)
        ours_call = {"cos": full_cos[0], "sin": full_sin[0], "position_ids": position_ids}

    def run(fn, dtype_):
        lq, lk = leaves(q, k, dtype=dtype_)
        outs = fn(lq, lk)
        return [o.detach() for o in outs] + grads(outs, [lq, lk], grad_outputs)

    ours = run(lambda a, b: rotary(a, b, layout="bhsd", **ours_call), dtype)
    theirs = run(lambda a, b: apply_rotary_pos_emb(a, b, cos, sin), dtype)
    oracle = run(lambda a, b: apply_rotary_pos_emb(a, b, cos.double(), sin.double()), torch.float64)
    assert_all_close_to_reference(ours, theirs, oracle, ["q_out", "k_out", "dq", "dk"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_matches_hugging_face_partial_rotary(dtype, device):
    """GPT-NeoX (Pythia) rotates the first ``partial_rotary_factor * head_dim`` elements of each
    head: HF's tables (batch, seq, 32) for head_dim 128 make our op rotate 32 and pass 96."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding, apply_rotary_pos_emb

    batch, seq, heads, head_dim = 3, 7, 4, 128
    config = transformers.GPTNeoXConfig(hidden_size=heads * head_dim, num_attention_heads=heads,
                                        max_position_embeddings=64, rotary_pct=0.25)
    embedding = GPTNeoXRotaryEmbedding(config).to(device)
    q = random_tensor((batch, heads, seq, head_dim), dtype, device, seed=1, scale=2.0)
    k = random_tensor((batch, heads, seq, head_dim), dtype, device, seed=2, scale=2.0)
    position_ids = torch.randint(0, 64, (batch, seq), generator=make_generator(3)).to(device)
    cos, sin = embedding(q, position_ids)
    assert cos.shape == (batch, seq, 32), "HF no longer gives partial tables this way"
    grad_outputs = [random_tensor(t.shape, dtype, device, seed=5 + i) for i, t in enumerate((q, k))]

    def run(fn, dtype_):
        lq, lk = leaves(q, k, dtype=dtype_)
        outs = fn(lq, lk)
        return [o.detach() for o in outs] + grads(outs, [lq, lk], grad_outputs)

    ours = run(lambda a, b: rotary(a, b, cos, sin, layout="bhsd"), dtype)
    theirs = run(lambda a, b: apply_rotary_pos_emb(a, b, cos, sin), dtype)
    oracle = run(lambda a, b: apply_rotary_pos_emb(a, b, cos.double(), sin.double()), torch.float64)
    assert_all_close_to_reference(ours, theirs, oracle, ["q_out", "k_out", "dq", "dk"])
    assert torch.equal(ours[0][..., 32:], q[..., 32:]), "the pass-through part changed"


def meta_apply_rotary_emb(xq, xk, freqs_cis):
    """Meta's Llama ``apply_rotary_emb``: pairs (2j, 2j+1) as complex numbers times e^(i theta)."""
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    freqs = freqs_cis[None, :, None, :]  # (1, seq, 1, head_dim / 2)
    return torch.view_as_real(xq_ * freqs).flatten(3), torch.view_as_real(xk_ * freqs).flatten(3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_interleaved_matches_meta_complex_form(dtype, device):
    """Meta's convention: freqs_cis = polar(1, t * inv_freq), (b, s, h, d) layout, decoding at an
    offset; our interleaved op with the half tables cos / sin of the same angles agrees."""
    batch, seq, heads, head_dim, offset = 3, 7, 4, 72, 5
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.arange(64, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (64, head_dim / 2)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)[offset:offset + seq]
    q = random_tensor((batch, seq, heads, head_dim), dtype, device, seed=1, scale=2.0)
    k = random_tensor((batch, seq, 2, head_dim), dtype, device, seed=2, scale=2.0)
    cos, sin = angles.cos().float().to(device), angles.sin().float().to(device)
    q_out, k_out = rotary(q, k, cos, sin, interleaved=True, seq_offset=offset)
    meta = meta_apply_rotary_emb(q.double(), k.double(), freqs_cis.to(device))
    # Meta's own low-precision path: fp32 math, one rounding (their .float() ... .type_as(xq)).
    meta_lowp = [t.to(dtype) for t in meta_apply_rotary_emb(q.float(), k.float(), freqs_cis.to(torch.complex64)
                                                            .to(device))]
    assert_all_close_to_reference([q_out, k_out], meta_lowp, meta, ["q_out", "k_out"])


# ---------------------------------------------------------------------------------------------
# In place
# ---------------------------------------------------------------------------------------------


def inplace_inputs(device, source="contiguous", dtype=torch.float32):
    case = Case(head_dim=72, rotary_dim=32, positions="ids", source=source)
    q, k = make_qk(case, dtype, device)
    position_ids, _, positions = make_positions(case, device)
    cos, sin, _ = make_tables(case, dtype, device, positions)
    return q, k, {"cos": cos, "sin": sin, "position_ids": position_ids}


@pytest.mark.parametrize("source", ["contiguous", "qkv"])
def test_inplace_without_grad(source, device):
    """inplace=True writes the out-of-place result into q and k (their own storage, also when they
    are views of one qkv buffer), returns q and k themselves, leaves the pass-through part alone,
    and bumps their version counters."""
    q, k, tables = inplace_inputs(device, source)
    expected = rotary(q, k, **tables)
    versions = (q._version, k._version)
    q_out, k_out = rotary(q, k, **tables, inplace=True)
    assert q_out is q and k_out is k
    assert torch.equal(q, expected[0]) and torch.equal(k, expected[1])
    assert q._version > versions[0] and k._version > versions[1]
    with torch.no_grad():
        again = rotary(q.clone(), k.clone(), **tables, inplace=True)
    assert all(not t.requires_grad for t in again)


@pytest.mark.parametrize("source", ["contiguous", "qkv"])
def test_inplace_with_grad(source, device):
    """Under autograd, in place gives the out-of-place result and the same grads for the tensors q
    and k came from (a non-leaf q, k, or views of a qkv projection output)."""
    q0, k0, tables = inplace_inputs(device, source)
    dq_out = random_tensor(q0.shape, torch.float32, device, seed=3)
    dk_out = random_tensor(k0.shape, torch.float32, device, seed=4)

    def run(inplace):
        if source == "qkv":
            base = q0._base.detach().clone().requires_grad_()
            qkv = base * 1.0  # a non-leaf, as a projection's output
            q = torch.as_strided(qkv, q0.shape, q0.stride(), q0.storage_offset())
            k = torch.as_strided(qkv, k0.shape, k0.stride(), k0.storage_offset())
            leaves_ = [base]
        else:
            lq, lk = leaves(q0, k0)
            q, k = lq * 1.0, lk * 1.0
            leaves_ = [lq, lk]
        q_out, k_out = rotary(q, k, **tables, inplace=inplace)
        if inplace:
            assert q_out is q and k_out is k
        torch.autograd.backward([q_out, k_out], [dq_out, dk_out])
        return [q_out.detach(), k_out.detach()] + [t.grad for t in leaves_]

    for a, b in zip(run(True), run(False)):
        assert torch.equal(a, b)


def test_inplace_errors(device):
    q, k, tables = inplace_inputs(device)
    lq, lk = leaves(q, k)
    with pytest.raises(RuntimeError, match="leaf"):
        rotary(lq, lk, **tables, inplace=True)
    with pytest.raises(ValueError, match="out_layout"):
        rotary(q, k, **tables, inplace=True, out_layout="bhsd")
    with pytest.raises(ValueError, match="k is q"):
        rotary(q, q, **tables, inplace=True)
    with pytest.raises(ValueError, match="expanded"):
        rotary(q[:1].expand(q.shape), k, **tables, inplace=True)
    # A tensor that autograd saved is modified in place: its backward notices.
    x = q.clone().requires_grad_()
    saved = q.clone()
    y = (x * saved).sum()
    rotary(saved, k.clone(), **tables, inplace=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---------------------------------------------------------------------------------------------
# Positions outside the table
# ---------------------------------------------------------------------------------------------


def test_seq_offset_beyond_table_raises():
    q = random_tensor((1, 4, 2, 8), torch.float32)
    cos = torch.ones((10, 4))
    rotary(q, q, cos, cos, seq_offset=6)  # rows 6..9: fits
    with pytest.raises(ValueError, match="cos"):
        rotary(q, q, cos, cos, seq_offset=7)


@pytest.mark.usefixtures("requires_triton")
def test_position_ids_outside_the_table_give_nan(device):
    """Documented: position_ids are not checked on the host; the kernel reads nothing outside the
    table and makes that token's rotated part NaN (pass-through and other tokens intact)."""
    q = random_tensor((1, 4, 2, 8), torch.float32, device)
    angles = random_tensor((10, 2), torch.float32, seed=1)
    cos, sin = angles.cos().to(device), angles.sin().to(device)
    position_ids = torch.tensor([[0, 10, 3, -1]], device=device)
    q_out, _ = rotary(q, q, cos, sin, position_ids=position_ids)
    assert torch.isnan(q_out[0, [1, 3], :, :4]).all()
    assert not torch.isnan(q_out[0, [0, 2]]).any() and torch.equal(q_out[..., 4:], q[..., 4:])
    expected, _ = rotary_ref(q[:, [0, 2]], q[:, [0, 2]], cos, sin, position_ids=position_ids[:, [0, 2]])
    torch.testing.assert_close(q_out[:, [0, 2]], expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(IndexError):  # on the CPU: on CUDA the reference's gather is a device assert
        rotary_ref(q.cpu(), q.cpu(), cos.cpu(), sin.cpu(), position_ids=position_ids.cpu())


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


def attention_inputs(qkv, cos, sin, position_ids):
    """A small attention prologue: q, k sliced from qkv, RoPE into SDPA's layout, then a product."""
    q, k = qkv[..., :24].unflatten(-1, (3, 8)), qkv[..., 24:48].unflatten(-1, (3, 8))
    q_out, k_out = rotary(q, k, cos, sin, position_ids=position_ids, out_layout="bhsd")
    q2, k2 = rotary(q_out * 1.5, k_out, cos, sin, position_ids=position_ids, layout="bhsd", interleaved=True)
    return (q2 @ k2.transpose(-1, -2)).sum(-1) + q_out.sum(-1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend, device):
    """One graph, no graph breaks, the same forward and backward as eager."""
    qkv = random_tensor((2, 5, 72), torch.float32, device, seed=1)  # (batch, seq, 3 x 3 heads x 8)
    angles = random_tensor((16, 4), torch.float32, seed=2)
    cos, sin = angles.cos().to(device), angles.sin().to(device)
    position_ids = torch.tensor([[3, 1, 1, 7, 0], [15, 2, 9, 9, 4]], device=device)
    grad_output = random_tensor((2, 3, 5), torch.float32, device, seed=3)

    def run(fn):
        (leaf,) = leaves(qkv)
        out = fn(leaf, cos, sin, position_ids)
        return [out.detach()] + grads(out, [leaf], grad_output)

    assert_compiles_like_eager(attention_inputs, run, ["out", "dqkv"], backend=backend, rtol=1e-5, atol=1e-5,
                               explain_args=(qkv, cos, sin, position_ids))


def inplace_block(x, weight, cos, sin):
    """A projection, RoPE in place on its q / k views, and a use of the whole qkv."""
    qkv = (x @ weight).unflatten(-1, (3, 2, 8))  # (batch, seq, 3, heads, head_dim)
    rotary(qkv[:, :, 0], qkv[:, :, 1], cos, sin, inplace=True, seq_offset=2)
    return qkv.pow(2).sum(-1) + qkv.sum(-1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_inplace(backend, device):
    """inplace=True under torch.compile: without grad the mutating custom op (q and k are views of
    one buffer), with grad the functional op and copies; both equal eager, no graph break."""
    import torch._dynamo

    x = random_tensor((2, 5, 4), torch.float32, device, seed=1)
    weight = random_tensor((4, 48), torch.float32, device, seed=2)
    angles = random_tensor((16, 4), torch.float32, seed=3)
    cos, sin = angles.cos().to(device), angles.sin().to(device)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(inplace_block)(x, weight, cos, sin)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(inplace_block, backend=backend, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, weight, cos, sin), inplace_block(x, weight, cos, sin),
                                   rtol=1e-5, atol=1e-5)

    def run(fn):
        (w,) = leaves(weight)
        out = fn(x, w, cos, sin)
        out.sum().backward()
        return out.detach(), w.grad

    for a, b in zip(run(compiled), run(inplace_block)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


def every_form(qkv, q_in, k_in, cache_q, cache_k, cos, sin, cos_full, sin_full, position_ids):
    """Every form of the op in one graph (q 2 heads, k 1 head of head_dim 16)."""
    # functional: slices of a fused projection (not dense), "bshd" -> "bhsd", position_ids, a partial
    # rotary (a half table of width 4 on head_dim 16 rotates 8 elements and passes 8 through)
    q, k = qkv[..., :32].unflatten(-1, (2, 16)), qkv[..., 32:48].unflatten(-1, (1, 16))
    q1, k1 = rotary(q, k, cos, sin, position_ids=position_ids, out_layout="bhsd")
    # functional: "bhsd" -> "bshd", seq_offset, interleaved, a full rotary (HF's duplicated table)
    q2, k2 = rotary(q1 * 1.5, k1, cos_full, sin_full, seq_offset=3, layout="bhsd", out_layout="bshd",
                    interleaved=True)
    # in place with grad on inputs of the graph ("bhsd", dense but transposed), seq_offset, partial
    rotary(q_in, k_in, cos, sin, seq_offset=2, layout="bhsd", inplace=True)
    # in place with grad on views of one tensor (q and k of a qkv projection), position_ids, full
    qkv2 = qkv * 1.0
    rotary(qkv2[..., :32].unflatten(-1, (2, 16)), qkv2[..., 32:48].unflatten(-1, (1, 16)), cos_full, sin_full,
           position_ids=position_ids, inplace=True)
    # in place without grad (a cache): the mutating op
    rotary(cache_q, cache_k, cos, sin, position_ids=position_ids, inplace=True)
    mixed = q2 * k2 + q_in.transpose(1, 2) * k_in.transpose(1, 2) + cache_q * cache_k  # (batch, seq, 2, 16)
    return mixed.sum(-1) + qkv2.unflatten(-1, (4, 16)).sum(-1)[..., :2] * position_ids[..., None]


@pytest.mark.parametrize("backend,dynamic", [("aot_eager", False), ("aot_eager", True), ("inductor", False)],
                         ids=["aot_eager", "aot_eager-dynamic", "inductor"])
def test_torch_compile_every_form(backend, dynamic, device):
    """Every form in one graph (functional in both layouts, in place with and without grad, on views and
    not, position_ids and seq_offset, partial and full rotary, both conventions): one graph, no graph
    break, blockfuse's launcher ops in it (forward, in place, backward), and eager's values and
    gradients. ``dynamic``: symbolic sizes, two sequence lengths, still one graph."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    angles = random_tensor((16, 4), torch.float32, seed=3)
    cos, sin = angles.cos().to(device), angles.sin().to(device)  # (16, 4): half table, rotary_dim 8
    angles_full = random_tensor((16, 8), torch.float32, seed=4).repeat_interleave(2, dim=-1)
    cos_full, sin_full = angles_full.cos().to(device), angles_full.sin().to(device)  # (16, 16)

    def inputs(seq, seed):
        qkv = random_tensor((2, seq, 64), torch.float32, device, seed=seed)  # (batch, seq, (2 + 1 + 1) x 16)
        q_in = random_tensor((2, seq, 2, 16), torch.float32, device, seed=seed + 1).transpose(1, 2)
        k_in = random_tensor((2, seq, 1, 16), torch.float32, device, seed=seed + 2).transpose(1, 2)
        cache_q = random_tensor((2, seq, 2, 16), torch.float32, device, seed=seed + 3)
        cache_k = random_tensor((2, seq, 1, 16), torch.float32, device, seed=seed + 4)
        position_ids = torch.randint(0, 16, (2, seq), generator=make_generator(seed)).to(device)
        grad_output = random_tensor((2, seq, 2), torch.float32, device, seed=seed + 5)
        return qkv, q_in, k_in, cache_q, cache_k, position_ids, grad_output

    def run(fn, qkv, q_in, k_in, cache_q, cache_k, position_ids, grad_output):
        leaf_qkv, leaf_q, leaf_k = leaves(qkv, q_in, k_in)
        q_in, k_in = leaf_q.clone(), leaf_k.clone()  # (non-leaves, not views, dense in "bhsd" transposed)
        cache_q, cache_k = cache_q.clone(), cache_k.clone()
        out = fn(leaf_qkv, q_in, k_in, cache_q, cache_k, cos, sin, cos_full, sin_full, position_ids)
        return ([out.detach(), q_in.detach(), k_in.detach(), cache_q, cache_k]
                + grads(out, [leaf_qkv, leaf_q, leaf_k], grad_output))

    names = ["out", "q_in", "k_in", "cache_q", "cache_k", "dqkv", "dq_in", "dk_in"]
    sequences = ((5, 1), (7, 11)) if dynamic else ((5, 1),)
    example = inputs(5, seed=1)
    graphs = []

    def capture(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    run(torch.compile(every_form, backend=capture, fullgraph=True, dynamic=dynamic), *example)
    assert len(graphs) == 1
    ops = {str(node.target) for module in graphs[0].modules() if isinstance(module, torch.fx.GraphModule)
           for node in module.graph.nodes if node.op == "call_function"}  # (the Function's bodies are submodules)
    assert {"blockfuse.rotary_fwd.default", "blockfuse.rotary_fwd_.default", "blockfuse.rotary_bwd.default"} <= ops, ops

    def run_every_sequence(fn):
        return [result for seq, seed in sequences for result in run(fn, *inputs(seq, seed))]

    assert_compiles_like_eager(every_form, run_every_sequence,
                               [f"seq {seq}: {name}" for seq, _ in sequences for name in names],
                               backend=backend, rtol=1e-5, atol=1e-5, dynamic=dynamic)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


# ---------------------------------------------------------------------------------------------
# Head dims whose rotary half is not a power of two: one padded block of pairs, alignment hints
# ---------------------------------------------------------------------------------------------

# head_dim: a partial rotary_dim (its pairs and pass-through part not powers of two either, or a power of two)
PADDED_HEAD_DIMS = {24: 12, 40: 24, 72: 32, 80: 40, 96: 48}
PADDED_FORMS = {
    "gqa": {},
    "bshd-to-bhsd": {"out_layout": "bhsd"},
    "bhsd-to-bshd": {"layout": "bhsd", "out_layout": "bshd", "positions": "ids"},
    "bhsd": {"layout": "bhsd", "out_layout": "bhsd", "table": "per-token"},
    "interleaved": {"interleaved": True, "layout": "bhsd", "out_layout": "bshd", "positions": "offset"},
    "interleaved-full-table": {"interleaved": True, "table": "full", "positions": "ids-1d"},
    "full-table": {"table": "full-lowp", "positions": "ids-int32"},
    "qkv-slices": {"source": "qkv", "grad_layout": "transposed", "layout": "bhsd"},
    "transposed": {"source": "transposed", "interleaved": True, "table": "half-view"},
    "mqa-seq-1": {"q_heads": 5, "k_heads": 1, "seq": 1, "batch": 4},
    "partial": {"partial": True, "table": "full", "positions": "ids"},
    "partial-interleaved": {"partial": True, "interleaved": True, "layout": "bhsd", "out_layout": "bhsd"},
}


def padded_case(head_dim: int, form: str) -> Case:
    fields = dict(PADDED_FORMS[form])
    if fields.pop("partial", False):
        fields.update(rotary_dim=PADDED_HEAD_DIMS[head_dim], pass_rotary_dim=True)
    return Case(**{"batch": 2, "seq": 5, "head_dim": head_dim, **fields})


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("form", list(PADDED_FORMS))
@pytest.mark.parametrize("head_dim", list(PADDED_HEAD_DIMS))
def test_padded_head_dims(head_dim, form, device):
    """head_dim 24, 40, 72, 80, 96 (12, 20, 36, 40, 48 pairs in one block of 16, 32, 64, 64, 64, the rest
    masked off) in every form, forward and backward against float64: layouts, conventions, tables,
    positions, qkv slices and transposed inputs, MQA with one token, partial rotary (a pass-through part
    of 12, 16, 40, 40, 48 in a padded block too); GQA by default."""
    case = padded_case(head_dim, form)
    import blockfuse.ops.rotary as rotary_module

    pass_dim = case.head_dim - case.rot
    tile = rotary_module._tile(case.batch * case.seq, case.q_heads, case.k_heads, case.rot, pass_dim, 1)
    assert tile[3] == 1 << (case.rot // 2 - 1).bit_length(), tile  # BLOCK_P: next_power_of_2(pairs)
    assert tile[4] == (1 << (pass_dim - 1).bit_length() if pass_dim else 1), tile  # BLOCK_PASS
    check_case(case, torch.bfloat16, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("head_dim", list(PADDED_HEAD_DIMS))
def test_padded_head_dims_dtypes(head_dim, dtype, device):
    check_case(padded_case(head_dim, "bhsd-to-bshd"), dtype, device)
    check_case(padded_case(head_dim, "partial-interleaved"), dtype, device)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("source", ["contiguous", "qkv"])
@pytest.mark.parametrize("head_dim", list(PADDED_HEAD_DIMS))
def test_padded_head_dims_inplace(head_dim, source, device):
    """In place, without and with grad (the full and the partial rotary): the out-of-place result
    (checked above against float64) and its gradients, the pass-through part untouched."""
    for rotary_dim in (head_dim, PADDED_HEAD_DIMS[head_dim]):
        case = Case(batch=2, seq=5, head_dim=head_dim, rotary_dim=rotary_dim, positions="ids", source=source)
        q0, k0 = make_qk(case, torch.float32, device)
        position_ids, _, positions = make_positions(case, device)
        cos, sin, _ = make_tables(case, torch.float32, device, positions)
        tables = {"cos": cos, "sin": sin, "position_ids": position_ids}
        expected = rotary(q0, k0, **tables)
        q, k = q0.clone(), k0.clone()
        rotary(q, k, **tables, inplace=True)
        assert torch.equal(q, expected[0]) and torch.equal(k, expected[1]), rotary_dim
        dq_out, dk_out = (random_tensor(t.shape, torch.float32, device, seed=3 + i) for i, t in enumerate((q0, k0)))

        def run(inplace):
            lq, lk = leaves(q0, k0)
            q_out, k_out = rotary(lq * 1.0, lk * 1.0, **tables, inplace=inplace)
            torch.autograd.backward([q_out, k_out], [dq_out, dk_out])
            return [q_out.detach(), k_out.detach(), lq.grad, lk.grad]

        for a, b in zip(run(True), run(False)):
            assert torch.equal(a, b), rotary_dim


def fp32_forward_backward(case: Case, device):
    """``run() -> [q_out, k_out, dq, dk]``: the op on ``case``'s fp32 inputs, tables and output gradients (the same
    values at every call), so that two launches' numbers can be compared element for element."""
    q, k = make_qk(case, torch.float32, device)
    position_ids, seq_offset, positions = make_positions(case, device)
    cos, sin, _ = make_tables(case, torch.float32, device, positions)
    grad_outputs = [random_tensor(case.shape(h, case.out_layout or case.layout), torch.float32, device, seed=20 + i)
                    for i, h in enumerate((case.q_heads, case.k_heads))]
    extra = {"rotary_dim": case.rot} if case.pass_rotary_dim else {}

    def run():
        lq, lk = leaves(q, k)
        outs = rotary(lq, lk, cos, sin, position_ids=position_ids, seq_offset=seq_offset, **case.kwargs(), **extra)
        return [o.detach() for o in outs] + grads(outs, [lq, lk], grad_outputs)

    return run


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("case", [Case(positions="ids"), Case(head_dim=40, rotary_dim=24, interleaved=True,
                                                             layout="bhsd", table="full", pass_rotary_dim=True)],
                         ids=case_id)
def test_alignment_hints_change_no_number(case, monkeypatch, device):
    """With the alignment hints (ALIGN, TABLE_ALIGN > 1 here) and without them (both 1, what the launcher
    did before): the same fp32 math on every element, forward and backward."""
    import blockfuse.ops.rotary as rotary_module

    run = fp32_forward_backward(case, device)
    seen = []

    def alignments(*key):
        seen.append(rotary_module._alignments(*key))
        return seen[-1]

    monkeypatch.setattr(rotary_module, "_cached_alignments", alignments)
    hinted = run()
    assert seen and all(align > 1 and table_align > 1 for align, table_align in seen), seen
    monkeypatch.setattr(rotary_module, "_cached_alignments", lambda *key: (1, 1))
    plain = run()
    tolerance = {} if device == "cpu" else {"rtol": 1e-6, "atol": 1e-6}  # (a GPU may contract differently)
    for a, b, name in zip(hinted, plain, ["q_out", "k_out", "dq", "dk"]):
        if tolerance:
            torch.testing.assert_close(a, b, **tolerance, msg=name)
        else:
            assert torch.equal(a, b), name


def test_alignment_hint():
    """ALIGN, the alignment the kernel asserts on token and head offsets, divides every stride of a dim
    longer than 1 (a wrong one would make a GPU's vector loads misaligned: wrong numbers or a fault)."""
    from blockfuse.ops.rotary import _alignment

    assert _alignment(2, [(4, 4096 * 72), (4096, 72), (32, 4096 * 72 * 4)]) == 8  # bhsd, head_dim 72, bf16
    assert _alignment(4, [(4, 4096 * 72), (4096, 72), (32, 4096 * 72 * 4)]) == 4  # fp32: 16 bytes
    assert _alignment(2, [(4, 4096 * 128), (4096, 128), (32, 128)]) == 1  # multiples of 16: Triton knows
    assert _alignment(2, [(1, 3), (7, 72), (6, 36)]) == 4  # a dim of size 1: its stride never counts
    assert _alignment(2, [(2, 0), (7, 24)]) == 8  # an expanded dim (stride 0)
    assert _alignment(2, [(3, 7 * 10 * 72 + 1), (7, 72)]) == 1
    generator = make_generator(5)
    for _ in range(200):
        dims = [(int(n), int(s)) for n, s in zip(torch.randint(1, 4, (4,), generator=generator),
                                                  torch.randint(0, 300, (4,), generator=generator))]
        for itemsize in (2, 4):
            align = _alignment(itemsize, dims)
            assert align & (align - 1) == 0 and align * itemsize <= 16
            assert all(stride % align == 0 for size, stride in dims if size != 1), (dims, align)
            if align == 1 and any(stride % 16 for size, stride in dims if size != 1):
                assert any(stride % 2 for size, stride in dims if size != 1), (dims, align)


@pytest.mark.usefixtures("requires_triton")
def test_torch_compile_dynamic_alignment(device):
    """Symbolic sizes and strides (torch.compile, dynamic=True) at head_dim 24: the launcher's alignment
    of a stride like 24 * s0 costs no guard; one graph for two sequence lengths, eager's numbers."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    angles = random_tensor((16, 12), torch.float32, seed=3)
    cos, sin = angles.cos().to(device), angles.sin().to(device)

    def block(q, k):
        q_out, k_out = rotary(q, k, cos, sin, layout="bhsd", out_layout="bshd")
        return q_out * 2 + k_out.sum(2, keepdim=True)

    def run(fn, seq, seed):
        q = random_tensor((2, 3, seq, 24), torch.float32, device, seed=seed)  # (batch, heads, seq, head_dim)
        k = random_tensor((2, 1, seq, 24), torch.float32, device, seed=seed + 1)
        (lq, lk) = leaves(q, k)
        out = fn(lq, lk)
        return [out.detach()] + grads(out, [lq, lk], random_tensor(out.shape, torch.float32, device, seed=seed + 2))

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(block, backend="aot_eager", dynamic=True, fullgraph=True)
    for seq, seed in ((5, 1), (7, 4)):  # (token counts in one range of the tile rule: no range guard fails)
        for a, b in zip(run(compiled, seq, seed), run(block, seq, seed)):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    torch._dynamo.reset()


@pytest.mark.gpu
@pytest.mark.parametrize("interleaved", [False, True], ids=["rotate-half", "interleaved"])
def test_cuda_runs_the_triton_kernel(interleaved):
    """Bigger shapes on the GPU: Llama-3 8B heads (32 / 8, 128), a fused qkv source, bf16."""
    from blockfuse.runtime import implementation

    assert implementation("cuda") == "triton"
    for case in (
        Case(batch=2, seq=512, q_heads=32, k_heads=8, head_dim=128, interleaved=interleaved, source="qkv",
             out_layout="bhsd", positions="offset"),
        Case(batch=2, seq=333, q_heads=16, k_heads=16, head_dim=64, interleaved=interleaved, layout="bhsd",
             table="per-token"),
        Case(batch=1, seq=257, q_heads=12, k_heads=4, head_dim=80, rotary_dim=40, interleaved=interleaved,
             positions="ids"),
    ):
        check_case(case, torch.bfloat16, "cuda")


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _bad_calls(op):
    q = random_tensor((2, 5, 4, 8), torch.float32)
    k = random_tensor((2, 5, 2, 8), torch.float32, seed=1)
    k3 = random_tensor((2, 5, 3, 8), torch.float32, seed=2)
    cos = torch.ones((16, 4))
    full = torch.ones((16, 8))
    per_token = full[:5].expand(2, 5, 8)
    ids = torch.zeros(5, dtype=torch.long)
    return [
        ("q-not-tensor", lambda: op(q.tolist(), k, cos, cos), TypeError, "q"),
        ("q-int", lambda: op(q.long(), k, cos, cos), TypeError, "q"),
        ("q-3d", lambda: op(q[0], k, cos, cos), ValueError, "q"),
        ("k-dtype", lambda: op(q, k.half(), cos, cos), TypeError, "k"),
        ("k-device", lambda: op(q, k.to("meta"), cos, cos), ValueError, "k"),
        ("k-batch", lambda: op(q, k[:1], cos, cos), ValueError, "k"),
        ("k-seq", lambda: op(q, k[:, :4], cos, cos), ValueError, "k"),
        ("k-head-dim", lambda: op(q, k[..., :6], cos, cos), ValueError, "k"),
        ("heads-not-divisible", lambda: op(q, k3, cos, cos), ValueError, "heads"),
        ("layout", lambda: op(q, k, cos, cos, layout="bsh"), ValueError, "layout"),
        ("out-layout", lambda: op(q, k, cos, cos, out_layout="BHSD"), ValueError, "out_layout"),
        ("interleaved-not-bool", lambda: op(q, k, cos, cos, interleaved=1), TypeError, "interleaved"),
        ("cos-int", lambda: op(q, k, cos.long(), cos), TypeError, "cos"),
        ("cos-1d", lambda: op(q, k, cos[0], cos[0]), ValueError, "cos"),
        ("cos-device", lambda: op(q, k, cos.to("meta"), cos.to("meta")), ValueError, "cos"),
        ("sin-shape", lambda: op(q, k, cos, cos[:8]), ValueError, "sin"),
        ("table-wider-than-head", lambda: op(q, k, torch.ones(16, 10), torch.ones(16, 10)), ValueError, "cos"),
        ("odd-rotary-dim", lambda: op(q, k, torch.ones(16, 7), torch.ones(16, 7)), ValueError, "cos"),
        ("rotary-dim-mismatch", lambda: op(q, k, cos, cos, rotary_dim=6), ValueError, "rotary_dim"),
        ("table-too-short", lambda: op(q, k, cos[:4], cos[:4]), ValueError, "cos"),
        ("offset-beyond-table", lambda: op(q, k, cos, cos, seq_offset=12), ValueError, "cos"),
        ("offset-negative", lambda: op(q, k, cos, cos, seq_offset=-1), ValueError, "seq_offset"),
        ("offset-float", lambda: op(q, k, cos, cos, seq_offset=1.0), TypeError, "seq_offset"),
        ("ids-and-offset", lambda: op(q, k, cos, cos, position_ids=ids, seq_offset=2), ValueError, "position_ids"),
        ("ids-float", lambda: op(q, k, cos, cos, position_ids=torch.zeros(2, 5)), TypeError, "position_ids"),
        ("ids-shape", lambda: op(q, k, cos, cos, position_ids=torch.zeros(2, 4, dtype=torch.long)),
         ValueError, "position_ids"),
        ("ids-with-per-token-table", lambda: op(q, k, per_token, per_token, position_ids=ids), ValueError,
         "position_ids"),
        ("per-token-seq", lambda: op(q, k, full[None, :4], full[None, :4]), ValueError, "cos"),
        ("per-token-batch", lambda: op(q, k, full[:3, None].expand(3, 5, 8), full[:3, None].expand(3, 5, 8)),
         ValueError, "cos"),
        ("inplace-not-bool", lambda: op(q, k, cos, cos, inplace=None), TypeError, "inplace"),
    ]


BAD_CALL_NAMES = [c[0] for c in _bad_calls(rotary)]


@pytest.mark.parametrize("case", range(len(BAD_CALL_NAMES)), ids=BAD_CALL_NAMES)
@pytest.mark.parametrize("op", [rotary, rotary_ref], ids=["rotary", "rotary_ref"])
def test_bad_input_raises(op, case):
    """The same clear errors, naming the argument, from the op and from the reference."""
    _, call, error, argument = _bad_calls(op)[case]
    with pytest.raises(error, match=argument):
        call()


# ---------------------------------------------------------------------------------------------
# The reference beside the kernel, and the CPU fallback
# ---------------------------------------------------------------------------------------------

REFERENCE_CASES = [
    Case(),
    Case(interleaved=True, layout="bhsd", out_layout="bshd", positions="ids"),
    Case(head_dim=128, rotary_dim=96, table="full", positions="offset", source="qkv"),
    Case(head_dim=72, rotary_dim=32, table="per-token", interleaved=True, layout="bhsd"),
]


@pytest.mark.parametrize("case", REFERENCE_CASES, ids=case_id)
def test_reference_in_float64_matches_the_oracle(case):
    """``rotary_ref`` on float64 inputs (the documented oracle) equals the formula in float64."""
    check_case(case, torch.float64, "cpu", run=lambda q, k, cos, sin, position_ids, seq_offset: rotary_ref(
        q, k, cos, sin, position_ids=position_ids, seq_offset=seq_offset, **case.kwargs()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", REFERENCE_CASES[:2], ids=case_id)
def test_reference_in_low_precision(case, dtype):
    """The reference (what CPU tensors use without Triton) is as accurate as PyTorch's formula."""
    check_case(case, dtype, "cpu", run=lambda q, k, cos, sin, position_ids, seq_offset: rotary_ref(
        q, k, cos, sin, position_ids=position_ids, seq_offset=seq_offset, **case.kwargs()))



FALLBACK_SCRIPT = textwrap.dedent(
    """
    import torch
    from blockfuse.ops.rotary import rotary, rotary_ref
    from blockfuse.runtime import implementation

    assert implementation("cpu") == "reference", implementation("cpu")
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(3, 7, 10, 72, generator=g).bfloat16()
    angles = torch.randn(16, 36, generator=g)
    cos, sin = angles.cos(), angles.sin()
    ids = torch.randint(0, 16, (3, 7), generator=g)
    for kwargs in ({}, {"interleaved": True, "out_layout": "bhsd", "position_ids": ids}, {"seq_offset": 4}):
        a, c = qkv.clone().requires_grad_(), qkv.clone().requires_grad_()
        ours = rotary(a[:, :, :6], a[:, :, 6:8], cos, sin, **kwargs)
        ref = rotary_ref(c[:, :, :6], c[:, :, 6:8], cos, sin, **kwargs)
        for o, e in zip(ours, ref):
            assert torch.equal(o, e), kwargs
        sum(o.float().sum() for o in ours).backward()
        sum(e.float().sum() for e in ref).backward()
        assert torch.equal(a.grad, c.grad), kwargs
    q, k = qkv[:, :, :6].clone(), qkv[:, :, 6:8].clone()
    expected = rotary_ref(q, k, cos, sin)
    out = rotary(q, k, cos, sin, inplace=True)
    assert out[0] is q and torch.equal(q, expected[0]) and torch.equal(k, expected[1])
    print("reference fallback ok")
    """
)


def test_cpu_without_interpreter_uses_the_reference():
    assert_runs_without_interpreter(FALLBACK_SCRIPT)


SPLIT_CASES = [
    Case(),
    Case(q_heads=5, k_heads=1, interleaved=True, layout="bhsd", out_layout="bshd", rotary_dim=32),
    Case(batch=1, seq=3, q_heads=8, k_heads=8, head_dim=128, positions="ids"),
]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("min_programs", [24, 64, 4096], ids=lambda n: f"min_programs={n}")
@pytest.mark.parametrize("case", SPLIT_CASES, ids=case_id)
def test_small_inputs_split_heads_over_programs(case, min_programs, monkeypatch, device):
    """Few tokens: the launcher splits the heads over a second grid dimension and, when still short
    of programs, gives q and k programs of their own (as on a GPU with more multiprocessors than
    token tiles); every head of q and k must still be rotated once."""
    import blockfuse.ops.rotary as rotary_module

    monkeypatch.setattr(rotary_module, "_min_programs", lambda device: min_programs)
    tile = rotary_module._tile(case.batch * case.seq, case.q_heads, case.k_heads, case.rot, 0, min_programs)
    assert tile[5] > 1, f"expected a head split, got tile {tile}"
    check_case(case, torch.float32, device)


@pytest.mark.parametrize("tile_elements", [512, 1024, 4096])
def test_tiles_are_powers_of_two(tile_elements, monkeypatch):
    """Every block dimension the launcher picks is a power of two (Triton's aranges must be), for head
    counts, rotary and pass-through widths that are not: 6 heads of 96 rotary + 32 pass-through
    columns once asked for a 6-head block when the tile shrank to 1024 elements."""
    import blockfuse.ops.rotary as rotary_module

    tiles = rotary_module.Tiles(tile_elements=tile_elements)
    for tokens in (1, 21, 128, 8192):
        for heads1, heads2 in ((6, 2), (5, 1), (32, 8), (16, 16), (71, 0)):
            for rotary_dim, pass_dim in ((96, 32), (64, 0), (32, 40), (128, 0), (16, 56)):
                for min_programs in (1, 132):
                    tile = rotary_module._tile(tokens, heads1, heads2, rotary_dim, pass_dim, min_programs, tiles)
                    blocks = (*tile[:5], tile[8])  # every block size and num_warps (tile[5:8]: the grid)
                    assert all(b > 0 and b & (b - 1) == 0 for b in blocks), (tokens, heads1, heads2, rotary_dim,
                                                                              pass_dim, min_programs, tile)



@pytest.mark.usefixtures("requires_triton")
def test_cached_tile_follows_the_module_constants(monkeypatch, device):
    """The launcher passes TILES into the cached tile rule, so a sweep that sets it
    (benchmarks/rotary_tiles.py) gets its tile, not one cached before."""
    import dataclasses

    import blockfuse.ops.rotary as rotary_module

    launched = []
    kernel = rotary_module._kernel

    def spy(grid, *args, **constexprs):
        launched.append(constexprs["BLOCK_T"])
        return kernel(grid, *args, **constexprs)

    monkeypatch.setattr(rotary_module, "_kernel", spy)
    monkeypatch.setattr(rotary_module, "_min_programs", lambda device: 1)
    q = random_tensor((1, 64, 2, 64), torch.float32, device, seed=1)  # (batch, seq, heads, head_dim)
    k = random_tensor((1, 64, 2, 64), torch.float32, device, seed=2)
    angles = random_tensor((64, 32), torch.float32, device, seed=3)
    expected = rotary(q, k, angles.cos(), angles.sin())
    monkeypatch.setattr(rotary_module, "TILES", dataclasses.replace(rotary_module.TILES,
                                                                    tile_elements=4 * rotary_module.TILES.tile_elements))
    got = rotary(q, k, angles.cos(), angles.sin())
    assert launched[1] == 4 * launched[0], launched  # (2 heads of 64 lanes: the tile grows in tokens)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)


BATCH_AXIS_CASES = [
    Case(batch=3, seq=37, q_heads=5, k_heads=1, head_dim=64, table="per-token"),
    Case(batch=3, seq=21, q_heads=8, k_heads=2, head_dim=64, positions="ids"),
    Case(batch=2, seq=19, q_heads=4, k_heads=4, head_dim=128, interleaved=True, layout="bhsd", out_layout="bshd",
         positions="offset"),
    Case(batch=3, seq=11, head_dim=40, rotary_dim=24, table="full", source="qkv", pass_rotary_dim=True),
]


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("case", BATCH_AXIS_CASES, ids=case_id)
def test_batch_axis_gives_the_same_values(case, monkeypatch, device):
    """``rotary.TILES.batch_axis`` (the batch on grid axis 2, each program's batch row and tokens from program ids)
    computes bit for bit what the flat token grid does, forward and backward: a seq that is not a multiple of the
    token tile (its last tile masked in each batch row), per-batch positions and tables, the interleaved and
    partial forms; each batch row in several programs of 2 tokens."""
    import blockfuse.ops.rotary as rotary_module

    run = fp32_forward_backward(case, device)
    grids = []
    kernel = rotary_module._kernel

    def spy(grid, *args, **constexprs):
        grids.append((grid, constexprs["BATCH_AXIS"], constexprs["BLOCK_T"]))
        return kernel(grid, *args, **constexprs)

    monkeypatch.setattr(rotary_module, "_kernel", spy)
    monkeypatch.setattr(rotary_module, "_min_programs", lambda device: 1)
    results = {}
    for batch_axis in (False, True):
        monkeypatch.setattr(rotary_module, "TILES", dataclasses.replace(rotary_module.TILES, batch_axis=batch_axis))
        grids.clear()
        results[batch_axis] = run()
        assert len(grids) == 2, grids  # forward, backward: the padded kernel both times
        for grid, taken, block_t in grids:
            assert taken == batch_axis and len(grid) == (3 if batch_axis else 2), grids
            assert not batch_axis or (grid[0] > 1 and grid[2] == case.batch and case.seq % block_t), grids
            assert block_t == 2, grids
    for a, b, name in zip(results[False], results[True], ["q_out", "k_out", "dq", "dk"]):
        assert torch.equal(a, b), name
        assert a.abs().max() > 0, name


def test_batch_axis_rule(monkeypatch):
    """The launcher takes the batch axis where a batch row holds a whole token tile and the batch fits the
    grid's third axis; else the flat token grid (one token a batch row, decoding: the batch is the token axis)."""
    import blockfuse.ops.rotary as rotary_module

    grids = []
    monkeypatch.setattr(rotary_module, "_kernel", lambda grid, *args, **constexprs: grids.append(
        (grid, constexprs["BATCH_AXIS"])))
    monkeypatch.setattr(rotary_module, "_min_programs", lambda device: 1)
    monkeypatch.setattr(rotary_module, "MAX_GRID_YZ", 6)
    for batch, seq in ((6, 64), (7, 64), (6, 1)):
        q = torch.empty((batch, seq, 4, 64))  # (bshd; 4 heads of 64 a program, 1024 elements: 4 tokens)
        rotary_module._launch([(q, q)], torch.empty((seq, 32)), torch.empty((seq, 32)), None, 0, 64, False,
                              "bshd", "bshd", False, False)
    assert grids == [((16, 1, 6), True), ((112, 1), False), ((2, 1), False)], grids


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("backend", [None, "aot_eager", "inductor"], ids=["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("inplace", [False, True], ids=["out_of_place", "inplace"])
def test_gradients_keep_the_inputs_memory_layout(inplace, backend, device):
    """Hugging Face's q and k are (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim)
    projections: their gradients come back in that memory layout (so the transpose back is a view, not
    a copy), with the same values as the reference's; an input that is not dense gets a contiguous one.
    The same under torch.compile (one autograd Function: the compiled backward allocates the gradients
    with the inputs' strides too)."""
    import torch._dynamo

    batch, seq, heads, kv_heads, dim = 2, 9, 4, 2, 16
    angles = random_tensor((seq, dim // 2), torch.float32, device, seed=7)
    cos, sin = angles.cos(), angles.sin()
    q_base = random_tensor((batch, seq, heads, dim), torch.float32, device, seed=1).requires_grad_()
    k_base = random_tensor((batch, seq * 2, kv_heads, dim), torch.float32, device, seed=2)[:, ::2]
    k_base.requires_grad_()  # (every other token: not dense)
    seen = {}
    kwargs = {"inplace": True} if inplace else {}

    def call(q, k):
        return rotary(q, k, cos, sin, layout="bhsd", **kwargs)

    torch._dynamo.reset()
    ours = call if backend is None else torch.compile(call, backend=backend, fullgraph=True)

    def run(fn):
        q, k = q_base.transpose(1, 2), k_base.transpose(1, 2)
        if inplace and fn is ours:
            q, k = q.clone(memory_format=torch.preserve_format), k.clone(memory_format=torch.preserve_format)
        for name, t in (("q", q), ("k", k)):
            t.register_hook(lambda g, name=name: seen.__setitem__(name, g.stride()))
        q_out, k_out = fn(q, k) if fn is ours else fn(q, k, cos, sin, layout="bhsd")
        return (q_out.sum() + (k_out * k_out).sum()), q.stride(), k.stride()

    loss, q_stride, k_stride = run(ours)
    grads = torch.autograd.grad(loss, (q_base, k_base))
    # NOTE: compiled, in place with grad is the functional form plus copies into q and k (see rotary()):
    # the gradient of q and k before the copy is then autograd's sum of the copy's (contiguous) zero
    # gradient and the kernel's, whatever layout the kernel gave.
    if not (inplace and backend is not None):
        assert seen["q"] == q_stride, (seen["q"], q_stride)  # dense: its own layout
        contiguous = torch.empty(k_base.transpose(1, 2).shape).stride()
        assert seen["k"] == (k_stride if inplace else contiguous), (seen["k"], k_stride)  # a dense clone / contiguous
    seen.clear()
    loss_ref, _, _ = run(rotary_ref)
    expected = torch.autograd.grad(loss_ref, (q_base, k_base))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# The packed QKV form (the fused attention's): the backward writes qkv's gradient whole
# ---------------------------------------------------------------------------------------------

PACKED_CASES = [  # (batch, seq, heads, kv_heads, head_size)
    (2, 7, 4, 2, 16),  # grouped-query
    (1, 33, 3, 3, 64),
    (3, 5, 8, 1, 80),  # one kv head; a head size that is not a power of two
]


def _packed_run(fn, qkv, grads):
    leaf = qkv.clone().requires_grad_()
    outputs = fn(leaf)
    torch.autograd.backward([o for o, g in zip(outputs, grads) if g is not None],
                            [g for g in grads if g is not None])
    return [o.detach() for o in outputs] + [leaf.grad]


def _split_form(heads, kv_heads, head_size, cos, sin):
    from blockfuse.ops.rotary import _qkv_views, rotary_copying_v

    return lambda qkv: rotary_copying_v(*_qkv_views(qkv, heads, kv_heads, head_size), cos, sin)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("case", PACKED_CASES)
@pytest.mark.parametrize("dv_layout", ["bshd", "bhsd"])  # attention's v gradient in v's layout, or transposed
def test_packed_form_is_the_split_form(case, dv_layout, device):
    """Forward and backward bit for bit those of the split views through ``rotary_copying_v`` (the same kernels;
    the packed gradient only skips the concatenation)."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops.rotary import rotary_packed

    b, s, h, kvh, hd = case
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 64, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.bfloat16, seed=b + s).to(device)
    grads = [random_tensor(shape, torch.bfloat16, seed=i).to(device)
             for i, shape in enumerate(((b, s, h, hd), (b, s, kvh, hd), (b, s, kvh, hd)))]
    if dv_layout == "bhsd":
        grads[2] = grads[2].transpose(1, 2).contiguous().transpose(1, 2)
    packed = _packed_run(lambda t: rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    split = _packed_run(_split_form(h, kvh, hd, cos, sin), qkv, grads)
    for name, a, c in zip(("q", "k", "v", "dqkv"), packed, split):
        assert a.shape == c.shape and torch.equal(a, c), name
    assert all(t.is_contiguous() for t in packed)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("min_programs", [None, 64], ids=["default-grid", "heads-split"])
@pytest.mark.parametrize("case", PACKED_CASES + [(2, 3, 4, 4, 128)], ids=lambda c: "x".join(map(str, c)))
def test_packed_form_copies_v_in_the_rotation_s_launch(case, min_programs, monkeypatch, device):
    """v's copy (forward) and its gradient's (backward) ride in the rotation's launch: one launch each way, on the
    padded kernel and the flat one (head_size 80), with the heads in one program or split over the grid (forced:
    a CPU has one "multiprocessor"). The copies are exact (infinities and -0.0 too) and q, k and qkv's gradient
    are the float64 oracle's within bf16's rounding."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops import copy as copy_module
    from blockfuse.ops import rotary as module

    b, s, h, kvh, hd = case
    monkeypatch.setattr(module, "PACKED_COPY_IN_LAUNCH", True)
    monkeypatch.setattr(module, "FLAT_COPY_IN_LAUNCH", True)
    if min_programs is not None:
        monkeypatch.setattr(module, "_min_programs", lambda device: min_programs)
    launches = []
    for owner, name in ((module, "_kernel"), (module, "_flat_kernel"), (copy_module, "_kernel")):
        kernel, label = getattr(owner, name), f"{owner.__name__.rsplit('.', 1)[-1]}.{name}"
        monkeypatch.setattr(owner, name, lambda *a, _k=kernel, _n=label, **kw: launches.append(_n) or _k(*a, **kw))
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 64, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.bfloat16, seed=b + s + hd).to(device)
    qkv[0, -1, -1] = float("inf")  # (v's last column)
    qkv[-1, 0, (h + kvh) * hd] = -0.0
    grads = [random_tensor(shape, torch.bfloat16, seed=i).to(device)
             for i, shape in enumerate(((b, s, h, hd), (b, s, kvh, hd), (b, s, kvh, hd)))]
    grads[2][0, 0, 0, 1] = float("-inf")
    q_out, k_out, v_out, dqkv = _packed_run(lambda t: module.rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    # one forward, one backward, one kernel
    kernel = "rotary." + ("_flat_kernel" if hd == 80 and s * 40 >= module.TILES.flat_min_tile else "_kernel")
    assert launches == [kernel, kernel], launches
    q, k, v = module._qkv_views(qkv, h, kvh, hd)
    assert torch.equal(v_out, v) and v_out.is_contiguous() and torch.equal(v_out.signbit(), v.signbit())
    dq, dk, dv = module._qkv_views(dqkv, h, kvh, hd)
    assert torch.equal(dv, grads[2])
    want_q, want_k = rotary_ref(q.double(), k.double(), cos, sin)
    back_q, back_k = rotary_ref(grads[0].double(), grads[1].double(), cos, -sin)  # the inverse rotation
    for got, want in ((q_out, want_q), (k_out, want_k), (dq, back_q), (dk, back_k)):
        torch.testing.assert_close(got.double(), want, rtol=8e-3, atol=1e-2)


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("knob", [None, False], ids=["by-the-rule", "off"])
def test_the_flat_kernel_copies_v_in_launch_for_rows_of_whole_sectors(knob, monkeypatch, device):
    """By default (``FLAT_COPY_IN_LAUNCH = None``) a head size that takes the flat kernel copies v and its gradient
    in the rotation's launch when a head's row is a whole number of 32-byte sectors (bf16 80: 160 bytes; fp32 72:
    288), by copy_rows' launches when it is not (bf16 72: 144 bytes); the padded kernel's head sizes always in the
    launch; ``False``: the flat kernel's never. The same bits as the split form either way."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops import copy as copy_module
    from blockfuse.ops import rotary as module

    monkeypatch.setattr(module, "PACKED_COPY_IN_LAUNCH", True)
    monkeypatch.setattr(module, "FLAT_COPY_IN_LAUNCH", knob)
    copies = []
    kernel = copy_module._kernel
    monkeypatch.setattr(copy_module, "_kernel", lambda *a, **kw: copies.append(a[0]) or kernel(*a, **kw))
    cases = {None: ((72, torch.bfloat16, 2), (80, torch.bfloat16, 0), (72, torch.float32, 0), (64, torch.bfloat16, 0)),
             False: ((80, torch.bfloat16, 2), (72, torch.float32, 2), (64, torch.bfloat16, 0))}[knob]
    for hd, dtype, expected in cases:
        b, s, h, kvh = 2, 9, 4, 2
        cos, sin = (t.to(device) for t in rotary_half_tables(hd, 16, 10000.0))
        qkv = random_tensor((b, s, (h + 2 * kvh) * hd), dtype, seed=hd).to(device)
        grads = [random_tensor(shape, dtype, seed=hd + i).to(device)
                 for i, shape in enumerate(((b, s, h, hd), (b, s, kvh, hd), (b, s, kvh, hd)))]
        copies.clear()
        packed = _packed_run(lambda t: module.rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
        assert len(copies) == expected, (hd, dtype, len(copies))
        split = _packed_run(_split_form(h, kvh, hd, cos, sin), qkv, grads)
        assert all(torch.equal(a, c) for a, c in zip(packed, split)), (hd, dtype)


@pytest.mark.usefixtures("requires_triton")
def test_packed_form_with_v_s_copies_launched_apart(monkeypatch, device):
    """``rotary.PACKED_COPY_IN_LAUNCH = False`` (the A/B knob): v and its gradient copied by copy_rows' launches of
    their own, the same bits."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops import copy as copy_module
    from blockfuse.ops import rotary as module

    b, s, h, kvh, hd = 2, 5, 4, 2, 32
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 16, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.bfloat16, seed=12).to(device)
    grads = [random_tensor(shape, torch.bfloat16, seed=13 + i).to(device)
             for i, shape in enumerate(((b, s, h, hd), (b, s, kvh, hd), (b, s, kvh, hd)))]
    monkeypatch.setattr(module, "PACKED_COPY_IN_LAUNCH", True)
    together = _packed_run(lambda t: module.rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    copies = []
    kernel = copy_module._kernel
    monkeypatch.setattr(copy_module, "_kernel", lambda *a, **kw: copies.append(a[0]) or kernel(*a, **kw))
    monkeypatch.setattr(module, "PACKED_COPY_IN_LAUNCH", False)
    apart = _packed_run(lambda t: module.rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    assert len(copies) == 2
    for name, a, c in zip(("q", "k", "v", "dqkv"), together, apart):
        assert torch.equal(a, c), name


@pytest.mark.usefixtures("requires_triton")
def test_packed_form_heads_first_is_the_same_memory_transposed_without_nodes_of_its_own(device):
    """``heads_first=True``: q, k, v as (batch, heads, seq, head_size) views of the same bytes, their gradients taken
    in that form; the same values and input gradient, and the outputs are the op's Function's own (no transposes of
    autograd's after it)."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops.rotary import rotary_packed

    b, s, h, kvh, hd = 2, 7, 4, 2, 24
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 16, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.bfloat16, seed=8).to(device)
    grads = [random_tensor(shape, torch.bfloat16, seed=9 + i).to(device)
             for i, shape in enumerate(((b, s, h, hd), (b, s, kvh, hd), (b, s, kvh, hd)))]
    plain = _packed_run(lambda t: rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    first = _packed_run(lambda t: rotary_packed(t, h, kvh, hd, cos, sin, heads_first=True), qkv,
                        [g.transpose(1, 2) for g in grads])
    for name, a, c in zip("qkv", first, plain):
        assert a.shape == c.transpose(1, 2).shape and torch.equal(a.transpose(1, 2), c), name
        assert a.transpose(1, 2).is_contiguous(), name
    assert torch.equal(first[3], plain[3])
    outputs = rotary_packed(qkv.clone().requires_grad_(), h, kvh, hd, cos, sin, heads_first=True)
    assert {type(t.grad_fn).__name__ for t in outputs} == {"_PackedRotaryFunctionBackward"}


@pytest.mark.usefixtures("requires_triton")
def test_packed_form_with_outputs_unused(device):
    """An output without a gradient (k unused, say) leaves zeros in its columns of the packed gradient."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops.rotary import rotary_packed

    b, s, h, kvh, hd = 2, 6, 2, 2, 16
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 16, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.float32, seed=3).to(device)
    grads = [random_tensor((b, s, h, hd), torch.float32, seed=4).to(device), None,
             random_tensor((b, s, kvh, hd), torch.float32, seed=5).to(device)]
    packed = _packed_run(lambda t: rotary_packed(t, h, kvh, hd, cos, sin), qkv, grads)
    split = _packed_run(_split_form(h, kvh, hd, cos, sin), qkv, grads)
    assert torch.equal(packed[3], split[3])
    assert not packed[3][..., h * hd:(h + kvh) * hd].any()


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("heads_first", [False, True], ids=["bshd", "bhsd"])
def test_packed_form_compiles_fullgraph(heads_first, device):
    """Traced, the backward rotates into new tensors and concatenates (for Inductor to plan): eager's numbers."""
    from blockfuse.models.eager import rotary_half_tables
    from blockfuse.ops.rotary import rotary_packed
    from tests.helpers import assert_compiles_like_eager

    b, s, h, kvh, hd = 2, 9, 4, 2, 32
    cos, sin = (t.to(device) for t in rotary_half_tables(hd, 32, 10000.0))
    qkv = random_tensor((b, s, (h + 2 * kvh) * hd), torch.float32, seed=6).to(device)

    def attention_inputs(qkv):
        q, k, v = rotary_packed(qkv * 2.0, h, kvh, hd, cos, sin, heads_first=heads_first)
        if heads_first:
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return q.sum(-1) + k.repeat_interleave(h // kvh, dim=2).sum(-1) * v.repeat_interleave(h // kvh, dim=2).mean(-1)

    def run(fn):
        leaf = qkv.clone().requires_grad_()
        out = fn(leaf)
        out.backward(torch.ones_like(out))
        return [out.detach(), leaf.grad]

    assert_compiles_like_eager(attention_inputs, run, ["out", "dqkv"], backend="aot_eager", rtol=0, atol=0,
                               explain_args=[qkv])


# ---------------------------------------------------------------------------------------------
# The packed backward into a delayed FP8 layer's gradient operands
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("requires_triton")
@pytest.mark.parametrize("heads, kv_heads, head_size", [(4, 2, 16), (2, 2, 24), (3, 1, 8), (4, 1, 64), (1, 1, 256),
                                                     (2, 1, 80)])
@pytest.mark.parametrize("rows, transposed", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_the_packed_backward_into_fp8_is_the_references(heads, kv_heads, head_size, rows, transposed, dtype,
                                                        device):
    """``blockfuse::rotary_bwd_fp8_delayed``: q's and k's gradients rotated back and v's as is, packed and in e5m2
    with the history's scale, both layouts and the column sums, against the reference (the fp32 gradient quantized
    as it is): the bytes within one e5m2 step, the scales equal, the sums within fp32's, the amax rolled in; twice,
    so the second call's scale comes from the first's amax. Attention's gradients as it hands them: (batch, heads,
    seq, head_dim) memory seen as (batch, seq, heads, head_dim); 3 x 7 tokens (not a multiple of the padding);
    head_size 24 and 80 (12 and 40 pairs: padded halves), 8, and real models' 64 and 256; half tables longer than
    the sequence."""
    from blockfuse.ops import fp8
    from blockfuse.ops.rotary import _rotary_bwd_fp8, rotary_bwd_fp8_ref

    b, s = 3, 7
    table = torch.arange(12, dtype=torch.float32)[:, None] * 0.37 ** torch.arange(head_size // 2)[None, :]
    cos, sin = table.cos().to(device), table.sin().to(device)
    mine, theirs = (fp8.Float8Scaling.new(4, device) for _ in range(2))
    for call in range(2):
        grads = [random_tensor((b, h, s, head_size), dtype, seed=70 + 3 * call + i, scale=3.0).to(device)
                 .transpose(1, 2) for i, h in enumerate((heads, kv_heads, kv_heads))]
        got = _rotary_bwd_fp8(*grads, cos, sin, *mine, rows, transposed, 16, torch.float32)
        want = rotary_bwd_fp8_ref(*grads, cos, sin, *theirs, rows, transposed, 16, torch.float32)
        for index in ((0, 2) if rows and transposed else (0,) if rows else (2,)):
            a, w = got[index].float(), want[index].float()
            assert a.shape == w.shape and (a - w).abs().le(w.abs() * 2**-2 + 2**-16).all(), (call, index)
            assert (a != w).float().mean() < 0.01, (call, index)  # (ties and fp32 rounding only)
            assert torch.equal(got[index + 1], want[index + 1]), (call, index)
        if transposed:
            assert got[2].shape == ((heads + 2 * kv_heads) * head_size, 32)
            assert not got[2][:, b * s:].float().any() and got[2][:, : b * s].float().abs().sum() > 0
        torch.testing.assert_close(got[4], want[4], rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(mine.history, theirs.history, rtol=1e-5, atol=0)
        assert mine.history[0] > 0
        theirs.history.copy_(mine.history)  # (the next call's scale from one history)


@pytest.mark.usefixtures("requires_triton")
def test_the_packed_backward_into_fp8_launcher_passes_opcheck(device):
    from blockfuse.ops import fp8
    from blockfuse.ops.rotary import _rotary_bwd_fp8

    grads = [random_tensor((2, 5, h, 16), torch.bfloat16, seed=i).to(device) for i, h in enumerate((4, 2, 2))]
    cos, sin = (torch.rand(8, 8, device=device) for _ in range(2))
    state = fp8.Float8Scaling.new(4, device)
    torch.library.opcheck(torch.ops.blockfuse.rotary_bwd_fp8_delayed.default,
                          (*grads, cos, sin, *state, True, True, 16, torch.float32),
                          test_utils=("test_schema", "test_faketensor"))
    _rotary_bwd_fp8(*grads, cos, sin, *state, True, True, 16, None)


@pytest.mark.usefixtures("requires_triton")
def test_a_delayed_blocks_rotary_backward_hands_the_gradient_casts_to_the_qkv_layer(monkeypatch, device):
    """In a fused block with delayed layers the packed RoPE's backward writes the QKV layer's e5m2 gradient operands
    itself (one call a step) and that layer casts nothing of its own (no cast of a gradient as wide as qkv); the
    gradients are as close to the block's in fp32 as those of a step where nothing is handed (each layer casting its
    own gradient from its bf16 rounding), and the histories' amaxes match it."""
    from blockfuse.ops import rotary as rotary_module
    from tests.ops.test_fp8_delayed import handed_and_own_steps

    step = handed_and_own_steps(monkeypatch, device, rotary_module, "_rotary_bwd_fp8")
    qkv_width = 3 * 64
    assert len(step["handed_calls"]) == 1, step["handed_calls"]
    assert qkv_width not in [x.shape[-1] for x in step["handed_casts"]]
    assert qkv_width in [x.shape[-1] for x in step["own_casts"]]
    for name, t in step["own_states"].items():
        if "history" in name:
            torch.testing.assert_close(step["handed_states"][name], t, rtol=2e-2, atol=0, msg=name)
