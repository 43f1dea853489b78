"""Benchmark of the rotary position embedding of q and k (``blockfuse.rotary``).

Shapes are (batch, seq, q_heads, kv_heads, head_dim); q and k are in the (batch, heads,
seq, head_dim) layout (``"bhsd"``: Hugging Face's and Liger-Kernel's), with full rotary.
cos / sin are Hugging Face's per-token tables (1, seq, head_dim) in the input dtype, built
once per shape outside the timed region and shared by every provider; they are not inputs
of the benchmark (the runner would differentiate them), and they get no gradient.

Byte counts: read q and k, write q_out and k_out, read the cos and sin tables once
(forward); read dq_out and dk_out, write dq and dk, read the tables once (backward).

Providers:
* ``eager``: Hugging Face's formula in torch ops, ``q * cos + rotate_half(q) * sin`` with
  cos / sin unsqueezed at dim 1, every op in the input dtype;
* ``reference`` / ``compile``: ``blockfuse.rotary_ref`` (fp32 math), eager and compiled;
* ``liger``: ``liger_rotary_pos_emb(q, k, cos, sin)`` (liger_kernel 0.8.5,
  ``liger_kernel.transformers.rope``; signature ``(q, k, cos, sin, position_ids=None,
  unsqueeze_dim=1, rotary_dim=None)``, q / k (batch, heads, seq, head_dim), cos / sin
  (1 or batch, seq, head_dim)); it copies q and k to (batch, seq, heads, head_dim) and
  rotates the copies in place;
* ``blockfuse``: ``blockfuse.rotary(..., layout="bhsd")`` on the same tables.
"""

from __future__ import annotations

import torch

from blockfuse.bench.spec import OpBenchmark, Shape

THETA = 10000.0

# (batch, seq, q_heads, kv_heads, head_dim)
SHAPES: tuple[Shape, ...] = (
    (4, 2048, 32, 32, 128),  # the SPEC's q, k [4, 32, 2048, 128]
    (8, 4096, 32, 8, 128),  # grouped-query attention, Llama-3 8B heads
    (1, 128, 16, 16, 64),  # small: launch-bound
)
CPU_SHAPES: tuple[Shape, ...] = ((2, 64, 4, 2, 64), (1, 7, 6, 2, 72))


# ---------------------------------------------------------------- inputs and tables


def _inputs(shape, dtype, device):
    batch, seq, q_heads, kv_heads, head_dim = shape
    return {
        "q": torch.randn((batch, q_heads, seq, head_dim), dtype=dtype, device=device),  # (b, h, s, d)
        "k": torch.randn((batch, kv_heads, seq, head_dim), dtype=dtype, device=device),
    }


_TABLES: dict = {}


def tables(seq: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's cos, sin (1, seq, head_dim) in ``dtype`` (``cat(freqs, freqs)``), cached."""
    key = (seq, head_dim, dtype, str(device))
    if key not in _TABLES:
        inv_freq = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
        freqs = torch.arange(seq, device=device).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[None]  # (1, seq, head_dim)
        _TABLES[key] = (emb.cos().to(dtype), emb.sin().to(dtype))
    return _TABLES[key]


def _tables_of(q):
    return tables(q.shape[2], q.shape[3], q.dtype, q.device)


# ---------------------------------------------------------------- byte counts


def rotary_bytes(shape, b):
    batch, seq, q_heads, kv_heads, head_dim = shape
    qk = batch * seq * (q_heads + kv_heads) * head_dim
    table = 2 * seq * head_dim  # cos and sin (1, seq, head_dim)
    forward = (2 * qk + table) * b  # read q, k, cos, sin; write q_out, k_out
    backward = (2 * qk + table) * b  # read dq_out, dk_out, cos, sin; write dq, dk
    return forward, backward


# ---------------------------------------------------------------- providers


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_rotary(q, k, cos, sin):
    """Hugging Face's ``apply_rotary_pos_emb`` (unsqueeze_dim=1), as torch ops."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _eager():
    return lambda q, k: hf_rotary(q, k, *_tables_of(q))


def _reference_on(q, k, cos, sin):
    from blockfuse.ops.rotary import rotary_ref

    return rotary_ref(q, k, cos, sin, layout="bhsd")


def _reference():
    return lambda q, k: _reference_on(q, k, *_tables_of(q))


def _compile():
    # NOTE: the table lookup stays outside the compiled function, so the compiled graph
    # reads cos / sin as inputs as every other provider does.
    compiled = torch.compile(_reference_on)
    return lambda q, k: compiled(q, k, *_tables_of(q))


def _liger():
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    return lambda q, k: liger_rotary_pos_emb(q, k, *_tables_of(q))


def _blockfuse():
    from blockfuse.ops.rotary import rotary

    return lambda q, k: rotary(q, k, *_tables_of(q), layout="bhsd")


BENCHMARKS = (
    # (q_out, k_out) = RoPE(q, k) with HF's per-token tables, (batch, heads, seq, head_dim)
    OpBenchmark(
        name="rotary",
        make_inputs=_inputs,
        outputs=("q_out", "k_out"),
        reference=_reference,
        providers={
            "eager": _eager,
            "reference": _reference,
            "compile": _compile,
            "liger": _liger,
            "blockfuse": _blockfuse,
        },
        bytes_moved=rotary_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        grad_of="q",
    ),
)
