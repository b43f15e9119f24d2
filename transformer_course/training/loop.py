"""The one training loop of the course: every model it trains goes through :func:`run_training`.

A caller sets up the model, the optimizer and a function that computes one batch's loss; the loop does the rest,
the same way for all of them: the scheduled learning rate,
:func:`~transformer_course.training.schedules.optimizer_update` (backward, clipping, the rate, the step: the only
``.backward()`` of the package's training), one :class:`History`, one :class:`ProgressLine`, held-out evaluations, and
the stop: a number of steps (what a notebook uses, so its run repeats) or a wall-clock budget in seconds (what a
benchmark uses).

Who sets it up: :func:`~transformer_course.training.trainers.train` (sequence-to-sequence),
:func:`~transformer_course.training.trainers.train_steps` (any model with a loss function),
:func:`~transformer_course.training.lm_training.train_language_model`,
:func:`~transformer_course.prelude.rnn.train_recall` and :func:`~transformer_course.prelude.word2vec.train_word2vec`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, TextIO

import torch
from torch import Tensor, nn

from .. import checks
from ..language import tr
from .schedules import optimizer_update


class BatchLoss(NamedTuple):
    """What one batch gave the loop.

    loss: the scalar to back-propagate. recorded: the scalar the history records if it is not ``loss`` (word2vec
    back-propagates the sum over its examples and records their mean). accuracy: the batch's accuracy (a scalar),
    if the model has one. tokens: how many tokens (or examples) the batch held, added to ``History.tokens_seen``.
    """

    loss: Tensor
    recorded: Tensor | None = None
    accuracy: Tensor | None = None
    tokens: int = 0


@dataclass
class History:
    """What a training run measured: one entry per update in ``loss`` and ``lr``, and in ``grad_norm`` (the norm
    before clipping, where the run clips) and ``batch_accuracy`` (where the batch gives one); the held-out losses
    at ``eval_steps``; the tokens seen and the seconds of training (evaluation not counted)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    batch_accuracy: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    tokens_seen: int = 0
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        """The number of updates made."""
        return len(self.loss)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_seen / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProgressLine:
    """One status line, rewritten in place with a carriage return: a terminal, JupyterLab and nbval all show
    (and nbval compares) only its final state. The text holds no times, so it is the same on every run."""

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None, width: int = 20) -> None:
        self.total, self.enabled, self.width = total, enabled, width
        self.stream = sys.stdout if stream is None else stream

    def update(self, step: int, text: str) -> None:
        if self.enabled:
            filled = round(self.width * step / self.total)
            bar = "#" * filled + "." * (self.width - filled)
            counter = f"{step:>{len(str(self.total))}}/{self.total}"
            self.stream.write("\r" + tr(f"step {counter}", f"第 {counter} 步") + f" [{bar}] {text}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def mean_loss_text(recent: Sequence[float], lr: float) -> str:
    """The progress line's default text: the mean loss of the last ``log_every`` updates."""
    return f"{tr('loss', '损失')} {sum(recent) / len(recent):.4f}"


def run_training(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch_loss: Callable[[], BatchLoss],
    lr_at: Callable[[int], float],
    steps: int,
    *,
    clip_norm: float | None = None,
    seconds: float | None = None,
    stop: Callable[[int, float], bool | None] | None = None,
    held_out: Callable[[], float] | None = None,
    eval_every: int = 0,
    reduce: Callable[[Tensor], Tensor] | None = None,
    progress: bool = True,
    log_every: int = 50,
    progress_text: Callable[[Sequence[float], float], str] = mean_loss_text,
) -> History:
    """Train ``model`` in place for ``steps`` updates, or until ``seconds`` of training have passed (a benchmark's
    budget; the schedule still spans ``steps``), or until ``stop(step, loss)`` returns True.

    Each update: ``batch_loss()`` draws a batch and computes its :class:`BatchLoss` (the caller owns the seeded
    generator, so the data order is fixed), then :func:`~transformer_course.training.schedules.optimizer_update` with
    the rate ``lr_at(step)`` (step from 1) clips the gradient norm of the model's parameters that ``optimizer`` holds,
    in ``model.parameters()`` order, to ``clip_norm`` (None: no clipping, and no norm recorded). ``reduce`` turns a
    number of this process into the run's (the mean across processes under DDP) before it is recorded.
    ``held_out()`` (a held-out loss) runs every ``eval_every`` steps (0: never in between) and after the last.
    The progress line shows ``progress_text(recent losses, lr)`` every ``log_every`` steps and after the last.
    Returns the :class:`History`; the model is left in eval mode.
    """
    checks.positive_ints(steps=steps, log_every=log_every)
    checks.non_negative_int("eval_every", eval_every)
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"seconds must be >= 0 or None, got {seconds}")
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm}")
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    # The order of the norm's sum decides its last bit: the model's order, whatever the optimizer's groups.
    clipped = [p for p in model.parameters() if id(p) in in_optimizer]
    reduce = (lambda value: value) if reduce is None else reduce
    history = History()
    line = ProgressLine(steps, progress)
    model.train()
    for step in range(1, steps + 1):
        started = time.perf_counter()
        lr = lr_at(step)
        batch = batch_loss()
        grad_norm = optimizer_update(optimizer, batch.loss, lr, clip_norm, clipped)
        history.seconds += time.perf_counter() - started
        recorded = batch.loss.detach() if batch.recorded is None else batch.recorded
        history.loss.append(reduce(recorded).item())
        history.lr.append(lr)
        if grad_norm is not None:
            history.grad_norm.append(grad_norm.item())
        if batch.accuracy is not None:
            history.batch_accuracy.append(reduce(batch.accuracy).item())
        history.tokens_seen += batch.tokens
        halt = (seconds is not None and history.seconds >= seconds) or (
            stop is not None and stop(step, history.loss[-1]) is True
        )
        last = step == steps or halt
        if held_out is not None and (last or (eval_every and step % eval_every == 0)):
            history.eval_steps.append(step)
            history.eval_loss.append(held_out())
        if step % log_every == 0 or last:
            line.update(step, progress_text(history.loss[-log_every:], lr))
        if last:
            break
    line.close()
    model.eval()
    return history


def constant_lr(lr: float) -> Callable[[int], float]:
    """A schedule that is ``lr`` at every step."""
    if not (isinstance(lr, int | float) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    return lambda step: lr


__all__ = ["BatchLoss", "History", "ProgressLine", "constant_lr", "mean_loss_text", "run_training"]
