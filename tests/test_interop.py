"""interop.py: weights copied between our modules and PyTorch's, both ways, and what cannot be copied.

The parity of each module with its PyTorch twin (through these copies) is tested next to the module:
test_attention.py, test_layers.py and test_model.py.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import assert_parity
from torch import nn

from transformer_course.core.attention import MultiHeadAttention
from transformer_course.core.interop import (
    decoder_layer_from_torch,
    encoder_layer_from_torch,
    encoder_layer_to_torch,
    load_torch_transformer,
    mha_from_torch,
    mha_to_torch,
    transformer_to_torch,
)
from transformer_course.core.layers import BlockConfig, EncoderLayer
from transformer_course.core.masks import causal_mask
from transformer_course.core.model import Transformer, TransformerConfig

SMALL = BlockConfig(d_model=16, num_heads=4, d_ff=32, dropout=0.0)


def test_multi_head_attention_round_trip_from_torch():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(24, 3, batch_first=True).eval()
    ours = mha_from_torch(theirs)
    x = torch.randn(2, 7, 24)
    assert_parity(ours(x), theirs(x, x, x, need_weights=False)[0])


def test_multi_head_attention_without_biases_both_ways():
    torch.manual_seed(1)
    ours = MultiHeadAttention(16, 4, bias=False).eval()
    theirs = mha_to_torch(ours)
    assert theirs.in_proj_bias is None and theirs.out_proj.bias is None
    x = torch.randn(2, 5, 16)
    assert_parity(ours(x), theirs(x, x, x, need_weights=False)[0])
    back = mha_from_torch(theirs)
    assert back.w_q.bias is None
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name


def test_copies_keep_the_train_or_eval_mode():
    for training in (True, False):
        assert mha_to_torch(MultiHeadAttention(16, 4).train(training)).training is training
        assert encoder_layer_to_torch(EncoderLayer(SMALL).train(training)).training is training
        theirs = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True).train(training)
        assert decoder_layer_from_torch(theirs).training is training


def test_load_torch_transformer_copies_every_stack_weight():
    torch.manual_seed(0)
    config = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12)
    theirs = nn.Transformer(64, 4, 2, 2, 256, batch_first=True).eval()
    theirs.encoder.norm = None
    theirs.decoder.norm = None
    model = load_torch_transformer(Transformer(config), theirs).eval()
    x, y = torch.randn(2, 6, 64), torch.randn(2, 4, 64)
    assert_parity(model.decoder(y, model.encoder(x), causal_mask(4)), theirs(x, y, tgt_mask=~causal_mask(4)[0, 0]))
    with pytest.raises(ValueError, match="differ in structure"):
        load_torch_transformer(Transformer(config), nn.Transformer(64, 4, 2, 2, 256, batch_first=True))


def test_pre_ln_transformer_round_trips_with_its_final_norms():
    torch.manual_seed(2)
    config = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12, norm_first=True, dropout=0.0)
    model = Transformer(config)
    theirs = transformer_to_torch(model)
    assert theirs.encoder.norm is not None and theirs.decoder.norm is not None
    copy = load_torch_transformer(Transformer(config), theirs)
    stacks = [k for k in model.state_dict() if k.startswith(("encoder.", "decoder."))]
    assert "encoder.norm.weight" in stacks and "decoder.norm.bias" in stacks
    for key in stacks:
        assert torch.equal(copy.state_dict()[key], model.state_dict()[key]), key


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(norm="rms"), "no norm='rms'"),
        (dict(activation="swiglu"), "no activation='swiglu'"),
        (dict(num_kv_heads=2), "no num_kv_heads=2"),
        (dict(rope=True), "no rope=True"),
        (dict(bias=False), "no bias=False"),
    ],
)
def test_what_pytorchs_layers_lack_is_rejected(fields, match):
    with pytest.raises(ValueError, match=f"PyTorch's Transformer layers have {match}"):
        encoder_layer_to_torch(EncoderLayer(SMALL.replace(**fields)))


def test_as_many_kv_heads_as_query_heads_is_plain_multi_head_attention():
    torch.manual_seed(3)
    layer = EncoderLayer(SMALL.replace(num_kv_heads=4)).eval()
    x = torch.randn(2, 5, 16)
    assert_parity(encoder_layer_to_torch(layer).eval()(x), layer(x))


@pytest.mark.parametrize(
    ("fields", "match"), [(dict(positional="none", rope=True), "no rope=True"), (dict(norm="rms"), "no norm")]
)
def test_transformer_to_torch_checks_the_layers_too(fields, match):
    config = TransformerConfig.preset("tiny", src_vocab_size=9, tgt_vocab_size=9, **fields)
    with pytest.raises(ValueError, match=match):
        transformer_to_torch(Transformer(config))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_what_our_modules_lack_is_rejected():
    with pytest.raises(ValueError, match="batch_first=True"):
        encoder_layer_from_torch(nn.TransformerEncoderLayer(16, 4, 32))
    with pytest.raises(ValueError, match="batch_first=True"):
        decoder_layer_from_torch(nn.TransformerDecoderLayer(16, 4, 32))
    with pytest.raises(ValueError, match="batch_first=True"):
        load_torch_transformer(
            Transformer(TransformerConfig.preset("tiny", src_vocab_size=9, tgt_vocab_size=9)),
            nn.Transformer(64, 4, 2, 2, 256),
        )
    tanh_gelu = nn.TransformerEncoderLayer(16, 4, 32, activation=nn.GELU(approximate="tanh"), batch_first=True)
    with pytest.raises(ValueError, match=r"unsupported activation GELU\(approximate='tanh'\)"):
        encoder_layer_from_torch(tanh_gelu)
    with pytest.raises(ValueError, match="kdim == vdim == embed_dim"):
        mha_from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8, batch_first=True))


def test_load_torch_transformer_names_a_shape_mismatch():
    config = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12)
    theirs = nn.Transformer(64, 4, 2, 2, 128, batch_first=True)  # d_ff 128, ours 256
    theirs.encoder.norm = None
    theirs.decoder.norm = None
    match = r"shape mismatch at encoder\.layers\.0\.feed_forward\.linear1\.weight: ours \(256, 64\), theirs \(128, 64\)"
    with pytest.raises(ValueError, match=match):
        load_torch_transformer(Transformer(config), theirs)


def test_interop_refuses_what_pytorch_cannot_hold():
    with pytest.raises(ValueError, match="nn.MultiheadAttention has no rope"):
        mha_to_torch(MultiHeadAttention(16, 4, rope=True))
    with pytest.raises(ValueError, match="num_kv_heads=1"):
        mha_to_torch(MultiHeadAttention(16, 4, num_kv_heads=1))
    with pytest.raises(ValueError, match="PyTorch's Transformer layers have no norm='rms'"):
        encoder_layer_to_torch(EncoderLayer(d_model=16, num_heads=4, d_ff=32, norm="rms"))


def test_a_torch_layer_without_biases_is_refused_clearly():
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, bias=False)
    with pytest.raises(ValueError, match="built with bias=False"):
        encoder_layer_from_torch(theirs)


@pytest.mark.parametrize("setting", [dict(norm_first=True), dict(activation="gelu")])
def test_loading_a_torch_transformer_with_other_settings_is_refused(setting):
    config = TransformerConfig.preset("tiny", src_vocab_size=10, tgt_vocab_size=10)
    with warnings.catch_warnings():  # PyTorch warns that Pre-LN turns off its nested-tensor fast path
        warnings.simplefilter("ignore")
        theirs = nn.Transformer(64, 4, 2, 2, 256, batch_first=True, **setting)
    with pytest.raises(ValueError, match="the two models differ in"):
        load_torch_transformer(Transformer(config), theirs)
