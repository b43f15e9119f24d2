"""Exercises of notebook 09 (training): their checkers and reference solutions.

9.1 ``check_smoothed_loss(fn)``: ``fn(logits, target, eps, pad_id)`` is the Annotated Transformer's smoothed loss:
    KL(q || p) with q = 1 - eps on the target, 0 on <pad>, eps / (V - 2) elsewhere, summed over the non-padding
    positions and divided by their number. (The notebook builds PyTorch's convention; this is the transfer.)
9.2 ``check_noam_rate(fn)``: ``fn(step, d_model, warmup)`` is the paper's warm-up schedule.
9.3 ``check_annotated_floor(fn)``: ``fn(vocab_size, eps)`` is the lowest value cross-entropy can reach against the
    Annotated Transformer's smoothed targets (eps / (V - 2) on every class but the target and <pad>): their entropy,
    as a formula (the checker passes eps = 0 and V = 1e12, too many classes for a tensor or a loop).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, report


def annotated_targets(target: Tensor, vocab: int, eps: float, pad_id: int = 0) -> Tensor:
    """The Annotated Transformer's smoothed targets, (..., V): fill eps / (V - 2), put 1 - eps on the target,
    set the <pad> column to 0. (Rows whose target is padding are dropped by the loss, not here.)"""
    q = torch.full((*target.shape, vocab), eps / (vocab - 2), dtype=torch.float64)
    q.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    q[..., pad_id] = 0.0
    return q


def reference_smoothed_loss(logits: Tensor, target: Tensor, eps: float, pad_id: int = 0) -> Tensor:
    """Reference solution of exercise 9.1, the Annotated Transformer's loss. logits: (..., V), target: (...).
    KL(q || p) = sum_v q_v (log q_v - log p_v), with 0 log 0 = 0, summed over the positions whose target is not
    padding and divided by their number. Returns a scalar."""
    log_p = F.log_softmax(logits.double(), dim=-1)
    q = annotated_targets(target, logits.shape[-1], eps, pad_id)
    real = target != pad_id  # the rows the Annotated Transformer keeps
    kl = (torch.xlogy(q, q) - q * log_p)[real].sum()
    return (kl / real.sum()).to(logits.dtype)


def reference_noam_rate(step: int, d_model: int, warmup: int) -> float:
    """Reference solution of exercise 9.2: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def reference_annotated_floor(vocab_size: int, eps: float) -> float:
    """Reference solution of exercise 9.3: the entropy of the Annotated Transformer's smoothed target for a real
    (non-padding) position, in nats. The target class gets 1 - eps, the <pad> class 0 and each of the other
    V - 2 classes eps / (V - 2); cross-entropy -sum(q log p) is smallest at p = q, where it equals this entropy."""
    if eps == 0:
        return 0.0
    return -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (vocab_size - 2))


# --------------------------------------------------------------------------------------------- exercise 9.1
def _loss_inputs() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(3, 6, 8, generator=g) * 2
    target = torch.randint(3, 8, (3, 6), generator=g)
    target[0, 4:] = 0
    target[1, 2:] = 0  # a lot of padding, so counting it changes the mean a lot
    return logits, target


def _kl_variant(logits: Tensor, target: Tensor, q: Tensor, rows: Tensor, count: int | Tensor) -> float:
    log_p = F.log_softmax(logits.double(), -1)
    return float((torch.xlogy(q, q) - q * log_p)[rows].sum() / count)


