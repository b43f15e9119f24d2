"""Sparse attention patterns: each query sees only some keys (sliding window, global tokens, random keys).

- Sliding window (Longformer, Mistral): each token sees the ``window`` tokens on each side, O(n w).
  :func:`sliding_window_attention` computes only that band.
- Longformer: the window plus a few *global* tokens that see and are seen by everyone;
  :func:`longformer_attention` computes the band plus the global rows and columns.
- BigBird: window + global + a few *random* keys per query. A mask only (:func:`bigbird_mask`): BigBird gets its
  speed from block-sparse kernels that gather blocks of keys, which this course does not write.
- Transformer-XL's pattern (:func:`transformer_xl_mask`): causal within a segment plus a memory of earlier positions.

The ``*_mask`` functions give the patterns as masks for full attention, for checking and for plots; each returns a
bool mask (1, 1, len, len), ``True`` = may attend, as everywhere in the package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import checks
from ..core.attention import scaled_dot_product_attention
from ..core.masks import causal_mask


def _global_index(global_positions: Sequence[int] | Tensor, length: int, device: torch.device | str | None) -> Tensor:
    index = torch.as_tensor(global_positions, dtype=torch.long, device=device).flatten()
    if index.numel():
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= length:
            raise ValueError(f"global_positions must lie in [0, {length}), got values in [{low}, {high}]")
        if index.unique().numel() != index.numel():
            raise ValueError(f"global_positions must not repeat a position, got {index.tolist()}")
    return index


# ------------------------------------------------------------------------------------------------------- masks
def sliding_window_mask(
    length: int, window: int, causal: bool = False, device: torch.device | str | None = None
) -> Tensor:
    """Query i may attend key j when |i - j| <= window (causal: 0 <= i - j <= window). Returns (1, 1, len, len)."""
    checks.positive_int("length", length)
    checks.non_negative_int("window", window)
    offset = torch.arange(length, device=device)[:, None] - torch.arange(length, device=device)[None, :]  # i - j
    allowed = (offset.abs() <= window)[None, None]
    return allowed & causal_mask(length, device=device) if causal else allowed


def global_token_mask(
    length: int, global_positions: Sequence[int] | Tensor, device: torch.device | str | None = None
) -> Tensor:
    """Global tokens attend to every position and every position attends to them. Returns (1, 1, len, len)."""
    checks.positive_int("length", length)
    is_global = torch.zeros(length, dtype=torch.bool, device=device)
    is_global[_global_index(global_positions, length, device)] = True
    return (is_global[:, None] | is_global[None, :])[None, None]


def longformer_mask(
    length: int, window: int, global_positions: Sequence[int] | Tensor, device: torch.device | str | None = None
) -> Tensor:
    """Longformer's pattern: a sliding window of ``window`` keys on each side plus global tokens. (1, 1, len, len)."""
    return sliding_window_mask(length, window, device=device) | global_token_mask(length, global_positions, device)


def random_key_mask(
    length: int, num_random: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
) -> Tensor:
    """Each query gets ``num_random`` distinct keys chosen uniformly at random. Returns (1, 1, len, len).

    The keys are the num_random largest of one uniform number per (query, key): no loop over queries.
    """
    checks.positive_int("length", length)
    checks.non_negative_int("num_random", num_random)
    if num_random > length:
        raise ValueError(f"num_random must be an int in [0, length={length}], got {num_random!r}")
    scores = torch.rand(length, length, generator=generator)
    chosen = scores.topk(num_random, dim=-1).indices  # (len, num_random)
    mask = torch.zeros(length, length, dtype=torch.bool).scatter_(1, chosen, True)
    return mask.to(device)[None, None]


