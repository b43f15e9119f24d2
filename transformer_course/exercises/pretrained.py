"""Exercises of notebook 14 (a pre-trained encoder): their checkers and reference solutions.

14.1 ``check_centroid_classifier(fn)``: ``fn(train_vectors, train_labels, test_vectors)`` classifies unit sentence
     vectors by the nearest class centroid (the mean of a class's vectors, scaled to length 1), by cosine.
14.2 ``check_document_search(fn)``: ``fn(queries, chunks, doc_ids, k)`` returns the scores and numbers of the k
     documents most cosine-similar to each query, a document scoring as its best chunk, best first.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import Exercise, ExerciseMistake, expect, expect_close, expect_tensor, report, tr

CENTROID_CLASSIFIER = Exercise("14.1", "classify by the nearest centroid", "按最近的质心分类")
DOCUMENT_SEARCH = Exercise("14.2", "search documents by their best chunk", "按最佳文本块检索文档")


# ---------------------------------------------------------------------------------------- reference solutions
def reference_centroid_classifier(train_vectors: Tensor, train_labels: Tensor, test_vectors: Tensor) -> Tensor:
    """Reference solution of exercise 14.1.

    train_vectors: (m, d) unit vectors; train_labels: (m,) ints in 0 .. C-1, every class present;
    test_vectors: (t, d) unit vectors. Returns (t,) int64: for each test vector, the class whose centroid (the mean
    of its training vectors, scaled to length 1) has the highest cosine similarity with it.
    """
    num_classes = int(train_labels.max()) + 1
    one_hot = F.one_hot(train_labels.long(), num_classes).to(train_vectors.dtype)  # (m, C)
    centroids = (one_hot.T @ train_vectors) / one_hot.sum(0)[:, None]  # (C, d): the mean of each class
    centroids = F.normalize(centroids, dim=-1)  # length 1, like a sentence vector
    return (test_vectors @ centroids.T).argmax(dim=-1)  # (t,)


def reference_document_search(queries: Tensor, chunks: Tensor, doc_ids: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 14.2.

    queries: (q, d), chunks: (n, d), rows of any length; doc_ids: (n,) ints in 0 .. D-1, the document each chunk
    belongs to (every document has at least one chunk). A document's score for a query is the cosine similarity of
    its best chunk. Returns (scores, documents), both (q, k): the k best documents for each query, best first.
    """
    similarity = F.normalize(queries, dim=-1) @ F.normalize(chunks, dim=-1).T  # (q, n)
    scores, documents = _best_per_document(similarity, doc_ids).topk(k, dim=-1)
    return scores, documents


def _best_per_document(similarity: Tensor, doc_ids: Tensor) -> Tensor:
    """(q, n) chunk scores, (n,) document ids -> (q, D): each document's largest chunk score."""
    best = similarity.new_full((similarity.shape[0], int(doc_ids.max()) + 1), float("-inf"))
    return best.scatter_reduce(1, doc_ids.long().expand_as(similarity), similarity, reduce="amax")


# --------------------------------------------------------------------------------------------- exercise 14.1
def _topic_case() -> tuple[Tensor, Tensor, Tensor]:
    """Three classes of 3, 5 and 8 unit vectors with different spreads, in shuffled order, and 24 test vectors.

    Seed and sizes are chosen so that every mistake in :func:`_classifier_mistakes` gives other labels than the
    right answer and than each other, and the right answer wins by a cosine margin above 0.04 for every test vector.
    """
    g = torch.Generator().manual_seed(12)
    d = 8
    centres = F.normalize(torch.randn(3, d, generator=g), dim=-1)
    vectors, labels = [], []
    for label, (size, spread) in enumerate(zip((3, 5, 8), (0.3, 1.5, 0.7))):
        vectors.append(F.normalize(centres[label] + spread * torch.randn(size, d, generator=g), dim=-1))
        labels += [label] * size
    order = torch.randperm(len(labels), generator=g)
    train_vectors, train_labels = torch.cat(vectors)[order], torch.tensor(labels)[order]
    test_vectors = F.normalize(torch.randn(24, d, generator=g), dim=-1)
    return train_vectors, train_labels, test_vectors


