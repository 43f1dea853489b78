"""RotaryEmbedding: fp32 cos / sin tables plus a call to the fused ``rotary`` functional."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from blockfuse.ops.rotary import rotary


def rotary_tables(length: int, rotary_dim: int, theta: float, device=None) -> tuple[Tensor, Tensor]:
    """Half tables cos, sin of shape (length, rotary_dim / 2), fp32.

    NOTE: computed as Hugging Face computes them (fp32 inverse frequencies
    ``1 / theta ** (arange(0, rotary_dim, 2) / rotary_dim)``, fp32 angles ``position * inv_freq``)
    so the tables equal the first half of ``LlamaRotaryEmbedding``'s bit for bit.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).float() / rotary_dim))
    positions = torch.arange(length, dtype=torch.int64, device=device).float()
    angles = positions[:, None] * inv_freq[None, :]  # (length, rotary_dim / 2)
    return angles.cos(), angles.sin()


class RotaryEmbedding(nn.Module):
    """Rotary position embedding of q and k with the fused kernel.

    Keeps half tables cos / sin (max_seq_len, rotary_dim / 2) in fp32 as non-persistent
    buffers (not in the state dict) and grows them (to the larger of the needed length and
    twice the current one) when a longer sequence arrives. ``rotary_dim`` (default head_dim)
    rotates the first rotary_dim elements of each head and passes the rest through.

    ``forward(q, k, position_ids=None, seq_offset=0, *, layout=None, out_layout=None,
    inplace=False)`` returns ``blockfuse.rotary(q, k, cos, sin, ...)`` (see it for the
    shapes); ``layout`` defaults to the module's. The growth check compares shapes only
    (``seq_offset + seq`` against the table length), so a compiled model of fixed shape never
    retraces it. With ``position_ids`` the table is grown to cover the sequence length; the
    values of position_ids are not inspected (no device sync): build the module with a
    ``max_seq_len`` above the largest position, or call :meth:`extend_to` first.

    Tables live on the module's device (they follow ``.to(device)``); inputs on another
    device get a copy cached for that device. A ``.to(dtype)`` of the model does not lower
    their precision: tables that are not fp32 are rebuilt in fp32 on the next call.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0, max_seq_len: int = 2048,
                 rotary_dim: Optional[int] = None, *, interleaved: bool = False, layout: str = "bshd",
                 device=None):
        super().__init__()
        rotary_dim = head_dim if rotary_dim is None else rotary_dim
        if not isinstance(head_dim, int) or head_dim <= 0:
            raise ValueError(f"head_dim: expected a positive int, got {head_dim!r}")
        if not isinstance(rotary_dim, int) or rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
            raise ValueError(f"rotary_dim: expected an even int in [2, head_dim={head_dim}], got {rotary_dim!r}")
        if not theta > 0:
            raise ValueError(f"theta: expected a positive base, got {theta!r}")
        if not isinstance(max_seq_len, int) or max_seq_len <= 0:
            raise ValueError(f"max_seq_len: expected a positive int, got {max_seq_len!r}")
        if layout not in ("bshd", "bhsd"):
            raise ValueError(f"layout: expected 'bshd' or 'bhsd', got {layout!r}")
        self.head_dim = head_dim
        self.rotary_dim = rotary_dim
        self.theta = float(theta)
        self.max_seq_len = max_seq_len
        self.interleaved = interleaved
        self.layout = layout
        cos, sin = rotary_tables(max_seq_len, rotary_dim, self.theta, device)
        self.register_buffer("cos", cos, persistent=False)  # (length, rotary_dim / 2) fp32
        self.register_buffer("sin", sin, persistent=False)
        self._other_devices: dict[torch.device, tuple[Tensor, Tensor]] = {}

    def extend_to(self, length: int) -> None:
        """Grows the tables to at least ``length`` positions (a no-op if they are long enough)."""
        if length > self.cos.shape[0] or self.cos.dtype != torch.float32:
            self._rebuild(length)

    def _rebuild(self, length: int) -> None:
        current = self.cos.shape[0]
        length = max(length, 2 * current) if length > current else current
        self.cos, self.sin = rotary_tables(length, self.rotary_dim, self.theta, self.cos.device)
        self._other_devices = {}

    def tables(self, device: torch.device, length: int) -> tuple[Tensor, Tensor]:
        """The cos, sin half tables on ``device`` with at least ``length`` rows."""
        # NOTE: shape and dtype comparisons only (no data-dependent branch), so a compiled
        # forward of fixed shape needs no guard on the table contents and never breaks.
        if length > self.cos.shape[0] or self.cos.dtype != torch.float32:
            self._rebuild(length)
        if self.cos.device == device:
            return self.cos, self.sin
        cached = self._other_devices.get(device)
        if cached is None or cached[0].shape[0] != self.cos.shape[0]:
            cached = (self.cos.to(device), self.sin.to(device))
            self._other_devices[device] = cached
        return cached

    def forward(self, q: Tensor, k: Tensor, position_ids: Optional[Tensor] = None, seq_offset: int = 0, *,
                layout: Optional[str] = None, out_layout: Optional[str] = None,
                inplace: bool = False) -> tuple[Tensor, Tensor]:
        layout = self.layout if layout is None else layout
        if q.dim() == 4 and layout in ("bshd", "bhsd"):
            seq = q.shape[1] if layout == "bshd" else q.shape[2]
        else:
            seq = 0  # rotary() reports the bad shape or layout
        cos, sin = self.tables(q.device, seq_offset + seq)
        return rotary(q, k, cos, sin, interleaved=self.interleaved, position_ids=position_ids,
                      seq_offset=seq_offset, layout=layout, out_layout=out_layout, inplace=inplace,
                      rotary_dim=self.rotary_dim)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, theta={self.theta}, "
                f"max_seq_len={self.max_seq_len}, interleaved={self.interleaved}, layout={self.layout!r}")
