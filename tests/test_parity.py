"""Our modules equal PyTorch's, number for number, with copied weights (eval mode, float32, <= 1e-5)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_course import (
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
)
from transformer_course.interop import (
    decoder_layer_from_torch,
    decoder_layer_to_torch,
    encoder_layer_from_torch,
    encoder_layer_to_torch,
    load_torch_transformer,
    mha_from_torch,
    mha_to_torch,
    transformer_to_torch,
)

ATOL = 1e-5
SRC = torch.tensor([[5, 6, 7, 8, 0, 0], [3, 4, 5, 6, 7, 8], [9, 0, 0, 0, 0, 0]])
TGT = torch.tensor([[1, 5, 6, 0, 0], [1, 3, 4, 5, 6], [1, 9, 9, 9, 0]])


def assert_parity(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "both"])
def test_attention_function_matches_sdpa(mask_kind):
    q, k, v = (torch.randn(3, 4, 6, 16) for _ in range(3))
    pad = padding_mask(SRC, pad_id=0)  # (3, 1, 1, 6)
    masks = {"none": None, "padding": pad, "causal": causal_mask(6), "both": combine_masks(pad, causal_mask(6))}
    mask = masks[mask_kind]
    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_parity(ours, theirs)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6))


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("use_padding", [False, True])
def test_multi_head_attention_matches_torch(cross, use_padding):
    ours = MultiHeadAttention(32, 4).eval()
    theirs = mha_to_torch(ours).eval()
    x = torch.randn(3, 5, 32)
    memory = torch.randn(3, 6, 32) if cross else x[:, :5]
    kv_ids = SRC if cross else SRC[:, :5]
    mask = padding_mask(kv_ids, 0) if use_padding else None
    out = ours(x, memory, memory, mask=mask)
    # nn.MultiheadAttention's key_padding_mask uses the opposite convention: True = ignore
    ref, ref_weights = theirs(
        x, memory, memory, key_padding_mask=(kv_ids == 0) if use_padding else None, average_attn_weights=False
    )
    assert_parity(out, ref)
    assert_parity(ours.attention_weights, ref_weights)


def test_multi_head_attention_round_trip_from_torch():
    theirs = nn.MultiheadAttention(24, 3, batch_first=True).eval()
    ours = mha_from_torch(theirs)
    x = torch.randn(2, 7, 24)
    assert_parity(ours(x), theirs(x, x, x, need_weights=False)[0])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
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


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_whole_model_matches_nn_transformer(norm_first):
    config = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=11, norm_first=norm_first)
    model = Transformer(config).eval()
    theirs = transformer_to_torch(model).eval()
    src_embedded = model.positional(model.src_embedding(SRC))
    tgt_embedded = model.positional(model.tgt_embedding(TGT))
    heads = config.num_heads
    tgt_mask = ~model.target_mask(TGT)[:, 0].repeat_interleave(heads, dim=0)  # (batch*heads, T, T), True = blocked
    ref = theirs(
        src_embedded, tgt_embedded, tgt_mask=tgt_mask, src_key_padding_mask=SRC == 0, memory_key_padding_mask=SRC == 0
    )
    memory = model.encode(SRC)
    out = model.decode(TGT, memory, model.source_mask(SRC))
    assert_parity(out, ref)
    logits = model(SRC, TGT)
    assert logits.shape == (3, 5, 11)
    assert_parity(logits, model.output_projection(ref))


def test_load_torch_transformer_copies_every_stack_weight():
    config = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12)
    theirs = nn.Transformer(64, 4, 2, 2, 256, batch_first=True).eval()
    theirs.encoder.norm = None
    theirs.decoder.norm = None
    model = load_torch_transformer(Transformer(config), theirs).eval()
    x, y = torch.randn(2, 6, 64), torch.randn(2, 4, 64)
    assert_parity(model.decoder(y, model.encoder(x), causal_mask(4)), theirs(x, y, tgt_mask=~causal_mask(4)[0, 0]))
    with pytest.raises(ValueError, match="differ in structure"):
        load_torch_transformer(Transformer(config), nn.Transformer(64, 4, 2, 2, 256, batch_first=True))
