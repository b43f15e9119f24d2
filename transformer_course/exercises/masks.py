"""Exercises of notebook 06 (masks): their checkers and reference solutions.

6.1 ``check_causal_additive_mask(fn)``: ``fn(len_q, len_k)`` returns the (len_q, len_k) additive causal mask for
    queries that are the last len_q of len_k positions: 0 where a query may look, -inf at the keys after it.
6.2 ``check_padding_mask_from_lengths(fn)``: ``fn(lengths, max_len)`` returns the bool padding mask
    (batch, 1, 1, max_len), ``True`` at real tokens.
6.3 ``check_masked_softmax(fn)``: ``fn(scores, mask)`` returns softmax weights that ignore masked keys and are all
    zero in a row whose keys are all masked (no NaN, no uniform row), in float32 and in float16.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..masks import causal_mask
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_causal_additive_mask(len_q: int, len_k: int) -> Tensor:
    """Reference solution of exercise 6.1.

    The queries are the last ``len_q`` of ``len_k`` positions: query row i sits at position len_k - len_q + i.
    Returns a float (len_q, len_k) tensor: M[i, j] = 0 for j <= len_k - len_q + i (the past and the present of
    that query), -inf for the keys after it. With len_q = len_k it is the square mask of section 3.
    """
    offset = len_k - len_q  # how many positions came before the first query
    future = torch.ones(len_q, len_k, dtype=torch.bool).triu(diagonal=offset + 1)  # True where j > offset + i
    return torch.zeros(len_q, len_k).masked_fill(future, float("-inf"))


def reference_padding_mask_from_lengths(lengths: Tensor, max_len: int) -> Tensor:
    """Reference solution of exercise 6.2.

    lengths: (batch,) number of real tokens per sequence. Returns bool (batch, 1, 1, max_len), ``True`` at the
    positions 0 .. length - 1 (real tokens), ``False`` at the padding.
    """
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def reference_masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Reference solution of exercise 6.3.

    scores: (..., len_q, len_k); mask: bool, broadcastable to scores, ``True`` = may attend.
    Returns weights of the scores' shape: each row sums to 1 over its visible keys, or is all zeros if it has none.
    """
    mask = mask.expand_as(scores)
    empty = ~mask.any(dim=-1, keepdim=True)  # rows with nothing to look at
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)  # no all -inf row, so no 0/0
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)


# --------------------------------------------------------------------------------------------- exercise 6.1
def _top_left(len_q: int, len_k: int) -> Tensor:
    """The likeliest slip: the square rule j > i applied to a rectangle, as if the queries were the FIRST ones."""
    return torch.zeros(len_q, len_k).masked_fill(torch.ones(len_q, len_k, dtype=torch.bool).triu(1), float("-inf"))


def _check_causal(fn: Callable[[int, int], Tensor]) -> None:
    for len_q, len_k in ((3, 3), (1, 1), (6, 6), (2, 5), (1, 4), (3, 7)):
        out = fn(len_q, len_k)
        label = f"causal_additive_mask({len_q}, {len_k})"
        expect(isinstance(out, Tensor), f"{label} should be a torch.Tensor, got {type(out).__name__}")
        expect(
            out.dtype.is_floating_point,
            f"{label} has dtype {out.dtype}: an additive mask holds floats, 0.0 and float('-inf') "
            "(True/False is the other, boolean convention).",
        )
        if len_q != len_k and tuple(out.shape) == (len_k, len_q):
            raise ExerciseMistake(f"{label} has shape ({len_k}, {len_q}): one row per query, (len_q, len_k).")
        expect(tuple(out.shape) == (len_q, len_k), f"{label} has shape {tuple(out.shape)}, expected ({len_q}, {len_k})")
        expected = reference_causal_additive_mask(len_q, len_k)
        o = out.detach().cpu().double()
        if torch.equal(o, expected.double()):
            continue
        offset = len_k - len_q
        row_pos = f"{offset} + i" if offset else "i"  # the position of query row i, as the hints write it
        own = o[torch.arange(len_q), torch.arange(len_q) + offset]  # each query's own position
        if len_q == len_k and len_q > 1 and torch.equal(o, expected.T.double()):
            raise ExerciseMistake(
                f"{label} is transposed: row i is the query, so -inf belongs ABOVE the diagonal "
                "(j > i, the future), 0 on and below it."
            )
        if o.numel() > 1 and o.isinf().all():
            raise ExerciseMistake(f"{label} blocks everything; only the keys after each query should be -inf.")
        if len_q != len_k and torch.equal(o, _top_left(len_q, len_k).double()):
            raise ExerciseMistake(
                f"{label} treats the queries as the FIRST {len_q} positions. They are the LAST {len_q} of {len_k}: "
                f"query row i sits at position {row_pos} and may see every key up to that one. Shift the "
                "diagonal: torch.triu(..., diagonal=...) takes it as an argument."
            )
        if torch.equal(o.isinf(), ~expected.isinf()):
            raise ExerciseMistake(
                f"{label} is inverted: it blocks the keys a query may see and keeps the ones after it. 0 goes "
                f"where j <= {row_pos}, -inf where j > {row_pos}."
            )
        if torch.isinf(own).any():
            raise ExerciseMistake(
                f"{label} blocks a query's own position (row i, column {row_pos}): a position may attend to "
                "itself, only the keys after it are -inf (one more than the diagonal you used)."
            )
        visible = ~torch.ones(len_q, len_k, dtype=torch.bool).triu(offset + 1)
        if (~visible).any() and torch.isfinite(o[~visible]).all() and (o[~visible] < -1e3).all():
            raise ExerciseMistake(
                f"{label} uses a large finite number for the blocked keys; the additive mask uses exactly -inf "
                "(finite stand-ins like -1e9 overflow in float16 and behave differently on fully masked rows)."
            )
        if (~visible).any() and (o[visible] == 1).all() and (o[~visible] == 0).all():
            raise ExerciseMistake(f"{label} is a 1/0 multiplier; the additive mask is 0 (keep) and -inf (block).")
        raise ExerciseMistake(
            f"{label} is not 0 where query i may look (keys j <= {row_pos}) and -inf at the keys after it."
        )


