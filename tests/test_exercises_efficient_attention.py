"""The checkers of notebook 13 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import pytest
import torch

from tests.chinese_feedback import assert_mistake_named_in_chinese
from transformer_course.efficient.blockwise_attention import blockwise_attention
from transformer_course.efficient.low_rank_attention import (
    orthogonal_random_features,
    performer_attention,
    positive_random_features,
)
from transformer_course.efficient.sparse_attention import longformer_mask
from transformer_course.exercises import efficient_attention as ex
from transformer_course.language import set_language


def _stub(*args):
    raise NotImplementedError


# ----------------------------------------------------------------------------------------------- exercise 1
def test_reference_mask_equals_the_package():
    for length, window, glob in ((10, 2, [0]), (30, 4, [3, 20]), (5, 0, [])):
        assert torch.equal(
            ex.reference_longformer_mask(length, window, glob), longformer_mask(length, window, glob)[0, 0]
        )


def test_mask_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_longformer_mask(ex.reference_longformer_mask)
    assert ex.check_longformer_mask(lambda n, w, g: longformer_mask(n, w, g)[0, 0])
    assert "correct" in capsys.readouterr().out


def test_mask_checker_says_not_attempted(capsys):
    assert not ex.check_longformer_mask(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _parts(n, g):
    pos = torch.arange(n)
    offset = pos[:, None] - pos[None, :]
    is_global = torch.zeros(n, dtype=torch.bool)
    is_global[list(g)] = True
    return offset, is_global


def _narrow(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() < w) | is_global[:, None] | is_global[None, :]


def _rows_only(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() <= w) | is_global[:, None]


def _columns_only(n, w, g):
    offset, is_global = _parts(n, g)
    return (offset.abs() <= w) | is_global[None, :]


def _one_sided(n, w, g):
    offset, is_global = _parts(n, g)
    return ((offset >= 0) & (offset <= w)) | is_global[:, None] | is_global[None, :]


def _no_global(n, w, g):
    offset, _ = _parts(n, g)
    return offset.abs() <= w


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_narrow, "one too narrow"),
        (_rows_only, "*seen*"),
        (_columns_only, "*see*"),
        (_one_sided, "two-sided"),
        (lambda n, w, g: ~ex.reference_longformer_mask(n, w, g), "True = may attend"),
        (_no_global, "global tokens are missing"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w, g).float(), "dtype"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w, g)[None, None], "shape"),
        (lambda n, w, g: ex.reference_longformer_mask(n, w + 2, g), "differs at"),
    ],
)
def test_mask_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_longformer_mask(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ----------------------------------------------------------------------------------------------- exercise 2
def test_merged_states_give_exact_attention():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 5, 4), torch.randn(1, 9, 4), torch.randn(1, 9, 4)
    state = ex.partial_state(q, k[:, :2], v[:, :2])
    for start in range(2, 9, 3):
        state = ex.reference_merge(state, ex.partial_state(q, k[:, start : start + 3], v[:, start : start + 3]))
    m, total, acc = state
    torch.testing.assert_close(acc / total.unsqueeze(-1), blockwise_attention(q, k, v, block_size=9))
    torch.testing.assert_close(m, (q @ k.transpose(-2, -1) / 2).amax(-1))


def test_merge_checker_accepts_the_reference(capsys):
    assert ex.check_online_softmax_merge(ex.reference_merge)
    assert "correct" in capsys.readouterr().out


def test_merge_checker_says_not_attempted(capsys):
    assert not ex.check_online_softmax_merge(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _no_rescale(a, b):
    return torch.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2]


def _only_a_rescaled(a, b):
    m = torch.maximum(a[0], b[0])
    scale = torch.exp(a[0] - m)
    return m, a[1] * scale + b[1], a[2] * scale.unsqueeze(-1) + b[2]


def _only_b_rescaled(a, b):
    m = torch.maximum(a[0], b[0])
    scale = torch.exp(b[0] - m)
    return m, a[1] + b[1] * scale, a[2] + b[2] * scale.unsqueeze(-1)


def _acc_only_rescaled(a, b):
    m, _, acc = ex.reference_merge(a, b)
    return m, a[1] + b[1], acc


def _l_only_rescaled(a, b):
    m, total, _ = ex.reference_merge(a, b)
    return m, total, a[2] + b[2]


def _minimum(a, b):
    return ex.reference_merge_with(a, b, torch.minimum(a[0], b[0]))


def _normalised(a, b):
    m, total, acc = ex.reference_merge(a, b)
    return m, total, acc / total.unsqueeze(-1)


def _wrong_sign(a, b):
    m = torch.maximum(a[0], b[0])
    sa, sb = torch.exp(m - a[0]), torch.exp(m - b[0])
    return m, a[1] * sa + b[1] * sb, a[2] * sa.unsqueeze(-1) + b[2] * sb.unsqueeze(-1)


def _acc_factor_not_broadcast(a, b):
    """The factors exp(m_a - m), shaped like l, multiplied into acc without [..., None]: a broadcasting error."""
    m = torch.maximum(a[0], b[0])
    sa, sb = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * sa + b[1] * sb, a[2] * sa + b[2] * sb


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_acc_factor_not_broadcast, "acc_a * torch.exp(m_a - m)[..., None]"),
        (_no_rescale, "without rescaling"),
        (_only_a_rescaled, "block b's l and acc also need the factor exp(m_b - m)"),
        (_only_b_rescaled, "block a's l and acc also need the factor exp(m_a - m)"),
        (_acc_only_rescaled, "you rescaled acc but not l"),
        (_l_only_rescaled, "you rescaled l but not acc"),
        (_minimum, "torch.maximum"),
        (_normalised, "do not divide by l yet"),
        (_wrong_sign, "exp(m_new - m_block)"),
        (lambda a, b: ex.reference_merge_with(a, b, a[0]), "torch.maximum"),
        (lambda a, b: ex.reference_merge_with(a, b, b[0]), "torch.maximum"),
        (lambda a, b: ex.reference_merge(a, b)[:2], "three tensors"),
    ],
)
def test_merge_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_online_softmax_merge(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ----------------------------------------------------------------------------------------------- exercise 3
def _features(n=9, m=6, d=4, seed=5):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, m, generator=g) + 0.1, torch.rand(n, m, generator=g) + 0.1, torch.randn(n, d, generator=g)


def _run_steps(step, phi_q, phi_k, v):
    s, z = torch.zeros(phi_k.shape[1], v.shape[1]), torch.zeros(phi_k.shape[1])
    outputs = []
    for i in range(len(v)):
        s, z, out = step(s, z, phi_q[i], phi_k[i], v[i])
        outputs.append(out)
    return torch.stack(outputs), s, z


def test_reference_steps_equal_the_masked_quadratic_form_and_the_package():
    phi_q, phi_k, v = _features()
    steps, s, z = _run_steps(ex.reference_linear_attention_step, phi_q, phi_k, v)
    torch.testing.assert_close(steps, ex.causal_kernel_attention(phi_q, phi_k, v))
    torch.testing.assert_close(s, phi_k.T @ v)  # the state after the last token: sum of phi(k_j) v_j^T
    torch.testing.assert_close(z, phi_k.sum(0))


def test_reference_steps_equal_the_causal_performer():
    """With Performer's features, the recurrence gives the package's causal Performer (prefix sums)."""
    gen = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(3, 1, 1, 10, 8, generator=gen).unbind(0)
    omega = orthogonal_random_features(16, 8, torch.Generator().manual_seed(3))
    scale = 8**-0.25
    phi_q = positive_random_features(q * scale, omega, is_query=True)[0, 0]
    phi_k = positive_random_features(k * scale, omega, is_query=False)[0, 0]
    steps, _, _ = _run_steps(ex.reference_linear_attention_step, phi_q, phi_k, v[0, 0])
    torch.testing.assert_close(steps, performer_attention(q, k, v, omega, causal=True)[0, 0])


def test_step_checker_accepts_the_reference(capsys):
    assert ex.check_linear_attention_step(ex.reference_linear_attention_step)
    assert "Exercise 13.3 (linear attention as a recurrence): correct" in capsys.readouterr().out


def test_step_checker_says_not_attempted(capsys):
    assert not ex.check_linear_attention_step(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _read_before_update(s, z, phi_q, phi_k, v):
    out = (phi_q @ s) / (phi_q @ z)
    return s + torch.outer(phi_k, v), z + phi_k, out


def _state_not_returned(s, z, phi_q, phi_k, v):
    new_s, new_z = s + torch.outer(phi_k, v), z + phi_k
    return s, z, (phi_q @ new_s) / (phi_q @ new_z)


def _unnormalised(s, z, phi_q, phi_k, v):
    s, z = s + torch.outer(phi_k, v), z + phi_k
    return s, z, phi_q @ s


def _z_not_accumulated(s, z, phi_q, phi_k, v):
    s = s + torch.outer(phi_k, v)
    return s, phi_k, (phi_q @ s) / (phi_q @ phi_k)


def _s_not_accumulated(s, z, phi_q, phi_k, v):
    s, z = torch.outer(phi_k, v), z + phi_k
    return s, z, (phi_q @ s) / (phi_q @ z)


def _scalar_normaliser(s, z, phi_q, phi_k, v):
    s = s + torch.outer(phi_k, v)
    return s, phi_q @ phi_k, (phi_q @ s) / (phi_q @ phi_k)


def _epsilon_in_the_denominator(s, z, phi_q, phi_k, v):
    s, z = s + torch.outer(phi_k, v), z + phi_k
    return s, z, (phi_q @ s) / (phi_q @ z + 1.0)


def _outer_product_reversed(s, z, phi_q, phi_k, v):
    """The state's update written torch.outer(v, phi_k): (d, m), added to s (m, d)."""
    s, z = s + torch.outer(v, phi_k), z + phi_k
    return s, z, (phi_q @ s) / (phi_q @ z)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_outer_product_reversed, "add torch.outer(phi_k, v), not torch.outer(v, phi_k)"),
        (_read_before_update, "leaves out token i itself"),
        (_state_not_returned, "never carried over"),
        (_unnormalised, "not normalised"),
        (_z_not_accumulated, "z is not accumulated"),
        (_s_not_accumulated, "s is not accumulated"),
        (_scalar_normaliser, "the state z after token 0 has shape ()"),
        (_epsilon_in_the_denominator, "differs from the expected values"),
        (lambda s, z, q, k, v: ex.reference_linear_attention_step(s, z, q, k, v)[2], "three tensors"),
    ],
)
def test_step_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_linear_attention_step(wrong)
    out = capsys.readouterr().out
    assert "Exercise 13.3" in out and "not yet" in out and hint in out


