"""Learning-rate schedules and the optimizer they drive.

* :func:`noam_lr`: the paper's schedule, a linear warm-up then a 1/sqrt(step) decay.
* :func:`warmup_linear_lr`: a linear warm-up to a peak, then a linear decay to a fraction of it.
* :func:`warmup_cosine_lr`: a linear warm-up to a peak, then a half cosine down to a floor (GPT-style training).
* :func:`make_optimizer`: Adam with the paper's betas (0.9, 0.98) and eps 1e-9 (AdamW with weight decay; optionally
  decay on the weight matrices only).
* :func:`optimizer_update`: one update with a scheduled rate: backward, gradient clipping, set the rate, step;
  the one ``.backward()`` of training, called by :func:`transformer_course.training.loop.run_training`.

A schedule gives the rate of update number ``step`` (counted from 1); the training loops set it on the optimizer
before every update, so the optimizer's own ``lr`` is only a starting value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for step >= 1.

    It rises linearly for ``warmup`` steps, peaks at factor * (d_model * warmup)^-0.5, then decays as 1/sqrt(step).
    """
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    if warmup < 1 or d_model < 1:
        raise ValueError(f"warmup and d_model must be >= 1, got warmup={warmup}, d_model={d_model}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_linear_lr(step: int, peak_lr: float, warmup: int, decay_steps: int, final_fraction: float = 0.1) -> float:
    """Linear warm-up from 0 to ``peak_lr`` over ``warmup`` steps, then linear decay to ``final_fraction`` *
    peak_lr at step ``decay_steps``, then constant. step >= 1."""
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    if warmup < 0 or decay_steps <= warmup:
        raise ValueError(f"need 0 <= warmup < decay_steps, got warmup={warmup}, decay_steps={decay_steps}")
    if step <= warmup:
        return peak_lr * step / warmup
    progress = min(1.0, (step - warmup) / (decay_steps - warmup))
    return peak_lr * (1.0 - (1.0 - final_fraction) * progress)


def warmup_cosine_lr(step: int, peak_lr: float, warmup: int, decay_steps: int, final_lr: float = 0.0) -> float:
    """Linear warm-up from 0 to ``peak_lr`` over ``warmup`` steps, then half a cosine from ``peak_lr`` down to
    ``final_lr`` at step ``decay_steps``, then constant. step >= 1."""
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    if warmup < 0 or decay_steps <= warmup:
        raise ValueError(f"need 0 <= warmup < decay_steps, got warmup={warmup}, decay_steps={decay_steps}")
    if not 0 <= final_lr <= peak_lr:
        raise ValueError(f"need 0 <= final_lr <= peak_lr, got final_lr={final_lr}, peak_lr={peak_lr}")
    if step <= warmup:
        return peak_lr * step / warmup
    progress = min(1.0, (step - warmup) / (decay_steps - warmup))
    return final_lr + 0.5 * (peak_lr - final_lr) * (1.0 + math.cos(math.pi * progress))


def make_optimizer(
    model: nn.Module,
    lr: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    weight_decay: float = 0.0,
    decay_matrices_only: bool = False,
) -> torch.optim.Optimizer:
    """Adam with the paper's betas and eps (AdamW, decoupled, when weight_decay > 0) over ``model.parameters()``.

    ``decay_matrices_only`` (GPT-style training): AdamW with two parameter groups, ``weight_decay`` for the
    weights with two or more dimensions (matrices, embeddings) and none for biases and norm scales; a weight tied
    between two modules is counted once. ``lr`` is the base rate the schedule multiplies; the training loop sets
    the real rate every step. Only the parameters with ``requires_grad`` are given to the optimizer, so a frozen
    weight is neither updated nor decayed.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    trainable = [p for p in model.parameters() if p.requires_grad]  # tied weights once: parameters() yields each once
    if not trainable:
        raise ValueError("the model has no parameter with requires_grad=True: nothing to train")
    if decay_matrices_only:
        decay = [p for p in trainable if p.dim() >= 2]
        no_decay = [p for p in trainable if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    if weight_decay > 0:
        return torch.optim.AdamW(trainable, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    return torch.optim.Adam(trainable, lr=lr, betas=betas, eps=eps)


def optimizer_update(
    optimizer: torch.optim.Optimizer,
    loss: Tensor,
    lr: float,
    clip_norm: float | None,
    parameters: Sequence[Tensor] | None = None,
) -> Tensor | None:
    """One update from a scalar ``loss``: back-propagate it, clip the gradient norm of ``parameters`` (default:
    the optimizer's, group by group) to ``clip_norm``, set every parameter group's learning rate to ``lr`` and step.

    Returns the gradient norm before clipping, a scalar tensor; with ``clip_norm=None`` nothing is clipped or
    measured (sparse gradients, as word2vec's, have no norm here) and it returns None. Parameters outside
    ``parameters`` (a frozen encoder) are neither clipped nor counted. The order of ``parameters`` is the order of
    the norm's sum, so it can change the norm's last bit.
    """
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = None
    if clip_norm is not None:
        if parameters is None:
            parameters = [p for group in optimizer.param_groups for p in group["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, clip_norm)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return grad_norm


__all__ = ["make_optimizer", "noam_lr", "optimizer_update", "warmup_cosine_lr", "warmup_linear_lr"]
