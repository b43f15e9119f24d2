"""The checkers of notebook 13 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.efficient_attention import blockwise_attention, longformer_mask, positive_random_features
from transformer_course.exercises import efficient_attention as ex


def _stub(*args):
    raise NotImplementedError


# ----------------------------------------------------------------------------------------------- exercise 1
def test_reference_mask_equals_the_package():
    for length, window, glob in ((10, 2, [0]), (30, 4, [3, 20]), (5, 0, [])):
        assert torch.equal(
            ex.reference_longformer_mask(length, window, glob), longformer_mask(length, window, glob)[0, 0]
        )


def test_mask_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_longformer_mask(ex.reference_longformer_mask)
    assert ex.check_longformer_mask(lambda n, w, g: longformer_mask(n, w, g)[0, 0])
    assert "correct" in capsys.readouterr().out


def test_mask_checker_says_not_attempted(capsys):
    assert not ex.check_longformer_mask(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _parts(n, g):
    pos = torch.arange(n)
    offset = pos[:, None] - pos[None, :]
    is_global = torch.zeros(n, dtype=torch.bool)
    is_global[list(g)] = True
    return offset, is_global


def _narrow(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() < w) | is_global[:, None] | is_global[None, :]


def _rows_only(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() <= w) | is_global[:, None]


def _columns_only(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() <= w) | is_global[None, :]


def _one_sided(n, w, g):
    offset, is_global = _parts(n, g)
    return ((offset >= 0) & (offset <= w)) | is_global[:, None] | is_global[None, :]


def _no_global(n, w, g):
    offset, _ = _parts(n, g)
    return offset.abs() <= w


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_narrow, "one too narrow"),
        (_rows_only, "*seen*"),
        (_columns_only, "*see*"),
        (_one_sided, "two-sided"),
        (lambda n, w, g: ~ex.reference_longformer_mask(n, w, g), "True = may attend"),
        (_no_global, "global tokens are missing"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w, g).float(), "dtype"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w, g)[None, None], "shape"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w + 2, g), "differs at"),
    ],
)
def test_mask_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_longformer_mask(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ----------------------------------------------------------------------------------------------- exercise 2
def test_merged_states_give_exact_attention():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 5, 4), torch.randn(1, 9, 4), torch.randn(1, 9, 4)
    state = ex.partial_state(q, k[:, :2], v[:, :2])
    for start in range(2, 9, 3):
        state = ex.reference_merge(state, ex.partial_state(q, k[:, start : start + 3], v[:, start : start + 3]))
    m, total, acc = state
    torch.testing.assert_close(acc / total.unsqueeze(-1), blockwise_attention(q, k, v, block_size=9))
    torch.testing.assert_close(m, (q @ k.transpose(-2, -1) / 2).amax(-1))


def test_merge_checker_accepts_the_reference(capsys):
    assert ex.check_online_softmax_merge(ex.reference_merge)
    assert "correct" in capsys.readouterr().out


def test_merge_checker_says_not_attempted(capsys):
    assert not ex.check_online_softmax_merge(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _no_rescale(a, b):
    return torch.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2]


def _minimum(a, b):
    return ex.reference_merge_with(a, b, torch.minimum(a[0], b[0]))


def _normalised(a, b):
    m, total, acc = ex.reference_merge(a, b)
    return m, total, acc / total.unsqueeze(-1)


def _wrong_sign(a, b):
    m = torch.maximum(a[0], b[0])
    sa, sb = torch.exp(m - a[0]), torch.exp(m - b[0])
    return m, a[1] * sa + b[1] * sb, a[2] * sa.unsqueeze(-1) + b[2] * sb.unsqueeze(-1)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_no_rescale, "without rescaling"),
        (_minimum, "torch.maximum"),
        (_normalised, "do not divide by l yet"),
        (_wrong_sign, "l (the sum of exp(score - m))"),
        (lambda a, b: ex.reference_merge(a, b)[:2], "three tensors"),
    ],
)
def test_merge_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_online_softmax_merge(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ----------------------------------------------------------------------------------------------- exercise 3
def test_reference_features_match_the_package_up_to_its_shift():
    torch.manual_seed(1)
    x, omega = torch.randn(2, 6, 4) * 0.5, torch.randn(10, 4)
    ours, package = ex.reference_positive_features(x, omega), positive_random_features(x, omega, is_query=True)
    ratio = ours / package  # the package divides each row by a constant (its largest entry)
    torch.testing.assert_close(ratio, ratio[..., :1].expand_as(ratio))


def test_feature_checker_accepts_the_reference(capsys):
    assert ex.check_positive_features(ex.reference_positive_features)
    assert "correct" in capsys.readouterr().out


def test_feature_checker_says_not_attempted(capsys):
    assert not ex.check_positive_features(_stub)
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda x, w: torch.exp(x @ w.T) / math.sqrt(w.shape[0]), "exp(-|x|^2 / 2)"),
        (lambda x, w: torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2), "divide by sqrt(m)"),
        (lambda x, w: torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / w.shape[0], "not m"),
        (
            lambda x, w: torch.exp(x @ w.T - x.pow(2).mean(-1, keepdim=True) / 2) / math.sqrt(w.shape[0]),
            "summed over d",
        ),
        (lambda x, w: torch.cat([torch.sin(x @ w.T), torch.cos(x @ w.T)], -1), "shape"),
        (lambda x, w: ex.reference_positive_features(x, w) * 1.1, "differs from the expected values"),
    ],
)
def test_feature_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_positive_features(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_feature_checker_reports_a_crash(capsys):
    assert not ex.check_positive_features(lambda x, w: x @ w)
    assert "your code raised RuntimeError" in capsys.readouterr().out