def _classifier_mistakes(train_vectors: Tensor, train_labels: Tensor, test_vectors: Tensor) -> dict[str, Tensor]:
    """The likeliest wrong answers, each with the hint it deserves, in the order they are tried."""
    num_classes = int(train_labels.max()) + 1
    means = torch.stack([train_vectors[train_labels == c].mean(0) for c in range(num_classes)])  # (C, d)
    sums = torch.stack([train_vectors[train_labels == c].sum(0) for c in range(num_classes)])
    return {
        tr(
            "the centroids were not scaled to length 1, so a class whose vectors agree (a long mean) wins too often: "
            "normalise each class mean before taking the dot product",
            "质心没有缩放到长度 1，于是类内向量方向彼此接近的类（它的均值较长）胜出的次数会偏多："
            "做点积之前要先把每个类的均值归一化",
        ): (test_vectors @ means.T).argmax(-1),
        tr(
            "that is the label of the single most similar training vector; average each class's vectors into one "
            "centroid first",
            "这是最相似的那一个训练向量的标签；要先把每个类的向量平均成一个质心",
        ): train_labels[(test_vectors @ train_vectors.T).argmax(-1)],
        tr(
            "the sums of the classes were compared without normalising, so the class with the most training vectors "
            "wins too often: take the mean and scale it to length 1",
            "比较的是各类向量之和，而且没有归一化，于是训练向量最多的类胜出的次数会偏多：要取均值，并把它缩放到长度 1",
        ): (test_vectors @ sums.T).argmax(-1),
        tr(
            "that is the nearest raw class mean by Euclidean distance; scale the means to length 1 and compare by "
            "cosine",
            "这是按欧氏距离找到的最近的原始类均值；要把均值缩放到长度 1，再按余弦比较",
        ): torch.cdist(test_vectors, means).argmin(-1),
        tr(
            "these are the least similar classes: take the largest cosine (argmax), not the smallest",
            "这些是最不相似的类：要取余弦最大的（argmax），而不是最小的",
        ): (test_vectors @ F.normalize(means, dim=-1).T).argmin(-1),
    }


