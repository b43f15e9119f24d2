"""The standard library's prose is collected offline in a fresh interpreter, tokenised and numbered."""

from __future__ import annotations

import hashlib

import pytest

from transformer_course.text.corpus import SKIPPED_MODULES, WordVocabulary, _skipped, collect_stdlib_text, tokenize


@pytest.fixture(scope="module")
def stdlib_text():
    return collect_stdlib_text()


def test_the_corpus_is_large_real_english(stdlib_text):
    assert len(stdlib_text.docstrings) > 1000
    assert len(stdlib_text.comments) > 1000
    assert len(stdlib_text.topics) > 20
    words = tokenize(stdlib_text.text)
    assert len(words) > 200_000
    vocab = WordVocabulary(words, min_count=5)
    assert len(vocab) > 2000
    assert vocab.words[0] == "the"
    for word in ("true", "false", "server", "client", "bytes", "bytearray", "thread", "year", "day"):
        assert word in vocab


def test_collection_is_reproducible(stdlib_text):
    assert collect_stdlib_text().text == stdlib_text.text


def test_skipped_modules_and_private_names():
    assert {"antigravity", "this", "idlelib", "tkinter", "turtle", "test", "ensurepip", "venv"} <= set(SKIPPED_MODULES)
    assert _skipped("tkinter.ttk") and _skipped("_thread") and _skipped("json._private")
    assert not _skipped("json") and not _skipped("email.message")


def test_tokenize_lowercases_and_splits_on_non_letters():
    assert tokenize("Return os.path.join(a, b) -- don't PANIC_now 42x") == [
        "return", "os", "path", "join", "a", "b", "don't", "panic", "now", "x",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="str"):
        tokenize(["not", "a", "string"])


def test_vocabulary_orders_by_frequency_then_alphabet_and_drops_rare_words():
    vocab = WordVocabulary("b a c a b a d".split(), min_count=2)
    assert vocab.words == ["a", "b"] and vocab.counts == [3, 2]
    assert vocab.total_words == 7
    assert vocab.encode(["a", "c", "b", "zzz"]) == [0, 1]
    assert vocab.id("b") == 1 and vocab.word(0) == "a" and "c" not in vocab and len(vocab) == 2
    assert repr(vocab) == "WordVocabulary(2 words, min_count=2)"
    assert WordVocabulary("x y y x".split(), min_count=1).words == ["x", "y"]  # a tie: alphabetical


def test_unknown_word_error_names_the_word():
    vocab = WordVocabulary("a a b b".split(), min_count=2)
    with pytest.raises(ValueError, match="'zebra' is not in the vocabulary"):
        vocab.id("zebra")
    with pytest.raises(ValueError, match="lower case"):
        vocab.id("A")
    with pytest.raises(ValueError, match="'q'"):
        vocab.ids(["a", "q"])
    with pytest.raises(ValueError, match="word id"):
        vocab.word(2)
    with pytest.raises(ValueError, match="min_count"):
        WordVocabulary(["a"], min_count=0)
    with pytest.raises(ValueError, match="no word occurs"):
        WordVocabulary(["a"], min_count=2)
    with pytest.raises(ValueError, match="timeout"):
        collect_stdlib_text(timeout=0)


def test_the_shipped_snapshot_has_its_checksum_and_records_its_python():
    from transformer_course.text.corpus import SNAPSHOT_PATH, SNAPSHOT_SHA256, load_stdlib_text, snapshot_info

    info = snapshot_info()
    assert info["sha256"] == SNAPSHOT_SHA256
    assert info["python"].startswith("3.") and "build_corpus_snapshot" in info["built_by"]
    text = load_stdlib_text()
    assert hashlib.sha256(text.text.encode("utf-8")).hexdigest() == SNAPSHOT_SHA256
    assert len(tokenize(text.text)) > 400_000 and len(text.topics) > 20
    assert SNAPSHOT_PATH.stat().st_size < 2_000_000  # a few MB at most, per the course's rules


def test_a_snapshot_round_trips_and_a_changed_one_is_refused(tmp_path):
    from transformer_course.text.corpus import StdlibText, load_stdlib_text, write_snapshot

    small = StdlibText(["A docstring."], ["a comment"], ["a topic"])
    path = tmp_path / "small.json.gz"
    sha = write_snapshot(small, path, "3.12.1")
    assert load_stdlib_text(path, expected_sha256=sha) == small
    first_bytes = path.read_bytes()
    write_snapshot(small, path, "3.12.1")
    assert path.read_bytes() == first_bytes  # no time stamp inside: rebuilt, byte for byte the same
    with pytest.raises(ValueError, match="checksum .* expected 0+: the file was changed"):
        load_stdlib_text(path, expected_sha256="0" * 64)
    with pytest.raises(ValueError, match="no corpus snapshot at"):
        load_stdlib_text(tmp_path / "missing.json.gz")
