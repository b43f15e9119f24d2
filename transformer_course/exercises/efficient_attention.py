"""Exercises of notebook 13 (efficient attention): their checkers and reference solutions.

1. ``check_longformer_mask(fn)``: ``fn(length, window, global_positions)`` builds Longformer's (length, length) mask.
2. ``check_online_softmax_merge(fn)``: ``fn(state_a, state_b)`` merges two partial softmax states (m, l, acc), the
   step that lets flash attention process keys block by block.
3. ``check_linear_attention_step(fn)``: ``fn(s, z, phi_q, phi_k, v)`` advances causal linear attention by one token
   with a state of fixed size (s, z), the recurrence that replaces the KV cache in linear-attention decoders.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ._core import Exercise, ExerciseMistake, crash_hint, expect, expect_close, expect_tensor, report, tr

LONGFORMER_MASK = Exercise("13.1", "Longformer mask", "Longformer 掩码")
ONLINE_SOFTMAX_MERGE = Exercise("13.2", "online softmax merge", "在线 softmax 的合并")
LINEAR_ATTENTION_STEP = Exercise("13.3", "linear attention as a recurrence", "把线性注意力写成递推")

State = tuple[Tensor, Tensor, Tensor]


# ----------------------------------------------------------------------------------------------- exercise 1
def reference_longformer_mask(length: int, window: int, global_positions: Sequence[int]) -> Tensor:
    """Reference solution of exercise 1: (length, length) bool, True where |i - j| <= window or i or j is global."""
    pos = torch.arange(length)
    allowed = (pos[:, None] - pos[None, :]).abs() <= window
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    return allowed | is_global[:, None] | is_global[None, :]


_MASK_CASES = ((10, 2, [0]), (16, 1, [0, 9]), (7, 0, []), (12, 3, [5, 11]))


def _mask_mistakes(length: int, window: int, global_positions: Sequence[int]) -> list[tuple[str, Tensor]]:
    pos = torch.arange(length)
    offset = pos[:, None] - pos[None, :]
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    right = reference_longformer_mask(length, window, global_positions)
    return [
        (
            tr(
                "the window is one too narrow: |i - j| <= window is allowed, including |i - j| = window",
                "窗口窄了一格，|i - j| <= window 都是允许的，包括 |i - j| = window",
            ),
            (offset.abs() < window) | is_global[:, None] | is_global[None, :],
        ),
        (
            tr(
                "global tokens must also be *seen* by every token: set their columns, not only their rows",
                "每个词元也必须能看到全局词元，所以除了它们的行，还要设置它们的列",
            ),
            (offset.abs() <= window) | is_global[:, None],
        ),
        (
            tr(
                "global tokens must also *see* every token: set their rows, not only their columns",
                "全局词元自己也必须能看到每个词元，所以除了它们的列，还要设置它们的行",
            ),
            (offset.abs() <= window) | is_global[None, :],
        ),
        (
            tr(
                "Longformer's window is two-sided (an encoder): token i also sees i + 1 .. i + window",
                "Longformer 的窗口是双向的（它是编码器），词元 i 也能看到 i + 1 .. i + window",
            ),
            ((offset >= 0) & (offset <= window)) | is_global[:, None] | is_global[None, :],
        ),
        (
            tr(
                "the convention is True = may attend; yours marks the blocked pairs",
                "约定是 True = 可以关注；你的掩码标出的却是被屏蔽的位置对",
            ),
            ~right,
        ),
        (tr("the global tokens are missing", "缺少全局词元"), offset.abs() <= window),
    ]


def _check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> None:
    for length, window, global_positions in _MASK_CASES:
        what = tr(
            f"your mask for length={length}, window={window}, global_positions={global_positions}",
            f"当 length={length}、window={window}、global_positions={global_positions} 时，你的掩码",
        )
        out = fn(length, window, list(global_positions))
        expect_tensor(out, what, (length, length))
        expect(
            out.dtype == torch.bool,
            tr(
                f"{what} has dtype {out.dtype}; masks are torch.bool (True = may attend)",
                f"{what}的 dtype 是 {out.dtype}；掩码应是 torch.bool（True = 可以关注）。",
            ),
        )
        expected = reference_longformer_mask(length, window, global_positions)
        if torch.equal(out, expected):
            continue
        for hint, wrong in _mask_mistakes(length, window, global_positions):
            if torch.equal(out, wrong):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}有误：{hint}。"))
        bad = (out != expected).nonzero()[0].tolist()
        raise ExerciseMistake(
            tr(
                f"{what} differs at (query, key) = {tuple(bad)}: expected {bool(expected[tuple(bad)])}.",
                f"{what}在（查询，键）= {tuple(bad)} 处不对：应为 {bool(expected[tuple(bad)])}。",
            )
        )


def check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> bool:
    """Exercise 13.1: ``fn(length, window, global_positions)`` must return Longformer's (length, length) bool mask."""
    return report(LONGFORMER_MASK, lambda: _check_longformer_mask(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def partial_state(q: Tensor, k: Tensor, v: Tensor) -> State:
    """The softmax state of q (..., n_q, d) over one block of keys k, v (..., b, d): (m, l, acc) with m (..., n_q) the
    largest score, l (..., n_q) the sum of exp(score - m) and acc (..., n_q, d) the sum of exp(score - m) v."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = scores.amax(dim=-1)
    p = torch.exp(scores - m.unsqueeze(-1))
    return m, p.sum(dim=-1), p @ v


def reference_merge(a: State, b: State) -> State:
    """Reference solution of exercise 2: the state of the two blocks together, rescaled to the common maximum."""
    m_a, l_a, acc_a = a
    m_b, l_b, acc_b = b
    m = torch.maximum(m_a, m_b)
    scale_a, scale_b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * scale_a + l_b * scale_b, acc_a * scale_a.unsqueeze(-1) + acc_b * scale_b.unsqueeze(-1)


def _merge_mistakes(a: State, b: State) -> list[tuple[str, State]]:
    m = torch.maximum(a[0], b[0])
    scale_a, scale_b = torch.exp(a[0] - m), torch.exp(b[0] - m)
    only_a = (m, a[1] * scale_a + b[1], a[2] * scale_a.unsqueeze(-1) + b[2])
    only_b = (m, a[1] + b[1] * scale_b, a[2] + b[2] * scale_b.unsqueeze(-1))
    reference = reference_merge(a, b)
    return [
        (
            tr(
                "you added l and acc without rescaling: multiply each block's l and acc by exp(m_block - m_new) first",
                "你没有重新缩放就把 l 和 acc 相加了，要先把每个块的 l 和 acc 乘以 exp(m_block - m_new)",
            ),
            (m, a[1] + b[1], a[2] + b[2]),
        ),
        (
            tr(
                "you rescaled only block a: block b's l and acc also need the factor exp(m_b - m), since where block "
                "a holds the larger maximum, b's sums were taken relative to a smaller m_b",
                "你只重新缩放了块 a，块 b 的 l 和 acc 也要乘以因子 exp(m_b - m)，因为在块 a 的最大值更大的位置，"
                "b 的和是相对于较小的 m_b 算出来的",
            ),
            only_a,
        ),
        (
            tr(
                "you rescaled only block b: block a's l and acc also need the factor exp(m_a - m), since where block "
                "b holds the larger maximum, a's sums were taken relative to a smaller m_a",
                "你只重新缩放了块 b，块 a 的 l 和 acc 也要乘以因子 exp(m_a - m)，因为在块 b 的最大值更大的位置，"
                "a 的和是相对于较小的 m_a 算出来的",
            ),
            only_b,
        ),
        (
            tr(
                "you rescaled acc but not l: l is a sum of exp(score - m) as well, so each block's l needs the same "
                "factor exp(m_block - m_new) as its acc",
                "你重新缩放了 acc，却没有重新缩放 l。l 同样是 exp(score - m) 之和，所以每个块的 l 也要乘以与它的 acc "
                "相同的因子 exp(m_block - m_new)",
            ),
            (m, a[1] + b[1], reference[2]),
        ),
        (
            tr(
                "you rescaled l but not acc: acc is a sum of exp(score - m) v as well, so each block's acc needs the "
                "same factor exp(m_block - m_new) as its l",
                "你重新缩放了 l，却没有重新缩放 acc。acc 同样是 exp(score - m) v 之和，所以每个块的 acc "
                "也要乘以与它的 l 相同的因子 exp(m_block - m_new)",
            ),
            (m, reference[1], a[2] + b[2]),
        ),
        (
            tr(
                "the rescaling factor is exp(m_block - m_new), at most 1; you wrote exp(m_new - m_block), which "
                "grows the block that should shrink",
                "缩放因子是 exp(m_block - m_new)，不会超过 1；你写成了 exp(m_new - m_block)，本该缩小的块反而被放大了",
            ),
            (m, a[1] / scale_a + b[1] / scale_b, a[2] / scale_a.unsqueeze(-1) + b[2] / scale_b.unsqueeze(-1)),
        ),
        *(
            (
                tr(
                    "the new m must be the larger of the two maxima (torch.maximum), so that no exp() can overflow",
                    "新的 m 必须取两个最大值中较大的那个（torch.maximum），这样 exp() 才不会溢出",
                ),
                reference_merge_with(a, b, wrong_m),
            )
            for wrong_m in (torch.minimum(a[0], b[0]), a[0], b[0])  # the smaller maximum, or one block's own
        ),
    ]


def reference_merge_with(a: State, b: State, m: Tensor) -> State:
    """A merge rescaled to a given m (for the checker's hints)."""
    scale_a, scale_b = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * scale_a + b[1] * scale_b, a[2] * scale_a.unsqueeze(-1) + b[2] * scale_b.unsqueeze(-1)


def _check_merge(fn: Callable[[State, State], State]) -> None:
    generator = torch.Generator().manual_seed(13)
    for shape, split in (((1, 4, 8), 3), ((2, 3, 5, 16), 7), ((6, 4), 1)):
        d = shape[-1]
        q = torch.randn(*shape, generator=generator) * 2
        k = torch.randn(*shape[:-2], 10, d, generator=generator) * 2
        v = torch.randn(*shape[:-2], 10, d, generator=generator)
        a, b = (
            partial_state(q, k[..., :split, :], v[..., :split, :]),
            partial_state(q, k[..., split:, :], v[..., split:, :]),
        )
        what = tr(
            f"your merge for q of shape {shape}, keys split {split} + {10 - split}",
            f"q 的形状为 {shape}、键拆分为 {split} + {10 - split} 时，你的合并结果",
        )
        try:
            out = fn(tuple(t.clone() for t in a), tuple(t.clone() for t in b))
        except RuntimeError as error:
            n_q = shape[-2]
            mistake = crash_hint(
                error,
                (n_q, d),
                f"acc has one more axis than m and l, the value dimension ({d}): give the factor that axis, "
                "acc_a * torch.exp(m_a - m)[..., None].",
                f"acc 比 m 和 l 多一维，即值的维度（{d}）：缩放因子也要补上这一维，"
                "写成 acc_a * torch.exp(m_a - m)[..., None]。",
            )
            if mistake is None:
                raise
            raise mistake from error
        got = type(out).__name__
        expect(
            isinstance(out, (tuple, list)) and len(out) == 3,
            tr(
                f"{what} should return three tensors (m, l, acc), got {got}",
                f"{what}应是三个张量 (m, l, acc)，得到的是 {got}",
            ),
        )
        expected = reference_merge(a, b)
        if all(
            isinstance(o, Tensor) and o.shape == e.shape and torch.allclose(o, e, atol=1e-5, rtol=1e-4)
            for o, e in zip(out, expected)
        ):
            continue
        for hint, wrong in _merge_mistakes(a, b):
            if all(
                isinstance(o, Tensor) and o.shape == w.shape and torch.allclose(o, w, atol=1e-5, rtol=1e-4)
                for o, w in zip(out, wrong)
            ):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}有误：{hint}。"))
        expect_close(out[0], expected[0], tr(f"{what}: m (the running maximum)", f"{what}中的 m（目前的最大值）"))
        expect_close(
            out[1], expected[1], tr(f"{what}: l (the sum of exp(score - m))", f"{what}中的 l（exp(score - m) 之和）")
        )
        expect_close(
            out[2],
            expected[2],
            tr(
                f"{what}: acc (the sum of exp(score - m) v; do not divide by l yet)",
                f"{what}中的 acc（exp(score - m) v 之和；先不要除以 l）",
            ),
        )


def check_online_softmax_merge(fn: Callable[[State, State], State]) -> bool:
    """Exercise 13.2: ``fn((m_a, l_a, acc_a), (m_b, l_b, acc_b))`` must return the merged (m, l, acc)."""
    return report(ONLINE_SOFTMAX_MERGE, lambda: _check_merge(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
Step = tuple[Tensor, Tensor, Tensor]


def reference_linear_attention_step(s: Tensor, z: Tensor, phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Step:
    """Reference solution of exercise 3: one token of causal linear attention with a fixed-size state.

    s: (m, d) the sum of phi(k_j) v_j^T over the tokens so far; z: (m,) the sum of phi(k_j); phi_q, phi_k: (m,) the
    features of the new token's query and key; v: (d,) its value. Returns the new (s, z) and the token's output
    (d,) = phi_q^T s / (phi_q . z), after the new token has been added (a query also attends to its own key).
    """
    s = s + phi_k[:, None] * v[None, :]  # (m, d): add phi(k_i) v_i^T
    z = z + phi_k  # (m,)
    return s, z, (phi_q @ s) / (phi_q @ z)


def causal_kernel_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Tensor:
    """The quadratic form that the recurrence must equal: phi_q, phi_k (n, m), v (n, d) -> (n, d).

    out_i = sum_{j <= i} (phi_q_i . phi_k_j) v_j / sum_{j <= i} (phi_q_i . phi_k_j), with the n x n kernel matrix.
    """
    kernel = (phi_q @ phi_k.T).tril()  # (n, n)
    return (kernel @ v) / kernel.sum(dim=-1, keepdim=True)


def _read_before_update() -> str:
    return tr(
        "the output of token i leaves out token i itself: add phi_k v^T to s and phi_k to z first, then read the "
        "output from the updated state (a query attends to its own key; at token 0 the old state is all zeros)",
        "词元 i 的输出漏掉了词元 i 自己，要先把 phi_k v^T 加到 s 上、把 phi_k 加到 z 上，再从更新后的状态读出输出"
        "（查询也关注它自己的键；在词元 0 处，旧的状态全是 0）",
    )


def _step_mistakes(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> list[tuple[str, Tensor]]:
    kernel = (phi_q @ phi_k.T).tril()  # (n, n)
    return [
        (
            tr(
                "each output equals its own value v_i, so the state never carried over: return the updated s and z, "
                "and start each step from the state the previous step returned",
                "每个输出都等于它自己的值 v_i，说明状态没有传到下一步。要返回更新后的 s 和 z，"
                "并让每一步从上一步返回的状态开始",
            ),
            v.clone(),
        ),
        (
            tr(
                "the output is not normalised: divide phi_q^T s by phi_q . z (the sum of the kernel weights)",
                "输出没有归一化，要把 phi_q^T s 除以 phi_q . z（核权重之和）",
            ),
            kernel @ v,
        ),
        (
            tr(
                "z is not accumulated: it must be the running sum of every phi_k so far (z + phi_k), not the newest "
                "phi_k alone",
                "z 没有累加，它应是到目前为止所有 phi_k 的累加和（z + phi_k），而不只是最新的 phi_k",
            ),
            (kernel @ v) / kernel.diagonal()[:, None],
        ),
        (
            tr(
                "s is not accumulated: add phi_k v^T to the old s (s + phi_k v^T) instead of replacing it",
                "s 没有累加，要把 phi_k v^T 加到旧的 s 上（s + phi_k v^T），而不是用它替换 s",
            ),
            kernel.diagonal()[:, None] * v / kernel.sum(dim=-1, keepdim=True),
        ),
    ]


_STEP_CASES = ((6, 4, 3), (12, 8, 5), (1, 3, 2))  # n tokens, m features, d value dimension


def _check_step(fn: Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Step]) -> None:
    generator = torch.Generator().manual_seed(17)
    for n, m, d in _STEP_CASES:
        phi_q = torch.rand(n, m, generator=generator) + 0.1  # positive features, as Performer's
        phi_k = torch.rand(n, m, generator=generator) + 0.1
        v = torch.randn(n, d, generator=generator)
        what = tr(
            f"your steps over {n} token{'s' if n > 1 else ''} ({m} features, values of size {d})",
            f"在 {n} 个词元上逐步计算（{m} 个特征，值的维度为 {d}）时",
        )
        s, z = torch.zeros(m, d), torch.zeros(m)
        outputs = []
        for i in range(n):
            try:
                result = fn(s.clone(), z.clone(), phi_q[i].clone(), phi_k[i].clone(), v[i].clone())
            except RuntimeError as error:
                mistake = crash_hint(
                    error,
                    (m, d),
                    f"s has shape (m, d) = ({m}, {d}), one row per feature: add torch.outer(phi_k, v), not "
                    "torch.outer(v, phi_k), and read it as phi_q @ s.",
                    f"s 的形状是 (m, d) = ({m}, {d})，每个特征一行：要加的是 torch.outer(phi_k, v)，"
                    "不是 torch.outer(v, phi_k)；读出时用 phi_q @ s。",
                )
                if mistake is None:
                    raise
                raise mistake from error
            got = type(result).__name__
            expect(
                isinstance(result, (tuple, list)) and len(result) == 3,
                tr(
                    f"{what}: each step should return three tensors (s, z, out), got {got}",
                    f"{what}，每一步应返回三个张量 (s, z, out)，得到的是 {got}",
                ),
            )
            s, z, out = result
            expect_tensor(
                s,
                tr(f"{what}: the state s after token {i}", f"{what}，词元 {i} 之后的状态 s"),
                (m, d),
                tr("(m, d): one row per feature", "（即 (m, d)，每个特征一行）"),
            )
            expect_tensor(
                z,
                tr(f"{what}: the state z after token {i}", f"{what}，词元 {i} 之后的状态 z"),
                (m,),
                tr("(m,): the running sum of phi_k", "（即 (m,)，phi_k 的累加和）"),
            )
            expect_tensor(out, tr(f"{what}: the output of token {i}", f"{what}，词元 {i} 的输出"), (d,), "(d,)")
            outputs.append(out.detach())
        got = torch.stack(outputs)
        expected = causal_kernel_attention(phi_q, phi_k, v)
        if torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
            continue
        if not torch.isfinite(got[0]).all():
            hint = _read_before_update()
            raise ExerciseMistake(
                tr(f"{what}: token 0's output is not finite; {hint}.", f"{what}，词元 0 的输出不是有限值；{hint}。")
            )
        strict = (phi_q @ phi_k.T).tril(-1)  # (n, n): keys before the query only
        if n > 1 and torch.allclose(got[1:], (strict @ v)[1:] / strict.sum(-1, keepdim=True)[1:], atol=1e-5, rtol=1e-4):
            hint = _read_before_update()
            raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}，你的结果有误：{hint}。"))
        for hint, wrong in _step_mistakes(phi_q, phi_k, v):
            if torch.allclose(got, wrong, atol=1e-5, rtol=1e-4):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}，你的结果有误：{hint}。"))
        expect_close(got, expected, tr(f"{what}: the outputs, stacked", f"{what}，堆叠起来的输出"))


def check_linear_attention_step(fn: Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Step]) -> bool:
    """Exercise 13.3: ``fn(s, z, phi_q, phi_k, v)`` must return the new state (s, z) and the new token's output."""
    return report(LINEAR_ATTENTION_STEP, lambda: _check_step(fn))
