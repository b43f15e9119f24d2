"""The modern (LLaMA-style) decoder block as a preset of the package's one block, and a small language model of it.

Compared with the paper's layer (notebook 08), the block

- normalises *before* each sub-layer (Pre-LN) and leaves the residual stream untouched: x + f(norm(x));
- normalises with RMSNorm (no mean, no bias) instead of LayerNorm;
- encodes positions with RoPE inside attention, so nothing is added to the token embeddings;
- lets groups of query heads share key/value heads (GQA), which shrinks the KV cache;
- uses a SwiGLU feed-forward network without biases;
- has no cross-attention (decoder-only) and no dropout by default.

Each of these is one field of :class:`~transformer_course.layers.BlockConfig`; :func:`llama_block_config` sets
them all, and :class:`ModernDecoderBlock` is :class:`~transformer_course.layers.EncoderLayer` with that config and
a causal mask.
"""

from __future__ import annotations

from torch import Tensor, nn

from . import checks
from .attention import KVCache
from .layers import BlockConfig, EncoderLayer, SwiGLUFeedForward
from .model import Encoder


def llama_block_config(
    d_model: int,
    num_heads: int,
    num_kv_heads: int | None = None,
    d_ff: int | None = None,
    norm_eps: float = 1e-6,
    rope_base: float = 10000.0,
    max_len: int = 4096,
    dropout: float = 0.0,
    norm_first: bool = True,
) -> BlockConfig:
    """The LLaMA-style settings of the one block: RMSNorm, Pre-LN, SwiGLU, RoPE, GQA, no biases.

    ``d_ff`` defaults to the SwiGLU size with the weights of a 4 * d_model ReLU network. ``norm_first=False`` gives
    the Post-LN arrangement with the same parts, for comparison only.
    """
    checks.positive_int("d_model", d_model)
    return BlockConfig(
        d_model=d_model,
        num_heads=num_heads,
        d_ff=SwiGLUFeedForward.matched_d_ff(4 * d_model) if d_ff is None else d_ff,
        dropout=dropout,
        activation="swiglu",
        norm="rms",
        norm_first=norm_first,
        norm_eps=norm_eps,
        num_kv_heads=num_kv_heads,
        rope=True,
        rope_base=rope_base,
        max_len=max_len,
        bias=False,
    )


class ModernDecoderBlock(EncoderLayer):
    """x -> x + attention(RMSNorm(x)) -> x + SwiGLU(RMSNorm(x)), causal self-attention with RoPE and GQA.

    An :class:`~transformer_course.layers.EncoderLayer` built from :func:`llama_block_config` (same arguments),
    whose forward always applies the causal mask. x: (batch, len, d_model) -> (batch, len, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None, **settings: object) -> None:
        super().__init__(llama_block_config(d_model, num_heads, num_kv_heads, **settings))

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None, causal: bool = True
    ) -> Tensor:
        """x: (batch, len, d_model); mask: optional extra bool mask (e.g. padding) broadcastable to (batch, heads,
        len, len_k), ``True`` = may attend. The causal mask is always applied: ``causal`` is accepted so that a
        stack can call this block like any EncoderLayer, and is ignored. cache: a :class:`KVCache` for incremental
        decoding. Returns (batch, len, d_model)."""
        return super().forward(x, mask, cache=cache, causal=True)


class ModernDecoderLM(nn.Module):
    """Token embedding -> N blocks of :func:`llama_block_config` (causal) -> final RMSNorm -> linear head.

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
        tie_embeddings: bool = False,
        **settings: object,
    ) -> None:
        super().__init__()
        checks.positive_ints(vocab_size=vocab_size, num_layers=num_layers)
        self.vocab_size = vocab_size
        self.config = llama_block_config(d_model, num_heads, num_kv_heads, **settings)
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.decoder = Encoder(num_layers, self.config, final_norm=True)  # causal in forward: a decoder-only stack
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.head.weight = self.embedding.weight

    @property
    def blocks(self) -> nn.ModuleList:
        """The decoder blocks, in order."""
        return self.decoder.layers

    def new_cache(self) -> list[KVCache]:
        """An empty KV cache for incremental decoding: one :class:`KVCache` per block."""
        return [KVCache() for _ in self.blocks]

    def forward(self, token_ids: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """token_ids: (batch, len) integers in [0, vocab_size) -> logits (batch, len, vocab_size).

        caches: optional list with one KV cache per block (see :meth:`new_cache`) for incremental decoding; then
        token_ids holds only the new tokens.
        """
        checks.token_ids("token_ids", token_ids, self.vocab_size)
        if caches is not None and len(caches) != len(self.blocks):
            raise ValueError(f"caches must hold one cache per block ({len(self.blocks)}), got {len(caches)}")
        return self.head(self.decoder(self.embedding(token_ids), causal=True, cache=caches))


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
    checks.positive_ints(
        vocab_size=vocab_size,
        d_model=d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        d_ff=d_ff,
    )
    head_dim = d_model // num_heads if head_dim is None else head_dim
    attention = 2 * d_model * num_heads * head_dim + 2 * d_model * num_kv_heads * head_dim
    per_block = attention + 3 * d_model * d_ff + 2 * d_model
    embeddings = vocab_size * d_model * (1 if tie_embeddings else 2)
    return num_layers * per_block + embeddings + d_model
