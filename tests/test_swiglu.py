"""SwiGLUFeedForward in transformer_course.layers, and that FeedForward kept its behaviour."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course import count_parameters
from transformer_course.layers import ACTIVATIONS, FeedForward, SwiGLUFeedForward


def test_swiglu_equals_its_formula():
    torch.manual_seed(0)
    ffn = SwiGLUFeedForward(16, 40)
    x = torch.randn(2, 5, 16)
    gate = x @ ffn.w_gate.weight.T
    up = x @ ffn.w_up.weight.T
    expected = (gate * torch.sigmoid(gate) * up) @ ffn.w_down.weight.T
    torch.testing.assert_close(ffn(x), expected)


def test_swiglu_with_bias_and_any_leading_shape():
    torch.manual_seed(1)
    ffn = SwiGLUFeedForward(8, 12, bias=True)
    assert ffn.w_gate.bias is not None and ffn.w_down.bias is not None
    x = torch.randn(3, 4, 5, 8)
    out = ffn(x)
    assert out.shape == x.shape
    expected = ffn.w_down(F.silu(ffn.w_gate(x)) * ffn.w_up(x))
    torch.testing.assert_close(out, expected)


def test_swiglu_is_position_wise():
    torch.manual_seed(2)
    ffn = SwiGLUFeedForward(8, 16)
    x = torch.randn(2, 6, 8)
    perm = torch.randperm(6)
    torch.testing.assert_close(ffn(x[:, perm]), ffn(x)[:, perm])


def test_matched_d_ff_keeps_the_parameter_count():
    d_model = 512
    d_ff = SwiGLUFeedForward.matched_d_ff(4 * d_model)
    assert d_ff == 1365
    relu = FeedForward(d_model, 4 * d_model)
    gated = SwiGLUFeedForward(d_model, d_ff)
    relu_weights = relu.linear1.weight.numel() + relu.linear2.weight.numel()
    assert abs(count_parameters(gated) - relu_weights) <= 3 * d_model  # rounding of 2/3 costs at most one row
    assert SwiGLUFeedForward.matched_d_ff(1) == 1


def test_dropout_only_in_training():
    torch.manual_seed(3)
    ffn = SwiGLUFeedForward(8, 16, dropout=0.5)
    x = torch.randn(2, 3, 8)
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn(x))
    ffn.train()
    assert not torch.allclose(ffn(x), ffn.eval()(x))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=0, d_ff=4), "d_model must be a positive int"),
        (dict(d_model=4, d_ff=2.5), "d_ff must be a positive int"),
        (dict(d_model=4, d_ff=8, dropout=1.0), r"dropout must be in \[0, 1\)"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SwiGLUFeedForward(**kwargs)


def test_bad_input_and_matched_d_ff_arguments():
    with pytest.raises(ValueError, match=r"d_model=8"):
        SwiGLUFeedForward(8, 16)(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="d_ff must be a positive int"):
        SwiGLUFeedForward.matched_d_ff(0)


def test_feed_forward_is_unchanged():
    assert sorted(ACTIVATIONS) == ["gelu", "relu"]
    torch.manual_seed(4)
    ffn = FeedForward(8, 32, activation="gelu")
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), ffn.linear2(F.gelu(ffn.linear1(x))))
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, 32, activation="swiglu")
