"""BERT: its special tokens and vocabulary layout, its masked-language-model data, its input layer (shared by the
small BERT trained in notebook 11 and the pretrained encoder of notebook 14) and :class:`MaskedLanguageModel`.

:class:`MaskedLanguageModel` is token + learned position + segment embeddings with a LayerNorm
(:class:`BertEmbeddings`), the package's :class:`~transformer_course.core.model.Encoder` with only a padding mask
(every token sees both sides), and a head that predicts the hidden words. Its training data comes from
:func:`mask_tokens` (BERT's 80/10/10 rule) and :func:`pair_inputs` (``[CLS] A [SEP] B [SEP]`` with segment ids).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..core.layers import BlockConfig
from ..core.masks import padding_mask
from ..core.model import Encoder
from ..core.positional import LearnedPositionalEncoding, TokenEmbedding
from ..text.tasks import PAD_ID, SPECIAL_TOKENS, Vocabulary
from ..utils import xavier_init_

CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def split_sentences(passage: str) -> list[str]:
    """Cut a passage into sentences: after '.', '!' or '?' followed by white space, and at blank lines.

    Line breaks inside a sentence become spaces. Empty pieces are dropped.
    """
    if not isinstance(passage, str):
        raise ValueError(f"passage must be a str, got {type(passage).__name__}")
    pieces = (" ".join(p.split()) for p in _SENTENCE_END.split(passage))
    return [p for p in pieces if p]


BERT_TOKENS = (CLS, SEP, MASK)
# ids in a vocabulary from :func:`text_vocabulary`: <pad> 0, <bos> 1, <eos> 2, <unk> 3, then these three
CLS_ID, SEP_ID, MASK_ID = len(SPECIAL_TOKENS), len(SPECIAL_TOKENS) + 1, len(SPECIAL_TOKENS) + 2
FIRST_WORD_ID = len(SPECIAL_TOKENS) + len(BERT_TOKENS)  # the first ordinary word


def text_vocabulary(words: Sequence[str]) -> Vocabulary:
    """A :class:`~transformer_course.text.tasks.Vocabulary` for BERT- and GPT-style models: ``<pad>`` 0, ``<bos>`` 1,
    ``<eos>`` 2, ``<unk>`` 3, ``[CLS]`` 4, ``[SEP]`` 5, ``[MASK]`` 6, then ``words`` in the order given (from
    :data:`FIRST_WORD_ID` on). Words outside it encode as ``<unk>``."""
    words = list(words)
    clash = [w for w in words if w in BERT_TOKENS or w in SPECIAL_TOKENS]
    if clash:
        raise ValueError(f"words must not contain special tokens, got {clash}")
    return Vocabulary([*BERT_TOKENS, *words])


def corrupt_for_mlm(
    ids: Tensor, chosen: Tensor, action: Tensor, random_ids: Tensor, mask_id: int = MASK_ID
) -> tuple[Tensor, Tensor]:
    """BERT's 80/10/10 rule, given the random draws (so the result is fully determined by the arguments).

    ids: (batch, len) token ids; chosen: bool (batch, len), the positions the model must predict; action: floats in
    [0, 1) (batch, len); random_ids: (batch, len) replacement words. A chosen position becomes ``mask_id`` where
    action < 0.8, ``random_ids`` where 0.8 <= action < 0.9, and stays as it is where action >= 0.9; positions
    that are not chosen never change.

    Returns (inputs, labels), both (batch, len): the corrupted ids, and the original id at every chosen
    position with ``<pad>`` (0, which the loss ignores) everywhere else.
    """
    checks.token_ids("ids", ids, allow_empty=True)
    for name, t in (("chosen", chosen), ("action", action), ("random_ids", random_ids)):
        if not isinstance(t, Tensor) or t.shape != ids.shape:
            raise ValueError(
                f"{name} must be a tensor of the shape of ids {tuple(ids.shape)}, got "
                f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
            )
    if chosen.dtype != torch.bool:
        raise ValueError(f"chosen must be a bool tensor, got {chosen.dtype}")
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    labels = torch.where(chosen, ids, torch.full_like(ids, PAD_ID))
    return inputs, labels


def mask_tokens(
    ids: Tensor,
    vocab_size: int,
    generator: torch.Generator | None = None,
    mask_prob: float = 0.15,
    mask_id: int = MASK_ID,
    first_word_id: int = FIRST_WORD_ID,
) -> tuple[Tensor, Tensor]:
    """BERT's masked-language-model corruption, with fresh random draws.

    ids: (batch, len) token ids. Each ordinary word (id >= ``first_word_id``; special tokens and padding are never
    chosen) is chosen with probability ``mask_prob``; then :func:`corrupt_for_mlm` replaces a chosen token by
    ``[MASK]`` with probability 0.8, by a random ordinary word with probability 0.1, and leaves it unchanged with
    probability 0.1. The draws, in order, all on the CPU with ``generator``: ``torch.rand`` (choice),
    ``torch.rand`` (action), ``torch.randint(first_word_id, vocab_size)`` (replacement words), each of ids' shape.

    Returns (inputs, labels), both (batch, len): see :func:`corrupt_for_mlm`.
    """
    checks.token_ids("ids", ids, allow_empty=True)
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
    if not 0 <= first_word_id < vocab_size:
        raise ValueError(f"first_word_id must be in [0, vocab_size={vocab_size}), got {first_word_id}")
    device = ids.device
    chosen = (torch.rand(ids.shape, generator=generator) < mask_prob).to(device) & (ids >= first_word_id)
    action = torch.rand(ids.shape, generator=generator).to(device)
    random_ids = torch.randint(first_word_id, vocab_size, ids.shape, generator=generator).to(device)
    return corrupt_for_mlm(ids, chosen, action, random_ids, mask_id)


def segment_ids(ids: Tensor, sep_id: int = SEP_ID, pad_id: int = PAD_ID) -> Tensor:
    """Segment ids of ``[CLS] A [SEP] B [SEP] <pad>...``: 0 up to and including the first ``[SEP]``, 1 after it,
    and 0 on padding (as :func:`pair_inputs` gives).

    ids: (batch, len) -> (batch, len) long. Computed with a cumulative sum, no loop over rows.
    """
    checks.token_ids("ids", ids, allow_empty=True)
    is_sep = (ids == sep_id).long()
    seps_before = is_sep.cumsum(dim=1) - is_sep  # how many [SEP] come strictly before each position
    return seps_before.clamp(max=1).masked_fill(ids == pad_id, 0)


def pair_inputs(
    first: Sequence[Sequence[int]],
    second: Sequence[Sequence[int]] | None = None,
    max_len: int = 64,
    cls_id: int = CLS_ID,
    sep_id: int = SEP_ID,
    pad_id: int = PAD_ID,
) -> tuple[Tensor, Tensor]:
    """BERT's input layout: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, right-padded.

    first, second: lists of id lists (the segments A and B, one pair per row). Each pair is shortened to fit
    ``max_len`` by dropping words from the end of the longer segment, one at a time. Returns (ids, segments),
    both (batch, len) long, len <= max_len; segments are 0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``, 0 on padding.
    """
    if second is not None and len(second) != len(first):
        raise ValueError(f"first and second must hold the same number of segments, got {len(first)} and {len(second)}")
    if not first:
        raise ValueError("pair_inputs needs at least one segment, got none")
    specials = 2 if second is None else 3
    if max_len <= specials:
        raise ValueError(f"max_len must leave room for the words after {specials} special tokens, got {max_len}")
    rows, segs = [], []
    for i, a in enumerate(first):
        a = list(a)
        b = [] if second is None else list(second[i])
        while len(a) + len(b) + specials > max_len:  # truncate the longer segment first, as BERT does
            if len(a) >= len(b):
                a.pop()
            else:
                b.pop()
        row = [cls_id, *a, sep_id] + ([] if second is None else [*b, sep_id])
        rows.append(row)
        segs.append([0] * (len(a) + 2) + [1] * (len(row) - len(a) - 2))
    length = max(len(r) for r in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    segments = torch.zeros(len(rows), length, dtype=torch.long)
    for i, (row, seg) in enumerate(zip(rows, segs)):
        ids[i, : len(row)] = torch.tensor(row)
        segments[i, : len(seg)] = torch.tensor(seg)
    return ids, segments


class BertEmbeddings(nn.Module):
    """BERT's input layer: LayerNorm(token + position + token type), then dropout.

    Built from the course's pieces: :class:`TokenEmbedding` with ``scale=False`` (BERT does not multiply by
    sqrt(d_model); the LayerNorm sets the scale) and :class:`LearnedPositionalEncoding`; the token-type table
    (sentence A = 0, sentence B = 1; "segments") and the LayerNorm are new.
    input_ids, token_type_ids: (batch, len) -> (batch, len, d_model).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int,
        type_vocab_size: int = 2,
        pad_id: int | None = 0,
        dropout: float = 0.1,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        checks.positive_ints(vocab_size=vocab_size, d_model=d_model, max_len=max_len, type_vocab_size=type_vocab_size)
        self.type_vocab_size = type_vocab_size
        self.token = TokenEmbedding(vocab_size, d_model, pad_id, scale=False)
        self.position = LearnedPositionalEncoding(d_model, max_len, dropout=0.0)
        self.token_type = nn.Embedding(type_vocab_size, d_model)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """input_ids: (batch, len); token_type_ids: (batch, len) in [0, type_vocab_size), default all 0.

        Returns (batch, len, d_model).
        """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if token_type_ids.shape != input_ids.shape:
            raise ValueError(
                f"token_type_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                f"got {tuple(token_type_ids.shape)}"
            )
        if token_type_ids.numel() and not 0 <= int(token_type_ids.min()) <= int(token_type_ids.max()) < (
            self.type_vocab_size
        ):
            raise ValueError(f"token_type_ids must be in [0, {self.type_vocab_size})")
        x = self.position(self.token(input_ids)) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))


