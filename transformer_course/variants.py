"""The three families that grew out of the Transformer, built from the package's own parts (notebook 11).

* Encoder-only (BERT): :class:`MaskedLanguageModel`. Token + learned position + segment embeddings, a LayerNorm,
  the package's :class:`~transformer_course.model.Encoder` with only a padding mask (every token sees both sides),
  and a head that predicts the hidden words. Its training data comes from :func:`mask_tokens` (BERT's 80/10/10
  rule) and :func:`pair_inputs` (``[CLS] A [SEP] B [SEP]`` with segment ids).
* Decoder-only (GPT): :class:`CausalLanguageModel`. The same encoder stack with a causal mask: a "decoder" without
  cross-attention is an encoder that cannot look ahead. :func:`generate` samples from it, batched, with the
  filters of :mod:`transformer_course.decoding`.
* Vision Transformer: :class:`VisionTransformer`. An image cut into patches by :func:`patchify`, each patch a
  token, a learned ``[CLS]`` token in front, learned positions, the same encoder stack.

:class:`TextToTextTask` is a T5-style multi-task data set for the package's encoder-decoder
:class:`~transformer_course.model.Transformer`: the task is named in the input text. :func:`train_steps` is a small
training loop for the models here, built from the optimizer, schedule and progress line of
:mod:`transformer_course.training`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import PAD_ID, SPECIAL_TOKENS, Batch, Vocabulary, make_batch
from .decoding import next_token_probs
from .masks import causal_mask, combine_masks, padding_mask
from .model import Encoder
from .positional import LearnedPositionalEncoding, TokenEmbedding
from .training import ProgressLine, make_optimizer, warmup_linear_lr

CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
BERT_TOKENS = (CLS, SEP, MASK)
# ids in a vocabulary from :func:`text_vocabulary`: <pad> 0, <bos> 1, <eos> 2, <unk> 3, then these three
CLS_ID, SEP_ID, MASK_ID = len(SPECIAL_TOKENS), len(SPECIAL_TOKENS) + 1, len(SPECIAL_TOKENS) + 2
FIRST_WORD_ID = len(SPECIAL_TOKENS) + len(BERT_TOKENS)  # the first ordinary word


# --------------------------------------------------------------------------------------------------------
# Text: sentences, a word vocabulary with BERT's special tokens, BERT's masking and sentence pairs
# --------------------------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def split_sentences(passage: str) -> list[str]:
    """Cut a passage into sentences: after '.', '!' or '?' followed by white space, and at blank lines.

    Line breaks inside a sentence become spaces. Empty pieces are dropped.
    """
    if not isinstance(passage, str):
        raise ValueError(f"passage must be a str, got {type(passage).__name__}")
    pieces = (" ".join(p.split()) for p in _SENTENCE_END.split(passage))
    return [p for p in pieces if p]


def text_vocabulary(words: Sequence[str]) -> Vocabulary:
    """A :class:`~transformer_course.data.Vocabulary` for BERT- and GPT-style models: ``<pad>`` 0, ``<bos>`` 1,
    ``<eos>`` 2, ``<unk>`` 3, ``[CLS]`` 4, ``[SEP]`` 5, ``[MASK]`` 6, then ``words`` in the order given (from
    :data:`FIRST_WORD_ID` on). Words outside it encode as ``<unk>``."""
    words = list(words)
    clash = [w for w in words if w in BERT_TOKENS or w in SPECIAL_TOKENS]
    if clash:
        raise ValueError(f"words must not contain special tokens, got {clash}")
    return Vocabulary([*BERT_TOKENS, *words])


def _check_ids(ids: Tensor, name: str = "ids") -> None:
    if not isinstance(ids, Tensor) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got {getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, len), got {tuple(ids.shape)}")


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
    _check_ids(ids)
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
    _check_ids(ids)
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
    _check_ids(ids)
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


# --------------------------------------------------------------------------------------------------------
# Encoder-only: BERT
# --------------------------------------------------------------------------------------------------------


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _init_stack(module: nn.Module) -> None:
    """Xavier-uniform matrices, zero biases (LayerNorms keep their ones and zeros), as the package's Transformer."""
    for name, p in module.named_parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        elif name.endswith("bias") and "norm" not in name:
            nn.init.zeros_(p)


