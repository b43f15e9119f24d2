"""layers.py: the one configurable block (BlockConfig), the residual wrapper, the feed-forward networks (ReLU, GELU,
SwiGLU), and the layers' parity with PyTorch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import SRC, assert_parity
from torch import nn

from transformer_course.core.attention import KVCache
from transformer_course.core.interop import (
    decoder_layer_from_torch,
    decoder_layer_to_torch,
    encoder_layer_from_torch,
    encoder_layer_to_torch,
)
from transformer_course.core.layers import (
    ACTIVATIONS,
    BlockConfig,
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    Residual,
    SwiGLUFeedForward,
)
from transformer_course.core.masks import causal_mask, padding_mask
from transformer_course.core.norms import RMSNorm
from transformer_course.families.decoder_lm import llama_block_config
from transformer_course.utils import count_parameters

SMALL = BlockConfig(d_model=16, num_heads=4, d_ff=32, dropout=0.0)


def test_paper_defaults():
    layer = EncoderLayer()
    assert layer.config == BlockConfig()
    assert (layer.config.d_model, layer.config.num_heads, layer.config.d_ff) == (512, 8, 2048)
    assert isinstance(layer.self_attention_residual.norm, nn.LayerNorm) and not layer.config.norm_first
    assert isinstance(layer.feed_forward, FeedForward) and layer.feed_forward.activation == "relu"


def test_swapping_the_norm_is_one_field():
    layer = EncoderLayer(SMALL.replace(norm="rms"))
    norms = [m for m in layer.modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]
    assert len(norms) == 2 and all(isinstance(m, RMSNorm) for m in norms)
    decoder_norms = [m for m in DecoderLayer(SMALL, norm="rms").modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]
    assert len(decoder_norms) == 3 and all(isinstance(m, RMSNorm) for m in decoder_norms)


def test_keywords_and_config_build_the_same_layer():
    torch.manual_seed(0)
    from_config = EncoderLayer(SMALL.replace(norm_first=True))
    torch.manual_seed(0)
    from_keywords = EncoderLayer(d_model=16, num_heads=4, d_ff=32, dropout=0.0, norm_first=True)
    assert from_config.config == from_keywords.config
    for (name, a), (_, b) in zip(from_config.state_dict().items(), from_keywords.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_follows_activation(activation):
    torch.manual_seed(0)
    ffn = BlockConfig(d_model=8, num_heads=2, d_ff=12, activation=activation).feed_forward().eval()
    x = torch.randn(2, 3, 8)
    if activation == "swiglu":
        assert isinstance(ffn, SwiGLUFeedForward) and ffn.d_ff == 12
        expected = ffn.w_down(F.silu(ffn.w_gate(x)) * ffn.w_up(x))
    else:
        assert isinstance(ffn, FeedForward) and ffn.activation == activation
        expected = ffn.linear2({"relu": F.relu, "gelu": F.gelu}[activation](ffn.linear1(x)))
    torch.testing.assert_close(ffn(x), expected)


def test_bias_false_removes_every_bias_but_the_norms():
    layer = DecoderLayer(SMALL, bias=False)
    names = [n for n, _ in layer.named_parameters() if n.endswith("bias")]
    assert names and all("norm" in n for n in names)


def test_rope_reaches_self_attention_not_cross_attention():
    layer = DecoderLayer(SMALL, rope=True)
    assert layer.self_attention.rope is not None and layer.cross_attention.rope is None


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_formulas(norm_first):
    torch.manual_seed(1)
    residual = Residual(8, norm_first=norm_first, norm="rms")
    x, f = torch.randn(2, 3, 8), nn.Linear(8, 8)
    expected = x + f(residual.norm(x)) if norm_first else residual.norm(x + f(x))
    torch.testing.assert_close(residual(x, f), expected)


def test_encoder_layer_with_causal_flag_is_a_decoder_only_block():
    torch.manual_seed(2)
    layer = EncoderLayer(SMALL).eval()
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(layer(x, causal=True), layer(x, causal_mask(5)))
    cache = KVCache()
    steps = [layer(x[:, i : i + 1], cache=cache, causal=True) for i in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), layer(x, causal=True))


def test_modern_block_is_a_preset_of_the_one_block():
    block = EncoderLayer(llama_block_config(32, num_heads=4, num_kv_heads=2))
    c = block.config
    assert (c.norm, c.norm_first, c.activation, c.rope, c.num_kv_heads, c.bias) == (
        "rms",
        True,
        "swiglu",
        True,
        2,
        False,
    )


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(norm="batch"), "norm must be one of"),
        (dict(activation="tanh"), "activation must be one of"),
        (dict(num_heads=3), r"d_model \(16\) must be divisible by num_heads \(3\)"),
        (dict(num_kv_heads=3), "divisible by num_kv_heads"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
        (dict(norm_eps=0.0), "norm_eps must be a positive number"),
        (dict(d_model=12, num_heads=4, rope=True), "d_model / num_heads must be even"),
        (dict(d_ff=0), "d_ff must be a positive int"),
    ],
)
def test_bad_config_raises_value_error(fields, match):
    with pytest.raises(ValueError, match=match):
        SMALL.replace(**fields)


def test_config_must_be_a_block_config():
    with pytest.raises(ValueError, match="config must be a BlockConfig"):
        EncoderLayer(16)


# ---- parity with PyTorch -------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    ours = EncoderLayer(
        d_model=32, num_heads=4, d_ff=64, dropout=0.1, activation=activation, norm_first=norm_first
    ).eval()
    theirs = encoder_layer_to_torch(ours).eval()
    x = torch.randn(3, 6, 32)
    mask = padding_mask(SRC, 0)
    ref = theirs(x, src_key_padding_mask=SRC == 0)
    out = ours(x, mask)
    real = SRC != 0  # PyTorch's fast path may leave padded rows as anything; compare real positions
    assert_parity(out[real], ref[real])
    back = encoder_layer_from_torch(theirs).eval()
    assert_parity(back(x, mask), out)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    ours = DecoderLayer(
        d_model=32, num_heads=4, d_ff=64, dropout=0.1, activation=activation, norm_first=norm_first
    ).eval()
    theirs = decoder_layer_to_torch(ours).eval()
    y, memory = torch.randn(3, 5, 32), torch.randn(3, 6, 32)
    out = ours(y, memory, causal_mask(5), padding_mask(SRC, 0))
    ref = theirs(y, memory, tgt_mask=~causal_mask(5)[0, 0], memory_key_padding_mask=SRC == 0)
    assert_parity(out, ref)
    back = decoder_layer_from_torch(theirs).eval()
    assert_parity(back(y, memory, causal_mask(5), padding_mask(SRC, 0)), out)


# ---- SwiGLUFeedForward, and FeedForward kept its behaviour ---------------------------------------------


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


def test_swiglu_dropout_only_in_training():
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
def test_swiglu_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SwiGLUFeedForward(**kwargs)


def test_swiglu_bad_input_and_matched_d_ff_arguments():
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
