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

from ._core import Exercise, ExerciseMistake, expect, expect_close, expect_tensor, report, tr

COSINE_MATRIX = Exercise("2.1", "cosine similarity matrix", "余弦相似度矩阵")
SGNS_CENTER_GRADIENT = Exercise("2.2", "the gradient for the centre word", "中心词的梯度")
NEAREST_WORDS = Exercise("2.3", "nearest neighbours", "最近邻")


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
    expect_tensor(
        out,
        tr("the result", "结果"),
        (6, 6),
        tr("= (n, n): one similarity for every pair of rows", "= (n, n)：每一对行一个相似度"),
    )
    o = out.detach().double()
    if torch.allclose(o, vectors @ vectors.T, atol=1e-6):
        raise ExerciseMistake(
            tr(
                "these are dot products: divide each row by its length first (cosine ignores length).",
                "你算出的是点积。要先把每一行除以它的长度，因为余弦与长度无关。",
            )
        )
    by_column = vectors / vectors.norm(dim=0, keepdim=True)
    if torch.allclose(o, by_column @ by_column.T, atol=1e-6):
        raise ExerciseMistake(
            tr(
                "you normalised the columns: each row (one word) must have length 1, norm over dim=1.",
                "你归一化的是列。应当让每一行（一个词）的长度为 1，即在 dim=1 上求范数。",
            )
        )
    expect(
        torch.allclose(o.diagonal(), torch.ones(6, dtype=o.dtype), atol=1e-5),
        tr(
            "every vector has cosine 1 with itself: the diagonal should be all ones.",
            "每个向量与它自己的余弦都是 1：对角线应该全是 1。",
        ),
    )
    expect_close(out, expected, tr("the cosine matrix", "余弦矩阵"))


