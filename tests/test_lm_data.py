"""Language-model data: a held-out tail, random windows with shifted targets, bits per character."""

import math

import pytest
import torch

from transformer_course.text.bpe import train_bpe
from transformer_course.text.lm_data import (
    bits_per_character,
    characters_per_token,
    encode_corpus,
    random_windows,
    split_by_position,
)


def test_split_keeps_order_and_holds_out_the_tail():
    ids = torch.arange(100)
    train, held_out = split_by_position(ids, 0.1)
    assert torch.equal(train, torch.arange(90)) and torch.equal(held_out, torch.arange(90, 100))


def test_windows_are_slices_with_targets_shifted_by_one():
    ids = torch.arange(1000)
    x, y = random_windows(ids, batch_size=8, context=16, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y, x + 1)  # ids are positions here, so the next token is the next position
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(8, 15, dtype=torch.long))
    assert int(y.max()) <= 999


def test_windows_reach_every_start_including_the_last():
    only_one_fits, _ = random_windows(torch.arange(5), 64, 4, torch.Generator().manual_seed(0))
    assert set(only_one_fits[:, 0].tolist()) == {0}
    x, _ = random_windows(torch.arange(10), 512, 4, torch.Generator().manual_seed(0))
    assert set(x[:, 0].tolist()) == set(range(6))  # starts 0..5: the window at 5 ends with the target id 9


def test_bits_per_character():
    # a character model: one token per character, so bits = nats / ln 2
    assert math.isclose(bits_per_character(math.log(2), 100, 100), 1.0)
    # 4 characters a token: the same loss per token is a quarter of the bits per character
    assert math.isclose(bits_per_character(2.0, 25, 100), 2.0 * 25 / 100 / math.log(2))
    assert bits_per_character(0.0, 10, 10) == 0.0
    assert characters_per_token("abcdef", [1, 2, 3]) == 2.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="held_out must be a float in"):
        split_by_position(torch.arange(10), 1.5)
    with pytest.raises(ValueError, match="1-D tensor"):
        split_by_position(torch.zeros(2, 2), 0.1)
    with pytest.raises(ValueError, match="too few"):
        split_by_position(torch.arange(3), 0.1)
    with pytest.raises(ValueError, match="needs at least 9 ids, got 5"):
        random_windows(torch.arange(5), 2, 8)
    with pytest.raises(ValueError, match="batch_size"):
        random_windows(torch.arange(50), 0, 8)
    with pytest.raises(ValueError, match="nats_per_token must be a finite number >= 0, got -1.0"):
        bits_per_character(-1.0, 10, 10)
    with pytest.raises(ValueError, match="num_characters"):
        bits_per_character(1.0, 10, 0)
    with pytest.raises(ValueError, match="ids must not be empty"):
        characters_per_token("abc", [])


def test_encode_corpus_holds_out_the_tail_and_trains_the_tokenizer_on_the_head_only():
    text = "the cat sat on the mat. " * 20 + "a zebra!"
    corpus = encode_corpus(text, held_out=0.1)
    cut = int(len(text) * 0.9)
    assert (corpus.train_text, corpus.held_out_text) == (text[:cut], text[cut:])
    # no vocab_size: one token per character of the head, plus <unk>; the tail's new letters are unknown
    assert corpus.tokenizer.vocab_size == len(set(text[:cut])) + 1
    assert corpus.train_ids.tolist() == corpus.tokenizer.encode(text[:cut])
    assert corpus.held_out_ids.tolist() == corpus.tokenizer.encode(text[cut:])
    assert "z" not in set(text[:cut]) and 0 in corpus.held_out_ids.tolist()  # <unk> has id 0
    assert corpus.characters_per_token == 1.0
    bpe = encode_corpus(text, vocab_size=30, held_out=0.2)
    assert bpe.tokenizer.merges == train_bpe(text[: int(len(text) * 0.8)], 30).merges
    assert bpe.characters_per_token > 1.0 and bpe.train_ids.dtype == torch.long


@pytest.mark.parametrize(
    "args, message",
    [
        (("",), "text must be a non-empty str"),
        ((b"bytes",), "text must be a non-empty str"),
        (("abc", None, 1.0), r"held_out must be a float in \(0, 1\), got 1.0"),
        (("abc", None, 0), r"held_out must be a float in \(0, 1\), got 0"),
        (("a",), "a text of 1 characters is too short to hold out 10%"),
        (("hello world", 3), "vocab_size=3"),
    ],
)
def test_encode_corpus_names_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        encode_corpus(*args)
