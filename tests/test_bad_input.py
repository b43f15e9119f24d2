"""Bad input fails early with a ValueError that names the wrong value and what was expected."""

from __future__ import annotations

import pytest
import torch

from transformer_course import (
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    Transformer,
    TransformerConfig,
    causal_mask,
    get_device,
    padding_mask,
    scaled_dot_product_attention,
    seed_everything,
)


@pytest.fixture
def model() -> Transformer:
    return Transformer(TransformerConfig.preset("tiny", src_vocab_size=10, tgt_vocab_size=10, max_len=16)).eval()


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by num_heads \(4\)"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by num_heads \(4\)"):
        TransformerConfig(src_vocab_size=5, tgt_vocab_size=5, d_model=30, num_heads=4)


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


def test_token_ids_outside_the_vocabulary(model):
    with pytest.raises(ValueError, match=r"token id 10 is outside the vocabulary \[0, 10\)"):
        model(torch.tensor([[1, 2, 10]]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"token id -1 is outside"):
        TokenEmbedding(10, 8)(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match=r"integer tensor, got dtype torch.float32"):
        TokenEmbedding(10, 8)(torch.tensor([[1.0, 2.0]]))


def test_sequence_longer_than_the_positional_table(model):
    with pytest.raises(ValueError, match=r"src has length 17, longer than .*max_len=16"):
        model(torch.ones(1, 17, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"positions 0\.\.9 exceed .*max_len=8"):
        SinusoidalPositionalEncoding(16, max_len=8)(torch.zeros(1, 10, 16))


def test_mismatched_batch_sizes(model):
    with pytest.raises(ValueError, match=r"same batch size, got 2 and 3"):
        model(torch.ones(2, 4, dtype=torch.long), torch.ones(3, 4, dtype=torch.long))
    mha = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match=r"share the batch size, got 2, 3, 3"):
        mha(torch.randn(2, 4, 16), torch.randn(3, 4, 16))


def test_other_bad_arguments():
    with pytest.raises(ValueError, match=r"query must have shape \(batch, len, d_model=16\), got \(2, 4, 8\)"):
        MultiHeadAttention(16, 4)(torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"unknown preset 'huge'"):
        TransformerConfig.preset("huge", src_vocab_size=5, tgt_vocab_size=5)
    with pytest.raises(ValueError, match=r"share_embeddings needs one vocabulary"):
        TransformerConfig(src_vocab_size=5, tgt_vocab_size=6, share_embeddings=True)
    with pytest.raises(ValueError, match=r"activation must be one of"):
        TransformerConfig(src_vocab_size=5, tgt_vocab_size=5, activation="tanh")
    with pytest.raises(ValueError, match=r"token_ids must have shape \(batch, len\)"):
        padding_mask(torch.ones(3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match=r"len_q must be a positive int, got 0"):
        causal_mask(0)
    with pytest.raises(ValueError, match=r"seed must be a non-negative int"):
        seed_everything(-1)
    with pytest.raises(ValueError, match=r"prefer must be one of"):
        get_device("tpu")
