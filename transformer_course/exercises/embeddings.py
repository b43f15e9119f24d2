"""Exercises of notebook 02 (embeddings and word2vec): their checkers and reference solutions.

2.1 ``check_cosine_matrix(fn)``: ``fn(vectors)`` returns the cosine similarity of every pair of rows.
2.2 ``check_sgns_center_gradient(fn)``: ``fn(v_center, u_context, u_negatives)`` returns, by hand, the gradient of
    each pair's skip-gram negative-sampling loss with respect to its centre word's input vector.
2.3 ``check_nearest_words(fn)``: ``fn(vectors, words, query, k)`` returns the k words closest to ``query``
    by cosine similarity, most similar first, the query itself left out.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_cosine_matrix(vectors: Tensor) -> Tensor:
    """Reference solution of exercise 2.1. vectors: (n, dim) -> (n, n), entry (i, j) = cos(vectors[i], vectors[j])."""
    unit = vectors / vectors.norm(dim=1, keepdim=True)  # each row scaled to length 1
    return unit @ unit.T


def reference_sgns_center_gradient(v_center: Tensor, u_context: Tensor, u_negatives: Tensor) -> Tensor:
    """Reference solution of exercise 2.2: the gradient of each pair's negative-sampling loss for its v_c.

    v_center: (batch, dim) input vectors of the centre words, u_context: (batch, dim) output vectors of the
    true context words, u_negatives: (batch, k, dim) output vectors of the noise words. Returns (batch, dim):
    row b is the gradient of l_b = -log sigmoid(u_o . v_c) - sum_n log sigmoid(-u_n . v_c) for v_c = v_center[b],
    (sigmoid(u_o . v_c) - 1) u_o + sum_n sigmoid(u_n . v_c) u_n.
    """
    positive = (u_context * v_center).sum(-1)  # (batch,): the true pair's score
    negative = (u_negatives @ v_center.unsqueeze(-1)).squeeze(-1)  # (batch, k): the noise words' scores
    toward_context = (torch.sigmoid(positive) - 1).unsqueeze(-1) * u_context  # d/ds -log sigmoid(s) = sigmoid(s) - 1
    away_from_noise = (torch.sigmoid(negative).unsqueeze(-1) * u_negatives).sum(1)  # d/ds -log sigmoid(-s) = sigmoid(s)
    return toward_context + away_from_noise


def _pair_losses(v_center: Tensor, u_context: Tensor, u_negatives: Tensor) -> Tensor:
    """(batch,): each pair's negative-sampling loss, for autograd to differentiate."""
    positive = (u_context * v_center).sum(-1)
    negative = (u_negatives @ v_center.unsqueeze(-1)).squeeze(-1)
    return -F.logsigmoid(positive) - F.logsigmoid(-negative).sum(-1)


def reference_nearest_words(vectors: Tensor, words: Sequence[str], query: str, k: int) -> list[str]:
    """Reference solution of exercise 2.3. vectors: (len(words), dim). Returns k words, most similar first."""
    i = list(words).index(query)
    similarity = reference_cosine_matrix(vectors)[i].clone()
    similarity[i] = -float("inf")  # a word is always closest to itself: leave it out
    return [words[j] for j in similarity.topk(k).indices.tolist()]


# --------------------------------------------------------------------------------------------- exercise 2.1
def _check_cosine_matrix(fn: Callable[[Tensor], Tensor]) -> None:
    g = torch.Generator().manual_seed(3)
    # rows of very different lengths, and more rows than columns, so normalising the wrong axis shows
    vectors = torch.randn(6, 4, generator=g, dtype=torch.float64) * torch.tensor([[0.5], [1], [2], [4], [8], [3]])
    out = fn(vectors.clone())
    expected = reference_cosine_matrix(vectors)
    expect_tensor(out, "the result", (6, 6), "= (n, n): one similarity for every pair of rows")
    o = out.detach().double()
    if torch.allclose(o, vectors @ vectors.T, atol=1e-6):
        raise ExerciseMistake("these are dot products: divide each row by its length first (cosine ignores length).")
    by_column = vectors / vectors.norm(dim=0, keepdim=True)
    if torch.allclose(o, by_column @ by_column.T, atol=1e-6):
        raise ExerciseMistake("you normalised the columns: each row (one word) must have length 1, norm over dim=1.")
    expect(
        torch.allclose(o.diagonal(), torch.ones(6, dtype=o.dtype), atol=1e-5),
        "every vector has cosine 1 with itself: the diagonal should be all ones.",
    )
    expect_close(out, expected, "the cosine matrix")


