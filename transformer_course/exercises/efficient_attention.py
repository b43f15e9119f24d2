"""Exercises of notebook 13 (efficient attention): their checkers and reference solutions.

1. ``check_longformer_mask(fn)``: ``fn(length, window, global_positions)`` builds Longformer's (length, length) mask.
2. ``check_online_softmax_merge(fn)``: ``fn(state_a, state_b)`` merges two partial softmax states (m, l, acc), the
   step that lets flash attention process keys block by block.
3. ``check_positive_features(fn)``: ``fn(x, omega)`` computes Performer's positive random features.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report

State = tuple[Tensor, Tensor, Tensor]


# ----------------------------------------------------------------------------------------------- exercise 1
def reference_longformer_mask(length: int, window: int, global_positions: Sequence[int]) -> Tensor:
    """Reference solution of exercise 1: (length, length) bool, True where |i - j| <= window or i or j is global."""
    pos = torch.arange(length)
    allowed = (pos[:, None] - pos[None, :]).abs() <= window
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    return allowed | is_global[:, None] | is_global[None, :]


_MASK_CASES = ((10, 2, [0]), (16, 1, [0, 9]), (7, 0, []), (12, 3, [5, 11]))


def _mask_mistakes(length: int, window: int, global_positions: Sequence[int]) -> list[tuple[str, Tensor]]:
    pos = torch.arange(length)
    offset = pos[:, None] - pos[None, :]
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    right = reference_longformer_mask(length, window, global_positions)
    return [
        (
            "the window is one too narrow: |i - j| <= window is allowed, including |i - j| = window",
            (offset.abs() < window) | is_global[:, None] | is_global[None, :],
        ),
        (
            "global tokens must also be *seen* by every token: set their columns, not only their rows",
            (offset.abs() <= window) | is_global[:, None],
        ),
        (
            "global tokens must also *see* every token: set their rows, not only their columns",
            (offset.abs() <= window) | is_global[None, :],
        ),
        (
            "Longformer's window is two-sided (an encoder): token i also sees i + 1 .. i + window",
            ((offset >= 0) & (offset <= window)) | is_global[:, None] | is_global[None, :],
        ),
        ("the convention is True = may attend; yours marks the blocked pairs", ~right),
        ("the global tokens are missing", offset.abs() <= window),
    ]


def _check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> None:
    for length, window, global_positions in _MASK_CASES:
        what = f"your mask for length={length}, window={window}, global_positions={global_positions}"
        out = fn(length, window, list(global_positions))
        expect_tensor(out, what, (length, length))
        expect(out.dtype == torch.bool, f"{what} has dtype {out.dtype}; masks are torch.bool (True = may attend)")
        expected = reference_longformer_mask(length, window, global_positions)
        if torch.equal(out, expected):
            continue
        for hint, wrong in _mask_mistakes(length, window, global_positions):
            if torch.equal(out, wrong):
                raise ExerciseMistake(f"{what}: {hint}.")
        bad = (out != expected).nonzero()[0].tolist()
        raise ExerciseMistake(f"{what} differs at (query, key) = {tuple(bad)}: expected {bool(expected[tuple(bad)])}.")


def check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> bool:
    """Exercise 1: ``fn(length, window, global_positions)`` must return Longformer's (length, length) bool mask."""
    return report("Exercise 1 (Longformer mask)", lambda: _check_longformer_mask(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def partial_state(q: Tensor, k: Tensor, v: Tensor) -> State:
    """The softmax state of q (..., n_q, d) over one block of keys k, v (..., b, d): (m, l, acc) with m (..., n_q) the
    largest score, l (..., n_q) the sum of exp(score - m) and acc (..., n_q, d) the sum of exp(score - m) v."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = scores.amax(dim=-1)
    p = torch.exp(scores - m.unsqueeze(-1))
    return m, p.sum(dim=-1), p @ v


def reference_merge(a: State, b: State) -> State:
    """Reference solution of exercise 2: the state of the two blocks together, rescaled to the common maximum."""
    m_a, l_a, acc_a = a
    m_b, l_b, acc_b = b
    m = torch.maximum(m_a, m_b)
    scale_a, scale_b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * scale_a + l_b * scale_b, acc_a * scale_a.unsqueeze(-1) + acc_b * scale_b.unsqueeze(-1)


def _merge_mistakes(a: State, b: State) -> list[tuple[str, State]]:
    m = torch.maximum(a[0], b[0])
    return [
        (
            "you added l and acc without rescaling: multiply each block's l and acc by exp(m_block - m_new) first",
            (m, a[1] + b[1], a[2] + b[2]),
        ),
        (
            "the new m must be the larger of the two maxima (torch.maximum), so that no exp() can overflow",
            reference_merge_with(a, b, torch.minimum(a[0], b[0])),
        ),
    ]


def reference_merge_with(a: State, b: State, m: Tensor) -> State:
    """A merge rescaled to a given m (for the checker's hints)."""
    scale_a, scale_b = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * scale_a + b[1] * scale_b, a[2] * scale_a.unsqueeze(-1) + b[2] * scale_b.unsqueeze(-1)


def _check_merge(fn: Callable[[State, State], State]) -> None:
    generator = torch.Generator().manual_seed(13)
    for shape, split in (((1, 4, 8), 3), ((2, 3, 5, 16), 7), ((6, 4), 1)):
        d = shape[-1]
        q = torch.randn(*shape, generator=generator) * 2
        k = torch.randn(*shape[:-2], 10, d, generator=generator) * 2
        v = torch.randn(*shape[:-2], 10, d, generator=generator)
        a, b = (
            partial_state(q, k[..., :split, :], v[..., :split, :]),
            partial_state(q, k[..., split:, :], v[..., split:, :]),
        )
        what = f"your merge for q of shape {shape}, keys split {split} + {10 - split}"
        out = fn(tuple(t.clone() for t in a), tuple(t.clone() for t in b))
        expect(
            isinstance(out, (tuple, list)) and len(out) == 3,
            f"{what} should return three tensors (m, l, acc), got {type(out).__name__}",
        )
        expected = reference_merge(a, b)
        if all(
            isinstance(o, Tensor) and o.shape == e.shape and torch.allclose(o, e, atol=1e-5, rtol=1e-4)
            for o, e in zip(out, expected)
        ):
            continue
        for hint, wrong in _merge_mistakes(a, b):
            if all(
                isinstance(o, Tensor) and o.shape == w.shape and torch.allclose(o, w, atol=1e-5, rtol=1e-4)
                for o, w in zip(out, wrong)
            ):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(out[0], expected[0], f"{what}: m (the running maximum)")
        expect_close(out[1], expected[1], f"{what}: l (the sum of exp(score - m))")
        expect_close(out[2], expected[2], f"{what}: acc (the sum of exp(score - m) v; do not divide by l yet)")


def check_online_softmax_merge(fn: Callable[[State, State], State]) -> bool:
    """Exercise 2: ``fn((m_a, l_a, acc_a), (m_b, l_b, acc_b))`` must return the merged (m, l, acc)."""
    return report("Exercise 2 (online softmax merge)", lambda: _check_merge(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def reference_positive_features(x: Tensor, omega: Tensor) -> Tensor:
    """Reference solution of exercise 3: x (..., n, d), omega (m, d) -> exp(x omega^T - |x|^2 / 2) / sqrt(m)."""
    return torch.exp(x @ omega.T - x.pow(2).sum(dim=-1, keepdim=True) / 2) / math.sqrt(omega.shape[0])


def _feature_mistakes(x: Tensor, omega: Tensor) -> list[tuple[str, Tensor]]:
    m = omega.shape[0]
    projection = x @ omega.T
    square = x.pow(2).sum(dim=-1, keepdim=True) / 2
    return [
        (
            "the factor exp(-|x|^2 / 2) is missing: without it the estimate of exp(q . k) is biased",
            torch.exp(projection) / math.sqrt(m),
        ),
        (
            "divide by sqrt(m) (the number of features), so that phi(q) . phi(k) averages the m estimates",
            torch.exp(projection - square),
        ),
        (
            "divide by sqrt(m), not m: the 1/m of the average is shared between phi(q) and phi(k)",
            torch.exp(projection - square) / m,
        ),
        (
            "|x|^2 / 2 is the squared length of the whole vector x (summed over d), halved",
            torch.exp(projection - x.pow(2).mean(dim=-1, keepdim=True) / 2) / math.sqrt(m),
        ),
    ]


def _check_features(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    generator = torch.Generator().manual_seed(31)
    for shape, m in (((5, 4), 6), ((2, 3, 7, 8), 16), ((1, 3, 2), 64)):
        x = torch.randn(*shape, generator=generator) * 0.5
        omega = torch.randn(m, shape[-1], generator=generator)
        what = f"your features for x of shape {shape} and {m} random directions"
        out = fn(x.clone(), omega.clone())
        expected = reference_positive_features(x, omega)
        expect_tensor(out, what, expected.shape, "(..., n, m)")
        if torch.allclose(out.detach(), expected, atol=1e-6, rtol=1e-4):
            continue
        for hint, wrong in _feature_mistakes(x, omega):
            if torch.allclose(out.detach(), wrong, atol=1e-6, rtol=1e-4):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(out, expected, what, atol=1e-6)


def check_positive_features(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 3: ``fn(x, omega)`` must return exp(x omega^T - |x|^2 / 2) / sqrt(m), shape (..., n, m)."""
    return report("Exercise 3 (Performer features)", lambda: _check_features(fn))
