"""Notebook 17's checkers accept the reference solutions and name the likeliest mistakes."""

import math

import pytest
import torch
from chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from torch import nn

from transformer_course.exercises import fine_tuning as ex
from transformer_course.training.lora import LoRALinear, lora_parameter_count

GRADIENTS_LABEL = "Exercise 17.1 (LoRA's gradients)"
RANK_LABEL = "Exercise 17.2 (the rank at which LoRA trains as much as the last block)"


def _unanswered(*args):
    raise NotImplementedError


# ------------------------------------------------------------------------------------------------ 17.1
def test_reference_gradients_equal_autograd_through_the_package_layer():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(6, 4, bias=False), rank=3, alpha=5.0).double()
    with torch.no_grad():
        layer.lora_b.normal_()  # as after training
    x = torch.randn(7, 6, dtype=torch.float64)
    g = torch.randn(7, 4, dtype=torch.float64)
    (layer(x) * g).sum().backward()  # dL/dy = g
    grad_a, grad_b = ex.reference_lora_gradients(x, g, layer.lora_a.detach(), layer.lora_b.detach(), layer.scale)
    assert torch.allclose(grad_a, layer.lora_a.grad, atol=1e-12)
    assert torch.allclose(grad_b, layer.lora_b.grad, atol=1e-12)


def test_at_b_zero_only_b_has_a_gradient():
    x, g, a, b = ex._gradient_inputs(6, 5, 3, 2, True, 0)
    grad_a, grad_b = ex.reference_lora_gradients(x, g, a, b, 4.0)
    assert not grad_a.any() and grad_b.abs().min() > 0


def test_gradient_checker_accepts_the_reference(capsys):
    assert ex.check_lora_gradients(ex.reference_lora_gradients)
    assert capsys.readouterr().out == f"{GRADIENTS_LABEL}: correct!\n"


def _right(x, g, a, b, s):
    return s * (g @ b).T @ x, s * g.T @ (x @ a.T)


def _no_scale_on_b(x, g, a, b, s):
    return s * (g @ b).T @ x, g.T @ (x @ a.T)