def _check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> None:
    logits, target = _loss_inputs()
    vocab = logits.shape[-1]
    real = target != 0
    every = torch.ones_like(real)
    for eps in (0.0, 0.1, 0.3):
        result = fn(logits.clone(), target.clone(), eps, 0)
        expected = reference_smoothed_loss(logits, target, eps, 0)
        expect(isinstance(result, Tensor), f"return a torch.Tensor, got {type(result).__name__}")
        expect(result.dim() == 0, f"return one number (a 0-d tensor), got shape {tuple(result.shape)}")
        r = float(result)
        expect(
            not math.isnan(r),
            f"eps={eps}: the loss is nan. Where q is 0 (the <pad> column), q log q is 0 * (-inf): take 0 log 0 = 0 "
            "(torch.xlogy(q, q) does, and so does F.kl_div).",
        )
        q = annotated_targets(target, vocab, eps)
        entropy = float(torch.xlogy(q, q)[real].sum() / real.sum())
        if eps > 0 and abs(r - (float(expected) - entropy)) < 1e-4:
            raise ExerciseMistake(
                f"eps={eps}: that is the cross-entropy -sum q log p; the Annotated Transformer's loss is the KL "
                "divergence sum q (log q - log p), which is smaller by the entropy of q."
            )
        wrong = {
            _kl_variant(logits, target, q, every, every.sum()): (
                "the positions whose target is <pad> are in your sum or your count: drop those rows and divide by "
                "the number of real tokens."
            ),
            _kl_variant(logits, target, q, every, real.sum()): (
                "the rows whose target is <pad> are in your sum: drop them (zero those rows of q) before summing."
            ),
            _kl_variant(logits, target, q, real, every.sum()): (
                "divide by the number of real (non-padding) tokens, not by the number of positions."
            ),
        }
        if eps > 0:
            q_pad_kept = annotated_targets(target, vocab, eps)
            q_pad_kept[..., 0] = eps / (vocab - 2)
            q_pad_kept.scatter_(-1, target.unsqueeze(-1), 1 - eps)
            wrong[_kl_variant(logits, target, q_pad_kept, real, real.sum())] = (
                "the <pad> column of q must be 0: <pad> is never a right answer, so only the V - 2 classes that "
                "are neither the target nor <pad> share eps."
            )
            q_torch = (1 - eps) * F.one_hot(target, vocab).double() + eps / vocab
            wrong[_kl_variant(logits, target, q_torch, real, real.sum())] = (
                "that is PyTorch's convention (eps/V on every class); here the target gets exactly 1 - eps, <pad> 0 "
                "and every other class eps/(V-2)."
            )
            q_others = (1 - eps) * F.one_hot(target, vocab).double()
            q_others = q_others + eps / (vocab - 1) * (1 - F.one_hot(target, vocab).double())
            wrong[_kl_variant(logits, target, q_others, real, real.sum())] = (
                "that spreads eps over V - 1 classes; with the <pad> column at 0, V - 2 classes share it."
            )
            q_short = torch.full_like(q, eps / (vocab - 1)).scatter(-1, target.unsqueeze(-1), 1 - eps)
            q_short[..., 0] = 0.0
            wrong[_kl_variant(logits, target, q_short, real, real.sum())] = (
                "with the <pad> column at 0, eps/(V-1) on the other classes leaves q summing to less than 1: "
                "only V - 2 classes (neither the target nor <pad>) share eps, eps/(V-2) each"
            )
            flat_logits, flat_target = logits.flatten(0, 1), target.flatten()
            pytorch_ce = F.cross_entropy(flat_logits.double(), flat_target, ignore_index=0, label_smoothing=eps)
            wrong[float(pytorch_ce)] = (
                "that is F.cross_entropy(..., label_smoothing=eps) as in section 4: PyTorch's convention (eps/V on "
                "every class) and a cross-entropy, not a KL divergence; build the Annotated Transformer's q "
                "yourself and take sum q (log q - log p)"
            )
        q_rows = q * real.unsqueeze(-1)  # the pad rows zeroed, as the Annotated Transformer does
        for count, how in ((real.sum() * vocab, "real positions"), (target.numel() * vocab, "positions")):
            wrong[_kl_variant(logits, target, q_rows, every, count)] = (
                f'F.kl_div(..., reduction="mean") divides by every element ({how} x V classes), not by the number '
                'of tokens: use reduction="sum" and divide by the number of real tokens'
            )
        wrong[_kl_variant(logits, target, q_rows, every, target.shape[0])] = (
            'reduction="batchmean" divides by the first dimension (here the batch of sequences), not by the number '
            'of tokens: use reduction="sum" and divide by the number of real tokens'
        )
        for value, hint in wrong.items():
            if abs(r - value) < 1e-4 and abs(r - float(expected)) > 1e-4:
                raise ExerciseMistake(f"eps={eps}: {hint}")
        expect_close(result, expected, f"the loss for eps={eps}", atol=1e-4)


def check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> bool:
    """Exercise 9.1: ``fn(logits, target, eps, pad_id)`` returns the Annotated Transformer's loss over real tokens."""
    return report("Exercise 9.1 (the Annotated Transformer's smoothed loss)", lambda: _check_smoothed_loss(fn))


# --------------------------------------------------------------------------------------------- exercise 9.2
def _check_noam_rate(fn: Callable[[int, int, int], float]) -> None:
    cases = [(1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (20000, 512, 4000), (50, 64, 100), (900, 64, 100)]
    values = []
    for step, d_model, warmup in cases:
        result = fn(step, d_model, warmup)
        try:
            values.append(float(result))
        except (TypeError, ValueError):
            raise ExerciseMistake(f"return a number, got {type(result).__name__}") from None
    expected = [reference_noam_rate(*case) for case in cases]

    def matches(variant: Callable[[int, int, int], float]) -> bool:
        """Does the answer equal ``variant`` on every case (and differ from the reference somewhere)?"""
        wrong = [variant(*case) for case in cases]
        return all(abs(v - w) < 1e-12 for v, w in zip(values, wrong)) and wrong != expected

    # Each slip is recognised on all cases together: at some steps two slips give the same rate.
    slips = [
        (
            lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**1.5),
            "the warm-up line is step * warmup ** -1.5 (a negative exponent): with warmup ** 1.5 it is so large "
            "that min(...) always picks step ** -0.5, and there is no warm-up",
        ),
        (
            lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
            "use min(...), not max(...): the rate follows the smaller of the two curves",
        ),
        (lambda s, d, w: min(s**-0.5, s * w**-1.5), "multiply by d_model ** -0.5"),
    ]
    for variant, hint in slips:
        if matches(variant):
            raise ExerciseMistake(hint)
    for (step, d_model, warmup), value, want in zip(cases, values, expected):
        expect(
            abs(value - want) <= 1e-9 * max(1.0, abs(want)) + 1e-12,
            f"step={step}, d_model={d_model}, warmup={warmup}: expected {want:.6g}, got {value:.6g}",
        )


