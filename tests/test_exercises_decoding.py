"""The checkers of notebook 10 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import torch

from transformer_course.decoding import filter_logits
from transformer_course.exercises import decoding as ex


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
    assert ex.check_greedy_step(ex.reference_greedy_step)
    assert capsys.readouterr().out.count("correct") == 5


def test_checkers_say_not_attempted(capsys):
    assert not ex.check_top_k(_stub)
    assert not ex.check_top_p(_stub)
    assert not ex.check_greedy_step(_stub)
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


def _softmaxed(logits, k):
    return ex.reference_top_k(logits, k).softmax(-1).log()


def test_top_k_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_k_minus_one, "keep the k largest"),
        (_smallest, "least likely"),
        (_zeroed, "expected"),
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


def test_top_p_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [(_strict_p, "no token"), (_unsorted_p, "tokens per row"), (_top_k_instead, "tokens per row")]:
        assert not ex.check_top_p(wrong), wrong.__name__
        assert hint in capsys.readouterr().out, wrong.__name__


def _ignores_finished(logits, finished, eos_id, pad_id):
    tokens = logits.argmax(-1)
    return tokens, finished | (tokens == eos_id)


def _forgets_old(logits, finished, eos_id, pad_id):
    tokens = logits.argmax(-1).masked_fill(finished, pad_id)
    return tokens, tokens == eos_id


def _never_finishes(logits, finished, eos_id, pad_id):
    return logits.argmax(-1).masked_fill(finished, pad_id), finished


def test_greedy_step_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_ignores_finished, "<pad>"),
        (_forgets_old, "stays finished"),
        (_never_finishes, "mark it finished"),
        (lambda logits, finished, e, p: logits.argmax(-1), "tuple"),
    ]:
        assert not ex.check_greedy_step(wrong), wrong
        assert hint in capsys.readouterr().out, wrong
