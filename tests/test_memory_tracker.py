"""The memory tracker sees the score matrix of written-out attention, not of the fused kernel; operators in order."""

from __future__ import annotations

import torch

from transformer_course.core.attention import fused_attention, scaled_dot_product_attention
from transformer_course.memory_tracker import matmul_flops, operator_calls, peak_tensor_bytes, traced_operators


def _qkv(n: int, d: int) -> tuple[torch.Tensor, ...]:
    return torch.randn(3, 2, 1, n, d, generator=torch.Generator().manual_seed(0)).unbind(0)


def _full(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


def test_peak_tensor_bytes_sees_the_score_matrix():
    q, k, v = _qkv(256, 16)
    out, written = peak_tensor_bytes(_full, q, k, v)
    torch.testing.assert_close(out, _full(q, k, v))
    scores = 2 * 256 * 256 * 4  # one (2, 1, 256, 256) float32 matrix
    assert 2 * scores <= written <= 4 * scores
    _, fused = peak_tensor_bytes(fused_attention, q, k, v)
    assert fused < scores / 4
    _, again = peak_tensor_bytes(_full, q, k, v)
    assert again == written  # deterministic


def test_traced_operators_lists_each_operator_once_in_order():
    q, k, v = _qkv(24, 8)
    names = traced_operators(_full, q, k, v)
    assert names.index("bmm") < names.index("_softmax")
    assert len(names) == len(set(names))
    assert traced_operators(torch.add, torch.ones(2), torch.ones(2)) == ["add"]


def test_operator_calls_keeps_repeats_in_call_order():
    x = torch.ones(3)
    calls = operator_calls(lambda: (x + 1) * 2 + 3)
    assert calls == ["add", "mul", "add"]
    assert traced_operators(lambda: (x + 1) * 2 + 3) == ["add", "mul"]
    assert operator_calls(lambda: x.view(3, 1).transpose(0, 1)) == ["view", "transpose"]  # views count too
    q, k, v = _qkv(24, 8)
    every_call = operator_calls(_full, q, k, v)
    assert len(every_call) > len(set(every_call))  # written-out attention repeats some operators
    assert operator_calls(_full, q, k, v) == every_call  # deterministic


def test_matmul_flops_counts_from_shapes():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    assert matmul_flops(lambda: a @ b) == 2 * 3 * 5 * 7
    layer = torch.nn.Linear(5, 7)
    x = torch.randn(4, 5, requires_grad=True)
    assert matmul_flops(lambda: layer(x)) == 2 * 4 * 5 * 7
    # forward and backward: the backward pass needs two products of the same size (for x's and the weight's grads)
    assert matmul_flops(lambda: layer(x).sum().backward()) == 3 * 2 * 4 * 5 * 7
    assert matmul_flops(lambda: a.exp() + 1) == 0  # element-wise work is not counted


def test_matmul_flops_does_not_see_a_fused_lstm():
    # documented: nn.LSTM's fused kernel counts 0, so a notebook counts an LSTM's work from its shapes instead
    lstm = torch.nn.LSTM(8, 16, batch_first=True)
    assert matmul_flops(lambda: lstm(torch.randn(2, 5, 8))) == 0


def test_matmul_flops_does_not_see_the_fused_cpu_attention_but_sees_it_written_out():
    import torch.nn.functional as F

    from transformer_course.core.attention import scaled_dot_product_attention

    q = torch.randn(1, 2, 16, 8)  # (batch, heads, n, d_k)
    assert matmul_flops(lambda: F.scaled_dot_product_attention(q, q, q)) == 0  # documented: count it by hand
    assert matmul_flops(lambda: scaled_dot_product_attention(q, q, q)) == 2 * (2 * 2 * 16 * 16 * 8)


def test_bytes_moved_counts_inputs_and_outputs_of_every_call():
    from transformer_course.memory_tracker import bytes_moved

    x = torch.randn(10, 4)  # 160 bytes
    assert bytes_moved(lambda: x + 1) == 2 * 160  # reads x, writes the result (the scalar 1 is not a tensor)
    assert bytes_moved(lambda: (x + 1) * 2) == 4 * 160  # two calls, each reading and writing 160 bytes
    fused = bytes_moved(lambda: torch.nn.functional.layer_norm(x, (4,)))
    written_out = bytes_moved(lambda: (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True))
    assert written_out > fused
