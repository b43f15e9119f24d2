"""Exercises of notebook 12 (modern LLM components): their checkers and reference solutions.

1. ``check_rope(fn)``: ``fn(x)`` rotates x: (..., len, head_dim) with RoPE, positions 0 .. len - 1, pairs (2i, 2i+1).
2. ``check_gqa(fn)``: ``fn(q, k, v)`` computes causal grouped-query attention for q: (batch, heads, len_q, d) and
   k, v: (batch, kv_heads, len_k, d), the queries being the last len_q of the len_k positions (as when decoding
   with a KV cache).
3. ``check_kv_cache_bytes(fn)``: ``fn(shape, seq_len, batch_size, bytes_per_value)`` gives the KV-cache size in
   bytes of a model described by a ``gqa.DecoderShape``.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..core.rope import apply_rope
from ..efficient.kv_cache import PUBLISHED_DECODERS, DecoderShape, kv_cache_bytes
from ._core import Exercise, ExerciseMistake, crash_hint, expect, expect_close, expect_tensor, report, tr

ROPE = Exercise("12.1", "RoPE", "旋转位置编码 RoPE")
GQA = Exercise("12.2", "grouped-query attention", "分组查询注意力")
KV_CACHE_BYTES = Exercise("12.3", "KV-cache size", "KV 缓存的大小")


# ----------------------------------------------------------------------------------------------- exercise 1
def reference_rope(x: Tensor) -> Tensor:
    """Reference solution of exercise 1: x (..., len, head_dim) -> rotated, pair i of position m by m * omega_i."""
    length, head_dim = x.shape[-2], x.shape[-1]
    omega = torch.exp(-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim * math.log(10000.0))
    angle = torch.arange(length, dtype=torch.float64)[:, None] * omega  # (len, head_dim/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def _rope_variant(x: Tensor, exponent_step: int = 2, sign: float = 1.0, start: int = 0, same: bool = False) -> Tensor:
    """RoPE with one typical mistake: the exponent uses i (not 2i), the rotation is backwards, positions start at 1,
    or every pair turns by the same angle."""
    length, head_dim = x.shape[-2], x.shape[-1]
    index = torch.arange(head_dim // 2, dtype=torch.float64) * exponent_step
    omega = torch.ones(head_dim // 2, dtype=torch.float64) if same else torch.exp(-index / head_dim * math.log(1e4))
    angle = torch.arange(start, start + length, dtype=torch.float64)[:, None] * omega
    cos, sin = torch.cos(angle).to(x.dtype), sign * torch.sin(angle).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


_ROPE_SHAPES = ((1, 6, 4), (2, 3, 20, 16), (5, 64))


def _rope_mistakes(x: Tensor) -> dict[str, Tensor]:
    return {
        tr(
            "you rotated dimension i with i + head_dim/2 (the 'rotate half' layout); this exercise pairs neighbours "
            "(0, 1), (2, 3), ...",
            "你把第 i 维和第 i + head_dim/2 维配成一对来旋转（即把向量分成前后两半来配对的 'rotate half' "
            "布局）；本练习配对的是相邻的维度 (0, 1)、(2, 3) 等",
        ): apply_rope(x, interleaved=False),
        tr(
            "your rotation turns the wrong way: (a, b) should become (a cos - b sin, a sin + b cos)",
            "你的旋转方向反了，(a, b) 应变成 (a cos - b sin, a sin + b cos)",
        ): _rope_variant(x, sign=-1.0),
        tr(
            "positions start at 0: the first row should come back unchanged",
            "位置从 0 开始，第一行应原样返回",
        ): _rope_variant(x, start=1),
        tr(
            "the exponent should be 2i/head_dim with i the pair index; yours looks like i/head_dim",
            "指数应为 2i/head_dim，其中 i 是维度对的编号；你的看起来是 i/head_dim",
        ): _rope_variant(x, exponent_step=1),
        tr(
            "each pair i needs its own frequency omega_i = 10000^(-2i/head_dim); yours turns all pairs by the "
            "position alone",
            "每一对 i 都需要自己的频率 omega_i = 10000^(-2i/head_dim)；你的只按位置来转动所有的对",
        ): _rope_variant(x, same=True),
        tr(
            "nothing was rotated: the output equals the input",
            "什么也没有旋转，输出等于输入",
        ): x,
        tr(
            "you rotated the right pairs but wrote them back with torch.cat, all first elements and then all second "
            "ones; put each rotated pair back in its own place, (2i, 2i+1), e.g. torch.stack([a2, b2], "
            "dim=-1).flatten(-2)",
            "你旋转的维度对是对的，但用 torch.cat 写回时先放了所有的第一个元素，再放所有的第二个元素；"
            "要把旋转后的每一对放回它自己的位置 (2i, 2i+1)，例如 torch.stack([a2, b2], dim=-1).flatten(-2)",
        ): _rope_concatenated(x),
    }


def _rope_concatenated(x: Tensor) -> Tensor:
    """The right rotation of the neighbour pairs, but the results concatenated instead of interleaved."""
    rotated = reference_rope(x)
    return torch.cat([rotated[..., 0::2], rotated[..., 1::2]], dim=-1)


def _check_rope(fn: Callable[[Tensor], Tensor]) -> None:
    generator = torch.Generator().manual_seed(12)
    for shape in _ROPE_SHAPES:
        x = torch.randn(*shape, generator=generator)
        what = tr(f"your output for x of shape {shape}", f"你对形状为 {shape} 的 x 给出的输出")
        out = fn(x.clone())
        expect_tensor(out, what, shape)
        expected = reference_rope(x)
        if torch.allclose(out.detach().double(), expected.double(), atol=1e-4):
            continue
        for hint, wrong in _rope_mistakes(x).items():
            if torch.allclose(out.detach().double(), wrong.double(), atol=1e-4):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"x 的形状为 {shape} 时：{hint}。"))
        expect_close(out, expected, what, atol=1e-4, rtol=1e-4)


def check_rope(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 12.1: ``fn(x)`` must rotate x (..., len, head_dim) by RoPE, positions from 0, pairs (2i, 2i+1)."""
    return report(ROPE, lambda: _check_rope(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def offset_causal_mask(len_q: int, len_k: int, diagonal: int | None = None) -> Tensor:
    """(len_q, len_k) bool, True = may attend: query i stands at position len_k - len_q + i and sees keys up to it.
    ``diagonal`` overrides the offset (for the checker's hints)."""
    offset = len_k - len_q if diagonal is None else diagonal
    return torch.ones(len_q, len_k, dtype=torch.bool).tril(offset)


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, scale: bool = True, dim: int = -1) -> Tensor:
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=dim).nan_to_num(0.0) @ v


