"""Exercises of notebook 06 (masks): their checkers and reference solutions.

1. ``check_causal_additive_mask(fn)``: ``fn(n)`` returns the (n, n) additive causal mask, 0 where a query may look
   and -inf above the diagonal.
2. ``check_padding_mask_from_lengths(fn)``: ``fn(lengths, max_len)`` returns the bool padding mask
   (batch, 1, 1, max_len), ``True`` at real tokens.
3. ``check_masked_softmax(fn)``: ``fn(scores, mask)`` returns softmax weights that ignore masked keys and are all
   zero in a row whose keys are all masked (no NaN, no uniform row).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..masks import causal_mask
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_causal_additive_mask(n: int) -> Tensor:
    """Reference solution of exercise 1.

    Returns a float (n, n) tensor: M[i, j] = 0 for j <= i (the past and the present), -inf for j > i (the future).
    """
    future = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)  # True strictly above the diagonal
    return torch.zeros(n, n).masked_fill(future, float("-inf"))


def reference_padding_mask_from_lengths(lengths: Tensor, max_len: int) -> Tensor:
    """Reference solution of exercise 2.

    lengths: (batch,) number of real tokens per sequence. Returns bool (batch, 1, 1, max_len), ``True`` at the
    positions 0 .. length - 1 (real tokens), ``False`` at the padding.
    """
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def reference_masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Reference solution of exercise 3.

    scores: (..., len_q, len_k); mask: bool, broadcastable to scores, ``True`` = may attend.
    Returns weights of the scores' shape: each row sums to 1 over its visible keys, or is all zeros if it has none.
    """
    mask = mask.expand_as(scores)
    empty = ~mask.any(dim=-1, keepdim=True)  # rows with nothing to look at
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)  # no all -inf row, so no 0/0
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)


# ----------------------------------------------------------------------------------------------- exercise 1
def _check_causal(fn: Callable[[int], Tensor]) -> None:
    for n in (3, 1, 6):
        out = fn(n)
        label = f"causal_additive_mask({n})"
        expect(isinstance(out, Tensor), f"{label} should be a torch.Tensor, got {type(out).__name__}")
        expect(
            out.dtype.is_floating_point,
            f"{label} has dtype {out.dtype}: an additive mask holds floats, 0.0 and float('-inf') "
            "(True/False is the other, boolean convention).",
        )
        expect(tuple(out.shape) == (n, n), f"{label} has shape {tuple(out.shape)}, expected ({n}, {n})")
        expected = reference_causal_additive_mask(n)
        o = out.detach().cpu().double()
        if n > 1:
            if torch.equal(o, expected.T.double()):
                raise ExerciseMistake(
                    f"{label} is transposed: row i is the query, so -inf belongs ABOVE the diagonal "
                    "(j > i, the future), 0 on and below it."
                )
            if o.isinf().all():
                raise ExerciseMistake(f"{label} blocks everything; only the future (j > i) should be -inf.")
        if torch.isinf(o.diagonal()).any():
            raise ExerciseMistake(f"{label} blocks the diagonal: a position may attend to itself (use diagonal=1).")
        above = torch.ones(n, n, dtype=torch.bool).triu(1)
        if above.any() and torch.isfinite(o[above]).all() and (o[above] < -1e3).all():
            raise ExerciseMistake(
                f"{label} uses a large finite number above the diagonal; the additive mask uses exactly -inf "
                "(finite stand-ins like -1e9 overflow in float16 and behave differently on fully masked rows)."
            )
        if above.any() and (o[~above] == 1).all() and (o[above] == 0).all():
            raise ExerciseMistake(f"{label} is a 1/0 multiplier; the additive mask is 0 (keep) and -inf (block).")
        expect(torch.equal(o, expected.double()), f"{label} is not 0 on and below the diagonal and -inf above it")


