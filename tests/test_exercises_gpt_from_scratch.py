"""Notebook 15's checkers accept the reference solutions and name the likeliest mistakes."""

import math
from collections import Counter

import pytest

from transformer_course.bpe import train_bpe
from transformer_course.exercises import gpt_from_scratch as ex


def test_reference_merge_step_agrees_with_the_package_trainer():
    text = "low low low lower lowest newer newer wider"
    first_merge = train_bpe(text, 1 + len(set(text)) + 1, special_tokens=("<unk>",)).merges[0]
    words = Counter(tuple(w) for w in ["low", " low", " low", " lower", " lowest", " newer", " newer", " wider"])
    assert ex.reference_merge_step(words)[0] == first_merge


def test_merge_checker_accepts_the_reference(capsys):
    assert ex.check_merge_step(ex.reference_merge_step)
    assert capsys.readouterr().out == "Exercise 15.1 (one BPE merge): correct!\n"


def _weighted_pairs(word_counts):
    pairs = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def _unweighted(word_counts):
    pairs = Counter(pair for word in word_counts for pair in zip(word, word[1:]))  # each word counted once
    return min(pairs, key=lambda pair: (-pairs[pair], pair)), {}


def _most_common_tie(word_counts):
    best = _weighted_pairs(word_counts).most_common(1)[0][0]  # among tied pairs, the first one inserted
    return best, ex.reference_merge_step(word_counts)[1]


def _right_to_left_merge(word_counts):
    best, _ = ex.reference_merge_step(word_counts)
    merged = {}
    for word, count in word_counts.items():
        out, i = [], len(word) - 1
        while i >= 0:
            if i > 0 and (word[i - 1], word[i]) == best:
                out.insert(0, best[0] + best[1])
                i -= 2
            else:
                out.insert(0, word[i])
                i -= 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + count
    return best, merged


def _drops_duplicates(word_counts):
    best, merged = ex.reference_merge_step(word_counts)
    return best, {w: 1 for w in merged}


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_unweighted, "with its word's frequency"),
        (_most_common_tie, "ties go to the smaller pair"),
        (_right_to_left_merge, "scan left to right"),
        (_drops_duplicates, "never how often the word occurs"),
        (lambda wc: ex.reference_merge_step(wc)[0], "Return a tuple (pair, merged_counts)"),
        (lambda wc: (ex.reference_merge_step(wc)[0][::-1], {}), "reversed"),
    ],
)
def test_merge_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_merge_step(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 15.1 (one BPE merge): not yet.") and hint in out, out


def test_merge_checker_says_not_attempted(capsys):
    def stub(word_counts):
        raise NotImplementedError

    assert not ex.check_merge_step(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_bits_checker_accepts_the_reference_and_names_mistakes(capsys):
    assert ex.check_bits_per_character(ex.reference_bits_per_character)
    assert "correct!" in capsys.readouterr().out
    mistakes = {
        "divide by ln 2": lambda n, t, c: n * t / c,
        "bits per token": lambda n, t, c: n / math.log(2),
        "upside down": lambda n, t, c: n * c / t / math.log(2),
        "a bit is ln 2 nats": lambda n, t, c: n * t / c / math.log(10),
        "Return a Python float": lambda n, t, c: str(n),
        "the answer is": lambda n, t, c: 1.0,
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_bits_per_character(wrong)
        out = capsys.readouterr().out
        assert out.startswith("Exercise 15.3 (bits per character): not yet.") and hint in out, (hint, out)
