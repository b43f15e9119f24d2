from __future__ import annotations

import torch

from transformer_course import causal_mask, combine_masks, decoder_self_mask, padding_mask, to_torch_blocking_mask


def test_causal_mask_is_the_lower_triangle():
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    assert torch.equal(causal_mask(3)[0, 0], expected)
    assert causal_mask(3).shape == (1, 1, 3, 3)


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
    assert torch.broadcast_shapes(mask.shape, (2, 4, 3, 3)) == (2, 4, 3, 3)
    assert combine_masks(None, None) is None
    assert torch.equal(to_torch_blocking_mask(mask), ~mask)