def _check_classifier(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    train_vectors, train_labels, test_vectors = _topic_case()
    out = fn(train_vectors.clone(), train_labels.clone(), test_vectors.clone())
    shape = (test_vectors.shape[0],)
    if isinstance(out, Tensor) and out.dim() == 2 and out.shape[0] == shape[0]:
        raise ExerciseMistake(
            tr(
                f"the result has shape {tuple(out.shape)}: that looks like a matrix of similarities; return one label "
                f"per test vector, shape {shape} (the argmax over the classes)",
                f"结果的形状是 {tuple(out.shape)}：这看起来像一个相似度矩阵；要为每个测试向量返回一个标签，"
                f"形状为 {shape}（在类上取 argmax）。",
            )
        )
    expect_tensor(
        out, tr("the result", "结果"), shape, tr("= (t,), one label per test vector", "= (t,)，每个测试向量一个标签")
    )
    expect(
        not out.is_floating_point() or bool((out == out.round()).all()),
        tr(
            "the labels should be whole numbers (class indices), not similarities",
            "标签应是整数（类的编号），而不是相似度",
        ),
    )
    labels = out.detach().long()
    expected = reference_centroid_classifier(train_vectors, train_labels, test_vectors)
    if torch.equal(labels, expected):
        return
    for hint, wrong in _classifier_mistakes(train_vectors, train_labels, test_vectors).items():
        if torch.equal(labels, wrong):
            raise ExerciseMistake(hint + tr(".", "。"))
    wrong_count = int((labels != expected).sum())
    raise ExerciseMistake(
        tr(
            f"{wrong_count} of {shape[0]} labels differ from the expected ones: the centroid of class c is the mean "
            "of the training vectors labelled c, scaled to length 1",
            f"{shape[0]} 个标签中有 {wrong_count} 个与正确结果不同：类 c 的质心是标签为 c 的训练向量的均值，"
            "再缩放到长度 1",
        )
    )


def check_centroid_classifier(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 14.1: ``fn(train_vectors (m, d), train_labels (m,), test_vectors (t, d))`` -> (t,) labels."""
    return report(CENTROID_CLASSIFIER, lambda: _check_classifier(fn))


# --------------------------------------------------------------------------------------------- exercise 14.2
def _search_case() -> tuple[Tensor, Tensor, Tensor]:
    """4 queries, 16 chunks of very different lengths in 6 documents of 1 to 5 chunks, in shuffled order.

    Seed and sizes are chosen so that every mistake in :func:`_search_mistakes` gives other documents than the right
    answer and than each other for k = 3 (the tests check this), with no near-tie among the documents' best
    cosines."""
    g = torch.Generator().manual_seed(4)
    doc_ids = torch.tensor([0, 0, 0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 5])[torch.randperm(16, generator=g)]
    chunks = torch.randn(16, 5, generator=g) * torch.linspace(0.2, 5.0, 16)[:, None]
    queries = torch.randn(4, 5, generator=g) * torch.tensor([[1.0], [4.0], [0.3], [2.0]])
    return queries, chunks, doc_ids


def _search_mistakes(queries: Tensor, chunks: Tensor, doc_ids: Tensor, k: int) -> dict[str, Tensor]:
    """The likeliest wrong document lists, each with the hint it deserves, in the order they are tried."""
    num_docs = int(doc_ids.max()) + 1
    member = F.one_hot(doc_ids.long(), num_docs).to(chunks.dtype)  # (n, D)
    cosine = F.normalize(queries, dim=-1) @ F.normalize(chunks, dim=-1).T  # (q, n)
    mean_cosine = (cosine @ member) / member.sum(0)
    mean_vector = F.normalize(member.T @ F.normalize(chunks, dim=-1), dim=-1)  # (D, d): one pooled vector per doc
    best_dot = _best_per_document(queries @ chunks.T, doc_ids)
    return {
        tr(
            "these are the documents of the k best chunks, so a document can appear twice and another is missed: "
            "take each document's best chunk first (its score is the largest cosine among its chunks), then the top "
            "k documents",
            "这些是 k 个最佳文本块所属的文档，所以一个文档可能出现两次，另一个却被漏掉：要先取每个文档的最佳文本块"
            "（文档的分数是它的文本块中最大的余弦），再取前 k 个文档",
        ): doc_ids[cosine.topk(k, dim=-1).indices],
        tr(
            "that ranks the documents by the mean cosine of their chunks, so one long document with many weak chunks "
            "hides its one good chunk: a document's score is its best chunk's cosine (the maximum)",
            "这是按文本块的平均余弦给文档排序，于是一篇有很多弱文本块的长文档会埋没它唯一的好文本块："
            "文档的分数是它最佳文本块的余弦（最大值）。",
        ): mean_cosine.topk(k, dim=-1).indices,
        tr(
            "that ranks the documents by one averaged vector each; score every chunk by itself and keep each "
            "document's best chunk",
            "这是用每个文档的一个平均向量给文档排序；要给每个文本块单独打分，并保留每个文档的最佳文本块",
        ): (F.normalize(queries, dim=-1) @ mean_vector.T).topk(k, dim=-1).indices,
        tr(
            "these rank by the largest dot products: long vectors win. Normalise queries and chunks to length 1 "
            "first, so the dot product is the cosine",
            "这是按最大的点积排序：长向量会占优势。要先把查询和文本块归一化到长度 1，这样点积才是余弦",
        ): best_dot.topk(k, dim=-1).indices,
        tr(
            "these are the least similar documents: sort from the largest score down",
            "这些是最不相似的文档：要按分数从大到小排序",
        ): _best_per_document(cosine, doc_ids).topk(k, dim=-1, largest=False).indices,
    }


def _check_search(fn: Callable[[Tensor, Tensor, Tensor, int], tuple[Tensor, Tensor]]) -> None:
    queries, chunks, doc_ids = _search_case()
    # k = 3 first: there every likely mistake gives other documents; k = 6 ranks every document, including those
    # whose best cosine is negative
    for k in (3, 1, 6):
        out = fn(queries.clone(), chunks.clone(), doc_ids.clone(), k)
        got = type(out).__name__
        expect(
            isinstance(out, tuple) and len(out) == 2,
            tr(f"return a pair (scores, documents), got {got}", f"应返回一对 (scores, documents)，得到的是 {got}"),
        )
        scores, documents = out
        shape = (queries.shape[0], k)
        expect(
            isinstance(scores, Tensor) and isinstance(documents, Tensor),
            tr(
                f"scores and documents should both be torch.Tensors, got {type(scores).__name__} and "
                f"{type(documents).__name__}",
                f"scores 和 documents 都应是 torch.Tensor，得到的是 {type(scores).__name__} 和 "
                f"{type(documents).__name__}",
            ),
        )
        expected_scores, expected_documents = reference_document_search(queries, chunks, doc_ids, k)
        if (
            tuple(scores.shape) == shape
            and not scores.is_floating_point()
            and documents.is_floating_point()
            and torch.equal(scores.long(), expected_documents)
        ):
            raise ExerciseMistake(
                tr(
                    "the pair is the wrong way round: return (scores, documents), the cosines first and the document "
                    "numbers second, as topk returns (values, indices)",
                    "这一对的顺序反了：要返回 (scores, documents)，余弦在前、文档编号在后，"
                    "就像 topk 返回 (values, indices) 那样",
                )
            )
        expect(
            tuple(documents.shape) == shape,
            tr(
                f"for k={k} documents have shape {tuple(documents.shape)}, expected {shape} = (queries, k)",
                f"k={k} 时 documents 的形状是 {tuple(documents.shape)}，应为 {shape} = (queries, k)。",
            ),
        )
        started_at_zero = (expected_scores < 0) & (scores.detach() == 0) if scores.shape == shape else None
        if started_at_zero is not None and bool(started_at_zero.any()):
            raise ExerciseMistake(
                tr(
                    f"for k={k} a document whose best cosine is negative got the score 0: the per-document maximum "
                    "started from zeros (scatter_reduce keeps the starting value unless include_self=False); start it "
                    "from -inf instead",
                    f"k={k} 时，一个最佳余弦为负的文档得到了分数 0：每个文档的最大值是从 0 开始算的"
                    "（除非 include_self=False，否则 scatter_reduce 会把起始值也算进去）；要改为从 -inf 开始",
                )
            )
        if not torch.equal(documents.long(), expected_documents):
            for hint, wrong in _search_mistakes(queries, chunks, doc_ids, k).items():
                if torch.equal(documents.long(), wrong):
                    raise ExerciseMistake(hint)
            raise ExerciseMistake(
                tr(
                    f"for k={k} the documents differ: expected {expected_documents.tolist()}",
                    f"k={k} 时文档不对：应为 {expected_documents.tolist()}",
                )
            )
        expect_close(
            scores,
            expected_scores,
            tr(
                f"the score tensor for k={k} (each document's best cosine, best first)",
                f"k={k} 时的分数张量（每个文档的最佳余弦，从高到低）",
            ),
        )


def check_document_search(fn: Callable[[Tensor, Tensor, Tensor, int], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 14.2: ``fn(queries (q, d), chunks (n, d), doc_ids (n,), k)`` -> (scores, documents), both (q, k)."""
    return report(DOCUMENT_SEARCH, lambda: _check_search(fn))