def bigbird_mask(
    length: int,
    window: int,
    num_random: int,
    global_positions: Sequence[int] | Tensor,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """BigBird's pattern at token level: sliding window + random keys + global tokens. Returns (1, 1, len, len).

    (BigBird itself works on blocks of 64 tokens so that a GPU can gather whole blocks; the pattern is the same.)
    """
    return (
        sliding_window_mask(length, window, device=device)
        | random_key_mask(length, num_random, generator, device)
        | global_token_mask(length, global_positions, device)
    )


def transformer_xl_mask(
    length: int, segment_len: int, mem_len: int, device: torch.device | str | None = None
) -> Tensor:
    """What one Transformer-XL layer lets each position see: (1, 1, len, len).

    Position t in the segment starting at s sees positions max(0, s - mem_len) .. t: its own segment up to itself
    (causal) and the last mem_len positions before the segment (the cached memory).
    """
    checks.positive_int("length", length)
    checks.positive_int("segment_len", segment_len)
    checks.non_negative_int("mem_len", mem_len)
    query = torch.arange(length, device=device)[:, None]
    segment_start = query - query % segment_len
    in_memory = torch.arange(length, device=device)[None, :] >= segment_start - mem_len
    return causal_mask(length, device=device) & in_memory[None, None]


# --------------------------------------------------------------------------------------- sliding window (banded)
def _band(x: Tensor, left: int, right: int) -> Tensor:
    """(..., n, d) -> (..., n, d, left + right + 1): for each row i the rows i - left .. i + right (zero-padded)."""
    padded = F.pad(x, (0, 0, left, right))  # (..., n + left + right, d)
    return padded.unfold(-2, left + right + 1, 1)  # a view: (..., n, d, width)


def _band_valid(n: int, left: int, right: int, device: torch.device) -> Tensor:
    """(n, width) bool: which entries of the band are real positions (not the zero padding)."""
    key_pos = torch.arange(n, device=device)[:, None] + torch.arange(-left, right + 1, device=device)[None, :]
    return (key_pos >= 0) & (key_pos < n)


def sliding_window_attention(q: Tensor, k: Tensor, v: Tensor, window: int, causal: bool = False) -> Tensor:
    """Attention restricted to |i - j| <= window (causal: 0 <= i - j <= window), computed on the band only.

    q, k, v: (..., n, d) with one length n. Returns (..., n, d_v). Cost O(n (2 window + 1) d) time and memory instead
    of O(n^2 d); equal to full attention with :func:`sliding_window_mask`.
    """
    checks.qkv(q, k, v)
    checks.non_negative_int("window", window)
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(f"sliding-window self-attention needs len_q == len_k, got {n} and {k.shape[-2]}")
    left, right = window, 0 if causal else window  # causal: the band stops at the query itself
    k_band, v_band = _band(k, left, right), _band(v, left, right)  # (..., n, d, width)
    scores = torch.einsum("...nd,...ndw->...nw", q, k_band) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~_band_valid(n, left, right, q.device), float("-inf"))
    weights = scores.softmax(dim=-1)  # every row holds at least its own position, so no row is all -inf
    return torch.einsum("...nw,...ndw->...nd", weights, v_band)


def longformer_attention(
    q: Tensor, k: Tensor, v: Tensor, window: int, global_positions: Sequence[int] | Tensor
) -> Tensor:
    """Longformer self-attention: a band of width 2 window + 1 plus global tokens, O(n (window + g)).

    q, k, v: (..., n, d). Every query attends to its band and to the g global keys; each global query attends to
    all n keys. Equal to full attention with :func:`longformer_mask`. Returns (..., n, d_v).
    """
    checks.qkv(q, k, v)
    checks.non_negative_int("window", window)
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    if k.shape[-2] != n:
        raise ValueError(f"Longformer self-attention needs len_q == len_k, got {n} and {k.shape[-2]}")
    index = _global_index(global_positions, n, q.device)
    k_band, v_band = _band(k, window, window), _band(v, window, window)
    band_scores = torch.einsum("...nd,...ndw->...nw", q, k_band) * scale
    band_scores = band_scores.masked_fill(~_band_valid(n, window, window, q.device), float("-inf"))
    k_global, v_global = k[..., index, :], v[..., index, :]  # (..., g, d)
    global_scores = q @ k_global.transpose(-2, -1) * scale  # (..., n, g)
    inside_band = (torch.arange(n, device=q.device)[:, None] - index[None, :]).abs() <= window  # counted already
    global_scores = global_scores.masked_fill(inside_band, float("-inf"))
    weights = torch.cat([band_scores, global_scores], dim=-1).softmax(dim=-1)
    width = band_scores.shape[-1]
    out = torch.einsum("...nw,...ndw->...nd", weights[..., :width], v_band) + weights[..., width:] @ v_global
    if index.numel():  # the global queries see everything: ordinary attention for those g rows
        full_rows, _ = scaled_dot_product_attention(q[..., index, :], k, v)
        out = out.index_copy(-2, index, full_rows)
    return out
