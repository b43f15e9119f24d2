"""The pieces of a Transformer layer, and the one configurable block.

:class:`BlockConfig` names every choice a layer makes: the norm (LayerNorm or RMSNorm) and where it sits (Post-LN,
as in the paper, or Pre-LN), the feed-forward network (ReLU, GELU or SwiGLU), rotary positions inside attention,
and the number of key/value heads. The paper's layer and the LLaMA-style layer are two settings of the same
:class:`EncoderLayer` (a decoder-only block is an encoder layer with a causal mask) and :class:`DecoderLayer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from .attention import KVCache, MultiHeadAttention
from .norms import NORMS, make_norm

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}
FEED_FORWARDS = (*ACTIVATIONS, "swiglu")


def _check_activation(activation: str) -> None:
    checks.one_of("activation", activation, sorted(ACTIVATIONS))


class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(dropout(act(linear1(x)))), the same at every position.

    x: (batch, len, d_model) -> (batch, len, d_model); the hidden layer has d_ff units (the paper: 4 d_model).
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True
    ) -> None:
        super().__init__()
        checks.positive_ints(d_model=d_model, d_ff=d_ff)
        _check_activation(activation)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(ACTIVATIONS[self.activation](self.linear1(x))))


class SwiGLUFeedForward(nn.Module):
    """Gated feed-forward network (Shazeer, 2020; used by PaLM and LLaMA): w_down(dropout(silu(w_gate x) * w_up x)).

    x: (batch, len, d_model) -> (batch, len, d_model), the same at every position. It has three matrices where
    :class:`FeedForward` has two, so ``d_ff = round(2/3 * 4 d_model)`` keeps the parameter count of a ReLU FFN
    with ``d_ff = 4 d_model`` (see :meth:`matched_d_ff`). No biases by default, as in LLaMA.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        checks.positive_ints(d_model=d_model, d_ff=d_ff)
        checks.probability("dropout", dropout)
        self.d_model = d_model
        self.d_ff = d_ff
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def matched_d_ff(d_ff: int) -> int:
        """The hidden size that gives a SwiGLU FFN (three matrices) the weights of a two-matrix FFN of size d_ff."""
        checks.positive_int("d_ff", d_ff)
        return max(1, round(2 * d_ff / 3))

    def forward(self, x: Tensor) -> Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {tuple(x.shape)}")
        return self.w_down(self.dropout(F.silu(self.w_gate(x)) * self.w_up(x)))


