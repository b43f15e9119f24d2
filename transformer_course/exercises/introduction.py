"""Notebook 00's warm-up exercise: use the notation to predict a tensor's shape in a new place.

0.1 ``check_cross_attention_shape(fn)``: ``fn(config, batch, n_src, n_tgt)`` returns the shape of one decoder
    layer's cross-attention weights, (batch, h, n_tgt, n_src): the target positions ask (queries), the source
    positions are looked at (keys).
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import TransformerConfig
from ._core import ExerciseMistake, expect, report

# (d_model, num_heads, batch, n_src, n_tgt): every number differs within a case, so a swap shows
_CASES = ((512, 8, 2, 11, 5), (64, 4, 3, 6, 9), (96, 3, 5, 7, 2))


def cross_attention_shape_reference(config: TransformerConfig, batch: int, n_src: int, n_tgt: int) -> tuple[int, ...]:
    """(batch, h, n_q, n_k) with the target as queries (n_q = n_tgt) and the source as keys (n_k = n_src)."""
    return (batch, config.num_heads, n_tgt, n_src)


def _check(fn: Callable[[TransformerConfig, int, int, int], tuple[int, ...]]) -> None:
    for d_model, heads, batch, n_src, n_tgt in _CASES:
        config = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=d_model, num_heads=heads)
        answer = fn(config, batch, n_src, n_tgt)
        what = f"batch={batch}, h={heads}, n_src={n_src}, n_tgt={n_tgt}"
        expect(
            isinstance(answer, tuple) and all(isinstance(size, int) for size in answer),
            f"Return the shape as a tuple of ints, got {type(answer).__name__}",
        )
        answer = tuple(answer)
        if answer == (batch, heads, n_tgt, n_src):
            continue
        if answer == (batch, heads, n_src, n_tgt):
            raise ExerciseMistake(
                f"For {what} you swapped the last two axes. Rows are queries: in cross-attention the target "
                "positions ask (n_q = n_tgt), and the source positions, the encoder's output, are looked at "
                "(n_k = n_src)."
            )
        if answer in ((batch, heads, n_tgt, n_tgt), (batch, heads, n_src, n_src)):
            raise ExerciseMistake(
                f"For {what} you gave a self-attention shape, where queries and keys come from one sentence. In "
                "cross-attention the queries come from the target and the keys from the source."
            )
        if answer == (batch, n_tgt, n_src):
            raise ExerciseMistake(
                f"For {what} the heads axis is missing: each of the h heads has its own weights, (B, h, n_q, n_k)."
            )
        if d_model in answer or d_model // heads in answer:
            raise ExerciseMistake(
                f"For {what} your shape contains a vector width (d_model or d_k). The weights hold one number per "
                "(query position, key position) pair in each head: no width axis."
            )
        raise ExerciseMistake(f"For {what} you returned {answer}: that is not (B, h, n_q, n_k) for cross-attention.")


def check_cross_attention_shape(fn: Callable[[TransformerConfig, int, int, int], tuple[int, ...]]) -> bool:
    """Exercise 0.1: ``fn(config, batch, n_src, n_tgt)`` must return (batch, h, n_tgt, n_src)."""
    return report("Exercise 0.1 (the shape of cross-attention weights)", lambda: _check(fn))