def _no_scale_on_a(x, g, a, b, s):
    return (g @ b).T @ x, s * g.T @ (x @ a.T)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_no_scale_on_b, "your dL/dB leaves out the scale"),
        (_no_scale_on_a, "your dL/dA leaves out the scale"),
        (
            lambda x, g, a, b, s: (s * x.T @ (g @ b), s * g.T @ (x @ a.T)),
            "dL/dA has shape (5, 2), the transpose of A's",
        ),
        (
            lambda x, g, a, b, s: (s * (g @ b).T @ x, s * (x @ a.T).T @ g),
            "dL/dB has shape (2, 3), the transpose of B's",
        ),
        (lambda x, g, a, b, s: _right(x, g, a, b, s)[::-1], "you returned (dL/dB, dL/dA)"),
        (lambda x, g, a, b, s: (-_right(x, g, a, b, s)[0], -_right(x, g, a, b, s)[1]), "dL/dB has the wrong sign"),
        (lambda x, g, a, b, s: (_right(x, g, a, b, s)[0], _right(x, g, a, b, s)[1] / len(x)), "averages over the n"),
        (
            lambda x, g, a, b, s: (_right(x, g, a, b, s)[0], s * g.sum(0)[:, None] * (x @ a.T).sum(0)[None, :]),
            "sums over the positions before multiplying",
        ),
        (
            lambda x, g, a, b, s: (s * (g @ b).sum(0)[:, None] * x.sum(0)[None, :], _right(x, g, a, b, s)[1]),
            "your dL/dA sums over the positions before multiplying",
        ),
        (lambda x, g, a, b, s: (s * a, _right(x, g, a, b, s)[1]), "dL/dA must be zero: A reaches the output only"),
        (lambda x, g, a, b, s: (_right(x, g, a, b, s)[0], torch.zeros_like(b)), "your dL/dB is zero, but it is not"),
        (lambda x, g, a, b, s: (_right(x, g, a, b, s)[0], 2 * s * g.T @ (x @ a.T)), "differs from autograd's"),
        (lambda x, g, a, b, s: (s * (g @ b).T @ x, s * g.T @ (x @ a)), "a product failed"),
        (lambda x, g, a, b, s: _right(x, g, a, b, s)[0], "Return two tensors, (dL/dA, dL/dB); got Tensor"),
        (
            lambda x, g, a, b, s: (_right(x, g, a, b, s)[0].tolist(), _right(x, g, a, b, s)[1]),
            "should be a torch.Tensor",
        ),
    ],
)
def test_gradient_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_lora_gradients(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{GRADIENTS_LABEL}: not yet.") and hint in out, out


def test_the_scale_mistake_on_a_is_found_after_step_0():
    # at B = 0 (the first case) dL/dA is zero with or without the scale: the second case names the mistake
    assert not ex.check_lora_gradients(_no_scale_on_a)


def test_each_named_gradient_mistake_differs_from_the_answer():
    for seed, (n, d_in, d_out, rank, scale, b_zero) in enumerate(ex._GRADIENT_CASES):
        x, g, a, b = ex._gradient_inputs(n, d_in, d_out, rank, b_zero, seed)
        grad_a, grad_b = ex.autograd_lora_gradients(x, g, a, b, scale)
        wrongs = [grad_b / scale, -grad_b, grad_b / n, scale * g.sum(0)[:, None] * (x @ a.T).sum(0)[None, :]]
        assert all(not torch.allclose(w, grad_b) for w in wrongs)
        if not b_zero:
            wrongs = [grad_a / scale, -grad_a, grad_a / n, scale * (g @ b).sum(0)[:, None] * x.sum(0)[None, :]]
            assert all(not torch.allclose(w, grad_a) for w in wrongs)
        assert len({n, d_in, d_out, rank}) == 4 and scale != 1


def test_gradient_checker_says_not_attempted(capsys):
    assert not ex.check_lora_gradients(_unanswered)
    assert capsys.readouterr().out == (
        f"{GRADIENTS_LABEL}: not attempted yet - replace the `raise NotImplementedError` with your code.\n"
    )


def test_gradient_checker_reports_other_errors_as_feedback(capsys):
    def crashes(x, g, a, b, s):
        raise RuntimeError("something else went wrong")

    assert not ex.check_lora_gradients(crashes)
    assert "your code raised RuntimeError: something else went wrong" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ 17.2
def test_reference_rank_is_the_smallest_with_enough_numbers():
    for shapes, last_block in ex._RANK_CASES:
        r = ex.reference_rank_matching_last_block(shapes, last_block)
        assert lora_parameter_count(list(shapes), r) >= last_block > lora_parameter_count(list(shapes), r - 1)
    assert ex.reference_rank_matching_last_block(ex._RANK_CASES[1][0], 330) == 3  # exact: 3 x 110 = 330


def test_the_cases_are_the_shipped_model_and_llama():
    shapes, last_block = ex._RANK_CASES[0]
    assert lora_parameter_count(list(shapes), 8) == 73_696  # notebook 17's LoRA
    assert last_block == 180_480  # notebook 17's last block and final norm
    llama_shapes, llama_block = ex._RANK_CASES[2]
    assert len(llama_shapes) == 64 and llama_block == 202_383_360


def test_rank_checker_accepts_the_reference(capsys):
    assert ex.check_rank_matching_last_block(ex.reference_rank_matching_last_block)
    assert capsys.readouterr().out == f"{RANK_LABEL}: correct!\n"


def _per_rank(shapes):
    return sum(o + i for o, i in shapes)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda shapes, n: n // _per_rank(shapes), "you rounded the quotient down"),
        (lambda shapes, n: round(n / _per_rank(shapes)), "(or to the nearest whole number)"),
        (lambda shapes, n: n // _per_rank(shapes) + 1, "'at least as many' includes 'as many'"),
        (lambda shapes, n: math.ceil(n / sum(o * i for o, i in shapes)), "r x in x out per layer"),
        (lambda shapes, n: math.ceil(n / sum(shapes[0])), "the first layer's r (in + out) only"),
        (lambda shapes, n: math.ceil(n / sum(i for o, i in shapes)), "only A (r, in)"),
        (lambda shapes, n: math.ceil(n / sum(o for o, i in shapes)), "only B (out, r)"),
        (lambda shapes, n: math.ceil(n / _per_rank(shapes)) * _per_rank(shapes), "returned a number of parameters"),
        (lambda shapes, n: n, "returned a number of parameters"),
        (lambda shapes, n: float(math.ceil(n / _per_rank(shapes))), "Return a Python int, got float"),
        (lambda shapes, n: 2, "the rank must be larger"),
        (lambda shapes, n: 2 * math.ceil(n / _per_rank(shapes)), "but so does a smaller rank"),
    ],
)
def test_rank_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_rank_matching_last_block(wrong)
    out = capsys.readouterr().out
    assert out.startswith(f"{RANK_LABEL}: not yet.") and hint in out, out


