"""Transformer-XL: MultiHeadAttention with a memory; with enough memory it is causal attention over the whole text."""

from __future__ import annotations

import pytest
import torch

from transformer_course.core.attention import MultiHeadAttention
from transformer_course.efficient.recurrent_attention import TransformerXLAttention, run_in_segments
from transformer_course.efficient.sparse_attention import transformer_xl_mask


def _xl_and_reference(mem_len: int, rope: bool = True) -> tuple[TransformerXLAttention, MultiHeadAttention]:
    torch.manual_seed(9)
    reference = MultiHeadAttention(16, 2, bias=False, rope=rope).eval()
    xl = TransformerXLAttention(16, num_heads=2, mem_len=mem_len, rope=rope, max_len=64).eval()
    xl.load_state_dict(reference.state_dict())
    return xl, reference


def test_transformer_xl_is_multi_head_attention_without_biases():
    assert issubclass(TransformerXLAttention, MultiHeadAttention)
    torch.manual_seed(0)
    xl = TransformerXLAttention(16, 2, mem_len=4)
    assert list(xl.state_dict()) == ["w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight"]
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 2, bias=False, rope=True)
    for key, value in plain.state_dict().items():  # same parameters in the same order: the same seeded init
        assert torch.equal(xl.state_dict()[key], value)
    plain.load_state_dict(xl.state_dict())  # and the state_dict loads both ways (strict)


@pytest.mark.parametrize("rope", [True, False])
def test_transformer_xl_with_full_memory_equals_causal_attention(rope):
    xl, reference = _xl_and_reference(mem_len=1000, rope=rope)
    x = torch.randn(2, 30, 16)
    torch.testing.assert_close(run_in_segments(xl, x, 7), reference(x, causal=True))


@pytest.mark.parametrize("mem_len", [0, 4, 7, 12])
def test_transformer_xl_with_short_memory_equals_its_mask(mem_len):
    xl, reference = _xl_and_reference(mem_len=mem_len)
    x = torch.randn(2, 30, 16)
    expected = reference(x, mask=transformer_xl_mask(30, 7, mem_len))
    torch.testing.assert_close(run_in_segments(xl, x, 7), expected)


def test_transformer_xl_memory_stops_gradients():
    xl, _ = _xl_and_reference(mem_len=8)
    x = torch.randn(1, 16, 16, requires_grad=True)
    out, memory = xl(x[:, :8])
    out2, _ = xl(x[:, 8:], memory)
    assert not memory.requires_grad
    out2.sum().backward()
    assert x.grad[:, :8].abs().sum() == 0 and x.grad[:, 8:].abs().sum() > 0


def test_transformer_xl_keeps_the_last_mem_len_rows():
    xl, _ = _xl_and_reference(mem_len=5)
    x = torch.randn(1, 12, 16)
    _, memory = xl(x[:, :3])
    assert torch.equal(memory, x[:, :3])  # fewer rows than mem_len: all of them
    _, memory = xl(x[:, 3:12], memory)
    assert torch.equal(memory, x[:, 7:12])
    assert xl(x[:, :3])[1] is not None and _xl_and_reference(mem_len=0)[0](x)[1] is None


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: TransformerXLAttention(16, 3, 4), "divisible by num_heads"),
        (lambda: TransformerXLAttention(16, 2, -1), "mem_len"),
        (lambda: TransformerXLAttention(16, 2, 4)(torch.zeros(1, 3, 8)), "d_model=16"),
        (lambda: TransformerXLAttention(16, 2, 4)(torch.zeros(1, 3, 16), torch.zeros(2, 3, 16)), "memory"),
        (lambda: TransformerXLAttention(16, 2, 4, max_len=4)(torch.zeros(1, 3, 16), torch.zeros(1, 2, 16)), "max_len"),
        (lambda: run_in_segments(TransformerXLAttention(16, 2, 4), torch.zeros(1, 3, 16), 0), "segment_len"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
