"""The checkers of notebook 10 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from tests.chinese_feedback import assert_mistake_named_in_chinese
from transformer_course.core.attention import KVCache, MultiHeadAttention
from transformer_course.core.decoding import filter_logits
from transformer_course.exercises import decoding as ex
from transformer_course.language import set_language


def _stub(*args):
    raise NotImplementedError


def test_references_equal_the_package():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 11, generator=g)
    for k in (1, 4, 11):
        torch.testing.assert_close(ex.reference_top_k(logits, k), filter_logits(logits, top_k=k))
    for p in (0.2, 0.5, 0.95, 1.0):
        torch.testing.assert_close(ex.reference_top_p(logits, p), filter_logits(logits, top_p=p))


def test_checkers_accept_the_references_and_the_package(capsys):
    assert ex.check_top_k(ex.reference_top_k)
    assert ex.check_top_k(lambda logits, k: filter_logits(logits, top_k=k))
    assert ex.check_top_p(ex.reference_top_p)
    assert ex.check_top_p(lambda logits, p: filter_logits(logits, top_p=p))
    assert ex.check_cached_attention(ex.reference_cached_attention)
    out = capsys.readouterr().out
    assert out.count("correct") == 5
    for k in (1, 2, 3):
        assert f"Exercise 10.{k} (" in out


def test_checkers_say_not_attempted(capsys):
    assert not ex.check_top_k(_stub)
    assert not ex.check_top_p(_stub)
    assert not ex.check_cached_attention(_stub)
    assert capsys.readouterr().out.count("not attempted yet") == 3


def _k_minus_one(logits, k):
    if k == 1:
        return logits.masked_fill(torch.ones_like(logits, dtype=torch.bool), float("-inf"))
    return ex.reference_top_k(logits, k - 1)


def _smallest(logits, k):
    kth = (-logits).topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(-logits < kth, float("-inf"))


def _zeroed(logits, k):
    return ex.reference_top_k(logits, k).nan_to_num(neginf=0.0)


def _very_negative(logits, k):
    return ex.reference_top_k(logits, k).nan_to_num(neginf=-1e9)


def _softmaxed(logits, k):
    return ex.reference_top_k(logits, k).softmax(-1).log()


def _no_keepdim(logits, k):
    """Compares each row with a (rows,) threshold: broadcasting fails (or, for a square input, compares wrongly)."""
    return logits.masked_fill(logits < logits.topk(k, dim=-1).values[..., -1], float("-inf"))


def _top_k_sorted(logits, k):
    """The k largest kept, but the row returned sorted (the order sort left it in)."""
    values = logits.sort(dim=-1, descending=True).values
    return values.masked_fill(torch.arange(values.shape[-1]) >= k, float("-inf"))


def test_top_k_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_no_keepdim, "values[..., -1:] rather than values[..., -1]"),
        (_k_minus_one, "keep the k largest"),
        (_smallest, "least likely"),
        (_top_k_sorted, "returned in sorted order"),
        (_zeroed, "set them to float('-inf'), not 0"),
        (_very_negative, "large negative number"),
        (_softmaxed, "unchanged"),
        (lambda logits, k: logits[..., :k], "shape"),
    ]:
        assert not ex.check_top_k(wrong), wrong
        assert hint in capsys.readouterr().out, wrong


def _strict_p(logits, p):
    """Drops the token that crosses p: keeps only tokens whose cumulative probability stays below p."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = torch.zeros_like(cum, dtype=torch.bool).scatter(-1, order, cum > p)
    return logits.masked_fill(drop, float("-inf"))


def _unsorted_p(logits, p):
    """Forgets to sort: accumulates probabilities in vocabulary order."""
    probs = logits.softmax(-1)
    before = probs.cumsum(-1) - probs
    return logits.masked_fill(before >= p, float("-inf"))


def _top_k_instead(logits, p):
    return ex.reference_top_k(logits, 2)


def _sorted_order(logits, p):
    """Keeps the right nucleus but returns the logits in sorted order."""
    sorted_logits = logits.sort(dim=-1, descending=True).values
    probs = sorted_logits.softmax(-1)
    return sorted_logits.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))


