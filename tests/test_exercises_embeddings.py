"""The checkers of notebook 02 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import embeddings as ex
from transformer_course.prelude.word2vec import Word2Vec, nearest_neighbours
from transformer_course.text.corpus import WordVocabulary


def test_references_agree_with_the_package():
    g = torch.Generator().manual_seed(0)
    vectors = torch.randn(7, 3, generator=g)
    torch.testing.assert_close(
        ex.reference_cosine_matrix(vectors), F.cosine_similarity(vectors[:, None], vectors[None], dim=-1)
    )
    model = Word2Vec(10, 4, sparse=False, generator=g)
    with torch.no_grad():
        model.output_vectors.weight.normal_(generator=g)
    centers, contexts, negatives = torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([[5, 6], [7, 8]])
    model.skipgram_loss(centers, contexts, negatives).sum().backward()  # centres 1 and 2 differ: one row each
    v, u = model.input_vectors.weight.detach(), model.output_vectors.weight.detach()
    torch.testing.assert_close(
        ex.reference_sgns_center_gradient(v[centers], u[contexts], u[negatives]),
        model.input_vectors.weight.grad[centers],
    )
    vectors, words = ex._nearest_case()
    vocab = WordVocabulary([w for w in words for _ in range(2)], min_count=2)
    order = [vocab.id(w) for w in words]
    ours = [w for w, _ in nearest_neighbours(vectors[torch.tensor(order).argsort()], vocab, "cat", 3)]
    assert ex.reference_nearest_words(vectors, words, "cat", 3) == ours


@pytest.mark.parametrize(
    ("checker", "reference"),
    [
        (ex.check_cosine_matrix, ex.reference_cosine_matrix),
        (ex.check_sgns_center_gradient, ex.reference_sgns_center_gradient),
        (ex.check_nearest_words, ex.reference_nearest_words),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted_for_a_stub(checker, reference, capsys):
    assert checker(reference)
    assert "correct" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert not checker(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_cosine_checker_accepts_torch_built_in():
    assert ex.check_cosine_matrix(lambda v: F.cosine_similarity(v[:, None], v[None], dim=-1))


COSINE_MISTAKES = {
    "dot products": lambda v: v @ v.T,
    "columns normalised": lambda v: (v / v.norm(dim=0)) @ (v / v.norm(dim=0)).T,
    "divided by squared norm": lambda v: (v / v.norm(dim=1, keepdim=True) ** 2) @ v.T,
    "vector, not matrix": lambda v: F.cosine_similarity(v, v, dim=1),
    "euclidean distances": lambda v: torch.cdist(v, v),
}


@pytest.mark.parametrize("name", list(COSINE_MISTAKES))
def test_cosine_checker_rejects_typical_mistakes(name, capsys):
    assert not ex.check_cosine_matrix(COSINE_MISTAKES[name])
    assert "not yet" in capsys.readouterr().out


def _parts(v, u_o, u_n):
    """The two terms of the right gradient, and the scores they come from."""
    pos = (u_o * v).sum(-1, keepdim=True)  # (batch, 1)
    neg = u_n @ v.unsqueeze(-1)  # (batch, k, 1)
    return pos, neg, (torch.sigmoid(pos) - 1) * u_o, (torch.sigmoid(neg) * u_n).sum(1)


def _autograd(v, u_o, u_n):
    v = v.clone().requires_grad_(True)
    pos, neg = (u_o * v).sum(-1), (u_n @ v.unsqueeze(-1)).squeeze(-1)
    (-F.logsigmoid(pos) - F.logsigmoid(-neg).sum(-1)).sum().backward()
    return v.grad


def test_gradient_checker_accepts_autograd(capsys):
    assert ex.check_sgns_center_gradient(_autograd)
    assert "correct" in capsys.readouterr().out


def _sign_of_context(v, u_o, u_n):
    pos, _, _, away = _parts(v, u_o, u_n)
    return (1 - torch.sigmoid(pos)) * u_o + away


def _noise_like_context(v, u_o, u_n):
    _, neg, towards, _ = _parts(v, u_o, u_n)
    return towards + ((torch.sigmoid(neg) - 1) * u_n).sum(1)


def _sigmoid_of_minus(v, u_o, u_n):
    _, neg, towards, _ = _parts(v, u_o, u_n)
    return towards - (torch.sigmoid(-neg) * u_n).sum(1)


def _minus_dropped(v, u_o, u_n):
    _, neg, towards, _ = _parts(v, u_o, u_n)
    return towards + ((1 - torch.sigmoid(neg)) * u_n).sum(1)


def _sigmoids_swapped(v, u_o, u_n):
    pos, neg, _, _ = _parts(v, u_o, u_n)
    return -torch.sigmoid(pos) * u_o + ((1 - torch.sigmoid(neg)) * u_n).sum(1)


def _context_factor_minus_sigmoid(v, u_o, u_n):
    pos, _, _, away = _parts(v, u_o, u_n)
    return -torch.sigmoid(pos) * u_o + away


def _context_factor_sigmoid(v, u_o, u_n):
    pos, _, _, away = _parts(v, u_o, u_n)
    return torch.sigmoid(pos) * u_o + away


def _batch_average_in_every_row(v, u_o, u_n):
    return _autograd(v, u_o, u_n).mean(0, keepdim=True).expand_as(v)


def _no_noise(v, u_o, u_n):
    return _parts(v, u_o, u_n)[2]


def _noise_subtracted(v, u_o, u_n):
    _, _, towards, away = _parts(v, u_o, u_n)
    return towards - away


def _mean_over_noise(v, u_o, u_n):
    _, neg, towards, _ = _parts(v, u_o, u_n)
    return towards + (torch.sigmoid(neg) * u_n).mean(1)


GRADIENT_MISTAKES = {
    "sign of the context term": (_sign_of_context, "wrong sign"),
    "noise treated like context": (_noise_like_context, "not sigmoid(s) - 1 = -sigmoid(-s)"),
    "sigmoid(-s) for noise": (_sigmoid_of_minus, "not sigmoid(s) - 1 = -sigmoid(-s)"),
    "minus of -s dropped on the noise term": (_minus_dropped, "drops the minus"),
    "sigmoid(s) and 1 - sigmoid(s) swapped": (_sigmoids_swapped, "You swapped sigmoid(s) and 1 - sigmoid(s)"),
    "context factor -sigmoid(s)": (_context_factor_minus_sigmoid, "not -sigmoid(s)"),
    "context factor sigmoid(s)": (_context_factor_sigmoid, "the -1 is missing"),
    "the batch's average in every row": (_batch_average_in_every_row, "the batch's average"),
    "no noise words": (_no_noise, "Add the noise words"),
    "noise terms subtracted": (_noise_subtracted, "should be added, not subtracted"),
    "mean over noise words": (_mean_over_noise, "do not average"),
    "gradient of the batch mean": (lambda v, u_o, u_n: _autograd(v, u_o, u_n) / v.shape[0], "batch mean"),
    "update direction": (lambda v, u_o, u_n: -_autograd(v, u_o, u_n), "flipped everywhere"),
    "one row only": (lambda v, u_o, u_n: _autograd(v, u_o, u_n).sum(0), "shape"),
    "a list": (lambda v, u_o, u_n: _autograd(v, u_o, u_n).tolist(), "torch.Tensor"),
}


@pytest.mark.parametrize("name", list(GRADIENT_MISTAKES))
def test_gradient_checker_rejects_typical_mistakes_with_their_hint(name, capsys):
    wrong, hint = GRADIENT_MISTAKES[name]
    assert not ex.check_sgns_center_gradient(wrong)
    out = capsys.readouterr().out
    assert "Exercise 2.2 (the gradient for the centre word): not yet" in out and hint in out


def _by_dot(vectors, words, query, k):
    i = list(words).index(query)
    scores = vectors @ vectors[i]
    scores[i] = -float("inf")
    return [words[j] for j in scores.topk(k).indices.tolist()]


def _with_self(vectors, words, query, k):
    i = list(words).index(query)
    return [words[j] for j in ex.reference_cosine_matrix(vectors)[i].topk(k).indices.tolist()]


def _ascending(vectors, words, query, k):
    return ex.reference_nearest_words(vectors, words, query, k)[::-1]


def _indices(vectors, words, query, k):
    return [list(words).index(w) for w in ex.reference_nearest_words(vectors, words, query, k)]


def _least_similar(vectors, words, query, k):
    i = list(words).index(query)
    scores = ex.reference_cosine_matrix(vectors)[i]
    return [words[j] for j in (-scores).topk(k).indices.tolist()]


NEAREST_MISTAKES = {
    "dot product": _by_dot,
    "includes itself": _with_self,
    "ascending": _ascending,
    "indices": _indices,
    "least similar": _least_similar,
    "one too few": lambda vectors, words, query, k: ex.reference_nearest_words(vectors, words, query, k)[:-1],
}


@pytest.mark.parametrize("name", list(NEAREST_MISTAKES))
def test_nearest_checker_rejects_typical_mistakes(name, capsys):
    assert not ex.check_nearest_words(NEAREST_MISTAKES[name])
    assert "not yet" in capsys.readouterr().out


def test_feedback_names_the_mistake_and_the_exercise(capsys):
    ex.check_cosine_matrix(COSINE_MISTAKES["dot products"])
    assert "Exercise 2.1 (cosine similarity matrix): not yet. These are dot products" in capsys.readouterr().out
    ex.check_nearest_words(_by_dot)
    assert "Exercise 2.3 (nearest neighbours): not yet. Rank by cosine" in capsys.readouterr().out
    ex.check_nearest_words(_with_self)
    assert "leave the query word out" in capsys.readouterr().out
    ex.check_nearest_words(_ascending)
    assert "most similar first" in capsys.readouterr().out
    ex.check_nearest_words(_least_similar)
    assert "least similar words to 'cat': sort by similarity from highest to lowest" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "2.1": (ex.check_cosine_matrix, ex.reference_cosine_matrix),
    "2.2": (ex.check_sgns_center_gradient, ex.reference_sgns_center_gradient),
    "2.3": (ex.check_nearest_words, ex.reference_nearest_words),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_cosine_matrix, COSINE_MISTAKES["dot products"], "你算出的是点积"),
        (ex.check_cosine_matrix, COSINE_MISTAKES["columns normalised"], "你归一化的是列"),
        (ex.check_sgns_center_gradient, _sign_of_context, "符号反了"),
        (ex.check_sgns_center_gradient, _minus_dropped, "漏掉了对 -s（内层函数）求导带来的负号"),
        (ex.check_sgns_center_gradient, _sigmoids_swapped, "你把 sigmoid(s) 和 1 - sigmoid(s) 用反了"),
        (ex.check_sgns_center_gradient, _context_factor_minus_sigmoid, "而不是 -sigmoid(s)"),
        (ex.check_sgns_center_gradient, _noise_subtracted, "噪声词的项应该加上，而不是减去"),
        (ex.check_sgns_center_gradient, _no_noise, "要加上噪声词的项"),
        (ex.check_sgns_center_gradient, _context_factor_sigmoid, "你漏掉了减 1"),
        (ex.check_sgns_center_gradient, _batch_average_in_every_row, "每一行都是同一个梯度"),
        (ex.check_sgns_center_gradient, _mean_over_noise, "而不是求平均"),
        (ex.check_nearest_words, _by_dot, "要按余弦相似度排序"),
        (ex.check_nearest_words, _with_self, "要把查询词本身排除在外"),
        (ex.check_nearest_words, _ascending, "最相似的要排在最前面"),
        (ex.check_nearest_words, _least_similar, "最不相似的 3 个词"),
        (ex.check_nearest_words, _indices, "要返回词本身"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
