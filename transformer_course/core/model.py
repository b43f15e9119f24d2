"""The whole model: a config dataclass with presets, the encoder and decoder stacks, and the Transformer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from torch import Tensor, nn

from .. import checks
from ..utils import xavier_init_
from .attention import KVCache
from .layers import BlockConfig, DecoderLayer, EncoderLayer
from .masks import causal_mask, decoder_self_mask, padding_mask
from .positional import POSITIONAL_ENCODINGS, TokenEmbedding

POSITIONAL_KINDS = ("sinusoidal", "learned", "none")

RENAMED_CONFIG_FIELDS = {"layer_norm_eps": "norm_eps"}
"""Old name -> new name of TransformerConfig fields renamed since configs were first saved (see ``from_dict``)."""


@dataclass(frozen=True)
class TransformerConfig:
    """Every size and switch of a :class:`Transformer`. Build one by hand or from a preset:
    ``TransformerConfig.preset("base", src_vocab_size=..., tgt_vocab_size=...)``.

    The layer fields (d_model, num_heads, d_ff, dropout, activation, norm, norm_first, norm_eps, num_kv_heads,
    rope, rope_base, max_len, bias) have the names and meanings of :class:`~transformer_course.core.layers.BlockConfig`;
    :attr:`block` is that config. ``positional``: ``"sinusoidal"`` (the paper) or ``"learned"`` tables added to
    the embeddings, or ``"none"``; ``rope=True`` rotates queries and keys inside every self-attention (usually
    with ``positional="none"``). Configs saved with older field names load through :meth:`from_dict`.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout: float = 0.1
    activation: str = "relu"  # "relu", "gelu" or "swiglu"
    norm_first: bool = False  # False: Post-LN, as in the paper
    final_norm: bool | None = None  # a norm after each stack; None: only for Pre-LN, where it is needed
    norm_eps: float = 1e-5  # eps of every norm, LayerNorm or RMSNorm (nn.Transformer calls it layer_norm_eps)
    max_len: int = 512
    positional: str = "sinusoidal"
    share_embeddings: bool = False  # one embedding table for source and target (needs one vocabulary)
    tie_output: bool = False  # the output projection reuses the target embedding matrix
    pad_id: int | None = 0
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    num_kv_heads: int | None = None  # None: multi-head attention; fewer: grouped-query; 1: multi-query
    rope: bool = False  # rotary positions inside every self-attention
    rope_base: float = 10000.0
    bias: bool = True  # biases in the attention projections and the feed-forward network

    def __post_init__(self) -> None:
        checks.positive_ints(src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size)
        checks.non_negative_int("num_encoder_layers", self.num_encoder_layers)
        checks.non_negative_int("num_decoder_layers", self.num_decoder_layers)
        checks.one_of("positional", self.positional, POSITIONAL_KINDS)
        _ = self.block  # building it validates the layer fields
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings needs one vocabulary, got src_vocab_size="
                f"{self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )
        if self.pad_id is not None and not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id must be a valid id in both vocabularies, got {self.pad_id}")

    @property
    def block(self) -> BlockConfig:
        """The layers' config, shared by every encoder and decoder layer: each of its fields is this config's
        field of the same name."""
        return BlockConfig(**{f.name: getattr(self, f.name) for f in fields(BlockConfig)})

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TransformerConfig:
        """A config from :meth:`to_dict`'s dictionary, also one saved by an older version of the package: fields it
        lacks take their defaults, ``layer_norm_eps`` is read as ``norm_eps``, and ``positional="rope"`` (rotary
        positions were once a kind of positional encoding) as ``positional="none", rope=True``."""
        values = dict(values)
        for old, new in RENAMED_CONFIG_FIELDS.items():
            if old in values:
                if new in values:
                    raise ValueError(f"the config gives both {old!r} (the old name) and {new!r}; expected one")
                values[new] = values.pop(old)
        if values.get("positional") == "rope":
            values.update(positional="none", rope=True)
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(
                f"unknown TransformerConfig fields {unknown}; expected some of {[f.name for f in fields(cls)]}"
            )
        return cls(**values)

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TransformerConfig:
        """A named configuration (see ``PRESETS``) with any field overridden, vocabulary sizes included."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
        fields = dict(PRESETS[name])
        fields.update(overrides)
        missing = [f for f in ("src_vocab_size", "tgt_vocab_size") if f not in fields]
        if missing:
            raise ValueError(f"preset {name!r} needs {' and '.join(missing)}")
        return cls(**fields)

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, dict[str, Any]] = {
    # "Attention Is All You Need", Table 3, base model.
    "base": dict(d_model=512, num_heads=8, d_ff=2048, num_encoder_layers=6, num_decoder_layers=6, dropout=0.1),
    # The same paper's big model.
    "big": dict(d_model=1024, num_heads=16, d_ff=4096, num_encoder_layers=6, num_decoder_layers=6, dropout=0.3),
    # Small enough to train in seconds on a laptop CPU.
    "tiny": dict(d_model=64, num_heads=4, d_ff=256, num_encoder_layers=2, num_decoder_layers=2, dropout=0.1),
}


class LayerStack(nn.Module):
    """What :class:`Encoder` and :class:`Decoder` share: ``num_layers`` layers of one kind built from one
    :class:`BlockConfig` (or its fields as keywords), an optional final norm (``final_norm`` defaults to
    ``norm_first``: Pre-LN needs it), and the check that a KV cache has one entry per layer."""

    layer_type: type[nn.Module]

    def __init__(
        self, num_layers: int, config: BlockConfig | None = None, final_norm: bool | None = None, **fields: Any
    ) -> None:
        super().__init__()
        checks.non_negative_int("num_layers", num_layers)
        self.config = config = BlockConfig.build(config, fields)
        self.layers = nn.ModuleList(self.layer_type(config) for _ in range(num_layers))
        use_norm = config.norm_first if final_norm is None else final_norm
        self.norm = config.final_norm() if use_norm else None

    def _layer_caches(self, cache: Sequence[Any] | None) -> Sequence[Any | None]:
        """One cache entry per layer (all None without a cache)."""
        if cache is None:
            return [None] * len(self.layers)
        if len(cache) != len(self.layers):
            raise ValueError(f"cache must hold one entry per layer ({len(self.layers)}), got {len(cache)}")
        return cache

    def _final_norm(self, x: Tensor) -> Tensor:
        return x if self.norm is None else self.norm(x)


class Encoder(LayerStack):
    """A stack of :class:`EncoderLayer`, with an optional final norm (needed for Pre-LN).

    Build it from a :class:`BlockConfig` or its fields as keywords: ``Encoder(2, d_model=64, num_heads=4,
    d_ff=256)``. ``final_norm`` defaults to ``norm_first``. x: (batch, len_s, d_model) -> (batch, len_s, d_model).
    With ``causal=True`` it is a decoder-only stack (see :class:`~transformer_course.families.decoder_lm.DecoderLM`).
    """

    layer_type = EncoderLayer

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        cache: Sequence[KVCache] | None = None,
    ) -> Tensor:
        """x: (batch, len, d_model); mask broadcastable to (batch, heads, len, len_k). causal: a decoder-only stack.
        cache: optional, one :class:`KVCache` per layer, for incremental decoding. Returns (batch, len, d_model)."""
        for layer, layer_cache in zip(self.layers, self._layer_caches(cache)):
            x = layer(x, mask, cache=layer_cache, causal=causal)
        return self._final_norm(x)


class Decoder(LayerStack):
    """A stack of :class:`DecoderLayer`, with an optional final norm (needed for Pre-LN).

    Built like :class:`Encoder`. x: (batch, len_t, d_model) embedded target; memory: (batch, len_s, d_model) ->
    (batch, len_t, d_model).
    """

    layer_type = DecoderLayer

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> Tensor:
        """cache: optional, one (self, cross) :class:`KVCache` pair per layer, for incremental decoding."""
        for layer, layer_cache in zip(self.layers, self._layer_caches(cache)):
            x = layer(x, memory, self_mask, memory_mask, cache=layer_cache)
        return self._final_norm(x)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    ``forward(src, tgt)`` maps source ids (batch, len_s) and decoder input ids (batch, len_t) (the target
    shifted right, starting with <bos>) to logits (batch, len_t, tgt_vocab_size). The inputs are checked here,
    at the edge (:meth:`forward`, :meth:`encode`, :meth:`decode`); the layers inside trust them.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embedding = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embedding = (
            self.src_embedding if c.share_embeddings else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
        )
        self.positional = POSITIONAL_ENCODINGS[c.positional](c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder(c.num_encoder_layers, c.block, final_norm=c.use_final_norm)
        self.decoder = Decoder(c.num_decoder_layers, c.block, final_norm=c.use_final_norm)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.reset_parameters()
        if c.tie_output:
            self.output_projection.weight = self.tgt_embedding.embedding.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix of the stacks and the output layer, zero biases; embeddings keep
        their own N(0, 1/d_model) start (see :class:`TokenEmbedding`)."""
        for module in (self.encoder, self.decoder, self.output_projection):
            xavier_init_(module)
        self.src_embedding.reset_parameters()
        self.tgt_embedding.reset_parameters()

    def _check_ids(self, ids: Tensor, name: str) -> None:
        checks.token_ids(name, ids, max_len=self.config.max_len)  # TokenEmbedding checks the ids themselves

    def source_mask(self, src: Tensor) -> Tensor | None:
        """Padding mask of the source, (batch, 1, 1, len_s), or None when the config has no pad_id."""
        return None if self.config.pad_id is None else padding_mask(src, self.config.pad_id)

    def target_mask(self, tgt: Tensor) -> Tensor:
        """Causal mask combined with the target's padding, (batch, 1, len_t, len_t)."""
        if self.config.pad_id is None:
            return causal_mask(tgt.shape[1], device=tgt.device)
        return decoder_self_mask(tgt, self.config.pad_id)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src: (batch, len_s) ids -> memory (batch, len_s, d_model). ``src_mask`` defaults to the padding mask."""
        self._check_ids(src, "src")
        return self._encode(src, src_mask)

    def _encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        if src_mask is None:
            src_mask = self.source_mask(src)
        return self.encoder(self.positional(self.src_embedding(src)), src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
        offset: int = 0,
    ) -> Tensor:
        """tgt: (batch, len_t) decoder input ids; memory: (batch, len_s, d_model) from :meth:`encode`.

        src_mask: the source padding mask, broadcastable to (batch, heads, len_t, len_s); tgt_mask defaults to
        causal + padding. Returns decoder states (batch, len_t, d_model); :attr:`output_projection` turns them
        into logits.

        Incremental decoding: pass ``cache`` (one (self, cross) :class:`KVCache` pair per decoder layer, see
        :meth:`new_cache`) and ``offset`` = the number of positions already decoded; ``tgt`` then holds only the
        new positions, and tgt_mask defaults to causal over (len_t, offset + len_t) (no target padding).
        """
        self._check_ids(tgt, "tgt")
        checks.non_negative_int("offset", offset)
        if offset + tgt.shape[1] > self.config.max_len:
            raise ValueError(
                f"positions {offset}..{offset + tgt.shape[1] - 1} exceed the model's max_len={self.config.max_len}"
            )
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.shape[0] != tgt.shape[0]:
            shape = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"memory must have shape (batch={tgt.shape[0]}, len_s, d_model), got {shape}")
        return self._decode(tgt, memory, src_mask, tgt_mask, cache, offset)

    def _decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: list[tuple[KVCache, KVCache]] | None,
        offset: int,
    ) -> Tensor:
        if tgt_mask is None:
            if cache is None and offset == 0:
                tgt_mask = self.target_mask(tgt)
            else:  # new position i may see every cached position and the new ones up to itself
                tgt_mask = causal_mask(tgt.shape[1], offset=offset, device=tgt.device)
        x = self.positional(self.tgt_embedding(tgt), offset=offset)
        return self.decoder(x, memory, tgt_mask, src_mask, cache=cache)

    def new_cache(self) -> list[tuple[KVCache, KVCache]]:
        """An empty KV cache for :meth:`decode`: a (self-attention, cross-attention) pair per decoder layer."""
        return [(KVCache(), KVCache(static=True)) for _ in self.decoder.layers]

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src: (batch, len_s), tgt: (batch, len_t) ids -> logits (batch, len_t, tgt_vocab_size)."""
        self._check_ids(src, "src")
        self._check_ids(tgt, "tgt")
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}")
        src_mask = self.source_mask(src)
        memory = self._encode(src, src_mask)
        return self.output_projection(self._decode(tgt, memory, src_mask, None, None, 0))
