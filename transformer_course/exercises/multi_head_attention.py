"""Exercises of notebook 05 (multi-head attention): their checkers and reference solutions.

5.1 ``check_remove_head(fn)``: ``fn(mha, head)`` returns a copy of a ``MultiHeadAttention`` whose output equals the
    original's with one head switched off, by changing weights only.
5.2 ``check_multi_head_attention(fn)``: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` is multi-head attention
    written with plain matrices (no biases), ``Q = x_q @ w_q`` and so on.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Split the features into heads (notebook 05, section 2; used by the reference of exercise 5.2).

    x: (batch, len, d_model) with d_model = num_heads * d_k. Returns (batch, heads, len, d_k); head i (counted
    from 0) holds the contiguous features i * d_k ... (i + 1) * d_k - 1.
    """
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    return x.view(batch, length, num_heads, d_k).transpose(1, 2)  # cut the features, then move heads forward


def reference_merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads (notebook 05, section 2; used by the reference of exercise 5.2).

    x: (batch, heads, len, d_k). Returns (batch, len, heads * d_k): the heads side by side (concatenation).
    """
    batch, heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_k)  # reshape copies: the transpose is not contiguous


def reference_multi_head_attention(
    x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, num_heads: int
) -> Tensor:
    """Reference solution of exercise 5.2.

    x_q: (batch, len_q, d_model) gives the queries; x_kv: (batch, len_k, d_model) the keys and values (the same
    tensor for self-attention). w_q, w_k, w_v, w_o: (d_model, d_model), used as ``x @ w``.
    Returns (batch, len_q, d_model) = Concat(head_0, ..., head_{h-1}) @ w_o.
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


# --------------------------------------------------------------------------------------------- exercise 5.1
def head_switched_off(mha: MultiHeadAttention, head: int, x: Tensor) -> Tensor:
    """The output of ``mha`` on ``x`` with ``head`` switched off as notebook 05 does it: a hook zeroes that head's
    slice of the concatenation just before W_O."""
    d_k = mha.d_k

    def zero_head(module: nn.Module, inputs: tuple[Tensor]) -> tuple[Tensor]:
        concat = inputs[0].clone()  # (batch, n, heads * d_k)
        concat[..., head * d_k : (head + 1) * d_k] = 0.0
        return (concat,)

    handle = mha.w_o.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            return mha(x)
    finally:
        handle.remove()


def reference_remove_head(mha: MultiHeadAttention, head: int) -> MultiHeadAttention:
    """Reference solution of exercise 5.1: a copy of ``mha`` whose output equals ``mha``'s with ``head`` off.

    Head i writes into the output through its block of W_O: rows i*d_k ... (i+1)*d_k - 1 of W_O in the ``x @ W``
    convention, which are COLUMNS of ``w_o.weight``, since nn.Linear stores its weight as (out, in). Zero them and
    the head writes nothing; W_O's bias belongs to no head and stays.
    """
    removed = copy.deepcopy(mha)
    block = slice(head * mha.d_k, (head + 1) * mha.d_k)
    with torch.no_grad():
        removed.w_o.weight[:, block] = 0.0
    return removed


def _edited(
    mha: MultiHeadAttention, head: int, edit: Callable[[MultiHeadAttention, slice], None]
) -> MultiHeadAttention:
    """A copy of ``mha`` changed by ``edit(copy, block)``: one of the likely wrong answers, to recognise it."""
    changed = copy.deepcopy(mha)
    with torch.no_grad():
        edit(changed, slice(head * mha.d_k, (head + 1) * mha.d_k))
    return changed


_REMOVE_HEAD_SLIPS: list[tuple[Callable[[MultiHeadAttention, slice], None], str]] = [
    (
        lambda m, b: m.w_o.weight[b].zero_(),
        "you zeroed ROWS of w_o.weight. nn.Linear stores its weight as (out, in), so a row is one output feature; "
        "head i's block is the input features i*d_k ... (i+1)*d_k - 1, the COLUMNS: w_o.weight[:, block].",
    ),
    (
        lambda m, b: (m.w_q.weight[b].zero_(), m.w_q.bias[b].zero_()),
        "you switched off the head's queries. Its scores are then all 0, so it attends UNIFORMLY and still writes "
        "the average of its values into the output. Remove what the head writes (its block of W_O), not what it asks.",
    ),
    (
        lambda m, b: m.w_q.weight[b].zero_(),
        "you zeroed the head's query weights. Its queries are then the bias alone, the same at every position, so it "
        "still attends and still writes into the output. Remove what the head writes (its block of W_O).",
    ),
    (
        lambda m, b: (m.w_k.weight[b].zero_(), m.w_k.bias[b].zero_()),
        "you switched off the head's keys. Its scores are then all 0, so it attends UNIFORMLY and still writes the "
        "average of its values. Remove what the head writes (its block of W_O), not what it is matched against.",
    ),
    (
        lambda m, b: m.w_v.weight[b].zero_(),
        "you zeroed the head's value weights but not their bias: every value of the head is then b_V's slice, and "
        "since each row of weights sums to 1, the head still writes that slice times its block of W_O. Zero the "
        "bias slice too, or cut the head at W_O.",
    ),
    (
        lambda m, b: (m.w_o.weight[:, b].zero_(), m.w_o.bias.zero_()),
        "the head is gone, but so is W_O's bias. The bias is added once after the heads are summed and belongs to "
        "no head: keep it.",
    ),
]


