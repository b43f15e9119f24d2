"""Exercises of notebook 10 (decoding): their checkers and reference solutions.

1. ``check_top_k(fn)``: ``fn(logits, k)`` keeps the k largest logits of each row and sets the rest to -inf.
2. ``check_top_p(fn)``: ``fn(logits, p)`` keeps the nucleus: the fewest most-likely tokens whose probabilities
   reach p (the most likely token always stays), the rest -inf.
3. ``check_greedy_step(fn)``: ``fn(logits, finished, eos_id, pad_id)`` picks each row's next token in batched
   greedy decoding and updates which rows are finished.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._core import ExerciseMistake, expect, report


def reference_top_k(logits: Tensor, k: int) -> Tensor:
    """Reference solution of exercise 1. logits: (..., V). Returns (..., V) with all but the top k at -inf."""
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def reference_top_p(logits: Tensor, p: float) -> Tensor:
    """Reference solution of exercise 2. logits: (..., V). Returns (..., V) with tokens outside the nucleus at -inf."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of every token ranked above this one
    drop_sorted = mass_before >= p  # p was already reached without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def reference_greedy_step(logits: Tensor, finished: Tensor, eos_id: int = 2, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 3.

    logits: (batch, V) next-token logits, finished: (batch,) bool. Returns (next_tokens (batch,), finished (batch,)):
    the argmax for rows still running, <pad> for rows already finished; a row becomes finished when it emits <eos>.
    """
    next_tokens = logits.argmax(dim=-1).masked_fill(finished, pad_id)
    return next_tokens, finished | (next_tokens == eos_id)


# ----------------------------------------------------------------------------------------------- exercise 1
def _logits() -> Tensor:
    g = torch.Generator().manual_seed(11)
    return torch.randn(4, 9, generator=g) * 2


def _kept(x: Tensor) -> Tensor:
    return torch.isfinite(x)


def _check_filter(name: str, fn: Callable[[Tensor, float], Tensor], reference, settings) -> None:
    logits = _logits()
    for s in settings:
        result = fn(logits.clone(), s)
        expected = reference(logits, s)
        expect(isinstance(result, Tensor), f"return a torch.Tensor, got {type(result).__name__}")
        expect(
            tuple(result.shape) == tuple(logits.shape),
            f"{name}={s}: the result has shape {tuple(result.shape)}, expected the logits' shape {tuple(logits.shape)}",
        )
        got, want = _kept(result), _kept(expected)
        expect(
            not bool(torch.isnan(result).any()),
            f"{name}={s}: the result has NaN; use float('-inf') for removed tokens",
        )
        if bool((got & ~want).any()) or bool((~got & want).any()):
            counts, wanted = got.sum(-1).tolist(), want.sum(-1).tolist()
            if name == "k" and all(c == s - 1 for c in counts):
                raise ExerciseMistake(f"k={s}: you kept {s - 1} tokens per row; keep the k largest (ties aside).")
            if not bool(got.any(-1).all()):
                raise ExerciseMistake(
                    f"{name}={s}: some rows keep no token at all; "
                    + ("keep the k largest logits." if name == "k" else "the most likely token always stays.")
                )
            if not bool((got & want).any()):
                raise ExerciseMistake(f"{name}={s}: you kept the least likely tokens; keep the most likely ones.")
            raise ExerciseMistake(
                f"{name}={s}: you kept {counts} tokens per row, expected {wanted}"
                + (
                    " (keep the token that makes the running total reach p, and always the most likely one)"
                    if name == "p"
                    else ""
                )
            )
        expect(
            torch.equal(result[got], logits[got]),
            f"{name}={s}: the kept logits must be unchanged (only the others become -inf)",
        )


def check_top_k(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 1: ``fn(logits, k)`` returns the logits with all but the k largest of each row set to -inf."""
    return report("Exercise 1 (top-k filtering)", lambda: _check_filter("k", fn, reference_top_k, (1, 3, 9)))


def check_top_p(fn: Callable[[Tensor, float], Tensor]) -> bool:
    """Exercise 2: ``fn(logits, p)`` returns the logits with every token outside the top-p nucleus set to -inf."""
    return report(
        "Exercise 2 (top-p / nucleus filtering)", lambda: _check_filter("p", fn, reference_top_p, (0.3, 0.6, 0.9, 1.0))
    )


# ----------------------------------------------------------------------------------------------- exercise 3
def _check_greedy_step(fn: Callable[[Tensor, Tensor, int, int], tuple[Tensor, Tensor]]) -> None:
    logits = torch.full((4, 6), -1.0)
    logits[0, 4] = 3.0  # running row, picks 4
    logits[1, 2] = 3.0  # running row, picks <eos> -> becomes finished
    logits[2, 5] = 3.0  # already finished row: must get <pad>, not 5
    logits[3, 2] = 3.0  # already finished row whose argmax is <eos>: still <pad>
    finished = torch.tensor([False, False, True, True])
    result = fn(logits.clone(), finished.clone(), 2, 0)
    expect(
        isinstance(result, tuple) and len(result) == 2,
        f"return a tuple (next_tokens, finished), got {type(result).__name__}",
    )
    tokens, done = result
    expect(isinstance(tokens, Tensor) and tokens.shape == (4,), "next_tokens must be a tensor of shape (batch,)")
    expect(isinstance(done, Tensor) and done.shape == (4,), "finished must be a tensor of shape (batch,)")
    expect(int(tokens[0]) == 4, f"row 0 is running: take the argmax (4), got {int(tokens[0])}")
    if int(tokens[2]) == 5 or int(tokens[3]) == 2:
        raise ExerciseMistake("rows that were already finished must get <pad> (pad_id), not a new token.")
    expect(tokens.tolist() == [4, 2, 0, 0], f"expected next tokens [4, 2, 0, 0], got {tokens.tolist()}")
    if not bool(done[1]):
        raise ExerciseMistake("row 1 just produced <eos>: mark it finished.")
    if not bool(done[2] and done[3]):
        raise ExerciseMistake("a finished row stays finished (combine the old mask with the new <eos> test using |).")
    expect(done.tolist() == [False, True, True, True], f"expected finished [F, T, T, T], got {done.tolist()}")


def check_greedy_step(fn: Callable[[Tensor, Tensor, int, int], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 3: ``fn(logits, finished, eos_id, pad_id)`` returns (next_tokens, finished) for one greedy step."""
    return report("Exercise 3 (one step of batched greedy decoding)", lambda: _check_greedy_step(fn))
