"""The checkers of notebook 12 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.exercises import modern_llm as ex
from transformer_course.gqa import PUBLISHED_DECODERS, grouped_query_attention
from transformer_course.rope import apply_rope


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


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_half_layout, "rotate half"),
        (_backwards, "wrong way"),
        (_from_one, "start at 0"),
        (_wrong_exponent, "2i/head_dim"),
        (_same_angle, "own frequency"),
        (_identity, "nothing was rotated"),
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


def test_reference_gqa_equals_the_package():
    q, k, v = torch.randn(1, 8, 5, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    torch.testing.assert_close(ex.reference_gqa(q, k, v), grouped_query_attention(q, k, v)[0])


def test_gqa_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_gqa(ex.reference_gqa)
    assert ex.check_gqa(lambda q, k, v: grouped_query_attention(q, k, v)[0])
    assert "correct" in capsys.readouterr().out


def test_gqa_checker_says_not_attempted(capsys):
    assert not ex.check_gqa(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _cycled(q, k, v):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _unscaled(q, k, v):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def _softmax_over_queries(q, k, v):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ v


def _only_first_kv_head(q, k, v):
    k, v = k[:, :1].expand(-1, q.shape[1], -1, -1), v[:, :1].expand(-1, q.shape[1], -1, -1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_cycled, "repeat_interleave"),
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