def test_no_rank_hint_gives_the_answer_away(capsys):
    wrongs = [
        lambda shapes, n: n // _per_rank(shapes),
        lambda shapes, n: round(n / _per_rank(shapes)),
        lambda shapes, n: n // _per_rank(shapes) + 1,
        lambda shapes, n: math.ceil(n / sum(o * i for o, i in shapes)),
        lambda shapes, n: 2,
    ]
    for wrong in wrongs:
        assert not ex.check_rank_matching_last_block(wrong)
        out = capsys.readouterr().out
        for shapes, last_block in ex._RANK_CASES:
            right = ex.reference_rank_matching_last_block(shapes, last_block)
            assert f" {right} " not in out and f" {right}," not in out and f" {right}." not in out, out


def test_each_named_rank_mistake_differs_from_the_answer_in_its_case():
    for shapes, last_block in ex._RANK_CASES:
        right = ex.reference_rank_matching_last_block(shapes, last_block)
        wrongs = [
            math.ceil(last_block / sum(o * i for o, i in shapes)),
            math.ceil(last_block / sum(shapes[0])),
            math.ceil(last_block / sum(i for o, i in shapes)),
        ]
        assert right not in wrongs
    first_shapes, first_block = ex._RANK_CASES[0]  # only A and only B differ where in and out differ
    assert math.ceil(first_block / sum(i for o, i in first_shapes)) != math.ceil(
        first_block / sum(o for o, i in first_shapes)
    )


def test_rank_checker_says_not_attempted(capsys):
    assert not ex.check_rank_matching_last_block(_unanswered)
    assert "not attempted yet" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ Chinese
def test_checkers_speak_chinese(capsys):
    assert_checker_speaks_chinese("17.1", ex.check_lora_gradients, ex.reference_lora_gradients, capsys)
    assert_checker_speaks_chinese(
        "17.2", ex.check_rank_matching_last_block, ex.reference_rank_matching_last_block, capsys
    )
    assert_mistake_named_in_chinese(ex.check_lora_gradients, _no_scale_on_b, "漏掉了缩放系数", capsys)
    assert_mistake_named_in_chinese(
        ex.check_lora_gradients, lambda x, g, a, b, s: (s * a, _right(x, g, a, b, s)[1]), "dL/dA 应为零", capsys
    )
    assert_mistake_named_in_chinese(
        ex.check_rank_matching_last_block, lambda shapes, n: n // _per_rank(shapes), "向上取整", capsys
    )
    assert_mistake_named_in_chinese(
        ex.check_rank_matching_last_block,
        lambda shapes, n: math.ceil(n / sum(o * i for o, i in shapes)),
        "两个窄矩阵",
        capsys,
    )
