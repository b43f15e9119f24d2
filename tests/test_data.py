"""The data module: vocabularies, padding and batches, the date task and its split, the copy task."""

from __future__ import annotations

import datetime as dt

import pytest
import torch

from transformer_course.text.tasks import (
    BOS_ID,
    CASES,
    DATE_FORMATS,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    CopyTask,
    DateTask,
    Vocabulary,
    format_date,
    make_batch,
    ordinal,
    pad_sequences,
)


@pytest.fixture(scope="module")
def task() -> DateTask:
    return DateTask(seed=0)


def test_vocabulary_special_tokens_come_first_and_round_trip():
    vocab = Vocabulary("cab")
    assert vocab.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    ids = vocab.encode("abc", add_bos=True, add_eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert vocab.decode(ids) == "abc"
    assert Vocabulary(vocab.to_list()) == vocab


def test_vocabulary_unknown_characters_map_to_unk_and_decode_stops_at_eos():
    vocab = Vocabulary("ab")
    assert vocab.encode("axb") == [vocab.index["a"], UNK_ID, vocab.index["b"]]
    assert vocab.decode([vocab.index["a"], EOS_ID, vocab.index["b"]]) == "a"
    assert vocab.decode([vocab.index["a"], EOS_ID, vocab.index["b"]], stop_at_eos=False) == "a<eos>b"


@pytest.mark.parametrize("tokens", [["a", "a"], ["a", "<pad>"], ["a", ""]])
def test_vocabulary_rejects_bad_token_lists(tokens):
    with pytest.raises(ValueError):
        Vocabulary(tokens)


def test_decode_rejects_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Vocabulary("ab").decode([99])


def test_pad_sequences_pads_on_the_right():
    out = pad_sequences([[5, 6, 7], [8]])
    assert out.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    with pytest.raises(ValueError):
        pad_sequences([])


def test_batch_is_teacher_forcing_ready():
    vocab = Vocabulary("abc")
    batch = make_batch([("ab", "abc"), ("c", "a")], vocab, vocab)
    a, b, c = (vocab.index[t] for t in "abc")
    assert batch.tgt_in.tolist() == [[BOS_ID, a, b, c], [BOS_ID, a, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[a, b, c, EOS_ID], [a, EOS_ID, PAD_ID, PAD_ID]]
    # for a full-length row the decoder input is the output shifted right by one, <bos> in front
    assert torch.equal(batch.tgt_in[0, 1:], batch.tgt_out[0, :-1])
    assert batch.src.tolist() == [[a, b], [c, PAD_ID]]
    assert batch.num_target_tokens == 6 and len(batch) == 2


def test_ordinals():
    got = [ordinal(d) for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 24, 31)]
    assert got == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "24th", "31st"]


def test_there_are_17_formats_in_3_cases():
    assert len(DATE_FORMATS) == 17 and len(CASES) == 3
    assert format_date(dt.date(2021, 3, 3), 1) == "3rd of March 2021"
    assert format_date(dt.date(2021, 3, 3), 2, "upper") == "WEDNESDAY, MARCH 3, 2021"
    assert format_date(dt.date(2021, 3, 3), 3) == "2021.3.3"
    with pytest.raises(ValueError, match="fmt"):
        format_date(dt.date(2021, 3, 3), 17)
    with pytest.raises(ValueError, match="case"):
        format_date(dt.date(2021, 3, 3), 0, "title")


def test_every_source_string_determines_its_date():
    """No string is produced by two different dates (checked on four full years, every format and case)."""
    seen: dict[str, dt.date] = {}
    start = dt.date(2019, 1, 1)
    for i in range(366 * 4):
        date = start + dt.timedelta(days=i)
        for f in range(len(DATE_FORMATS)):
            for c in range(len(CASES)):
                text = format_date(date, f, c)
                assert seen.setdefault(text, date) == date, f"{text!r} is both {seen[text]} and {date}"


def test_the_split_is_by_date_and_never_overlaps(task):
    train, held_out = set(task.train_dates), set(task.held_out_dates)
    assert not train & held_out
    assert len(train) + len(held_out) == (dt.date(2049, 12, 31) - dt.date(1950, 1, 1)).days + 1
    assert len(held_out) == round(0.2 * (len(train) + len(held_out)))
    # every evaluation pair comes from a held-out date and every training pair from a training date
    held_out_iso = {d.isoformat() for d in held_out}
    train_iso = {d.isoformat() for d in train}
    assert all(t in held_out_iso for _, t in task.eval_pairs(500))
    pairs = task.sample_pairs(500, "train", torch.Generator().manual_seed(3))
    assert all(t in train_iso for _, t in pairs)


def test_the_task_is_deterministic_from_its_seed(task):
    again = DateTask(seed=0)
    assert again.held_out_dates == task.held_out_dates
    assert task.eval_pairs(50) == again.eval_pairs(50)
    b1 = task.train_batch(8, torch.Generator().manual_seed(1))
    b2 = again.train_batch(8, torch.Generator().manual_seed(1))
    assert torch.equal(b1.src, b2.src) and torch.equal(b1.tgt_out, b2.tgt_out)
    assert DateTask(seed=1).held_out_dates != task.held_out_dates


def test_source_vocabulary_covers_every_character(task):
    pairs = task.sample_pairs(2000, "train", torch.Generator().manual_seed(0))
    assert all(UNK_ID not in task.src_vocab.encode(s) for s, _ in pairs)
    assert all(UNK_ID not in task.tgt_vocab.encode(t) for _, t in pairs)


@pytest.mark.parametrize(
    "kwargs", [dict(first_year=2000, last_year=1999), dict(held_out_fraction=0.0), dict(held_out_fraction=1.0)]
)
def test_date_task_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        DateTask(**kwargs)


def test_copy_task_copies():
    task = CopyTask()
    assert len(task.src_vocab) == 4 + 10
    batch = task.train_batch(16, torch.Generator().manual_seed(0))
    assert batch.src.shape == (16, 10)
    assert torch.equal(batch.tgt_out[:, :10], batch.src)
    assert (batch.tgt_out[:, 10] == EOS_ID).all()
    src, tgt = task.eval_pairs(3)[0]
    assert src == tgt and len(src) == 10 and set(src) <= {str(i) for i in range(1, 11)}
    with pytest.raises(ValueError):
        CopyTask(num_symbols=1)