def check_causal_additive_mask(fn: Callable[[int], Tensor]) -> bool:
    """Exercise 1: ``fn(n)`` must return the (n, n) float mask with 0 for j <= i and -inf for j > i."""
    return report("Exercise 1 (the additive causal mask)", lambda: _check_causal(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def _padding_cases() -> list[tuple[Tensor, int]]:
    return [(torch.tensor([3, 1, 4]), 5), (torch.tensor([2, 2]), 2), (torch.tensor([0, 6]), 6)]


def _check_padding(fn: Callable[[Tensor, int], Tensor]) -> None:
    for lengths, max_len in _padding_cases():
        out = fn(lengths.clone(), max_len)
        label = f"the mask for lengths {lengths.tolist()} and max_len {max_len}"
        expected = reference_padding_mask_from_lengths(lengths, max_len)
        expect(isinstance(out, Tensor), f"{label} should be a torch.Tensor, got {type(out).__name__}")
        expect(out.dtype == torch.bool, f"{label} has dtype {out.dtype}; return a bool mask (True = may attend)")
        batch = lengths.shape[0]
        if tuple(out.shape) == (batch, max_len):
            raise ExerciseMistake(
                f"{label} has shape {tuple(out.shape)}; add two axes to get (batch, 1, 1, max_len), which "
                "broadcasts over heads and queries against scores (batch, heads, len_q, len_k)."
            )
        expect(
            tuple(out.shape) == tuple(expected.shape),
            f"{label} has shape {tuple(out.shape)}, expected (batch, 1, 1, max_len) = {tuple(expected.shape)}",
        )
        if torch.equal(out, expected):
            continue
        if torch.equal(out, ~expected):
            raise ExerciseMistake(f"{label} is inverted: True should mark the real tokens (may attend), not pads.")
        positions = torch.arange(max_len)
        if torch.equal(out, (positions[None, :] <= lengths[:, None])[:, None, None, :]):
            raise ExerciseMistake(f"{label} keeps one pad too many: position p is real when p < length (not <=).")
        expect(torch.equal(out, expected), f"{label} is wrong: True exactly at positions 0 .. length - 1")


def check_padding_mask_from_lengths(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 2: ``fn(lengths, max_len)`` must return the bool (batch, 1, 1, max_len) mask, True at real tokens."""
    return report("Exercise 2 (padding mask from lengths)", lambda: _check_padding(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def _softmax_cases() -> list[tuple[str, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(63)
    causal = causal_mask(4)
    lengths = torch.tensor([4, 2])
    padding = reference_padding_mask_from_lengths(lengths, 4)
    left_padded = torch.tensor([[False, False, True, True]])[:, None, None, :] & causal  # rows 0, 1 see nothing
    empty_row = torch.ones(3, 5, dtype=torch.bool)
    empty_row[1] = False
    return [
        ("a causal mask", torch.randn(2, 3, 4, 4, generator=g), causal),
        ("a padding mask (batch, 1, 1, len_k)", torch.randn(2, 3, 4, 4, generator=g), padding),
        ("a left-padded causal mask with fully masked rows", torch.randn(1, 2, 4, 4, generator=g) * 3, left_padded),
        ("a (3, 5) mask whose row 1 is all False", torch.randn(3, 5, generator=g), empty_row),
    ]


def _check_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    for what, scores, mask in _softmax_cases():
        out = fn(scores.clone(), mask.clone())
        label = f"the weights for {what}"
        expected = reference_masked_softmax(scores, mask)
        expect_tensor(out, label, expected.shape, "(the scores' shape)")
        o = out.detach().double()
        full_mask = mask.expand_as(scores)
        empty = ~full_mask.any(dim=-1)
        expect(
            not torch.isnan(o).any().item(),
            f"{label} contain NaN: a row whose keys are all masked is softmax over only -inf (0/0). "
            "Give such rows finite scores first, then zero their weights.",
        )
        if empty.any():
            rows = o[empty]
            if torch.allclose(rows, torch.full_like(rows, 1.0 / scores.shape[-1]), atol=1e-6):
                raise ExerciseMistake(
                    f"{label}: a fully masked row came out uniform (1/len_k each), which is what a -1e9 fill does; "
                    "it spreads the attention over keys the row must not see. It should be all zeros."
                )
        if (o[full_mask.logical_not()].abs() > 1e-6).any():
            if torch.allclose(o, reference_masked_softmax(scores, ~mask.expand_as(scores)).double(), atol=1e-6):
                raise ExerciseMistake(f"{label} use the inverted mask: True means MAY attend.")
            raise ExerciseMistake(f"{label} give weight to masked keys; those weights must be exactly 0.")
        sums = o.sum(-1)[~empty]
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
            raise ExerciseMistake(
                f"{label}: rows with visible keys do not sum to 1. Mask the scores (with -inf) BEFORE the softmax, "
                "over the last dim; zeroing weights after it leaves rows that sum to less than 1."
            )
        expect_close(out, expected, label)


def check_masked_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 3: ``fn(scores, mask)`` must return masked softmax weights with all-zero fully masked rows."""
    return report("Exercise 3 (a softmax that survives fully masked rows)", lambda: _check_softmax(fn))
