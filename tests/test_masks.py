from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_course import causal_mask, combine_masks, decoder_self_mask, padding_mask, to_torch_blocking_mask


def test_causal_mask_is_the_lower_triangle():
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    assert torch.equal(causal_mask(3)[0, 0], expected)
    assert causal_mask(3).shape == (1, 1, 3, 3)


def test_causal_mask_with_cached_positions():
    # two new queries after three cached positions: query i sits at position 3 + i
    expected = torch.tensor([[True, True, True, True, False], [True, True, True, True, True]])
    assert torch.equal(causal_mask(2, offset=3)[0, 0], expected)
    expected = torch.tensor([[True, True, False, False], [True, True, True, False]])
    assert torch.equal(causal_mask(2, 4, offset=1)[0, 0], expected)  # len_k given: the last key stays hidden


def test_padding_mask_marks_real_tokens():
    ids = torch.tensor([[4, 5, 0], [6, 0, 0]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 1, 3)
    assert torch.equal(mask[:, 0, 0], torch.tensor([[True, True, False], [True, False, False]]))


def test_combined_decoder_mask_broadcasts_to_scores():
    ids = torch.tensor([[4, 5, 0], [6, 7, 8]])
    mask = decoder_self_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 3, 3)
    assert torch.equal(mask[0, 0], torch.tensor([[True, False, False], [True, True, False], [True, True, False]]))
    assert torch.equal(mask, combine_masks(padding_mask(ids, 0), causal_mask(3)))
    assert combine_masks(None, None) is None
    assert combine_masks(None, mask) is mask


def test_blocking_mask_gives_nn_multihead_attention_the_same_result():
    torch.manual_seed(0)
    ids = torch.tensor([[4, 5, 0], [6, 7, 8]])
    ours = padding_mask(ids, 0)[:, 0, 0]  # (batch, len_k), True = may attend
    x = torch.randn(2, 3, 8)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    blocked, _ = attention(x, x, x, key_padding_mask=to_torch_blocking_mask(ours))
    dropped, _ = attention(x[:1, :2], x[:1, :2], x[:1, :2])  # row 0 without its padded key
    torch.testing.assert_close(blocked[:1, :2], dropped)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: padding_mask(torch.ones(3, dtype=torch.long), 0),
            r"token_ids must have shape \(batch, len\), got \(3,\)",
        ),
        (lambda: padding_mask(torch.ones(2, 3), 0), "token_ids must be an integer tensor, got dtype torch.float32"),
        (lambda: causal_mask(0), "len_q must be a positive int, got 0"),
        (lambda: causal_mask(True), "len_q must be a positive int, got True"),
        (lambda: causal_mask(2, offset=-1), "offset must be a non-negative int, got -1"),
        (lambda: causal_mask(2, len_k=0), "len_k must be a positive int, got 0"),
        (lambda: combine_masks(causal_mask(2), torch.ones(2, 2)), "masks must be bool tensors"),
    ],
)
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
