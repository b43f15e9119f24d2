"""The checkers of notebook 01 accept the reference solutions and reject typical mistakes with a useful hint."""

from __future__ import annotations

import math

import pytest
import torch

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import rnn_limits as ex
from transformer_course.prelude.rnn import RNNCell, chain_jacobians, conv_layers_to_connect, unroll


def test_references_agree_with_the_package_and_autograd():
    jacobians = torch.randn(1, 5, 4, 4, dtype=torch.float64)
    torch.testing.assert_close(ex.reference_bptt_product(jacobians[0]), chain_jacobians(jacobians)[0, 0])
    for n in range(1, 300):
        for k in (2, 3, 5):
            for dilated in (False, True):
                assert ex.reference_conv_layers(n, k, dilated) == conv_layers_to_connect(n, k, dilated)
    x, states, deltas, autograd_grad = ex._input_gradient_case()
    torch.testing.assert_close(ex.reference_input_gradient(x, states, deltas), autograd_grad)


def test_input_gradient_matches_autograd_on_another_rnn():
    torch.manual_seed(0)
    cell = RNNCell(2, 4).double()
    x = torch.randn(1, 9, 2, dtype=torch.float64)
    readout = torch.randn(4, dtype=torch.float64)
    states, _ = unroll(cell, x)
    (states[0, -1] @ readout).backward()
    # delta_k by hand: back from S_T through the per-step Jacobians diag(1 - S_t^2) W
    deltas = [readout]
    for t in range(8, 0, -1):
        deltas.append((deltas[-1] * (1 - states[0, t] ** 2)) @ cell.weight_hh)
    deltas = torch.stack(deltas[::-1]).detach()
    torch.testing.assert_close(ex.reference_input_gradient(x[0], states[0].detach(), deltas), cell.weight_ih.grad)


