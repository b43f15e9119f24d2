"""The checkers of notebook 09 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from transformer_course.data import Vocabulary, make_batch
from transformer_course.exercises import training as ex
from transformer_course.losses import label_smoothing_loss
from transformer_course.schedules import noam_lr


def _stub(*args):
    raise NotImplementedError


# ----------------------------------------------------------------------------------------------- exercise 1
def test_reference_shift_right_matches_the_batches():
    vocab = Vocabulary("abc")
    batch = make_batch([("a", "abc"), ("b", "a")], vocab, vocab)
    assert torch.equal(ex.reference_shift_right(batch.tgt_out), batch.tgt_in)


def test_shift_right_checker_accepts_the_reference(capsys):
    assert ex.check_shift_right(ex.reference_shift_right)
    assert "correct" in capsys.readouterr().out


def test_shift_right_checker_says_not_attempted(capsys):
    assert not ex.check_shift_right(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _left(tgt_out, bos_id, pad_id):
    return torch.cat([tgt_out[:, 1:], torch.full_like(tgt_out[:, :1], pad_id)], dim=1)


def _no_bos(tgt_out, bos_id, pad_id):
    return torch.cat([torch.full_like(tgt_out[:, :1], pad_id), tgt_out[:, :-1]], dim=1)


def _keeps_eos(tgt_out, bos_id, pad_id):
    return torch.cat([torch.full_like(tgt_out[:, :1], bos_id), tgt_out[:, :-1]], dim=1)


def _prepend_only(tgt_out, bos_id, pad_id):
    return torch.cat([torch.full_like(tgt_out[:, :1], bos_id), tgt_out], dim=1)


def test_shift_right_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_left, "shifted left"),
        (_no_bos, "<bos>"),
        (_keeps_eos, "<eos>"),
        (_prepend_only, "shape"),
    ]:
        assert not ex.check_shift_right(wrong), wrong.__name__
        assert hint in capsys.readouterr().out, wrong.__name__


# ----------------------------------------------------------------------------------------------- exercise 2
def test_reference_smoothed_loss_equals_the_package_and_torch():
    g = torch.Generator().manual_seed(0)
    logits, target = torch.randn(2, 5, 7, generator=g), torch.randint(0, 7, (2, 5), generator=g)
    target[0, 0] = 3
    for eps in (0.0, 0.2):
        ours = ex.reference_smoothed_loss(logits, target, eps, 0)
        torch.testing.assert_close(ours, label_smoothing_loss(logits, target, eps, 0))
        theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=eps)
        torch.testing.assert_close(ours, theirs)


def test_smoothed_loss_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_smoothed_loss(ex.reference_smoothed_loss)
    assert ex.check_smoothed_loss(lambda logits, target, eps, pad: label_smoothing_loss(logits, target, eps, pad))
    assert "correct" in capsys.readouterr().out


def test_smoothed_loss_checker_says_not_attempted(capsys):
    assert not ex.check_smoothed_loss(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _with_padding(logits, target, eps, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=eps)


def _others(logits, target, eps, pad_id):
    return label_smoothing_loss(logits, target, eps, pad_id, spread="others")


def _unsmoothed(logits, target, eps, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id)


def _per_position(logits, target, eps, pad_id):
    return F.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad_id, reduction="none")


def _no_log_softmax(logits, target, eps, pad_id):
    q = (1 - eps) * F.one_hot(target, logits.shape[-1]) + eps / logits.shape[-1]
    return (-(q * logits).sum(-1))[target != pad_id].mean()


def test_smoothed_loss_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_with_padding, "padding"),
        (_others, "eps/(V-1)"),
        (_unsmoothed, "without smoothing"),
        (_per_position, "one number"),
        (_no_log_softmax, "differs"),
    ]:
        assert not ex.check_smoothed_loss(wrong), wrong.__name__
        assert hint in capsys.readouterr().out, wrong.__name__


# ----------------------------------------------------------------------------------------------- exercise 3
def test_reference_noam_rate_equals_the_package():
    for step in (1, 10, 4000, 9999):
        assert ex.reference_noam_rate(step, 512, 4000) == noam_lr(step, 512, 4000)


def test_noam_checker_accepts_the_reference(capsys):
    assert ex.check_noam_rate(ex.reference_noam_rate)
    assert ex.check_noam_rate(noam_lr)
    assert "correct" in capsys.readouterr().out


def test_noam_checker_says_not_attempted(capsys):
    assert not ex.check_noam_rate(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_noam_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "min"),
        (lambda s, d, w: min(s**-0.5, s * w**-1.5), "d_model ** -0.5"),
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), "expected"),
        (lambda s, d, w: "fast", "number"),
    ]:
        assert not ex.check_noam_rate(wrong)
        assert hint in capsys.readouterr().out
