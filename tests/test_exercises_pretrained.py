"""The checkers of notebook 14 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import pretrained as ex


def _stub(*args):
    raise NotImplementedError


# -------------------------------------------------------------------------------------------- exercise 14.1
def _means(train, labels):
    return torch.stack([train[labels == c].mean(0) for c in range(int(labels.max()) + 1)])


def test_classifier_checker_accepts_the_reference_and_other_right_answers(capsys):
    assert ex.check_centroid_classifier(ex.reference_centroid_classifier)
    assert "Exercise 14.1 (classify by the nearest centroid): correct!" in capsys.readouterr().out

    def loop_and_sum(train, labels, test):  # sums point the same way as means: after normalising, just as right
        sums = torch.stack([train[labels == c].sum(0) for c in range(int(labels.max()) + 1)])
        return (test @ F.normalize(sums, dim=-1).T).argmax(-1)

    def int32_labels(train, labels, test):
        return ex.reference_centroid_classifier(train, labels, test).int()

    def euclid_to_unit_centroids(train, labels, test):  # for unit vectors, nearest = most cosine-similar
        return torch.cdist(test, F.normalize(_means(train, labels), dim=-1)).argmin(-1)

    for fn in (loop_and_sum, int32_labels, euclid_to_unit_centroids):
        assert ex.check_centroid_classifier(fn), fn.__name__


def test_classifier_checker_says_not_attempted(capsys):
    assert not ex.check_centroid_classifier(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _classifier_rejects(fn, hint: str, capsys) -> None:
    assert not ex.check_centroid_classifier(fn)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 14.1 (classify by the nearest centroid): not yet.") and hint in out, out


def test_classifier_checker_names_the_likeliest_mistakes(capsys):
    def raw_means(train, labels, test):  # the likeliest slip: centroids not scaled to length 1
        return (test @ _means(train, labels).T).argmax(-1)

    def nearest_single_vector(train, labels, test):  # the second: 1-nearest-neighbour instead of centroids
        return labels[(test @ train.T).argmax(-1)]

    def raw_sums(train, labels, test):
        sums = torch.stack([train[labels == c].sum(0) for c in range(int(labels.max()) + 1)])
        return (test @ sums.T).argmax(-1)

    def euclid_to_raw_means(train, labels, test):
        return torch.cdist(test, _means(train, labels)).argmin(-1)

    def least_similar(train, labels, test):
        return (test @ F.normalize(_means(train, labels), dim=-1).T).argmin(-1)

    def similarity_matrix(train, labels, test):
        return test @ F.normalize(_means(train, labels), dim=-1).T

    def scores_not_labels(train, labels, test):
        return (test @ F.normalize(_means(train, labels), dim=-1).T).max(-1).values

    _classifier_rejects(raw_means, "not scaled to length 1", capsys)
    _classifier_rejects(nearest_single_vector, "single most similar training vector", capsys)
    _classifier_rejects(raw_sums, "most training vectors", capsys)
    _classifier_rejects(euclid_to_raw_means, "Euclidean", capsys)
    _classifier_rejects(least_similar, "least similar", capsys)
    _classifier_rejects(similarity_matrix, "matrix of similarities", capsys)
    _classifier_rejects(scores_not_labels, "whole numbers", capsys)
    _classifier_rejects(lambda tr, lb, te: torch.zeros(te.shape[0], dtype=torch.long), "labels differ", capsys)
    _classifier_rejects(lambda tr, lb, te: None, "should be a torch.Tensor", capsys)


def test_classifier_checker_reports_a_crash(capsys):
    assert not ex.check_centroid_classifier(lambda tr, lb, te: tr @ te)
    assert "raised" in capsys.readouterr().out


def test_classifier_case_separates_the_mistakes():
    train, labels, test = ex._topic_case()
    assert torch.bincount(labels).tolist() == [3, 5, 8]  # classes of different sizes
    assert not torch.equal(labels, labels.sort().values)  # in shuffled order
    right = ex.reference_centroid_classifier(train, labels, test)
    answers = [right, *ex._classifier_mistakes(train, labels, test).values()]
    for i, a in enumerate(answers):
        for b in answers[i + 1 :]:
            assert not torch.equal(a, b)
    cosines = (test @ F.normalize(_means(train, labels), dim=-1).T).sort(-1, descending=True).values
    assert (cosines[:, 0] - cosines[:, 1]).min() > 0.04  # no near-tie that float rounding could flip


# -------------------------------------------------------------------------------------------- exercise 14.2
LABEL_14_2 = "Exercise 14.2 (search documents by their best chunk)"


def _doc_scores(q, c, d, pool="max", normalise=True):
    """(q, D) document scores by a loop over documents: the slow way a reader might write it."""
    if normalise:
        q, c = F.normalize(q, dim=-1), F.normalize(c, dim=-1)
    sim = q @ c.T
    columns = [getattr(sim[:, d == doc], pool)(dim=-1) for doc in range(int(d.max()) + 1)]
    return torch.stack([col.values if pool == "max" else col for col in columns], dim=-1)


def test_search_checker_accepts_the_reference_and_other_right_answers(capsys):
    assert ex.check_document_search(ex.reference_document_search)

    def loop_over_documents(q, c, d, k):
        return _doc_scores(q, c, d).topk(k, dim=-1)

    def int32_documents(q, c, d, k):
        s, i = ex.reference_document_search(q, c, d, k)
        return s, i.int()

    assert ex.check_document_search(loop_over_documents)
    assert ex.check_document_search(int32_documents)
    assert f"{LABEL_14_2}: correct!" in capsys.readouterr().out


def test_search_checker_says_not_attempted(capsys):
    assert not ex.check_document_search(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _search_rejects(fn, hint: str, capsys) -> None:
    assert not ex.check_document_search(fn)
    out = capsys.readouterr().out
    assert out.startswith(f"{LABEL_14_2}: not yet.") and hint in out, out


def test_search_checker_names_the_likeliest_mistakes(capsys):
    def chunk_top_k(q, c, d, k):  # the likeliest slip: the top k chunks, then their documents
        s, i = (F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T).topk(k, dim=-1)
        return s, d[i]

    def mean_of_chunks(q, c, d, k):  # the second: a document scored by the mean of its chunks' cosines
        return _doc_scores(q, c, d, pool="mean").topk(k, dim=-1)

    def swapped(q, c, d, k):
        s, i = ex.reference_document_search(q, c, d, k)
        return i, s

    def pooled_vector(q, c, d, k):
        member = F.one_hot(d, int(d.max()) + 1).float()
        docs = F.normalize(member.T @ F.normalize(c, dim=-1), dim=-1)
        return (F.normalize(q, dim=-1) @ docs.T).topk(k, dim=-1)

    def dot(q, c, d, k):
        return _doc_scores(q, c, d, normalise=False).topk(k, dim=-1)

    def least(q, c, d, k):
        return _doc_scores(q, c, d).topk(k, dim=-1, largest=False)

    def wrong_scores(q, c, d, k):
        s, i = ex.reference_document_search(q, c, d, k)
        return s * 0.5, i

    def zeros_start(q, c, d, k):  # scatter_reduce into zeros keeps the 0 (include_self=True): negatives vanish
        sim = F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T
        best = torch.zeros(q.shape[0], int(d.max()) + 1).scatter_reduce(1, d.expand(q.shape[0], -1), sim, reduce="amax")
        return best.topk(k, dim=-1)

    _search_rejects(zeros_start, "started from zeros", capsys)
    _search_rejects(chunk_top_k, "can appear twice", capsys)
    _search_rejects(mean_of_chunks, "best chunk's cosine (the maximum)", capsys)
    _search_rejects(swapped, "wrong way round", capsys)
    _search_rejects(pooled_vector, "one averaged vector", capsys)
    _search_rejects(dot, "largest dot products", capsys)
    _search_rejects(least, "least similar", capsys)
    _search_rejects(wrong_scores, "score tensor", capsys)
    _search_rejects(lambda q, c, d, k: ex.reference_document_search(q, c, d, k)[1], "pair", capsys)
    _search_rejects(lambda q, c, d, k: tuple(t.T for t in ex.reference_document_search(q, c, d, k)), "shape", capsys)


def test_search_case_separates_the_mistakes():
    queries, chunks, doc_ids = ex._search_case()
    k = 3
    right = ex.reference_document_search(queries, chunks, doc_ids, k)[1]
    answers = [right, *ex._search_mistakes(queries, chunks, doc_ids, k).values()]
    for i, a in enumerate(answers):
        for b in answers[i + 1 :]:
            assert not torch.equal(a, b)
    best = _doc_scores(queries, chunks, doc_ids).sort(dim=-1, descending=True).values
    assert (best[:, :4].diff(dim=-1).abs() > 0.005).all()  # no near-tie that float rounding could flip


# ------------------------------------------------------------------ the feedback in Chinese, on the mistakes above
def _raw_means(train, labels, test):
    return (test @ _means(train, labels).T).argmax(-1)


def _nearest_single_vector(train, labels, test):
    return labels[(test @ train.T).argmax(-1)]


def _least_similar_class(train, labels, test):
    return (test @ F.normalize(_means(train, labels), dim=-1).T).argmin(-1)


def _chunk_top_k(q, c, d, k):
    s, i = (F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T).topk(k, dim=-1)
    return s, d[i]


def _mean_of_chunks(q, c, d, k):
    return _doc_scores(q, c, d, pool="mean").topk(k, dim=-1)


def _dot(q, c, d, k):
    return _doc_scores(q, c, d, normalise=False).topk(k, dim=-1)


def _zeros_start(q, c, d, k):
    sim = F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T
    best = torch.zeros(q.shape[0], int(d.max()) + 1).scatter_reduce(1, d.expand(q.shape[0], -1), sim, reduce="amax")
    return best.topk(k, dim=-1)


CHECKERS = {
    "14.1": (ex.check_centroid_classifier, ex.reference_centroid_classifier),
    "14.2": (ex.check_document_search, ex.reference_document_search),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_centroid_classifier, _raw_means, "质心没有缩放到长度 1"),
        (ex.check_centroid_classifier, _nearest_single_vector, "最相似的那一个训练向量的标签"),
        (ex.check_centroid_classifier, _least_similar_class, "这些是最不相似的类"),
        (ex.check_document_search, _chunk_top_k, "一个文档可能出现两次"),
        (ex.check_document_search, _mean_of_chunks, "文档的分数是它最佳文本块的余弦（最大值）"),
        (ex.check_document_search, _dot, "长向量会占优势"),
        (ex.check_document_search, _zeros_start, "每个文档的最大值是从 0 开始算的"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
