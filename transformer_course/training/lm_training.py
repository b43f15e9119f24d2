"""Training a decoder-only language model on one long text, as small GPTs are trained on a CPU.

* :class:`LMTrainConfig`: AdamW over random windows (weight decay on the weight matrices only), a linear warm-up
  then a cosine decay, gradient clipping.
* :func:`train_language_model` sets up :func:`~transformer_course.training.loop.run_training`, the course's one loop: a
  fixed number of steps (what a notebook does, so its run repeats) or a wall-clock budget (what a benchmark
  does); :func:`held_out_loss` scores the held-out tail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..language import tr
from ..text.lm_data import random_windows
from .loop import BatchLoss, History, run_training
from .schedules import make_optimizer, warmup_cosine_lr


@dataclass(frozen=True)
class LMTrainConfig:
    """AdamW on random windows: ``lr`` peaks after ``warmup`` steps and decays along a cosine to ``min_lr`` at
    ``steps``; gradients clipped to ``clip_norm`` (None: off)."""

    steps: int = 2000
    batch_size: int = 12
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.1
    clip_norm: float | None = 1.0
    seed: int = 0
    eval_every: int = 0  # 0: evaluate the held-out loss only at the end

    def __post_init__(self) -> None:
        checks.positive_ints(steps=self.steps, batch_size=self.batch_size)
        checks.non_negative_int("warmup", self.warmup)
        checks.non_negative_int("eval_every", self.eval_every)
        if self.warmup >= self.steps:
            raise ValueError(f"warmup={self.warmup} must be smaller than steps={self.steps}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"need 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")


@torch.no_grad()
def held_out_loss(model: nn.Module, ids: Tensor, context: int, max_windows: int | None = None) -> float:
    """Mean next-token loss (nats/token) over consecutive, non-overlapping windows of ``ids`` (n,).

    Every window is scored at all its positions, so early positions see little context, as in training.
    """
    checks.positive_int("context", context)
    windows = (len(ids) - 1) // context
    if windows < 1:
        raise ValueError(f"{len(ids)} held-out ids are fewer than one window of context={context} plus one")
    if max_windows is not None:
        windows = min(windows, max_windows)
    x = ids[: windows * context].view(windows, context)
    y = ids[1 : windows * context + 1].view(windows, context)
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, windows, 64):  # batches of windows, to bound memory
        logits = model(x[start : start + 64])
        total += F.cross_entropy(logits.flatten(0, 1), y[start : start + 64].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / (windows * context)


def train_language_model(
    model: nn.Module,
    train_ids: Tensor,
    held_out_ids: Tensor,
    context: int,
    config: LMTrainConfig,
    seconds: float | None = None,
    progress: bool = False,
    eval_windows: int | None = 200,
    extra_loss: Callable[[], Tensor] | None = None,
) -> History:
    """Train ``model`` on random windows of ``train_ids`` (n_train,) for ``config.steps`` updates, or until
    ``seconds`` of training have passed (a benchmark's budget; the schedule still spans ``config.steps``).

    Each window x (batch_size, context) is scored by next-token cross-entropy on the logits (batch_size, context,
    vocab). The held-out loss of ``held_out_ids`` (at most ``eval_windows`` windows) is measured every
    ``config.eval_every`` steps and at the end; evaluation time is not counted in ``history.seconds``. Returns
    the :class:`~transformer_course.training.loop.History` (loss, lr, eval_steps, eval_loss, tokens_seen, seconds).

    ``extra_loss``: called after each forward pass, returns a scalar tensor added to the loss that is back-propagated
    (a mixture-of-experts model's load-balancing loss, :func:`~transformer_course.families.moe.balance_loss`); the
    recorded loss stays the cross-entropy. Only the parameters with ``requires_grad`` are trained (a frozen model
    with LoRA updates trains only those).
    """
    checks.positive_int("context", context)
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"seconds must be >= 0 or None (no budget), got {seconds!r}")
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = make_optimizer(
        model, config.lr, config.betas, eps=1e-8, weight_decay=config.weight_decay, decay_matrices_only=True
    )

    def batch_loss() -> BatchLoss:
        x, y = random_windows(train_ids, config.batch_size, context, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        if extra_loss is None:
            return BatchLoss(loss, tokens=x.numel())
        return BatchLoss(loss + extra_loss(), recorded=loss.detach(), tokens=x.numel())

    def train_loss_text(recent: Sequence[float], lr: float) -> str:
        return tr(
            f"train loss {sum(recent) / len(recent):.3f} (mean of the last {len(recent)})",
            f"训练损失 {sum(recent) / len(recent):.3f}（最近 {len(recent)} 步的平均）",
        )

    return run_training(
        model,
        optimizer,
        batch_loss,
        partial(
            warmup_cosine_lr, peak_lr=config.lr, warmup=config.warmup, decay_steps=config.steps, final_lr=config.min_lr
        ),
        config.steps,
        clip_norm=config.clip_norm,
        seconds=seconds,
        held_out=lambda: held_out_loss(model, held_out_ids, context, eval_windows),
        eval_every=config.eval_every,
        progress=progress,
        progress_text=train_loss_text,
    )
