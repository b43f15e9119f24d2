"""Linformer and Performer: exact where they should be, approximations improve, Linformer is MultiHeadAttention."""

from __future__ import annotations

import pytest
import torch

from transformer_course.core.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer_course.core.masks import causal_mask
from transformer_course.efficient.low_rank_attention import (
    LinformerSelfAttention,
    linformer_attention,
    orthogonal_random_features,
    performer_attention,
    positive_random_features,
)


def _qkv(n: int = 24, d: int = 8, seed: int = 0, heads: int = 2) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 2, heads, n, d, generator=generator).unbind(0)


def _full(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)[0]


def test_linformer_identity_projection_is_full_attention():
    q, k, v = _qkv(seed=3)
    torch.testing.assert_close(linformer_attention(q, k, v, torch.eye(24)), _full(q, k, v))
    permutation = torch.eye(24)[torch.randperm(24, generator=torch.Generator().manual_seed(0))]
    torch.testing.assert_close(linformer_attention(q, k, v, permutation), _full(q, k, v))  # order of keys is free


def test_linformer_module_shapes_and_sharing():
    torch.manual_seed(0)
    layer = LinformerSelfAttention(16, 2, seq_len=20, proj_len=5)
    assert layer(torch.randn(3, 12, 16)).shape == (3, 12, 16)
    assert layer.attention_weights.shape == (3, 2, 12, 5)  # (batch, heads, n, proj_len)
    shared = LinformerSelfAttention(16, 2, seq_len=20, proj_len=5, share_projection=True)
    assert shared.e is shared.f
    assert sum(p.numel() for p in shared.parameters()) == sum(p.numel() for p in layer.parameters()) - 100


def test_linformer_is_multi_head_attention_plus_the_projections():
    assert issubclass(LinformerSelfAttention, MultiHeadAttention)
    torch.manual_seed(0)
    layer = LinformerSelfAttention(16, 2, seq_len=10, proj_len=10)
    weights = {f"{name}.{kind}" for name in ("w_q", "w_k", "w_v", "w_o") for kind in ("weight", "bias")}
    assert set(layer.state_dict()) == weights | {"e", "f"}
    with torch.no_grad():
        layer.e.copy_(torch.eye(10))
        layer.f.copy_(torch.eye(10))
    full = MultiHeadAttention(16, 2)
    full.load_state_dict({key: value for key, value in layer.state_dict().items() if key not in ("e", "f")})
    x = torch.randn(2, 10, 16)
    torch.testing.assert_close(layer(x), full(x))  # E = F = identity: plain multi-head attention


def test_performer_features_estimate_the_softmax_kernel():
    generator = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 1, 4, generator=generator, dtype=torch.float64) * 0.5
    omega = orthogonal_random_features(200000, 4, torch.Generator().manual_seed(6)).double()
    q_features = positive_random_features(q, omega, is_query=True)
    k_features = positive_random_features(k, omega, is_query=False)
    shift = (q @ omega.T - q.pow(2).sum() / 2).max() + (k @ omega.T - k.pow(2).sum() / 2).max()
    estimate = (q_features @ k_features.T) * torch.exp(shift)
    torch.testing.assert_close(estimate, torch.exp(q @ k.T), rtol=0.02, atol=0)


def test_orthogonal_features_are_orthogonal_in_blocks():
    omega = orthogonal_random_features(12, 8, torch.Generator().manual_seed(0))
    block = omega[:8] / omega[:8].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(block @ block.T, torch.eye(8), atol=1e-5, rtol=0)
    assert orthogonal_random_features(5, 8, orthogonal=False).shape == (5, 8)


def test_performer_error_falls_with_more_features():
    q, k, v = _qkv(n=64, d=16, seed=7)
    q, k = q * 0.5, k * 0.5
    expected = _full(q, k, v)
    errors = []
    for m in (16, 256, 4096):
        trials = []
        for seed in range(3):
            omega = orthogonal_random_features(m, 16, torch.Generator().manual_seed(100 + seed))
            trials.append(((performer_attention(q, k, v, omega) - expected).norm() / expected.norm()).item())
        errors.append(sum(trials) / 3)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.1


def test_causal_performer_equals_the_masked_kernel_attention():
    q, k, v = _qkv(seed=8)
    omega = orthogonal_random_features(32, 8, torch.Generator().manual_seed(1))
    scale = 8**-0.25
    phi_q = positive_random_features(q * scale, omega, is_query=True)
    phi_k = positive_random_features(k * scale, omega, is_query=False)
    kernel = (phi_q @ phi_k.transpose(-2, -1)) * causal_mask(24)  # (..., n, n), causal
    expected = (kernel @ v) / kernel.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(performer_attention(q, k, v, omega, causal=True), expected)
    not_causal = (phi_q @ phi_k.transpose(-2, -1)) @ v / (phi_q @ phi_k.transpose(-2, -1)).sum(-1, keepdim=True)
    torch.testing.assert_close(performer_attention(q, k, v, omega), not_causal)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: linformer_attention(*_qkv(), torch.eye(5)), "proj_len, n=24"),
        (lambda: linformer_attention(*_qkv(), torch.eye(24), torch.ones(3, 24)), "same shape"),
        (lambda: LinformerSelfAttention(16, 3, 10, 4), "divisible"),
        (lambda: LinformerSelfAttention(16, 2, 0, 4), "seq_len"),
        (lambda: LinformerSelfAttention(16, 2, 10, 4)(torch.zeros(1, 11, 16)), "seq_len=10"),
        (lambda: LinformerSelfAttention(16, 2, 10, 4)(torch.zeros(1, 5, 8)), "d_model=16"),
        (lambda: orthogonal_random_features(0, 4), "num_features"),
        (lambda: positive_random_features(torch.zeros(3, 4), torch.zeros(5, 3), True), "omega"),
        (lambda: performer_attention(*_qkv(), torch.zeros(5, 3)), "omega"),
        (lambda: performer_attention(_qkv()[0][..., :5, :], *_qkv()[1:], torch.zeros(5, 8), True), "len_q == len_k"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
