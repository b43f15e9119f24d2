"""Exercises of notebook 04 (scaled dot-product attention): their checkers and reference solutions.

1. ``check_attention(fn)``: ``fn(q, k, v)`` returns ``(output, weights)`` of softmax(Q K^T / sqrt(d_k)) V.
2. ``check_attention_entropy(fn)``: ``fn(weights)`` returns the entropy (in nats) of every row of weights.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 1.

    q: (..., len_q, d_k), k: (..., len_k, d_k), v: (..., len_k, d_v).
    Returns the output (..., len_q, d_v) and the weights (..., len_q, len_k).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., len_q, len_k)
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1 over the keys
    return weights @ v, weights


def reference_attention_entropy(weights: Tensor) -> Tensor:
    """Reference solution of exercise 2.

    weights: (..., len_k), rows that sum to 1. Returns (...,): -sum_j w_j ln w_j, with 0 ln 0 counted as 0.
    """
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))  # ln 1 = 0 where the weight is 0
    return -(weights * torch.log(safe)).sum(dim=-1)


# ----------------------------------------------------------------------------------------------- exercise 1
def _attention_inputs() -> tuple[Tensor, Tensor, Tensor]:
    """len_q, len_k, d_k and d_v all differ, so a transposed matrix shows up as a wrong shape."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 3, 5, 8, generator=g)
    k = torch.randn(2, 3, 7, 8, generator=g)
    v = torch.randn(2, 3, 7, 6, generator=g)
    return q, k, v


def _check_attention(fn: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]) -> None:
    q, k, v = _attention_inputs()
    result = fn(q.clone(), k.clone(), v.clone())
    expect(
        isinstance(result, tuple) and len(result) == 2,
        f"return a tuple (output, weights), got {type(result).__name__}",
    )
    out, weights = result
    expected_out, expected_weights = reference_attention(q, k, v)
    expect(isinstance(weights, Tensor), f"weights should be a torch.Tensor, got {type(weights).__name__}")
    expect(
        tuple(weights.shape) == tuple(expected_weights.shape),
        f"weights have shape {tuple(weights.shape)}, expected (..., len_q, len_k) = {tuple(expected_weights.shape)}",
    )
    w = weights.detach().double()
    if not torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-4):
        if torch.allclose(w.sum(-2), torch.ones_like(w.sum(-2)), atol=1e-4):
            raise ExerciseMistake("the columns of your weights sum to 1, not the rows: take the softmax over dim=-1.")
        raise ExerciseMistake("every row of the weights should sum to 1 (softmax over the keys, dim=-1).")
    raw = q.double() @ k.double().transpose(-2, -1)
    d_k = q.shape[-1]
    hints = [
        (torch.softmax(raw, -1), "divide the scores by sqrt(d_k) before the softmax."),
        (torch.softmax(raw / d_k, -1), "divide by sqrt(d_k), not by d_k."),
        (torch.softmax(raw * math.sqrt(d_k), -1), "divide the scores by sqrt(d_k); you multiplied."),
    ]
    for wrong, hint in hints:
        if torch.allclose(w, wrong, atol=1e-5):
            raise ExerciseMistake(f"the weights are not scaled right: {hint}")
    expect_close(weights, expected_weights, "weights")
    expect_close(out, expected_out, "output (weights @ v)")


def check_attention(fn: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 1: ``fn(q, k, v)`` must return (output, weights) of scaled dot-product attention."""
    return report("Exercise 1 (attention from scratch)", lambda: _check_attention(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def _entropy_cases() -> list[tuple[str, Tensor]]:
    g = torch.Generator().manual_seed(5)
    return [
        ("a uniform row of 4 weights", torch.full((4,), 0.25)),
        ("a one-hot row [0, 1, 0]", torch.tensor([0.0, 1.0, 0.0])),
        ("a batch of shape (2, 3, 4, 5)", torch.softmax(torch.randn(2, 3, 4, 5, generator=g) * 2, dim=-1)),
        ("rows with some zero weights", torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.7, 0.0, 0.2, 0.1]])),
    ]


def _check_entropy(fn: Callable[[Tensor], Tensor]) -> None:
    for what, weights in _entropy_cases():
        out = fn(weights.clone())
        expected = reference_attention_entropy(weights)
        label = f"the entropy of {what}"
        expect_tensor(out, label, expected.shape, "- one value per row (sum over the last dim only)")
        o = out.detach().double()
        e = expected.double()
        expect(not torch.isnan(o).any().item(), f"{label} contains NaN: count 0 * ln 0 as 0 (mask the zeros).")
        if torch.allclose(o, -e, atol=1e-5) and e.abs().max() > 1e-3:
            raise ExerciseMistake(f"{label} is negative: entropy is -sum w ln w (mind the minus sign).")
        if torch.allclose(o, e / math.log(2), atol=1e-5) and e.abs().max() > 1e-3:
            raise ExerciseMistake(f"{label} is in bits: use the natural log (torch.log), so the unit is nats.")
        expect_close(out, expected, label)


def check_attention_entropy(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 2: ``fn(weights)`` must return the entropy in nats of each row of ``weights`` (..., len_k)."""
    return report("Exercise 2 (attention entropy)", lambda: _check_entropy(fn))
