"""The checkers of notebook 06 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course import causal_mask, padding_mask, scaled_dot_product_attention
from transformer_course.exercises import masks as ex


def test_reference_causal_mask_is_the_package_mask_in_additive_form():
    for len_q, len_k in ((1, 1), (3, 3), (7, 7), (2, 5), (1, 4)):
        additive = ex.reference_causal_additive_mask(len_q, len_k)
        allowed = causal_mask(len_q, len_k, offset=len_k - len_q)[0, 0]
        assert torch.equal(additive == 0, allowed)
        assert torch.isneginf(additive[~allowed]).all()


def test_reference_causal_mask_for_the_last_query_sees_every_key():
    assert torch.equal(ex.reference_causal_additive_mask(1, 4), torch.zeros(1, 4))  # one new token, as with a cache


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


LABELS = {
    ex.check_causal_additive_mask: "Exercise 6.1 (a causal mask for the last queries)",
    ex.check_padding_mask_from_lengths: "Exercise 6.2 (padding mask from lengths)",
    ex.check_masked_softmax: "Exercise 6.3 (a softmax that survives fully masked rows)",
}


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
    label = LABELS[check]
    assert capsys.readouterr().out == f"{label}: correct!\n"
    assert not check(_not_attempted)
    assert capsys.readouterr().out.startswith(f"{label}: not attempted yet")


def _filled(len_q, len_k, value, diagonal=None, transpose=False):
    """Fill the keys from `diagonal` on (default: the right one, len_k - len_q + 1) with `value`."""
    diagonal = len_k - len_q + 1 if diagonal is None else diagonal
    m = torch.zeros(len_q, len_k).masked_fill(torch.ones(len_q, len_k, dtype=torch.bool).triu(diagonal), value)
    return m.T if transpose else m


_INF = float("-inf")


def test_causal_checker_hints_name_column_i_on_the_square_case(capsys):
    assert not ex.check_causal_additive_mask(lambda q, k: _filled(q, k, _INF, diagonal=k - q))
    out = capsys.readouterr().out
    assert "(3, 3)" in out and "column i)" in out and "0 + i" not in out


def test_causal_checker_accepts_the_package_mask_and_a_triu_of_minus_inf(capsys):
    assert ex.check_causal_additive_mask(
        lambda q, k: torch.zeros(q, k).masked_fill(~causal_mask(q, k, offset=k - q)[0, 0], _INF)
    )
    assert ex.check_causal_additive_mask(lambda q, k: torch.full((q, k), _INF).triu(k - q + 1))
    assert capsys.readouterr().out.count("correct!") == 2


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda q, k: _filled(q, k, _INF, diagonal=1), "treats the queries as the FIRST 2 positions"),
        (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(k - q), "additive mask holds floats"),
        (lambda q, k: _filled(q, k, _INF, transpose=True), "is transposed"),
        (lambda q, k: _filled(q, k, _INF, diagonal=k - q), "blocks a query's own position"),
        (lambda q, k: torch.zeros(q, k).masked_fill(torch.ones(q, k, dtype=torch.bool).tril(k - q), _INF), "inverted"),
        (lambda q, k: _filled(q, k, -1e9), "large finite number"),
        (lambda q, k: torch.ones(q, k).tril(k - q), "1/0 multiplier"),
        (lambda q, k: _filled(q, k, _INF)[:, :-1], "has shape"),
        (lambda q, k: _filled(k, q, _INF), "one row per query"),
        (lambda q, k: torch.full((q, k), _INF), "blocks everything"),
        (lambda q, k: _filled(q, k, -1.0), "is not 0 where query i may look"),
    ],
    ids=[
        "top-left",
        "bool",
        "transposed",
        "strict",
        "inverted",
        "minus-1e9",
        "multiplicative",
        "shape",
        "swapped-shape",
        "all-blocked",
        "wrong-value",
    ],
)
def test_causal_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_causal_additive_mask(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABELS[ex.check_causal_additive_mask]}: not yet.") and hint in out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda lengths, n: torch.arange(n)[None, :] < lengths[:, None], "add two axes"),
        (lambda lengths, n: (torch.arange(n) < lengths)[:, None, None], "did not broadcast"),
        (lambda lengths, n: ~ex.reference_padding_mask_from_lengths(lengths, n), "inverted"),
        (lambda lengths, n: (torch.arange(n)[None, :] <= lengths[:, None])[:, None, None, :], "one pad too many"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths, n).float(), "return a bool mask"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths, n)[:, None], "expected (batch, 1, 1"),
        (lambda lengths, n: ex.reference_padding_mask_from_lengths(lengths.flip(0), n), "is wrong"),
    ],
    ids=["2-d", "no-broadcast", "inverted", "off-by-one", "float", "5-d", "wrong-rows"],
)
def test_padding_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_padding_mask_from_lengths(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABELS[ex.check_padding_mask_from_lengths]}: not yet.") and hint in out


def _minus_inf(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def _minus_1e9(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)


def _zeroed_after(scores, mask):
    return torch.softmax(scores, dim=-1) * mask


def _minus_1e9_then_zeroed(scores, mask):
    """Right in float32 (the uniform rows are zeroed afterwards), but -1e9 does not fit in float16."""
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1).masked_fill(~mask, 0.0)


def _minus_inf_without_nan(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)


def _float16_min_then_zeroed(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1).masked_fill(~mask, 0.0)


def _upcast(scores, mask):
    return ex.reference_masked_softmax(scores.float(), mask)


def test_masked_softmax_cases_include_float16_with_empty_rows():
    half = [(scores, mask) for _, scores, mask in ex._softmax_cases() if scores.dtype == torch.float16]
    assert len(half) == 1 and (~half[0][1].any(dim=-1)).any()
    assert ex.check_masked_softmax(_minus_inf_without_nan) is True


@pytest.mark.parametrize(
    "fn", [_minus_inf_without_nan, _float16_min_then_zeroed, _upcast], ids=["nan-to-num", "finfo", "upcast"]
)
def test_masked_softmax_checker_accepts_other_right_answers(fn, capsys):
    assert ex.check_masked_softmax(fn)
    assert capsys.readouterr().out == f"{LABELS[ex.check_masked_softmax]}: correct!\n"


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_minus_inf, "contain NaN"),
        (_minus_1e9, "came out uniform"),
        (lambda s, m: ex.reference_masked_softmax(s, ~m), "inverted mask"),
        (_zeroed_after, "do not sum to 1"),
        (_minus_1e9_then_zeroed, "float16 holds nothing beyond +-65504"),
        (lambda s, m: torch.softmax(s, dim=-1), "give weight to masked keys"),
        (lambda s, m: ex.reference_masked_softmax(s, m)[..., :-1], "(the scores' shape)"),
        (lambda s, m: ex.reference_masked_softmax(s * 2, m), "differs"),
    ],
    ids=["nan", "uniform", "inverted", "zeroed-after", "minus-1e9-float16", "unmasked", "shape", "wrong-values"],
)
def test_masked_softmax_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_masked_softmax(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABELS[ex.check_masked_softmax]}: not yet.") and hint in out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "6.1": (ex.check_causal_additive_mask, ex.reference_causal_additive_mask),
    "6.2": (ex.check_padding_mask_from_lengths, ex.reference_padding_mask_from_lengths),
    "6.3": (ex.check_masked_softmax, ex.reference_masked_softmax),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (
            ex.check_causal_additive_mask,
            lambda q, k: _filled(q, k, _INF, diagonal=1),
            "把查询当成了最前面的 2 个位置",
        ),
        (ex.check_causal_additive_mask, lambda q, k: _filled(q, k, _INF, transpose=True), "转置了"),
        (ex.check_causal_additive_mask, lambda q, k: _filled(q, k, _INF, diagonal=k - q), "屏蔽了查询自己的位置"),
        (ex.check_causal_additive_mask, lambda q, k: _filled(q, k, -1e9), "很大的有限数"),
        (
            ex.check_padding_mask_from_lengths,
            lambda lengths, n: torch.arange(n)[None, :] < lengths[:, None],
            "要再加两个轴",
        ),
        (
            ex.check_padding_mask_from_lengths,
            lambda lengths, n: (torch.arange(n)[None, :] <= lengths[:, None])[:, None, None, :],
            "多保留了一个填充",
        ),
        (ex.check_masked_softmax, _minus_inf, "含有 NaN"),
        (ex.check_masked_softmax, _minus_1e9, "得到的是均匀分布"),
        (ex.check_masked_softmax, _zeroed_after, "有可见键的行之和不为 1"),
        (ex.check_masked_softmax, _minus_1e9_then_zeroed, "float16 存不下绝对值超过 65504 的数"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


def test_causal_checker_labels_with_the_learners_function_name(capsys):
    def my_mask(len_q, len_k):
        return torch.zeros(len_q, len_k)

    assert not ex.check_causal_additive_mask(my_mask)
    assert "my_mask(3, 3)" in capsys.readouterr().out
    assert not ex.check_causal_additive_mask(lambda q, k: torch.zeros(q, k))
    assert "causal_additive_mask(3, 3)" in capsys.readouterr().out
