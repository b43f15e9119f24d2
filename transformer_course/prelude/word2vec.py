"""word2vec (Mikolov et al., 2013): skip-gram and CBOW with negative sampling, batched.

Every word ``w`` owns two vectors: an *input* vector ``v_w`` (the embedding we keep) and an *output*
vector ``u_w`` (used only to score it as a context word).

* Skip-gram predicts each context word ``o`` from the centre word ``c``; CBOW predicts the centre word from
  the average ``v_avg`` of its context words' input vectors.
* The full softmax P(o | c) = exp(u_o . v_c) / sum_w exp(u_w . v_c) costs a dot product with every word of
  the vocabulary per pair. Negative sampling replaces it with a binary task: tell the true context word
  from ``k`` words drawn from the unigram distribution raised to 3/4,

      loss = -log sigmoid(u_o . v_c) - sum_{n=1..k} log sigmoid(-u_n . v_c).

* Frequent words are randomly dropped before the pairs are made ("subsampling"), which speeds training and
  lets rarer words get more of it.

Pairs and context windows are built with tensor operations (one vectorised pass per window offset, never a
Python loop over pairs); training is plain SGD on sparse embedding gradients with a linearly decaying
learning rate, as in the original C tool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..text.corpus import WordVocabulary
from ..training.loop import BatchLoss, run_training

MODES = ("skipgram", "cbow")


def _check_ids(ids: Tensor, name: str = "ids") -> None:
    if not isinstance(ids, Tensor) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got {getattr(ids, 'dtype', type(ids).__name__)}")


class Word2Vec(nn.Module):
    """The two embedding tables of word2vec and its losses.

    ``input_vectors.weight`` (vocab_size, dim) holds v_w, the word vectors we keep; ``output_vectors.weight``
    (vocab_size, dim) holds u_w. As in the original tool, v starts uniform in [-0.5/dim, 0.5/dim] and u at
    zero. With ``sparse=True`` the gradients are sparse: one step touches only the rows of the words in the
    batch, so it costs the same for a vocabulary of 5 thousand or 5 million words.
    """

    def __init__(self, vocab_size: int, dim: int, sparse: bool = True, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
        checks.positive_int("dim", dim)
        self.vocab_size = vocab_size
        self.dim = dim
        self.input_vectors = nn.Embedding(vocab_size, dim, sparse=sparse)
        self.output_vectors = nn.Embedding(vocab_size, dim, sparse=sparse)
        with torch.no_grad():
            start = (torch.rand(vocab_size, dim, generator=generator) - 0.5) / dim
            self.input_vectors.weight.copy_(start)
            self.output_vectors.weight.zero_()

    @property
    def vectors(self) -> Tensor:
        """The trained word vectors v_w, detached: (vocab_size, dim)."""
        return self.input_vectors.weight.detach()

    def _check_range(self, ids: Tensor, name: str) -> None:
        _check_ids(ids, name)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise ValueError(f"{name} contains word id {bad}, outside the vocabulary [0, {self.vocab_size})")

    def _negative_sampling(self, hidden: Tensor, targets: Tensor, negatives: Tensor) -> Tensor:
        """hidden: (batch, dim) (v_c or v_avg), targets: (batch,), negatives: (batch, k) -> loss (batch,)."""
        if negatives.dim() != 2 or negatives.shape[0] != targets.shape[0]:
            raise ValueError(f"negatives must have shape (batch={targets.shape[0]}, k), got {tuple(negatives.shape)}")
        self._check_range(negatives, "negatives")
        words = torch.cat([targets.unsqueeze(1), negatives], dim=1)  # (batch, 1 + k): the true word first
        u = self.output_vectors(words)  # (batch, 1 + k, dim), one look-up for both kinds
        scores = (u * hidden.unsqueeze(1)).sum(-1)  # (batch, 1 + k) dot products u . hidden
        sign = torch.ones_like(scores)
        sign[:, 1:] = -1.0  # the true word should score high, the noise words low
        # -log sigmoid(sign * s) = softplus(-sign * s), computed stably
        return F.softplus(-sign * scores).sum(-1)

    def skipgram_loss(self, centers: Tensor, contexts: Tensor, negatives: Tensor) -> Tensor:
        """Skip-gram with negative sampling, one loss per (centre, context) pair.

        centers, contexts: (batch,) word ids; negatives: (batch, k) word ids. Returns (batch,).
        """
        for name, t in (("centers", centers), ("contexts", contexts)):
            self._check_range(t, name)
            if t.dim() != 1:
                raise ValueError(f"{name} must have shape (batch,), got {tuple(t.shape)}")
        if centers.shape != contexts.shape:
            raise ValueError(
                f"centers and contexts must have the same shape, got {tuple(centers.shape)} and {tuple(contexts.shape)}"
            )
        return self._negative_sampling(self.input_vectors(centers), contexts, negatives)

    def cbow_loss(self, contexts: Tensor, context_mask: Tensor, centers: Tensor, negatives: Tensor) -> Tensor:
        """CBOW with negative sampling, one loss per centre word.

        contexts: (batch, 2 * window) word ids; context_mask: (batch, 2 * window) bool, ``True`` = a real
        context word (windows are cut at the ends of the text and shortened at random); centers: (batch,);
        negatives: (batch, k). Returns (batch,).
        """
        self._check_range(contexts, "contexts")
        self._check_range(centers, "centers")
        if contexts.dim() != 2 or context_mask.shape != contexts.shape or context_mask.dtype != torch.bool:
            raise ValueError(
                f"contexts must be (batch, 2 * window) and context_mask a bool tensor of the same shape, got "
                f"{tuple(contexts.shape)} and {tuple(context_mask.shape)} ({context_mask.dtype})"
            )
        if centers.shape != contexts.shape[:1]:
            raise ValueError(f"centers must have shape ({contexts.shape[0]},), got {tuple(centers.shape)}")
        weights = context_mask.to(self.input_vectors.weight.dtype)  # (batch, 2w)
        summed = (self.input_vectors(contexts) * weights.unsqueeze(-1)).sum(1)  # (batch, dim)
        v_avg = summed / weights.sum(1, keepdim=True).clamp(min=1.0)  # mean over the real context words
        return self._negative_sampling(v_avg, centers, negatives)

    def softmax_skipgram_loss(self, centers: Tensor, contexts: Tensor) -> Tensor:
        """The objective negative sampling approximates: -log softmax over the whole vocabulary.

        centers, contexts: (batch,) -> (batch,). Costs a (batch, vocab_size) matrix of scores.
        """
        self._check_range(centers, "centers")
        self._check_range(contexts, "contexts")
        scores = self.input_vectors(centers) @ self.output_vectors.weight.T  # (batch, vocab_size)
        return F.cross_entropy(scores, contexts, reduction="none")


def unigram_distribution(counts: Tensor | Sequence[int], power: float = 0.75) -> Tensor:
    """Noise distribution for negative sampling: count^power, normalised. counts: (vocab,) -> (vocab,)."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or (counts < 0).any() or counts.sum() <= 0:
        raise ValueError("counts must be a 1-D tensor of non-negative word counts with a positive sum")
    weights = counts.pow(power)
    return (weights / weights.sum()).float()


