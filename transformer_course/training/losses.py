"""The training loss: cross-entropy against label-smoothed targets, padding positions excluded.

* :func:`smoothed_targets`: the target distribution q of each position, in either of the two conventions
  (:data:`SPREADS`) for where the smoothing mass goes.
* :func:`label_smoothing_loss`: -sum(q * log p), averaged over the non-padding positions; with smoothing 0 it is
  the plain cross-entropy.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ..text.tasks import PAD_ID

SPREADS = ("uniform", "others")
"""Where label smoothing puts its mass: on every class ("uniform", PyTorch's convention) or on the other
classes only ("others", a common textbook variant). The Annotated Transformer uses neither: it gives eps / (V - 2)
to every class but the target and the padding class, which gets 0."""


def smoothed_targets(target: Tensor, num_classes: int, smoothing: float, spread: str = "uniform") -> Tensor:
    """The smoothed target distribution q for each position.

    target: (...,) class ids. Returns (..., num_classes), each row summing to 1.
    spread="uniform" (PyTorch's ``label_smoothing``): q = (1 - eps) one_hot + eps / V, so the target gets
    1 - eps + eps / V and every other class eps / V. spread="others" (a common textbook variant): the target gets
    exactly 1 - eps and the other V - 1 classes share eps, eps / (V - 1) each.
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {SPREADS}, got {spread!r}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    one_hot = F.one_hot(target, num_classes).float()
    if spread == "uniform":
        return (1.0 - smoothing) * one_hot + smoothing / num_classes
    return (1.0 - smoothing) * one_hot + smoothing / (num_classes - 1) * (1.0 - one_hot)


def label_smoothing_loss(
    logits: Tensor,
    target: Tensor,
    smoothing: float = 0.1,
    pad_id: int | None = PAD_ID,
    spread: str = "uniform",
) -> Tensor:
    """Cross-entropy of the model's distribution against smoothed targets, averaged over non-padding positions.

    logits: (..., vocab), target: (...,) ids. Positions where ``target == pad_id`` contribute nothing and are
    not counted in the mean. With spread="uniform" this equals
    ``F.cross_entropy(logits, target, label_smoothing=smoothing, ignore_index=pad_id)``; with smoothing=0 it
    is the plain cross-entropy. Returns a scalar.
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits (..., vocab) and target (...) must agree on the leading dimensions, got "
            f"{tuple(logits.shape)} and {tuple(target.shape)}"
        )
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (..., vocab)
    q = smoothed_targets(target, logits.shape[-1], smoothing, spread)  # (..., vocab)
    per_position = -(q * log_probs).sum(dim=-1)  # (...,)
    if pad_id is None:
        return per_position.mean()
    real = target != pad_id
    if not bool(real.any()):
        raise ValueError(f"every target position is padding (pad_id={pad_id}); nothing to average")
    return per_position[real].mean()


__all__ = ["SPREADS", "label_smoothing_loss", "smoothed_targets"]
