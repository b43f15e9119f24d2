"""The checkers of notebook 01 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.exercises import rnn_limits as ex
from transformer_course.rnn import RNNCell, chain_jacobians, conv_layers_to_connect


def test_references_agree_with_the_package():
    torch.manual_seed(0)
    cell = RNNCell(3, 5)
    x, h = torch.randn(4, 3), torch.randn(4, 5)
    b = cell.bias_ih + cell.bias_hh
    torch.testing.assert_close(ex.reference_rnn_step(x, h, cell.weight_ih, cell.weight_hh, b), cell(x, h))
    jacobians = torch.randn(1, 5, 4, 4, dtype=torch.float64)
    torch.testing.assert_close(ex.reference_bptt_product(jacobians[0]), chain_jacobians(jacobians)[0, 0])
    for n in range(1, 300):
        for k in (2, 3, 5):
            for dilated in (False, True):
                assert ex.reference_conv_layers(n, k, dilated) == conv_layers_to_connect(n, k, dilated)


@pytest.mark.parametrize(
    ("checker", "reference"),
    [
        (ex.check_rnn_step, ex.reference_rnn_step),
        (ex.check_bptt_product, ex.reference_bptt_product),
        (ex.check_conv_layers, ex.reference_conv_layers),
    ],
)
def test_checkers_accept_the_reference_and_say_not_attempted_for_a_stub(checker, reference, capsys):
    assert checker(reference)
    assert "correct" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert not checker(stub)
    assert "not attempted yet" in capsys.readouterr().out


RNN_MISTAKES = {
    "no tanh": lambda x, h, U, W, b: x @ U.T + h @ W.T + b,
    "sigmoid": lambda x, h, U, W, b: torch.sigmoid(x @ U.T + h @ W.T + b),
    "no bias": lambda x, h, U, W, b: torch.tanh(x @ U.T + h @ W.T),
    "no recurrence": lambda x, h, U, W, b: torch.tanh(x @ U.T + b),
    "W not transposed": lambda x, h, U, W, b: torch.tanh(x @ U.T + h @ W + b),
    "U not transposed": lambda x, h, U, W, b: torch.tanh(x @ U + h @ W.T + b),
    "U and W swapped": lambda x, h, U, W, b: torch.tanh(x @ W.T + h @ U.T + b),
    "numpy out": lambda x, h, U, W, b: torch.tanh(x @ U.T + h @ W.T + b).numpy(),
    "scaled": lambda x, h, U, W, b: 0.5 * torch.tanh(x @ U.T + h @ W.T + b),
}


@pytest.mark.parametrize("name", list(RNN_MISTAKES))
def test_rnn_step_checker_rejects_typical_mistakes(name, capsys):
    assert not ex.check_rnn_step(RNN_MISTAKES[name])
    assert "not yet" in capsys.readouterr().out


def _reversed(jacobians):
    product = torch.eye(jacobians.shape[-1], dtype=jacobians.dtype)
    for J in jacobians:
        product = product @ J
    return product


BPTT_MISTAKES = {
    "reversed order": _reversed,
    "elementwise": lambda j: j.prod(dim=0),
    "summed": lambda j: j.sum(dim=0),
    "last only": lambda j: j[-1],
    "all products": lambda j: chain_jacobians(j.unsqueeze(0))[0],
    "skips the first": lambda j: ex.reference_bptt_product(j[1:]),
}


@pytest.mark.parametrize("name", list(BPTT_MISTAKES))
def test_bptt_checker_rejects_typical_mistakes(name, capsys):
    assert not ex.check_bptt_product(BPTT_MISTAKES[name])
    assert "not yet" in capsys.readouterr().out


CONV_MISTAKES = {
    "off by one": lambda n, k, dilated: math.ceil(n / (k - 1)),
    "ignores kernel": lambda n, k, dilated: ex.reference_conv_layers(n, 3, dilated),
    "ignores dilation": lambda n, k, dilated: ex.reference_conv_layers(n, k, False),
    "always dilated": lambda n, k, dilated: ex.reference_conv_layers(n, k, True),
    "float": lambda n, k, dilated: float(ex.reference_conv_layers(n, k, dilated)),
    "log2 of n": lambda n, k, dilated: math.ceil(math.log2(n)) if dilated else ex.reference_conv_layers(n, k, False),
    "one for n=1": lambda n, k, dilated: max(1, ex.reference_conv_layers(n, k, dilated)),
}


@pytest.mark.parametrize("name", list(CONV_MISTAKES))
def test_conv_checker_rejects_typical_mistakes(name, capsys):
    assert not ex.check_conv_layers(CONV_MISTAKES[name])
    assert "not yet" in capsys.readouterr().out or "raised" in capsys.readouterr().out


def test_feedback_names_the_mistake(capsys):
    ex.check_rnn_step(RNN_MISTAKES["no tanh"])
    assert "tanh" in capsys.readouterr().out
    ex.check_rnn_step(RNN_MISTAKES["U not transposed"])
    assert "x @ U.T" in capsys.readouterr().out
    ex.check_bptt_product(BPTT_MISTAKES["reversed order"])
    assert "reversed" in capsys.readouterr().out
    ex.check_conv_layers(CONV_MISTAKES["off by one"])
    assert "off by one" in capsys.readouterr().out
    ex.check_conv_layers(CONV_MISTAKES["one for n=1"])
    assert "0 layers" in capsys.readouterr().out
