"""Blockwise attention (the idea of flash attention) is exact, with or without the causal mask."""

from __future__ import annotations

import pytest
import torch

from transformer_course.core.attention import scaled_dot_product_attention
from transformer_course.core.masks import causal_mask
from transformer_course.efficient.blockwise_attention import _causal_block, blockwise_attention


def _qkv(n: int = 24, d: int = 8, seed: int = 0, heads: int = 2) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 2, heads, n, d, generator=generator).unbind(0)


def _full(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)[0]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 5, 24, 100])
def test_blockwise_attention_is_exact(causal, block_size):
    q, k, v = _qkv(seed=10)
    expected = _full(q, k, v, causal_mask(24) if causal else None)
    torch.testing.assert_close(blockwise_attention(q, k, v, block_size, causal), expected)


def test_blockwise_with_fewer_queries_aligns_them_at_the_end():
    q, k, v = _qkv(seed=11)
    mask = causal_mask(3, 24, offset=21)
    torch.testing.assert_close(
        blockwise_attention(q[..., -3:, :], k, v, 4, causal=True), _full(q[..., -3:, :], k, v, mask)
    )


@pytest.mark.parametrize("len_q, len_k", [(7, 7), (3, 10), (10, 10), (1, 9)])
@pytest.mark.parametrize("block_size", [1, 3, 4])
def test_causal_blocks_are_the_columns_of_the_causal_mask(len_q, len_k, block_size):
    full = causal_mask(len_q, len_k, offset=len_k - len_q)[0, 0]
    blocks = [
        _causal_block(len_q, len_k, start, min(block_size, len_k - start), torch.device("cpu"))
        for start in range(0, len_k, block_size)
    ]
    assert torch.equal(torch.cat(blocks, dim=-1), full)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: blockwise_attention(*_qkv(), block_size=0), "block_size"),
        (lambda: blockwise_attention(_qkv()[0], *(t[..., :5, :] for t in _qkv()[1:]), causal=True), "last"),
        (lambda: blockwise_attention(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), torch.zeros(2, 3, 5)), "d_k"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