def sample_negatives(distribution: Tensor, shape: tuple[int, ...], generator: torch.Generator | None = None) -> Tensor:
    """Draw word ids from ``distribution`` (vocab,) into a tensor of ``shape`` (inverse CDF lookup)."""
    cdf = distribution.double().cumsum(0)
    uniform = torch.rand(shape, generator=generator, dtype=torch.float64) * cdf[-1]
    return torch.searchsorted(cdf, uniform).clamp_(max=distribution.numel() - 1)


def keep_probabilities(counts: Tensor | Sequence[int], threshold: float = 1e-3) -> Tensor:
    """Subsampling: the chance of keeping each occurrence of a word, (sqrt(f/t) + 1) * t / f, at most 1.

    f is the word's share of the text, t the threshold (the formula of the original C tool). counts: (vocab,).
    """
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    counts = torch.as_tensor(counts, dtype=torch.float64)
    f = counts / counts.sum()
    return ((f / threshold).sqrt() + 1.0).mul(threshold / f).clamp(max=1.0).float()


def subsample(ids: Tensor, keep: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Drop each occurrence of word w with probability 1 - keep[w]. ids: (n,) -> (m,), m <= n."""
    _check_ids(ids)
    draw = torch.rand(ids.shape, generator=generator)
    return ids[draw < keep[ids]]


def _reduced_windows(n: int, window: int, generator: torch.Generator | None) -> Tensor:
    """Each centre word gets its own window 1..window, drawn uniformly, so near words count more often."""
    return torch.randint(1, window + 1, (n,), generator=generator)


def skipgram_pairs(ids: Tensor, window: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """All (centre, context) pairs of a text, with a random window 1..``window`` per centre word.

    ids: (n,) word ids. Returns centers (p,) and contexts (p,), in text order (shuffle before training).
    One vectorised pass per offset -window..window; no loop over positions or pairs.
    """
    _check_ids(ids)
    checks.positive_int("window", window)
    n = ids.numel()
    reach = _reduced_windows(n, window, generator)  # (n,)
    position = torch.arange(n)
    centers, contexts = [], []
    for offset in [o for o in range(-window, window + 1) if o != 0]:
        other = position + offset
        ok = (reach >= abs(offset)) & (other >= 0) & (other < n)
        centers.append(ids[ok])
        contexts.append(ids[other[ok]])
    return torch.cat(centers), torch.cat(contexts)


def cbow_windows(ids: Tensor, window: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Every position's context window for CBOW.

    ids: (n,). Returns contexts (n, 2 * window) word ids, mask (n, 2 * window) bool (``True`` = within this
    centre's random window and inside the text), and centers (n,).
    """
    _check_ids(ids)
    checks.positive_int("window", window)
    n = ids.numel()
    offsets = torch.tensor([o for o in range(-window, window + 1) if o != 0])  # (2w,)
    other = torch.arange(n).unsqueeze(1) + offsets  # (n, 2w) positions of the context words
    reach = _reduced_windows(n, window, generator).unsqueeze(1)  # (n, 1)
    mask = (offsets.abs() <= reach) & (other >= 0) & (other < n)
    contexts = ids[other.clamp(0, max(n - 1, 0))]
    return contexts, mask, ids.clone()


@dataclass
class Word2VecConfig:
    """Training settings. ``lr`` decays linearly to ``lr * min_lr_fraction`` over all epochs.

    ``lr=None`` picks 0.05 for skip-gram (twice the original tool's 0.025; a setting chosen for this small corpus,
    which notebook 02's exercise lets you compare with 0.025 and 0.25) and 0.25 for CBOW. The original tool adds
    the full gradient of the context average to every context word; here autograd differentiates the average
    itself, which divides that gradient by the number of context words (about 6 with ``window=5``), so CBOW
    needs a rate several times larger for the same step per word.
    """

    mode: str = "skipgram"
    dim: int = 100
    window: int = 5
    negatives: int = 5
    subsample: float = 1e-4
    epochs: int = 5
    batch_size: int = 1024
    lr: float | None = None
    min_lr_fraction: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("dim", "window", "negatives", "epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.lr is None:
            self.lr = 0.05 if self.mode == "skipgram" else 0.25
        if self.lr <= 0 or self.subsample <= 0 or not 0 < self.min_lr_fraction <= 1:
            raise ValueError(
                f"lr and subsample must be positive and min_lr_fraction in (0, 1], got lr={self.lr}, "
                f"subsample={self.subsample}, min_lr_fraction={self.min_lr_fraction}"
            )


@dataclass
class Word2VecRun:
    """A trained model and its loss per batch (mean negative-sampling loss of the batch)."""

    model: Word2Vec
    config: Word2VecConfig
    losses: list[float] = field(default_factory=list)
    pairs_seen: int = 0


def _batch_losses(
    model: Word2Vec,
    config: Word2VecConfig,
    columns: tuple[Tensor, ...],
    order: Tensor,
    noise: Tensor,
    generator: torch.Generator,
) -> Callable[[], BatchLoss]:
    """The batches of one epoch in ``order`` (examples,): each call takes the next ``config.batch_size`` examples
    of ``columns`` (skip-gram: centers, contexts; CBOW: windows, mask, centers), draws their negatives and gives
    the summed loss to back-propagate (so each example moves the vectors as much as one update of the original
    one-example-at-a-time tool) and its mean per example to record."""
    starts = iter(range(0, order.numel(), config.batch_size))
    loss_fn = model.skipgram_loss if config.mode == "skipgram" else model.cbow_loss

    def batch_loss() -> BatchLoss:
        start = next(starts)
        idx = order[start : start + config.batch_size]
        negatives = sample_negatives(noise, (idx.numel(), config.negatives), generator)
        loss = loss_fn(*(column[idx] for column in columns), negatives)  # (batch,)
        return BatchLoss(loss.sum(), recorded=loss.detach().mean(), tokens=idx.numel())

    return batch_loss


def _decayed_lr(step: int, config: Word2VecConfig, epoch: int, batches: int) -> float:
    """The rate of update ``step`` (from 1) of epoch ``epoch`` (from 0): linear decay over all epochs."""
    progress = (epoch + (step - 1) / batches) / config.epochs
    return config.lr * max(config.min_lr_fraction, 1.0 - progress)


def train_word2vec(ids: Tensor, counts: Tensor | Sequence[int], config: Word2VecConfig | None = None) -> Word2VecRun:
    """Train word2vec on a running text for a fixed number of epochs.

    ids: (n,) word ids of the text; counts: (vocab,) how often each word occurs (for subsampling and the
    noise distribution). Each epoch subsamples the text afresh, builds the pairs (skip-gram) or windows
    (CBOW), shuffles them and takes SGD steps (one :func:`~transformer_course.training.loop.run_training` per epoch) on
    the summed loss of each batch, so each example moves the
    vectors as much as one update of the original one-example-at-a-time tool. Deterministic for a given
    ``config.seed`` (use one torch thread for bit-identical runs).
    """
    config = config or Word2VecConfig()
    _check_ids(ids)
    counts = torch.as_tensor(counts)
    if ids.dim() != 1 or ids.numel() < 2:
        raise ValueError(f"ids must be a 1-D tensor of at least 2 word ids, got shape {tuple(ids.shape)}")
    vocab_size = counts.numel()
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(
            f"ids must lie in [0, {vocab_size}) (one count per word), got {int(ids.min())}..{int(ids.max())}"
        )
    g = torch.Generator().manual_seed(config.seed)
    model = Word2Vec(vocab_size, config.dim, sparse=True, generator=g)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    noise = unigram_distribution(counts)
    keep = keep_probabilities(counts, config.subsample)
    run = Word2VecRun(model=model, config=config)
    for epoch in range(config.epochs):
        kept = subsample(ids, keep, g)
        if config.mode == "skipgram":
            columns = skipgram_pairs(kept, config.window, g)  # (centers, contexts)
        else:
            columns = cbow_windows(kept, config.window, g)  # (windows, mask, centers)
        examples = columns[0].shape[0]
        order = torch.randperm(examples, generator=g)
        if examples == 0:  # nothing survived the subsampling
            continue
        batches = math.ceil(examples / config.batch_size)
        batch_loss = _batch_losses(model, config, columns, order, noise, g)
        lr_at = partial(_decayed_lr, config=config, epoch=epoch, batches=batches)
        history = run_training(model, optimizer, batch_loss, lr_at, batches, progress=False)
        run.losses += history.loss
        run.pairs_seen += history.tokens_seen
    return run


def cosine_similarities(vectors: Tensor, query: Tensor) -> Tensor:
    """Cosine similarity of every row of ``vectors`` (vocab, dim) with ``query`` (dim,) -> (vocab,)."""
    if vectors.dim() != 2 or query.shape != vectors.shape[1:]:
        raise ValueError(
            f"vectors must be (vocab, dim) and query (dim,), got {tuple(vectors.shape)} and {tuple(query.shape)}"
        )
    return F.normalize(vectors, dim=1) @ F.normalize(query, dim=0)


def nearest_neighbours(vectors: Tensor, vocab: WordVocabulary, word: str, k: int = 8) -> list[tuple[str, float]]:
    """The ``k`` words whose vectors have the highest cosine similarity with ``word``'s, itself excluded.

    vectors: (vocab, dim). Returns [(word, cosine), ...], most similar first. Raises ``ValueError`` naming
    ``word`` if it is not in the vocabulary.
    """
    if len(vocab) != vectors.shape[0]:
        raise ValueError(f"vectors has {vectors.shape[0]} rows but the vocabulary {len(vocab)} words")
    idx = vocab.id(word)
    sims = cosine_similarities(vectors, vectors[idx]).clone()
    sims[idx] = -float("inf")
    top = sims.topk(min(k, len(vocab) - 1))
    return [(vocab.words[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


def analogy(vectors: Tensor, vocab: WordVocabulary, a: str, b: str, c: str, k: int = 5) -> list[tuple[str, float]]:
    """ "a is to b as c is to ?": the words nearest (cosine) to v_b - v_a + v_c, excluding a, b and c.

    Works on unit-length vectors, as the original tool does. Returns [(word, cosine), ...].
    """
    ia, ib, ic = vocab.ids([a, b, c])
    unit = F.normalize(vectors, dim=1)
    sims = cosine_similarities(unit, unit[ib] - unit[ia] + unit[ic]).clone()
    sims[[ia, ib, ic]] = -float("inf")
    top = sims.topk(min(k, len(vocab) - 3))
    return [(vocab.words[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]
