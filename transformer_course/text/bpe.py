"""Byte-pair encoding (BPE), trained by hand: count adjacent pairs, merge the most frequent one, repeat.

Text is first cut into *pre-tokens* by :data:`PRE_TOKEN_PATTERN` (GPT-2's idea: a word keeps the space in
front of it, so " the" and "the" are different pieces and decoding is plain concatenation). A merge never
crosses a pre-token boundary. Training starts from the characters and adds one token per merge until the
vocabulary has ``vocab_size`` entries.

The trainer follows the rules of the ``tokenizers`` library's ``BpeTrainer`` (Sennrich et al., 2016, as
implemented there), so both produce the same merges from the same text:

* ids: the special tokens first, then the characters in code-point order, then one id per merge;
* a pair's count is its number of adjacent occurrences, summed over the pre-tokens with their frequencies;
* the most frequent pair wins; ties go to the pair with the smaller ids (first the left id, then the right);
* inside a pre-token a merge is applied left to right, so "aaa" merged on (a, a) gives "aa", "a".

:meth:`BPETokenizer.to_tokenizers` hands the trained merges to the library, which encodes the same ids far
faster.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .. import checks

# a word with the space before it, a number, a run of punctuation, or whitespace (leaving one space before a word)
PRE_TOKEN_PATTERN = r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
_PRE_TOKEN = re.compile(PRE_TOKEN_PATTERN)
UNK_TOKEN = "<unk>"


def pre_tokenize(text: str) -> list[str]:
    """Cut ``text`` into the pieces no merge may cross; joined together they give ``text`` back."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return _PRE_TOKEN.findall(text)


def _pairs(symbols: Sequence[int]) -> Counter[tuple[int, int]]:
    return Counter(zip(symbols, symbols[1:]))


Symbol = TypeVar("Symbol", int, str)


def merge_pair(symbols: Sequence[Symbol], pair: tuple[Symbol, Symbol], new_id: Symbol) -> list[Symbol]:
    """Replace each occurrence of ``pair`` in ``symbols`` by ``new_id``, scanning left to right (ids or strings)."""
    merged: list[Symbol] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


