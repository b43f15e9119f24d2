"""The checkers of notebook 12 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.core.attention import grouped_query_attention
from transformer_course.core.rope import apply_rope
from transformer_course.efficient.kv_cache import PUBLISHED_DECODERS
from transformer_course.exercises import modern_llm as ex


def _stub(*args):
    raise NotImplementedError


def test_reference_rope_equals_the_package():
    x = torch.randn(2, 3, 50, 16)
    torch.testing.assert_close(ex.reference_rope(x), apply_rope(x))


def test_rope_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_rope(ex.reference_rope)
    assert ex.check_rope(apply_rope)
    assert "correct" in capsys.readouterr().out


def test_rope_checker_says_not_attempted(capsys):
    assert not ex.check_rope(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _frequencies(head_dim, step=2):
    return torch.exp(-torch.arange(head_dim // 2, dtype=torch.float64) * step / head_dim * math.log(10000.0))


def _rotate(x, angle):
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def _half_layout(x):
    return apply_rope(x, interleaved=False)


def _backwards(x):
    angle = -torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * _frequencies(x.shape[-1])
    return _rotate(x, angle)


def _from_one(x):
    return apply_rope(x, torch.arange(1, x.shape[-2] + 1))


def _wrong_exponent(x):
    angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * _frequencies(x.shape[-1], step=1)
    return _rotate(x, angle)


def _same_angle(x):
    angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None].expand(-1, x.shape[-1] // 2)
    return _rotate(x, angle)


def _identity(x):
    return x


def _transposed(x):
    return apply_rope(x).transpose(-2, -1)


def _other(x):
    return apply_rope(x) * 1.01


def _concatenated(x):  # the right pairs, rotated right, written back as two halves
    a, b = x[..., 0::2], x[..., 1::2]
    angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * _frequencies(x.shape[-1])
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_half_layout, "rotate half"),
        (_backwards, "wrong way"),
        (_from_one, "start at 0"),
        (_wrong_exponent, "2i/head_dim"),
        (_same_angle, "own frequency"),
        (_identity, "nothing was rotated"),
        (_concatenated, "torch.cat"),
        (_transposed, "shape"),
        (_other, "differs from the expected values"),
        (lambda x: x.numpy(), "torch.Tensor"),
    ],
)
def test_rope_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_rope(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_rope_checker_reports_a_crash(capsys):
    assert not ex.check_rope(lambda x: x @ torch.zeros(3, 3))
    assert "your code raised RuntimeError" in capsys.readouterr().out


def _package_gqa(q, k, v):
    return grouped_query_attention(q, k, v, ex.offset_causal_mask(q.shape[-2], k.shape[-2]))[0]


def _torch_gqa(q, k, v):
    mask = ex.offset_causal_mask(q.shape[-2], k.shape[-2])
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def test_reference_gqa_equals_the_package_and_pytorch():
    q, k, v = torch.randn(1, 8, 5, 4), torch.randn(1, 2, 9, 4), torch.randn(1, 2, 9, 4)
    torch.testing.assert_close(ex.reference_gqa(q, k, v), _package_gqa(q, k, v))
    torch.testing.assert_close(ex.reference_gqa(q, k, v), _torch_gqa(q, k, v))


def test_reference_gqa_is_the_tail_of_full_causal_attention():
    q, k, v = torch.randn(2, 6, 7, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)
    torch.testing.assert_close(ex.reference_gqa(q[:, :, 4:], k, v), ex.reference_gqa(q, k, v)[:, :, 4:])


def test_gqa_checker_accepts_the_reference_the_package_and_pytorch(capsys):
    assert ex.check_gqa(ex.reference_gqa)
    assert ex.check_gqa(_package_gqa)
    assert ex.check_gqa(_torch_gqa)
    assert "correct" in capsys.readouterr().out


def test_gqa_checker_says_not_attempted(capsys):
    assert not ex.check_gqa(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _causal_softmax(q, k, v, diagonal=None, scale=True, dim=-1):
    len_q, len_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(len_q, len_k, dtype=torch.bool).tril(len_k - len_q if diagonal is None else diagonal)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=dim) @ v


def _interleaved(k, v, group):
    return k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)


def _cycled(q, k, v):
    group = q.shape[1] // k.shape[1]
    return _causal_softmax(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))


def _top_left(q, k, v):  # the likeliest slip: tril() without the offset
    return _causal_softmax(q, *_interleaved(k, v, q.shape[1] // k.shape[1]), diagonal=0)


def _torch_is_causal(q, k, v):  # the same slip through PyTorch: is_causal=True aligns the mask top-left
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def _no_mask(q, k, v):
    k, v = _interleaved(k, v, q.shape[1] // k.shape[1])
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _without_the_diagonal(q, k, v):
    return _causal_softmax(q, *_interleaved(k, v, q.shape[1] // k.shape[1]), diagonal=k.shape[-2] - q.shape[-2] - 1)


def _unscaled(q, k, v):
    return _causal_softmax(q, *_interleaved(k, v, q.shape[1] // k.shape[1]), scale=False)


def _softmax_over_queries(q, k, v):
    return _causal_softmax(q, *_interleaved(k, v, q.shape[1] // k.shape[1]), dim=-2)


def _only_first_kv_head(q, k, v):
    return _causal_softmax(q, k[:, :1].expand(-1, q.shape[1], -1, -1), v[:, :1].expand(-1, q.shape[1], -1, -1))


def _kv_heads_not_repeated(q, k, v):
    """Plain causal attention, as if k and v had as many heads as q: PyTorch raises a broadcasting error."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_kv_heads_not_repeated, "repeat each key/value head 4 times along dim 1"),
        (_cycled, "repeat_interleave"),
        (_top_left, "tril(len_k - len_q)"),
        (_torch_is_causal, "is_causal=True"),
        (_no_mask, "must be causal"),
        (_without_the_diagonal, "its own position"),
        (_unscaled, "sqrt(d)"),
        (_softmax_over_queries, "over the keys"),
        (_only_first_kv_head, "differs from the expected values"),
        (lambda q, k, v: ex.reference_gqa(q, k, v).transpose(1, 2), "shape"),
    ],
)
def test_gqa_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_gqa(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_reference_kv_cache_matches_the_package():
    for shape in PUBLISHED_DECODERS.values():
        assert ex.reference_kv_cache_bytes(shape, 1000, 3, 2) == shape.kv_cache_bytes(1000, 3, 2)


def test_kv_cache_checker_accepts_the_reference(capsys):
    assert ex.check_kv_cache_bytes(ex.reference_kv_cache_bytes)
    assert ex.check_kv_cache_bytes(lambda s, n, b, nbytes: s.kv_cache_bytes(n, b, nbytes))
    assert "correct" in capsys.readouterr().out


def test_kv_cache_checker_says_not_attempted(capsys):
    assert not ex.check_kv_cache_bytes(_stub)
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda s, n, b, x: s.num_layers * s.num_kv_heads * s.head_dim * n * b * x, "both K and V"),
        (lambda s, n, b, x: 2 * s.num_layers * s.num_kv_heads * s.head_dim * n * b * x * 8, "not bits"),
        (lambda s, n, b, x: 2 * s.num_kv_heads * s.head_dim * n * b * x, "number of layers"),
        (lambda s, n, b, x: 2 * s.num_layers * s.num_heads * s.head_dim * n * b * x, "num_kv_heads"),
        (lambda s, n, b, x: 2 * s.num_layers * s.d_model * n * b * x, "num_kv_heads"),
        (lambda s, n, b, x: 2 * s.num_layers * s.num_kv_heads * s.head_dim * n * b * x / 2**30, "not GiB"),
        (lambda s, n, b, x: 2 * s.num_layers * s.num_kv_heads * s.head_dim * n * x, "batch_size"),
        (lambda s, n, b, x: 3 * s.num_layers * s.num_kv_heads * s.head_dim * n * b * x, "expected"),
        (lambda s, n, b, x: "2 GiB", "number of bytes"),
    ],
)
def test_kv_cache_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_kv_cache_bytes(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_labels_carry_the_notebook_number(capsys):
    ex.check_rope(_stub)
    ex.check_gqa(_stub)
    ex.check_kv_cache_bytes(_stub)
    out = capsys.readouterr().out
    for label in ("Exercise 12.1 (RoPE)", "Exercise 12.2 (grouped-query attention)", "Exercise 12.3 (KV-cache size)"):
        assert label in out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "12.1": (ex.check_rope, ex.reference_rope),
    "12.2": (ex.check_gqa, ex.reference_gqa),
    "12.3": (ex.check_kv_cache_bytes, ex.reference_kv_cache_bytes),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_rope, _half_layout, "'rotate half' 布局"),
        (ex.check_rope, _backwards, "你的旋转方向反了"),
        (ex.check_rope, _from_one, "位置从 0 开始"),
        (ex.check_rope, _concatenated, "用 torch.cat 写回时"),
        (
            ex.check_gqa,
            _kv_heads_not_repeated,
            "两个张量在 dim=1 上的大小不一致，分别为 8 和 2，无法广播。查询有 8 个头",
        ),
        (ex.check_gqa, _cycled, "要用 repeat_interleave"),
        (ex.check_gqa, _top_left, "就好像查询位于序列的开头"),
        (ex.check_gqa, _no_mask, "注意力必须是因果的"),
        (ex.check_gqa, _unscaled, "分数没有除以 sqrt(d)"),
        (
            ex.check_kv_cache_bytes,
            lambda s, n, b, x: s.num_layers * s.num_kv_heads * s.head_dim * n * b * x,
            "同时缓存 K 和 V",
        ),
        (
            ex.check_kv_cache_bytes,
            lambda s, n, b, x: 2 * s.num_layers * s.num_heads * s.head_dim * n * b * x,
            "缓存的只有 num_kv_heads 个键/值头",
        ),
        (ex.check_kv_cache_bytes, lambda s, n, b, x: "2 GiB", "应是字节数（int）"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
