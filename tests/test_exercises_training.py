"""The checkers of notebook 09 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import training as ex
from transformer_course.training.losses import label_smoothing_loss
from transformer_course.training.schedules import noam_lr


def _stub(*args):
    raise NotImplementedError


# --------------------------------------------------------------------------------------------- exercise 9.1
def _annotated_loss_as_in_its_code(logits, target, eps, pad_id):
    """The Annotated Transformer's LabelSmoothing + SimpleLossCompute, written the way its code writes them:
    fill eps / (V - 2), scatter 1 - eps, zero the pad column, zero the pad rows, nn.KLDivLoss(reduction="sum"),
    divided by the number of real tokens."""
    vocab = logits.shape[-1]
    x = F.log_softmax(logits, -1).reshape(-1, vocab)
    t = target.reshape(-1)
    true_dist = torch.full_like(x, eps / (vocab - 2))
    true_dist.scatter_(1, t.unsqueeze(1), 1 - eps)
    true_dist[:, pad_id] = 0
    true_dist[t == pad_id] = 0
    return torch.nn.KLDivLoss(reduction="sum")(x, true_dist) / (t != pad_id).sum()


def test_reference_loss_equals_the_annotated_transformers_code_and_cross_entropy_at_eps_0():
    g = torch.Generator().manual_seed(0)
    logits, target = torch.randn(2, 5, 7, generator=g), torch.randint(1, 7, (2, 5), generator=g)
    target[1, 3:] = 0
    for eps in (0.0, 0.1, 0.4):
        ours = ex.reference_smoothed_loss(logits, target, eps, 0)
        torch.testing.assert_close(ours, _annotated_loss_as_in_its_code(logits, target, eps, 0))
    plain = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0)
    torch.testing.assert_close(ex.reference_smoothed_loss(logits, target, 0.0, 0), plain)
    # KL = cross-entropy - H(q): the package's cross-entropy with the same q is larger by the entropy of q
    assert float(ex.reference_smoothed_loss(logits, target, 0.1, 0)) < float(label_smoothing_loss(logits, target, 0.1))


def test_smoothed_loss_checker_accepts_the_reference_and_the_annotated_code(capsys):
    assert ex.check_smoothed_loss(ex.reference_smoothed_loss)
    assert ex.check_smoothed_loss(_annotated_loss_as_in_its_code)
    assert ex.check_smoothed_loss(
        lambda logits, target, eps, pad: (
            F.kl_div(
                F.log_softmax(logits, -1)[target != pad],
                ex.annotated_targets(target, logits.shape[-1], eps, pad)[target != pad].float(),
                reduction="sum",
            )
            / (target != pad).sum()
        )
    )
    assert "Exercise 9.1 (the Annotated Transformer's smoothed loss): correct" in capsys.readouterr().out


def test_smoothed_loss_checker_says_not_attempted(capsys):
    assert not ex.check_smoothed_loss(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _cross_entropy(logits, target, eps, pad_id):
    q = ex.annotated_targets(target, logits.shape[-1], eps, pad_id).float()
    return (-(q * F.log_softmax(logits, -1)).sum(-1))[target != pad_id].mean()


def _naive_q_log_q(logits, target, eps, pad_id):
    q = ex.annotated_targets(target, logits.shape[-1], eps, pad_id).float()
    return (q * (q.log() - F.log_softmax(logits, -1))).sum(-1)[target != pad_id].mean()


def _pad_column_kept(logits, target, eps, pad_id):
    vocab = logits.shape[-1]
    q = torch.full(logits.shape, eps / (vocab - 2)).scatter(-1, target.unsqueeze(-1), 1 - eps)
    kl = torch.xlogy(q, q) - q * F.log_softmax(logits, -1)
    return kl.sum(-1)[target != pad_id].mean()


def _pad_rows_kept(logits, target, eps, pad_id):
    q = ex.annotated_targets(target, logits.shape[-1], eps, pad_id).float()
    kl = torch.xlogy(q, q) - q * F.log_softmax(logits, -1)
    return kl.sum() / (target != pad_id).sum()


def _mean_over_all_positions(logits, target, eps, pad_id):
    q = ex.annotated_targets(target, logits.shape[-1], eps, pad_id).float()
    kl = (torch.xlogy(q, q) - q * F.log_softmax(logits, -1)).sum(-1)
    return kl[target != pad_id].sum() / target.numel()


def _pytorch_convention(logits, target, eps, pad_id):
    vocab = logits.shape[-1]
    q = (1 - eps) * F.one_hot(target, vocab) + eps / vocab
    kl = (torch.xlogy(q, q) - q * F.log_softmax(logits, -1)).sum(-1)
    return kl[target != pad_id].mean()


def _copied_from_section_4(logits, target, eps, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=eps)


def _kl_div(reduction, flatten):
    def loss(logits, target, eps, pad_id):
        q = ex.annotated_targets(target, logits.shape[-1], eps, pad_id).float()
        real = target != pad_id
        log_p = F.log_softmax(logits, -1)
        if flatten:
            return F.kl_div(log_p[real], q[real], reduction=reduction)
        return F.kl_div(log_p, q * real.unsqueeze(-1), reduction=reduction)

    return loss


def _v_minus_1_pad_zeroed(logits, target, eps, pad_id):
    vocab = logits.shape[-1]
    q = torch.full(logits.shape, eps / (vocab - 1)).scatter(-1, target.unsqueeze(-1), 1 - eps)
    q[..., pad_id] = 0.0
    kl = torch.xlogy(q, q) - q * F.log_softmax(logits, -1)
    return kl.sum(-1)[target != pad_id].mean()


def test_smoothed_loss_checker_accepts_kl_div_batchmean_over_the_real_rows(capsys):
    assert ex.check_smoothed_loss(_kl_div("batchmean", flatten=True))  # rows = real tokens: the right division


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # the slip under test; PyTorch warns about it
def test_smoothed_loss_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_cross_entropy, "KL"),
        (_naive_q_log_q, "eps=0.0: the loss is nan. Where q is 0 (every column but the target)"),
        (_pad_column_kept, "<pad> column"),
        (_pad_rows_kept, "drop them"),
        (_mean_over_all_positions, "number of real"),
        (_pytorch_convention, "PyTorch's convention"),
        (_copied_from_section_4, "F.cross_entropy(..., label_smoothing=eps)"),
        (_kl_div("mean", flatten=True), 'reduction="mean"'),
        (_kl_div("mean", flatten=False), 'reduction="mean"'),
        (_kl_div("batchmean", flatten=False), 'reduction="batchmean"'),
        (_v_minus_1_pad_zeroed, "summing to less than 1"),
        (lambda lg, t, e, p: F.cross_entropy(lg.transpose(1, 2), t, ignore_index=p, reduction="none"), "one number"),
    ]:
        assert not ex.check_smoothed_loss(wrong), wrong.__name__
        assert hint in capsys.readouterr().out, wrong.__name__


# --------------------------------------------------------------------------------------------- exercise 9.2
def test_reference_noam_rate_equals_the_package():
    for step in (1, 10, 4000, 9999):
        assert ex.reference_noam_rate(step, 512, 4000) == noam_lr(step, 512, 4000)


def test_noam_checker_accepts_the_reference(capsys):
    assert ex.check_noam_rate(ex.reference_noam_rate)
    assert ex.check_noam_rate(noam_lr)
    assert "Exercise 9.2 (the warm-up schedule): correct" in capsys.readouterr().out


def test_noam_checker_says_not_attempted(capsys):
    assert not ex.check_noam_rate(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_noam_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "min"),
        (lambda s, d, w: min(s**-0.5, s * w**-1.5), "d_model ** -0.5"),
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**1.5), "negative exponent"),  # a sign slip, not max
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), "rises too steeply"),
        (lambda s, d, w: d**-0.5 * s**-0.5, "no warm-up"),  # the same numbers as the sign slip
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.25), "expected"),  # no known slip: the numbers
        (lambda s, d, w: "fast", "number"),
        (lambda s, d, w: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * w**-1.5), "without adding 1"),
        (lambda s, d, w: torch.tensor(ex.reference_noam_rate(s, d, w)), "not a tensor"),
    ]:
        assert not ex.check_noam_rate(wrong)
        assert hint in capsys.readouterr().out


# --------------------------------------------------------------------------------------------- exercise 9.3
def _annotated_targets(target: int, vocab: int, eps: float, pad_id: int = 0) -> torch.Tensor:
    """The Annotated Transformer's LabelSmoothing for one real position, built the way its code does: fill
    eps / (V - 2), put 1 - eps on the target, zero the <pad> column."""
    q = torch.full((vocab,), eps / (vocab - 2), dtype=torch.float64)
    q[target] = 1 - eps
    q[pad_id] = 0.0
    return q


def test_reference_floor_is_the_entropy_of_the_annotated_targets_and_the_minimum_of_the_loss():
    for vocab, eps in ((15, 0.1), (6, 0.3), (3, 0.2)):
        q = _annotated_targets(4 % vocab if vocab > 4 else 1, vocab, eps)
        assert abs(float(q.sum()) - 1.0) < 1e-12
        entropy = float(-(q[q > 0] * q[q > 0].log()).sum())
        assert abs(ex.reference_annotated_floor(vocab, eps) - entropy) < 1e-12
        # cross-entropy -sum q log p: p = q gives the floor, any other distribution gives more
        g = torch.Generator().manual_seed(vocab)
        for _ in range(20):
            p = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
            assert float(-(q * p.log()).sum()) > entropy
    assert ex.reference_annotated_floor(15, 0.0) == 0.0


def test_floor_checker_accepts_the_reference(capsys):
    assert ex.check_annotated_floor(ex.reference_annotated_floor)
    assert "Exercise 9.3 (the floor of a smoothed loss): correct" in capsys.readouterr().out


def test_floor_checker_says_not_attempted(capsys):
    assert not ex.check_annotated_floor(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _floor_pytorch(vocab, eps):
    on, off = 1 - eps + eps / vocab, eps / vocab
    return -on * math.log(on) - (vocab - 1) * off * math.log(off)


def _floor_v_minus_1(vocab, eps):
    return -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (vocab - 1))


def _floor_from_a_tensor(vocab, eps):
    """Right for every V small enough to build q (as the cells of section 4 do)."""
    return float(-torch.xlogy(q := _annotated_targets(1, vocab, eps), q).sum())


def _floor_without_the_eps_0_case(vocab, eps):
    return -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (vocab - 2))


def test_floor_checker_rejects_typical_mistakes(capsys):
    for wrong, hint in [
        (_floor_pytorch, "PyTorch's convention"),
        (_floor_v_minus_1, "V - 1 classes"),
        (lambda v, e: -e * math.log(e / (v - 2)), "the target class is in q too"),
        (lambda v, e: 0.0, "KL divergence"),
        (lambda v, e: -ex.reference_annotated_floor(v, e), "sign"),
        (lambda v, e: ex.reference_annotated_floor(v, e) / math.log(2), "in bits"),
        (lambda v, e: float(torch.tensor(ex.reference_annotated_floor(v, e), dtype=torch.float32)), "float32"),
        (lambda v, e: "low", "number"),
        (_floor_from_a_tensor, "as a formula in V and eps"),
        (_floor_without_the_eps_0_case, "0 log 0"),
        (lambda v, e: 0.1 if e == 0 else ex.reference_annotated_floor(v, e), "one-hot"),
    ]:
        assert not ex.check_annotated_floor(wrong)
        assert hint in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "9.1": (ex.check_smoothed_loss, ex.reference_smoothed_loss),
    "9.2": (ex.check_noam_rate, ex.reference_noam_rate),
    "9.3": (ex.check_annotated_floor, ex.reference_annotated_floor),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_smoothed_loss, _cross_entropy, "这是交叉熵 -sum q log p"),
        (ex.check_smoothed_loss, _naive_q_log_q, "在 q 为 0 的地方（除目标外的每一列）"),
        (ex.check_smoothed_loss, _pad_column_kept, "q 的 <pad> 列必须为 0"),
        (ex.check_smoothed_loss, _pytorch_convention, "这是 PyTorch 的约定"),
        (ex.check_smoothed_loss, _kl_div("batchmean", flatten=False), "除以的是第一维的大小"),
        (ex.check_noam_rate, lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "要用 min(...)"),
        (ex.check_noam_rate, lambda s, d, w: min(s**-0.5, s * w**-1.5), "还要乘以 d_model ** -0.5"),
        (ex.check_noam_rate, lambda s, d, w: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * w**-1.5), "不要再加 1"),
        (ex.check_noam_rate, lambda s, d, w: torch.tensor(ex.reference_noam_rate(s, d, w)), "而不是张量"),
        (ex.check_annotated_floor, _floor_pytorch, "这是 PyTorch 约定下的下限"),
        (ex.check_annotated_floor, _floor_v_minus_1, "这是把 eps 分给了 V - 1 个类"),
        (ex.check_annotated_floor, _floor_from_a_tensor, "要把下限写成关于 V 和 eps 的公式"),
        (ex.check_annotated_floor, _floor_without_the_eps_0_case, "要单独处理 eps = 0 的情况"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
