"""The checkers of notebook 04 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_mistake_named_in_chinese
from transformer_course import scaled_dot_product_attention
from transformer_course.exercises import attention as ex
from transformer_course.language import set_language


def test_reference_attention_equals_the_package_and_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 4, 9, 8, generator=g), torch.randn(2, 4, 9, 3)
    out, weights = ex.reference_attention(q, k, v)
    ours_out, ours_weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, ours_out)
    torch.testing.assert_close(weights, ours_weights)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_attention_checker_accepts_the_reference_and_written_out_softmaxes(capsys):
    assert ex.check_attention(ex.reference_attention)
    assert ex.check_attention(_with_mT)
    assert ex.check_attention(_written_out)
    out = capsys.readouterr().out
    assert out.count("Exercise 4.1 (attention from scratch): correct!") == 3


def test_attention_checker_refuses_the_packages_ready_made_attention(capsys):
    assert not ex.check_attention(scaled_dot_product_attention)  # right numbers, from torch.softmax
    assert "The numbers are right, but your code calls PyTorch's softmax" in capsys.readouterr().out


def test_reference_attention_is_finite_for_scores_in_the_hundreds():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(3, 5, 8, generator=g) * 10, torch.randn(3, 7, 8, generator=g) * 10, torch.randn(3, 7, 2)
    out, weights = ex.reference_attention(q, k, v)
    assert (q @ k.mT / math.sqrt(8)).amax() > 88.7  # torch.exp of such a score is inf in float32
    assert out.isfinite().all() and weights.isfinite().all()
    torch.testing.assert_close(weights, torch.softmax(q @ k.mT / math.sqrt(8), dim=-1))


def test_attention_checker_says_not_attempted(capsys):
    def stub(q, k, v):
        raise NotImplementedError

    assert not ex.check_attention(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _with_mT(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v, w


def _k_T(q, k, v):  # right for 2-D matrices, as in the cell that used K.T
    w = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def _k_t(q, k, v):
    w = torch.softmax(q @ k.t() / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def _transpose_from_the_front(q, k, v):  # right for 4-D inputs only
    w = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def _softmax_dim_3(q, k, v):  # right for 4-D inputs only
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=3)
    return w @ v, w


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


def _exp_softmax(scores, shift):
    exps = torch.exp(scores - shift)
    return exps / exps.sum(dim=-1, keepdim=True)


def _naive_exp(q, k, v):  # right for small scores; exp overflows for scores above 88.7
    w = _exp_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), 0.0)
    return w @ v, w


def _global_max(q, k, v):  # one max for the whole tensor: the rows far below it underflow to 0 / 0
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = _exp_softmax(s, s.max())
    return w @ v, w


def _max_without_keepdim(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = _exp_softmax(s, s.amax(dim=-1))
    return w @ v, w


def _written_out(q, k, v):  # the softmax by hand, shifted by each row's max
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = _exp_softmax(s, s.amax(dim=-1, keepdim=True))
    return w @ v, w


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
        (_only_output, "Return a tuple"),
        (_swapped_return, "return (output, weights)"),
        (_output_scaled_too, "Output (weights @ v)"),
        (_wrong_transpose, "shape"),
        (_k_T, "k.transpose(-2, -1)"),
        (_k_t, "k.transpose(-2, -1)"),
        (_transpose_from_the_front, "count the dimensions from the end"),
        (_softmax_dim_3, "count the dimensions from the end"),
        (_naive_exp, "Subtract each row's own largest score before exp"),
        (_global_max, "Subtract each row's own largest score before exp"),
        (_max_without_keepdim, "keepdim=True"),
    ],
)
def test_attention_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_attention(wrong)
    out = capsys.readouterr()
    assert out.out.startswith("Exercise 4.1 (attention from scratch): not yet.") and hint in out.out
    assert out.err == ""


def test_attention_checker_explains_k_T_and_hides_the_torch_warning(capsys, recwarn):
    assert not ex.check_attention(_k_T)
    out = capsys.readouterr()
    assert "Your code is right for 2-D matrices (len, d) but raised RuntimeError" in out.out
    assert "reverse ALL the dimensions" in out.out
    assert "size of tensor" not in out.out  # the raw PyTorch error is replaced by the hint
    assert not [w for w in recwarn if "x.T" in str(w.message)]


def test_attention_checker_reports_other_crashes_as_they_are(capsys):
    def broken(q, k, v):
        raise RuntimeError("something else")

    assert not ex.check_attention(broken)
    assert "your code raised RuntimeError: something else" in capsys.readouterr().out


def test_reference_entropy_values():
    assert ex.reference_attention_entropy(torch.full((8,), 1 / 8)).item() == pytest.approx(math.log(8))
    assert ex.reference_attention_entropy(torch.tensor([0.0, 1.0])).item() == 0.0
    assert ex.reference_attention_entropy(torch.softmax(torch.randn(2, 3, 4), -1)).shape == (2, 3)


def test_entropy_checker_accepts_the_reference(capsys):
    assert ex.check_attention_entropy(ex.reference_attention_entropy)
    assert "Exercise 4.2 (attention entropy): correct!" in capsys.readouterr().out


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
        (lambda w: -(w * torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(0), "(one value per row: sum over the last"),
        (lambda w: -(torch.log(w).nan_to_num(0.0, neginf=0.0)).sum(-1), "differs"),
    ],
    ids=["nan", "sign", "bits", "sum-all", "sum-first-dim", "no-weighting"],
)
def test_entropy_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_attention_entropy(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_worked_example_matches_the_notebook_numbers():
    weights = ex.example_weights(ex.worked_example()[1])
    tok = ex.EXAMPLE_TOKENS.index
    assert weights[tok("ate"), tok("apple")].item() == pytest.approx(0.346, abs=5e-4)
    assert weights[tok("he"), tok("Ming")].item() == pytest.approx(0.749, abs=5e-4)
    assert weights[tok("he"), tok("apple")].item() == pytest.approx(0.042, abs=5e-4)


def test_query_edit_goals_fail_before_the_change_and_hold_after(capsys):
    assert not ex.check_query_edit(lambda w_q: w_q)  # the unchanged W_Q does not meet the goals
    assert "'ate' gives 0.35 of its weight to 'apple', not more than half" in capsys.readouterr().out
    assert ex.check_query_edit(ex.reference_query_edit)
    assert "Exercise 4.3 (redesign two queries): correct!" in capsys.readouterr().out
    weights = ex.example_weights(ex.reference_query_edit(ex.worked_example()[1]))
    tok = ex.EXAMPLE_TOKENS.index
    assert weights[tok("ate"), tok("apple")] > 0.5
    assert weights[tok("he"), tok("Ming")] == pytest.approx(weights[tok("he"), tok("apple")].item())


def test_query_edit_says_not_attempted(capsys):
    def stub(w_q):
        raise NotImplementedError

    assert not ex.check_query_edit(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _edit(*entries, in_place: bool = False):
    def fn(w_q):
        w_q = w_q if in_place else w_q.clone()
        for feature, dim, value in entries:
            w_q[ex.EXAMPLE_FEATURES.index(feature), ex.EXAMPLE_SPACE.index(dim)] = value
        return w_q

    return fn


_ATE = ("action", "thing", 5.0)
_HE = ("seeks person", "thing", 5.0)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_edit(("action", "thing", 3.0), _HE), "more than before, but not more than half"),
        (_edit(("thing", "action", 5.0), _HE), "its query is the row 'action' of W_Q"),
        (_edit(_ATE), "'he' gives 0.75 to 'Ming' and 0.04 to 'apple'"),
        (_edit(_ATE, ("seeks person", "thing", 2.5)), "must seek a thing exactly as strongly as a person"),
        (_edit(_ATE, ("seeks person", "person", 0.0)), "together not more than half"),
        (_edit(_ATE, _HE, ("seeks thing", "thing", 0.0)), "You changed 3 entries"),
        (lambda w_q: None, "your function returned None"),
        (lambda w_q: w_q[:, :2], "Your W_Q has shape (6, 2)"),
        (_edit(_ATE, _HE, in_place=True), "changed the W_Q it was given"),
    ],
    ids=[
        "too-small",
        "wrong-row",
        "he-unchanged",
        "he-uneven",
        "he-uniform",
        "three-entries",
        "none",
        "shape",
        "in-place",
    ],
)
def test_query_edit_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_query_edit(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 4.3 (redesign two queries): not yet.") and hint in out


# ------------------------------------------------------------------------------------ the feedback in Chinese
def _stub(*args):
    raise NotImplementedError


CHECKERS = {
    "4.1": (ex.check_attention, ex.reference_attention),
    "4.2": (ex.check_attention_entropy, ex.reference_attention_entropy),
    "4.3": (ex.check_query_edit, ex.reference_query_edit),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    check, reference = CHECKERS[number]
    set_language("zh")
    assert check(reference)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and out.endswith("正确！\n")
    assert not check(_stub)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and "尚未作答" in out


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_attention, _unscaled, "在 softmax 之前要把分数除以 sqrt(d_k)"),
        (ex.check_attention, _wrong_dim, "每一列之和为 1"),
        (ex.check_attention, _only_output, "应返回元组 (output, weights)"),
        (ex.check_attention, _k_T, "你的代码对二维矩阵 (len, d) 是对的"),
        (ex.check_attention, _transpose_from_the_front, "要从末尾数维度"),
        (ex.check_attention, _naive_exp, "先减去每一行自己的最大分数"),
        (ex.check_attention, _max_without_keepdim, "无法广播。每一行的最大值和总和会丢掉被归约的维度"),
        (ex.check_attention_entropy, lambda w: -(w * torch.log(w)).sum(-1), "记为 0"),
        (ex.check_attention_entropy, lambda w: -(w * torch.log2(w).nan_to_num(0.0, neginf=0.0)).sum(-1), "自然对数"),
        (ex.check_query_edit, lambda w_q: w_q, "没有超过一半"),
        (ex.check_query_edit, _edit(_ATE), "权重相等需要分数相等"),
        (ex.check_query_edit, lambda w_q: None, "你的函数返回了 None"),
        (ex.check_query_edit, _edit(_ATE, _HE, in_place=True), "你的函数改动了传入的 W_Q"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


@pytest.mark.parametrize(
    "ready_made",
    [
        lambda scores: torch.softmax(scores, dim=-1),
        lambda scores: torch.nn.functional.softmax(scores, dim=-1),
        lambda scores: scores.softmax(dim=-1),
        lambda scores: torch.special.softmax(scores, dim=-1),
    ],
)
def test_attention_checker_refuses_pytorchs_softmax(ready_made, capsys):
    def with_ready_made_softmax(q, k, v):
        weights = ready_made(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
        return weights @ v, weights

    assert not ex.check_attention(with_ready_made_softmax)
    assert "The numbers are right, but your code calls PyTorch's softmax" in capsys.readouterr().out
    set_language("zh")
    try:
        assert not ex.check_attention(with_ready_made_softmax)
        assert "数值是对的，但你的代码调用了 PyTorch 的 softmax" in capsys.readouterr().out
    finally:
        set_language("en")


def test_attention_checker_names_the_swapped_return_order(capsys):
    def swapped(q, k, v):
        out, weights = ex.reference_attention(q, k, v)
        return weights, out

    assert not ex.check_attention(swapped)
    assert "You returned (weights, output); return (output, weights)" in capsys.readouterr().out
    set_language("zh")
    try:
        assert not ex.check_attention(swapped)
        assert "返回顺序反了" in capsys.readouterr().out
    finally:
        set_language("en")