def test_step_checker_reports_a_crash(capsys):
    assert not ex.check_linear_attention_step(lambda s, z, q, k, v: (s, z, q @ v))
    assert "your code raised RuntimeError" in capsys.readouterr().out


def test_labels_carry_the_notebook_number(capsys):
    ex.check_longformer_mask(_stub)
    ex.check_online_softmax_merge(_stub)
    out = capsys.readouterr().out
    assert "Exercise 13.1 (Longformer mask)" in out and "Exercise 13.2 (online softmax merge)" in out


# ------------------------------------------------------------------------------- the feedback in Chinese

CHECKERS = {
    "13.1": (ex.check_longformer_mask, ex.reference_longformer_mask),
    "13.2": (ex.check_online_softmax_merge, ex.reference_merge),
    "13.3": (ex.check_linear_attention_step, ex.reference_linear_attention_step),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    check, reference = CHECKERS[number]
    set_language("zh")
    assert check(reference)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and out.endswith("正确！\n")
    assert not check(_stub)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and "尚未作答" in out


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_longformer_mask, _narrow, "窗口窄了一格"),
        (ex.check_longformer_mask, _rows_only, "每个词元也必须能看到全局词元"),
        (ex.check_longformer_mask, _one_sided, "窗口是双向的"),
        (ex.check_longformer_mask, _no_global, "缺少全局词元"),
        (ex.check_online_softmax_merge, _acc_factor_not_broadcast, "无法广播。acc 比 m 和 l 多一维"),
        (ex.check_linear_attention_step, _outer_product_reversed, "要加的是 torch.outer(phi_k, v)"),
        (ex.check_online_softmax_merge, _no_rescale, "你没有重新缩放"),
        (ex.check_online_softmax_merge, _only_a_rescaled, "块 b 的 l 和 acc 也要乘以因子 exp(m_b - m)"),
        (ex.check_online_softmax_merge, _acc_only_rescaled, "你重新缩放了 acc，却没有重新缩放 l"),
        (ex.check_online_softmax_merge, _l_only_rescaled, "你重新缩放了 l，却没有重新缩放 acc"),
        (ex.check_online_softmax_merge, _minimum, "较大的那个（torch.maximum）"),
        (ex.check_online_softmax_merge, _normalised, "先不要除以 l"),
        (ex.check_linear_attention_step, _read_before_update, "漏掉了词元 i 自己"),
        (ex.check_linear_attention_step, _state_not_returned, "说明状态没有传到下一步"),
        (ex.check_linear_attention_step, _unnormalised, "输出没有归一化"),
        (ex.check_linear_attention_step, _z_not_accumulated, "z 没有累加"),
        (ex.check_linear_attention_step, _s_not_accumulated, "s 没有累加"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
