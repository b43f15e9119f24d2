"""Data for training a sequence-to-sequence Transformer: vocabularies, padded batches and two synthetic tasks.

* :class:`DateTask` translates dates written the way people write them ("3rd of March 2021",
  "WEDNESDAY, MARCH 3, 2021", "2021.3.3", ...) into ISO 8601 ("2021-03-03"). Source and target differ in
  length and order (the day comes before the month in some formats, after it in others, and the year moves),
  so cross-attention has real work to do. Every source string determines its target. The held-out split is
  made by the underlying date, not by the string: no date seen in training, in any format, is ever held out.
* :class:`CopyTask` copies a sequence of symbols; a model that cannot learn it has a bug.

Everything is generated from a seed, so two runs give the same data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .. import checks

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


class Vocabulary:
    """A fixed list of tokens, the four special tokens first: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2,
    ``<unk>`` = 3.

    A token is any string; for a character vocabulary each token is one character, and a ``str`` can be
    encoded directly (it is a sequence of characters). Unknown tokens map to ``<unk>``.
    """

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, tokens: Iterable[str]) -> None:
        tokens = list(tokens)
        for t in tokens:
            if not isinstance(t, str) or not t:
                raise ValueError(f"every token must be a non-empty str, got {t!r}")
        if tokens[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS):
            tokens = tokens[len(SPECIAL_TOKENS) :]
        clash = [t for t in tokens if t in SPECIAL_TOKENS]
        if clash:
            raise ValueError(f"special tokens may appear only at the start, found {clash} among the others")
        if len(set(tokens)) != len(tokens):
            duplicates = sorted({t for t in tokens if tokens.count(t) > 1})
            raise ValueError(f"tokens must be unique, got duplicates {duplicates}")
        self.tokens: list[str] = [*SPECIAL_TOKENS, *tokens]
        self.index: dict[str, int] = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def from_texts(cls, texts: Iterable[Sequence[str]]) -> Vocabulary:
        """The vocabulary of every token (character, for strings) in ``texts``, sorted."""
        return cls(sorted({t for text in texts for t in text}))

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens)"

    def encode(self, text: Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Tokens (a ``str`` is a sequence of characters) -> ids, optionally framed by <bos> and <eos>."""
        ids = [self.index.get(t, UNK_ID) for t in text]
        return [BOS_ID] * add_bos + ids + [EOS_ID] * add_eos

    def decode_tokens(self, ids: Iterable[int], stop_at_eos: bool = True) -> list[str]:
        """Ids -> tokens, stopping at the first <eos> (by default) and dropping <pad> and <bos>."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.tokens):
                raise ValueError(f"token id {i} is outside the vocabulary [0, {len(self.tokens)})")
            if i == EOS_ID and stop_at_eos:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            out.append(self.tokens[i])
        return out

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True, sep: str = "") -> str:
        """Ids -> a string: the tokens of :meth:`decode_tokens` joined with ``sep``."""
        return sep.join(self.decode_tokens(ids, stop_at_eos))

    def to_list(self) -> list[str]:
        """Every token in id order (special tokens included); ``Vocabulary(v.to_list()) == v``."""
        return list(self.tokens)


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> Tensor:
    """Right-pad lists of ids to the longest one. Returns a long tensor (batch, max_len)."""
    if not sequences:
        raise ValueError("pad_sequences needs at least one sequence, got none")
    length = max(len(s) for s in sequences)
    out = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, : len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
    return out


@dataclass
class Batch:
    """One padded batch for teacher forcing.

    src: (batch, len_s) source ids. tgt_in: (batch, len_t) the decoder input, ``<bos> y_1 ... y_n``.
    tgt_out: (batch, len_t) what the decoder must predict at each position, ``y_1 ... y_n <eos>``: the same
    sequence shifted left by one. Padding is ``<pad>`` = 0 in all three.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))

    @property
    def num_target_tokens(self) -> int:
        """How many positions of ``tgt_out`` are real tokens (not padding)."""
        return int((self.tgt_out != PAD_ID).sum())

    def __len__(self) -> int:
        return self.src.shape[0]