def check_noam_rate(fn: Callable[[int, int, int], float]) -> bool:
    """Exercise 9.2: ``fn(step, d_model, warmup)`` returns d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return report("Exercise 9.2 (the warm-up schedule)", lambda: _check_noam_rate(fn))


# --------------------------------------------------------------------------------------------- exercise 9.3
def _entropy(probabilities: list[tuple[float, int]]) -> float:
    """-sum q log q for (value, how many classes have it) pairs, with 0 log 0 = 0."""
    return -sum(count * q * math.log(q) for q, count in probabilities if q > 0)


# The last cases need a formula: at eps = 0 a formula must take 0 log 0 = 0, and V = 1e12 (a float) is far too
# many classes to build q as a tensor or to loop over.
_FLOOR_CASES = ((15, 0.1), (37000, 0.1), (5, 0.4), (3, 0.2), (15, 0.0), (1e12, 0.1))


def _check_annotated_floor(fn: Callable[[int, float], float]) -> None:
    for vocab, eps in _FLOOR_CASES:
        case = f"V={vocab:g}, eps={eps}"
        try:
            result = fn(vocab, eps)
        except NotImplementedError:  # a RuntimeError too: leave it to report()
            raise
        except ValueError as error:
            if eps == 0:
                raise ExerciseMistake(
                    f"{case}: your code raised ValueError ({error}); with eps = 0 the terms eps log(...) are "
                    "0 log 0, which counts as 0, so the floor is 0: handle eps = 0 on its own"
                ) from None
            raise
        except (TypeError, RuntimeError, MemoryError, OverflowError) as error:
            if vocab < 1e6:
                raise
            raise ExerciseMistake(
                f"{case}: your code raised {type(error).__name__}; write the floor as a formula in V and eps, "
                "without a tensor or a loop over the classes: the V - 2 classes that share eps all have the same "
                "q, so their terms add up to one expression"
            ) from None
        try:
            value = float(result)
        except (TypeError, ValueError):
            raise ExerciseMistake(f"return a number, got {type(result).__name__}") from None
        expected = reference_annotated_floor(vocab, eps)
        if abs(value - expected) <= 1e-9 * max(1.0, expected):
            continue
        if eps == 0:
            raise ExerciseMistake(f"{case}: q is one-hot, so its entropy (the floor) is 0; got {value:.6g}")
        wrong = {
            _entropy([(1 - eps + eps / vocab, 1), (eps / vocab, vocab - 1)]): (
                "that is the floor of PyTorch's convention (eps/V on every class, the target included); here the "
                "target gets exactly 1 - eps and eps is shared by the V - 2 classes that are neither the target "
                "nor <pad>."
            ),
            _entropy([(1 - eps, 1), (eps / (vocab - 1), vocab - 1)]): (
                "that spreads eps over V - 1 classes; the Annotated Transformer also gives the <pad> column 0, "
                "so V - 2 classes share eps."
            ),
            -eps * math.log(eps / (vocab - 2)): "the target class is in q too: add its term -(1 - eps) log(1 - eps).",
            0.0: (
                "0 is the floor of a KL divergence, KL(q || p) = cross-entropy - H(q) (what the Annotated "
                "Transformer prints); the cross-entropy itself cannot go below the entropy of q."
            ),
        }
        for floor, hint in wrong.items():
            if abs(value - floor) <= 1e-9 * max(1.0, abs(floor)):
                raise ExerciseMistake(f"{case}: {hint}")
        if abs(value + expected) <= 1e-9 * max(1.0, expected):
            raise ExerciseMistake(f"{case}: check the sign: the entropy -sum q log q is positive.")
        if abs(value - expected) <= 1e-5 * max(1.0, expected):
            raise ExerciseMistake(
                f"{case}: right to about 6 digits ({value:.10g} against {expected:.10g}), the precision of float32: "
                "compute with Python floats and math.log, as a formula, so that V = 1e12 works too"
            )
        if abs(value - expected / math.log(2)) <= 1e-9 * max(1.0, expected):
            raise ExerciseMistake(f"{case}: that is in bits; the floor is asked in nats (math.log, not math.log2).")
        raise ExerciseMistake(f"{case}: expected {expected:.10g} nats, got {value:.10g}")


def check_annotated_floor(fn: Callable[[int, float], float]) -> bool:
    """Exercise 9.3: ``fn(vocab_size, eps)`` returns the entropy of the Annotated Transformer's smoothed target."""
    return report("Exercise 9.3 (the floor of a smoothed loss)", lambda: _check_annotated_floor(fn))
