"""The pieces of a Transformer layer: feed-forward network, residual + LayerNorm, encoder and decoder layers."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention

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
    ) -> Tensor:
        """x: (batch, len_t, d_model) target states; memory: (batch, len_s, d_model) encoder output.

        self_mask broadcasts to (batch, heads, len_t, len_t) (causal, usually with padding);
        memory_mask broadcasts to (batch, heads, len_t, len_s) (the source padding). Returns (batch, len_t, d_model).
        """
        x = self.self_attention_residual(x, lambda h: self.self_attention(h, mask=self_mask))
        x = self.cross_attention_residual(x, lambda h: self.cross_attention(h, memory, memory, mask=memory_mask))
        return self.feed_forward_residual(x, self.feed_forward)