class MaskedLanguageModel(nn.Module):
    """A small BERT: bidirectional encoder with a masked-language-model head.

    Embeddings: token (unscaled, as BERT) + learned position + segment (A = 0, B = 1), then LayerNorm and dropout.
    The stack is :class:`~transformer_course.model.Encoder` (GELU; Post-LN as in BERT, or Pre-LN with a final
    LayerNorm if ``norm_first=True``) with a padding mask only, so every token attends to its left and its right.
    The MLM head is Linear + GELU + LayerNorm, then a projection onto the vocabulary that reuses the token
    embedding matrix (weight tying, as BERT), plus a bias per word.

    ``forward(ids, segments)``: ids (batch, len), segments (batch, len) or None (all 0) -> logits
    (batch, len, vocab_size). :meth:`encode` returns the hidden states (batch, len, d_model); position 0 (the
    ``[CLS]`` token) is the sequence's summary that classifiers read.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        d_ff: int = 256,
        num_layers: int = 2,
        max_len: int = 64,
        dropout: float = 0.1,
        num_segments: int = 2,
        pad_id: int = PAD_ID,
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        _check_sizes(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, d_ff=d_ff, max_len=max_len)
        _check_sizes(num_layers=num_layers, num_segments=num_segments)
        self.vocab_size, self.d_model, self.max_len, self.pad_id = vocab_size, d_model, max_len, pad_id
        self.token_embedding = TokenEmbedding(vocab_size, d_model, pad_id, scale=False)
        self.positional = LearnedPositionalEncoding(d_model, max_len)
        self.segment_embedding = nn.Embedding(num_segments, d_model)
        self.embedding_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, activation="gelu", norm_first=norm_first)
        self.head_transform = nn.Linear(d_model, d_model)
        self.head_norm = nn.LayerNorm(d_model)
        self.head_bias = nn.Parameter(torch.zeros(vocab_size))
        _init_stack(self.encoder)
        _init_stack(self.head_transform)
        nn.init.normal_(self.segment_embedding.weight, std=0.02)

    def embed(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids, segments: (batch, len) -> LayerNorm(token + position + segment), (batch, len, d_model)."""
        _check_ids(ids)
        if segments is None:
            segments = torch.zeros_like(ids)
        elif segments.shape != ids.shape:
            raise ValueError(f"segments must have the shape of ids {tuple(ids.shape)}, got {tuple(segments.shape)}")
        x = self.positional(self.token_embedding(ids)) + self.segment_embedding(segments)
        return self.dropout(self.embedding_norm(x))

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
        return h @ self.token_embedding.weight.T + self.head_bias


# --------------------------------------------------------------------------------------------------------
# Decoder-only: GPT
# --------------------------------------------------------------------------------------------------------


