"""Scaled dot-product attention, written out, and multi-head attention built on it."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import check_mask


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, one step at a time.

    q: (..., len_q, d_k), k: (..., len_k, d_k), v: (..., len_k, d_v); usually ``...`` is (batch, heads).
    mask: bool, broadcastable to (..., len_q, len_k), ``True`` = may attend.
    Returns the output (..., len_q, d_v) and the attention weights (..., len_q, len_k).

    A query row whose mask is all ``False`` gets zero weights and a zero output (not NaN), and a finite
    gradient.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length len_k, got {k.shape[-2]} and {v.shape[-2]}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., len_q, len_k)
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}")
        try:
            broadcast = torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            broadcast = None
        if broadcast != scores.shape:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores.shape)}"
            )
        scores = scores.masked_fill(~mask, float("-inf"))
        # softmax over a row of only -inf is 0/0 = NaN; give such rows finite scores, then zero them below
        empty_row = ~mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(empty_row, 0.0)
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0) -> Tensor:
    """The same attention through PyTorch's fused ``F.scaled_dot_product_attention`` (no weights returned).

    Shapes as in :func:`scaled_dot_product_attention`. A query row with nothing to attend to gives zeros here
    too: it is let attend everywhere (so the kernel sees no empty row, and gradients stay finite), then zeroed.
    """
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    empty_row = ~mask.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty_row, dropout_p=dropout_p)
    return out.masked_fill(empty_row, 0.0)


ATTENTION_BACKENDS = ("written_out", "fused")


def set_attention_backend(model: nn.Module, backend: str) -> nn.Module:
    """Switch every :class:`MultiHeadAttention` inside ``model`` to ``"written_out"`` (the default: the steps of
    :func:`scaled_dot_product_attention`, weights kept for plots) or ``"fused"`` (:func:`fused_attention`: faster
    and lighter on memory, no ``attention_weights``). Returns ``model``."""
    if backend not in ATTENTION_BACKENDS:
        raise ValueError(f"backend must be one of {ATTENTION_BACKENDS}, got {backend!r}")
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.backend = backend
    return model


class KVCache:
    """Keys and values of one attention module, kept between calls for incremental (token by token) decoding.

    ``static=False`` (decoder self-attention): each call appends the new positions' K and V to the cache.
    ``static=True`` (cross-attention): K and V of the encoder output are computed on the first call and reused.
    ``k`` and ``v`` are (batch, heads, len_cached, d_k) once filled.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (a 1-D long tensor), e.g. after beam search picks its survivors."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate projections W_Q, W_K, W_V and W_O.

    The heads are computed together: the projected tensors are reshaped from (batch, len, d_model) to
    (batch, heads, len, d_k), so there is no loop over heads.

    After each call, ``attention_weights`` holds the per-head weights (batch, heads, len_q, len_k), detached,
    for plots.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads}); "
                f"each head gets d_k = d_model / num_heads dimensions"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attention_weights: Tensor | None = None
        self.backend = "written_out"  # or "fused": see set_attention_backend

    def split_heads(self, x: Tensor) -> Tensor:
        """(batch, len, d_model) -> (batch, heads, len, d_k)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(batch, heads, len, d_k) -> (batch, len, d_model)."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Self-attention when only ``query`` is given; cross-attention when ``key`` (and ``value``) come from
        another sequence.

        query: (batch, len_q, d_model); key, value: (batch, len_k, d_model) (default: ``query``).
        mask: bool, (len_q, len_k) or 4-D broadcastable to (batch, heads, len_q, len_k); ``True`` = may attend.
        cache: optional :class:`KVCache` for incremental decoding; with it, len_k counts the cached positions
        too (the mask must cover them). Returns (batch, len_q, d_model).
        """
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (batch, len, d_model={self.d_model}), got {tuple(t.shape)}")
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(
                f"query, key and value must share the batch size, got {query.shape[0]}, {key.shape[0]}, "
                f"{value.shape[0]}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length, got {key.shape[1]} and {value.shape[1]}")
        q = self.split_heads(self.w_q(query))  # (batch, heads, len_q, d_k)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # cross-attention: the memory's K and V were computed on the first step
        else:
            k = self.split_heads(self.w_k(key))  # (batch, heads, len_k, d_k)
            v = self.split_heads(self.w_v(value))  # (batch, heads, len_k, d_k)
            if cache is not None:
                if cache.k is not None:  # self-attention: append the new positions to the cached ones
                    k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
                cache.k, cache.v = k, v
        if mask is not None:
            check_mask(mask, query.shape[0], self.num_heads, query.shape[1], k.shape[2])
        if self.backend == "fused":
            out = fused_attention(q, k, v, mask, self.dropout if self.training else 0.0)
            self.attention_weights = None  # the fused kernel never forms the weights
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
            self.attention_weights = weights.detach()
        return self.w_o(self.merge_heads(out))
