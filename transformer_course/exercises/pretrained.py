"""Exercises of notebook 14 (a pre-trained encoder): their checkers and reference solutions.

14.1 ``check_centroid_classifier(fn)``: ``fn(train_vectors, train_labels, test_vectors)`` classifies unit sentence
     vectors by the nearest class centroid (the mean of a class's vectors, scaled to length 1), by cosine.
14.2 ``check_nearest_neighbours(fn)``: ``fn(queries, collection, k)`` returns the scores and indices of the k rows of
     ``collection`` most cosine-similar to each query, best first.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


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


def reference_nearest_neighbours(queries: Tensor, collection: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 14.2.

    queries: (q, d), collection: (n, d), any lengths. Returns (scores, indices), both (q, k): the cosine
    similarities of the k most similar collection rows to each query and their row numbers, best first.
    """
    similarity = F.normalize(queries, dim=-1) @ F.normalize(collection, dim=-1).T  # (q, n)
    scores, indices = similarity.topk(k, dim=-1)
    return scores, indices


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
        "the centroids were not scaled to length 1, so a class whose vectors agree (a long mean) wins too often: "
        "normalise each class mean before taking the dot product": (test_vectors @ means.T).argmax(-1),
        "that is the label of the single most similar training vector; average each class's vectors into one "
        "centroid first": train_labels[(test_vectors @ train_vectors.T).argmax(-1)],
        "the sums of the classes were compared without normalising, so the class with the most training vectors "
        "wins too often: take the mean and scale it to length 1": (test_vectors @ sums.T).argmax(-1),
        "that is the nearest raw class mean by Euclidean distance; scale the means to length 1 and compare by "
        "cosine": torch.cdist(test_vectors, means).argmin(-1),
        "these are the least similar classes: take the largest cosine (argmax), not the smallest": (
            test_vectors @ F.normalize(means, dim=-1).T
        ).argmin(-1),
    }


def _check_classifier(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    train_vectors, train_labels, test_vectors = _topic_case()
    out = fn(train_vectors.clone(), train_labels.clone(), test_vectors.clone())
    shape = (test_vectors.shape[0],)
    if isinstance(out, Tensor) and out.dim() == 2 and out.shape[0] == shape[0]:
        raise ExerciseMistake(
            f"the result has shape {tuple(out.shape)}: that looks like a matrix of similarities; return one label "
            f"per test vector, shape {shape} (the argmax over the classes)"
        )
    expect_tensor(out, "the result", shape, "= (t,), one label per test vector")
    expect(
        not out.is_floating_point() or bool((out == out.round()).all()),
        "the labels should be whole numbers (class indices), not similarities",
    )
    labels = out.detach().long()
    expected = reference_centroid_classifier(train_vectors, train_labels, test_vectors)
    if torch.equal(labels, expected):
        return
    for hint, wrong in _classifier_mistakes(train_vectors, train_labels, test_vectors).items():
        if torch.equal(labels, wrong):
            raise ExerciseMistake(hint + ".")
    wrong_count = int((labels != expected).sum())
    raise ExerciseMistake(
        f"{wrong_count} of {shape[0]} labels differ from the expected ones: the centroid of class c is the mean of "
        "the training vectors labelled c, scaled to length 1"
    )


def check_centroid_classifier(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 14.1: ``fn(train_vectors (m, d), train_labels (m,), test_vectors (t, d))`` -> (t,) labels."""
    return report("Exercise 14.1 (classify by the nearest centroid)", lambda: _check_classifier(fn))


# --------------------------------------------------------------------------------------------- exercise 14.2
def _search_case() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(3)
    collection = torch.randn(12, 5, generator=g)
    collection = collection * torch.linspace(0.2, 5.0, 12)[:, None]  # very different lengths
    queries = torch.randn(3, 5, generator=g) * torch.tensor([[1.0], [4.0], [0.3]])
    return queries, collection


def _check_search(fn: Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]]) -> None:
    queries, collection = _search_case()
    for k in (1, 4):
        out = fn(queries.clone(), collection.clone(), k)
        expect(
            isinstance(out, tuple) and len(out) == 2,
            f"return a pair (scores, indices), got {type(out).__name__}",
        )
        scores, indices = out
        expect(isinstance(indices, Tensor), f"indices should be a torch.Tensor, got {type(indices).__name__}")
        shape = (queries.shape[0], k)
        expect(tuple(indices.shape) == shape, f"for k={k} indices have shape {tuple(indices.shape)}, expected {shape}")
        expected_scores, expected_indices = reference_nearest_neighbours(queries, collection, k)
        if not torch.equal(indices.long(), expected_indices):
            dot = (queries @ collection.T).topk(k, dim=-1).indices
            far = (F.normalize(queries, dim=-1) @ F.normalize(collection, dim=-1).T).topk(k, largest=False).indices
            euclid = torch.cdist(queries, collection).topk(k, largest=False).indices
            if torch.equal(indices.long(), dot):
                raise ExerciseMistake(
                    "these are the largest dot products: long vectors win. Normalise queries and collection rows "
                    "to length 1 first, so the dot product is the cosine."
                )
            if torch.equal(indices.long(), far):
                raise ExerciseMistake("these are the least similar rows: sort by similarity from the largest down.")
            if torch.equal(indices.long(), euclid):
                raise ExerciseMistake(
                    "these are the nearest rows by Euclidean distance on unnormalised vectors; use the cosine."
                )
            raise ExerciseMistake(f"for k={k} the indices differ: expected {expected_indices.tolist()}")
        if isinstance(scores, Tensor) and scores.shape == expected_scores.shape:
            unit_collection = (queries @ F.normalize(collection, dim=-1).T).gather(-1, expected_indices)
            if torch.allclose(scores.detach().double(), unit_collection.double(), atol=1e-5, rtol=1e-4):
                raise ExerciseMistake(
                    "the rows are right, but the scores still carry each query's length: normalise the queries too, "
                    "so each score is a cosine between -1 and 1"
                )
        expect_close(scores, expected_scores, f"the score tensor for k={k} (cosine similarities, best first)")


def check_nearest_neighbours(fn: Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 14.2: ``fn(queries (q, d), collection (n, d), k)`` -> (scores, indices), both (q, k), best first."""
    return report("Exercise 14.2 (nearest neighbours by cosine)", lambda: _check_search(fn))
