"""Notebook 00's warm-up exercise: read the sizes of a model off its configuration."""

from __future__ import annotations

from collections.abc import Callable

from ..model import TransformerConfig
from ._core import expect, report

# (d_model, num_heads) pairs the checker tries, with the paper's base and big models among them
_CASES = ((512, 8), (1024, 16), (64, 4), (96, 3), (8, 8))


def head_dim_reference(config: TransformerConfig) -> int:
    """d_k = d_model / h: each head works in a d_model / h dimensional subspace."""
    return config.d_model // config.num_heads


def check_head_dim(head_dim: Callable[[TransformerConfig], int]) -> bool:
    """The reader's ``head_dim(config)`` must return d_k = d_model // num_heads as an int."""

    def check() -> None:
        for d_model, heads in _CASES:
            config = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=d_model, num_heads=heads)
            answer = head_dim(config)
            expect(isinstance(answer, int), f"head_dim should return an int, got {type(answer).__name__}")
            expect(
                answer == d_model // heads,
                f"for d_model={d_model} and {heads} heads, d_k should be {d_model // heads}, got {answer}",
            )

    return report("Exercise 0.1 (d_k)", check)
