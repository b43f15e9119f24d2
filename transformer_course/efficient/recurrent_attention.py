"""Transformer-XL's segment-level recurrence (Dai et al., 2019): attention over a long text, one segment at a time.

Each segment attends to itself (causally) and to the cached hidden states of the previous segment(s), the
*memory*. No gradient flows into the memory, so training costs what one segment costs, while information still
travels forward from segment to segment. The pattern this gives one layer is
:func:`~transformer_course.efficient.sparse_attention.transformer_xl_mask`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import checks
from ..core.attention import MultiHeadAttention


class TransformerXLAttention(MultiHeadAttention):
    """One self-attention layer with Transformer-XL's segment-level recurrence (Dai et al., 2019).

    ``forward(x, memory)`` attends from the segment x: (batch, s, d_model) to [memory; x], where memory (batch, m,
    d_model) holds the hidden states of earlier segments, detached: gradients stop at the segment boundary. It
    returns (output (batch, s, d_model), new memory = the last mem_len rows of [memory; x], detached; None when
    mem_len = 0).

    The attention is :class:`~transformer_course.core.attention.MultiHeadAttention` without biases, with the segment's
    queries as the last s of the m + s positions of the window and the causal mask over that window. Positions:
    Transformer-XL needs *relative* positions, because absolute ones would repeat in every segment. Here RoPE
    (``rope=True``) provides them: the rows of [memory; x] are rotated as positions 0 .. m + s - 1 of the current
    window, and only differences of positions reach the scores. The state_dict is that of
    ``MultiHeadAttention(d_model, num_heads, bias=False, rope=rope)``, and loads into it.
    """

    def __init__(self, d_model: int, num_heads: int, mem_len: int, rope: bool = True, max_len: int = 4096) -> None:
        checks.non_negative_int("mem_len", mem_len)
        super().__init__(d_model, num_heads, bias=False, rope=rope, max_len=max_len)
        self.mem_len = mem_len

    def forward(self, x: Tensor, memory: Tensor | None = None) -> tuple[Tensor, Tensor | None]:  # type: ignore[override]
        """x: (batch, s, d_model); memory: (batch, m, d_model) or None. Returns (out (batch, s, d_model), memory)."""
        checks.sequence("x", x, self.d_model)
        if memory is not None and (
            memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != x.shape[-1]
        ):
            raise ValueError(
                f"memory must have shape (batch={x.shape[0]}, m, d_model={self.d_model}), got {tuple(memory.shape)}"
            )
        context = x if memory is None else torch.cat([memory.detach(), x], dim=1)  # (batch, m + s, d_model)
        # causal over the window: query i of the segment sits at position m + i, causal_mask(s, m + s, offset=m)
        out = super().forward(x, context, causal=True)
        new_memory = context[:, max(0, context.shape[1] - self.mem_len) :].detach() if self.mem_len else None
        return out, new_memory

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mem_len={self.mem_len}"


def run_in_segments(module: TransformerXLAttention, x: Tensor, segment_len: int) -> Tensor:
    """Feed x: (batch, n, d_model) to ``module`` one segment of ``segment_len`` at a time, carrying the memory.

    Returns the outputs of all segments concatenated, (batch, n, d_model). The loop over segments is the algorithm:
    segment t + 1 needs the memory that segment t leaves behind.
    """
    checks.positive_int("segment_len", segment_len)
    outputs, memory = [], None
    for start in range(0, x.shape[1], segment_len):
        out, memory = module(x[:, start : start + segment_len], memory)
        outputs.append(out)
    return torch.cat(outputs, dim=1)
