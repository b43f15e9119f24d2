"""The training loss: label smoothing in both conventions, padding excluded, bad input rejected."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_course.text.tasks import PAD_ID
from transformer_course.training.losses import label_smoothing_loss, smoothed_targets


def _logits_and_target(seed: int = 0, vocab: int = 7):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, vocab, generator=g)
    target = torch.randint(1, vocab, (3, 5), generator=g)
    target[0, 3:] = PAD_ID
    target[2, 1:] = PAD_ID
    return logits, target


def test_label_smoothing_with_eps_zero_is_cross_entropy():
    logits, target = _logits_and_target()
    ours = label_smoothing_loss(logits, target, smoothing=0.0, pad_id=PAD_ID)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID)
    torch.testing.assert_close(ours, theirs)
    for spread in ("uniform", "others"):
        torch.testing.assert_close(label_smoothing_loss(logits, target, 0.0, PAD_ID, spread), theirs)


def test_uniform_spread_equals_torch_label_smoothing():
    logits, target = _logits_and_target(1)
    ours = label_smoothing_loss(logits, target, smoothing=0.1, pad_id=PAD_ID)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID, label_smoothing=0.1)
    torch.testing.assert_close(ours, theirs)


def test_the_two_spreads_differ_as_documented():
    eps, vocab = 0.1, 5
    target = torch.tensor([2])
    uniform = smoothed_targets(target, vocab, eps, "uniform")[0]
    others = smoothed_targets(target, vocab, eps, "others")[0]
    assert uniform[2].item() == pytest.approx(1 - eps + eps / vocab)
    assert uniform[0].item() == pytest.approx(eps / vocab)
    assert others[2].item() == pytest.approx(1 - eps)
    assert others[0].item() == pytest.approx(eps / (vocab - 1))
    assert uniform.sum().item() == pytest.approx(1.0) and others.sum().item() == pytest.approx(1.0)


def test_padding_positions_do_not_count():
    logits, target = _logits_and_target(2)
    changed = logits.clone()
    changed[target == PAD_ID] = 100.0 * torch.randn_like(changed[target == PAD_ID])
    for eps in (0.0, 0.1):
        torch.testing.assert_close(
            label_smoothing_loss(logits, target, eps, PAD_ID), label_smoothing_loss(changed, target, eps, PAD_ID)
        )
    # the mean is over real tokens only
    per_token = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
    real = target.flatten() != PAD_ID
    torch.testing.assert_close(label_smoothing_loss(logits, target, 0.0), per_token[real].sum() / real.sum())


def test_label_smoothing_rejects_bad_input():
    logits, target = _logits_and_target()
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothing_loss(logits, target, smoothing=1.0)
    with pytest.raises(ValueError, match="spread"):
        label_smoothing_loss(logits, target, spread="even")
    with pytest.raises(ValueError, match="leading dimensions"):
        label_smoothing_loss(logits, target[:, :3])
    with pytest.raises(ValueError, match="padding"):
        label_smoothing_loss(logits, torch.zeros_like(target))
