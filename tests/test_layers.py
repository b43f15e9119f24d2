"""layers.py: the one configurable block (BlockConfig), the residual wrapper and the feed-forward networks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_course.attention import KVCache
from transformer_course.layers import (
    BlockConfig,
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    Residual,
    SwiGLUFeedForward,
)
from transformer_course.masks import causal_mask
from transformer_course.modern_block import ModernDecoderBlock, llama_block_config
from transformer_course.norms import RMSNorm

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
    ffn = BlockConfig(d_model=8, num_heads=2, d_ff=12, activation=activation).feed_forward()
    assert isinstance(ffn, SwiGLUFeedForward if activation == "swiglu" else FeedForward)
    assert ffn(torch.randn(2, 3, 8)).shape == (2, 3, 8)


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
    block = ModernDecoderBlock(32, num_heads=4, num_kv_heads=2)
    assert type(block).__mro__[1] is EncoderLayer
    assert block.config == llama_block_config(32, 4, 2)
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
