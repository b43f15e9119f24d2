"""Training a decoder-only language model on one long text, as small GPTs are trained on a CPU.

* :class:`LMTrainConfig`: AdamW over random windows, a linear warm-up then a cosine decay, gradient clipping.
* :func:`train_language_model` runs a fixed number of steps (what a notebook does, so its run repeats) or stops
  at a wall-clock budget (what a benchmark does); :func:`held_out_loss` scores the held-out tail.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import checks
from .lm_data import random_windows
from .schedules import warmup_cosine_lr
from .training import ProgressLine


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


@dataclass
class LMHistory:
    """What a run measured: the training loss per step (nats/token), held-out losses at ``eval_steps``, time."""

    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0
    tokens_seen: int = 0

    @property
    def steps(self) -> int:
        return len(self.loss)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_seen / self.seconds if self.seconds > 0 else float("nan")


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
) -> LMHistory:
    """Train ``model`` on random windows of ``train_ids`` for ``config.steps`` updates, or until ``seconds`` of
    training have passed (a benchmark's budget; the schedule still spans ``config.steps``).

    The held-out loss (at most ``eval_windows`` windows) is measured every ``config.eval_every`` steps and at the
    end; evaluation time is not counted in ``history.seconds``.
    """
    generator = torch.Generator().manual_seed(config.seed)
    decay, no_decay = [], []
    for parameter in {id(p): p for p in model.parameters()}.values():  # tied weights once
        (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=config.betas,
    )
    history = LMHistory()
    line = ProgressLine(config.steps, enabled=progress)
    model.train()
    elapsed = 0.0
    for step in range(1, config.steps + 1):
        started = time.perf_counter()
        x, y = random_windows(train_ids, config.batch_size, context, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine_lr(step, config.lr, config.warmup, config.steps, config.min_lr)
        optimizer.step()
        elapsed += time.perf_counter() - started
        history.loss.append(loss.item())
        history.tokens_seen += x.numel()
        last = step == config.steps or (seconds is not None and elapsed >= seconds)
        if last or (config.eval_every and step % config.eval_every == 0):
            history.eval_steps.append(step)
            history.eval_loss.append(held_out_loss(model, held_out_ids, context, eval_windows))
        if step % 50 == 0 or last:
            recent = history.loss[-50:]
            line.update(step, f"train loss {sum(recent) / len(recent):.3f} (mean of the last {len(recent)})")
        if last:
            break
    line.close()
    history.seconds = elapsed
    model.eval()
    return history