class CausalLanguageModel(nn.Module):
    """A small GPT: an encoder stack with a causal mask, trained to predict the next token.

    Token embedding + learned positions, :class:`~transformer_course.model.Encoder` in Pre-LN form with a final
    LayerNorm and GELU (as GPT-2), the mask :func:`~transformer_course.masks.causal_mask` combined with the
    padding mask, and an output projection tied to the token embedding.

    ``forward(ids)``: (batch, len) -> logits (batch, len, vocab_size); the logits at position t score the token
    at position t + 1, and depend only on tokens 0..t.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        d_ff: int = 256,
        num_layers: int = 2,
        max_len: int = 64,
        dropout: float = 0.1,
        pad_id: int | None = PAD_ID,
    ) -> None:
        super().__init__()
        _check_sizes(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, d_ff=d_ff, max_len=max_len)
        _check_sizes(num_layers=num_layers)
        self.vocab_size, self.d_model, self.max_len, self.pad_id = vocab_size, d_model, max_len, pad_id
        self.token_embedding = TokenEmbedding(vocab_size, d_model, pad_id, scale=False)
        self.positional = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, activation="gelu", norm_first=True)
        _init_stack(self.encoder)

    def mask(self, ids: Tensor) -> Tensor:
        """Causal mask, combined with the padding mask when the model has a pad id: (batch or 1, 1, len, len)."""
        causal = causal_mask(ids.shape[1], ids.device)
        return causal if self.pad_id is None else combine_masks(padding_mask(ids, self.pad_id), causal)

    def forward(self, ids: Tensor) -> Tensor:
        """ids: (batch, len) with len <= max_len -> next-token logits (batch, len, vocab_size)."""
        _check_ids(ids)
        if ids.shape[1] > self.max_len:
            raise ValueError(f"ids has length {ids.shape[1]}, longer than the model's max_len={self.max_len}")
        h = self.encoder(self.positional(self.token_embedding(ids)), self.mask(ids))
        return h @ self.token_embedding.weight.T


@torch.no_grad()
def generate(
    model: CausalLanguageModel,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    banned: Sequence[int] = (),
) -> Tensor:
    """Continue every prompt of a batch at once, one token per step.

    prompt: (batch, len_p) ids, all rows of the same length (no padding). At each step the model sees at most its
    last ``max_len`` tokens; the next token is the most likely one (``greedy=True``) or is drawn from
    :func:`~transformer_course.decoding.next_token_probs` (temperature, top-k, top-p). ``banned`` ids (for example
    ``<pad>`` and ``<unk>``) are never produced. Returns (batch, len_p + max_new_tokens): the prompts and their
    continuations. Put the model in eval mode first.
    """
    if not isinstance(model, CausalLanguageModel):
        raise ValueError(f"model must be a CausalLanguageModel, got {type(model).__name__}")
    _check_ids(prompt, "prompt")
    if prompt.shape[1] < 1:
        raise ValueError("prompt must hold at least one token per row")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if not greedy:
        next_token_probs(torch.zeros(2), temperature, top_k, top_p)  # validates the settings
    tokens = prompt
    for _ in range(max_new_tokens):
        logits = model(tokens[:, -model.max_len :])[:, -1].float()  # (batch, vocab) for the next position
        if banned:
            logits[:, list(banned)] = float("-inf")
        if greedy:
            nxt = logits.argmax(dim=-1)
        else:
            probs = next_token_probs(logits, temperature, top_k, top_p)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


# --------------------------------------------------------------------------------------------------------
# Vision Transformer
# --------------------------------------------------------------------------------------------------------


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping square patches and flatten each one.

    images: (batch, height, width) or (batch, channels, height, width), height and width multiples of
    ``patch_size``. Returns (batch, num_patches, channels * patch_size**2); patches are numbered row by row
    (left to right, then top to bottom), and inside a patch the values are ordered channel, row, column.
    """
    if not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive int, got {patch_size!r}")
    if images.dim() == 3:
        images = images[:, None]
    if images.dim() != 4:
        raise ValueError(f"images must be (batch, H, W) or (batch, C, H, W), got shape {tuple(images.shape)}")
    batch, channels, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not a multiple of patch_size={patch_size}")
    rows, cols = height // patch_size, width // patch_size
    x = images.reshape(batch, channels, rows, patch_size, cols, patch_size)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (batch, rows, cols, channels, p, p)
    return x.reshape(batch, rows * cols, channels * patch_size * patch_size)


