"""The checkers of notebook 05 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course import MultiHeadAttention
from transformer_course.exercises import multi_head_attention as ex


def test_reference_split_and_merge_equal_the_package():
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    torch.testing.assert_close(ex.reference_split_heads(x, 3), mha.split_heads(x))
    torch.testing.assert_close(ex.reference_merge_heads(mha.split_heads(x)), mha.merge_heads(mha.split_heads(x)))
    torch.testing.assert_close(ex.reference_merge_heads(ex.reference_split_heads(x, 3)), x)


def test_reference_multi_head_attention_equals_pytorch_and_the_package():
    for case in ex._MHA_CASES:  # d_v != d_k: the expected answer comes from F.scaled_dot_product_attention
        inputs = ex._mha_inputs(*case)
        torch.testing.assert_close(ex.reference_multi_head_attention(*inputs), ex.torch_multi_head_attention(*inputs))
    for case in ((12, 3, 4, 4), (12, 3, 2, 2)):  # d_v = d_k, with and without d_k = d_model / num_heads
        inputs = ex._mha_inputs(*case)
        torch.testing.assert_close(ex.reference_multi_head_attention(*inputs), ex.package_multi_head_attention(*inputs))


def test_mha_cases_have_widths_that_cannot_be_confused():
    for d_model, heads, d_k, d_v in ex._MHA_CASES:
        scales = {d_k, d_v, d_model, heads * d_k}
        assert len(scales) == 4 and d_k != d_model // heads and heads * d_v != d_model


def test_reference_remove_head_equals_the_hook_and_leaves_the_original_alone():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(3, 6, 16)
    with torch.no_grad():
        original = mha(x)
    for head in range(4):
        removed = ex.reference_remove_head(mha, head)
        with torch.no_grad():
            torch.testing.assert_close(removed(x), ex.head_switched_off(mha, head, x))
            torch.testing.assert_close(mha(x), original)  # the module passed in is unchanged
        assert not torch.allclose(ex.head_switched_off(mha, head, x), original)


LABELS = {
    ex.check_remove_head: "Exercise 5.1 (switch a head off in the weights)",
    ex.check_multi_head_attention: "Exercise 5.2 (multi-head attention, d_v != d_k)",
}


def _not_attempted(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_remove_head, ex.reference_remove_head),
        (ex.check_multi_head_attention, ex.reference_multi_head_attention),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted(check, reference, capsys):
    assert check(reference)
    label = LABELS[check]
    assert capsys.readouterr().out == f"{label}: correct!\n"
    assert not check(_not_attempted)
    assert capsys.readouterr().out.startswith(f"{label}: not attempted yet")


def _edit(change, copy_first=True, no_grad=True):
    """A reader's answer that applies change(module, block) to a copy (or to the module itself)."""

    def fn(mha, head):
        target = copy.deepcopy(mha) if copy_first else mha
        block = slice(head * mha.d_k, (head + 1) * mha.d_k)
        if no_grad:
            with torch.no_grad():
                change(target, block)
        else:
            change(target, block)
        return target

    return fn


def _zero_values_and_their_bias(m, block):
    m.w_v.weight[block] = 0.0
    m.w_v.bias[block] = 0.0


def test_remove_head_checker_accepts_zeroing_the_values_with_their_bias(capsys):
    assert ex.check_remove_head(_edit(_zero_values_and_their_bias))
    assert capsys.readouterr().out == f"{LABELS[ex.check_remove_head]}: correct!\n"


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_edit(lambda m, b: m.w_o.weight[b].zero_()), "you zeroed ROWS of w_o.weight"),
        (_edit(lambda m, b: (m.w_q.weight[b].zero_(), m.w_q.bias[b].zero_())), "attends UNIFORMLY"),
        (_edit(lambda m, b: m.w_q.weight[b].zero_()), "Its queries are then the bias alone"),
        (_edit(lambda m, b: (m.w_k.weight[b].zero_(), m.w_k.bias[b].zero_())), "attends UNIFORMLY"),
        (_edit(lambda m, b: m.w_v.weight[b].zero_()), "but not their bias"),
        (_edit(lambda m, b: (m.w_o.weight[:, b].zero_(), m.w_o.bias.zero_())), "so is W_O's bias"),
        (_edit(lambda m, b: m.w_o.weight[:, b].zero_(), copy_first=False), "copy.deepcopy(mha)"),
        (_edit(lambda m, b: m.w_o.weight[:, b].zero_(), no_grad=False), "torch.no_grad()"),
        (lambda mha, head: ex.reference_remove_head(mha, (head + 1) % mha.num_heads), "another head"),
        (lambda mha, head: copy.deepcopy(mha), "still the original one"),
        (lambda mha, head: None, "got NoneType"),
        (_edit(lambda m, b: m.w_o.weight[:, b].mul_(0.5)), "differs"),
    ],
    ids=[
        "rows-of-w-o",
        "queries",
        "query-weights-only",
        "keys",
        "values-without-bias",
        "w-o-bias-too",
        "in-place",
        "no-grad-missing",
        "wrong-head",
        "unchanged",
        "none",
        "halved",
    ],
)
def test_remove_head_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_remove_head(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABELS[ex.check_remove_head]}: not yet.") and hint in out


