"""Grouped-query attention (GQA) and multi-query attention (MQA), and what they save: the KV cache.

In multi-head attention every query head has its own key and value head. GQA (Ainslie et al., 2023) lets a
group of ``num_heads / num_kv_heads`` query heads share one key/value head; MQA (Shazeer, 2019) is the extreme with
a single key/value head. The queries are unchanged, so the model still has ``num_heads`` attention patterns, but
the keys and values a decoder must cache shrink by the factor ``num_heads / num_kv_heads``.

Query head h uses key/value head ``h // (num_heads / num_kv_heads)``: consecutive query heads form a group. This is
the layout of ``repeat_interleave`` along the head dimension and of ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` (PyTorch >= 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import scaled_dot_product_attention
from .rope import RotaryEmbedding


def _check_groups(num_heads: int, num_kv_heads: int) -> None:
    for name, value in (("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads}): each key/value head "
            "serves a group of num_heads / num_kv_heads query heads"
        )


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Repeat each key/value head n_rep times, next to itself (head g becomes heads g*n_rep .. g*n_rep + n_rep - 1).

    x: (batch, kv_heads, len, head_dim) -> (batch, kv_heads * n_rep, len, head_dim). The same as
    ``x.repeat_interleave(n_rep, dim=1)``, not ``x.repeat(1, n_rep, 1, 1)`` (which would cycle the heads).
    """
    if x.dim() != 4:
        raise ValueError(f"x must have shape (batch, kv_heads, len, head_dim), got {tuple(x.shape)}")
    if not isinstance(n_rep, int) or n_rep < 1:
        raise ValueError(f"n_rep must be a positive int, got {n_rep!r}")
    batch, kv_heads, length, head_dim = x.shape
    return x[:, :, None].expand(batch, kv_heads, n_rep, length, head_dim).reshape(batch, kv_heads * n_rep, length, -1)


