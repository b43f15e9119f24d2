"""RoPE and ALiBi: the relative-position property, equality with the sinusoidal angles, layouts, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course import sinusoidal_table
from transformer_course.core.rope import (
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_cos_sin,
    rope_frequencies,
    rope_matrix,
    rotate_pairs,
)


def test_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(2, 32, dtype=torch.float64)
    by_offset = {}
    for m in range(0, 200, 13):
        for offset in (-7, 0, 3, 50):
            n = m + offset
            if n < 0:
                continue
            rq = apply_rope(q[None], torch.tensor([m]))[0]
            rk = apply_rope(k[None], torch.tensor([n]))[0]
            by_offset.setdefault(offset, []).append(float(rq @ rk))
    for values in by_offset.values():
        assert max(values) - min(values) < 1e-9


@pytest.mark.parametrize("interleaved", [True, False])
def test_apply_rope_equals_the_rotation_matrix(interleaved):
    torch.manual_seed(1)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    for pos in (0, 1, 9, 1000):
        rotated = apply_rope(x, torch.full((5,), pos), interleaved=interleaved)
        torch.testing.assert_close(rotated, x @ rope_matrix(pos, 16, interleaved=interleaved).T)
    r = rope_matrix(37, 16)
    torch.testing.assert_close(r.T @ r, torch.eye(16, dtype=torch.float64))
    torch.testing.assert_close(rope_matrix(3, 16).T @ rope_matrix(10, 16), rope_matrix(7, 16))


def test_angles_are_the_sinusoidal_tables():
    cos, sin = rope_cos_sin(torch.arange(300), 64)
    table = sinusoidal_table(300, 64)
    torch.testing.assert_close(sin.float(), table[:, 0::2], atol=1e-5, rtol=0)
    torch.testing.assert_close(cos.float(), table[:, 1::2], atol=1e-5, rtol=0)
    torch.testing.assert_close(rope_frequencies(8), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))


def test_layouts_agree_after_permuting_dimensions():
    torch.manual_seed(2)
    q, k = torch.randn(2, 1, 2, 9, 8)
    order = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])  # interleaved -> halves
    scores_interleaved = apply_rope(q) @ apply_rope(k).transpose(-2, -1)
    half_q, half_k = apply_rope(q[..., order], interleaved=False), apply_rope(k[..., order], interleaved=False)
    torch.testing.assert_close(half_q @ half_k.transpose(-2, -1), scores_interleaved)


def test_rotary_module_offset_and_norm():
    torch.manual_seed(3)
    rope = RotaryEmbedding(16, max_len=64)
    x = torch.randn(2, 4, 10, 16)
    torch.testing.assert_close(rope(x, offset=5), apply_rope(x, torch.arange(5, 15)))
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rope(x)[..., 0, :], x[..., 0, :])  # position 0 is not turned
    assert rope(x.double()).dtype == torch.float64
    assert not list(rope.parameters())


def test_alibi_slopes_follow_the_paper():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    six = alibi_slopes(6)
    torch.testing.assert_close(six[:4], alibi_slopes(4))
    torch.testing.assert_close(six[4:], alibi_slopes(8)[0::2][:2])
    assert alibi_slopes(1).tolist() == [2.0**-8]


def test_alibi_bias_values_and_sdpa():
    bias = alibi_bias(4, 5)
    assert bias.shape == (4, 5, 5)
    assert bias[0, 4, 1].item() == pytest.approx(-0.25 * 3)
    assert torch.equal(bias, bias.transpose(-2, -1))
    last = alibi_bias(4, 1, 5)  # the last query of the same sequence
    torch.testing.assert_close(last, bias[:, 4:])
    torch.manual_seed(4)
    q, k, v = torch.randn(3, 2, 4, 5, 8)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    float_mask = bias.masked_fill(~causal, float("-inf"))
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + float_mask, dim=-1) @ v
    got = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: rope_frequencies(7), "head_dim"),
        (lambda: rope_frequencies(8, base=1.0), "base"),
        (lambda: apply_rope(torch.zeros(4, 6), torch.arange(3)), "positions"),
        (lambda: apply_rope(torch.zeros(4)), "x must have shape"),
        (lambda: apply_rope(torch.zeros(4, 5)), "head_dim"),
        (lambda: rope_cos_sin(torch.zeros(2, 2), 4), "positions"),
        (lambda: rotate_pairs(torch.zeros(3, 4), torch.zeros(3, 3), torch.zeros(3, 3)), "cos, sin"),
        (lambda: RotaryEmbedding(8, max_len=0), "max_len"),
        (lambda: RotaryEmbedding(8, max_len=4)(torch.zeros(1, 5, 8)), "exceed max_len"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 5, 6)), "head_dim=8"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 5, 8), offset=-1), "offset"),
        (lambda: alibi_slopes(0), "num_heads"),
        (lambda: alibi_bias(2, 0), "len_q"),
        (lambda: alibi_bias(2, 4, 3), "must not exceed"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