def check_causal_additive_mask(fn: Callable[[int, int], Tensor]) -> bool:
    """Exercise 6.1: ``fn(len_q, len_k)`` must return the (len_q, len_k) float mask with 0 for j <= len_k - len_q + i
    and -inf for the keys after that."""
    return report("Exercise 6.1 (a causal mask for the last queries)", lambda: _check_causal(fn))


# --------------------------------------------------------------------------------------------- exercise 6.2
def _padding_cases() -> list[tuple[Tensor, int]]:
    return [(torch.tensor([3, 1, 4]), 5), (torch.tensor([2, 2]), 2), (torch.tensor([0, 6]), 6)]


def _check_padding(fn: Callable[[Tensor, int], Tensor]) -> None:
    for lengths, max_len in _padding_cases():
        try:
            out = fn(lengths.clone(), max_len)
        except RuntimeError as error:
            if "must match the size" in str(error):
                raise ExerciseMistake(
                    f"the lengths {lengths.tolist()} and the positions 0 .. {max_len - 1} did not broadcast "
                    f"({error}). Give them different axes: compare torch.arange(max_len)[None, :], shape "
                    "(1, max_len), with lengths[:, None], shape (batch, 1), to get a (batch, max_len) table."
                ) from error
            raise
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
    """Exercise 6.2: ``fn(lengths, max_len)`` must return the bool (batch, 1, 1, max_len) mask, True at real tokens."""
    return report("Exercise 6.2 (padding mask from lengths)", lambda: _check_padding(fn))


# --------------------------------------------------------------------------------------------- exercise 6.3
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
        (
            "half-precision (float16) scores and fully masked rows",
            (torch.randn(1, 2, 4, 4, generator=g) * 3).half(),
            left_padded,
        ),
    ]


def _check_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    for what, scores, mask in _softmax_cases():
        half = scores.dtype == torch.float16
        try:
            out = fn(scores.clone(), mask.clone())
        except RuntimeError as error:
            if half and "overflow" in str(error):
                raise ExerciseMistake(
                    f'on {what}, your code raised "{error}". float16 holds nothing beyond +-65504, so a '
                    "finite stand-in like -1e9 cannot even be stored (section 6). Fill with float('-inf') and "
                    "handle the rows that have no visible key, or use torch.finfo(scores.dtype).min."
                ) from error
            raise
        label = f"the weights for {what}"
        expected = reference_masked_softmax(scores.float(), mask)  # float16 scores: compared in float32
        tolerance = 2e-3 if half else 1e-5  # float16 keeps about 3 significant digits
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
        if not torch.allclose(sums, torch.ones_like(sums), atol=5 * tolerance):
            raise ExerciseMistake(
                f"{label}: rows with visible keys do not sum to 1. Mask the scores (with -inf) BEFORE the softmax, "
                "over the last dim; zeroing weights after it leaves rows that sum to less than 1."
            )
        expect_close(out, expected, label, atol=tolerance, rtol=0.0 if half else 1e-4)


def check_masked_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 6.3: ``fn(scores, mask)`` must return masked softmax weights with all-zero fully masked rows."""
    return report("Exercise 6.3 (a softmax that survives fully masked rows)", lambda: _check_softmax(fn))
