"""Scaled dot-product attention, written out, and the one multi-head attention module of the package.

:class:`MultiHeadAttention` covers every attention layer the course uses: self- and cross-attention, the paper's
multi-head attention, grouped-query and multi-query attention (``num_kv_heads``), rotary positions (``rope``),
a KV cache for incremental decoding, and two backends (the written-out steps, or PyTorch's fused kernel).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from .masks import causal_mask, check_mask, combine_masks
from .rope import RotaryEmbedding


def _scores_shape(q: Tensor, k: Tensor) -> torch.Size:
    return torch.Size((*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2]))


def _check_mask_for(mask: Tensor | None, scores_shape: torch.Size) -> None:
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores_shape)}"
        )


def _written_out(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> tuple[Tensor, Tensor]:
    """The four steps, no checks: scores, mask, softmax, weighted sum. Shapes as in scaled_dot_product_attention."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., len_q, len_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        # softmax over a row of only -inf is 0/0 = NaN; give such rows finite scores, then zero them below
        scores = scores.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def _fused(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor:
    """PyTorch's kernel, no checks. A query row with nothing to attend to is let attend everywhere (so the kernel
    sees no empty row and gradients stay finite), then zeroed: the same result as :func:`_written_out`."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    empty_row = ~mask.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty_row, dropout_p=dropout_p)
    return out.masked_fill(empty_row, 0.0)


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
    Returns the output (..., len_q, d_v) and the attention weights (..., len_q, len_k). Dropout on the weights
    (``dropout_p``) only when ``training``.

    A query row whose mask is all ``False`` gets zero weights and a zero output (not NaN), and a finite
    gradient.
    """
    checks.qkv(q, k, v)
    checks.probability("dropout_p", dropout_p)
    _check_mask_for(mask, _scores_shape(q, k))
    return _written_out(q, k, v, mask, dropout_p if training else 0.0)


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, causal: bool = False
) -> Tensor:
    """The same attention through PyTorch's fused ``F.scaled_dot_product_attention`` (flash, memory-efficient or
    math kernel). The weights are not returned: not storing them is the point.

    Shapes and mask as in :func:`scaled_dot_product_attention`. ``causal=True`` adds the causal mask, with the
    queries taken as the last len_q of the len_k positions (as after a KV cache). ``dropout_p`` applies always
    (pass 0 in evaluation).
    """
    checks.qkv(q, k, v)
    checks.probability("dropout_p", dropout_p)
    len_q, len_k = q.shape[-2], k.shape[-2]
    if causal and mask is None and len_q == len_k:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    if causal:
        mask = combine_masks(mask, causal_mask(len_q, len_k, offset=len_k - len_q, device=q.device)[0, 0])
    _check_mask_for(mask, _scores_shape(q, k))
    return _fused(q, k, v, mask, dropout_p)