class Residual(nn.Module):
    """A residual connection with a norm around a sub-layer f.

    Post-LN (the paper): norm(x + dropout(f(x))). Pre-LN: x + dropout(f(norm(x))).
    ``norm``: ``"layer"`` (LayerNorm) or ``"rms"`` (RMSNorm). x: (batch, len, d_model) -> (batch, len, d_model).
    """

    def __init__(
        self, d_model: int, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5, norm: str = "layer"
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = make_norm(norm, d_model, eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


@dataclass(frozen=True)
class BlockConfig:
    """Every choice of one encoder or decoder layer. The defaults are the paper's base layer.

    ``activation``: the feed-forward network, ``"relu"``, ``"gelu"`` or ``"swiglu"`` (gated; d_ff is then its
    hidden size, see :meth:`SwiGLUFeedForward.matched_d_ff`). ``norm``: ``"layer"`` or ``"rms"``. ``norm_first``:
    Pre-LN when True. ``num_kv_heads``: K/V heads of every attention (None = num_heads). ``rope``: rotary
    positions in self-attention (cross-attention never rotates: its keys come from another sequence), with
    tables for ``max_len`` positions. ``bias``: biases in the attention projections and the feed-forward network.
    """

    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    activation: str = "relu"
    norm: str = "layer"
    norm_first: bool = False
    norm_eps: float = 1e-5
    num_kv_heads: int | None = None
    rope: bool = False
    rope_base: float = 10000.0
    max_len: int = 4096
    bias: bool = True

    def __post_init__(self) -> None:
        checks.positive_ints(d_model=self.d_model, num_heads=self.num_heads, d_ff=self.d_ff, max_len=self.max_len)
        checks.divisible("d_model", self.d_model, "num_heads", self.num_heads, "each head gets d_model / num_heads")
        checks.probability("dropout", self.dropout)
        checks.one_of("activation", self.activation, FEED_FORWARDS)
        checks.one_of("norm", self.norm, NORMS)
        checks.positive_number("norm_eps", self.norm_eps)
        if self.num_kv_heads is not None:
            checks.positive_int("num_kv_heads", self.num_kv_heads)
            checks.divisible("num_heads", self.num_heads, "num_kv_heads", self.num_kv_heads)
        if self.rope:
            head_dim = self.d_model // self.num_heads
            if head_dim % 2:
                raise ValueError(f"rope rotates pairs of dimensions: d_model / num_heads must be even, got {head_dim}")
            if not self.rope_base > 1:
                raise ValueError(f"rope_base must be a number > 1, got {self.rope_base!r}")

    @classmethod
    def build(cls, config: BlockConfig | None, fields: dict[str, Any]) -> BlockConfig:
        """``config`` with ``fields`` changed, or a new config from ``fields`` alone."""
        if config is None:
            return cls(**fields)
        if not isinstance(config, BlockConfig):
            raise ValueError(f"config must be a BlockConfig (or pass the fields as keywords), got {config!r}")
        return replace(config, **fields) if fields else config

    def replace(self, **changes: Any) -> BlockConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def attention(self, rope: bool | None = None) -> MultiHeadAttention:
        """A :class:`MultiHeadAttention` with this config's heads, dropout, bias and (if ``rope``) rotary positions."""
        return MultiHeadAttention(
            self.d_model,
            self.num_heads,
            self.dropout,
            self.bias,
            num_kv_heads=self.num_kv_heads,
            rope=self.rope if rope is None else rope,
            rope_base=self.rope_base,
            max_len=self.max_len,
        )

    def feed_forward(self) -> nn.Module:
        """:class:`FeedForward` (ReLU, GELU) or :class:`SwiGLUFeedForward`, as ``activation`` says."""
        if self.activation == "swiglu":
            return SwiGLUFeedForward(self.d_model, self.d_ff, self.dropout, self.bias)
        return FeedForward(self.d_model, self.d_ff, self.dropout, self.activation, self.bias)

    def residual(self) -> Residual:
        """A :class:`Residual` with this config's norm, its place and dropout."""
        return Residual(self.d_model, self.dropout, self.norm_first, self.norm_eps, self.norm)

    def final_norm(self) -> nn.Module:
        """The norm after a stack of these layers (needed for Pre-LN)."""
        return make_norm(self.norm, self.d_model, self.norm_eps)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in :class:`Residual`.

    Build it from a :class:`BlockConfig` or from its fields as keywords:
    ``EncoderLayer(d_model=64, num_heads=4, d_ff=256, dropout=0.0)``. With ``causal=True`` in :meth:`forward` it is
    a decoder-only (GPT or LLaMA) block: a decoder without cross-attention is an encoder that cannot look ahead.
    """

    def __init__(self, config: BlockConfig | None = None, **fields: Any) -> None:
        super().__init__()
        self.config = config = BlockConfig.build(config, fields)
        self.self_attention = config.attention()
        self.feed_forward = config.feed_forward()
        self.self_attention_residual = config.residual()
        self.feed_forward_residual = config.residual()

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None, causal: bool = False
    ) -> Tensor:
        """x: (batch, len, d_model); mask broadcastable to (batch, heads, len, len_k), ``True`` = may attend.

        causal: add the causal mask (a decoder-only block). cache: a :class:`KVCache` for incremental decoding;
        then x holds only the new positions and len_k counts the cached ones. Returns (batch, len, d_model).
        """
        attend = self.self_attention
        x = self.self_attention_residual(x, lambda h: attend(h, mask=mask, cache=cache, causal=causal))
        return self.feed_forward_residual(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then feed-forward; each in a Residual.

    Built like :class:`EncoderLayer`, from a :class:`BlockConfig` or its fields as keywords. Rotary positions
    (``rope``) apply to the self-attention only.
    """

    def __init__(self, config: BlockConfig | None = None, **fields: Any) -> None:
        super().__init__()
        self.config = config = BlockConfig.build(config, fields)
        self.self_attention = config.attention()
        self.cross_attention = config.attention(rope=False)
        self.feed_forward = config.feed_forward()
        self.self_attention_residual = config.residual()
        self.cross_attention_residual = config.residual()
        self.feed_forward_residual = config.residual()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
    ) -> Tensor:
        """x: (batch, len_t, d_model) target states; memory: (batch, len_s, d_model) encoder output.

        self_mask broadcasts to (batch, heads, len_t, len_t) (causal, usually with padding);
        memory_mask broadcasts to (batch, heads, len_t, len_s) (the source padding). Returns (batch, len_t, d_model).
        cache: optional (self-attention, cross-attention) :class:`KVCache` pair for incremental decoding; then
        ``x`` holds only the new positions and self_mask spans (len_t, cached + len_t).
        """
        self_cache, cross_cache = (None, None) if cache is None else cache
        x = self.self_attention_residual(x, lambda h: self.self_attention(h, mask=self_mask, cache=self_cache))
        x = self.cross_attention_residual(
            x, lambda h: self.cross_attention(h, memory, memory, mask=memory_mask, cache=cross_cache)
        )
        return self.feed_forward_residual(x, self.feed_forward)
