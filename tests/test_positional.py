"""positional.py: the sinusoidal table, the three positional encodings and TokenEmbedding."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.core.positional import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)


def test_sinusoidal_table_equals_the_papers_formula():
    table = sinusoidal_table(50, 16)
    assert table.shape == (50, 16)
    pos = torch.arange(50, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, 16, 2, dtype=torch.float64)
    angle = pos / 10000.0 ** (two_i / 16)  # PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...)
    torch.testing.assert_close(table[:, 0::2], torch.sin(angle).float(), atol=1e-5, rtol=0)
    torch.testing.assert_close(table[:, 1::2], torch.cos(angle).float(), atol=1e-5, rtol=0)
    other_base = sinusoidal_table(10, 4, base=100.0)
    torch.testing.assert_close(other_base[3, 2], torch.tensor(math.sin(3 / 100.0 ** (2 / 4))))


def test_positional_table_range_and_rotation():
    table = sinusoidal_table(200, 32)
    assert table.min() >= -1.0 and table.max() <= 1.0
    assert torch.unique(table.round(decimals=4), dim=0).shape[0] == 200  # every position is distinct
    frequency = torch.exp(torch.arange(0, 32, 2) * (-math.log(10000.0) / 32))
    for k in (1, 7, 50):
        cos, sin = torch.cos(k * frequency), torch.sin(k * frequency)
        # each (sin, cos) pair turns by the angle k * frequency: one fixed rotation for every position
        rotation = torch.zeros(32, 32)
        rotation[0::2, 0::2] = torch.diag(cos)
        rotation[0::2, 1::2] = torch.diag(sin)
        rotation[1::2, 0::2] = torch.diag(-sin)
        rotation[1::2, 1::2] = torch.diag(cos)
        torch.testing.assert_close(table[:-k] @ rotation.T, table[k:], atol=1e-4, rtol=0)


def test_sinusoidal_encoding_adds_the_table_from_offset_and_has_no_parameters():
    torch.manual_seed(0)
    encoding = SinusoidalPositionalEncoding(16, max_len=20, dropout=0.5).eval()
    x = torch.randn(2, 5, 16)
    table = sinusoidal_table(20, 16)
    torch.testing.assert_close(encoding(x), x + table[:5])
    torch.testing.assert_close(encoding(x, offset=3), x + table[3:8])
    assert list(encoding.parameters()) == [] and "table" not in encoding.state_dict()
    encoding.train()
    dropped = encoding(x)
    assert (dropped == 0).any() and not torch.allclose(dropped, x + table[:5])


def test_learned_encoding_adds_its_rows_from_offset():
    torch.manual_seed(1)
    encoding = LearnedPositionalEncoding(8, max_len=10)
    x = torch.randn(2, 4, 8)
    out = encoding(x, offset=2)
    torch.testing.assert_close(out, x + encoding.embedding.weight[2:6])
    out.sum().backward()
    used = encoding.embedding.weight.grad.abs().sum(-1) > 0
    assert used.tolist() == [False, False, True, True, True, True, False, False, False, False]


def test_no_positional_encoding_adds_nothing_but_checks_the_shape():
    x = torch.randn(2, 4, 8)
    assert torch.equal(NoPositionalEncoding(8).eval()(x, offset=3), x)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, len, d_model=8\), got \(2, 4, 6\)"):
        NoPositionalEncoding(8)(torch.randn(2, 4, 6))


def test_token_embedding_scales_by_sqrt_d_model_and_keeps_the_pad_row_at_zero():
    torch.manual_seed(2)
    embedding = TokenEmbedding(10, 16, pad_id=0)
    ids = torch.tensor([[3, 0, 9], [1, 1, 2]])
    torch.testing.assert_close(embedding(ids), embedding.weight[ids] * 4.0)
    unscaled = TokenEmbedding(10, 16, scale=False)
    torch.testing.assert_close(unscaled(ids), unscaled.weight[ids])
    assert torch.equal(embedding.weight[0], torch.zeros(16))
    embedding(ids).sum().backward()
    assert torch.equal(embedding.weight.grad[0], torch.zeros(16))  # the pad row gets no gradient
    assert embedding.weight.grad[3].abs().sum() > 0


def test_token_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match=r"token id -1 is outside"):
        TokenEmbedding(10, 8)(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match=r"token id 10 is outside the vocabulary \[0, 10\)"):
        TokenEmbedding(10, 8)(torch.tensor([[1, 10]]))
    with pytest.raises(ValueError, match=r"integer tensor, got dtype torch.float32"):
        TokenEmbedding(10, 8)(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"integer tensor, got dtype torch.bool"):
        TokenEmbedding(10, 8)(torch.tensor([[True, False]]))


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding])
def test_sequence_longer_than_the_positional_table(cls):
    with pytest.raises(ValueError, match=r"positions 0\.\.9 exceed .*max_len=8"):
        cls(16, max_len=8)(torch.zeros(1, 10, 16))
    with pytest.raises(ValueError, match=r"positions 6\.\.8 exceed .*max_len=8"):
        cls(16, max_len=8)(torch.zeros(1, 3, 16), offset=6)
    assert cls(16, max_len=8)(torch.zeros(1, 3, 16), offset=5).shape == (1, 3, 16)  # the last positions fit


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sinusoidal_table(0, 8), "max_len must be a positive int, got 0"),
        (lambda: sinusoidal_table(8, 7), "d_model must be a positive even int"),
        (lambda: sinusoidal_table(8, 0), "d_model must be a positive even int"),
        (lambda: TokenEmbedding(0, 8), "vocab_size must be a positive int, got 0"),
        (lambda: TokenEmbedding(10, 8, pad_id=10), r"pad_id must be in \[0, 10\), got 10"),
        (lambda: TokenEmbedding(10, 8, pad_id=-1), r"pad_id must be in \[0, 10\), got -1"),
        (lambda: SinusoidalPositionalEncoding(16)(torch.zeros(1, 3, 8)), r"d_model=16\), got \(1, 3, 8\)"),
        (lambda: LearnedPositionalEncoding(8)(torch.zeros(3, 8)), r"d_model=8\), got \(3, 8\)"),
        (lambda: SinusoidalPositionalEncoding(16)(torch.zeros(1, 3, 16), offset=-1), "offset must be >= 0, got -1"),
    ],
)
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
