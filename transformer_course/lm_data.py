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

import torch
from torch import Tensor

from . import checks


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