def _gather_back(logits, p):
    """Builds the mask on the sorted row, then uses gather (not scatter) to bring it back to vocabulary order."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(-1)
    return logits.masked_fill((probs.cumsum(-1) - probs >= p).gather(-1, order), float("-inf"))


def test_top_p_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_sorted_order, "returned in sorted order"),
        (_gather_back, "must go back to vocabulary order"),
        (_strict_p, "no token"),
        (_unsorted_p, "tokens per row"),
        (_top_k_instead, "tokens per row"),
        (lambda logits, p: ex.reference_top_p(logits, p).nan_to_num(neginf=0.0), "not 0"),
    ]:
        assert not ex.check_top_p(wrong), wrong.__name__
        assert hint in capsys.readouterr().out, wrong.__name__


def test_cached_attention_reference_equals_the_package_cache():
    """The reference step, run position by position, equals the package's MultiHeadAttention, with a causal mask
    over the whole sequence and with its own KVCache one position at a time."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3).eval()
    x = torch.randn(2, 5, 12)
    full = mha(x, mask=torch.ones(5, 5, dtype=torch.bool).tril())
    package_cache = KVCache()
    torch.testing.assert_close(torch.cat([mha(x[:, t : t + 1], cache=package_cache) for t in range(5)], 1), full)
    q, k, v = mha.split_heads(mha.w_q(x)), mha.split_heads(mha.w_k(x)), mha.split_heads(mha.w_v(x))
    cache = (torch.zeros(2, 3, 0, 4), torch.zeros(2, 3, 0, 4))
    steps = []
    for t in range(5):
        out, cache = ex.reference_cached_attention(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], cache)
        steps.append(out)
    torch.testing.assert_close(mha.w_o(mha.merge_heads(torch.cat(steps, dim=2))), full, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(cache[0], package_cache.k)


def _attend(q, keys, values, scale=True, dim=-1):
    scores = q @ keys.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    return scores.softmax(dim=dim) @ values


def _forgets_to_append(q, k, v, cache):
    return _attend(q, *cache).nan_to_num(0.0), cache


def _attends_then_appends(q, k, v, cache):
    out = _attend(q, *cache).nan_to_num(0.0)  # the newest position does not see itself
    return out, (torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2))


def _wrong_dim(dim):
    def fn(q, k, v, cache):
        keys, values = torch.cat([cache[0], k], dim=dim), torch.cat([cache[1], v], dim=dim)
        return _attend(q, keys, values), (keys, values)

    return fn


def _unscaled(q, k, v, cache):
    keys, values = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    return _attend(q, keys, values, scale=False), (keys, values)


def _softmax_over_query(q, k, v, cache):
    keys, values = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    return _attend(q, keys, values, dim=-2), (keys, values)


def _only_newest(q, k, v, cache):
    return _attend(q, k, v), (k, v)


def _new_first(q, k, v, cache):
    keys, values = torch.cat([k, cache[0]], dim=2), torch.cat([v, cache[1]], dim=2)
    return _attend(q, keys, values), (keys, values)


def test_cached_attention_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_forgets_to_append, "append the new key"),
        (_attends_then_appends, "attends to itself too"),
        (_wrong_dim(-1), "concatenated along dimension 3"),
        (_wrong_dim(1), "concatenated along dimension 1"),
        (_unscaled, "sqrt(d_k)"),
        (_softmax_over_query, "softmax over the keys"),
        (_only_newest, "only the newest position"),
        (_new_first, "old ones first"),
        (lambda q, k, v, cache: q, "Return (output, (keys, values))"),
    ]:
        assert not ex.check_cached_attention(wrong), wrong
        out = capsys.readouterr().out
        assert "Exercise 10.3" in out and "not yet" in out and hint in out, (wrong, out)


def _transposed_keys(q, k, v, cache):
    keys, values = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    weights = torch.softmax(q @ keys.T / math.sqrt(q.shape[-1]), dim=-1)  # the slip: .T on a 4-D tensor
    return weights @ values, (keys, values)


