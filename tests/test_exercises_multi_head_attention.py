"""The checkers of notebook 05 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course import MultiHeadAttention
from transformer_course.exercises import multi_head_attention as ex


def test_reference_split_and_merge_equal_the_package():
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    torch.testing.assert_close(ex.reference_split_heads(x, 3), mha.split_heads(x))
    torch.testing.assert_close(ex.reference_merge_heads(mha.split_heads(x)), mha.merge_heads(mha.split_heads(x)))
    torch.testing.assert_close(ex.reference_merge_heads(ex.reference_split_heads(x, 3)), x)


def test_reference_multi_head_attention_equals_the_package():
    inputs = ex._mha_inputs()
    torch.testing.assert_close(ex.reference_multi_head_attention(*inputs), ex.package_multi_head_attention(*inputs))


def _not_attempted(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_split_heads, ex.reference_split_heads),
        (ex.check_merge_heads, ex.reference_merge_heads),
        (ex.check_multi_head_attention, ex.reference_multi_head_attention),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted(check, reference, capsys):
    assert check(reference)
    assert "correct!" in capsys.readouterr().out
    assert not check(_not_attempted)
    assert "not attempted yet" in capsys.readouterr().out


def test_split_checker_accepts_the_package_method(capsys):
    assert ex.check_split_heads(lambda x, h: MultiHeadAttention(x.shape[-1], h).split_heads(x))
    assert "correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda x, h: x.view(x.shape[0], h, x.shape[1], x.shape[2] // h), "values are scrambled"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2), "interleaved"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h), "= (batch, heads, len, d_k)"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(0, 2, 3, 1), "expected"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(1, 2) * 2, "differs"),
    ],
    ids=["plain-view", "interleaved", "no-transpose", "wrong-permute", "wrong-values"],
)
def test_split_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_split_heads(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "positions and heads are mixed up"),
        (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "not contiguous"),
        (lambda x: x.transpose(1, 2), "= (batch, len, heads * d_k)"),
        (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "differs"),
    ],
    ids=["no-transpose", "view-after-transpose", "not-flattened", "interleaved"],
)
def test_merge_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_merge_heads(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def _attention(x_q, x_kv, w_q, w_k, w_v, w_o, h, scale=None, dim=-1, use_w_o=True, self_only=False):
    kv = x_q if self_only else x_kv
    q = ex.reference_split_heads(x_q @ w_q, h)
    k = ex.reference_split_heads(kv @ w_k, h)
    v = ex.reference_split_heads(kv @ w_v, h)
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    out = ex.reference_merge_heads(torch.softmax(q @ k.transpose(-2, -1) / scale, dim=dim) @ v)
    return out @ w_o if use_w_o else out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda *a: _attention(*a, scale=math.sqrt(a[2].shape[0])), "not sqrt(d_model)"),
        (lambda *a: _attention(*a, scale=1.0), "divide the scores by sqrt(d_k)"),
        (lambda *a: _attention(*a, dim=-2), "softmax over the keys"),
        (lambda *a: _attention(*a, use_w_o=False), "apply w_o"),
        (lambda *a: _attention(*a, self_only=True), "differs"),
        (lambda x_q, x_kv, *rest: ex.reference_multi_head_attention(x_kv, x_q, *rest), "one row per query"),
    ],
    ids=["sqrt-d-model", "unscaled", "softmax-dim", "no-w-o", "self-attention", "swapped-inputs"],
)
def test_mha_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_multi_head_attention(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out