def grouped_query_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, training: bool = False
) -> tuple[Tensor, Tensor]:
    """Attention where groups of query heads share a key/value head, without copying K and V.

    q: (batch, heads, len_q, head_dim); k, v: (batch, kv_heads, len_k, head_dim) with heads a multiple of kv_heads.
    mask: bool, (len_q, len_k) or 4-D broadcastable to (batch, heads, len_q, len_k); ``True`` = may attend.
    Returns the output (batch, heads, len_q, head_dim) and the weights (batch, heads, len_q, len_k). Dropout on the
    weights (``dropout_p``) only when ``training``, as in the package's ``scaled_dot_product_attention``.

    The query heads are viewed as (batch, kv_heads, group, len_q, head_dim) and K, V as (batch, kv_heads, 1, len_k,
    head_dim), so broadcasting pairs each group with its key/value head: K and V are never repeated in memory.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"q, k, v must be 4-D (batch, heads, len, head_dim), got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    batch, heads, len_q, head_dim = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if k.shape != v.shape or k.shape[0] != batch or k.shape[-1] != head_dim:
        raise ValueError(
            f"k and v must both have shape (batch={batch}, kv_heads, len_k, head_dim={head_dim}), got "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    _check_groups(heads, kv_heads)
    group = heads // kv_heads
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}")
        if mask.dim() == 4:
            if mask.shape[1] not in (1, heads):
                raise ValueError(f"mask's head dimension must be 1 or {heads}, got shape {tuple(mask.shape)}")
            mask = mask.reshape(mask.shape[0], -1, group if mask.shape[1] == heads else 1, *mask.shape[2:])
        elif mask.dim() != 2:
            raise ValueError(f"mask must be (len_q, len_k) or 4-D, got shape {tuple(mask.shape)}")
    out, weights = scaled_dot_product_attention(
        q.reshape(batch, kv_heads, group, len_q, head_dim), k[:, :, None], v[:, :, None], mask, dropout_p, training
    )  # (batch, kv_heads, group, len_q, ...)
    return out.reshape(batch, heads, len_q, head_dim), weights.reshape(batch, heads, len_q, len_k)


def causal_mask_with_past(len_new: int, len_past: int, device: torch.device | str | None = None) -> Tensor:
    """Causal mask for len_new queries that follow len_past cached positions: (len_new, len_past + len_new) bool.

    Query i sits at position len_past + i and may attend keys 0 .. len_past + i.
    """
    query_pos = torch.arange(len_past, len_past + len_new, device=device)[:, None]
    return torch.arange(len_past + len_new, device=device)[None, :] <= query_pos


class GroupedQueryAttention(nn.Module):
    """Self-attention with ``num_heads`` query heads and ``num_kv_heads`` key/value heads, optionally with RoPE.

    num_kv_heads = num_heads is ordinary multi-head attention, num_kv_heads = 1 is multi-query attention. No biases
    by default (as in LLaMA). After each call ``attention_weights`` holds (batch, heads, len_q, len_k), detached.

    For incremental decoding pass a cache object with attributes ``k`` and ``v`` (None when empty), for example the
    package's ``attention.KVCache``: the module appends the new positions' keys and values, (batch, num_kv_heads,
    len, head_dim), which is what makes the cache ``num_heads / num_kv_heads`` times smaller than with MHA.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        rope: bool = True,
        rope_base: float = 10000.0,
        max_len: int = 4096,
        dropout: float = 0.0,
        bias: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        _check_groups(num_heads, num_kv_heads)
        if head_dim is None:
            if d_model % num_heads:
                raise ValueError(
                    f"d_model ({d_model}) must be divisible by num_heads ({num_heads}), or pass head_dim explicitly"
                )
            head_dim = d_model // num_heads
        if not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, num_heads * head_dim, bias=bias)
        self.w_k = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.w_v = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.w_o = nn.Linear(num_heads * head_dim, d_model, bias=bias)
        self.rope = RotaryEmbedding(head_dim, max_len, rope_base) if rope else None
        self.attention_weights: Tensor | None = None

    def _split(self, x: Tensor, heads: int) -> Tensor:
        """(batch, len, heads * head_dim) -> (batch, heads, len, head_dim)."""
        return x.view(x.shape[0], x.shape[1], heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, causal: bool = False, cache: object | None = None
    ) -> Tensor:
        """x: (batch, len, d_model) -> (batch, len, d_model).

        mask: bool, (len, len_k) or 4-D broadcastable to (batch, heads, len, len_k), ``True`` = may attend, where
        len_k = cached + len. causal=True adds the causal mask (shifted by the cached positions). cache: see the
        class docstring; with RoPE the new positions start at the number of cached ones.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, len, d_model={self.d_model}), got {tuple(x.shape)}")
        past = 0
        if cache is not None:
            if not (hasattr(cache, "k") and hasattr(cache, "v")):
                raise ValueError(f"cache must have attributes k and v (e.g. attention.KVCache), got {type(cache)}")
            past = 0 if cache.k is None else cache.k.shape[2]
        q = self._split(self.w_q(x), self.num_heads)  # (batch, heads, len, head_dim)
        k = self._split(self.w_k(x), self.num_kv_heads)  # (batch, kv_heads, len, head_dim)
        v = self._split(self.w_v(x), self.num_kv_heads)
        if self.rope is not None:
            q, k = self.rope(q, offset=past), self.rope(k, offset=past)
        if cache is not None:
            if cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
            cache.k, cache.v = k, v
        if causal:
            causal_part = causal_mask_with_past(x.shape[1], past, x.device)
            mask = causal_part if mask is None else mask & causal_part
        out, weights = grouped_query_attention(q, k, v, mask, self.dropout, self.training)
        self.attention_weights = weights.detach()
        return self.w_o(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))


# ---------------------------------------------------------------------------------------------- KV-cache memory
def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_value: int | float = 2,
) -> int:
    """Bytes a decoder keeps in its KV cache: 2 (K and V) x layers x kv_heads x head_dim x tokens x batch x bytes.

    bytes_per_value: 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit cache.
    """
    for name, value in (
        ("num_layers", num_layers),
        ("num_kv_heads", num_kv_heads),
        ("head_dim", head_dim),
        ("seq_len", seq_len),
        ("batch_size", batch_size),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(bytes_per_value, (int, float)) or not bytes_per_value > 0:
        raise ValueError(f"bytes_per_value must be a positive number, got {bytes_per_value!r}")
    return int(2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value)


@dataclass(frozen=True)
class DecoderShape:
    """The numbers of a published decoder-only model that fix its KV cache and (for LLaMA-style models) its size.

    d_ff and vocab_size are 0 where the model is not LLaMA-style (then :func:`llama_parameter_count` does not apply).
    """

    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    context_len: int

    def kv_cache_bytes(self, seq_len: int, batch_size: int = 1, bytes_per_value: int | float = 2) -> int:
        """Bytes of this model's KV cache for ``batch_size`` sequences of ``seq_len`` tokens."""
        return kv_cache_bytes(self.num_layers, self.num_kv_heads, self.head_dim, seq_len, batch_size, bytes_per_value)


# From each model's published config.json (num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads,
# intermediate_size, vocab_size, max_position_embeddings). Falcon-7B uses multi-query attention (one K/V head) and
# a different block (parallel attention and a GELU MLP), so only its attention numbers are used.
PUBLISHED_DECODERS: dict[str, DecoderShape] = {
    "Llama-2-7B": DecoderShape(32, 4096, 32, 32, 128, 11008, 32000, 4096),
    "Llama-2-70B": DecoderShape(80, 8192, 64, 8, 128, 28672, 32000, 4096),
    "Mistral-7B": DecoderShape(32, 4096, 32, 8, 128, 14336, 32000, 32768),
    "Llama-3-8B": DecoderShape(32, 4096, 32, 8, 128, 14336, 128256, 8192),
    "Falcon-7B": DecoderShape(32, 4544, 71, 1, 64, 0, 0, 2048),
}