Pair = tuple[Sequence[str], Sequence[str]]


def make_batch(pairs: Sequence[Pair], src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> Batch:
    """(source, target) token sequences -> a padded :class:`Batch`; the target gets <bos>/<eos> framing."""
    if not pairs:
        raise ValueError("make_batch needs at least one (source, target) pair, got none")
    src = pad_sequences([src_vocab.encode(s) for s, _ in pairs])
    tgt = [tgt_vocab.encode(t) for _, t in pairs]
    tgt_in = pad_sequences([[BOS_ID, *t] for t in tgt])
    tgt_out = pad_sequences([[*t, EOS_ID] for t in tgt])
    return Batch(src, tgt_in, tgt_out)


# --------------------------------------------------------------------------------------------------------
# The date task
# --------------------------------------------------------------------------------------------------------

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def ordinal(day: int) -> str:
    """1 -> "1st", 2 -> "2nd", 3 -> "3rd", 11 -> "11th", 22 -> "22nd"."""
    suffixes = {1: "st", 2: "nd", 3: "rd"}
    suffix = "th" if 10 <= day % 100 <= 20 else suffixes.get(day % 10, "th")
    return f"{day}{suffix}"


def _parts(d: dt.date) -> dict[str, str]:
    month, weekday = MONTHS[d.month - 1], WEEKDAYS[d.weekday()]
    return dict(
        y=str(d.year),
        m=str(d.month),
        d=str(d.day),
        mm=f"{d.month:02d}",
        dd=f"{d.day:02d}",
        month=month,
        mon=month[:3],
        weekday=weekday,
        wkd=weekday[:3],
        nth=ordinal(d.day),
    )


# Seventeen ways people write a date. Day-first and month-first orders both appear, but only with spelled-out
# months or with the year in front, so no string can be read as two different dates.
DATE_FORMATS: tuple[str, ...] = (
    "{d} {month} {y}",
    "{nth} of {month} {y}",
    "{weekday}, {month} {d}, {y}",
    "{y}.{m}.{d}",
    "{month} {d}, {y}",
    "{mon} {d}, {y}",
    "{d} {mon} {y}",
    "{wkd}, {d} {mon} {y}",
    "{y}/{mm}/{dd}",
    "{dd}.{mm}.{y}",
    "{y}{mm}{dd}",
    "the {nth} of {month}, {y}",
    "{month} the {nth}, {y}",
    "{weekday} {nth} {month} {y}",
    "{d}-{mon}-{y}",
    "{y} {month} {d}",
    "{month} {nth} {y}",
)
CASES: tuple[str, ...] = ("as written", "lower", "upper")
_CASE_FUNCTIONS: dict[str, Callable[[str], str]] = {"as written": str, "lower": str.lower, "upper": str.upper}


def format_date(date: dt.date, fmt: int, case: int | str = 0) -> str:
    """Write ``date`` in format number ``fmt`` (an index into :data:`DATE_FORMATS`) and case ``case``
    (an index into :data:`CASES` or its name)."""
    if not 0 <= fmt < len(DATE_FORMATS):
        raise ValueError(f"fmt must be in [0, {len(DATE_FORMATS)}), got {fmt}")
    name = CASES[case] if isinstance(case, int) and 0 <= case < len(CASES) else case
    if name not in _CASE_FUNCTIONS:
        raise ValueError(f"case must be an index in [0, {len(CASES)}) or one of {CASES}, got {case!r}")
    return _CASE_FUNCTIONS[name](DATE_FORMATS[fmt].format(**_parts(date)))


def iso_date(date: dt.date) -> str:
    """The target: ISO 8601, YYYY-MM-DD."""
    return date.isoformat()


class DateTask:
    """Human-written dates -> ISO 8601, split by the underlying date.

    Every date from ``first_year``-01-01 to ``last_year``-12-31 is shuffled with ``seed`` and the last
    ``held_out_fraction`` of them become the held-out dates. A training example draws a training date, one of
    the 17 formats and one of 3 cases (as written, lower, upper), all uniformly.
    """

    name = "date"

    def __init__(
        self, seed: int = 0, first_year: int = 1950, last_year: int = 2049, held_out_fraction: float = 0.2
    ) -> None:
        if not 1 <= first_year <= last_year <= 9999:
            raise ValueError(f"need 1 <= first_year <= last_year <= 9999, got {first_year} and {last_year}")
        if not 0.0 < held_out_fraction < 1.0:
            raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction}")
        self.seed, self.first_year, self.last_year = seed, first_year, last_year
        self.held_out_fraction = held_out_fraction
        start = dt.date(first_year, 1, 1).toordinal()
        days = dt.date(last_year, 12, 31).toordinal() - start + 1
        order = torch.randperm(days, generator=torch.Generator().manual_seed(seed)) + start
        num_held_out = round(days * held_out_fraction)
        self.train_dates: list[dt.date] = [dt.date.fromordinal(int(o)) for o in order[: days - num_held_out]]
        self.held_out_dates: list[dt.date] = [dt.date.fromordinal(int(o)) for o in order[days - num_held_out :]]
        self.src_vocab = self._source_vocabulary()
        self.tgt_vocab = Vocabulary("0123456789-")

    @staticmethod
    def _source_vocabulary() -> Vocabulary:
        # every month, weekday, day and ordinal suffix appears in one leap year; digits 0-9 appear in its days
        dates = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(366)]
        texts = (format_date(d, f, c) for d in dates for f in range(len(DATE_FORMATS)) for c in range(len(CASES)))
        return Vocabulary.from_texts(texts)

    def dates(self, split: str) -> list[dt.date]:
        """The dates of ``split``: "train" or "held_out"."""
        if split == "train":
            return self.train_dates
        if split == "held_out":
            return self.held_out_dates
        raise ValueError(f"split must be 'train' or 'held_out', got {split!r}")

    def sample_pairs(self, n: int, split: str, generator: torch.Generator) -> list[tuple[str, str]]:
        """``n`` random (source, target) string pairs from ``split``, drawn with ``generator``."""
        dates = self.dates(split)
        which = torch.randint(len(dates), (n,), generator=generator).tolist()
        fmts = torch.randint(len(DATE_FORMATS), (n,), generator=generator).tolist()
        cases = torch.randint(len(CASES), (n,), generator=generator).tolist()
        return [(format_date(dates[i], f, c), iso_date(dates[i])) for i, f, c in zip(which, fmts, cases)]

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A padded batch of ``batch_size`` random training examples."""
        return make_batch(self.sample_pairs(batch_size, "train", generator), self.src_vocab, self.tgt_vocab)

    def eval_pairs(self, n: int = 2000, seed: int = 1) -> list[tuple[str, str]]:
        """A fixed held-out evaluation set: ``n`` pairs from held-out dates, the same for the same seed."""
        return self.sample_pairs(n, "held_out", torch.Generator().manual_seed(seed))

    def to_dict(self) -> dict[str, object]:
        """What rebuilds this task: ``DateTask(**task.to_dict())``."""
        return dict(
            seed=self.seed,
            first_year=self.first_year,
            last_year=self.last_year,
            held_out_fraction=self.held_out_fraction,
        )


class CopyTask:
    """Copy ``length`` random symbols "1" ... "num_symbols": the first sanity check of a sequence model.

    Held-out sequences are fresh random draws (with 10^10 possible sequences, overlap is negligible).
    """

    name = "copy"

    def __init__(self, num_symbols: int = 10, length: int = 10) -> None:
        if not isinstance(num_symbols, int) or num_symbols < 2:
            raise ValueError(f"num_symbols must be an int >= 2, got {num_symbols!r}")
        checks.positive_int("length", length)
        self.num_symbols, self.length = num_symbols, length
        self.src_vocab = self.tgt_vocab = Vocabulary(str(i) for i in range(1, num_symbols + 1))

    def sample_pairs(self, n: int, generator: torch.Generator) -> list[tuple[list[str], list[str]]]:
        """``n`` random (source, target) pairs; each is a list of symbol tokens and the target is the source."""
        symbols = torch.randint(1, self.num_symbols + 1, (n, self.length), generator=generator).tolist()
        return [([str(s) for s in row], [str(s) for s in row]) for row in symbols]

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        return make_batch(self.sample_pairs(batch_size, generator), self.src_vocab, self.tgt_vocab)

    def eval_pairs(self, n: int = 1000, seed: int = 1) -> list[tuple[list[str], list[str]]]:
        return self.sample_pairs(n, torch.Generator().manual_seed(seed + 10_000))

    def to_dict(self) -> dict[str, object]:
        return dict(num_symbols=self.num_symbols, length=self.length)


# --------------------------------------------------------------------------------------------------------
# Encoder-decoder as text-to-text (T5)
# --------------------------------------------------------------------------------------------------------

TEXT_TO_TEXT_TASKS: dict[str, Callable[[list[str]], list[str]]] = {
    "copy": list,
    "reverse": lambda symbols: symbols[::-1],
    "sort": sorted,
}


class TextToTextTask:
    """Several tasks in one data set, the T5 way: the input text names the task, the output is text.

    A source is ``[task, ":", s_1, ..., s_n]`` with symbols "1" .. ``num_symbols``; the target is the task applied
    to the symbols, e.g. ``["sort", ":", "3", "1", "2"] -> ["1", "2", "3"]``. One :class:`Vocabulary` (task names,
    ":" and the symbols) serves both sides. It has the ``train_batch`` / ``eval_pairs`` interface that
    :func:`transformer_course.training.trainers.train` and :func:`~transformer_course.training.trainers.evaluate`
    expect. Held-out pairs are fresh random draws (``length`` = 6 gives 9^6 = 531,441 symbol strings per task, so a
    few repeats of training strings are possible).
    """

    name = "text_to_text"

    def __init__(self, tasks: Sequence[str] = ("copy", "reverse", "sort"), length: int = 6, num_symbols: int = 9):
        tasks = list(tasks)
        unknown = [t for t in tasks if t not in TEXT_TO_TEXT_TASKS]
        if not tasks or unknown:
            raise ValueError(f"tasks must be a non-empty list from {sorted(TEXT_TO_TEXT_TASKS)}, got {tasks}")
        checks.positive_int("length", length)
        if not isinstance(num_symbols, int) or not 2 <= num_symbols <= 9:
            raise ValueError(f"num_symbols must be an int in [2, 9], got {num_symbols!r}")
        self.tasks, self.length, self.num_symbols = tasks, length, num_symbols
        self.symbols = [str(i) for i in range(1, num_symbols + 1)]
        self.src_vocab = self.tgt_vocab = Vocabulary([*tasks, ":", *self.symbols])

    def sample_pairs(self, n: int, generator: torch.Generator) -> list[tuple[list[str], list[str]]]:
        """``n`` random (source, target) token lists, the task of each drawn uniformly."""
        which = torch.randint(len(self.tasks), (n,), generator=generator).tolist()
        rows = torch.randint(self.num_symbols, (n, self.length), generator=generator).tolist()
        pairs = []
        for w, row in zip(which, rows):
            symbols = [self.symbols[i] for i in row]
            pairs.append(([self.tasks[w], ":", *symbols], TEXT_TO_TEXT_TASKS[self.tasks[w]](symbols)))
        return pairs

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A padded :class:`~transformer_course.text.tasks.Batch` of ``batch_size`` random examples."""
        return make_batch(self.sample_pairs(batch_size, generator), self.src_vocab, self.tgt_vocab)

    def eval_pairs(self, n: int = 600, seed: int = 1) -> list[tuple[list[str], list[str]]]:
        """A fixed evaluation set: the same ``n`` pairs for the same seed."""
        return self.sample_pairs(n, torch.Generator().manual_seed(seed + 20_000))

    def to_dict(self) -> dict[str, object]:
        return dict(tasks=list(self.tasks), length=self.length, num_symbols=self.num_symbols)
