"""Efficient attention variants: each equals full attention where it should, approximations improve, bad input."""

from __future__ import annotations

import pytest
import torch

from transformer_course.attention import scaled_dot_product_attention
from transformer_course.efficient_attention import (
    LinformerSelfAttention,
    TransformerXLAttention,
    bigbird_mask,
    blockwise_attention,
    fused_attention,
    global_token_mask,
    linformer_attention,
    longformer_attention,
    longformer_mask,
    orthogonal_random_features,
    peak_tensor_bytes,
    performer_attention,
    positive_random_features,
    random_key_mask,
    run_in_segments,
    sliding_window_attention,
    sliding_window_mask,
    traced_operators,
    transformer_xl_mask,
)
from transformer_course.gqa import GroupedQueryAttention


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
    glob = global_token_mask(5, [0])[0, 0]
    assert glob[0].all() and glob[:, 0].all() and not glob[1:, 1:].any()
    lf = longformer_mask(8, 1, [3])[0, 0]
    assert torch.equal(lf, sliding_window_mask(8, 1)[0, 0] | global_token_mask(8, [3])[0, 0])
    rnd = random_key_mask(10, 3, torch.Generator().manual_seed(0))[0, 0]
    assert rnd.sum(dim=-1).tolist() == [3] * 10
    bb = bigbird_mask(10, 1, 2, [0], torch.Generator().manual_seed(0))[0, 0]
    assert (bb.sum(dim=-1) >= 3).all() and bb[0].all()


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


def test_linformer_identity_projection_is_full_attention():
    q, k, v = _qkv(seed=3)
    torch.testing.assert_close(linformer_attention(q, k, v, torch.eye(24)), _full(q, k, v))
    permutation = torch.eye(24)[torch.randperm(24, generator=torch.Generator().manual_seed(0))]
    torch.testing.assert_close(linformer_attention(q, k, v, permutation), _full(q, k, v))  # order of keys is free


def test_linformer_module_shapes_and_sharing():
    torch.manual_seed(0)
    layer = LinformerSelfAttention(16, 2, seq_len=20, proj_len=5)
    assert layer(torch.randn(3, 12, 16)).shape == (3, 12, 16)
    shared = LinformerSelfAttention(16, 2, seq_len=20, proj_len=5, share_projection=True)
    assert shared.e is shared.f
    assert sum(p.numel() for p in shared.parameters()) == sum(p.numel() for p in layer.parameters()) - 100


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
    kernel = (phi_q @ phi_k.transpose(-2, -1)).tril()  # (..., n, n), causal
    expected = (kernel @ v) / kernel.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(performer_attention(q, k, v, omega, causal=True), expected)
    not_causal = (phi_q @ phi_k.transpose(-2, -1)) @ v / (phi_q @ phi_k.transpose(-2, -1)).sum(-1, keepdim=True)
    torch.testing.assert_close(performer_attention(q, k, v, omega), not_causal)


def _xl_and_reference(mem_len: int) -> tuple[TransformerXLAttention, GroupedQueryAttention]:
    torch.manual_seed(9)
    reference = GroupedQueryAttention(16, num_heads=2, rope=True).eval()
    xl = TransformerXLAttention(16, num_heads=2, mem_len=mem_len, max_len=64).eval()
    xl.load_state_dict(reference.state_dict())
    return xl, reference


def test_transformer_xl_with_full_memory_equals_causal_attention():
    xl, reference = _xl_and_reference(mem_len=1000)
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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 5, 24, 100])
def test_blockwise_and_fused_attention_are_exact(causal, block_size):
    q, k, v = _qkv(seed=10)
    mask = torch.ones(24, 24, dtype=torch.bool).tril() if causal else None
    expected = _full(q, k, v, mask)
    torch.testing.assert_close(blockwise_attention(q, k, v, block_size, causal), expected)
    torch.testing.assert_close(fused_attention(q, k, v, causal=causal), expected)