def check_cosine_matrix(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 2.1: ``fn(vectors)`` (n, dim) must return the (n, n) matrix of cosine similarities."""
    return report("Exercise 2.1 (cosine similarity matrix)", lambda: _check_cosine_matrix(fn))


# --------------------------------------------------------------------------------------------- exercise 2.2
def _check_sgns_center_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    g = torch.Generator().manual_seed(4)
    v = torch.randn(5, 6, generator=g, dtype=torch.float64)
    u_o = torch.randn(5, 6, generator=g, dtype=torch.float64)
    u_n = torch.randn(5, 3, 6, generator=g, dtype=torch.float64)
    out = fn(v.clone(), u_o.clone(), u_n.clone())
    expect_tensor(out, "the gradient", (5, 6), "= (batch, dim): one gradient for each pair's v_c")
    o = out.detach().double()
    v_leaf = v.clone().requires_grad_(True)
    _pair_losses(v_leaf, u_o, u_n).sum().backward()  # pairs are independent: row b gets only l_b's gradient
    expected = v_leaf.grad
    pos = (u_o * v).sum(-1, keepdim=True)  # (batch, 1)
    neg = u_n @ v.unsqueeze(-1)  # (batch, k, 1)
    towards, away = (torch.sigmoid(pos) - 1) * u_o, (torch.sigmoid(neg) * u_n).sum(1)
    hints = [
        (
            (1 - torch.sigmoid(pos)) * u_o + away,
            "the true context word's term has the wrong sign: d/ds [-log sigmoid(s)] = sigmoid(s) - 1, which is "
            "negative, so a step against the gradient moves v_c towards u_o.",
        ),
        (
            towards + ((torch.sigmoid(neg) - 1) * u_n).sum(1),  # equal to towards - sum sigmoid(-s_n) u_n
            "the noise words' term: d/ds [-log sigmoid(-s)] = +sigmoid(s), not sigmoid(s) - 1 = -sigmoid(-s) "
            "(their loss has the minus sign inside the sigmoid).",
        ),
        (
            towards + ((1 - torch.sigmoid(neg)) * u_n).sum(1),  # equal to towards + sum sigmoid(-s_n) u_n
            "the noise words' term: d/ds [-log sigmoid(-s)] = 1 - sigmoid(-s) = sigmoid(s); 1 - sigmoid(s) drops "
            "the minus that differentiating -s (the inner function) brings.",
        ),
        (towards, "add the noise words' terms, sigmoid(u_n . v_c) u_n, one for each of the k noise words."),
        (
            towards - away,
            "the noise words' terms are added, not subtracted: their loss -log sigmoid(-s) grows with s = u_n . v_c, "
            "so its gradient +sigmoid(s) u_n points towards u_n (a step against it moves v_c away from the noise).",
        ),
        (
            towards + (torch.sigmoid(neg) * u_n).mean(1),
            "sum the noise words' terms over the k noise words, do not average.",
        ),
        (
            expected / 5,
            "return each pair's own gradient, not the gradient of the batch mean: do not divide by the batch size.",
        ),
        (-expected, "the sign is flipped everywhere: that is the direction a step moves v_c, not the gradient."),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-8):
            raise ExerciseMistake(hint)
    expect_close(out, expected, "the gradient", atol=1e-8, rtol=1e-6)


def check_sgns_center_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 2.2: ``fn(v_center, u_context, u_negatives)`` must return each pair's loss gradient for v_c."""
    return report("Exercise 2.2 (the gradient for the centre word)", lambda: _check_sgns_center_gradient(fn))


# --------------------------------------------------------------------------------------------- exercise 2.3
def _nearest_case() -> tuple[Tensor, list[str]]:
    """Long vectors point away from the query, so ranking by dot product gives a different answer."""
    words = ["cat", "dog", "kitten", "car", "truck", "puppy", "giant"]
    vectors = torch.tensor(
        [
            [1.0, 0.1, 0.0],  # cat
            [0.8, 0.5, 0.0],  # dog
            [0.9, 0.2, 0.1],  # kitten
            [0.0, 1.0, 0.3],  # car
            [0.1, 0.9, 0.4],  # truck
            [0.7, 0.6, 0.1],  # puppy
            [9.0, 9.0, 9.0],  # giant: a long vector, far in angle from "cat"
        ]
    )
    return vectors, words


def _check_nearest_words(fn: Callable[[Tensor, Sequence[str], str, int], list[str]]) -> None:
    vectors, words = _nearest_case()
    for query, k in (("cat", 3), ("truck", 2), ("dog", 4)):
        got = fn(vectors.clone(), list(words), query, k)
        want = reference_nearest_words(vectors, words, query, k)
        expect(isinstance(got, (list, tuple)), f"return a list of words, got {type(got).__name__}")
        got = list(got)
        expect(all(isinstance(w, str) for w in got), "return the words themselves (strings), not their indices")
        if query in got:
            raise ExerciseMistake(f"{query!r} is in its own neighbour list: leave the query word out.")
        expect(len(got) == k, f"asked for k={k} neighbours of {query!r}, got {len(got)}")
        if got == want:
            continue
        i = words.index(query)
        dots = vectors @ vectors[i]
        dots[i] = -float("inf")
        if got == [words[j] for j in dots.topk(k).indices.tolist()]:
            raise ExerciseMistake("rank by cosine similarity, not by dot product: long vectors win dot products.")
        if sorted(got) == sorted(want):
            raise ExerciseMistake(f"right words for {query!r}, wrong order: most similar first.")
        raise ExerciseMistake(f"the {k} nearest words to {query!r} should be {want}, got {got}")


def check_nearest_words(fn: Callable[[Tensor, Sequence[str], str, int], list[str]]) -> bool:
    """Exercise 2.3: ``fn(vectors, words, query, k)`` must return the k nearest words by cosine, query excluded."""
    return report("Exercise 2.3 (nearest neighbours)", lambda: _check_nearest_words(fn))
