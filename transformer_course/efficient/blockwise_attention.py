"""The idea of flash attention: the exact result, computed block by block with a running softmax.

:func:`blockwise_attention` writes the idea out in PyTorch: the n x n matrix of scores is never stored, only one
block of it at a time. PyTorch's fused kernel (flash, memory-efficient or math), whose idea this is, runs in
:func:`~transformer_course.core.attention.fused_attention`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .. import checks
from ..core.masks import causal_mask

__all__ = ["blockwise_attention"]


def _causal_block(len_q: int, len_k: int, start: int, width: int, device: torch.device) -> Tensor:
    """Columns start .. start + width - 1 of the causal mask with the queries as the last len_q of len_k positions,
    that is of ``causal_mask(len_q, len_k, offset=len_k - len_q)``, as (len_q, width), without building the rest."""
    first_query = len_k - len_q - start  # the position of query 0, counted from the block's first key
    if first_query >= 0:
        return causal_mask(len_q, width, first_query, device=device)[0, 0]
    before = torch.zeros(-first_query, width, dtype=torch.bool, device=device)  # queries before the block's keys
    return torch.cat([before, causal_mask(len_q + first_query, width, device=device)[0, 0]])


def blockwise_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int = 128, causal: bool = False) -> Tensor:
    """Exact attention computed over blocks of keys with a running softmax (the idea of FlashAttention).

    q: (..., n_q, d); k, v: (..., n_k, d). Returns (..., n_q, d_v). For each block the scores (..., n_q, block_size)
    are formed, and three running quantities per query are updated: the largest score m so far, the sum l of
    exp(score - m), and the weighted sum of values acc. When m grows, the old l and acc are rescaled by
    exp(m_old - m_new). At the end acc / l is softmax(scores) V, exactly. The n_q x n_k matrix never exists.
    causal=True lets query i (aligned with the last n_q keys, so n_q <= n_k) see keys up to its own position.
    """
    checks.qkv(q, k, v)
    checks.positive_int("block_size", block_size)
    n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    if causal and n_q > n_k:
        raise ValueError(f"causal blockwise attention takes the queries as the last of the keys, got {n_q} > {n_k}")
    running_max = q.new_full(q.shape[:-1], float("-inf"))  # (..., n_q)
    running_sum = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])  # (..., n_q, d_v)
    for start in range(0, n_k, block_size):  # the loop over key blocks is the algorithm
        k_block, v_block = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        scores = q @ k_block.transpose(-2, -1) * scale  # (..., n_q, block)
        if causal:
            visible = _causal_block(n_q, n_k, start, k_block.shape[-2], q.device)
            scores = scores.masked_fill(~visible, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1))
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)  # rows with nothing yet
        p = torch.exp(scores - safe_max.unsqueeze(-1))
        correction = torch.exp(running_max - safe_max)  # exp(-inf) = 0 on the first block
        running_sum = running_sum * correction + p.sum(dim=-1)
        acc = acc * correction.unsqueeze(-1) + p @ v_block
        running_max = new_max
    return acc / running_sum.clamp_min(torch.finfo(acc.dtype).tiny).unsqueeze(-1)
