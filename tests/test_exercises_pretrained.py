"""The checkers of notebook 14 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from transformer_course.exercises import pretrained as ex
from transformer_course.pretrained import l2_normalize, mean_pool


def _stub(*args):
    raise NotImplementedError


# ----------------------------------------------------------------------------------------------- exercise 1
def test_reference_sentence_embedding_equals_the_package():
    states, mask = ex._pooling_case(0)
    torch.testing.assert_close(ex.reference_sentence_embedding(states, mask), l2_normalize(mean_pool(states, mask)))


def test_pooling_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_sentence_embedding(ex.reference_sentence_embedding)
    assert ex.check_sentence_embedding(lambda s, m: l2_normalize(mean_pool(s, m)))
    # a sum instead of a mean points the same way, so after normalising it is just as right
    assert ex.check_sentence_embedding(lambda s, m: F.normalize((s * m[..., None]).sum(1), dim=-1))
    assert "correct" in capsys.readouterr().out


def test_pooling_checker_says_not_attempted(capsys):
    assert not ex.check_sentence_embedding(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _rejects(fn, hint: str, capsys) -> None:
    assert not ex.check_sentence_embedding(fn)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out, out


def test_pooling_checker_rejects_typical_mistakes(capsys):
    _rejects(lambda s, m: F.normalize(s.mean(1), dim=-1), "padding was averaged in", capsys)
    _rejects(lambda s, m: mean_pool(s, m), "not unit length", capsys)
    _rejects(lambda s, m: F.normalize(s[:, 0], dim=-1), "[CLS]", capsys)
    _rejects(lambda s, m: None, "should be a torch.Tensor", capsys)
    _rejects(lambda s, m: F.normalize(mean_pool(F.normalize(s, dim=-1), m), dim=-1), "not each token", capsys)
    _rejects(lambda s, m: F.normalize(mean_pool(s, m), dim=0), "over the batch", capsys)
    _rejects(lambda s, m: l2_normalize(mean_pool(s, m))[:, :3], "shape", capsys)
    _rejects(lambda s, m: l2_normalize(mean_pool(s, m)) * 0.5, "differs", capsys)


def test_pooling_checker_reports_a_crash(capsys):
    assert not ex.check_sentence_embedding(lambda s, m: s @ m)
    assert "raised" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- exercise 2
def test_search_checker_accepts_the_reference(capsys):
    assert ex.check_nearest_neighbours(ex.reference_nearest_neighbours)
    assert "correct" in capsys.readouterr().out


def test_search_checker_says_not_attempted(capsys):
    assert not ex.check_nearest_neighbours(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _search_rejects(fn, hint: str, capsys) -> None:
    assert not ex.check_nearest_neighbours(fn)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out, out


def test_search_checker_rejects_typical_mistakes(capsys):
    def dot(q, c, k):
        return (q @ c.T).topk(k, dim=-1)

    def least(q, c, k):
        return (F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T).topk(k, dim=-1, largest=False)

    def euclid(q, c, k):
        d, i = torch.cdist(q, c).topk(k, dim=-1, largest=False)
        return -d, i

    def distances_as_scores(q, c, k):
        _, i = ex.reference_nearest_neighbours(q, c, k)
        return torch.zeros(i.shape), i

    def only_indices(q, c, k):
        return ex.reference_nearest_neighbours(q, c, k)[1]

    def transposed(q, c, k):
        s, i = ex.reference_nearest_neighbours(q, c, k)
        return s.T, i.T

    _search_rejects(dot, "largest dot products", capsys)
    _search_rejects(least, "least similar", capsys)
    _search_rejects(euclid, "Euclidean", capsys)
    _search_rejects(distances_as_scores, "scores", capsys)
    _search_rejects(only_indices, "pair", capsys)
    _search_rejects(transposed, "shape", capsys)


def test_search_case_separates_the_mistakes():
    queries, collection = ex._search_case()
    k = 4
    ref = ex.reference_nearest_neighbours(queries, collection, k)[1]
    dot = (queries @ collection.T).topk(k).indices
    euclid = torch.cdist(queries, collection).topk(k, largest=False).indices
    assert not torch.equal(ref, dot) and not torch.equal(ref, euclid) and not torch.equal(dot, euclid)