def test_blockwise_with_fewer_queries_aligns_them_at_the_end():
    q, k, v = _qkv(seed=11)
    mask = torch.ones(24, 24, dtype=torch.bool).tril()[-3:]
    torch.testing.assert_close(
        blockwise_attention(q[..., -3:, :], k, v, 4, causal=True), _full(q[..., -3:, :], k, v, mask)
    )


def test_fused_attention_with_mask_and_causal():
    q, k, v = _qkv(seed=12)
    padding = torch.ones(2, 1, 1, 24, dtype=torch.bool)
    padding[0, ..., 20:] = False
    expected = _full(q, k, v, padding & torch.ones(24, 24, dtype=torch.bool).tril())
    torch.testing.assert_close(fused_attention(q, k, v, padding, causal=True), expected)
    torch.testing.assert_close(fused_attention(q, k, v, padding), _full(q, k, v, padding))


def test_peak_tensor_bytes_sees_the_score_matrix():
    q, k, v = _qkv(n=256, d=16, heads=1)
    out, written = peak_tensor_bytes(_full, q, k, v)
    torch.testing.assert_close(out, _full(q, k, v))
    scores = 2 * 256 * 256 * 4  # one (2, 1, 256, 256) float32 matrix
    assert 2 * scores <= written <= 4 * scores
    _, fused = peak_tensor_bytes(fused_attention, q, k, v)
    assert fused < scores / 4
    _, again = peak_tensor_bytes(_full, q, k, v)
    assert again == written  # deterministic


def test_traced_operators_lists_each_operator_once_in_order():
    q, k, v = _qkv()
    names = traced_operators(_full, q, k, v)
    assert names.index("bmm") < names.index("_softmax")
    assert len(names) == len(set(names))
    assert traced_operators(torch.add, torch.ones(2), torch.ones(2)) == ["add"]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sliding_window_mask(0, 1), "length"),
        (lambda: sliding_window_mask(5, -1), "window"),
        (lambda: global_token_mask(5, [5]), "global_positions"),
        (lambda: global_token_mask(5, [1, 1]), "repeat"),
        (lambda: random_key_mask(5, 6), "num_random"),
        (lambda: transformer_xl_mask(10, 0, 2), "segment_len"),
        (lambda: transformer_xl_mask(10, 2, -1), "mem_len"),
        (lambda: sliding_window_attention(*_qkv(), window=-2), "window"),
        (lambda: sliding_window_attention(_qkv()[0][..., :5, :], *_qkv()[1:], window=2), "len_q == len_k"),
        (lambda: longformer_attention(*_qkv(), window=1, global_positions=[30]), "global_positions"),
        (lambda: linformer_attention(*_qkv(), torch.eye(5)), "proj_len, n=24"),
        (lambda: linformer_attention(*_qkv(), torch.eye(24), torch.ones(3, 24)), "same shape"),
        (lambda: LinformerSelfAttention(16, 3, 10, 4), "divisible"),
        (lambda: LinformerSelfAttention(16, 2, 10, 4)(torch.zeros(1, 11, 16)), "seq_len=10"),
        (lambda: orthogonal_random_features(0, 4), "num_features"),
        (lambda: positive_random_features(torch.zeros(3, 4), torch.zeros(5, 3), True), "omega"),
        (lambda: performer_attention(*_qkv(), torch.zeros(5, 3)), "omega"),
        (lambda: TransformerXLAttention(16, 3, 4), "multiple of num_heads"),
        (lambda: TransformerXLAttention(16, 2, -1), "mem_len"),
        (lambda: TransformerXLAttention(16, 2, 4)(torch.zeros(1, 3, 16), torch.zeros(2, 3, 16)), "memory"),
        (lambda: run_in_segments(TransformerXLAttention(16, 2, 4), torch.zeros(1, 3, 16), 0), "segment_len"),
        (lambda: blockwise_attention(*_qkv(), block_size=0), "block_size"),
        (lambda: fused_attention(*_qkv(), mask=torch.ones(24, 24)), "torch.bool"),
        (lambda: fused_attention(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), torch.zeros(2, 3, 5)), "d_k"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
