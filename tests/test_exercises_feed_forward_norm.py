"""The checkers of notebook 07 accept the reference solutions and reject typical mistakes."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import feed_forward_norm as ex

LABEL_1 = "Exercise 7.1 (LayerNorm with the features in dimension 1)"


def _ln(x, g, b, eps, dim=1, unbiased=False):
    out = (x - x.mean(dim, keepdim=True)) / torch.sqrt(x.var(dim, unbiased=unbiased, keepdim=True) + eps)
    return out * g[:, None] + b[:, None]


def test_layer_norm_channels_first_checker_accepts_correct_answers(capsys):
    assert ex.check_layer_norm_channels_first(ex.layer_norm_channels_first_reference)
    # another correct answer: move the features last, normalise as in section 4, move them back
    assert ex.check_layer_norm_channels_first(
        lambda x, g, b, eps: F.layer_norm(x.transpose(1, 2), x.shape[1:2], g, b, eps).transpose(1, 2)
    )
    assert capsys.readouterr().out.count(f"{LABEL_1}: correct!") == 2


def test_layer_norm_channels_first_checker_rejects_typical_mistakes(capsys):
    def stub(x, g, b, eps):
        raise NotImplementedError

    assert not ex.check_layer_norm_channels_first(stub)
    assert f"{LABEL_1}: not attempted yet" in capsys.readouterr().out

    def eps_outside(x, g, b, eps):
        centred = x - x.mean(1, keepdim=True)
        return centred / (x.var(1, unbiased=False, keepdim=True).sqrt() + eps) * g[:, None] + b[:, None]

    def in_place(x, g, b, eps):
        x -= x.mean(1, keepdim=True)
        return x / torch.sqrt(x.var(1, unbiased=False, keepdim=True) + eps) * g[:, None] + b[:, None]

    mistakes = {
        # section 4's code unchanged: statistics over the last dimension, gamma lined up with it
        "give them shape (d, 1)": lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], eps=eps) * g + b,
        # the right statistics, gamma and beta not reshaped
        "LAST dimension": lambda x, g, b, eps: (
            (x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, unbiased=False, keepdim=True) + eps) * g + b
        ),
        "over the positions": lambda x, g, b, eps: _ln(x, g, b, eps, dim=-1),
        "transpose it back": lambda x, g, b, eps: F.layer_norm(x.transpose(1, 2), x.shape[1:2], g, b, eps),
        "unbiased variance": lambda x, g, b, eps: _ln(x, g, b, eps, unbiased=True),
        "gamma and beta were not applied": lambda x, g, b, eps: _ln(x, torch.ones_like(g), torch.zeros_like(b), eps),
        "inside the square root": eps_outside,
        "in place": in_place,
        "torch.Tensor": lambda x, g, b, eps: _ln(x, g, b, eps).numpy(),
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_layer_norm_channels_first(wrong), hint
        assert hint in capsys.readouterr().out, hint


def _he(block, depth, first_gain="relu", scale=None):
    """He init with zero biases, the last weights scaled by ``scale(depth)`` if given."""
    with torch.no_grad():
        nn.init.kaiming_normal_(block.linear1.weight, nonlinearity=first_gain)
        nn.init.kaiming_normal_(block.linear2.weight, nonlinearity="linear")
        nn.init.zeros_(block.linear1.bias)
        nn.init.zeros_(block.linear2.bias)
        if scale is not None:
            block.linear2.weight.mul_(scale(depth))


def test_residual_branch_init_checker_accepts_correct_answers(capsys):
    assert ex.check_residual_branch_init(ex.init_residual_branch_reference)

    def uniform_and_first_layer(block, depth):  # another init with the same variances, the scale on W_1 instead
        with torch.no_grad():
            nn.init.kaiming_uniform_(block.linear1.weight, nonlinearity="relu")
            nn.init.kaiming_uniform_(block.linear2.weight, nonlinearity="linear")
            block.linear1.weight /= depth**0.5
            block.linear1.bias.zero_()
            block.linear2.bias.zero_()

    assert ex.check_residual_branch_init(uniform_and_first_layer)

    def explicit_std(block, depth):
        with torch.no_grad():
            block.linear1.weight.normal_(0.0, (2 / 32) ** 0.5)
            block.linear2.weight.normal_(0.0, (1 / (128 * depth)) ** 0.5)
            block.linear1.bias.zero_()
            block.linear2.bias.zero_()

    assert ex.check_residual_branch_init(explicit_std)
    assert capsys.readouterr().out.count("Exercise 7.2 (a residual branch scaled for its depth): correct!") == 3


def test_residual_branch_init_checker_leaves_the_random_state_and_threads_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ex.check_residual_branch_init(ex.init_residual_branch_reference)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_residual_branch_init_checker_rejects_typical_mistakes(capsys):
    def stub(block, depth):
        raise NotImplementedError

    assert not ex.check_residual_branch_init(stub)
    assert "Exercise 7.2 (a residual branch scaled for its depth): not attempted yet" in capsys.readouterr().out
    mistakes = {
        "keeps the variance": lambda b, d: _he(b, d),  # plain He init, not scaled for the depth
        "(not by 1/depth, and not both layers)": lambda b, d: _he(b, d, scale=lambda depth: 1 / depth),
        "2/fan_in": lambda b, d: _he(b, d, first_gain="linear", scale=lambda depth: depth**-0.5),
        "GPT-2's scaling": lambda b, d: _he(b, d, scale=lambda depth: (2 * depth) ** -0.5),
        "did not change": lambda b, d: None,  # PyTorch's default init left in place
        "biases to zero": lambda b, d: _keep_default_biases(b, d),
        "should be 1/depth": lambda b, d: _he(b, d, scale=lambda depth: depth**-0.25),
        "scale ONE layer": _scale_both_layers,
        "PyTorch's default init": _default_init_scaled,
        "torch.no_grad()": _outside_no_grad,
        "change its weights, not its shape": lambda b, d: _widen(b, d),
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_residual_branch_init(wrong), hint
        assert hint in capsys.readouterr().out, hint

    assert not ex.check_residual_branch_init(lambda b, d: b.linear1.weight.data.copy_(torch.ones(3)))  # a crash
    assert "raised RuntimeError" in capsys.readouterr().out


def _scale_both_layers(block, depth):
    _he(block, depth, scale=lambda d: d**-0.5)
    with torch.no_grad():
        block.linear1.weight.mul_(depth**-0.5)


def _default_init_scaled(block, depth):  # PyTorch's default weights, zero biases, the last layer scaled
    with torch.no_grad():
        block.linear2.weight.mul_(depth**-0.5)
        block.linear1.bias.zero_()
        block.linear2.bias.zero_()


def _outside_no_grad(block, depth):
    _he(block, depth)
    block.linear2.weight /= depth**0.5


def _keep_default_biases(block, depth):
    with torch.no_grad():
        nn.init.kaiming_normal_(block.linear1.weight, nonlinearity="relu")
        nn.init.kaiming_normal_(block.linear2.weight, nonlinearity="linear")
        block.linear2.weight.mul_(depth**-0.5)


def _widen(block, depth):
    _he(block, depth, scale=lambda d: d**-0.5)
    block.linear2 = nn.Linear(128, 48, bias=False)
    with torch.no_grad():
        block.linear2.weight.zero_()
    block.linear1.bias.data.zero_()


LABEL_3 = "Exercise 7.3 (dropout in a DeepNorm sub-layer)"


def test_deepnorm_sublayer_checker(capsys):
    assert ex.check_deepnorm_sublayer(ex.deepnorm_sublayer_reference)
    assert f"{LABEL_3}: correct!" in capsys.readouterr().out

    def stub(x, f, norm, drop, a):
        raise NotImplementedError

    assert not ex.check_deepnorm_sublayer(stub)
    assert f"{LABEL_3}: not attempted yet" in capsys.readouterr().out
    mistakes = {
        "Dropout is missing": lambda x, f, norm, drop, a: norm(a * x + f(x)),
        "you dropped the sum": lambda x, f, norm, drop, a: norm(drop(a * x + f(x))),
        "you dropped alpha * x": lambda x, f, norm, drop, a: norm(drop(a * x) + f(x)),
        "not on its input": lambda x, f, norm, drop, a: norm(a * x + f(drop(x))),
        "dropped the normalised output": lambda x, f, norm, drop, a: drop(norm(a * x + f(x))),
        "not the sub-layer's output": lambda x, f, norm, drop, a: norm(x + a * drop(f(x))),
        "the paper's Post-LN": lambda x, f, norm, drop, a: norm(x + drop(f(x))),
        "that is Pre-LN": lambda x, f, norm, drop, a: a * x + drop(f(norm(x))),
        "takes x itself": lambda x, f, norm, drop, a: norm(a * x + drop(f(norm(x)))),
        "inside the norm": lambda x, f, norm, drop, a: a * norm(x + drop(f(x))),
        "differs": lambda x, f, norm, drop, a: norm(a * x + drop(f(x))) + 1.0,
        "shape": lambda x, f, norm, drop, a: norm(a * x + drop(f(x)))[0],
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_deepnorm_sublayer(wrong), hint
        assert hint.lower() in capsys.readouterr().out.lower(), hint


def test_a_crashing_answer_is_reported_not_raised(capsys):
    assert not ex.check_deepnorm_sublayer(lambda x, f, norm, drop, a: f(x, x))
    assert "raised TypeError" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "7.1": (ex.check_layer_norm_channels_first, ex.layer_norm_channels_first_reference),
    "7.2": (ex.check_residual_branch_init, ex.init_residual_branch_reference),
    "7.3": (ex.check_deepnorm_sublayer, ex.deepnorm_sublayer_reference),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_layer_norm_channels_first, lambda x, g, b, eps: _ln(x, g, b, eps, dim=-1), "在所有位置上"),
        (ex.check_layer_norm_channels_first, lambda x, g, b, eps: _ln(x, g, b, eps, unbiased=True), "无偏方差"),
        (
            ex.check_layer_norm_channels_first,
            lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], eps=eps) * g + b,
            "要把它们变成形状 (d, 1)",
        ),
        (ex.check_residual_branch_init, lambda b, d: _he(b, d), "这是 He 初始化"),
        (ex.check_residual_branch_init, _scale_both_layers, "你把方差除了两次 depth"),
        (ex.check_residual_branch_init, lambda b, d: _he(b, d, scale=lambda k: (2 * k) ** -0.5), "GPT-2 的缩放"),
        (
            ex.check_residual_branch_init,
            lambda b, d: _he(b, d, first_gain="linear", scale=lambda k: k**-0.5),
            "它前面那一层需要 He 的方差",
        ),
        (ex.check_residual_branch_init, _default_init_scaled, "PyTorch 的默认初始化"),
        (ex.check_residual_branch_init, _outside_no_grad, "不允许原地修改权重"),
        (ex.check_deepnorm_sublayer, lambda x, f, norm, drop, a: norm(a * x + f(x)), "缺少 dropout"),
        (ex.check_deepnorm_sublayer, lambda x, f, norm, drop, a: norm(x + drop(f(x))), "后置归一化（Post-LN）"),
        (ex.check_deepnorm_sublayer, lambda x, f, norm, drop, a: a * x + drop(f(norm(x))), "这是前置归一化"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


def test_layer_norm_checker_names_the_wrong_dimension_without_gamma_and_beta_too(capsys):
    wrong = lambda x, g, b, eps=1e-5: F.layer_norm(x, (x.shape[-1],), eps=eps)  # noqa: E731
    assert not ex.check_layer_norm_channels_first(wrong)
    assert "normalised each feature over the positions" in capsys.readouterr().out
