"""The fused attention backend gives the written-out attention's results, empty rows included."""

from __future__ import annotations

import pytest
import torch

from transformer_course import Transformer, TransformerConfig
from transformer_course.attention import fused_attention, scaled_dot_product_attention, set_attention_backend


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
