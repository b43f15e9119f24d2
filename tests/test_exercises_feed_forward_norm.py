"""The checkers of notebook 07 accept the reference solutions and reject typical mistakes."""

import math

import torch
import torch.nn.functional as F

from transformer_course.exercises import feed_forward_norm as ex


def test_layer_norm_checker_accepts_the_reference_and_torch(capsys):
    assert ex.check_layer_norm(ex.layer_norm_reference)
    assert ex.check_layer_norm(lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], g, b, eps))
    assert "correct" in capsys.readouterr().out


def test_layer_norm_checker_rejects_typical_mistakes(capsys):
    def stub(x, g, b, eps):
        raise NotImplementedError

    assert not ex.check_layer_norm(stub)
    assert "not attempted yet" in capsys.readouterr().out

    def unbiased(x, g, b, eps):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * g + b

    assert not ex.check_layer_norm(unbiased)
    assert "unbiased variance" in capsys.readouterr().out

    def over_batch(x, g, b, eps):
        return (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps) * g + b

    assert not ex.check_layer_norm(over_batch)
    assert "batch" in capsys.readouterr().out

    def no_affine(x, g, b, eps):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)

    assert not ex.check_layer_norm(no_affine)
    assert "gamma and beta" in capsys.readouterr().out

    def eps_outside(x, g, b, eps):
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True).sqrt() + eps) * g + b

    assert not ex.check_layer_norm(eps_outside)
    assert "inside the square root" in capsys.readouterr().out

    def in_place(x, g, b, eps):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * g + b

    assert not ex.check_layer_norm(in_place)
    assert "in place" in capsys.readouterr().out

    assert not ex.check_layer_norm(lambda x, g, b, eps: x.numpy())
    assert "torch.Tensor" in capsys.readouterr().out


def test_swiglu_checker(capsys):
    assert ex.check_swiglu(ex.swiglu_reference)
    assert "correct" in capsys.readouterr().out

    def stub(x, wg, wu, wd):
        raise NotImplementedError

    assert not ex.check_swiglu(stub)
    assert "not attempted yet" in capsys.readouterr().out
    mistakes = {
        "gate branch": lambda x, wg, wu, wd: ((x @ wg) * F.silu(x @ wu)) @ wd,
        "sigmoid gate": lambda x, wg, wu, wd: (torch.sigmoid(x @ wg) * (x @ wu)) @ wd,
        "element-wise": lambda x, wg, wu, wd: F.silu(x @ wg) @ wd,
        "ReGLU": lambda x, wg, wu, wd: (F.relu(x @ wg) * (x @ wu)) @ wd,
        "differs": lambda x, wg, wu, wd: (F.gelu(x @ wg) * (x @ wu)) @ wd,
        "shape": lambda x, wg, wu, wd: F.silu(x @ wg) * (x @ wu),
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_swiglu(wrong)
        assert hint in capsys.readouterr().out


def test_pre_ln_sublayer_checker(capsys):
    assert ex.check_pre_ln_sublayer(ex.pre_ln_sublayer_reference)
    assert "correct" in capsys.readouterr().out

    def stub(x, f, norm):
        raise NotImplementedError

    assert not ex.check_pre_ln_sublayer(stub)
    assert "not attempted yet" in capsys.readouterr().out
    mistakes = {
        "Post-LN": lambda x, f, norm: norm(x + f(x)),
        "residual is missing": lambda x, f, norm: f(norm(x)),
        "does not normalise the sum": lambda x, f, norm: norm(x + f(norm(x))),
        "add the original x": lambda x, f, norm: norm(x) + f(norm(x)),
        "differs": lambda x, f, norm: x + f(x),
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_pre_ln_sublayer(wrong)
        assert hint in capsys.readouterr().out


def test_a_crashing_answer_is_reported_not_raised(capsys):
    assert not ex.check_swiglu(lambda x, wg, wu, wd: x @ wd)
    assert "raised RuntimeError" in capsys.readouterr().out
    assert math.isfinite(1.0)
