"""Data for a language model trained on one long text: a split by position, random windows, bits per character.

A language model reads a stream of token ids. The last part of the stream is held out (not a random sample of
windows, which would overlap the training windows and leak their text), and training batches are windows cut
at random starting points: window ``x = ids[s : s + T]`` and its targets ``y = ids[s + 1 : s + T + 1]``.

Losses are compared in **bits per character**: a model with a larger vocabulary has fewer, harder tokens per
text, so its loss per token is not comparable with a character model's, but the bits it needs per character of
the same text are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .. import checks
from .bpe import BPETokenizer, train_bpe


def split_by_position(ids: Tensor, held_out: float = 0.1) -> tuple[Tensor, Tensor]:
    """ids: (n,) -> (train ids, held-out ids): the first ``1 - held_out`` of the stream, then the rest."""
    if not isinstance(ids, Tensor) or ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D tensor of token ids, got {type(ids).__name__} {getattr(ids, 'shape', '')}")
    if not isinstance(held_out, float) or not 0.0 < held_out < 1.0:
        raise ValueError(f"held_out must be a float in (0, 1), got {held_out!r}")
    cut = int(round(len(ids) * (1.0 - held_out)))
    if cut < 2 or len(ids) - cut < 2:
        raise ValueError(f"{len(ids)} ids are too few to hold out {held_out:.0%} and keep two on each side")
    return ids[:cut], ids[cut:]


@dataclass(frozen=True)
class EncodedCorpus:
    """A text split by position into a training head and a held-out tail, with the tokenizer trained on the head
    alone and both parts encoded by it. train_ids: (n_train,), held_out_ids: (n_held_out,)."""

    tokenizer: BPETokenizer
    train_text: str
    held_out_text: str
    train_ids: Tensor
    held_out_ids: Tensor

    @property
    def characters_per_token(self) -> float:
        """Characters of the training text per training token."""
        return len(self.train_text) / len(self.train_ids)


def encode_corpus(text: str, vocab_size: int | None = None, held_out: float = 0.1) -> EncodedCorpus:
    """Hold out the last ``held_out`` of ``text`` (by characters), train a BPE tokenizer of ``vocab_size`` tokens on
    the rest (None: one token per character seen there, plus ``<unk>``), and encode both parts with it.
    Returns an :class:`EncodedCorpus`: train_ids (n_train,) and held_out_ids (n_held_out,).

    This is the split of notebook 15, of ``python -m transformer_course.train --task lm`` and of the benchmarks.
    """
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty str")
    if not isinstance(held_out, float) or not 0.0 < held_out < 1.0:
        raise ValueError(f"held_out must be a float in (0, 1), got {held_out!r}")
    cut = int(len(text) * (1.0 - held_out))
    if cut < 1 or cut == len(text):
        raise ValueError(
            f"a text of {len(text)} characters is too short to hold out {held_out:.0%} "
            "and keep a character on both sides"
        )
    train_text, held_out_text = text[:cut], text[cut:]
    if vocab_size is None:
        vocab_size = len(set(train_text)) + 1
    tokenizer = train_bpe(train_text, vocab_size)
    fast = tokenizer.to_tokenizers()  # the same ids as tokenizer.encode, much faster on a whole corpus
    train_ids = torch.tensor(fast.encode(train_text).ids)
    held_out_ids = torch.tensor(fast.encode(held_out_text).ids)
    return EncodedCorpus(tokenizer, train_text, held_out_text, train_ids, held_out_ids)


def random_windows(
    ids: Tensor, batch_size: int, context: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """ids: (n,) -> inputs x (batch_size, context) and next-token targets y (batch_size, context).

    Window starts are drawn uniformly from every position that leaves room for the targets.
    """
    checks.positive_ints(batch_size=batch_size, context=context)
    if not isinstance(ids, Tensor) or ids.dim() != 1:
        raise ValueError("ids must be a 1-D tensor of token ids")
    if len(ids) < context + 1:
        raise ValueError(f"a window of context={context} needs at least {context + 1} ids, got {len(ids)}")
    starts = torch.randint(0, len(ids) - context, (batch_size,), generator=generator)
    index = starts[:, None] + torch.arange(context + 1)  # (batch_size, context + 1), no loop over rows
    windows = ids[index]
    return windows[:, :-1], windows[:, 1:]


def bits_per_character(nats_per_token: float, num_tokens: int, num_characters: int) -> float:
    """A loss in nats per token over a text of ``num_tokens`` tokens and ``num_characters`` characters, in bits
    per character: nats_per_token * num_tokens / num_characters / ln 2."""
    valid = isinstance(nats_per_token, int | float) and not isinstance(nats_per_token, bool)
    if not valid or not math.isfinite(nats_per_token) or nats_per_token < 0:
        raise ValueError(f"nats_per_token must be a finite number >= 0, got {nats_per_token!r}")
    checks.positive_ints(num_tokens=num_tokens, num_characters=num_characters)
    return nats_per_token * num_tokens / num_characters / math.log(2)


def characters_per_token(text: str, ids: Tensor | list[int]) -> float:
    """How many characters of ``text`` each of its ``ids`` covers on average."""
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty str")
    if len(ids) == 0:
        raise ValueError("ids must not be empty")
    return len(text) / len(ids)
