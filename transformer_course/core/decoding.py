"""Generating output sequences with a trained encoder-decoder: greedy, beam search and sampling, with or without a
KV cache.

All of them drive one :class:`StepDecoder`, which encodes the source once and then returns next-token logits
for each step. With ``use_cache=True`` it feeds the decoder only the newest token and keeps every layer's
self-attention K/V and the cross-attention K/V of the encoder output in a
:class:`~transformer_course.core.attention.KVCache`; with ``use_cache=False``
it re-runs the decoder over the whole prefix at every step. Both give the same tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..text.tasks import BOS_ID, EOS_ID, PAD_ID
from .attention import attention_maps
from .model import Transformer


def _check_model_and_src(model: Transformer, src: Tensor) -> None:
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    if src.dim() != 2 or src.shape[0] < 1 or src.shape[1] < 1:
        raise ValueError(f"src must have shape (batch, len_s) with batch, len_s >= 1, got {tuple(src.shape)}")


def _check_max_len(model: Transformer, max_len: int) -> None:
    if not isinstance(max_len, int) or not 1 <= max_len < model.config.max_len:
        raise ValueError(
            f"max_len must be an int in [1, {model.config.max_len - 1}] (the model's max_len minus the <bos>), "
            f"got {max_len!r}"
        )


class StepDecoder:
    """Encode ``src`` once, then produce next-token logits one step at a time.

    src: (batch, len_s) ids. ``tokens`` holds the decoder input so far, (batch, steps + 1), starting with <bos>.
    Call :meth:`next_logits` for the (batch, vocab) logits of the next token and :meth:`append` to feed the
    chosen tokens back. The model should be in eval mode (dropout off).
    """

    def __init__(self, model: Transformer, src: Tensor, use_cache: bool = True, bos_id: int = BOS_ID) -> None:
        _check_model_and_src(model, src)
        self.model = model
        self.use_cache = use_cache
        self.src_mask = model.source_mask(src)  # (batch, 1, 1, len_s) or None
        self.memory = model.encode(src, self.src_mask)  # (batch, len_s, d_model)
        self.tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        self.cache = model.new_cache() if use_cache else None
        self._cached = 0  # how many positions of ``tokens`` the cache already holds

    def next_logits(self) -> Tensor:
        """Logits of the next token after ``tokens``: (batch, vocab)."""
        if self.cache is None:
            states = self.model.decode(self.tokens, self.memory, self.src_mask)  # (batch, steps + 1, d_model)
        else:
            new = self.tokens[:, self._cached :]  # only the positions the cache has not seen
            states = self.model.decode(new, self.memory, self.src_mask, cache=self.cache, offset=self._cached)
            self._cached = self.tokens.shape[1]
        return self.model.output_projection(states[:, -1])

    def append(self, next_tokens: Tensor) -> None:
        """next_tokens: (batch,) ids to feed back as the next decoder input."""
        self.tokens = torch.cat([self.tokens, next_tokens[:, None]], dim=1)

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (1-D long tensor, repeats allowed): used by beam search when beams are re-ranked."""
        self.tokens = self.tokens.index_select(0, index)
        self.memory = self.memory.index_select(0, index)
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, index)
        if self.cache is not None:
            for self_cache, cross_cache in self.cache:
                self_cache.reorder(index)
                cross_cache.reorder(index)


@dataclass
class DecodeOutput:
    """What greedy decoding or sampling produced for a batch.

    tokens: (batch, steps) generated ids (no <bos>); a row's <eos> is kept and everything after it is <pad>.
    log_probs: (batch,) the sum of the log-probabilities of each row's tokens, up to and including <eos>.
    lengths: (batch,) how many tokens each row generated, <eos> included. finished: (batch,) bool, True if the
    row produced <eos> within the maximum length.
    """

    tokens: Tensor
    log_probs: Tensor
    lengths: Tensor
    finished: Tensor

    def scores(self, alpha: float = 1.0) -> Tensor:
        """The length-normalised score of each row, the same one beam search ranks by: (batch,)."""
        return sequence_score(self.log_probs, self.lengths, alpha)


def sequence_score(log_prob: Tensor | float, length: Tensor | int, alpha: float = 1.0) -> Tensor:
    """Length-normalised score: log P(y) / length^alpha. alpha = 0 is the plain log-probability (which favours
    short outputs); alpha = 1 is the mean log-probability per token."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    log_prob = torch.as_tensor(log_prob, dtype=torch.float32)
    length = torch.as_tensor(length, dtype=torch.float32).clamp(min=1.0)
    return log_prob / length**alpha


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set to -inf every logit outside the top-k and/or the top-p nucleus.

    logits: (..., vocab). top_k keeps the k largest; top_p keeps the smallest set of most likely tokens whose
    probabilities add up to at least p (the most likely token is always kept). Returns (..., vocab).
    """
    vocab = logits.shape[-1]
    if top_k is not None:
        if not isinstance(top_k, int) or not 1 <= top_k:
            raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
        if top_k < vocab:
            kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest logit
            logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # probability mass of the tokens ranked above each one
        drop_sorted = before >= top_p  # already reached p without this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token_probs(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution sampling draws from: softmax(filter(logits) / temperature). logits: (..., vocab)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy decoding for the limit 0), got {temperature}")
    return F.softmax(filter_logits(logits, top_k, top_p) / temperature, dim=-1)


