"""The checkers of notebook 11 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import pytest
import torch

from tests.chinese_feedback import assert_mistake_named_in_chinese
from transformer_course.exercises import bert_gpt_vit as ex
from transformer_course.families.bert import segment_ids
from transformer_course.families.vit import patchify
from transformer_course.language import set_language


def _stub(*args):
    raise NotImplementedError


# ---- exercise 1: span corruption ------------------------------------------------------------------------


def test_reference_span_corruption_matches_the_hand_built_example():
    """The notebook's hand-built example: spans [2, 4) and [8, 9) of a sentence."""
    words = "parseaddr couldn't parse it use it as is and hope for the best".split()
    dropped = [i in (2, 3, 8) for i in range(len(words))]
    source, target = ex.reference_span_corruption(words, dropped)
    assert " ".join(source) == "parseaddr couldn't <extra_id_0> use it as is <extra_id_1> hope for the best"
    assert " ".join(target) == "<extra_id_0> parse it <extra_id_1> and <extra_id_2>"
    assert ex.reference_span_corruption(["a", "b"], [False, False]) == (["a", "b"], ["<extra_id_0>"])
    assert ex.reference_span_corruption(["a", "b"], [True, True]) == (
        ["<extra_id_0>"],
        ["<extra_id_0>", "a", "b", "<extra_id_1>"],
    )


def test_span_checker_accepts_the_reference(capsys):
    assert ex.check_span_corruption(ex.reference_span_corruption)
    assert ex.check_span_corruption(lambda w, d: tuple(list(x) for x in ex.reference_span_corruption(w, d)))
    assert capsys.readouterr().out.count("Exercise 11.1 (span corruption): correct!") == 2


def test_span_checker_says_not_attempted(capsys):
    assert not ex.check_span_corruption(_stub)
    assert "Exercise 11.1 (span corruption): not attempted yet" in capsys.readouterr().out


def _one_sentinel_per_word(words, dropped):
    source, target = [], []
    for word, gone in zip(words, dropped):
        if gone:
            marker = f"<extra_id_{sum(1 for t in target if t.startswith('<extra_id_'))}>"
            source.append(marker)
            target += [marker, word]
        else:
            source.append(word)
    return source, target + [f"<extra_id_{sum(dropped)}>"]


def _no_closing_sentinel(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)
    return source, target[:-1]


def _same_sentinel(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)
    return (
        ["<extra_id_0>" if w.startswith("<extra_id_") else w for w in source],
        ["<extra_id_0>" if w.startswith("<extra_id_") else w for w in target],
    )


def _target_without_sentinels(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)
    return source, [w for w, d in zip(words, dropped) if d] + [target[-1]]


def _keeps_dropped_words(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)
    kept = []
    for i, (word, gone) in enumerate(zip(words, dropped)):
        if gone and (i == 0 or not dropped[i - 1]):
            kept.append(f"<extra_id_{sum(1 for w in kept if w.startswith('<extra_id_'))}>")
        kept.append(word)
    return kept, target


def _numbered_from_one(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)

    def shift(w):
        return f"<extra_id_{int(w[10:-1]) + 1}>" if w.startswith("<extra_id_") else w

    return [shift(w) for w in source], [shift(w) for w in target]


def _extra_sentinel_first(words, dropped):
    source, target = ex.reference_span_corruption(words, dropped)
    return source, ["<extra_id_0>", *target]


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_one_sentinel_per_word, "share one sentinel"),
        (_no_closing_sentinel, "one more sentinel after the last span"),
        (_same_sentinel, "number the sentinels in order"),
        (_numbered_from_one, "the first sentinel is <extra_id_0>"),
        (_target_without_sentinels, "each span in the target starts with its sentinel"),
        (_keeps_dropped_words, "lose the dropped ones"),
        (lambda w, d: ex.reference_span_corruption(w, d)[0], "Return a tuple (input words, target words)"),
        (lambda w, d: tuple(" ".join(x) for x in ex.reference_span_corruption(w, d)), "got tuple(str, str)"),
        (lambda w, d: (w, w), "lose the dropped ones; got return the number"),
        (_extra_sentinel_first, "expected input"),
    ],
)
def test_span_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_span_corruption(wrong)
    out = capsys.readouterr().out
    assert "Exercise 11.1 (span corruption): not yet" in out and hint in out, out


# ---- exercise 2: segment ids ----------------------------------------------------------------------------


def test_reference_segment_ids_equals_the_package():
    for ids in ex._segment_cases():
        torch.testing.assert_close(ex.reference_segment_ids(ids), segment_ids(ids))


def test_segment_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_segment_ids(ex.reference_segment_ids)
    assert ex.check_segment_ids(segment_ids)
    assert capsys.readouterr().out.count("Exercise 11.2 (segment ids): correct!") == 2


