"""Exercises of notebook 05 (multi-head attention): their checkers and reference solutions.

1. ``check_split_heads(fn)``: ``fn(x, num_heads)`` turns (batch, len, d_model) into (batch, heads, len, d_k).
2. ``check_merge_heads(fn)``: ``fn(x)`` turns (batch, heads, len, d_k) back into (batch, len, heads * d_k).
3. ``check_multi_head_attention(fn)``: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` is multi-head attention
   written with plain matrices (no biases), ``Q = x_q @ w_q`` and so on.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import MultiHeadAttention
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Reference solution of exercise 1.

    x: (batch, len, d_model) with d_model = num_heads * d_k. Returns (batch, heads, len, d_k); head i holds the
    contiguous features i * d_k ... (i + 1) * d_k - 1.
    """
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    return x.view(batch, length, num_heads, d_k).transpose(1, 2)  # cut the features, then move heads forward


def reference_merge_heads(x: Tensor) -> Tensor:
    """Reference solution of exercise 2.

    x: (batch, heads, len, d_k). Returns (batch, len, heads * d_k): the heads side by side (concatenation).
    """
    batch, heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_k)  # reshape copies: the transpose is not contiguous


def reference_multi_head_attention(
    x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, num_heads: int
) -> Tensor:
    """Reference solution of exercise 3.

    x_q: (batch, len_q, d_model) gives the queries; x_kv: (batch, len_k, d_model) the keys and values (the same
    tensor for self-attention). w_q, w_k, w_v, w_o: (d_model, d_model), used as ``x @ w``.
    Returns (batch, len_q, d_model) = Concat(head_1, ..., head_h) @ w_o.
    """
    q = reference_split_heads(x_q @ w_q, num_heads)  # (batch, heads, len_q, d_k)
    k = reference_split_heads(x_kv @ w_k, num_heads)  # (batch, heads, len_k, d_k)
    v = reference_split_heads(x_kv @ w_v, num_heads)  # (batch, heads, len_k, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # scale by sqrt(d_k) of ONE head
    heads = torch.softmax(scores, dim=-1) @ v  # (batch, heads, len_q, d_k)
    return reference_merge_heads(heads) @ w_o


def _hint_for_view_error(error: RuntimeError) -> None:
    if "view size is not compatible" in str(error):
        raise ExerciseMistake(
            "`.view` failed because the tensor is not contiguous after `transpose`; use `.reshape(...)` "
            "(or `.contiguous().view(...)`)."
        ) from error
    raise error


# ----------------------------------------------------------------------------------------------- exercise 1
def _split_cases() -> list[tuple[Tensor, int]]:
    """Batch, length, heads and d_k all differ, so a swapped axis shows up as a wrong shape."""
    g = torch.Generator().manual_seed(51)
    return [(torch.randn(2, 5, 12, generator=g), 3), (torch.randn(3, 7, 8, generator=g), 4)]


def _check_split(fn: Callable[[Tensor, int], Tensor]) -> None:
    for x, heads in _split_cases():
        batch, length, d_model = x.shape
        d_k = d_model // heads
        try:
            out = fn(x.clone(), heads)
        except RuntimeError as error:
            _hint_for_view_error(error)
        expected = reference_split_heads(x, heads)
        what = f"your split of x {tuple(x.shape)} into {heads} heads"
        expect_tensor(out, what, expected.shape, "= (batch, heads, len, d_k)")
        if torch.equal(out, x.reshape(batch, heads, length, d_k)):
            raise ExerciseMistake(
                "the shape is right but the values are scrambled: a plain view/reshape to (batch, heads, len, d_k) "
                "mixes positions into heads. Reshape to (batch, len, heads, d_k) first, then transpose(1, 2)."
            )
        if torch.equal(out, x.reshape(batch, length, d_k, heads).permute(0, 3, 1, 2)):
            raise ExerciseMistake(
                "each head got every h-th feature (interleaved). Head i should hold the contiguous features "
                "i*d_k ... (i+1)*d_k - 1: reshape to (batch, len, heads, d_k), not (batch, len, d_k, heads)."
            )
        expect_close(out, expected, f"split_heads(x of shape {tuple(x.shape)}, {heads})", atol=0.0, rtol=0.0)