@torch.no_grad()
def _generate(
    model: Transformer,
    src: Tensor,
    max_len: int,
    choose,
    use_cache: bool,
    bos_id: int,
    eos_id: int,
    pad_id: int,
) -> DecodeOutput:
    _check_model_and_src(model, src)
    _check_max_len(model, max_len)
    decoder = StepDecoder(model, src, use_cache, bos_id)
    batch = src.shape[0]
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    log_probs = torch.zeros(batch, device=src.device)
    lengths = torch.zeros(batch, dtype=torch.long, device=src.device)
    steps = []
    for _ in range(max_len):
        logp = F.log_softmax(decoder.next_logits().float(), dim=-1)  # (batch, vocab)
        token = choose(logp)  # (batch,)
        token = token.masked_fill(finished, pad_id)  # rows that are done only add padding
        log_probs += logp.gather(1, token[:, None])[:, 0].masked_fill(finished, 0.0)
        lengths += (~finished).long()
        steps.append(token)
        finished |= token == eos_id
        if bool(finished.all()):
            break
        decoder.append(token)
    return DecodeOutput(torch.stack(steps, dim=1), log_probs, lengths, finished)


def greedy_decode(
    model: Transformer,
    src: Tensor,
    max_len: int = 32,
    use_cache: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    pad_id: int = PAD_ID,
) -> DecodeOutput:
    """Batched greedy decoding: at every step each row takes its most likely next token; a row stops at its own
    <eos> (later steps give it <pad>), and all stop at ``max_len`` tokens.

    src: (batch, len_s) ids. Returns a :class:`DecodeOutput` with tokens (batch, steps <= max_len).
    """
    return _generate(model, src, max_len, lambda logp: logp.argmax(dim=-1), use_cache, bos_id, eos_id, pad_id)


def sample_decode(
    model: Transformer,
    src: Tensor,
    max_len: int = 32,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    pad_id: int = PAD_ID,
    banned: Sequence[int] | None = None,
) -> DecodeOutput:
    """Batched sampling: each next token is drawn from :func:`next_token_probs` (temperature, top-k, top-p).

    src: (batch, len_s). ``banned`` ids are never drawn; the default ``None`` bans ``pad_id`` and ``bos_id``,
    which are not output tokens (decoding a row to text drops them, so a sampled one would silently vanish from
    the string); pass ``()`` to ban nothing. Banning happens before top-k, top-p and the temperature.
    ``log_probs`` in the output are the model's own (unfiltered, temperature 1) log-probabilities of the sampled
    tokens, so they are comparable with greedy's and beam search's.
    """
    next_token_probs(torch.zeros(2), temperature, top_k, top_p)  # validate the settings before encoding
    banned = [pad_id, bos_id] if banned is None else list(banned)
    vocab = model.config.tgt_vocab_size if isinstance(model, Transformer) else None
    if vocab is not None and any(not isinstance(i, int) or not 0 <= i < vocab for i in banned):
        raise ValueError(f"banned must hold token ids in [0, {vocab - 1}], got {banned}")

    def choose(logp: Tensor) -> Tensor:
        if banned:
            logp = logp.clone()
            logp[:, banned] = float("-inf")  # never drawn, whatever the filters and the temperature do
        probs = next_token_probs(logp, temperature, top_k, top_p)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    return _generate(model, src, max_len, choose, use_cache, bos_id, eos_id, pad_id)