def _attention(x_q, x_kv, w_q, w_k, w_v, w_o, h, scale=None, dim=-1, use_w_o=True, self_only=False):
    kv = x_q if self_only else x_kv
    q = ex.reference_split_heads(x_q @ w_q, h)
    k = ex.reference_split_heads(kv @ w_k, h)
    v = ex.reference_split_heads(kv @ w_v, h)
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    out = ex.reference_merge_heads(torch.softmax(q @ k.transpose(-2, -1) / scale, dim=dim) @ v)
    return out @ w_o if use_w_o else out


def _direct_view(x_q, x_kv, w_q, w_k, w_v, w_o, h):
    def split(t):
        return t.view(t.shape[0], h, t.shape[1], -1)  # the right shape, positions mixed into heads

    q, k, v = split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v)
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    return out.reshape(x_q.shape[0], x_q.shape[1], -1) @ w_o


def _direct_view_split_only(x_q, x_kv, w_q, w_k, w_v, w_o, h):
    def split(t):
        return t.view(t.shape[0], h, t.shape[1], -1)  # the trap when splitting; the merge below is right

    q, k, v = split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v)
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    return ex.reference_merge_heads(out) @ w_o


def _merge_without_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, h):
    q, k, v = (ex.reference_split_heads(t, h) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    return out.reshape(x_q.shape[0], x_q.shape[1], -1) @ w_o  # the trap when merging: no transpose back


def _view_after_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, h):
    q, k, v = (ex.reference_split_heads(t, h) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    return out.transpose(1, 2).view(x_q.shape[0], x_q.shape[1], -1) @ w_o


def _square_heads(x_q, x_kv, w_q, w_k, w_v, w_o, h):
    """Copied from the notebook's section 2: d_k = d_model // num_heads for every split."""
    d_k = x_q.shape[-1] // h

    def split(t):
        return t.view(t.shape[0], t.shape[1], h, d_k).transpose(1, 2)

    q, k, v = split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v)
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v
    return ex.reference_merge_heads(out) @ w_o


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda *a: _attention(*a, scale=math.sqrt(a[2].shape[0])), "not sqrt(d_model)"),
        (lambda *a: _attention(*a, scale=math.sqrt(a[4].shape[1] // a[6])), "d_v, the width of its values"),
        (lambda *a: _attention(*a, scale=math.sqrt(a[2].shape[1])), "all heads' query width"),
        (lambda *a: _attention(*a, scale=1.0), "divide the scores by sqrt(d_k)"),
        (lambda *a: _attention(*a, dim=-2), "softmax over the keys"),
        (lambda *a: _attention(*a, use_w_o=False), "apply w_o after merging"),
        (lambda *a: _attention(*a, self_only=True), "the keys and values come from x_kv"),
        (lambda *a: _attention(*a, scale=math.sqrt(a[2].shape[0] // a[6])), "read from the weights"),
        (lambda x_q, x_kv, *rest: ex.reference_multi_head_attention(x_kv, x_q, *rest), "one row per query"),
        (_direct_view, "the reshape trap of section 3"),
        (_direct_view_split_only, "(your merge is right)"),
        (_merge_without_transpose, "the reshape trap of section 3 in reverse"),
        (lambda *a: ex.reference_multi_head_attention(*a[:2], *(w.T for w in a[2:6]), a[6]), "maths convention"),
        (_view_after_transpose, "not contiguous"),
        (_square_heads, "a head is not d_model / num_heads wide"),
    ],
    ids=[
        "sqrt-d-model",
        "sqrt-d-v",
        "sqrt-all-heads",
        "unscaled",
        "softmax-dim",
        "no-w-o",
        "self-attention",
        "sqrt-d-model-over-heads",
        "swapped-inputs",
        "direct-view",
        "direct-view-split-only",
        "merge-without-transpose",
        "nn-linear-convention",
        "view-after-transpose",
        "d-model-over-heads",
    ],
)
def test_mha_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_multi_head_attention(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABELS[ex.check_multi_head_attention]}: not yet.") and hint in out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "5.1": (ex.check_remove_head, ex.reference_remove_head),
    "5.2": (ex.check_multi_head_attention, ex.reference_multi_head_attention),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_remove_head, _edit(lambda m, b: m.w_o.weight[b].zero_()), "你清零的是 w_o.weight 的行"),
        (ex.check_remove_head, _edit(lambda m, b: m.w_v.weight[b].zero_()), "却没有清零它们的偏置"),
        (ex.check_remove_head, _edit(lambda m, b: m.w_o.weight[:, b].zero_(), copy_first=False), "要修改它的副本"),
        (ex.check_remove_head, lambda mha, head: copy.deepcopy(mha), "输出仍和原来一样"),
        (
            ex.check_multi_head_attention,
            lambda *a: _attention(*a, scale=math.sqrt(a[2].shape[0])),
            "而不是 sqrt(d_model)",
        ),
        (ex.check_multi_head_attention, lambda *a: _attention(*a, dim=-2), "要在键上做 softmax"),
        (ex.check_multi_head_attention, lambda *a: _attention(*a, use_w_o=False), "合并之后还要乘上 w_o"),
        (ex.check_multi_head_attention, _direct_view, "reshape 陷阱"),
        (ex.check_multi_head_attention, _direct_view_split_only, "（合并那一步是对的）"),
        (ex.check_multi_head_attention, _merge_without_transpose, "reshape 陷阱反过来的情形"),
        (ex.check_multi_head_attention, _view_after_transpose, "不再连续"),
        (ex.check_multi_head_attention, _square_heads, "这里一个头的维度并不是 d_model / num_heads"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
