"""Token embeddings and positional encodings (sinusoidal and learned)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .. import checks
from ..language import tr


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The paper's encoding: PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)).

    Returns (max_len, d_model). The frequencies are computed as exp(-2i/d * log(base)), which avoids raising
    a large base to a power.
    """
    checks.positive_int("max_len", max_len)
    if not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even int (sin/cos pairs), got {d_model!r}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def _check_sequence(x: Tensor, d_model: int, max_len: int, offset: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (batch, len, d_model={d_model}), got {tuple(x.shape)}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if offset + x.shape[1] > max_len:
        raise ValueError(
            tr(
                f"sequence positions {offset}..{offset + x.shape[1] - 1} exceed the positional table's "
                f"max_len={max_len}; build the model with a larger max_len",
                f"序列位置 {offset}..{offset + x.shape[1] - 1} 超出了位置编码表的 max_len={max_len}；"
                "请用更大的 max_len 构建模型",
            )
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to its input, then applies dropout. No parameters."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (batch, len, d_model) -> (batch, len, d_model); positions start at ``offset``."""
        _check_sequence(x, self.d_model, self.max_len, offset)
        return self.dropout(x + self.table[offset : offset + x.shape[1]])


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained vector per position (as BERT and GPT do), then applies dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (batch, len, d_model) -> (batch, len, d_model); positions start at ``offset``."""
        _check_sequence(x, self.d_model, self.max_len, offset)
        positions = torch.arange(offset, offset + x.shape[1], device=x.device)
        return self.dropout(x + self.embedding(positions))


class NoPositionalEncoding(nn.Module):
    """Adds nothing, then applies dropout: for models whose positions act inside attention (RoPE) or that have none."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (batch, len, d_model) -> (batch, len, d_model)."""
        _check_sequence(x, self.d_model, self.max_len, offset)
        return self.dropout(x)


POSITIONAL_ENCODINGS: dict[str, type[nn.Module]] = {
    "sinusoidal": SinusoidalPositionalEncoding,
    "learned": LearnedPositionalEncoding,
    "rope": NoPositionalEncoding,
    "none": NoPositionalEncoding,
}


class TokenEmbedding(nn.Module):
    """Token ids -> vectors, multiplied by sqrt(d_model) as in the paper.

    The weights start from N(0, 1/d_model), so after the sqrt(d_model) scale each component has variance 1,
    the same scale as the positional encoding it is added to. (PyTorch's default N(0, 1) would give variance
    d_model and drown the positions.) The padding row starts at zero and gets no gradient.

    ``scale=False`` returns the rows unscaled, as BERT does (its embeddings go through a LayerNorm instead).
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, scale: bool = True) -> None:
        super().__init__()
        checks.positive_int("vocab_size", vocab_size)
        if pad_id is not None and not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must be in [0, {vocab_size}), got {pad_id}")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=self.d_model**-0.5)
        if self.embedding.padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[self.embedding.padding_idx].zero_()

    @property
    def weight(self) -> Tensor:
        """The embedding matrix (vocab_size, d_model)."""
        return self.embedding.weight

    def forward(self, token_ids: Tensor) -> Tensor:
        """token_ids: (batch, len) integers in [0, vocab_size) -> (batch, len, d_model)."""
        if token_ids.dtype.is_floating_point or token_ids.dtype == torch.bool:
            raise ValueError(f"token_ids must be an integer tensor, got dtype {token_ids.dtype}")
        if token_ids.numel():
            low, high = int(token_ids.min()), int(token_ids.max())
            if low < 0 or high >= self.vocab_size:
                bad = low if low < 0 else high
                raise ValueError(f"token id {bad} is outside the vocabulary [0, {self.vocab_size})")
        vectors = self.embedding(token_ids)
        return vectors * math.sqrt(self.d_model) if self.scale else vectors
