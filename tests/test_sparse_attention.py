"""Sparse attention: the masks have their patterns, and the banded computations equal full attention with them."""

from __future__ import annotations

import pytest
import torch

from transformer_course.core.attention import scaled_dot_product_attention
from transformer_course.core.masks import causal_mask
from transformer_course.efficient.sparse_attention import (
    bigbird_mask,
    global_token_mask,
    longformer_attention,
    longformer_mask,
    random_key_mask,
    sliding_window_attention,
    sliding_window_mask,
    transformer_xl_mask,
)


def _qkv(n: int = 24, d: int = 8, seed: int = 0, heads: int = 2) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 2, heads, n, d, generator=generator).unbind(0)


def _full(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)[0]


def test_masks_have_the_right_pattern():
    window = sliding_window_mask(6, 1)[0, 0]
    assert window.shape == (6, 6)
    assert window[2].tolist() == [False, True, True, True, False, False]
    assert sliding_window_mask(6, 1, causal=True)[0, 0, 2].tolist() == [False, True, True, False, False, False]
    assert torch.equal(sliding_window_mask(6, 5, causal=True), causal_mask(6))
    glob = global_token_mask(5, [0])[0, 0]
    assert glob[0].all() and glob[:, 0].all() and not glob[1:, 1:].any()
    lf = longformer_mask(8, 1, [3])[0, 0]
    assert torch.equal(lf, sliding_window_mask(8, 1)[0, 0] | global_token_mask(8, [3])[0, 0])
    rnd = random_key_mask(10, 3, torch.Generator().manual_seed(0))[0, 0]
    assert rnd.sum(dim=-1).tolist() == [3] * 10
    bb = bigbird_mask(10, 1, 2, [0], torch.Generator().manual_seed(0))[0, 0]
    assert (bb.sum(dim=-1) >= 3).all() and bb[0].all()


def test_transformer_xl_mask_is_causal_with_a_memory():
    assert torch.equal(transformer_xl_mask(12, 4, 1000), causal_mask(12))  # unlimited memory: plain causal
    mask = transformer_xl_mask(12, 4, 2)[0, 0]
    assert mask[9].tolist() == [False] * 6 + [True] * 4 + [False] * 2  # segment 8..11, memory 6..7
    assert mask[3].tolist() == [True] * 4 + [False] * 8  # first segment: nothing before it


def test_window_covering_everything_is_full_attention():
    q, k, v = _qkv()
    torch.testing.assert_close(sliding_window_attention(q, k, v, window=23), _full(q, k, v))
    assert sliding_window_mask(24, 23).all()


@pytest.mark.parametrize("window", [0, 1, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_banded_sliding_window_equals_the_masked_one(window, causal):
    q, k, v = _qkv()
    expected = _full(q, k, v, sliding_window_mask(24, window, causal))
    torch.testing.assert_close(sliding_window_attention(q, k, v, window, causal), expected)


@pytest.mark.parametrize("global_positions", [[], [0], [0, 11, 23], [4, 5]])
def test_longformer_attention_equals_the_masked_one(global_positions):
    q, k, v = _qkv(seed=1)
    expected = _full(q, k, v, longformer_mask(24, 2, global_positions))
    torch.testing.assert_close(longformer_attention(q, k, v, 2, global_positions), expected)


def test_bigbird_mask_with_wide_window_is_full_attention():
    q, k, v = _qkv(seed=2)
    mask = bigbird_mask(24, 23, 3, [0], torch.Generator().manual_seed(0))
    torch.testing.assert_close(_full(q, k, v, mask), _full(q, k, v))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sliding_window_mask(0, 1), "length"),
        (lambda: sliding_window_mask(5, -1), "window"),
        (lambda: global_token_mask(5, [5]), "global_positions"),
        (lambda: global_token_mask(5, [1, 1]), "repeat"),
        (lambda: random_key_mask(5, 6), "num_random"),
        (lambda: random_key_mask(5, -1), "num_random"),
        (lambda: transformer_xl_mask(10, 0, 2), "segment_len"),
        (lambda: transformer_xl_mask(10, 2, -1), "mem_len"),
        (lambda: sliding_window_attention(*_qkv(), window=-2), "window"),
        (lambda: sliding_window_attention(_qkv()[0][..., :5, :], *_qkv()[1:], window=2), "len_q == len_k"),
        (lambda: longformer_attention(*_qkv(), window=1, global_positions=[30]), "global_positions"),
        (lambda: longformer_attention(_qkv()[0][..., :5, :], *_qkv()[1:], 1, [0]), "len_q == len_k"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