class VisionTransformer(nn.Module):
    """A small ViT: patches as tokens, a learned ``[CLS]`` token in front, learned positions, the package's
    :class:`~transformer_course.model.Encoder` (Pre-LN, GELU, final LayerNorm), and a linear classifier on the
    ``[CLS]`` state.

    ``forward(images)``: (batch, H, W) or (batch, C, H, W) -> class logits (batch, num_classes).
    """

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        num_classes: int,
        channels: int = 1,
        d_model: int = 64,
        num_heads: int = 4,
        d_ff: int = 128,
        num_layers: int = 2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        _check_sizes(image_size=image_size, patch_size=patch_size, num_classes=num_classes, channels=channels)
        _check_sizes(d_model=d_model, num_heads=num_heads, d_ff=d_ff, num_layers=num_layers)
        if image_size % patch_size:
            raise ValueError(f"image_size={image_size} must be a multiple of patch_size={patch_size}")
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        self.num_patches = (image_size // patch_size) ** 2
        self.patch_embedding = nn.Linear(channels * patch_size**2, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positional = LearnedPositionalEncoding(d_model, self.num_patches + 1, dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, activation="gelu", norm_first=True)
        self.head = nn.Linear(d_model, num_classes)
        _init_stack(self.encoder)
        nn.init.normal_(self.cls_token, std=0.02)

    def encode(self, images: Tensor) -> Tensor:
        """images -> hidden states (batch, 1 + num_patches, d_model); position 0 is the [CLS] token."""
        if images.dim() == 3:
            images = images[:, None]
        expected = (self.channels, self.image_size, self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"images must be (batch, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        tokens = self.patch_embedding(patchify(images, self.patch_size))  # (batch, num_patches, d_model)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        return self.encoder(self.positional(torch.cat([cls, tokens], dim=1)))

    def forward(self, images: Tensor) -> Tensor:
        """images: (batch, [C,] H, W) -> logits (batch, num_classes)."""
        return self.head(self.encode(images)[:, 0])


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
    :func:`transformer_course.training.train` and :func:`~transformer_course.training.evaluate` expect. Held-out
    pairs are fresh random draws (``length`` = 6 gives 9^6 = 531,441 symbol strings per task, so a few repeats
    of training strings are possible).
    """

    name = "text_to_text"

    def __init__(self, tasks: Sequence[str] = ("copy", "reverse", "sort"), length: int = 6, num_symbols: int = 9):
        tasks = list(tasks)
        unknown = [t for t in tasks if t not in TEXT_TO_TEXT_TASKS]
        if not tasks or unknown:
            raise ValueError(f"tasks must be a non-empty list from {sorted(TEXT_TO_TEXT_TASKS)}, got {tasks}")
        if not isinstance(length, int) or length < 1:
            raise ValueError(f"length must be a positive int, got {length!r}")
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
        """A padded :class:`~transformer_course.data.Batch` of ``batch_size`` random examples."""
        return make_batch(self.sample_pairs(batch_size, generator), self.src_vocab, self.tgt_vocab)

    def eval_pairs(self, n: int = 600, seed: int = 1) -> list[tuple[list[str], list[str]]]:
        """A fixed evaluation set: the same ``n`` pairs for the same seed."""
        return self.sample_pairs(n, torch.Generator().manual_seed(seed + 20_000))

    def to_dict(self) -> dict[str, object]:
        return dict(tasks=list(self.tasks), length=self.length, num_symbols=self.num_symbols)


# --------------------------------------------------------------------------------------------------------
# Attention maps and a training loop shared by all of them
# --------------------------------------------------------------------------------------------------------


def attention_maps(model: nn.Module) -> Tensor:
    """The self-attention weights of the last forward pass of a model built on
    :class:`~transformer_course.model.Encoder`: (layers, batch, heads, len, len)."""
    encoder = getattr(model, "encoder", None)
    while isinstance(encoder, nn.Module) and not isinstance(encoder, Encoder):
        encoder = getattr(encoder, "encoder", None)
    if not isinstance(encoder, Encoder):
        raise ValueError(f"model must hold an Encoder (as .encoder), got {type(model).__name__}")
    weights = [layer.self_attention.attention_weights for layer in encoder.layers]
    if any(w is None for w in weights):
        raise ValueError("no attention weights stored: run a forward pass with the written-out attention first")
    return torch.stack(weights)


@dataclass
class StepHistory:
    """One entry per update of :func:`train_steps`: the loss and the learning rate; and the wall-clock seconds."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_steps(
    model: nn.Module,
    batch_loss: Callable[[torch.Generator], Tensor],
    steps: int,
    lr: float = 2e-3,
    warmup: int = 50,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
    seed: int = 0,
    log_every: int = 50,
    progress: bool = True,
) -> StepHistory:
    """Train ``model`` for exactly ``steps`` updates.

    ``batch_loss(generator)`` draws a batch with ``generator`` (seeded by ``seed``, so the data order is fixed),
    runs the model and returns the scalar loss. Each update back-propagates it, clips the gradient norm, sets the
    learning rate of :func:`~transformer_course.training.warmup_linear_lr` (linear warm-up to ``lr``, then linear
    decay to lr / 10) and steps Adam (:func:`~transformer_course.training.make_optimizer`). Parameters with
    ``requires_grad=False`` (a frozen encoder) are left alone. Prints one progress line; returns the history.
    """
    _check_sizes(steps=steps, log_every=log_every)
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup must be in [0, steps={steps}), got {warmup}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    holder = nn.ParameterList(trainable)  # make_optimizer takes a module
    optimizer = make_optimizer(holder, lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    history = StepHistory()
    line = ProgressLine(steps, progress)
    model.train()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        loss = batch_loss(generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(trainable, clip_norm)
        rate = warmup_linear_lr(step, lr, warmup, steps)
        for group in optimizer.param_groups:
            group["lr"] = rate
        optimizer.step()
        history.loss.append(loss.item())
        history.lr.append(rate)
        if step % log_every == 0 or step == steps:
            recent = history.loss[-log_every:]
            line.update(step, f"loss {sum(recent) / len(recent):.4f}")
    line.close()
    history.seconds = time.perf_counter() - start
    model.eval()
    return history


__all__ = [
    "BERT_TOKENS",
    "CLS",
    "CLS_ID",
    "FIRST_WORD_ID",
    "MASK",
    "MASK_ID",
    "SEP",
    "SEP_ID",
    "CausalLanguageModel",
    "MaskedLanguageModel",
    "StepHistory",
    "TEXT_TO_TEXT_TASKS",
    "TextToTextTask",
    "VisionTransformer",
    "attention_maps",
    "generate",
    "corrupt_for_mlm",
    "mask_tokens",
    "pair_inputs",
    "patchify",
    "segment_ids",
    "split_sentences",
    "text_vocabulary",
    "train_steps",
]