def reference_gqa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Reference solution of exercise 2: q (batch, heads, len_q, d), k, v (batch, kv_heads, len_k, d) -> (batch,
    heads, len_q, d), causal, with the queries at the last len_q positions: query i sees keys 0 .. len_k - len_q + i.
    Query head h uses key/value head h // (heads / kv_heads)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    len_q, len_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~offset_causal_mask(len_q, len_k), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _gqa_mistakes(q: Tensor, k: Tensor, v: Tensor) -> dict[str, Tensor]:
    group = q.shape[1] // k.shape[1]
    len_q, len_k = q.shape[-2], k.shape[-2]
    causal = offset_causal_mask(len_q, len_k)
    k_full, v_full = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    k_cycled, v_cycled = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    return {
        tr(
            "query head h must use key/value head h // group (consecutive heads share one); yours uses h % kv_heads, "
            "which is what k.repeat(...) gives. Use repeat_interleave",
            "查询头 h 必须使用键/值头 h // group（相邻的几个头共用一个）；你用的是 h % kv_heads，"
            "这正是 k.repeat(...) 给出的结果。要用 repeat_interleave",
        ): _attend(q, k_cycled, v_cycled, causal),
        tr(
            "your mask lets query i see keys 0 .. i, as if the queries stood at the start of the sequence (this is "
            "also what F.scaled_dot_product_attention(is_causal=True) does when len_q < len_k). The queries are the "
            "last len_q positions: query i stands at len_k - len_q + i and sees keys 0 .. len_k - len_q + i, e.g. "
            "torch.ones(len_q, len_k).tril(len_k - len_q)",
            "你的掩码让查询 i 看到键 0 .. i，就好像查询位于序列的开头（len_q < len_k 时，"
            "F.scaled_dot_product_attention(is_causal=True) 也是这样做的）。查询是最后 len_q 个位置，"
            "查询 i 位于 len_k - len_q + i，能看到键 0 .. len_k - len_q + i，例如 "
            "torch.ones(len_q, len_k).tril(len_k - len_q)",
        ): _attend(q, k_full, v_full, offset_causal_mask(len_q, len_k, 0)),
        tr(
            "every query sees every key: the attention must be causal, query i seeing keys 0 .. len_k - len_q + i",
            "每个查询都能看到每个键，但注意力必须是因果的，查询 i 只能看到键 0 .. len_k - len_q + i",
        ): _attend(q, k_full, v_full, None),
        tr(
            "each query must also see its own position: query i sees keys 0 .. len_k - len_q + i, that one included",
            "每个查询也必须能看到它自己的位置，即查询 i 看到的键是 0 .. len_k - len_q + i，最后这个也包括在内",
        ): _attend(q, k_full, v_full, offset_causal_mask(len_q, len_k, len_k - len_q - 1)),
        tr("the scores are not divided by sqrt(d)", "分数没有除以 sqrt(d)"): _attend(
            q, k_full, v_full, causal, scale=False
        ),
        tr(
            "the softmax runs over the queries; it must run over the keys (the last dimension)",
            "softmax 是在查询上做的；它必须在键上做（最后一维）",
        ): _attend(q, k_full, v_full, causal, dim=-2),
    }


