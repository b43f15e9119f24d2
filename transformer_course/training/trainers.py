"""The sequence-to-sequence training, the training of any model with a loss function, and evaluation.

* :class:`TrainConfig` and :func:`train`: the sequence-to-sequence run, one :func:`training_step` per update
  (teacher forcing, :func:`~transformer_course.training.losses.label_smoothing_loss`, backward, clip, scheduled learning
  rate, Adam). Several processes (DDP) and mixed precision wrap that step, set up before the loop by
  :mod:`transformer_course.training.distributed`; the step is the same with or without them.
* :func:`train_steps`: the same for any model with a loss function (the models of notebook 11).
* Both are a short setup of :func:`~transformer_course.training.loop.run_training`, the course's one loop (one
  :class:`~transformer_course.training.loop.History`, one :class:`~transformer_course.training.loop.ProgressLine`).
* :func:`evaluate`: greedy decoding of a held-out set; token accuracy and exact-match accuracy.

The loss and the schedules are in :mod:`~transformer_course.training.losses` and
:mod:`~transformer_course.training.schedules`; checkpoints and the course's recipe in
:mod:`~transformer_course.training.checkpoints` and :mod:`~transformer_course.training.recipes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor, nn

from .. import checks
from ..core.decoding import greedy_decode
from ..core.model import Transformer
from ..language import tr
from ..text.tasks import PAD_ID, Batch, Vocabulary, make_batch
from .distributed import DistributedContext, mean_across_processes, sharded, with_autocast, wrap_model
from .loop import BatchLoss, History, run_training
from .losses import label_smoothing_loss
from .schedules import make_optimizer, noam_lr, optimizer_update, warmup_linear_lr

SCHEDULES = ("linear", "noam", "constant")


@dataclass
class TrainConfig:
    """Everything about a training run that is not the model.

    schedule "linear": :func:`warmup_linear_lr` with peak ``lr``, ``warmup`` steps, decay to
    ``final_lr_fraction`` * lr at ``decay_steps`` (default: the last step). "noam": :func:`noam_lr` with
    factor ``lr``. "constant": ``lr`` throughout.
    """

    steps: int = 1000
    batch_size: int = 64
    lr: float = 2e-3
    schedule: str = "linear"
    warmup: int = 100
    decay_steps: int | None = None
    final_lr_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float | None = 1.0
    label_smoothing: float = 0.0
    seed: int = 0
    log_every: int = 50

    def __post_init__(self) -> None:
        checks.positive_ints(steps=self.steps, batch_size=self.batch_size, log_every=self.log_every)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {self.clip_norm}")
        if self.schedule == "linear" and self.decay_at <= self.warmup:
            raise ValueError(f"decay_steps ({self.decay_at}) must be larger than warmup ({self.warmup})")
        self.betas = tuple(self.betas)

    @property
    def decay_at(self) -> int:
        return self.steps if self.decay_steps is None else self.decay_steps

    def lr_at(self, step: int, d_model: int) -> float:
        """The learning rate of update number ``step`` (from 1)."""
        if self.schedule == "noam":
            return noam_lr(step, d_model, self.warmup, self.lr)
        if self.schedule == "linear":
            return warmup_linear_lr(step, self.lr, self.warmup, self.decay_at, self.final_lr_fraction)
        return self.lr

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Task(Protocol):
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch: ...

    def eval_pairs(self, n: int = ..., seed: int = ...) -> list: ...


# ---- The sequence-to-sequence run -------------------------------------------------------------------------


class StepResult(NamedTuple):
    """What one :func:`training_step` measured: the loss, the gradient norm before clipping (None without
    clipping) and the teacher-forced token accuracy of the batch (scalar tensors, of this process's rows)."""

    loss: Tensor
    grad_norm: Tensor | None
    accuracy: Tensor


def teacher_forced_loss(model: nn.Module, batch: Batch, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """Run ``model`` with teacher forcing (decoder input = target shifted right) and score it with
    :func:`label_smoothing_loss` over the non-padding positions.

    batch.src: (batch, len_s), batch.tgt_in and batch.tgt_out: (batch, len_t). Returns (loss, a scalar;
    logits, (batch, len_t, tgt_vocab)).
    """
    logits = model(batch.src, batch.tgt_in)  # (batch, len_t, vocab)
    return label_smoothing_loss(logits, batch.tgt_out, smoothing, PAD_ID), logits


def _teacher_forced_batch(
    model: nn.Module, batch: Batch, loss_fn: Callable[[nn.Module, Batch], tuple[Tensor, Tensor]]
) -> BatchLoss:
    """``loss_fn(model, batch)`` and the teacher-forced token accuracy over the non-padding positions of
    batch.tgt_out (batch, len_t)."""
    loss, logits = loss_fn(model, batch)
    with torch.no_grad():
        real = batch.tgt_out != PAD_ID
        accuracy = ((logits.argmax(-1) == batch.tgt_out) & real).sum() / real.sum()
    return BatchLoss(loss, accuracy=accuracy)


def training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    lr: float,
    clip_norm: float | None = 1.0,
    loss_fn: Callable[[nn.Module, Batch], tuple[Tensor, Tensor]] = teacher_forced_loss,
) -> StepResult:
    """One update of a sequence-to-sequence model on one batch, the one :func:`train` makes: ``loss_fn(model,
    batch)`` (by default :func:`teacher_forced_loss`), then :func:`optimizer_update` with learning rate ``lr``.

    batch.src: (batch, len_s), batch.tgt_in and batch.tgt_out: (batch, len_t). ``model`` may be the model or a
    wrapper of it (DistributedDataParallel); ``loss_fn`` may run under autocast. Returns a :class:`StepResult`.
    """
    result = _teacher_forced_batch(model, batch, loss_fn)
    grad_norm = optimizer_update(optimizer, result.loss, lr, clip_norm)
    return StepResult(result.loss.detach(), grad_norm, result.accuracy)


def train(
    model: Transformer,
    task: Task,
    config: TrainConfig,
    progress: bool = True,
    device: torch.device | str | None = None,
    callback: Callable[[int, float], bool | None] | None = None,
    distributed: DistributedContext | None = None,
    amp: bool = False,
) -> History:
    """Train ``model`` in place on batches drawn from ``task`` for exactly ``config.steps`` updates.

    Each update draws a batch (with a generator seeded by ``config.seed``, so the data order is fixed) and makes
    one :func:`training_step`: teacher forcing, :func:`label_smoothing_loss` over the non-padding positions,
    backward, clipping, the scheduled learning rate, Adam. ``callback(step, loss)`` runs after every update; if it
    returns True, training stops there. Returns the :class:`~transformer_course.training.loop.History` (loss, lr,
    grad_norm when clipping, batch_accuracy).

    ``distributed`` (see :mod:`transformer_course.training.distributed`): this process trains on its slice of each
    global batch of ``config.batch_size`` rows through DistributedDataParallel, and the history records losses
    averaged over the processes. ``amp``: bfloat16 autocast for the forward pass and the loss.
    """
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device)
    d_model = model.config.d_model
    # Several processes and mixed precision wrap the step; the loop is the same without them.
    step_model = wrap_model(model, distributed)
    loss_fn = with_autocast(partial(teacher_forced_loss, smoothing=config.label_smoothing), device, amp)
    optimizer = make_optimizer(model, config.lr, config.betas, config.adam_eps, config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    next_batch = sharded(lambda: task.train_batch(config.batch_size, generator), distributed)

    def lr_text(recent: Sequence[float], lr: float) -> str:
        return f"{tr('loss', '损失')} {sum(recent) / len(recent):.4f}  {tr('lr', '学习率')} {lr:.2e}"

    return run_training(
        model,
        optimizer,
        lambda: _teacher_forced_batch(step_model, next_batch().to(device), loss_fn),
        partial(config.lr_at, d_model=d_model),
        config.steps,
        clip_norm=config.clip_norm,
        stop=callback,
        reduce=partial(mean_across_processes, context=distributed),
        progress=progress,
        log_every=config.log_every,
        progress_text=lr_text,
    )


# ---- Any model with a loss function ------------------------------------------------------------------------


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
) -> History:
    """Train ``model`` for exactly ``steps`` updates.

    ``batch_loss(generator)`` draws a batch with ``generator`` (seeded by ``seed``, so the data order is fixed),
    runs the model and returns the scalar loss. Each update back-propagates it, clips the gradient norm, sets the
    learning rate of :func:`~transformer_course.training.schedules.warmup_linear_lr` (linear warm-up to ``lr``, then
    linear decay to lr / 10) and steps Adam (:func:`~transformer_course.training.schedules.make_optimizer`).
    Parameters with ``requires_grad=False`` (a frozen encoder) are left alone. Prints one progress line; returns the
    :class:`~transformer_course.training.loop.History` (loss, lr, grad_norm when clipping).
    """
    checks.positive_ints(steps=steps, log_every=log_every)
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup must be in [0, steps={steps}), got {warmup}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    optimizer = make_optimizer(nn.ParameterList(trainable), lr, weight_decay=weight_decay)  # it takes a module
    generator = torch.Generator().manual_seed(seed)
    return run_training(
        model,
        optimizer,
        lambda: BatchLoss(batch_loss(generator)),
        partial(warmup_linear_lr, peak_lr=lr, warmup=warmup, decay_steps=steps),
        steps,
        clip_norm=clip_norm,
        progress=progress,
        log_every=log_every,
    )


