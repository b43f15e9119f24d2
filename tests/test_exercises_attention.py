"""The checkers of notebook 04 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_course import scaled_dot_product_attention
from transformer_course.exercises import attention as ex


def test_reference_attention_equals_the_package_and_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 4, 9, 8, generator=g), torch.randn(2, 4, 9, 3)
    out, weights = ex.reference_attention(q, k, v)
    ours_out, ours_weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, ours_out)
    torch.testing.assert_close(weights, ours_weights)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_attention_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_attention(ex.reference_attention)
    assert ex.check_attention(scaled_dot_product_attention)
    assert "correct" in capsys.readouterr().out


def test_attention_checker_says_not_attempted(capsys):
    def stub(q, k, v):
        raise NotImplementedError

    assert not ex.check_attention(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _unscaled(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w


def _by_d_k(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1)
    return w @ v, w


def _multiplied(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def _wrong_dim(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return w @ v, w


def _no_softmax(q, k, v):
    w = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return w @ v, w


def _only_output(q, k, v):
    return ex.reference_attention(q, k, v)[0]


def _swapped_return(q, k, v):
    out, w = ex.reference_attention(q, k, v)
    return w, out


def _output_scaled_too(q, k, v):
    out, w = ex.reference_attention(q, k, v)
    return out / math.sqrt(q.shape[-1]), w


def _wrong_transpose(q, k, v):
    w = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w, w


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_unscaled, "divide the scores by sqrt(d_k) before"),
        (_by_d_k, "not by d_k"),
        (_multiplied, "you multiplied"),
        (_wrong_dim, "columns of your weights sum to 1"),
        (_no_softmax, "should sum to 1"),
        (_only_output, "return a tuple"),
        (_swapped_return, "shape"),
        (_output_scaled_too, "output (weights @ v)"),
        (_wrong_transpose, "shape"),
    ],
)
def test_attention_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_attention(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_reference_entropy_values():
    assert ex.reference_attention_entropy(torch.full((8,), 1 / 8)).item() == pytest.approx(math.log(8))
    assert ex.reference_attention_entropy(torch.tensor([0.0, 1.0])).item() == 0.0
    assert ex.reference_attention_entropy(torch.softmax(torch.randn(2, 3, 4), -1)).shape == (2, 3)


def test_entropy_checker_accepts_the_reference(capsys):
    assert ex.check_attention_entropy(ex.reference_attention_entropy)
    assert "correct" in capsys.readouterr().out


def test_entropy_checker_says_not_attempted(capsys):
    def stub(weights):
        raise NotImplementedError

    assert not ex.check_attention_entropy(stub)
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda w: -(w * torch.log(w)).sum(-1), "NaN"),
        (lambda w: (w * torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(-1), "minus sign"),
        (lambda w: -(w * torch.log2(w).nan_to_num(0.0, neginf=0.0)).sum(-1), "natural log"),
        (lambda w: -(w * torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(), "shape"),
        (lambda w: -(w * torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(0), "shape"),
        (lambda w: -(torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(-1), "differs"),
    ],
    ids=["nan", "sign", "bits", "sum-all", "sum-first-dim", "no-weighting"],
)
def test_entropy_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_attention_entropy(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out
