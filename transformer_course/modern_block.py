"""A modern (LLaMA-style) decoder block, assembled from the course's parts, and a small language model of them.

Compared with the paper's decoder layer (notebook 08), the block

- normalises *before* each sub-layer (Pre-LN) and leaves the residual stream untouched: x + f(norm(x));
- normalises with RMSNorm (no mean, no bias) instead of LayerNorm;
- encodes positions with RoPE inside attention, so nothing is added to the token embeddings;
- lets groups of query heads share key/value heads (GQA), which shrinks the KV cache;
- uses a SwiGLU feed-forward network without biases;
- has no cross-attention (decoder-only) and no dropout by default.

Every piece is imported from its own module: ``norms.RMSNorm``, ``layers.SwiGLUFeedForward``,
``gqa.GroupedQueryAttention`` (with ``rope.RotaryEmbedding``).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from .gqa import GroupedQueryAttention
from .layers import SwiGLUFeedForward
from .norms import RMSNorm


def _positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class ModernDecoderBlock(nn.Module):
    """x -> x + attention(RMSNorm(x)) -> x + SwiGLU(RMSNorm(x)), causal self-attention with RoPE and GQA.

    x: (batch, len, d_model) -> (batch, len, d_model). ``d_ff`` defaults to the SwiGLU size with the weights of a
    4 * d_model ReLU network. ``norm_first=False`` gives the Post-LN arrangement norm(x + f(x)) with the same parts,
    for comparison only.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        d_ff: int | None = None,
        norm_eps: float = 1e-6,
        rope_base: float = 10000.0,
        max_len: int = 4096,
        dropout: float = 0.0,
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        _positive_int("d_model", d_model)
        d_ff = SwiGLUFeedForward.matched_d_ff(4 * d_model) if d_ff is None else d_ff
        self.norm_first = norm_first
        self.attention_norm = RMSNorm(d_model, norm_eps)
        self.attention = GroupedQueryAttention(
            d_model, num_heads, num_kv_heads, rope=True, rope_base=rope_base, max_len=max_len, dropout=dropout
        )
        self.feed_forward_norm = RMSNorm(d_model, norm_eps)
        self.feed_forward = SwiGLUFeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: object | None = None) -> Tensor:
        """x: (batch, len, d_model); mask: optional extra bool mask (e.g. padding) broadcastable to (batch, heads,
        len, len_k), ``True`` = may attend; the causal mask is always applied. cache: a KV cache for this block's
        attention (see ``GroupedQueryAttention``). Returns (batch, len, d_model).
        """

        def attend(h: Tensor) -> Tensor:
            return self.dropout(self.attention(h, mask=mask, causal=True, cache=cache))

        def feed(h: Tensor) -> Tensor:
            return self.dropout(self.feed_forward(h))

        if self.norm_first:
            x = x + attend(self.attention_norm(x))
            return x + feed(self.feed_forward_norm(x))
        x = self.attention_norm(x + attend(x))
        return self.feed_forward_norm(x + feed(x))


class ModernDecoderLM(nn.Module):
    """Token embedding -> N :class:`ModernDecoderBlock` -> final RMSNorm -> linear head over the vocabulary.

    token_ids: (batch, len) -> logits (batch, len, vocab_size). The embedding is not scaled by sqrt(d_model) and no
    positions are added (RoPE acts inside attention). ``tie_embeddings`` shares the embedding matrix with the head.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        d_ff: int | None = None,
        norm_eps: float = 1e-6,
        rope_base: float = 10000.0,
        max_len: int = 4096,
        dropout: float = 0.0,
        tie_embeddings: bool = False,
    ) -> None:
        super().__init__()
        _positive_int("vocab_size", vocab_size)
        _positive_int("num_layers", num_layers)
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(
            ModernDecoderBlock(d_model, num_heads, num_kv_heads, d_ff, norm_eps, rope_base, max_len, dropout)
            for _ in range(num_layers)
        )
        self.norm = RMSNorm(d_model, norm_eps)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.head.weight = self.embedding.weight

    def forward(self, token_ids: Tensor, caches: Sequence[object] | None = None) -> Tensor:
        """token_ids: (batch, len) integers in [0, vocab_size) -> logits (batch, len, vocab_size).

        caches: optional list with one KV cache per block (e.g. ``attention.KVCache()``) for incremental decoding;
        then token_ids holds only the new tokens.
        """
        if token_ids.dim() != 2 or token_ids.dtype.is_floating_point or token_ids.dtype == bool:
            raise ValueError(
                f"token_ids must be an integer tensor (batch, len), got {token_ids.dtype} {tuple(token_ids.shape)}"
            )
        if token_ids.numel() and (int(token_ids.min()) < 0 or int(token_ids.max()) >= self.vocab_size):
            raise ValueError(
                f"token ids must be in [0, {self.vocab_size}), got values in "
                f"[{int(token_ids.min())}, {int(token_ids.max())}]"
            )
        if caches is not None and len(caches) != len(self.blocks):
            raise ValueError(f"caches must hold one cache per block ({len(self.blocks)}), got {len(caches)}")
        x = self.embedding(token_ids)
        for i, block in enumerate(self.blocks):
            x = block(x, cache=None if caches is None else caches[i])
        return self.head(self.norm(x))


def llama_parameter_count(
    vocab_size: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    d_ff: int,
    head_dim: int | None = None,
    tie_embeddings: bool = False,
) -> int:
    """Parameters of a LLaMA-style decoder (what :class:`ModernDecoderLM` builds), from its shape alone.

    Per block: W_Q and W_O (d_model x heads * head_dim each), W_K and W_V (d_model x kv_heads * head_dim each), the
    three SwiGLU matrices (3 x d_model x d_ff) and two RMSNorm scales (2 x d_model). Plus the embedding, the final
    RMSNorm and the output head (unless tied). No biases anywhere.
    """
    for name, value in (
        ("vocab_size", vocab_size),
        ("d_model", d_model),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("num_kv_heads", num_kv_heads),
        ("d_ff", d_ff),
    ):
        _positive_int(name, value)
    head_dim = d_model // num_heads if head_dim is None else head_dim
    attention = 2 * d_model * num_heads * head_dim + 2 * d_model * num_kv_heads * head_dim
    per_block = attention + 3 * d_model * d_ff + 2 * d_model
    embeddings = vocab_size * d_model * (1 if tie_embeddings else 2)
    return num_layers * per_block + embeddings + d_model
