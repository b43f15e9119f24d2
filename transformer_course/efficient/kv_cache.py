"""Grouped-query attention (GQA) and multi-query attention (MQA), and what they save: the KV cache.

In multi-head attention every query head has its own key and value head. GQA (Ainslie et al., 2023) lets a
group of ``num_heads / num_kv_heads`` query heads share one key/value head; MQA (Shazeer, 2019) is the extreme with
a single key/value head. The queries are unchanged, so the model still has ``num_heads`` attention patterns, but
the keys and values a decoder must cache shrink by the factor ``num_heads / num_kv_heads``.

The attention itself is :class:`~transformer_course.core.attention.MultiHeadAttention` with ``num_kv_heads``; this
module keeps what is particular to GQA: :func:`repeat_kv` (the copy that the grouped computation avoids) and the
KV cache's size for published models.

Query head h uses key/value head ``h // (num_heads / num_kv_heads)``: consecutive query heads form a group. This is
the layout of ``repeat_interleave`` along the head dimension and of ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` (PyTorch >= 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from .. import checks

__all__ = ["DecoderShape", "PUBLISHED_DECODERS", "kv_cache_bytes", "repeat_kv"]


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Repeat each key/value head n_rep times, next to itself (head g becomes heads g*n_rep .. g*n_rep + n_rep - 1).

    x: (batch, kv_heads, len, head_dim) -> (batch, kv_heads * n_rep, len, head_dim). The same as
    ``x.repeat_interleave(n_rep, dim=1)``, not ``x.repeat(1, n_rep, 1, 1)`` (which would cycle the heads).
    :func:`grouped_query_attention` gives the same result without the copy.
    """
    if x.dim() != 4:
        raise ValueError(f"x must have shape (batch, kv_heads, len, head_dim), got {tuple(x.shape)}")
    checks.positive_int("n_rep", n_rep)
    batch, kv_heads, length, head_dim = x.shape
    return x[:, :, None].expand(batch, kv_heads, n_rep, length, head_dim).reshape(batch, kv_heads * n_rep, length, -1)


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
    checks.positive_ints(
        num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len, batch_size=batch_size
    )
    checks.positive_number("bytes_per_value", bytes_per_value)
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
