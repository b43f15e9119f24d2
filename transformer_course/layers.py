"""The pieces of a Transformer layer: feed-forward network, residual + LayerNorm, encoder and decoder layers."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")


class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(dropout(act(linear1(x)))), the same at every position.

    x: (batch, len, d_model) -> (batch, len, d_model); the hidden layer has d_ff units (the paper: 4 d_model).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        _check_activation(activation)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
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
        for name, value in (("d_model", d_model), ("d_ff", d_ff)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model
        self.d_ff = d_ff
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def matched_d_ff(d_ff: int) -> int:
        """The hidden size that gives a SwiGLU FFN (three matrices) the weights of a two-matrix FFN of size d_ff."""
        if not isinstance(d_ff, int) or d_ff < 1:
            raise ValueError(f"d_ff must be a positive int, got {d_ff!r}")
        return max(1, round(2 * d_ff / 3))

    def forward(self, x: Tensor) -> Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {tuple(x.shape)}")
        return self.w_down(self.dropout(F.silu(self.w_gate(x)) * self.w_up(x)))


class Residual(nn.Module):
    """A residual connection with LayerNorm around a sub-layer f.

    Post-LN (the paper): LayerNorm(x + dropout(f(x))). Pre-LN: x + dropout(f(LayerNorm(x))).
    x: (batch, len, d_model) -> (batch, len, d_model).
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in :class:`Residual`."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.self_attention_residual = Residual(d_model, dropout, norm_first, layer_norm_eps)
        self.feed_forward_residual = Residual(d_model, dropout, norm_first, layer_norm_eps)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x: (batch, len, d_model); mask broadcastable to (batch, heads, len, len). Returns (batch, len, d_model)."""
        x = self.self_attention_residual(x, lambda h: self.self_attention(h, mask=mask))
        return self.feed_forward_residual(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then feed-forward; each in a Residual."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.self_attention_residual = Residual(d_model, dropout, norm_first, layer_norm_eps)
        self.cross_attention_residual = Residual(d_model, dropout, norm_first, layer_norm_eps)
        self.feed_forward_residual = Residual(d_model, dropout, norm_first, layer_norm_eps)

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