_GQA_SHAPES = ((2, 8, 2, 5, 7, 4), (1, 6, 3, 4, 4, 8), (1, 4, 1, 3, 6, 8), (2, 4, 4, 5, 5, 4))  # b, h, g, lq, lk, d


def _check_gqa(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    generator = torch.Generator().manual_seed(7)
    for batch, heads, kv_heads, len_q, len_k, d in _GQA_SHAPES:
        q = torch.randn(batch, heads, len_q, d, generator=generator)
        k = torch.randn(batch, kv_heads, len_k, d, generator=generator)
        v = torch.randn(batch, kv_heads, len_k, d, generator=generator)
        what = tr(
            f"your output for {heads} query heads, {kv_heads} key/value heads, len_q {len_q}, len_k {len_k}",
            f"你在 {heads} 个查询头、{kv_heads} 个键/值头、len_q = {len_q}、len_k = {len_k} 时的输出",
        )
        try:
            out = fn(q.clone(), k.clone(), v.clone())
        except RuntimeError as error:
            group = heads // kv_heads
            mistake = crash_hint(
                error,
                (heads, kv_heads),
                f"The queries have {heads} heads and the keys and values {kv_heads}: repeat each key/value head "
                f"{group} times along dim 1 (repeat_interleave, so that query head h meets kv head h // {group}) "
                "before the product.",
                f"查询有 {heads} 个头，键和值只有 {kv_heads} 个：先把每个键/值头沿 dim=1 重复 {group} 次"
                f"（用 repeat_interleave，让查询头 h 对上键/值头 h // {group}），再做乘积。",
            )
            if mistake is None:
                raise
            raise mistake from error
        expected = reference_gqa(q, k, v)
        expect_tensor(out, what, expected.shape, "(batch, heads, len_q, d)")
        if torch.allclose(out.detach(), expected, atol=1e-5):
            continue
        for hint, wrong in _gqa_mistakes(q, k, v).items():
            if torch.allclose(out.detach(), wrong, atol=1e-5, equal_nan=True):
                where = f"在 {heads} 个查询头、{kv_heads} 个键/值头、len_q = {len_q}、len_k = {len_k} 时"
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{where}：{hint}。"))
        expect_close(out, expected, what)


def check_gqa(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 12.2: ``fn(q, k, v)`` must compute causal grouped-query attention for the last len_q positions
    (query head h uses kv head h // group)."""
    return report(GQA, lambda: _check_gqa(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def reference_kv_cache_bytes(
    shape: DecoderShape, seq_len: int, batch_size: int = 1, bytes_per_value: int | float = 2
) -> int:
    """Reference solution of exercise 3: K and V, for every layer, key/value head, dimension, token and sequence."""
    return int(2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * seq_len * batch_size * bytes_per_value)


_CACHE_CASES = (
    ("Llama-2-7B", 4096, 1, 2),
    ("Llama-3-8B", 8192, 4, 2),
    ("Falcon-7B", 2048, 2, 4),
    ("Mistral-7B", 100, 3, 1),
)


def _check_kv_cache(fn: Callable[[DecoderShape, int, int, int], int | float]) -> None:
    for name, seq_len, batch, nbytes in _CACHE_CASES:
        shape = PUBLISHED_DECODERS[name]
        what = tr(
            f"your size for {name}, {seq_len} tokens, batch {batch}, {nbytes} bytes per value",
            f"你对 {name}、{seq_len} 个词元、批次大小 {batch}、每个值 {nbytes} 字节算出的大小",
        )
        got = fn(shape, seq_len, batch, nbytes)
        expected = kv_cache_bytes(shape.num_layers, shape.num_kv_heads, shape.head_dim, seq_len, batch, nbytes)
        type_name = type(got).__name__
        expect(
            isinstance(got, (int, float)) and not isinstance(got, bool),
            tr(
                f"{what} should be a number of bytes (int), got {type_name}",
                f"{what}应是字节数（int），得到的是 {type_name}",
            ),
        )
        if got == expected:
            continue
        ratio = got / expected if expected else float("nan")
        hints = [
            (
                0.5,
                tr(
                    "that is half the right size: a decoder caches both K and V",
                    "这是正确大小的一半，别忘了解码器要同时缓存 K 和 V",
                ),
            ),
            (
                8.0,
                tr(
                    "that is 8 times too big: the size is in bytes, not bits",
                    "这是正确大小的 8 倍，大小应以字节计，而不是比特",
                ),
            ),
            (
                1.0 / shape.num_layers,
                tr(
                    "every layer has its own cache: multiply by the number of layers",
                    "每一层都有自己的缓存，所以要乘以层数",
                ),
            ),
            (
                shape.num_heads / shape.num_kv_heads,
                tr(
                    "with grouped-query attention only num_kv_heads key/value heads are cached, not num_heads",
                    "用分组查询注意力时，缓存的只有 num_kv_heads 个键/值头，而不是 num_heads 个",
                ),
            ),
            (
                1.0 / 2**30,
                tr(
                    "return bytes, not GiB (the notebook converts for printing)",
                    "要返回字节数，而不是 GiB（笔记本打印时会自己换算）",
                ),
            ),
            (
                1.0 / batch,
                tr(
                    "each of the batch_size sequences has its own cache",
                    "batch_size 个序列各有自己的缓存",
                ),
            ),
        ]
        for factor, hint in hints:
            if factor != 1.0 and math.isclose(ratio, factor, rel_tol=1e-6):
                raise ExerciseMistake(tr(f"{what} is {got:,}: {hint}.", f"{what}是 {got:,}。{hint}。"))
        raise ExerciseMistake(
            tr(f"{what} is {got:,}, expected {expected:,}.", f"{what}是 {got:,}，应为 {expected:,}。")
        )


def check_kv_cache_bytes(fn: Callable[[DecoderShape, int, int, int], int | float]) -> bool:
    """Exercise 12.3: ``fn(shape, seq_len, batch_size, bytes_per_value)`` must return the KV-cache size in bytes."""
    return report(KV_CACHE_BYTES, lambda: _check_kv_cache(fn))
