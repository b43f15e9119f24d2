"""Exercises of notebook 15 (a GPT from scratch): their checkers and reference solutions.

15.1 ``check_merge_step(fn)``: ``fn(word_counts)`` takes pre-tokens as tuples of symbols with their counts,
     ``{("l", "o", "w"): 5, ...}``, and returns ``(pair, merged_counts)``: the most frequent adjacent pair
     (counted with the words' frequencies; a tie goes to the smaller pair) and the counts with every occurrence
     of that pair merged, left to right, into one symbol.
15.3 ``check_bits_per_character(fn)``: ``fn(nats_per_token, num_tokens, num_characters)`` returns the same loss
     in bits per character of the text.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping

from ._core import ExerciseMistake, expect, report

Word = tuple[str, ...]


def reference_merge_step(word_counts: Mapping[Word, int]) -> tuple[tuple[str, str], dict[Word, int]]:
    """Reference solution of exercise 15.1: one step of BPE training."""
    pairs: Counter[tuple[str, str]] = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    best = min(pairs, key=lambda pair: (-pairs[pair], pair))  # most frequent; ties: the smaller pair
    merged: dict[Word, int] = {}
    for word, count in word_counts.items():
        out: list[str] = []
        i = 0
        while i < len(word):
            if word[i : i + 2] == best:
                out.append(best[0] + best[1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + count
    return best, merged


def reference_bits_per_character(nats_per_token: float, num_tokens: int, num_characters: int) -> float:
    """Reference solution of exercise 15.3: nats per token -> bits per character."""
    return nats_per_token * num_tokens / num_characters / math.log(2)


# The frequency of "ab" (3 words x 1) loses to "cd" (1 word x 5) only when counts are weighted; "aaa" tests the
# left-to-right merge; ("x", "y") and ("y", "z") tie on purpose.
_MERGE_CASES: tuple[dict[Word, int], ...] = (
    {("a", "b", "x"): 1, ("a", "b", "y"): 1, ("a", "b", "z"): 1, ("c", "d"): 5},
    {("a", "a", "a"): 4, ("b", "a"): 1},
    {("y", "z"): 2, ("x", "y"): 2},
    {(" ", "t", "h", "e"): 10, ("t", "h", "e", "n"): 3, (" ", "t", "o"): 4},
)


def _unweighted_best(word_counts: Mapping[Word, int]) -> tuple[str, str]:
    pairs = Counter(pair for word in word_counts for pair in zip(word, word[1:]))
    return min(pairs, key=lambda pair: (-pairs[pair], pair))


def _check_merge_step(fn: Callable[[Mapping[Word, int]], tuple[tuple[str, str], dict[Word, int]]]) -> None:
    for case in _MERGE_CASES:
        answer = fn(dict(case))
        expect(
            isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], dict),
            f"return a tuple (pair, merged_counts) with merged_counts a dict, got {answer!r:.60}",
        )
        pair, merged = answer
        best, expected = reference_merge_step(case)
        pair = tuple(pair) if isinstance(pair, list | tuple) else pair
        if pair != best:
            if pair == _unweighted_best(case):
                raise ExerciseMistake(
                    f"for {case} you picked {pair}, the pair found in the most words; count each occurrence "
                    f"with its word's frequency, which makes {best} the most frequent"
                )
            if isinstance(pair, tuple) and pair == best[::-1]:
                raise ExerciseMistake(f"for {case} you returned {pair} reversed: a pair is (left symbol, right symbol)")
            raise ExerciseMistake(
                f"for {case} the most frequent pair is {best} (ties go to the smaller pair), you returned {pair}"
            )
        if merged != expected:
            total = sum(case.values())
            if sum(merged.values()) != total:
                raise ExerciseMistake(
                    f"for {case} your merged counts add up to {sum(merged.values())}, not {total}: merging "
                    "changes the symbols of a word, never how often the word occurs"
                )
            if ("a", "a", "a") in case:
                raise ExerciseMistake(
                    f"merging {best} in ('a', 'a', 'a') gives ('aa', 'a'): scan left to right and skip past "
                    f"each merge; you returned {merged}"
                )
            raise ExerciseMistake(f"for {case} the merged counts should be {expected}, got {merged}")


def check_merge_step(fn: Callable[[Mapping[Word, int]], tuple[tuple[str, str], dict[Word, int]]]) -> bool:
    """Exercise 15.1: ``fn(word_counts)`` must return (the most frequent pair, the counts with it merged)."""
    return report("Exercise 15.1 (one BPE merge)", lambda: _check_merge_step(fn))


_BPC_CASES = ((1.2, 1000, 4000), (0.9, 700, 700), (3.5, 250, 1000))


def _check_bits_per_character(fn: Callable[[float, int, int], float]) -> None:
    for nats, tokens, characters in _BPC_CASES:
        answer = fn(nats, tokens, characters)
        expect(isinstance(answer, int | float), f"return a Python float, got {type(answer).__name__}")
        expected = reference_bits_per_character(nats, tokens, characters)
        if math.isclose(answer, expected, rel_tol=1e-6):
            continue
        what = f"for {nats} nats/token over {tokens} tokens and {characters} characters"
        if math.isclose(answer, nats * tokens / characters, rel_tol=1e-6):
            raise ExerciseMistake(f"{what} you gave nats per character: divide by ln 2 to get bits")
        if math.isclose(answer, nats / math.log(2), rel_tol=1e-6):
            raise ExerciseMistake(
                f"{what} you gave bits per token: a token covers {characters / tokens:g} characters here, so "
                "multiply by the number of tokens and divide by the number of characters"
            )
        if math.isclose(answer, nats * characters / tokens / math.log(2), rel_tol=1e-6):
            raise ExerciseMistake(f"{what} the ratio is upside down: the total loss is nats_per_token * num_tokens")
        if math.isclose(answer, nats * tokens / characters / math.log(10), rel_tol=1e-6) or math.isclose(
            answer, nats * tokens / characters * math.log(2), rel_tol=1e-6
        ):
            raise ExerciseMistake(f"{what} a bit is ln 2 nats: divide the nats by math.log(2)")
        raise ExerciseMistake(f"{what} the answer is {expected:.4f} bits per character, you gave {answer:.4f}")


def check_bits_per_character(fn: Callable[[float, int, int], float]) -> bool:
    """Exercise 15.3: ``fn(nats_per_token, num_tokens, num_characters)`` must return bits per character."""
    return report("Exercise 15.3 (bits per character)", lambda: _check_bits_per_character(fn))
