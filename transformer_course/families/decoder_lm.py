"""The decoder-only language model, and the two settings of the one block it is built from.

A decoder-only model (GPT, LLaMA) has no encoder to attend to, so its block has no cross-attention: it is the
package's :class:`~transformer_course.core.layers.EncoderLayer` run with the causal mask. :class:`DecoderLM` stacks such
layers between a token embedding and an output layer; what kind of model it is depends only on the
:class:`~transformer_course.core.layers.BlockConfig`:

* :func:`gpt2_block_config`: GPT-2. LayerNorm, Pre-LN, GELU, biases; positions are a learned table added to the
  token embeddings.
* :func:`llama_block_config`: LLaMA. RMSNorm, Pre-LN, SwiGLU, rotary positions (RoPE) inside attention, grouped
  K/V heads (GQA), no biases; nothing is added to the embeddings.

:func:`llama_parameter_count` gives the size of a LLaMA-style model from its shape alone.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..core.attention import KVCache
from ..core.layers import BlockConfig, SwiGLUFeedForward
from ..core.masks import padding_mask
from ..core.model import Encoder
from ..core.positional import LearnedPositionalEncoding, NoPositionalEncoding, TokenEmbedding
from ..utils import xavier_init_

POSITIONS = ("learned", "none")


def gpt2_block_config(
    d_model: int,
    num_heads: int,
    d_ff: int | None = None,
    dropout: float = 0.0,
    max_len: int = 1024,
    norm_eps: float = 1e-5,
) -> BlockConfig:
    """The GPT-2 settings of the one block: LayerNorm, Pre-LN, GELU, biases, no rotary positions.

    ``d_ff`` defaults to 4 * d_model. ``max_len``: the longest sequence, the size of the model's learned position
    table (see :class:`DecoderLM`).
    """
    checks.positive_int("d_model", d_model)
    return BlockConfig(
        d_model=d_model,
        num_heads=num_heads,
        d_ff=4 * d_model if d_ff is None else d_ff,
        dropout=dropout,
        activation="gelu",
        norm="layer",
        norm_first=True,
        norm_eps=norm_eps,
        max_len=max_len,
        bias=True,
    )


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


class DecoderLM(nn.Module):
    """A decoder-only language model: token embedding (+ learned positions) -> ``num_layers`` blocks of ``config``
    with the causal mask -> final norm (Pre-LN) -> output layer.

    ``positional``: ``"learned"`` adds a trained vector per position to the embeddings (GPT-2), ``"none"`` adds
    nothing (RoPE acts inside attention); the default is ``"none"`` for a block with ``rope`` and ``"learned"``
    otherwise. The model reads at most ``config.max_len`` tokens (:attr:`max_len`). ``tie_output``: the output
    layer reuses the embedding matrix. ``pad_id``: that id is hidden from every query (a padding mask) and its
    embedding row starts at zero.

    Initialisation: embedding rows N(0, 1/d_model), so that the tied output starts near uniform predictions; learned
    positions N(0, 0.02^2); in the blocks, with ``xavier`` (as the package's Transformer), Xavier-uniform matrices
    and zero biases, else PyTorch's default for ``nn.Linear`` (uniform within 1/sqrt(fan_in), about 0.6 of Xavier's
    range for a square matrix), with which the course's LLaMA-style language models are trained.

    ``forward(ids)``: (batch, len) -> logits (batch, len, vocab_size); the logits at position t score the token
    at position t + 1 and depend only on tokens 0..t. With ``caches`` (:meth:`new_cache`) it decodes incrementally.
    """

    def __init__(
        self,
        config: BlockConfig,
        vocab_size: int,
        num_layers: int,
        positional: str | None = None,
        tie_output: bool = True,
        pad_id: int | None = None,
        xavier: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise ValueError(f"config must be a BlockConfig (e.g. gpt2_block_config(...)), got {config!r}")
        checks.positive_ints(vocab_size=vocab_size, num_layers=num_layers)
        positional = ("none" if config.rope else "learned") if positional is None else positional
        checks.one_of("positional", positional, POSITIONS)
        self.config = config
        self.vocab_size, self.max_len, self.pad_id = vocab_size, config.max_len, pad_id
        d_model = config.d_model
        self.token_embedding = TokenEmbedding(vocab_size, d_model, pad_id, scale=False)
        position_kind = LearnedPositionalEncoding if positional == "learned" else NoPositionalEncoding
        self.positional = position_kind(d_model, config.max_len, config.dropout)
        # a decoder without cross-attention is an encoder stack run with the causal mask (see forward)
        self.decoder = Encoder(num_layers, config)
        self.head = None if tie_output else nn.Linear(d_model, vocab_size, bias=False)
        if not isinstance(xavier, bool):
            raise ValueError(f"xavier must be True or False, got {xavier!r}")
        if xavier:
            xavier_init_(self.decoder)

    @property
    def blocks(self) -> nn.ModuleList:
        """The decoder blocks (:class:`~transformer_course.core.layers.EncoderLayer`), in order."""
        return self.decoder.layers

    def new_cache(self) -> list[KVCache]:
        """An empty KV cache for incremental decoding: one :class:`KVCache` per block."""
        return [KVCache() for _ in self.blocks]

    def forward(self, ids: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """ids: (batch, len) token ids -> next-token logits (batch, len, vocab_size).

        caches: one :class:`KVCache` per block (see :meth:`new_cache`) for incremental decoding; then ``ids`` holds
        only the new tokens, which sit after the cached positions (learned positions and RoPE both start there),
        and the cached and new tokens together must fit in :attr:`max_len`.
        """
        checks.token_ids("ids", ids, max_len=self.max_len)  # the embedding checks the ids' range
        offset = 0
        if caches is not None:
            if not isinstance(caches, (list, tuple)) or len(caches) != len(self.blocks):
                count = len(caches) if isinstance(caches, (list, tuple)) else type(caches).__name__
                raise ValueError(f"caches must hold one KVCache per block ({len(self.blocks)}), got {count}")
            offset = len(caches[0])
            if offset + ids.shape[1] > self.max_len:
                raise ValueError(
                    f"{offset} cached + {ids.shape[1]} new positions exceed the model's max_len={self.max_len}"
                )
        mask = None
        if self.pad_id is not None:
            if caches is None:
                mask = padding_mask(ids, self.pad_id)  # (batch, 1, 1, len); the layers add the causal mask
            elif bool((ids == self.pad_id).any()):
                # the cache keeps keys, not ids, so it could not hide a padded position from later queries
                raise ValueError(f"ids fed with caches must not contain pad_id={self.pad_id}")
        x = self.positional(self.token_embedding(ids), offset=offset)
        h = self.decoder(x, mask, causal=True, cache=caches)
        return F.linear(h, self.token_embedding.weight) if self.head is None else self.head(h)


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
    """Parameters of a LLaMA-style decoder (a :class:`DecoderLM` of :func:`llama_block_config`), from its shape.

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


__all__ = ["POSITIONS", "DecoderLM", "gpt2_block_config", "llama_block_config", "llama_parameter_count"]