# ---- Evaluation --------------------------------------------------------------------------------------------


@dataclass
class EvalResult:
    """Greedy-decoding results on an evaluation set.

    token_accuracy: fraction of target positions (<eos> included) where the output has the right token.
    exact_match: fraction of examples whose whole output equals the target.
    """

    token_accuracy: float
    exact_match: float
    sources: list[str]
    targets: list[str]
    predictions: list[str]

    def mistakes(self) -> list[tuple[str, str, str]]:
        """(source, target, prediction) for every example the model got wrong."""
        return [(s, t, p) for s, t, p in zip(self.sources, self.targets, self.predictions) if t != p]


def _as_text(tokens: Sequence[str]) -> str:
    return tokens if isinstance(tokens, str) else " ".join(tokens)


@torch.no_grad()
def evaluate(
    model: Transformer,
    task: Task,
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    batch_size: int = 500,
    max_len: int = 32,
) -> EvalResult:
    """Greedy-decode every source in ``pairs`` (batched) and score the outputs against the targets.

    Each batch: src (batch, len_s) in, greedy tokens (batch, <= max_len) out, compared with tgt_out (batch, len_t).
    """
    if not pairs:
        raise ValueError("evaluate needs at least one (source, target) pair, got none")
    model.eval()
    device = next(model.parameters()).device
    correct_tokens = total_tokens = exact = 0
    predictions: list[str] = []
    sep = "" if isinstance(pairs[0][1], str) else " "
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        batch = make_batch(chunk, task.src_vocab, task.tgt_vocab).to(device)
        out = greedy_decode(model, batch.src, max_len=max_len)
        target = batch.tgt_out  # (batch, len_t) with <eos>
        steps = min(out.tokens.shape[1], target.shape[1])
        padded = torch.full_like(target, PAD_ID)
        padded[:, :steps] = out.tokens[:, :steps]
        real = target != PAD_ID
        same = (padded == target) & real
        correct_tokens += int(same.sum())
        total_tokens += int(real.sum())
        row_ok = same.sum(dim=1) == real.sum(dim=1)
        # a row is exact only if it also stopped right after its <eos> (nothing extra can follow an <eos>)
        exact += int(row_ok.sum())
        predictions += [task.tgt_vocab.decode(row.tolist(), sep=sep) for row in out.tokens]
    return EvalResult(
        token_accuracy=correct_tokens / total_tokens,
        exact_match=exact / len(pairs),
        sources=[_as_text(s) for s, _ in pairs],
        targets=[_as_text(t) for _, t in pairs],
        predictions=predictions,
    )


__all__ = [
    "SCHEDULES",
    "EvalResult",
    "StepResult",
    "Task",
    "TrainConfig",
    "evaluate",
    "teacher_forced_loss",
    "train",
    "train_steps",
    "training_step",
]
