"""Exercises of notebook 09 (training): their checkers and reference solutions.

1. ``check_shift_right(fn)``: ``fn(tgt_out, bos_id, pad_id)`` builds the teacher-forcing decoder input.
2. ``check_smoothed_loss(fn)``: ``fn(logits, target, eps, pad_id)`` is cross-entropy with label smoothing
   (PyTorch's convention, eps / V on every class), averaged over the non-padding positions only.
3. ``check_noam_rate(fn)``: ``fn(step, d_model, warmup)`` is the paper's warm-up schedule.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, report


def reference_shift_right(tgt_out: Tensor, bos_id: int = 1, pad_id: int = 0) -> Tensor:
    """Reference solution of exercise 1.

    tgt_out: (batch, len) the tokens the decoder must predict, ``y_1 ... y_n <eos>`` then padding.
    Returns (batch, len): ``<bos> y_1 ... y_n`` then padding; the <eos> is never fed to the decoder.
    """
    shifted = torch.cat([torch.full_like(tgt_out[:, :1], bos_id), tgt_out[:, :-1]], dim=1)
    return shifted.masked_fill(tgt_out == pad_id, pad_id)  # where the output is padding, so is the input


def reference_smoothed_loss(logits: Tensor, target: Tensor, eps: float, pad_id: int = 0) -> Tensor:
    """Reference solution of exercise 2. logits: (..., V), target: (...). Returns a scalar."""
    vocab = logits.shape[-1]
    log_probs = F.log_softmax(logits, dim=-1)
    q = (1 - eps) * F.one_hot(target, vocab).to(log_probs.dtype) + eps / vocab  # smoothed targets (..., V)
    per_position = -(q * log_probs).sum(-1)  # (...)
    real = target != pad_id
    return per_position[real].mean()


def reference_noam_rate(step: int, d_model: int, warmup: int) -> float:
    """Reference solution of exercise 3: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


# ----------------------------------------------------------------------------------------------- exercise 1
def _shift_cases() -> Tensor:
    # two rows of different lengths: (y = 7 8 9, <eos>=2) and (y = 5, <eos>, pad, pad)
    return torch.tensor([[7, 8, 9, 2], [5, 2, 0, 0]])


def _check_shift_right(fn: Callable[[Tensor, int, int], Tensor]) -> None:
    tgt_out = _shift_cases()
    result = fn(tgt_out.clone(), 1, 0)
    expected = reference_shift_right(tgt_out, 1, 0)
    expect(isinstance(result, Tensor), f"return a torch.Tensor, got {type(result).__name__}")
    expect(
        tuple(result.shape) == tuple(expected.shape),
        f"the decoder input has shape {tuple(result.shape)}, expected {tuple(expected.shape)} (same as tgt_out)",
    )
    r = result.long()
    if torch.equal(r[:, :-1], tgt_out[:, 1:]):
        raise ExerciseMistake("you shifted left; the decoder input is the target shifted RIGHT, <bos> in front.")
    expect(bool((r[:, 0] == 1).all()), "every row of the decoder input must start with <bos> (id 1).")
    if bool((r == 2).any()):
        raise ExerciseMistake("the decoder input still contains <eos>: it predicts <eos>, it is never fed one.")
    if not torch.equal(r[tgt_out == 0], torch.zeros_like(r[tgt_out == 0])):
        raise ExerciseMistake("keep <pad> (id 0) wherever tgt_out is padding, so those positions stay masked.")
    expect(torch.equal(r, expected), f"expected {expected.tolist()}, got {r.tolist()}")


def check_shift_right(fn: Callable[[Tensor, int, int], Tensor]) -> bool:
    """Exercise 1: ``fn(tgt_out, bos_id, pad_id)`` returns the decoder input for teacher forcing."""
    return report("Exercise 1 (teacher forcing: shift right)", lambda: _check_shift_right(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def _loss_inputs() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(3, 6, 8, generator=g) * 2
    target = torch.randint(3, 8, (3, 6), generator=g)
    target[0, 4:] = 0
    target[1, 2:] = 0  # a lot of padding, so counting it changes the mean a lot
    return logits, target


def _check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> None:
    logits, target = _loss_inputs()
    vocab = logits.shape[-1]
    for eps in (0.0, 0.1, 0.3):
        result = fn(logits.clone(), target.clone(), eps, 0)
        expected = reference_smoothed_loss(logits, target, eps, 0)
        expect(isinstance(result, Tensor), f"return a torch.Tensor, got {type(result).__name__}")
        expect(result.dim() == 0, f"return one number (a 0-d tensor), got shape {tuple(result.shape)}")
        r = float(result)
        log_probs = F.log_softmax(logits, -1)
        with_padding = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=eps)
        if abs(r - float(with_padding)) < 1e-5 and abs(r - float(expected)) > 1e-4:
            raise ExerciseMistake(f"eps={eps}: the padding positions are in your mean; average over target != pad_id.")
        if eps > 0:
            q = (1 - eps) * F.one_hot(target, vocab) + eps / (vocab - 1) * (1 - F.one_hot(target, vocab))
            others = (-(q * log_probs).sum(-1))[target != 0].mean()
            if abs(r - float(others)) < 1e-5:
                raise ExerciseMistake(
                    f"eps={eps}: you put eps/(V-1) on the other classes; this exercise uses PyTorch's convention, "
                    "(1 - eps) one_hot + eps/V on every class."
                )
            plain = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0)
            if abs(r - float(plain)) < 1e-5:
                raise ExerciseMistake(f"eps={eps}: that is the loss without smoothing; mix eps/V into the targets.")
        expect_close(result, expected, f"the loss for eps={eps}", atol=1e-5)


def check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> bool:
    """Exercise 2: ``fn(logits, target, eps, pad_id)`` returns the label-smoothed loss over real tokens."""
    return report("Exercise 2 (label smoothing, padding excluded)", lambda: _check_smoothed_loss(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def _check_noam_rate(fn: Callable[[int, int, int], float]) -> None:
    cases = [(1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (20000, 512, 4000), (50, 64, 100), (900, 64, 100)]
    for step, d_model, warmup in cases:
        result = fn(step, d_model, warmup)
        expected = reference_noam_rate(step, d_model, warmup)
        try:
            value = float(result)
        except (TypeError, ValueError):
            raise ExerciseMistake(f"return a number, got {type(result).__name__}") from None
        if abs(value - d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)) < 1e-12 and abs(value - expected) > 1e-12:
            raise ExerciseMistake("use min(...), not max(...): the rate follows the smaller of the two curves.")
        if abs(value - expected * d_model**0.5) < 1e-12:
            raise ExerciseMistake("multiply by d_model ** -0.5.")
        expect(
            abs(value - expected) <= 1e-9 * max(1.0, abs(expected)) + 1e-12,
            f"step={step}, d_model={d_model}, warmup={warmup}: expected {expected:.6g}, got {value:.6g}",
        )


def check_noam_rate(fn: Callable[[int, int, int], float]) -> bool:
    """Exercise 3: ``fn(step, d_model, warmup)`` returns d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return report("Exercise 3 (the warm-up schedule)", lambda: _check_noam_rate(fn))
