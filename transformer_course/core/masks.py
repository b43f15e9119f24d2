"""Attention masks. One convention across the package: ``True`` means "may attend".

This is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention`` uses the opposite
one (``True`` blocks); :func:`to_torch_blocking_mask` converts.

Every mask broadcasts against attention scores of shape ``(batch, heads, len_q, len_k)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import non_negative_int, positive_int


def padding_mask(token_ids: Tensor, pad_id: int) -> Tensor:
    """Mask that hides padded keys.

    token_ids: (batch, len_k) integer ids. Returns a bool mask (batch, 1, 1, len_k): ``True`` at real tokens.
    """
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids must have shape (batch, len), got {tuple(token_ids.shape)}")
    if token_ids.dtype.is_floating_point or token_ids.dtype == torch.bool:
        raise ValueError(f"token_ids must be an integer tensor, got dtype {token_ids.dtype}")
    return (token_ids != pad_id)[:, None, None, :]


def causal_mask(
    len_q: int, len_k: int | None = None, offset: int = 0, *, device: torch.device | str | None = None
) -> Tensor:
    """Mask that lets a query see its own position and the positions before it, never the ones after.

    Query row i sits at position ``offset + i``; key column j at position j. Query i may attend key j when
    ``j <= offset + i``. ``len_k`` defaults to ``offset + len_q``: the usual square mask (offset 0), or, during
    incremental decoding, ``len_q`` new queries after ``offset`` cached positions.
    Returns a bool mask (1, 1, len_q, len_k), ``True`` = may attend.
    """
    positive_int("len_q", len_q)
    non_negative_int("offset", offset)
    len_k = offset + len_q if len_k is None else len_k
    positive_int("len_k", len_k)
    return torch.ones(len_q, len_k, dtype=torch.bool, device=device).tril(diagonal=offset)[None, None]


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of masks (``None`` entries are skipped); a position is visible only if every mask allows it.

    Each mask broadcasts against (batch, heads, len_q, len_k); so does the result.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    for m in present:
        if m.dtype != torch.bool:
            raise ValueError(f"masks must be bool tensors (True = may attend), got dtype {m.dtype}")
    result = present[0]
    for m in present[1:]:
        result = result & m
    return result


def decoder_self_mask(tgt_ids: Tensor, pad_id: int) -> Tensor:
    """Causal mask combined with the target's padding mask.

    tgt_ids: (batch, len_t). Returns a bool mask (batch, 1, len_t, len_t).
    """
    return combine_masks(padding_mask(tgt_ids, pad_id), causal_mask(tgt_ids.shape[1], device=tgt_ids.device))


def check_mask(mask: Tensor, batch: int, heads: int, len_q: int, len_k: int) -> None:
    """Raise ``ValueError`` unless ``mask`` is a bool tensor that broadcasts to (batch, heads, len_q, len_k).

    Accepted shapes: (len_q, len_k), or 4-D with each dimension equal to the target's or 1.
    """
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "for a 0/-inf additive mask use mask == 0"
        )
    target = (batch, heads, len_q, len_k)
    shape = tuple(mask.shape)
    expected = f"(len_q, len_k) = ({len_q}, {len_k}) or 4-D broadcastable to {target}"
    if mask.dim() == 2:
        shape = (1, 1, *shape)
    elif mask.dim() != 4:
        raise ValueError(f"mask has shape {tuple(mask.shape)}; expected {expected}")
    if any(s not in (1, t) for s, t in zip(shape, target)):
        raise ValueError(f"mask has shape {tuple(mask.shape)}; expected {expected}")


def to_torch_blocking_mask(mask: Tensor) -> Tensor:
    """Convert our mask (``True`` = may attend) to ``nn.MultiheadAttention``'s (``True`` = blocked)."""
    return ~mask
