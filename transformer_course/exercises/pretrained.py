"""Exercises of notebook 14 (a pre-trained encoder): their checkers and reference solutions.

1. ``check_sentence_embedding(fn)``: ``fn(token_states, attention_mask)`` turns contextual token vectors into one
   unit-length vector per sentence (mean over the real tokens, then L2 normalisation).
2. ``check_nearest_neighbours(fn)``: ``fn(queries, collection, k)`` returns the scores and indices of the k rows of
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
def reference_sentence_embedding(token_states: Tensor, attention_mask: Tensor) -> Tensor:
    """Reference solution of exercise 1.

    token_states: (batch, len, d); attention_mask: (batch, len), 1 at real tokens, 0 at padding.
    Returns (batch, d): the mean of each sentence's real token vectors, scaled to length 1.
    """
    mask = attention_mask.to(token_states.dtype).unsqueeze(-1)  # (batch, len, 1)
    mean = (token_states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (batch, d)
    return mean / mean.norm(dim=-1, keepdim=True).clamp(min=1e-12)


def reference_nearest_neighbours(queries: Tensor, collection: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 2.

    queries: (q, d), collection: (n, d), any lengths. Returns (scores, indices), both (q, k): the cosine
    similarities of the k most similar collection rows to each query and their row numbers, best first.
    """
    similarity = F.normalize(queries, dim=-1) @ F.normalize(collection, dim=-1).T  # (q, n)
    scores, indices = similarity.topk(k, dim=-1)
    return scores, indices


# ------------------------------------------------------------------------------------------------ exercise 1
def _pooling_case(seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    batch, length, d = 4, 7, 6
    states = torch.randn(batch, length, d, generator=g) + 0.5  # an offset, so that no two poolings agree by chance
    lengths = torch.tensor([7, 3, 5, 1])
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()  # (batch, len), padding on the right
    states = states + 3.0 * (1 - mask).unsqueeze(-1)  # padded positions hold large values, as padding may
    return states, mask


def _pooling_mistakes(states: Tensor, mask: Tensor) -> dict[str, Tensor]:
    m = mask.to(states.dtype).unsqueeze(-1)
    mean = (states * m).sum(1) / m.sum(1)
    return {
        "padding was averaged in: take the mean over the real tokens only (multiply by the mask, divide by the "
        "number of real tokens)": F.normalize(states.mean(1), dim=-1),
        "the rows are not unit length: divide each sentence vector by its L2 norm at the end": mean,
        "that is the [CLS] vector (position 0); average all real tokens instead": F.normalize(states[:, 0], dim=-1),
        "normalise after pooling, not each token before it": F.normalize(
            (F.normalize(states, dim=-1) * m).sum(1) / m.sum(1), dim=-1
        ),
        "the norm was taken over the batch (dim 0); take it over the features (dim -1)": mean
        / mean.norm(dim=0, keepdim=True),
    }


def _check_pooling(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    for seed in (0, 1):
        states, mask = _pooling_case(seed)
        out = fn(states.clone(), mask.clone())
        expect_tensor(out, "the result", (states.shape[0], states.shape[2]), "= (batch, d)")
        expected = reference_sentence_embedding(states, mask)
        if torch.allclose(out.detach().double(), expected.double(), atol=1e-5):
            continue
        for hint, wrong in _pooling_mistakes(states, mask).items():
            if torch.allclose(out.detach().double(), wrong.double(), atol=1e-5):
                raise ExerciseMistake(hint + ".")
        expect_close(out, expected, "your sentence vectors")


def check_sentence_embedding(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 1: ``fn(token_states (batch, len, d), attention_mask (batch, len))`` -> (batch, d) unit vectors."""
    return report("Exercise 1 (sentence vector from token vectors)", lambda: _check_pooling(fn))


# ------------------------------------------------------------------------------------------------ exercise 2
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
        expect_close(scores, expected_scores, f"your scores for k={k} (cosine similarities, best first)")


def check_nearest_neighbours(fn: Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 2: ``fn(queries (q, d), collection (n, d), k)`` -> (scores, indices), both (q, k), best first."""
    return report("Exercise 2 (nearest neighbours by cosine)", lambda: _check_search(fn))
