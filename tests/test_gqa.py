"""Grouped-query and multi-query attention: equal to repeating K/V and to PyTorch's enable_gqa; the KV cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_course.core.attention import (
    KVCache,
    MultiHeadAttention,
    grouped_query_attention,
    scaled_dot_product_attention,
)
from transformer_course.core.masks import causal_mask
from transformer_course.efficient.kv_cache import PUBLISHED_DECODERS, kv_cache_bytes, repeat_kv
from transformer_course.utils import count_parameters


def gqa_layer(d_model: int, num_heads: int, num_kv_heads: int | None = None, rope: bool = True, **kw):
    """The LLaMA-style attention: MultiHeadAttention with K/V heads, RoPE and no biases."""
    return MultiHeadAttention(d_model, num_heads, bias=False, num_kv_heads=num_kv_heads, rope=rope, **kw)


def test_repeat_kv_is_repeat_interleave():
    x = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(repeat_kv(x, 4), x.repeat_interleave(4, dim=1))
    assert repeat_kv(x, 1).shape == x.shape


@pytest.mark.parametrize("heads, kv_heads", [(8, 8), (8, 2), (8, 1), (6, 3)])
def test_gqa_equals_repeated_kv(heads, kv_heads):
    torch.manual_seed(0)
    q = torch.randn(2, heads, 5, 8)
    k, v = torch.randn(2, 2, kv_heads, 7, 8).unbind(0)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    out, weights = grouped_query_attention(q, k, v, mask)
    ref_out, ref_weights = scaled_dot_product_attention(
        q, repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads), mask
    )
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    per_head_mask = torch.rand(2, heads, 5, 7) > 0.3
    out, _ = grouped_query_attention(q, k, v, per_head_mask)
    ref_out, _ = scaled_dot_product_attention(
        q, repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads), per_head_mask
    )
    torch.testing.assert_close(out, ref_out)


def test_gqa_equals_torch_enable_gqa():
    torch.manual_seed(1)
    q = torch.randn(2, 8, 6, 16)
    k, v = torch.randn(2, 2, 2, 6, 16).unbind(0)
    out, _ = grouped_query_attention(q, k, v, causal_mask(6))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


def test_module_equals_manual_computation_and_counts_parameters():
    torch.manual_seed(2)
    layer = gqa_layer(32, num_heads=8, num_kv_heads=2, rope=False)
    assert count_parameters(layer) == 32 * 32 * 2 + 32 * 8 * 2
    x = torch.randn(3, 5, 32)
    q = layer.w_q(x).view(3, 5, 8, 4).transpose(1, 2)
    k = layer.w_k(x).view(3, 5, 2, 4).transpose(1, 2)
    v = layer.w_v(x).view(3, 5, 2, 4).transpose(1, 2)
    out, _ = scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4))
    torch.testing.assert_close(layer(x), layer.w_o(out.transpose(1, 2).reshape(3, 5, 32)))
    assert layer.attention_weights.shape == (3, 8, 5, 5)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_incremental_decoding_with_cache_equals_full_pass(kv_heads):
    torch.manual_seed(3)
    layer = gqa_layer(32, num_heads=4, num_kv_heads=kv_heads).eval()
    x = torch.randn(2, 9, 32)
    full = layer(x, causal=True)
    cache = KVCache()
    steps = [layer(x[:, :4], causal=True, cache=cache)] + [
        layer(x[:, i : i + 1], causal=True, cache=cache) for i in range(4, 9)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.k.shape == (2, kv_heads, 9, 8)
    stored = (cache.k.numel() + cache.v.numel()) * cache.k.element_size()
    assert stored == kv_cache_bytes(1, kv_heads, 8, 9, batch_size=2, bytes_per_value=4)


def test_rope_makes_attention_shift_invariant():
    torch.manual_seed(4)
    layer = gqa_layer(16, num_heads=2, num_kv_heads=1).eval()
    x = torch.randn(1, 6, 16)
    cache = KVCache()
    cache.k = torch.zeros(1, 1, 0, 8)  # an empty cache: positions start at 0
    cache.v = torch.zeros(1, 1, 0, 8)
    start0 = layer(x, causal=True, cache=cache)
    # the same tokens after 10 masked-out positions: the outputs do not change, only the offsets matter
    padded = torch.cat([torch.randn(1, 10, 16), x], dim=1)
    keep = torch.ones(16, 16, dtype=torch.bool)
    keep[:, :10] = False
    keep[:10, :10] = True
    shifted = layer(padded, mask=keep, causal=True)[:, 10:]
    torch.testing.assert_close(shifted, start0)


def test_kv_cache_bytes_of_published_models():
    llama2 = PUBLISHED_DECODERS["Llama-2-7B"]
    assert llama2.kv_cache_bytes(1) == 2 * 32 * 32 * 128 * 2 == 512 * 1024
    assert llama2.kv_cache_bytes(4096) == 2 * 2**30
    assert PUBLISHED_DECODERS["Llama-3-8B"].kv_cache_bytes(8192) == 2**30
    assert PUBLISHED_DECODERS["Falcon-7B"].kv_cache_bytes(2048, bytes_per_value=4) == 2 * 32 * 64 * 2048 * 4
    for shape in PUBLISHED_DECODERS.values():
        assert shape.num_heads % shape.num_kv_heads == 0
        assert shape.num_heads * shape.head_dim == shape.d_model


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: repeat_kv(torch.zeros(2, 3, 4), 2), "batch, kv_heads"),
        (lambda: repeat_kv(torch.zeros(1, 2, 3, 4), 0), "n_rep"),
        (
            lambda: grouped_query_attention(torch.zeros(1, 6, 2, 4), torch.zeros(1, 4, 2, 4), torch.zeros(1, 4, 2, 4)),
            "divisible",
        ),
        (
            lambda: grouped_query_attention(torch.zeros(1, 4, 2, 4), torch.zeros(1, 2, 2, 3), torch.zeros(1, 2, 2, 3)),
            "head_dim=4",
        ),
        (lambda: grouped_query_attention(torch.zeros(4, 2, 4), torch.zeros(2, 2, 4), torch.zeros(2, 2, 4)), "4-D"),
        (
            lambda: grouped_query_attention(
                torch.zeros(1, 4, 2, 4), torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), torch.ones(1, 3, 2, 2).bool()
            ),
            "mask has shape",
        ),
        (
            lambda: grouped_query_attention(
                torch.zeros(1, 4, 2, 4), torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), torch.ones(2, 2)
            ),
            "torch.bool",
        ),
        (lambda: gqa_layer(32, 8, 3), "divisible by num_kv_heads"),
        (lambda: gqa_layer(30, 8), "divisible"),
        (lambda: gqa_layer(32, 0), "num_heads"),
        (lambda: gqa_layer(32, 4, dropout=1.0), "dropout"),
        (lambda: gqa_layer(32, 4)(torch.zeros(2, 3, 16)), "d_model=32"),
        (lambda: gqa_layer(32, 4)(torch.zeros(2, 3, 32), cache=object()), "KVCache"),
        (lambda: kv_cache_bytes(0, 8, 128, 10), "num_layers"),
        (lambda: kv_cache_bytes(32, 8, 128, 10, bytes_per_value=0), "bytes_per_value"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
