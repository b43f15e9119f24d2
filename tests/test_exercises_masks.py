"""The checkers of notebook 06 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course import causal_mask, padding_mask, scaled_dot_product_attention
from transformer_course.exercises import masks as ex


def test_reference_causal_mask_is_the_package_mask_in_additive_form():
    for n in (1, 3, 7):
        additive = ex.reference_causal_additive_mask(n)
        assert torch.equal(additive == 0, causal_mask(n)[0, 0])
        assert torch.isneginf(additive[~causal_mask(n)[0, 0]]).all()


def test_reference_padding_mask_equals_the_package_on_padded_ids():
    lengths = torch.tensor([3, 1, 4])
    ids = torch.tensor([[5, 6, 7, 0, 0], [8, 0, 0, 0, 0], [9, 4, 3, 2, 0]])
    assert torch.equal(ex.reference_padding_mask_from_lengths(lengths, 5), padding_mask(ids, pad_id=0))


def test_reference_masked_softmax_equals_the_package_weights():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    for _, _, mask in ex._softmax_cases()[:3]:
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        scores = q @ k.transpose(-2, -1) / math.sqrt(8)
        torch.testing.assert_close(ex.reference_masked_softmax(scores, mask), weights)


def _not_attempted(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_causal_additive_mask, ex.reference_causal_additive_mask),
        (ex.check_padding_mask_from_lengths, ex.reference_padding_mask_from_lengths),
        (ex.check_masked_softmax, ex.reference_masked_softmax),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted(check, reference, capsys):
    assert check(reference)
    assert "correct!" in capsys.readouterr().out
    assert not check(_not_attempted)
    assert "not attempted yet" in capsys.readouterr().out


def _filled(n, value, diagonal=1, transpose=False):
    m = torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(diagonal), value)
    return m.T if transpose else m


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(), "additive mask holds floats"),
        (lambda n: _filled(n, float("-inf"), transpose=True), "transposed"),
        (lambda n: _filled(n, float("-inf"), diagonal=0), "blocks the diagonal"),
        (lambda n: _filled(n, -1e9), "large finite number"),
        (lambda n: torch.ones(n, n).tril(), "1/0 multiplier"),
        (lambda n: _filled(n, float("-inf"))[:, :-1], "has shape"),
        (lambda n: _filled(n, -1.0), "not 0 on and below the diagonal"),
    ],
    ids=["bool", "transposed", "strict", "minus-1e9", "multiplicative", "shape", "wrong-value"],
)
def test_causal_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_causal_additive_mask(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda lengths, n: torch.arange(n)[None, :] < lengths[:, None], "add two axes"),
        (lambda lengths, n: ~ex.reference_padding_mask_from_lengths(lengths, n), "inverted"),
        (lambda lengths, n: (torch.arange(n)[None, :] <= lengths[:, None])[:, None, None, :], "one pad too many"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths, n).float(), "return a bool mask"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths, n)[:, None], "expected (batch, 1, 1"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths.flip(0), n), "is wrong"),
    ],
    ids=["2-d", "inverted", "off-by-one", "float", "5-d", "wrong-rows"],
)
def test_padding_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_padding_mask_from_lengths(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def _minus_inf(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def _minus_1e9(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)


def _zeroed_after(scores, mask):
    return torch.softmax(scores, dim=-1) * mask


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_minus_inf, "contain NaN"),
        (_minus_1e9, "came out uniform"),
        (lambda s, m: ex.reference_masked_softmax(s, ~m), "inverted mask"),
        (_zeroed_after, "do not sum to 1"),
        (lambda s, m: torch.softmax(s, dim=-1), "give weight to masked keys"),
        (lambda s, m: ex.reference_masked_softmax(s, m)[..., :-1], "(the scores' shape)"),
        (lambda s, m: ex.reference_masked_softmax(s * 2, m), "differs"),
    ],
    ids=["nan", "uniform", "inverted", "zeroed-after", "unmasked", "shape", "wrong-values"],
)
def test_masked_softmax_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_masked_softmax(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out