def check_cosine_matrix(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 2.1: ``fn(vectors)`` (n, dim) must return the (n, n) matrix of cosine similarities."""
    return report(COSINE_MATRIX, lambda: _check_cosine_matrix(fn))


# --------------------------------------------------------------------------------------------- exercise 2.2
def _check_sgns_center_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    g = torch.Generator().manual_seed(4)
    v = torch.randn(5, 6, generator=g, dtype=torch.float64)
    u_o = torch.randn(5, 6, generator=g, dtype=torch.float64)
    u_n = torch.randn(5, 3, 6, generator=g, dtype=torch.float64)
    out = fn(v.clone(), u_o.clone(), u_n.clone())
    expect_tensor(
        out,
        tr("the gradient", "梯度"),
        (5, 6),
        tr("= (batch, dim): one gradient for each pair's v_c", "= (batch, dim)：每个词对的 v_c 一个梯度"),
    )
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
            tr(
                "the true context word's term has the wrong sign: d/ds [-log sigmoid(s)] = sigmoid(s) - 1, which is "
                "negative, so a step against the gradient moves v_c towards u_o.",
                "真实上下文词那一项的符号反了：d/ds [-log sigmoid(s)] = sigmoid(s) - 1，它是负的，"
                "所以沿梯度的反方向走一步会让 v_c 靠近 u_o。",
            ),
        ),
        (
            -torch.sigmoid(pos) * u_o + ((1 - torch.sigmoid(neg)) * u_n).sum(1),
            tr(
                "you swapped sigmoid(s) and 1 - sigmoid(s): the true context word's factor is sigmoid(s_o) - 1 "
                "= -(1 - sigmoid(s_o)), each noise word's is +sigmoid(s_i). Differentiate -log sigmoid(s) and "
                "-log sigmoid(-s) again with sigmoid'(s) = sigmoid(s) (1 - sigmoid(s)).",
                "你把 sigmoid(s) 和 1 - sigmoid(s) 用反了：真实上下文词的系数是 "
                "sigmoid(s_o) - 1 = -(1 - sigmoid(s_o))，每个噪声词的系数是 +sigmoid(s_i)。"
                "请用 sigmoid'(s) = sigmoid(s) (1 - sigmoid(s)) 重新对 -log sigmoid(s) 和 -log sigmoid(-s) 求导。",
            ),
        ),
        (
            torch.sigmoid(pos) * u_o + away,
            tr(
                "the true context word's factor is sigmoid(s_o) - 1, not sigmoid(s_o): the -1 is missing "
                "(d/ds [-log sigmoid(s)] = sigmoid(s) - 1).",
                "真实上下文词的系数是 sigmoid(s_o) - 1，而不是 sigmoid(s_o)：你漏掉了减 1"
                "（d/ds [-log sigmoid(s)] = sigmoid(s) - 1）。",
            ),
        ),
        (
            -torch.sigmoid(pos) * u_o + away,
            tr(
                "the true context word's factor is d/ds [-log sigmoid(s)] = -(1 - sigmoid(s)) = sigmoid(s) - 1, not "
                "-sigmoid(s): sigmoid'(s) / sigmoid(s) = 1 - sigmoid(s).",
                "真实上下文词的系数是 d/ds [-log sigmoid(s)] = -(1 - sigmoid(s)) = sigmoid(s) - 1，而不是 "
                "-sigmoid(s)：sigmoid'(s) / sigmoid(s) = 1 - sigmoid(s)。",
            ),
        ),
        (
            towards + ((torch.sigmoid(neg) - 1) * u_n).sum(1),  # equal to towards - sum sigmoid(-s_n) u_n
            tr(
                "the noise words' term: d/ds [-log sigmoid(-s)] = +sigmoid(s), not sigmoid(s) - 1 = -sigmoid(-s) "
                "(their loss has the minus sign inside the sigmoid).",
                "噪声词那一项：d/ds [-log sigmoid(-s)] = +sigmoid(s)，而不是 sigmoid(s) - 1 = -sigmoid(-s)"
                "（噪声词的损失在 sigmoid 里面带负号）。",
            ),
        ),
        (
            towards + ((1 - torch.sigmoid(neg)) * u_n).sum(1),  # equal to towards + sum sigmoid(-s_n) u_n
            tr(
                "the noise words' term: d/ds [-log sigmoid(-s)] = 1 - sigmoid(-s) = sigmoid(s); 1 - sigmoid(s) drops "
                "the minus that differentiating -s (the inner function) brings.",
                "噪声词那一项：d/ds [-log sigmoid(-s)] = 1 - sigmoid(-s) = sigmoid(s)；1 - sigmoid(s) "
                "漏掉了对 -s（内层函数）求导带来的负号。",
            ),
        ),
        (
            towards,
            tr(
                "add the noise words' terms, sigmoid(u_n . v_c) u_n, one for each of the k noise words.",
                "要加上噪声词的项 sigmoid(u_n . v_c) u_n，k 个噪声词每个一项。",
            ),
        ),
        (
            towards - away,
            tr(
                "the noise words' terms should be added, not subtracted: their loss -log sigmoid(-s) grows with "
                "s = u_n . v_c, so its gradient +sigmoid(s) u_n points towards u_n (a step against it moves v_c away "
                "from the noise).",
                "噪声词的项应该加上，而不是减去：它们的损失 -log sigmoid(-s) 随 s = u_n . v_c 增大而增大，"
                "所以它的梯度 +sigmoid(s) u_n 指向 u_n（沿它的反方向走一步会让 v_c 远离噪声词）。",
            ),
        ),
        (
            towards + (torch.sigmoid(neg) * u_n).mean(1),
            tr(
                "sum the noise words' terms over the k noise words, do not average.",
                "要对 k 个噪声词的项求和，而不是求平均。",
            ),
        ),
        (
            expected / 5,
            tr(
                "return each pair's own gradient, not the gradient of the batch mean: do not divide by the batch size.",
                "要返回每个词对自己的梯度，而不是批次平均损失的梯度：不要除以批次大小。",
            ),
        ),
        (
            expected.mean(0, keepdim=True).expand_as(expected),
            tr(
                "every row holds the same gradient, the batch's average: row b must be pair b's own gradient.",
                "每一行都是同一个梯度，即整个批次的平均：第 b 行应是第 b 个词对自己的梯度。",
            ),
        ),
        (
            -expected,
            tr(
                "the sign is flipped everywhere: that is the direction a step moves v_c, not the gradient.",
                "所有符号都反了：你算出的是一次更新让 v_c 移动的方向（负梯度），而不是梯度本身。",
            ),
        ),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-8):
            raise ExerciseMistake(hint)
    expect_close(out, expected, tr("the gradient", "梯度"), atol=1e-8, rtol=1e-6)


def check_sgns_center_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 2.2: ``fn(v_center, u_context, u_negatives)`` must return each pair's loss gradient for v_c."""
    return report(SGNS_CENTER_GRADIENT, lambda: _check_sgns_center_gradient(fn))


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
        type_name = type(got).__name__
        expect(
            isinstance(got, (list, tuple)),
            tr(f"return a list of words, got {type_name}", f"应返回词的列表，而你返回的是 {type_name}"),
        )
        got = list(got)
        expect(
            all(isinstance(w, str) for w in got),
            tr(
                "return the words themselves (strings), not their indices", "要返回词本身（字符串），而不是它们的索引。"
            ),
        )
        if query in got:
            raise ExerciseMistake(
                tr(
                    f"{query!r} is in its own neighbour list: leave the query word out.",
                    f"{query!r} 出现在了它自己的近邻列表里：要把查询词本身排除在外。",
                )
            )
        expect(
            len(got) == k,
            tr(
                f"asked for k={k} neighbours of {query!r}, got {len(got)}",
                f"应返回 {query!r} 的 k={k} 个近邻，而你返回了 {len(got)} 个",
            ),
        )
        if got == want:
            continue
        i = words.index(query)
        dots = vectors @ vectors[i]
        dots[i] = -float("inf")
        if got == [words[j] for j in dots.topk(k).indices.tolist()]:
            raise ExerciseMistake(
                tr(
                    "rank by cosine similarity, not by dot product: long vectors win dot products.",
                    "要按余弦相似度排序，而不是按点积：按点积比较，长向量总是占便宜。",
                )
            )
        cosines = torch.nn.functional.cosine_similarity(vectors, vectors[i : i + 1], dim=-1)
        cosines[i] = float("inf")  # never among the least similar
        least = [words[j] for j in cosines.topk(k, largest=False).indices.tolist()]
        if sorted(got) == sorted(least):
            raise ExerciseMistake(
                tr(
                    f"these are the {k} least similar words to {query!r}: sort by similarity from highest to lowest "
                    "(topk, or sort(descending=True)).",
                    f"这是与 {query!r} 最不相似的 {k} 个词：要按相似度从高到低排序"
                    "（用 topk，或 sort(descending=True)）。",
                )
            )
        if sorted(got) == sorted(want):
            raise ExerciseMistake(
                tr(
                    f"right words for {query!r}, wrong order: most similar first.",
                    f"{query!r} 的近邻词对了，但顺序不对：最相似的要排在最前面。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"the {k} nearest words to {query!r} should be {want}, got {got}",
                f"离 {query!r} 最近的 {k} 个词应为 {want}，而你返回的是 {got}",
            )
        )


def check_nearest_words(fn: Callable[[Tensor, Sequence[str], str, int], list[str]]) -> bool:
    """Exercise 2.3: ``fn(vectors, words, query, k)`` must return the k nearest words by cosine, query excluded."""
    return report(NEAREST_WORDS, lambda: _check_nearest_words(fn))