def _wrong_dim_after_the_first_step(q, k, v, cache):
    if cache[0].shape[2] == 0:  # the first step special-cased, so torch.cat never complains
        keys, values = k, v
    else:
        keys, values = torch.cat([cache[0], k], dim=-1), torch.cat([cache[1], v], dim=-1)
    return _attend(q, keys, values), (keys, values)


def test_cached_attention_checker_names_a_transposed_key_and_a_cache_grown_the_wrong_way(capsys):
    assert not ex.check_cached_attention(_transposed_keys)
    out = capsys.readouterr().out
    assert "If you wrote keys.T" in out and "keys.transpose(-2, -1)" in out, out
    assert not ex.check_cached_attention(_wrong_dim_after_the_first_step)
    out = capsys.readouterr().out
    assert "Step 1: the keys no longer line up" in out and "dim=2" in out, out


def _top_k_of_the_whole_tensor(logits, k):
    kept = torch.zeros(logits.numel(), dtype=torch.bool)
    kept[logits.flatten().topk(k).indices] = True
    return logits.masked_fill(~kept.view_as(logits), float("-inf"))


def test_top_k_checker_names_a_top_k_taken_over_the_whole_batch(capsys):
    assert not ex.check_top_k(_top_k_of_the_whole_tensor)
    assert "each row (one sequence) keeps its own k largest" in capsys.readouterr().out


def test_cached_attention_checker_reports_other_crashes(capsys):
    def crashes(q, k, v, cache):
        raise RuntimeError("something else")

    assert not ex.check_cached_attention(crashes)
    assert "your code raised RuntimeError: something else" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------

CHECKERS = {
    "10.1": (ex.check_top_k, ex.reference_top_k),
    "10.2": (ex.check_top_p, ex.reference_top_p),
    "10.3": (ex.check_cached_attention, ex.reference_cached_attention),
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
        (ex.check_top_k, _no_keepdim, "要保留最后一维"),
        (ex.check_top_k, _smallest, "你保留的是最不可能的词元"),
        (ex.check_top_k, _top_k_sorted, "返回的是排序后的顺序"),
        (ex.check_top_k, _zeroed, "logit 为 0 并不等于概率为 0"),
        (ex.check_top_k, _very_negative, "很大的负数"),
        (ex.check_top_k, _softmaxed, "必须保持不变"),
        (ex.check_top_k, _top_k_of_the_whole_tensor, "每一行（一个序列）要分别保留自己最大的 k 个"),
        (ex.check_top_p, _sorted_order, "返回的是排序后的顺序"),
        (ex.check_top_p, _gather_back, "必须回到词表顺序"),
        (ex.check_top_p, _strict_p, "一个词元也没保留"),
        (ex.check_top_p, _unsorted_p, "要保留使累计概率达到 p 的那个词元"),
        (ex.check_cached_attention, _forgets_to_append, "追加进去"),
        (ex.check_cached_attention, _attends_then_appends, "最新的位置也要关注它自己"),
        (ex.check_cached_attention, _wrong_dim(-1), "新的键和值是沿 dim=3 拼接的"),
        (ex.check_cached_attention, _unscaled, "要把分数除以 sqrt(d_k)"),
        (ex.check_cached_attention, _softmax_over_query, "要在键上做 softmax"),
        (ex.check_cached_attention, _only_newest, "之前的也要保留"),
        (ex.check_cached_attention, _new_first, "旧的在前"),
        (ex.check_cached_attention, _transposed_keys, "如果你写的是 keys.T"),
        (ex.check_cached_attention, _wrong_dim_after_the_first_step, "缓存要沿位置增长"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


def test_cached_attention_checker_names_attending_before_appending_whatever_step_0_returns(capsys):
    def before_appending(q, k, v, cache):
        old_k, old_v = cache
        if old_k.shape[-2] == 0:
            out = v  # nothing cached yet: the value itself
        else:
            out = torch.softmax(q @ old_k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ old_v
        return out, (torch.cat([old_k, k], dim=2), torch.cat([old_v, v], dim=2))

    assert not ex.check_cached_attention(before_appending)
    assert "append its key and value first" in capsys.readouterr().out
