"""The hand-written BPE trainer: the same merges as the tokenizers library, lossless, and clear on bad input."""

import pytest

from transformer_course.text.bpe import (
    PRE_TOKEN_PATTERN,
    UNK_TOKEN,
    BPETokenizer,
    merge_pair,
    pre_tokenize,
    train_bpe,
    train_with_tokenizers,
)
from transformer_course.text.corpus import load_stdlib_text

# ties on purpose (every pair of "abab" / "cdcd" counts the same), overlaps ("aaaa"), digits and punctuation
TIES = "abab cdcd abab cdcd aaaa aaaa aaa bbbb 1234 1234 ... !! ab-cd, ab_cd\n\n  x y z\n"


@pytest.fixture(scope="module")
def corpus() -> str:
    return load_stdlib_text().text[:60_000]


def test_pre_tokens_join_back_to_the_text(corpus):
    assert "".join(pre_tokenize(corpus)) == corpus
    assert pre_tokenize("Hello,  world 42!") == ["Hello", ",", " ", " world", " 42", "!"]


def test_merge_pair_scans_left_to_right():
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge_pair([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert merge_pair([2, 1, 3], (1, 3), 9) == [2, 9]


@pytest.mark.parametrize("text_name, vocab_size", [("ties", 40), ("corpus", 200), ("corpus", 600)])
def test_same_tokens_and_merges_as_the_tokenizers_library(corpus, text_name, vocab_size):
    text = TIES if text_name == "ties" else corpus
    ours = train_bpe(text, vocab_size)
    tokens, merges = train_with_tokenizers(text, vocab_size)
    assert ours.merges == merges
    assert ours.tokens == tokens
    assert ours.vocab_size == len(tokens)


def test_stops_when_no_pair_is_left():
    ours = train_bpe("ab ab", 1000)
    tokens, merges = train_with_tokenizers("ab ab", 1000)
    assert ours.tokens == tokens and ours.merges == merges
    assert ours.vocab_size < 1000


def test_encode_decode_round_trip_and_library_encodes_the_same_ids(corpus):
    bpe = train_bpe(corpus, 500)
    sample = corpus[-5000:]
    ids = bpe.encode(sample)
    assert bpe.decode(ids) == sample
    assert len(ids) < len(sample) / 2  # merges make tokens longer than one character
    fast = bpe.to_tokenizers()
    assert fast.encode(sample).ids == ids
    assert fast.decode(ids) == sample


def test_unknown_characters_become_unk():
    bpe = train_bpe("abc abc", 10)
    assert bpe.encode("abz") == [bpe.tokens.index("ab"), bpe.tokens.index(UNK_TOKEN)]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="text must be a non-empty str"):
        train_bpe("", 10)
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe("abc", 0)
    with pytest.raises(ValueError, match=r"vocab_size=3 is smaller than the 1 special tokens plus the 3 characters"):
        train_bpe("abc", 3)
    with pytest.raises(ValueError, match="special_tokens must be distinct"):
        train_bpe("abc", 10, special_tokens=("<x>", "<x>"))
    with pytest.raises(ValueError, match="text must be a str, got bytes"):
        pre_tokenize(b"abc")
    bpe = train_bpe("abc abc", 10)
    with pytest.raises(ValueError, match=r"token id 99 is outside the vocabulary \[0, "):
        bpe.decode([99])
    no_unk = train_bpe("abc", 10, special_tokens=())
    with pytest.raises(ValueError, match="character 'z' was not in the training text"):
        no_unk.encode("z")
    with pytest.raises(ValueError, match="tokens must be distinct"):
        BPETokenizer(["a", "a"], [])


def test_pattern_is_exported_for_the_library():
    assert isinstance(PRE_TOKEN_PATTERN, str) and "(?!\\S)" in PRE_TOKEN_PATTERN