def _group_heads(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Views that pair each group of query heads with its key/value head, without copying K and V.

    q: (batch, heads, len_q, d) -> (batch, kv_heads, group, len_q, d); k, v: (batch, kv_heads, len_k, d) ->
    (batch, kv_heads, 1, len_k, d); a 4-D mask (batch, heads or 1, len_q, len_k) gets the same split of its head
    dimension. Query head h uses key/value head h // group.
    """
    batch, heads, len_q, head_dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    if mask is not None and mask.dim() == 4:
        mask = mask.reshape(mask.shape[0], -1, group if mask.shape[1] == heads else 1, *mask.shape[2:])
    return q.reshape(batch, kv_heads, group, len_q, head_dim), k[:, :, None], v[:, :, None], mask


def grouped_query_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, training: bool = False
) -> tuple[Tensor, Tensor]:
    """Attention where groups of query heads share a key/value head (GQA; MQA with one K/V head).

    q: (batch, heads, len_q, head_dim); k, v: (batch, kv_heads, len_k, head_dim) with heads a multiple of kv_heads.
    mask: bool, (len_q, len_k) or 4-D broadcastable to (batch, heads, len_q, len_k); ``True`` = may attend.
    Returns the output (batch, heads, len_q, head_dim) and the weights (batch, heads, len_q, len_k). Equal to
    repeating each K/V head ``heads / kv_heads`` times next to itself, but K and V are never copied.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"q, k, v must be 4-D (batch, heads, len, head_dim), got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    batch, heads, len_q, head_dim = q.shape
    if k.shape != v.shape or k.shape[0] != batch or k.shape[-1] != head_dim:
        raise ValueError(
            f"k and v must both have shape (batch={batch}, kv_heads, len_k, head_dim={head_dim}), got "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    checks.divisible("num_heads", heads, "num_kv_heads", k.shape[1], "each K/V head serves a group of query heads")
    checks.probability("dropout_p", dropout_p)
    if mask is not None:
        check_mask(mask, batch, heads, len_q, k.shape[2])
    out, weights = _written_out(*_group_heads(q, k, v, mask), dropout_p if training else 0.0)
    return out.reshape(batch, heads, len_q, head_dim), weights.reshape(batch, heads, len_q, k.shape[2])


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
    ``k`` and ``v`` are (batch, kv_heads, len_cached, d_k) once filled.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> None:
        """Store the new positions' keys and values, (batch, kv_heads, len_new, d_k), after the cached ones."""
        if self.k is None or self.v is None:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (a 1-D long tensor), e.g. after beam search picks its survivors."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections W_Q, W_K, W_V and W_O; the one attention module of the package.

    The heads are computed together: the projected tensors are reshaped from (batch, len, heads * d_k) to
    (batch, heads, len, d_k), so there is no loop over heads. Options, each one argument:

    - ``num_kv_heads``: key/value heads. ``None`` (= num_heads) is the paper's multi-head attention; a divisor of
      num_heads is grouped-query attention (GQA), 1 is multi-query attention (MQA). Query head h reads K/V head
      h // (num_heads / num_kv_heads); the KV cache shrinks by that factor.
    - ``rope``: rotate queries and keys by their positions (rotary embedding) inside attention.
    - ``head_dim``: width of each head (default d_model / num_heads).
    - ``bias``: biases in the four projections (the paper: yes; LLaMA: no).

    After each call with the written-out backend, ``attention_weights`` holds the per-head weights
    (batch, heads, len_q, len_k), detached, for plots.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        rope: bool = False,
        rope_base: float = 10000.0,
        max_len: int = 4096,
    ) -> None:
        super().__init__()
        checks.positive_ints(d_model=d_model, num_heads=num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        checks.positive_int("num_kv_heads", num_kv_heads)
        checks.divisible(
            "num_heads", num_heads, "num_kv_heads", num_kv_heads, "each K/V head serves a group of query heads"
        )
        if head_dim is None:
            checks.divisible("d_model", d_model, "num_heads", num_heads, "each head gets d_k = d_model / num_heads")
            head_dim = d_model // num_heads
        checks.positive_int("head_dim", head_dim)
        checks.probability("dropout", dropout)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.d_k = head_dim
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, num_heads * head_dim, bias=bias)
        self.w_k = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.w_v = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.w_o = nn.Linear(num_heads * head_dim, d_model, bias=bias)
        self.rope = RotaryEmbedding(head_dim, max_len, rope_base) if rope else None
        self.attention_weights: Tensor | None = None
        self.backend = "written_out"  # or "fused": see set_attention_backend

    @property
    def head_dim(self) -> int:
        """The width of one head, d_k."""
        return self.d_k

    def split_heads(self, x: Tensor) -> Tensor:
        """(batch, len, heads * d_k) -> (batch, heads, len, d_k)."""
        batch, length, _ = x.shape
        return x.view(batch, length, -1, self.d_k).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(batch, heads, len, d_k) -> (batch, len, heads * d_k)."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, -1)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        causal: bool = False,
    ) -> Tensor:
        """Self-attention when only ``query`` is given; cross-attention when ``key`` (and ``value``) come from
        another sequence.

        query: (batch, len_q, d_model); key, value: (batch, len_k, d_model) (default: ``query``).
        mask: bool, (len_q, len_k) or 4-D broadcastable to (batch, heads, len_q, len_k); ``True`` = may attend.
        causal: also apply the causal mask (the queries are the last len_q of the len_k positions).
        cache: optional :class:`KVCache` for incremental decoding; with it, len_k counts the cached positions
        too (the mask must cover them). Returns (batch, len_q, d_model).
        """
        key = query if key is None else key
        value = key if value is None else value
        checks.attention_inputs(query, key, value, self.d_model)
        if cache is not None and not isinstance(cache, KVCache):
            raise ValueError(f"cache must be a KVCache, got {type(cache).__name__}")
        q = self.split_heads(self.w_q(query))  # (batch, heads, len_q, d_k)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # cross-attention: the memory's K and V were computed on the first step
        else:
            k = self.split_heads(self.w_k(key))  # (batch, kv_heads, len_k, d_k)
            v = self.split_heads(self.w_v(value))
            if self.rope is not None:
                k = self.rope(k, offset=0 if cache is None else len(cache))
            if cache is not None:
                cache.append(k, v)
                k, v = cache.k, cache.v
        len_q, len_k = q.shape[2], k.shape[2]
        if self.rope is not None:
            q = self.rope(q, offset=checks.queries_last(len_q, len_k))
        if causal and len_q > 1:  # one query, the newest position, may see every key: its causal mask is all True
            mask = combine_masks(mask, causal_mask(len_q, len_k, offset=len_k - len_q, device=q.device))
        if mask is not None:
            check_mask(mask, query.shape[0], self.num_heads, len_q, len_k)
        out, weights = self._attend(q, k, v, mask)
        self.attention_weights = None if weights is None else weights.detach()
        return self.w_o(self.merge_heads(out))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """q: (batch, heads, len_q, d_k); k, v: (batch, kv_heads, len_k, d_k) -> out (batch, heads, len_q, d_k) and
        the weights (batch, heads, len_q, len_k), or None with the fused backend (it never forms them)."""
        batch, heads, len_q, d_k = q.shape
        if self.num_kv_heads != self.num_heads:
            q, k, v, mask = _group_heads(q, k, v, mask)
        dropout = self.dropout if self.training else 0.0
        if self.backend == "fused":
            return _fused(q, k, v, mask, dropout).reshape(batch, heads, len_q, d_k), None
        out, weights = _written_out(q, k, v, mask, dropout)
        return out.reshape(batch, heads, len_q, d_k), weights.reshape(batch, heads, len_q, -1)

    def extra_repr(self) -> str:
        kv = "" if self.num_kv_heads == self.num_heads else f", num_kv_heads={self.num_kv_heads}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{kv}, d_k={self.d_k}"


def attention_maps(model: nn.Module, name: str = "self_attention") -> Tensor:
    """The weights that every :class:`MultiHeadAttention` registered as ``name`` (``"self_attention"`` or
    ``"cross_attention"``) stored in the model's last forward pass, in layer order.

    Returns (layers, batch, heads, len_q, len_k). Works for any model built from the package's layers (the
    Transformer's encoder or decoder, BERT, GPT, ViT, the modern decoder).
    """
    found = [
        m for path, m in model.named_modules() if isinstance(m, MultiHeadAttention) and path.split(".")[-1] == name
    ]
    if not found:
        raise ValueError(f"{type(model).__name__} has no MultiHeadAttention named {name!r}")
    weights = [m.attention_weights for m in found]
    if any(w is None for w in weights):
        raise ValueError(
            "no attention weights stored: the model has not run yet, or ran with the fused backend; run a forward "
            "pass with the written-out attention first"
        )
    return torch.stack(weights)
