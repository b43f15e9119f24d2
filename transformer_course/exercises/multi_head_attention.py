"""Exercises of notebook 05 (multi-head attention): their checkers and reference solutions.

5.1 ``check_remove_head(fn)``: ``fn(mha, head)`` returns a copy of a ``MultiHeadAttention`` whose output equals the
    original's with one head switched off, by changing weights only.
5.2 ``check_multi_head_attention(fn)``: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` is multi-head attention
    written with plain matrices (no biases), ``Q = x_q @ w_q`` and so on, with heads of width d_k for the queries
    and keys and d_v for the values, neither of them d_model / num_heads.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.attention import MultiHeadAttention
from ._core import (
    Exercise,
    ExerciseMistake,
    expect,
    expect_close,
    expect_tensor,
    explain_shape_error,
    is_view_of_non_contiguous,
    report,
    tr,
)

REMOVE_HEAD = Exercise("5.1", "switch a head off in the weights", "在权重中关闭一个头")
MULTI_HEAD_ATTENTION = Exercise("5.2", "multi-head attention, d_v != d_k", "d_v != d_k 的多头注意力")


def reference_split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Split the features into heads (notebook 05, section 2; used by the reference of exercise 5.2).

    x: (batch, len, num_heads * d). Returns (batch, heads, len, d); head i (counted from 0) holds the contiguous
    features i * d ... (i + 1) * d - 1.
    """
    batch, length, _ = x.shape
    return x.view(batch, length, num_heads, -1).transpose(1, 2)  # cut the features, then move heads forward


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
    tensor for self-attention). w_q, w_k: (d_model, num_heads * d_k); w_v: (d_model, num_heads * d_v);
    w_o: (num_heads * d_v, d_model); all used as ``x @ w``. Each head's widths follow from the shapes.
    Returns (batch, len_q, d_model) = Concat(head_0, ..., head_{h-1}) @ w_o.
    """
    q = reference_split_heads(x_q @ w_q, num_heads)  # (batch, heads, len_q, d_k)
    k = reference_split_heads(x_kv @ w_k, num_heads)  # (batch, heads, len_k, d_k)
    v = reference_split_heads(x_kv @ w_v, num_heads)  # (batch, heads, len_k, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # scale by sqrt(d_k) of ONE head, not d_v
    heads = torch.softmax(scores, dim=-1) @ v  # (batch, heads, len_q, d_v)
    return reference_merge_heads(heads) @ w_o


def _hint_for_view_error(error: RuntimeError) -> None:
    if is_view_of_non_contiguous(error):
        raise ExerciseMistake(
            tr(
                "`.view` failed because the tensor is not contiguous after `transpose`; use `.reshape(...)` "
                "(or `.contiguous().view(...)`).",
                "`.view` 失败了，因为张量在 `transpose` 之后不再连续；要用 `.reshape(...)`"
                "（或 `.contiguous().view(...)`）。",
            )
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


def _remove_head_slips() -> list[tuple[Callable[[MultiHeadAttention, slice], None], str]]:
    return [
        (
            lambda m, b: m.w_o.weight[b].zero_(),
            tr(
                "you zeroed ROWS of w_o.weight. nn.Linear stores its weight as (out, in), so a row is one output "
                "feature; head i's block is the input features i*d_k ... (i+1)*d_k - 1, the COLUMNS: "
                "w_o.weight[:, block].",
                "你清零的是 w_o.weight 的行。nn.Linear 按 (out, in) 存储权重，所以一行是一个输出特征；"
                "i 号头的块是输入特征 i*d_k ... (i+1)*d_k - 1，对应的是列：w_o.weight[:, block]。",
            ),
        ),
        (
            lambda m, b: (m.w_q.weight[b].zero_(), m.w_q.bias[b].zero_()),
            tr(
                "you switched off the head's queries. Its scores are then all 0, so it attends UNIFORMLY and still "
                "writes the average of its values into the output. Remove what the head writes (its block of W_O), "
                "not what it asks.",
                "你关闭的是这个头的查询。这样它的分数全是 0，于是它会均匀地关注所有键，仍把它的值的平均写进输出。"
                "要去掉的是这个头写出的东西（它在 W_O 中的块），而不是它提出的查询。",
            ),
        ),
        (
            lambda m, b: m.w_q.weight[b].zero_(),
            tr(
                "you zeroed the head's query weights. Its queries are then the bias alone, the same at every "
                "position, so it still attends and still writes into the output. Remove what the head writes (its "
                "block of W_O).",
                "你把这个头的查询权重清零了。这样它的查询就只剩下偏置，在每个位置都一样，所以它仍然在做注意力，"
                "仍然往输出里写。要去掉的是这个头写出的东西（它在 W_O 中的块）。",
            ),
        ),
        (
            lambda m, b: (m.w_k.weight[b].zero_(), m.w_k.bias[b].zero_()),
            tr(
                "you switched off the head's keys. Its scores are then all 0, so it attends UNIFORMLY and still "
                "writes the average of its values. Remove what the head writes (its block of W_O), not what it is "
                "matched against.",
                "你关闭的是这个头的键。这样它的分数全是 0，于是它会均匀地关注所有键，仍写出它的值的平均。"
                "要去掉的是这个头写出的东西（它在 W_O 中的块），而不是与它匹配的键。",
            ),
        ),
        (
            lambda m, b: m.w_v.weight[b].zero_(),
            tr(
                "you zeroed the head's value weights but not their bias: every value of the head is then b_V's "
                "slice, and since each row of weights sums to 1, the head still writes that slice times its block of "
                "W_O. Zero the bias slice too, or cut the head at W_O.",
                "你把这个头的值权重清零了，却没有清零它们的偏置，这样这个头的每个值都是 b_V 的那一段，"
                "而每行权重之和为 1，所以这个头仍会写出这一段乘以它在 W_O 中的块。要把偏置的那一段也清零，"
                "或者在 W_O 处切断这个头。",
            ),
        ),
        (
            lambda m, b: (m.w_o.weight[:, b].zero_(), m.w_o.bias.zero_()),
            tr(
                "the head is gone, but so is W_O's bias. The bias is added once after the heads are summed and "
                "belongs to no head: keep it.",
                "这个头是去掉了，但 W_O 的偏置也没了。偏置是在各头求和之后加上一次的，不属于任何一个头：要保留它。",
            ),
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
                    tr(
                        "PyTorch refuses to change a weight that requires gradients in place while it tracks "
                        "operations: make the edit inside `with torch.no_grad():`.",
                        "PyTorch 在跟踪运算时不允许原地修改需要梯度的权重：要在 `with torch.no_grad():` 里面修改。",
                    )
                ) from error
            raise
        mha_changed = any(not torch.equal(t, before[name]) for name, t in mha.state_dict().items())
        expect(
            not mha_changed,
            tr(
                "you changed the module you were given; edit a copy (`copy.deepcopy(mha)`) and return that.",
                "你修改了传进来的模块；要修改它的副本（`copy.deepcopy(mha)`），并返回这个副本。",
            ),
        )
        got = type(removed).__name__
        expect(
            isinstance(removed, nn.Module),
            tr(
                f"return the edited copy of the module (a MultiHeadAttention), got {got}",
                f"要返回修改后的模块副本（一个 MultiHeadAttention），得到的是 {got}",
            ),
        )
        with torch.no_grad():
            out = removed(x)
        expected = head_switched_off(mha, head, x)
        expect_tensor(
            out,
            tr(f"the output of your module with head {head} off", f"关闭 {head} 号头后你的模块的输出"),
            expected.shape,
            "(batch, n, d_model)",
        )
        if torch.allclose(out, expected, atol=1e-6):
            continue
        with torch.no_grad():
            if torch.allclose(out, mha(x), atol=1e-6):
                raise ExerciseMistake(
                    tr(
                        f"with head {head} switched off, the output is still the original one.",
                        f"关闭 {head} 号头之后，输出仍和原来一样。",
                    )
                )
            for edit, hint in _remove_head_slips():
                if torch.allclose(out, _edited(mha, head, edit)(x), atol=1e-6):
                    raise ExerciseMistake(tr(f"head {head}: {hint}", f"{head} 号头：{hint}"))
            others = [h for h in range(mha.num_heads) if h != head]
            if any(torch.allclose(out, head_switched_off(mha, h, x), atol=1e-6) for h in others):
                raise ExerciseMistake(
                    tr(
                        f"you switched off another head than head {head}: head i (counted from 0) owns the features "
                        "i*d_k ... (i+1)*d_k - 1, with d_k = mha.d_k.",
                        f"你关闭的不是 {head} 号头，而是另一个头：i 号头（从 0 开始数）拥有特征 "
                        "i*d_k ... (i+1)*d_k - 1，其中 d_k = mha.d_k。",
                    )
                )
        expect_close(
            out, expected, tr(f"the output with head {head} switched off", f"关闭 {head} 号头后的输出"), atol=1e-6
        )


def check_remove_head(fn: Callable[[MultiHeadAttention, int], MultiHeadAttention]) -> bool:
    """Exercise 5.1: ``fn(mha, head)`` must return a copy of ``mha`` whose output equals ``mha``'s with ``head``
    switched off."""
    return report(REMOVE_HEAD, lambda: _check_remove_head(fn))


# --------------------------------------------------------------------------------------------- exercise 5.2
# (d_model, num_heads, d_k, d_v) of the checker's two cases: heads narrower than d_model / num_heads, values wider
# than the queries and keys, then the other way round, so that sqrt(d_k) and sqrt(d_v) cannot be confused.
_MHA_CASES = ((12, 3, 2, 5), (8, 2, 6, 3))


def _mha_inputs(
    d_model: int = 12, heads: int = 3, d_k: int = 2, d_v: int = 5, seed: int = 53
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, int]:
    """Cross-attention with len_q != len_k, so mixing up which input gives the keys shows up.

    w_q, w_k: (d_model, heads * d_k); w_v: (d_model, heads * d_v); w_o: (heads * d_v, d_model).
    """
    g = torch.Generator().manual_seed(seed)
    x_q = torch.randn(2, 4, d_model, generator=g)
    x_kv = torch.randn(2, 6, d_model, generator=g)
    w_q, w_k = (torch.randn(d_model, heads * d_k, generator=g) / math.sqrt(d_model) for _ in range(2))
    w_v = torch.randn(d_model, heads * d_v, generator=g) / math.sqrt(d_model)
    w_o = torch.randn(heads * d_v, d_model, generator=g) / math.sqrt(heads * d_v)
    return x_q, x_kv, w_q, w_k, w_v, w_o, heads


def torch_multi_head_attention(
    x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, num_heads: int
) -> Tensor:
    """The expected answer, with PyTorch's ``F.scaled_dot_product_attention`` doing each head's attention (it scales
    by the square root of the queries' width, d_k, and accepts values of another width d_v)."""
    q, k, v = (reference_split_heads(t, num_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    return reference_merge_heads(F.scaled_dot_product_attention(q, k, v)) @ w_o


def package_multi_head_attention(
    x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, num_heads: int
) -> Tensor:
    """The same computation done by the package's :class:`MultiHeadAttention`, which needs d_v = d_k (nn.Linear
    stores W transposed)."""
    mha = MultiHeadAttention(w_q.shape[0], num_heads, bias=False, head_dim=w_q.shape[1] // num_heads)
    with torch.no_grad():
        for linear, w in ((mha.w_q, w_q), (mha.w_k, w_k), (mha.w_v, w_v), (mha.w_o, w_o)):
            linear.weight.copy_(w.T)
        return mha(x_q, x_kv, x_kv)


def _hint_for_shape_error(error: RuntimeError) -> None:
    message = str(error)
    if "is invalid for input of size" in message:
        raise ExerciseMistake(
            tr(
                f"a reshape failed ({message}): here a head is not d_model / num_heads wide. Read the widths from the "
                "weights, d_k = w_q.shape[1] // num_heads and d_v = w_v.shape[1] // num_heads (or let `view` work "
                "one out with -1).",
                f"reshape 失败了：{explain_shape_error(error)}。"
                "这里一个头的维度并不是 d_model / num_heads。要从权重读出维度："
                "d_k = w_q.shape[1] // num_heads，d_v = w_v.shape[1] // num_heads（或者用 -1 让 `view` "
                "自己算出一个）。",
            )
        ) from error
    if "cannot be multiplied" in message:
        raise ExerciseMistake(
            tr(
                f"a matrix product failed on its shapes ({message}). The matrices are in the maths convention, "
                "Q = x_q @ w_q with w_q of shape (d_model, num_heads * d_k), and w_o, of shape (num_heads * d_v, "
                "d_model), multiplies the merged heads: use them as given, not transposed.",
                f"{explain_shape_error(error)}。这些矩阵采用数学上的写法：Q = x_q @ w_q，"
                "w_q 的形状为 (d_model, num_heads * d_k)；形状为 (num_heads * d_v, d_model) 的 w_o "
                "乘的是合并后的各头。请直接使用它们，不要转置。",
            )
        ) from error
    _hint_for_view_error(error)


def _check_mha_case(fn: Callable[..., Tensor], d_model: int, heads: int, d_k: int, d_v: int) -> None:
    x_q, x_kv, w_q, w_k, w_v, w_o, heads = _mha_inputs(d_model, heads, d_k, d_v)
    try:
        out = fn(*(t.clone() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), heads)
    except RuntimeError as error:
        _hint_for_shape_error(error)
    expected = torch_multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, heads)
    got = type(out).__name__
    expect(isinstance(out, Tensor), tr(f"return a torch.Tensor, got {got}", f"应返回 torch.Tensor，得到的是 {got}"))
    if tuple(out.shape) == tuple(x_kv.shape):
        raise ExerciseMistake(
            tr(
                f"the output has len_k = {x_kv.shape[1]} rows; it should have one row per query "
                f"(len_q = {x_q.shape[1]}): the queries come from x_q, keys and values from x_kv.",
                f"输出有 len_k = {x_kv.shape[1]} 行；它应该每个查询一行（len_q = {x_q.shape[1]}）："
                "查询来自 x_q，键和值来自 x_kv。",
            )
        )
    if tuple(out.shape) == (*x_q.shape[:2], heads * d_v):
        raise ExerciseMistake(
            tr(
                f"the output has num_heads * d_v = {heads * d_v} features, the merged heads: apply w_o after merging "
                f"them, mapping the heads back to d_model = {d_model}.",
                f"输出有 num_heads * d_v = {heads * d_v} 个特征，也就是合并后的各头：合并之后还要乘上 w_o，"
                f"把各头映射回 d_model = {d_model}。",
            )
        )
    expect(
        tuple(out.shape) == tuple(expected.shape),
        tr(
            f"the output has shape {tuple(out.shape)}, expected (batch, len_q, d_model) = {tuple(expected.shape)}",
            f"输出的形状是 {tuple(out.shape)}，应为 (batch, len_q, d_model) = {tuple(expected.shape)}。",
        ),
    )
    q = reference_split_heads(x_q @ w_q, heads)
    k = reference_split_heads(x_kv @ w_k, heads)
    v = reference_split_heads(x_kv @ w_v, heads)
    raw = q @ k.transpose(-2, -1)

    def finish(weights: Tensor) -> Tensor:
        return reference_merge_heads(weights @ v) @ w_o

    def direct_view(t: Tensor) -> Tensor:  # the reshape trap of section 3: right shape, positions mixed into heads
        return t.reshape(t.shape[0], heads, t.shape[1], -1)

    qt, kt, vt = direct_view(x_q @ w_q), direct_view(x_kv @ w_k), direct_view(x_kv @ w_v)
    trapped = torch.softmax(qt @ kt.transpose(-2, -1) / math.sqrt(d_k), -1) @ vt  # (batch, heads, len_q, d_v)
    hints = [
        (
            trapped.reshape(x_q.shape[0], x_q.shape[1], heads * d_v) @ w_o,
            tr(
                "you split the heads with a direct view to (batch, heads, len, d), the reshape trap of section 3: "
                "view to (batch, len, heads, d) first, then transpose(1, 2), and undo both when merging.",
                "你直接用 view 把各头拆成了 (batch, heads, len, d)，这正是第 3 节讲的 reshape 陷阱："
                "要先 view 成 (batch, len, heads, d)，再 transpose(1, 2)，合并时把这两步都反过来。",
            ),
        ),
        (
            reference_merge_heads(trapped) @ w_o,
            tr(
                "you split the heads with a direct view to (batch, heads, len, d), the reshape trap of section 3 "
                "(your merge is right): view to (batch, len, heads, d) first, then transpose(1, 2).",
                "拆分各头时，你直接用 view 得到了 (batch, heads, len, d)，这正是第 3 节讲的 reshape 陷阱"
                "（合并那一步是对的）：要先 view 成 (batch, len, heads, d)，再 transpose(1, 2)。",
            ),
        ),
        (
            (torch.softmax(raw / math.sqrt(d_k), -1) @ v).reshape(x_q.shape[0], x_q.shape[1], heads * d_v) @ w_o,
            tr(
                "you merged the heads by reshaping (batch, heads, len, d) straight to (batch, len, heads * d), the "
                "reshape trap of section 3 in reverse (your split is right): transpose(1, 2) back to "
                "(batch, len, heads, d) first, then reshape.",
                "合并各头时，你把 (batch, heads, len, d) 直接 reshape 成了 (batch, len, heads * d)，"
                "这是第 3 节讲的 reshape 陷阱反过来的情形（拆分那一步是对的）：要先 transpose(1, 2) 变回 "
                "(batch, len, heads, d)，再 reshape。",
            ),
        ),
        (
            finish(torch.softmax(raw / math.sqrt(d_v), -1)),
            tr(
                "scale the scores by sqrt(d_k), the width of one head's queries and keys; d_v, the width of its "
                "values, does not enter the scores.",
                "要用 sqrt(d_k) 缩放分数，d_k 是一个头的查询和键的维度；值的维度 d_v 不参与分数的计算。",
            ),
        ),
        (
            finish(torch.softmax(raw / math.sqrt(d_model), -1)),
            tr(
                "scale by sqrt(d_k) of one head, not sqrt(d_model).",
                "要用一个头的 sqrt(d_k) 缩放，而不是 sqrt(d_model)。",
            ),
        ),
        (
            finish(torch.softmax(raw / math.sqrt(heads * d_k), -1)),
            tr(
                "scale by sqrt(d_k) of ONE head (w_q.shape[1] // num_heads), not by the square root of all heads' "
                "query width together.",
                "要用单个头的 sqrt(d_k)（w_q.shape[1] // num_heads）缩放，而不是所有头的查询维度之和的平方根。",
            ),
        ),
        (
            finish(torch.softmax(raw / math.sqrt(d_model // heads), -1)),
            tr(
                f"scale by sqrt(d_k) with d_k = w_q.shape[1] // num_heads = {d_k}, read from the weights: here a "
                f"head is not d_model / num_heads = {d_model // heads} wide.",
                f"要用 sqrt(d_k) 缩放，其中 d_k = w_q.shape[1] // num_heads = {d_k} 要从权重读出："
                f"这里一个头的维度并不是 d_model / num_heads = {d_model // heads}。",
            ),
        ),
        (
            finish(torch.softmax(raw, -1)),
            tr("divide the scores by sqrt(d_k) before the softmax.", "在 softmax 之前要把分数除以 sqrt(d_k)。"),
        ),
        (
            finish(torch.softmax(raw / math.sqrt(d_k), -2)),
            tr("take the softmax over the keys (dim=-1).", "要在键上做 softmax（dim=-1）。"),
        ),
    ]
    k_self, v_self = reference_split_heads(x_q @ w_k, heads), reference_split_heads(x_q @ w_v, heads)
    self_attention = reference_merge_heads(torch.softmax(q @ k_self.transpose(-2, -1) / math.sqrt(d_k), -1) @ v_self)
    hints.append(
        (
            self_attention @ w_o,
            tr(
                "the keys and values come from x_kv (the sentence looked at), only the queries from x_q.",
                "键和值来自 x_kv（被查看的那个句子），只有查询来自 x_q。",
            ),
        )
    )
    for wrong, hint in hints:
        if torch.allclose(out.detach(), wrong, atol=1e-5):
            raise ExerciseMistake(tr(f"close, but: {hint}", f"很接近了，但是{hint}"))
    expect_close(
        out,
        expected,
        tr(
            f"the multi-head attention output (d_k = {d_k}, d_v = {d_v})",
            f"多头注意力的输出（d_k = {d_k}，d_v = {d_v}）",
        ),
    )


def _check_mha(fn: Callable[..., Tensor]) -> None:
    for case in _MHA_CASES:
        _check_mha_case(fn, *case)


def check_multi_head_attention(fn: Callable[..., Tensor]) -> bool:
    """Exercise 5.2: ``fn(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads)`` must compute multi-head attention with heads
    of width d_k for the queries and keys and d_v for the values, read from the weights' shapes."""
    return report(MULTI_HEAD_ATTENTION, lambda: _check_mha(fn))