@dataclass
class Hypothesis:
    """One output of beam search: generated ids (no <bos>, <eos> included if finished), the sum of their
    log-probabilities, the length-normalised score, and whether <eos> was reached."""

    tokens: list[int]
    log_prob: float
    score: float
    finished: bool


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    max_len: int = 32,
    alpha: float = 1.0,
    use_cache: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> list[Hypothesis]:
    """Beam search for one source sequence, the beams processed together as a batch.

    src: (1, len_s) or (len_s,). At every step the live beams are extended by every token and the
    ``beam_size`` most likely extensions are kept; an extension that ends in <eos> leaves the beam as a
    finished hypothesis (so the beam narrows, and beam_size = 1 is exactly greedy decoding). Beams still alive
    at ``max_len`` are returned as unfinished. Returns every hypothesis, best first by the length-normalised
    score :func:`sequence_score` (``alpha`` = 0: raw log-probability).
    """
    if src.dim() == 1:
        src = src[None]
    _check_model_and_src(model, src)
    if src.shape[0] != 1:
        raise ValueError(f"beam_search decodes one source at a time, got a batch of {src.shape[0]}")
    checks.positive_int("beam_size", beam_size)
    _check_max_len(model, max_len)
    sequence_score(0.0, 1, alpha)  # validates alpha
    decoder = StepDecoder(model, src, use_cache, bos_id)
    live_log_probs = torch.zeros(1, device=src.device)  # (live,) one beam to start with
    live_tokens: list[list[int]] = [[]]
    done: list[Hypothesis] = []
    for step in range(1, max_len + 1):
        logp = F.log_softmax(decoder.next_logits().float(), dim=-1)  # (live, vocab)
        vocab = logp.shape[-1]
        total = (live_log_probs[:, None] + logp).flatten()  # (live * vocab,) log P of every extension
        width = min(beam_size - len(done), total.numel())  # every finished hypothesis narrows the beam by one
        best, flat = total.topk(width)
        rows, tokens = (flat // vocab).tolist(), (flat % vocab).tolist()
        keep_rows, keep_tokens, keep_lp = [], [], []
        for lp, row, token in zip(best.tolist(), rows, tokens):
            seq = [*live_tokens[row], token]
            if token == eos_id:
                done.append(Hypothesis(seq, lp, float(sequence_score(lp, step, alpha)), True))
            else:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_lp.append(lp)
        if not keep_rows:
            break
        live_tokens = [[*live_tokens[r], t] for r, t in zip(keep_rows, keep_tokens)]
        live_log_probs = torch.tensor(keep_lp, device=src.device)
        if step == max_len:
            done.extend(
                Hypothesis(seq, lp, float(sequence_score(lp, step, alpha)), False)
                for seq, lp in zip(live_tokens, keep_lp)
            )
            break
        decoder.reorder(torch.tensor(keep_rows, device=src.device))
        decoder.append(torch.tensor(keep_tokens, device=src.device))
    return sorted(done, key=lambda h: h.score, reverse=True)


@torch.no_grad()
def cross_attention_maps(model: Transformer, src: Tensor, tgt_in: Tensor) -> Tensor:
    """Cross-attention weights of every decoder layer for a teacher-forced pass.

    src: (batch, len_s), tgt_in: (batch, len_t) decoder input (<bos> + output). Returns
    (layers, batch, heads, len_t, len_s): row t shows where the decoder looked while predicting token t + 1.
    """
    _check_model_and_src(model, src)
    model(src, tgt_in)
    return attention_maps(model.decoder, "cross_attention")


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    banned: Sequence[int] = (),
    use_cache: bool = False,
) -> Tensor:
    """Continue every prompt of a batch at once, one token per step, with a decoder-only language model.

    model: maps ids (batch, len) to next-token logits (batch, len, vocab), e.g.
    :class:`~transformer_course.families.decoder_lm.DecoderLM`; if it has ``max_len``, it sees at most that many
    tokens (the last ones).

    prompt: (batch, len_p) ids, all rows of the same length (no padding). At each step the next token is the most
    likely one (``greedy=True``) or is drawn from :func:`next_token_probs` (temperature, top-k, top-p).
    ``banned`` ids (for example ``<pad>`` and ``<unk>``) are never produced. Returns (batch, len_p +
    max_new_tokens): the prompts and their continuations. Put the model in eval mode first.

    ``use_cache=True`` (for a model with ``new_cache()`` whose forward takes ``(new_ids, caches)``, such as
    :class:`~transformer_course.families.decoder_lm.DecoderLM`, which starts the new tokens' positions after the cached
    ones) feeds the prompt once and then only each new token,
    reusing the keys and values of the earlier positions: the same tokens, far less work per step. The cache keeps
    every position, so the prompt and the new tokens must fit in the model's ``max_len``.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a language model (an nn.Module), got {type(model).__name__}")
    checks.token_ids("prompt", prompt)
    checks.non_negative_int("max_new_tokens", max_new_tokens)
    window = getattr(model, "max_len", None) or prompt.shape[1] + max_new_tokens
    if not greedy:
        next_token_probs(torch.zeros(2), temperature, top_k, top_p)  # validates the settings
    if use_cache:
        if not callable(getattr(model, "new_cache", None)):
            raise ValueError(f"use_cache needs a model with a new_cache() method, got {type(model).__name__}")
        if prompt.shape[1] + max_new_tokens > window:
            raise ValueError(
                f"with use_cache the model attends to every position: the prompt ({prompt.shape[1]}) plus "
                f"max_new_tokens ({max_new_tokens}) exceed its max_len={window}"
            )
        caches = model.new_cache()
    tokens = prompt
    for step in range(max_new_tokens):
        if use_cache:  # the whole prompt once, then only the newest token
            logits = model(tokens if step == 0 else tokens[:, -1:], caches)[:, -1].float()
        else:
            logits = model(tokens[:, -window:])[:, -1].float()  # (batch, vocab) for the next position
        if banned:
            logits[:, list(banned)] = float("-inf")
        if greedy:
            nxt = logits.argmax(dim=-1)
        else:
            probs = next_token_probs(logits, temperature, top_k, top_p)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens
