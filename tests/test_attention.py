"""attention.py: the one MultiHeadAttention and its options (K/V heads, RoPE, causal, cache, backends)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import SRC, assert_parity

from transformer_course.core.attention import (
    KVCache,
    MultiHeadAttention,
    attention_maps,
    fused_attention,
    grouped_query_attention,
    scaled_dot_product_attention,
    set_attention_backend,
)
from transformer_course.core.interop import mha_to_torch
from transformer_course.core.masks import causal_mask, combine_masks, padding_mask
from transformer_course.core.model import Transformer, TransformerConfig
from transformer_course.core.rope import RotaryEmbedding
from transformer_course.efficient.kv_cache import repeat_kv


def _heads(layer: MultiHeadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return layer.split_heads(layer.w_q(x)), layer.split_heads(layer.w_k(x)), layer.split_heads(layer.w_v(x))


@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_kv_heads_equal_repeated_keys_and_values(kv_heads):
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 8, num_kv_heads=kv_heads).eval()
    assert layer.w_k.out_features == layer.w_v.out_features == kv_heads * 4
    x = torch.randn(2, 5, 32)
    q, k, v = _heads(layer, x)
    expected, _ = scaled_dot_product_attention(q, repeat_kv(k, 8 // kv_heads), repeat_kv(v, 8 // kv_heads))
    torch.testing.assert_close(layer(x), layer.w_o(layer.merge_heads(expected)))
    assert layer.attention_weights.shape == (2, 8, 5, 5)


def test_causal_flag_equals_a_causal_mask_and_combines_with_padding():
    torch.manual_seed(1)
    layer = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(layer(x, causal=True), layer(x, mask=causal_mask(6)))
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 10]])
    both = padding_mask(ids, 0) & causal_mask(6)
    torch.testing.assert_close(layer(x, mask=padding_mask(ids, 0), causal=True), layer(x, mask=both))


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 1])
def test_cached_steps_equal_the_full_causal_pass(rope, kv_heads):
    torch.manual_seed(2)
    layer = MultiHeadAttention(32, 4, num_kv_heads=kv_heads, rope=rope, bias=False).eval()
    x = torch.randn(2, 7, 32)
    cache = KVCache()
    steps = [layer(x[:, :3], causal=True, cache=cache)] + [
        layer(x[:, i : i + 1], causal=True, cache=cache) for i in range(3, 7)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), layer(x, causal=True))
    assert cache.k.shape == (2, kv_heads, 7, 8) and len(cache) == 7


def test_rope_rotates_queries_and_keys_by_position():
    torch.manual_seed(3)
    layer = MultiHeadAttention(16, 2, rope=True, max_len=32).eval()
    x = torch.randn(1, 5, 16)
    q, k, v = _heads(layer, x)
    rope = RotaryEmbedding(8, 32)
    expected, _ = scaled_dot_product_attention(rope(q), rope(k), v, causal_mask(5))
    torch.testing.assert_close(layer(x, causal=True), layer.w_o(layer.merge_heads(expected)))


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(4)
    layer = MultiHeadAttention(16, 2, rope=True).eval()
    x = torch.randn(1, 6, 16)
    layer(x, causal=True)
    first = layer.attention_weights
    shifted = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    keep = torch.ones(9, 9, dtype=torch.bool)
    keep[3:, :3] = False  # the new tokens never see the 3 in front: only their positions moved
    layer(shifted, mask=keep, causal=True)
    torch.testing.assert_close(layer.attention_weights[..., 3:, 3:], first)


def test_fused_backend_equals_written_out_with_groups_and_masks():
    torch.manual_seed(5)
    layer = MultiHeadAttention(32, 8, num_kv_heads=2, rope=True).eval()
    x = torch.randn(3, 6, 32)
    ids = torch.tensor([[4, 5, 6, 0, 0, 0], [4, 5, 6, 7, 8, 9], [0, 0, 0, 0, 0, 0]])
    mask = padding_mask(ids, 0)
    written = layer(x, mask=mask, causal=True)
    set_attention_backend(layer, "fused")
    torch.testing.assert_close(layer(x, mask=mask, causal=True), written, atol=1e-5, rtol=1e-5)
    assert layer.attention_weights is None


def test_cross_attention_keeps_its_static_cache():
    torch.manual_seed(6)
    layer = MultiHeadAttention(16, 4).eval()
    query, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    cache = KVCache(static=True)
    first = layer(query[:, :1], memory, memory, cache=cache)
    cached_k = cache.k
    second = layer(query[:, 1:], memory, memory, cache=cache)
    assert cache.k is cached_k  # computed once
    torch.testing.assert_close(torch.cat([first, second], dim=1), layer(query, memory, memory))


def test_grouped_query_attention_equals_torch_enable_gqa():
    torch.manual_seed(7)
    q = torch.randn(2, 8, 6, 16)
    k, v = torch.randn(2, 2, 2, 6, 16).unbind(0)
    out, _ = grouped_query_attention(q, k, v, causal_mask(6))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


@pytest.mark.parametrize(("len_q", "len_k"), [(4, 4), (2, 5)])
def test_fused_attention_causal_means_queries_are_the_last_positions(len_q, len_k):
    torch.manual_seed(8)
    q, k, v = torch.randn(1, 2, len_q, 8), torch.randn(1, 2, len_k, 8), torch.randn(1, 2, len_k, 8)
    expected, _ = scaled_dot_product_attention(q, k, v, causal_mask(len_q, len_k, offset=len_k - len_q))
    torch.testing.assert_close(fused_attention(q, k, v, causal=True), expected)


def test_attention_maps_collects_by_name_in_layer_order():
    torch.manual_seed(9)
    model = Transformer(TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12)).eval()
    with pytest.raises(ValueError, match="not run yet"):
        attention_maps(model.encoder)
    model(torch.randint(1, 12, (2, 5)), torch.randint(1, 12, (2, 4)))
    assert attention_maps(model.encoder).shape == (2, 2, 4, 5, 5)
    assert attention_maps(model.decoder, "cross_attention").shape == (2, 2, 4, 4, 5)
    assert torch.equal(attention_maps(model.decoder)[1], model.decoder.layers[1].self_attention.attention_weights)
    with pytest.raises(ValueError, match="no MultiHeadAttention named 'attn'"):
        attention_maps(model, "attn")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: MultiHeadAttention(32, 8, num_kv_heads=3), "divisible by num_kv_heads"),
        (lambda: MultiHeadAttention(32, 8, num_kv_heads=0), "num_kv_heads must be a positive int"),
        (lambda: MultiHeadAttention(30, 8), r"d_model \(30\) must be divisible by num_heads \(8\)"),
        (lambda: MultiHeadAttention(30, 6, rope=True), "head_dim must be a positive even int"),
        (lambda: MultiHeadAttention(32, 4)(torch.zeros(1, 2, 32), cache=object()), "must be a KVCache"),
        (lambda: MultiHeadAttention(32, 4, rope=True)(torch.zeros(1, 3, 32), torch.zeros(1, 2, 32)), "len_q=3"),
        (
            lambda: MultiHeadAttention(32, 4)(torch.zeros(1, 3, 32), mask=torch.ones(3, 4, dtype=torch.bool)),
            r"mask has shape \(3, 4\); expected \(len_q, len_k\) = \(3, 3\)",
        ),
        (
            lambda: MultiHeadAttention(16, 4)(torch.randn(2, 4, 8)),
            r"query must have shape \(batch, len, d_model=16\), got \(2, 4, 8\)",
        ),
        (
            lambda: MultiHeadAttention(16, 4)(torch.randn(2, 4, 16), torch.randn(3, 4, 16)),
            r"query, key and value must share the batch size, got 2, 3, 3",
        ),
        (
            lambda: MultiHeadAttention(16, 4)(torch.randn(2, 4, 16), torch.randn(2, 5, 16), torch.randn(2, 4, 16)),
            r"key and value must have the same length, got 5 and 4",
        ),
    ],
)
def test_bad_arguments_raise_value_error(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_mask_with_wrong_shape():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"mask has shape \(2, 1, 1, 4\).*\(2, 4, 5, 5\)"):
        mha(x, mask=torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask has shape \(2, 5\)"):
        mha(x, mask=torch.ones(2, 5, 5, dtype=torch.bool)[0, :2])
    with pytest.raises(ValueError, match=r"mask has shape \(5, 5, 1\)"):
        mha(x, mask=torch.ones(5, 5, 1, dtype=torch.bool))
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(4, 4, dtype=torch.bool))


def test_mask_with_wrong_dtype():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    additive = torch.zeros(5, 5).masked_fill(~causal_mask(5)[0, 0], float("-inf"))
    with pytest.raises(ValueError, match=r"mask must have dtype torch.bool.*got torch.float32"):
        mha(x, mask=additive)
    with pytest.raises(ValueError, match=r"dtype torch.bool"):
        scaled_dot_product_attention(x, x, x, additive)


# ---- parity with PyTorch -------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "both"])
def test_attention_function_matches_sdpa(mask_kind):
    torch.manual_seed(0)
    q, k = torch.randn(3, 4, 6, 16), torch.randn(3, 4, 6, 16)
    v = torch.randn(3, 4, 6, 8)  # d_v != d_k: the scale must be 1 / sqrt(d_k)
    pad = padding_mask(SRC, pad_id=0)  # (3, 1, 1, 6)
    masks = {"none": None, "padding": pad, "causal": causal_mask(6), "both": combine_masks(pad, causal_mask(6))}
    mask = masks[mask_kind]
    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_parity(ours, theirs)
    # with the identity matrix as values, PyTorch's output is its attention weights
    their_weights = F.scaled_dot_product_attention(q, k, torch.eye(6).expand(3, 4, 6, 6), attn_mask=mask)
    assert_parity(weights, their_weights)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6))


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("use_padding", [False, True])
def test_multi_head_attention_matches_torch(cross, use_padding):
    torch.manual_seed(0)
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


# ---- properties ----------------------------------------------------------------------------------------


def test_fully_masked_row_gives_zeros_and_finite_gradients():
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    k = torch.randn(2, 3, 5, 8, requires_grad=True)
    v = torch.randn(2, 3, 5, 8, requires_grad=True)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of batch row 0 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(out[0, :, 2], torch.zeros(3, 8))
    assert torch.equal(weights[0, :, 2], torch.zeros(3, 5))
    out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[0, :, 2], torch.zeros(3, 8))


def test_multi_head_attention_keeps_per_head_weights():
    mha = MultiHeadAttention(16, 4)
    mha(torch.randn(2, 3, 16), torch.randn(2, 5, 16))
    assert mha.attention_weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(mha.attention_weights.sum(-1), torch.ones(2, 4, 3))


# ---- the fused backend ---------------------------------------------------------------------------------


def test_fused_attention_equals_written_out_with_an_empty_row():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 8, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool).tril()
    mask[1, :, 0] = False  # nothing to attend to
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    torch.testing.assert_close(fused, expected, atol=1e-6, rtol=0)
    assert torch.equal(fused[1, :, 0], torch.zeros(3, 8))
    fused.square().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_model_with_fused_backend_gives_the_same_logits_and_gradients():
    torch.manual_seed(0)
    config = TransformerConfig.preset("tiny", src_vocab_size=15, tgt_vocab_size=15, dropout=0.0)
    model = Transformer(config)
    src, tgt = torch.randint(1, 15, (3, 7)), torch.randint(1, 15, (3, 5))
    src[0, 5:] = 0
    written = model(src, tgt)
    written.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    fused = set_attention_backend(model, "fused")(src, tgt)
    fused.sum().backward()
    torch.testing.assert_close(fused, written, atol=1e-5, rtol=0)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(p.grad, g, atol=1e-4, rtol=1e-4)
    assert model.encoder.layers[0].self_attention.attention_weights is None
    with pytest.raises(ValueError, match="backend must be one of"):
        set_attention_backend(model, "flash")