class MaskedLanguageModel(nn.Module):
    """A small BERT: bidirectional encoder with a masked-language-model head.

    Embeddings: token (unscaled, as BERT) + learned position (``config.max_len`` of them) + segment (A = 0,
    B = 1), then LayerNorm and dropout. The stack is :class:`~transformer_course.core.model.Encoder` of ``num_layers``
    layers of ``config`` (BERT: GELU, Post-LN; with ``norm_first=True`` it gets a final norm) with a padding mask
    only, so every token attends to its left and its right. The MLM head is Linear + GELU + LayerNorm, then a
    projection onto the vocabulary that reuses the token embedding matrix (weight tying, as BERT), plus a bias per
    word.

    ``forward(ids, segments)``: ids (batch, len), segments (batch, len) or None (all 0) -> logits
    (batch, len, vocab_size). :meth:`encode` returns the hidden states (batch, len, d_model); position 0 (the
    ``[CLS]`` token) is the sequence's summary that classifiers read.
    """

    def __init__(
        self,
        config: BlockConfig,
        vocab_size: int,
        num_layers: int,
        num_segments: int = 2,
        pad_id: int = PAD_ID,
    ) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise ValueError(f"config must be a BlockConfig (e.g. BlockConfig(activation='gelu')), got {config!r}")
        checks.positive_ints(vocab_size=vocab_size, num_layers=num_layers, num_segments=num_segments)
        d_model = config.d_model
        self.vocab_size, self.d_model, self.max_len, self.pad_id = vocab_size, d_model, config.max_len, pad_id
        self.embeddings = BertEmbeddings(
            vocab_size, d_model, config.max_len, num_segments, pad_id, config.dropout, eps=config.norm_eps
        )
        self.encoder = Encoder(num_layers, config)
        self.head_transform = nn.Linear(d_model, d_model)
        self.head_norm = nn.LayerNorm(d_model, eps=config.norm_eps)
        self.head_bias = nn.Parameter(torch.zeros(vocab_size))
        xavier_init_(self.encoder)
        xavier_init_(self.head_transform)
        nn.init.normal_(self.embeddings.token_type.weight, std=0.02)

    def embed(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids, segments: (batch, len) -> LayerNorm(token + position + segment), (batch, len, d_model)."""
        checks.token_ids("ids", ids, max_len=self.max_len)
        return self.embeddings(ids, segments)

    def encode(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids, segments: (batch, len) -> hidden states (batch, len, d_model); padding is hidden from every query."""
        return self.encoder(self.embed(ids, segments), padding_mask(ids, self.pad_id))

    def forward(self, ids: Tensor, segments: Tensor | None = None, where: Tensor | None = None) -> Tensor:
        """ids, segments: (batch, len) -> logits over the vocabulary at every position, (batch, len, vocab_size).

        where: optional bool (batch, len); then only the positions marked True are scored, and the result is
        (num_true, vocab_size) in row-major order. Training needs only the ~15% masked positions, and the
        projection onto the vocabulary is the most expensive step, so this saves most of the work.
        """
        h = self.encode(ids, segments)
        if where is not None:
            if where.dtype != torch.bool or where.shape != ids.shape:
                raise ValueError(
                    f"where must be a bool tensor of shape {tuple(ids.shape)}, got {where.dtype} {tuple(where.shape)}"
                )
            h = h[where]  # (num_true, d_model)
        h = self.head_norm(F.gelu(self.head_transform(h)))
        return h @ self.embeddings.token.weight.T + self.head_bias