def test_segment_checker_says_not_attempted(capsys):
    assert not ex.check_segment_ids(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _inclusive(ids, sep_id, pad_id):
    return (ids == sep_id).long().cumsum(1).clamp(max=1).masked_fill(ids == pad_id, 0)


def _padding_not_zeroed(ids, sep_id, pad_id):
    is_sep = (ids == sep_id).long()
    return (is_sep.cumsum(1) - is_sep).clamp(max=1)


def _no_clamp(ids, sep_id, pad_id):
    is_sep = (ids == sep_id).long()
    return is_sep.cumsum(1) - is_sep


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_inclusive, "strictly BEFORE"),
        (_padding_not_zeroed, "gives the padding after B segment 1: set the positions where ids == pad_id to 0"),
        (_no_clamp, "no position may get a segment above 1: yours gives the padding after B segment 2"),
        (lambda ids, s, p: segment_ids(ids, s, p).float(), "should hold integers"),
        (lambda ids, s, p: segment_ids(ids, s, p)[:, :-1], "has shape"),
        (lambda ids, s, p: torch.zeros_like(ids), "differ from the expected ones"),
    ],
)
def test_segment_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_segment_ids(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ---- exercise 3: patchify -------------------------------------------------------------------------------


def test_reference_patchify_equals_the_package():
    images = torch.randn(4, 8, 12)
    for p in (1, 2, 4):
        torch.testing.assert_close(ex.reference_patchify(images, p), patchify(images, p))


def test_patchify_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_patchify(ex.reference_patchify)
    assert ex.check_patchify(patchify)
    assert capsys.readouterr().out.count("Exercise 11.3 (patchify): correct!") == 2


def test_patchify_checker_says_not_attempted(capsys):
    assert not ex.check_patchify(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _plain_reshape(images, p):
    return images.reshape(images.shape[0], -1, p * p)


def _column_order(images, p):
    b, h, w = images.shape
    return images.reshape(b, h // p, p, w // p, p).permute(0, 3, 1, 2, 4).reshape(b, -1, p * p)


def _transposed_patch(images, p):
    b, h, w = images.shape
    return images.reshape(b, h // p, p, w // p, p).permute(0, 1, 3, 4, 2).reshape(b, -1, p * p)


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_plain_reshape, "plain reshape"),
        (_column_order, "column by column; number them row by row"),
        (_transposed_patch, "inside each patch come out column by column"),
        (lambda images, p: patchify(images, p).transpose(1, 2), "(batch, num_patches, p * p)"),
        (lambda images, p: patchify(images, p) * 2, "differs from the expected values"),
        (lambda images, p: images.numpy(), "should be a torch.Tensor"),
    ],
)
def test_patchify_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_patchify(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_checkers_report_crashes_as_feedback(capsys):
    assert not ex.check_patchify(lambda images, p: images.view(-1, 7))
    assert "your code raised RuntimeError" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------

CHECKERS = {
    "11.1": (ex.check_span_corruption, ex.reference_span_corruption),
    "11.2": (ex.check_segment_ids, ex.reference_segment_ids),
    "11.3": (ex.check_patchify, ex.reference_patchify),
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
        (ex.check_span_corruption, _one_sentinel_per_word, "共用一个哨兵词元"),
        (ex.check_span_corruption, _no_closing_sentinel, "还要再跟一个哨兵词元"),
        (ex.check_span_corruption, _numbered_from_one, "从 0 开始编号"),
        (ex.check_span_corruption, _keeps_dropped_words, "并去掉被丢弃的词"),
        (ex.check_span_corruption, _extra_sentinel_first, "目标应为"),
        (ex.check_segment_ids, _inclusive, "不算该位置本身"),
        (ex.check_segment_ids, _padding_not_zeroed, "要把 ids == pad_id 的位置设为 0"),
        (ex.check_segment_ids, lambda ids, s, p: segment_ids(ids, s, p).float(), "应是整数"),
        (ex.check_patchify, _plain_reshape, "直接 reshape"),
        (ex.check_patchify, _column_order, "是按列编号的"),
        (ex.check_patchify, _transposed_patch, "要按行展平每个图像块"),
        (ex.check_patchify, lambda images, p: patchify(images, p).transpose(1, 2), "(batch, 图像块数, p * p)"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


def test_segment_checker_names_the_first_sep_with_the_padding_left_in(capsys):
    def inclusive(ids, sep_id, pad_id):
        return ((ids == sep_id).cumsum(dim=1) >= 1).long()

    assert not ex.check_segment_ids(inclusive)
    out = capsys.readouterr().out
    assert "strictly BEFORE each position" in out and "the padding must get segment 0" in out


def test_span_corruption_checker_says_what_the_target_is_when_nothing_is_dropped(capsys):
    def empty_target_without_spans(words, dropped):
        if any(dropped):
            return ex.reference_span_corruption(words, dropped)
        return list(words), []  # the slip: no span, so no sentinel

    assert not ex.check_span_corruption(empty_target_without_spans)
    out = capsys.readouterr().out
    assert "with no span at all, the target is still one sentinel" in out and "after the last span" not in out, out