@dataclass
class BPETokenizer:
    """A trained BPE vocabulary: ``tokens[i]`` is the string of id i, ``merges`` the merges in training order.

    ``encode(text)`` -> list of ids; ``decode(ids)`` -> text. Characters never seen in training become
    ``<unk>`` (id 0) when it is among the tokens.
    """

    tokens: list[str]
    merges: list[tuple[str, str]]
    _ids: dict[str, int] = field(init=False, repr=False)
    _ranks: dict[tuple[str, str], int] = field(init=False, repr=False)
    _cache: dict[str, list[int]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._ids = {token: i for i, token in enumerate(self.tokens)}
        if len(self._ids) != len(self.tokens):
            raise ValueError("tokens must be distinct")
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def _encode_piece(self, piece: str) -> list[int]:
        if piece in self._cache:
            return self._cache[piece]
        symbols = list(piece)
        while len(symbols) > 1:
            # the earliest-trained merge present in this piece goes first, as in training
            rank, i = min(
                (self._ranks.get((a, b), len(self._ranks)), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))
            )
            if rank == len(self._ranks):
                break
            a, b = self.merges[rank]
            merged: list[str] = []
            j = 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == a and symbols[j + 1] == b:
                    merged.append(a + b)
                    j += 2
                else:
                    merged.append(symbols[j])
                    j += 1
            symbols = merged
        unk = self._ids.get(UNK_TOKEN)
        ids = []
        for symbol in symbols:
            if symbol in self._ids:
                ids.append(self._ids[symbol])
            elif unk is not None:
                ids.append(unk)
            else:
                raise ValueError(f"character {symbol!r} was not in the training text and there is no {UNK_TOKEN}")
        self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """text -> token ids (one list for the whole text)."""
        return [i for piece in pre_tokenize(text) for i in self._encode_piece(piece)]

    def decode(self, ids: Iterable[int]) -> str:
        """token ids -> text: the tokens' strings, concatenated."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.tokens):
                raise ValueError(f"token id {i} is outside the vocabulary [0, {len(self.tokens)})")
            out.append(self.tokens[i])
        return "".join(out)

    def to_tokenizers(self):  # -> tokenizers.Tokenizer (imported lazily: the library is only needed here)
        """The same vocabulary and merges as a ``tokenizers.Tokenizer`` (same pre-tokenisation, same ids)."""
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

        unk = UNK_TOKEN if UNK_TOKEN in self._ids else None
        tokenizer = Tokenizer(models.BPE(vocab=dict(self._ids), merges=list(self.merges), unk_token=unk))
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()
        return tokenizer


def train_bpe(text: str, vocab_size: int, special_tokens: Sequence[str] = (UNK_TOKEN,)) -> BPETokenizer:
    """Learn BPE merges from ``text`` until the vocabulary has ``vocab_size`` tokens (or no pair is left).

    Counts are kept per distinct pre-token (a ``Counter``), and after each merge only the pre-tokens that
    contain the merged pair are recounted, so a merge costs time in proportion to where it occurs.
    """
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty str")
    checks.positive_int("vocab_size", vocab_size)
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens must be distinct, got {list(special_tokens)}")

    word_counts = Counter(pre_tokenize(text))
    alphabet = sorted({ch for word in word_counts for ch in word} - set(special_tokens))
    tokens = list(special_tokens) + alphabet
    if vocab_size < len(tokens):
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than the {len(special_tokens)} special tokens plus the "
            f"{len(alphabet)} characters of the text ({len(tokens)})"
        )
    ids = {token: i for i, token in enumerate(tokens)}
    words = [[ids[ch] for ch in word] for word in word_counts]
    freqs = list(word_counts.values())

    pair_counts: Counter[tuple[int, int]] = Counter()
    where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
    for w, symbols in enumerate(words):
        for pair, n in _pairs(symbols).items():
            pair_counts[pair] += n * freqs[w]
            where[pair].add(w)
    # a max-heap on (count, smaller pair) via negated counts; stale entries are skipped when popped
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[str, str]] = []
    while len(ids) < vocab_size and heap:
        neg_count, pair = heapq.heappop(heap)
        if -neg_count != pair_counts.get(pair, 0):
            continue  # this entry was pushed before the pair's count changed
        if neg_count == 0:
            break
        new_token = tokens[pair[0]] + tokens[pair[1]]
        if new_token not in ids:
            ids[new_token] = len(tokens)
            tokens.append(new_token)
        new_id = ids[new_token]
        merges.append((tokens[pair[0]], tokens[pair[1]]))
        changed: set[tuple[int, int]] = set()
        for w in sorted(where.pop(pair)):
            before = _pairs(words[w])
            words[w] = merge_pair(words[w], pair, new_id)
            after = _pairs(words[w])
            for p in before.keys() | after.keys():
                delta = (after.get(p, 0) - before.get(p, 0)) * freqs[w]
                if delta:
                    pair_counts[p] += delta
                    changed.add(p)
                if p in after:
                    where[p].add(w)
                elif p != pair:
                    where[p].discard(w)
        del pair_counts[pair]
        changed.discard(pair)
        for p in changed:
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
            else:
                del pair_counts[p]
    return BPETokenizer(tokens, merges)


def train_with_tokenizers(text: str, vocab_size: int, special_tokens: Sequence[str] = (UNK_TOKEN,)):
    """The ``tokenizers`` library's own ``BpeTrainer`` on the same pre-tokens, for comparison.

    Returns ``(tokens, merges)`` in the same form as :class:`BPETokenizer` holds them.
    """
    import json

    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    checks.positive_int("vocab_size", vocab_size)
    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN if UNK_TOKEN in special_tokens else None))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens), show_progress=False)
    tokenizer.train_from_iterator([text], trainer)
    model = json.loads(tokenizer.to_str())["model"]
    vocab = model["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    # older releases store a merge as "a b", newer ones as ["a", "b"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return tokens, merges
