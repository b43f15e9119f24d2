"""Notebook 00's warm-up exercise: use the notation to predict a tensor's shape in a new place.

0.1 ``check_cross_attention_shape(fn)``: ``fn(config, batch, n_src, n_tgt)`` returns the shape of one decoder
    layer's cross-attention weights, (batch, h, n_tgt, n_src): the target positions ask (queries), the source
    positions are looked at (keys).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.model import TransformerConfig
from ._core import Exercise, ExerciseMistake, expect, report, tr

CROSS_ATTENTION_SHAPE = Exercise("0.1", "the shape of cross-attention weights", "交叉注意力权重的形状")

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
        got = type(answer).__name__
        expect(
            isinstance(answer, tuple) and all(isinstance(size, int) for size in answer),
            tr(f"Return the shape as a tuple of ints, got {got}", f"形状应以整数元组的形式返回，而你返回的是 {got}"),
        )
        answer = tuple(answer)
        if answer == (batch, heads, n_tgt, n_src):
            continue
        if answer == (batch, heads, n_src, n_tgt):
            raise ExerciseMistake(
                tr(
                    f"For {what} you swapped the last two axes. Rows are queries: in cross-attention the target "
                    "positions ask (n_q = n_tgt), and the source positions, the encoder's output, are looked at "
                    "(n_k = n_src).",
                    f"当 {what} 时，你把最后两个轴交换了。行对应查询。在交叉注意力中，发出查询的是目标序列的各个位置"
                    "（n_q = n_tgt），被关注的是源序列的各个位置，即编码器的输出（n_k = n_src）。",
                )
            )
        if answer in ((batch, heads, n_tgt, n_tgt), (batch, heads, n_src, n_src)):
            raise ExerciseMistake(
                tr(
                    f"For {what} you gave a self-attention shape, where queries and keys come from one sentence. In "
                    "cross-attention the queries come from the target and the keys from the source.",
                    f"当 {what} 时，你给出的是自注意力的形状，自注意力的查询和键来自同一个句子。"
                    "而在交叉注意力中，查询来自目标序列，键来自源序列。",
                )
            )
        if answer == (batch, n_tgt, n_src):
            raise ExerciseMistake(
                tr(
                    f"For {what} the heads axis is missing: each of the h heads has its own weights, (B, h, n_q, n_k).",
                    f"当 {what} 时，缺少头这个轴。h 个头各有自己的权重，形状应为 (B, h, n_q, n_k)。",
                )
            )
        if d_model in answer or d_model // heads in answer:
            raise ExerciseMistake(
                tr(
                    f"For {what} your shape contains a vector width (d_model or d_k). The weights hold one number per "
                    "(query position, key position) pair in each head: no width axis.",
                    f"当 {what} 时，你的形状里含有向量的维度（d_model 或 d_k）。在每个头里，权重为每一对"
                    "（查询位置，键位置）存一个数，没有表示向量维度的轴。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"For {what} you returned {answer}: that is not (B, h, n_q, n_k) for cross-attention.",
                f"当 {what} 时，你返回的是 {answer}，而交叉注意力权重的形状应为 (B, h, n_q, n_k)。",
            )
        )


def check_cross_attention_shape(fn: Callable[[TransformerConfig, int, int, int], tuple[int, ...]]) -> bool:
    """Exercise 0.1: ``fn(config, batch, n_src, n_tgt)`` must return (batch, h, n_tgt, n_src)."""
    return report(CROSS_ATTENTION_SHAPE, lambda: _check(fn))