def check_split_heads(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 1: ``fn(x, num_heads)`` must return (batch, heads, len, d_k), head i = features i*d_k..."""
    return report("Exercise 1 (split the heads)", lambda: _check_split(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def _check_merge(fn: Callable[[Tensor], Tensor]) -> None:
    for x, heads in _split_cases():
        strided = reference_split_heads(x, heads)  # a transposed view of x, not contiguous
        split = strided.contiguous()  # laid out like the output of attention, weights @ v
        batch, _, length, d_k = split.shape
        try:
            out = fn(split.clone())
            out_strided = fn(strided)
        except RuntimeError as error:
            _hint_for_view_error(error)
        what = f"your merge of heads {tuple(split.shape)}"
        expect_tensor(out, what, x.shape, "= (batch, len, heads * d_k)")
        if torch.equal(out, split.contiguous().view(batch, length, heads * d_k)) and not torch.equal(out, x):
            raise ExerciseMistake(
                "the shape is right but positions and heads are mixed up: transpose(1, 2) back to "
                "(batch, len, heads, d_k) before flattening the last two dimensions."
            )
        expect_close(out, x, "merge_heads(split_heads(x))", atol=0.0, rtol=0.0)
        expect_close(out_strided, x, "merge_heads on a non-contiguous input", atol=0.0, rtol=0.0)


def check_merge_heads(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 2: ``fn(x)`` must turn (batch, heads, len, d_k) into (batch, len, heads * d_k), undoing the split."""
    return report("Exercise 2 (merge the heads)", lambda: _check_merge(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def _mha_inputs() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, int]:
    """Cross-attention with len_q != len_k, so mixing up which input gives the keys shows up."""
    g = torch.Generator().manual_seed(53)
    d_model, heads = 12, 3
    x_q = torch.randn(2, 4, d_model, generator=g)
    x_kv = torch.randn(2, 6, d_model, generator=g)
    w_q, w_k, w_v, w_o = (torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model) for _ in range(4))
    return x_q, x_kv, w_q, w_k, w_v, w_o, heads


def package_multi_head_attention(
    x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, num_heads: int
) -> Tensor:
    """The same computation done by the package's :class:`MultiHeadAttention` (nn.Linear stores W transposed)."""
    mha = MultiHeadAttention(w_q.shape[0], num_heads, bias=False)
    with torch.no_grad():
        for linear, w in ((mha.w_q, w_q), (mha.w_k, w_k), (mha.w_v, w_v), (mha.w_o, w_o)):
            linear.weight.copy_(w.T)
        return mha(x_q, x_kv, x_kv)


def _check_mha(fn: Callable[..., Tensor]) -> None:
    x_q, x_kv, w_q, w_k, w_v, w_o, heads = _mha_inputs()
    out = fn(*(t.clone() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), heads)
    expected = package_multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, heads)
    expect(isinstance(out, Tensor), f"return a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) == tuple(x_kv.shape):
        raise ExerciseMistake(
            f"the output has len_k = {x_kv.shape[1]} rows; it should have one row per query "
            f"(len_q = {x_q.shape[1]}): the queries come from x_q, keys and values from x_kv."
        )
    expect(
        tuple(out.shape) == tuple(expected.shape),
        f"the output has shape {tuple(out.shape)}, expected (batch, len_q, d_model) = {tuple(expected.shape)}",
    )
    d_model = w_q.shape[0]
    d_k = d_model // heads
    q = reference_split_heads(x_q @ w_q, heads)
    k = reference_split_heads(x_kv @ w_k, heads)
    v = reference_split_heads(x_kv @ w_v, heads)
    raw = q @ k.transpose(-2, -1)

    def finish(weights: Tensor) -> Tensor:
        return reference_merge_heads(weights @ v) @ w_o

    hints = [
        (finish(torch.softmax(raw / math.sqrt(d_model), -1)), "scale by sqrt(d_k) of one head, not sqrt(d_model)."),
        (finish(torch.softmax(raw, -1)), "divide the scores by sqrt(d_k) before the softmax."),
        (finish(torch.softmax(raw / math.sqrt(d_k), -2)), "take the softmax over the keys (dim=-1)."),
        (reference_merge_heads(torch.softmax(raw / math.sqrt(d_k), -1) @ v), "apply w_o after merging the heads."),
    ]
    for wrong, hint in hints:
        if torch.allclose(out.detach(), wrong, atol=1e-5):
            raise ExerciseMistake(f"close, but: {hint}")
    expect_close(out, expected, "the multi-head attention output")


def check_multi_head_attention(fn: Callable[..., Tensor]) -> bool:
    """Exercise 3: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` must equal the package's MultiHeadAttention."""
    return report("Exercise 3 (multi-head attention from matrices)", lambda: _check_mha(fn))