@pytest.mark.parametrize(
    ("checker", "reference"),
    [
        (ex.check_bptt_product, ex.reference_bptt_product),
        (ex.check_input_gradient, ex.reference_input_gradient),
        (ex.check_conv_layers, ex.reference_conv_layers),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted_for_a_stub(checker, reference, capsys):
    assert checker(reference)
    out = capsys.readouterr().out
    assert "correct" in out and "Exercise 1." in out

    def stub(*args):
        raise NotImplementedError

    assert not checker(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_labels_carry_the_notebook_number(capsys):
    for checker, label in (
        (ex.check_bptt_product, "Exercise 1.1 (the product of Jacobians)"),
        (ex.check_input_gradient, "Exercise 1.2 (the gradient for U)"),
        (ex.check_conv_layers, "Exercise 1.3 (layers a CNN needs)"),
    ):
        checker(lambda *args: (_ for _ in ()).throw(NotImplementedError))
        assert capsys.readouterr().out.startswith(label + ":")


def _reversed(jacobians):
    product = torch.eye(jacobians.shape[-1], dtype=jacobians.dtype)
    for J in jacobians:
        product = product @ J
    return product


# mistake -> a word its hint must contain (None: rejected, any message)
BPTT_MISTAKES = {
    "reversed order": (_reversed, "reversed"),
    "elementwise": (lambda j: j.prod(dim=0), "multiply matrices"),
    "summed": (lambda j: j.sum(dim=0), "do not add"),
    "last only": (lambda j: j[-1], None),
    "all products": (lambda j: chain_jacobians(j.unsqueeze(0))[0], None),
    "skips the first": (lambda j: ex.reference_bptt_product(j[1:]), "left out J_1"),
    "skips the last": (lambda j: ex.reference_bptt_product(j[:-1]), "left out J_T"),
}


def _multi_dot(jacobians):
    return torch.linalg.multi_dot(list(jacobians.flip(0)))


def test_bptt_checker_explains_a_single_step(capsys):
    assert not ex.check_bptt_product(_multi_dot)
    out = capsys.readouterr().out
    assert "not yet" in out and "the product is J_1 itself" in out and "multi_dot" in out

    def multi_dot_or_single(jacobians):
        return jacobians[0] if len(jacobians) == 1 else _multi_dot(jacobians)

    assert ex.check_bptt_product(multi_dot_or_single)
    assert "correct!" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(BPTT_MISTAKES))
def test_bptt_checker_rejects_typical_mistakes(name, capsys):
    mistake, hint = BPTT_MISTAKES[name]
    assert not ex.check_bptt_product(mistake)
    out = capsys.readouterr().out
    assert "not yet" in out
    assert hint is None or hint.lower() in out.lower()


def _slope(states):
    return 1 - states**2


GRADIENT_MISTAKES = {
    "no slope": (lambda x, s, d: d.T @ x, "slope"),
    "last step only": (lambda x, s, d: (d[-1:] * _slope(s[-1:])).T @ x[-1:], "every step"),
    "W's term (previous states)": (
        lambda x, s, d: (d * _slope(s)).T @ torch.cat([torch.zeros_like(s[:1]), s[:-1]]),
        "W's shape",
    ),
    "transposed": (lambda x, s, d: x.T @ (d * _slope(s)), "transposed"),
    "slope one step early": (
        lambda x, s, d: (d * torch.cat([torch.ones_like(s[:1]), _slope(s[:-1])])).T @ x,
        "same step",
    ),
    "tanh applied twice": (lambda x, s, d: (d * (1 - torch.tanh(s) ** 2)).T @ x, "already tanh"),
    "sigmoid slope": (lambda x, s, d: (d * torch.sigmoid(s) * (1 - torch.sigmoid(s))).T @ x, None),
    "half": (lambda x, s, d: 0.5 * ex.reference_input_gradient(x, s, d), "autograd"),
    "slope 1 - S": (lambda x, s, d: (d * (1 - s)).T @ x, "the state squared"),
    "previous input": (lambda x, s, d: (d * _slope(s))[1:].T @ x[:-1], "not x_{k-1}"),
}


@pytest.mark.parametrize("name", list(GRADIENT_MISTAKES))
def test_input_gradient_checker_rejects_typical_mistakes(name, capsys):
    mistake, hint = GRADIENT_MISTAKES[name]
    assert not ex.check_input_gradient(mistake)
    out = capsys.readouterr().out
    assert "not yet" in out
    assert hint is None or hint.lower() in out.lower()


CONV_MISTAKES = {
    "off by one": (lambda n, k, dilated: math.ceil(n / (k - 1)), "off by one"),
    "ignores kernel": (lambda n, k, dilated: ex.reference_conv_layers(n, 3, dilated), "kernel 3"),
    "ignores dilation": (lambda n, k, dilated: ex.reference_conv_layers(n, k, False), "receptive field"),
    "always dilated": (lambda n, k, dilated: ex.reference_conv_layers(n, k, True), None),
    "float": (lambda n, k, dilated: float(ex.reference_conv_layers(n, k, dilated)), "return an int"),
    "log2 of n": (
        lambda n, k, dilated: math.ceil(math.log2(n)) if dilated else ex.reference_conv_layers(n, k, False),
        "not 2^L",
    ),
    "one for n=1": (lambda n, k, dilated: max(1, ex.reference_conv_layers(n, k, dilated)), "0 layers"),
}


@pytest.mark.parametrize("name", list(CONV_MISTAKES))
def test_conv_checker_rejects_typical_mistakes(name, capsys):
    mistake, hint = CONV_MISTAKES[name]
    assert not ex.check_conv_layers(mistake)
    out = capsys.readouterr().out
    assert "not yet" in out
    assert hint is None or hint.lower() in out.lower()


def test_conv_checker_says_1_layer_not_1_layers(capsys):
    # n = 3, kernel 5: one layer is enough; an answer of 2 gets the generic message with the right count
    assert not ex.check_conv_layers(
        lambda n, k, dilated: 2 if (n, k) == (3, 5) else ex.reference_conv_layers(n, k, dilated)
    )
    out = capsys.readouterr().out
    assert "1 layer is needed" in out and "1 layers" not in out
    assert not ex.check_conv_layers(lambda n, k, dilated: ex.reference_conv_layers(n, k, dilated) + 2 * (n == 17))
    assert "layers are needed" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "1.1": (ex.check_bptt_product, ex.reference_bptt_product),
    "1.2": (ex.check_input_gradient, ex.reference_input_gradient),
    "1.3": (ex.check_conv_layers, ex.reference_conv_layers),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_bptt_product, _reversed, "顺序反了"),
        (ex.check_bptt_product, BPTT_MISTAKES["skips the first"][0], "你漏掉了 J_1"),
        (ex.check_bptt_product, _multi_dot, "乘积就是 J_1 本身"),
        (ex.check_input_gradient, GRADIENT_MISTAKES["no slope"][0], "乘以斜率"),
        (ex.check_input_gradient, GRADIENT_MISTAKES["transposed"][0], "结果转置了"),
        (ex.check_input_gradient, GRADIENT_MISTAKES["slope 1 - S"][0], "状态的平方"),
        (ex.check_input_gradient, GRADIENT_MISTAKES["previous input"][0], "U 乘的是第 k 步自己的输入 x_k"),
        (ex.check_input_gradient, GRADIENT_MISTAKES["W's term (previous states)"][0], "你的结果是 W 的形状"),
        (ex.check_conv_layers, CONV_MISTAKES["off by one"][0], "差了一层"),
        (ex.check_conv_layers, CONV_MISTAKES["log2 of n"][0], "而不是 2^L"),
        (ex.check_conv_layers, CONV_MISTAKES["one for n=1"][0], "n = 1 需要 0 层"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