def _check_remove_head(fn: Callable[[MultiHeadAttention, int], MultiHeadAttention]) -> None:
    torch.manual_seed(51)  # the checker's own module and inputs, the same on every call
    mha = MultiHeadAttention(12, 3).eval()
    x = torch.randn(2, 5, 12)
    before = {name: t.clone() for name, t in mha.state_dict().items()}
    for head in range(mha.num_heads):
        try:
            removed = fn(mha, head)
        except RuntimeError as error:
            if "leaf Variable" in str(error):
                raise ExerciseMistake(
                    "PyTorch refuses to change a weight that requires gradients in place while it tracks "
                    "operations: make the edit inside `with torch.no_grad():`."
                ) from error
            raise
        mha_changed = any(not torch.equal(t, before[name]) for name, t in mha.state_dict().items())
        expect(
            not mha_changed,
            "you changed the module you were given; edit a copy (`copy.deepcopy(mha)`) and return that.",
        )
        expect(
            isinstance(removed, nn.Module),
            f"return the edited copy of the module (a MultiHeadAttention), got {type(removed).__name__}",
        )
        with torch.no_grad():
            out = removed(x)
        expected = head_switched_off(mha, head, x)
        expect_tensor(out, f"the output of your module with head {head} off", expected.shape, "(batch, n, d_model)")
        if torch.allclose(out, expected, atol=1e-6):
            continue
        with torch.no_grad():
            if torch.allclose(out, mha(x), atol=1e-6):
                raise ExerciseMistake(f"with head {head} switched off, the output is still the original one.")
            for edit, hint in _REMOVE_HEAD_SLIPS:
                if torch.allclose(out, _edited(mha, head, edit)(x), atol=1e-6):
                    raise ExerciseMistake(f"head {head}: {hint}")
            others = [h for h in range(mha.num_heads) if h != head]
            if any(torch.allclose(out, head_switched_off(mha, h, x), atol=1e-6) for h in others):
                raise ExerciseMistake(
                    f"you switched off another head than head {head}: head i (counted from 0) owns the features "
                    "i*d_k ... (i+1)*d_k - 1, with d_k = mha.d_k."
                )
        expect_close(out, expected, f"the output with head {head} switched off", atol=1e-6)


def check_remove_head(fn: Callable[[MultiHeadAttention, int], MultiHeadAttention]) -> bool:
    """Exercise 5.1: ``fn(mha, head)`` must return a copy of ``mha`` whose output equals ``mha``'s with ``head``
    switched off."""
    return report("Exercise 5.1 (switch a head off in the weights)", lambda: _check_remove_head(fn))


# --------------------------------------------------------------------------------------------- exercise 5.2
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
    try:
        out = fn(*(t.clone() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), heads)
    except RuntimeError as error:
        _hint_for_view_error(error)
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

    def direct_view(t: Tensor) -> Tensor:  # the reshape trap of section 3: right shape, positions mixed into heads
        return t.reshape(t.shape[0], heads, t.shape[1], d_k)

    qt, kt, vt = direct_view(x_q @ w_q), direct_view(x_kv @ w_k), direct_view(x_kv @ w_v)
    trapped = torch.softmax(qt @ kt.transpose(-2, -1) / math.sqrt(d_k), -1) @ vt  # (batch, heads, len_q, d_k)
    hints = [
        (
            trapped.reshape(x_q.shape[0], x_q.shape[1], d_model) @ w_o,
            "you split the heads with a direct view to (batch, heads, len, d_k), the reshape trap of section 3: "
            "view to (batch, len, heads, d_k) first, then transpose(1, 2), and undo both when merging.",
        ),
        (
            reference_multi_head_attention(x_q, x_kv, w_q.T, w_k.T, w_v.T, w_o.T, heads),
            "the matrices here are in the maths convention, Q = x_q @ w_q (shape (d_model, d_model), in x out); "
            "you used them like nn.Linear weights, transposed. Multiply by w_q itself.",
        ),
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
    """Exercise 5.2: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` must equal the package's MultiHeadAttention."""
    return report("Exercise 5.2 (multi-head attention from matrices)", lambda: _check_mha(fn))
