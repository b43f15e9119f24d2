"""Exercises of notebook 04 (scaled dot-product attention): their checkers and reference solutions.

4.1 ``check_attention(fn)``: ``fn(q, k, v)`` returns ``(output, weights)`` of softmax(Q K^T / sqrt(d_k)) V, for
    inputs with any number of leading dimensions, with a softmax written from ``torch.exp`` that survives scores in
    the hundreds.
4.2 ``check_attention_entropy(fn)``: ``fn(weights)`` returns the entropy (in nats) of every row of weights.
4.3 ``check_query_edit(fn)``: ``fn(w_q)`` returns the worked example's W_Q with at most two entries changed, so that
    "ate" gives more than half of its weight to "apple" and "he" splits its weight evenly between "Ming" and "apple".

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from ..language import display_name
from ._core import (
    Exercise,
    ExerciseMistake,
    expect,
    expect_close,
    expect_tensor,
    explain_shape_error,
    report,
    tr,
)

ATTENTION_FROM_SCRATCH = Exercise("4.1", "attention from scratch", "从零实现注意力")
ATTENTION_ENTROPY = Exercise("4.2", "attention entropy", "注意力熵")
QUERY_EDIT = Exercise("4.3", "redesign two queries", "重新设计两个查询")


def reference_attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 4.1.

    q: (..., len_q, d_k), k: (..., len_k, d_k), v: (..., len_k, d_v).
    Returns the output (..., len_q, d_v) and the weights (..., len_q, len_k).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., len_q, len_k)
    # softmax over the keys, written out; subtracting each row's largest score changes no weight (the factor
    # e^-max cancels) and keeps exp from overflowing: every exponent is <= 0, and the largest is exactly 0
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = exps / exps.sum(dim=-1, keepdim=True)  # each row sums to 1 over the keys
    return weights @ v, weights


def reference_attention_entropy(weights: Tensor) -> Tensor:
    """Reference solution of exercise 4.2.

    weights: (..., len_k), rows that sum to 1. Returns (...,): -sum_j w_j ln w_j, with 0 ln 0 counted as 0.
    """
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))  # ln 1 = 0 where the weight is 0
    return -(weights * torch.log(safe)).sum(dim=-1)


# --------------------------------------------------------------------------------------------- exercise 4.1
def _attention_inputs(leading: tuple[int, ...] = (2, 3), scale: float = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """len_q, len_k, d_k and d_v all differ, so a transposed matrix shows up as a wrong shape. ``leading`` are the
    dimensions in front, (batch, heads) by default. ``scale`` multiplies q and k: 10 gives scaled scores with a
    standard deviation of about 100, where exp overflows float32 (above 88.7)."""
    g = torch.Generator().manual_seed(4 + len(leading))
    q = torch.randn(*leading, 5, 8, generator=g) * scale
    k = torch.randn(*leading, 7, 8, generator=g) * scale
    v = torch.randn(*leading, 7, 6, generator=g)
    return q, k, v


def _transpose_hint() -> str:
    return tr(
        "`k.T` (and `k.t()`) reverse ALL the dimensions of a batched tensor, so the batch and head axes end up in the "
        "wrong places. Swap only the last two: `k.transpose(-2, -1)` (or `k.mT`).",
        "`k.T`（以及 `k.t()`）会把带批次维的张量的所有维度全部反转，于是批次轴和头轴落到了错误的位置。"
        "只交换最后两个维度：`k.transpose(-2, -1)`（或 `k.mT`）。",
    )


# What the exercise rules out: PyTorch's softmax in its spellings, and the attention functions that contain one.
_READY_MADE = {
    "softmax": "softmax",
    "special_softmax": "softmax",
    "log_softmax": "log_softmax",
    "scaled_dot_product_attention": "scaled_dot_product_attention",
    "multi_head_attention_forward": "nn.MultiheadAttention",
}


class _ReadyMadeSpy(TorchFunctionMode):
    """Records which of :data:`_READY_MADE` the code run under it calls (torch.softmax, F.softmax, x.softmax, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = _READY_MADE.get(getattr(func, "__name__", ""))
        if name is not None:
            self.used.add(name)
        return func(*args, **(kwargs or {}))


def _call(
    fn: Callable[[Tensor, Tensor, Tensor], object], q: Tensor, k: Tensor, v: Tensor, used: set[str] | None = None
) -> object:
    """Call the reader's function on copies of the inputs, without PyTorch's deprecation warning for `x.T` on a
    tensor that is not 2-D (the checker explains that slip itself). Adds to ``used`` the ready-made softmax or
    attention functions it called."""
    with warnings.catch_warnings(), _ReadyMadeSpy() as spy:
        warnings.filterwarnings("ignore", message=r".*use of `x\.T` on tensors.*")
        result = fn(q.clone(), k.clone(), v.clone())
    if used is not None:
        used |= spy.used
    return result


def _works_on_matrices(fn: Callable[[Tensor, Tensor, Tensor], object]) -> bool:
    """True if ``fn`` gives the right answer on plain 2-D inputs (len, d), where `k.T` is correct."""
    q, k, v = _attention_inputs(leading=())
    try:
        result = _call(fn, q, k, v)
    except Exception:
        return False
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, Tensor) for t in result)):
        return False
    out, weights = result
    expected_out, expected_weights = reference_attention(q, k, v)
    return (
        out.shape == expected_out.shape
        and weights.shape == expected_weights.shape
        and torch.allclose(out.detach(), expected_out, atol=1e-5)
        and torch.allclose(weights.detach(), expected_weights, atol=1e-5)
    )


def _check_attention_case(
    fn: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]],
    leading: tuple[int, ...],
    scale: float = 1.0,
    used: set[str] | None = None,
) -> None:
    q, k, v = _attention_inputs(leading, scale)
    result = _call(fn, q, k, v, used)
    got = type(result).__name__
    expect(
        isinstance(result, tuple) and len(result) == 2,
        tr(f"return a tuple (output, weights), got {got}", f"应返回元组 (output, weights)，得到的是 {got}"),
    )
    out, weights = result
    expected_out, expected_weights = reference_attention(q, k, v)
    if (
        isinstance(out, Tensor)
        and isinstance(weights, Tensor)
        and out.shape == expected_weights.shape != expected_out.shape
        and weights.shape == expected_out.shape
    ):
        raise ExerciseMistake(
            tr(
                "you returned (weights, output); return (output, weights)",
                "返回顺序反了：应先返回输出，再返回权重，即 (output, weights)",
            )
        )
    got = type(weights).__name__
    expect(
        isinstance(weights, Tensor),
        tr(f"weights should be a torch.Tensor, got {got}", f"权重应是 torch.Tensor，得到的是 {got}"),
    )
    shape, expected_shape = tuple(weights.shape), tuple(expected_weights.shape)
    expect(
        shape == expected_shape,
        tr(
            f"weights have shape {shape}, expected (..., len_q, len_k) = {expected_shape}",
            f"权重的形状是 {shape}，应为 (..., len_q, len_k) = {expected_shape}。",
        ),
    )
    w = weights.detach().double()
    if not w.isfinite().all():
        raise ExerciseMistake(
            tr(
                f"some weights are NaN or inf for scores in the hundreds (q and k times {scale:g}). torch.exp "
                "overflows to inf above 88.7 in float32 (and inf / inf is NaN), and a row whose exps all underflow "
                "to 0 gives 0 / 0. Subtract each row's own largest score before exp, "
                "`scores.amax(dim=-1, keepdim=True)`: the weights do not change, and the largest exponent becomes "
                "exactly 0.",
                f"分数达到数百时（q 和 k 乘以 {scale:g}），有些权重是 NaN 或 inf。在 float32 中，torch.exp 的输入超过 "
                "88.7 就会溢出为 inf（而 inf / inf 是 NaN）；一行的 exp 若全部下溢为 0，就得到 0 / 0。"
                "在 exp 之前，先减去每一行自己的最大分数 `scores.amax(dim=-1, keepdim=True)`：权重不会改变，"
                "而最大的指数恰好变成 0。",
            )
        )
    if not torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-4):
        if torch.allclose(w.sum(-2), torch.ones_like(w.sum(-2)), atol=1e-4):
            raise ExerciseMistake(
                tr(
                    "the columns of your weights sum to 1, not the rows: take the softmax over dim=-1.",
                    "你的权重是每一列之和为 1，而不是每一行：应在 dim=-1 上做 softmax。",
                )
            )
        raise ExerciseMistake(
            tr(
                "every row of the weights should sum to 1 (softmax over the keys, dim=-1).",
                "权重的每一行之和都应为 1（在键上做 softmax，dim=-1）。",
            )
        )
    raw = q.double() @ k.double().transpose(-2, -1)
    d_k = q.shape[-1]
    hints = [
        (
            torch.softmax(raw, -1),
            tr("divide the scores by sqrt(d_k) before the softmax.", "在 softmax 之前要把分数除以 sqrt(d_k)。"),
        ),
        (torch.softmax(raw / d_k, -1), tr("divide by sqrt(d_k), not by d_k.", "应除以 sqrt(d_k)，而不是 d_k。")),
        (
            torch.softmax(raw * math.sqrt(d_k), -1),
            tr("divide the scores by sqrt(d_k); you multiplied.", "应把分数除以 sqrt(d_k)；你却乘了它。"),
        ),
    ]
    for wrong, hint in hints:
        if torch.allclose(w, wrong, atol=1e-5):
            raise ExerciseMistake(tr(f"the weights are not scaled right: {hint}", f"权重的缩放不对：{hint}"))
    expect_close(weights, expected_weights, tr("weights", "权重"))
    expect_close(out, expected_out, tr("output (weights @ v)", "输出（weights @ v）"))


def _check_attention(fn: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]) -> None:
    cases = [
        ((2, 3), 1.0, tr("inputs of shape (batch, heads, len, d)", "形状为 (batch, heads, len, d) 的输入")),
        ((4,), 1.0, tr("inputs of shape (batch, len, d)", "形状为 (batch, len, d) 的输入")),
        ((2, 3), 10.0, tr("inputs whose scores are in the hundreds", "分数达到数百的输入")),
    ]
    used: set[str] = set()  # ready-made functions the answer called: refused once its numbers are right
    for number, (leading, scale, what) in enumerate(cases):
        try:
            _check_attention_case(fn, leading, scale, used)
        except (RuntimeError, IndexError) as error:  # a shape error inside the reader's code
            name = type(error).__name__
            if _works_on_matrices(fn):
                raise ExerciseMistake(
                    tr(
                        f"Your code is right for 2-D matrices (len, d) but raised {name} on {what}. ",
                        f"你的代码对二维矩阵 (len, d) 是对的，但在{what}上抛出了 {name}。",
                    )
                    + _transpose_hint()
                ) from error
            if "must match the size" in str(error):  # most often a row max or row sum without keepdim
                raise ExerciseMistake(
                    tr(
                        f"two shapes do not broadcast on {what} ({error}). A row's max and sum lose the reduced "
                        "dimension unless you keep it: `scores.amax(dim=-1, keepdim=True)` and "
                        "`exps.sum(dim=-1, keepdim=True)` have shape (..., len_q, 1), which broadcasts over the keys.",
                        f"在{what}上，{explain_shape_error(error)}。每一行的最大值和总和会丢掉被归约的维度，"
                        "除非你保留它：`scores.amax(dim=-1, keepdim=True)` 和 `exps.sum(dim=-1, keepdim=True)` "
                        "的形状是 (..., len_q, 1)，能在键上广播。",
                    )
                ) from error
            if number == 1:  # the 4-D case passed: the dims were counted from the front
                raise ExerciseMistake(
                    tr(
                        f"Your code works on (batch, heads, len, d) but raised {name} on {what}: "
                        "count the dimensions from the end, `k.transpose(-2, -1)` and `softmax(dim=-1)`, so that any "
                        "number of leading dimensions works.",
                        f"你的代码在 (batch, heads, len, d) 上能运行，但在{what}上抛出了 {name}：要从末尾数维度，"
                        "用 `k.transpose(-2, -1)` 和 `softmax(dim=-1)`，这样前面有多少个维度都能工作。",
                    )
                ) from error
            raise
    if used:
        raise ExerciseMistake(
            tr(
                f"the numbers are right, but your code calls PyTorch's {', '.join(sorted(used))}: the exercise asks "
                "for your own softmax, written with torch.exp and plain tensor arithmetic",
                f"数值是对的，但你的代码调用了 PyTorch 的 {'、'.join(sorted(used))}：本练习要你自己写 softmax，"
                "只用 torch.exp 和基本的张量运算",
            )
        )


def check_attention(fn: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 4.1: ``fn(q, k, v)`` must return (output, weights) of scaled dot-product attention, also for
    scores in the hundreds."""
    return report(ATTENTION_FROM_SCRATCH, lambda: _check_attention(fn))


# --------------------------------------------------------------------------------------------- exercise 4.2
def _entropy_cases() -> list[tuple[str, Tensor]]:
    g = torch.Generator().manual_seed(5)
    return [
        (tr("a uniform row of 4 weights", "均匀的一行（4 个权重）"), torch.full((4,), 0.25)),
        (tr("a one-hot row [0, 1, 0]", "独热的一行（[0, 1, 0]）"), torch.tensor([0.0, 1.0, 0.0])),
        (
            tr("a batch of shape (2, 3, 4, 5)", "形状为 (2, 3, 4, 5) 的一批权重"),
            torch.softmax(torch.randn(2, 3, 4, 5, generator=g) * 2, dim=-1),
        ),
        (
            tr("rows with some zero weights", "含有零权重的行"),
            torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.7, 0.0, 0.2, 0.1]]),
        ),
    ]


def _check_entropy(fn: Callable[[Tensor], Tensor]) -> None:
    for what, weights in _entropy_cases():
        out = fn(weights.clone())
        expected = reference_attention_entropy(weights)
        label = tr(f"the entropy of {what}", f"{what}的熵")
        expect_tensor(
            out,
            label,
            expected.shape,
            tr("(one value per row: sum over the last dim only)", "（每行一个值：只对最后一维求和）"),
        )
        o = out.detach().double()
        e = expected.double()
        expect(
            not torch.isnan(o).any().item(),
            tr(
                f"{label} contains NaN: count 0 * ln 0 as 0 (mask the zeros).",
                f"对{what}，你算出的熵含有 NaN：要把 0 * ln 0 记为 0（把为 0 的权重屏蔽掉）。",
            ),
        )
        if torch.allclose(o, -e, atol=1e-5) and e.abs().max() > 1e-3:
            raise ExerciseMistake(
                tr(
                    f"{label} is negative: entropy is -sum w ln w (mind the minus sign).",
                    f"对{what}，你算出的熵是负的：熵是 -sum w ln w（注意负号）。",
                )
            )
        if torch.allclose(o, e / math.log(2), atol=1e-5) and e.abs().max() > 1e-3:
            raise ExerciseMistake(
                tr(
                    f"{label} is in bits: use the natural log (torch.log), so the unit is nats.",
                    f"对{what}，你算出的熵以比特为单位：要用自然对数（torch.log），单位才是奈特（nats）。",
                )
            )
        expect_close(out, expected, label)


def check_attention_entropy(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 4.2: ``fn(weights)`` must return the entropy in nats of each row of ``weights`` (..., len_k)."""
    return report(ATTENTION_ENTROPY, lambda: _check_entropy(fn))


# --------------------------------------------------------------------------------------------- exercise 4.3
EXAMPLE_TOKENS = ["Ming", "bought", "an", "apple", "he", "ate", "it"]
EXAMPLE_FEATURES = ["person", "thing", "action", "article", "seeks person", "seeks thing"]
EXAMPLE_SPACE = ["person", "thing", "action"]


def worked_example() -> tuple[Tensor, Tensor, Tensor]:
    """The hand-set example of notebook 04, section 3: X (7 tokens, 6 features), W_Q and W_K (6, 3)."""
    x = torch.zeros(len(EXAMPLE_TOKENS), len(EXAMPLE_FEATURES))
    for token, feature in (
        ("Ming", "person"),
        ("bought", "action"),
        ("an", "article"),
        ("apple", "thing"),
        ("he", "seeks person"),
        ("ate", "action"),
        ("it", "seeks thing"),
    ):
        x[EXAMPLE_TOKENS.index(token), EXAMPLE_FEATURES.index(feature)] = 1.0
    w_k = torch.zeros(6, 3)
    w_k[0, 0] = w_k[1, 1] = w_k[2, 2] = 1.0  # a person/thing/action offers itself as one
    w_q = torch.zeros(6, 3)
    w_q[4, 0] = 5.0  # "seeks person" looks for a person
    w_q[5, 1] = 5.0  # "seeks thing" looks for a thing
    w_q[0, 2] = w_q[1, 2] = 2.0  # nouns look (weakly) for an action
    w_q[2, 1] = 2.0  # actions look (weakly) for a thing
    return x, w_q, w_k


def example_weights(w_q: Tensor) -> Tensor:
    """The worked example's attention weights (7, 7) with the queries made by ``w_q`` (6, 3)."""
    x, _, w_k = worked_example()
    q, k = x @ w_q, x @ w_k
    return torch.softmax(q @ k.T / math.sqrt(k.shape[-1]), dim=-1)


def reference_query_edit(w_q: Tensor) -> Tensor:
    """Reference solution of exercise 4.3: two entries of W_Q (6 features, 3 query dimensions) changed.

    "ate" has only the feature "action", so its query is the row "action" of W_Q: making that row seek a thing as
    strongly as a pronoun does (5 instead of 2) gives "apple" 0.75 of its weight. "he" has only "seeks person":
    making that row seek a thing as strongly as a person gives "Ming" and "apple" equal scores.
    """
    w_q = w_q.clone()
    w_q[EXAMPLE_FEATURES.index("action"), EXAMPLE_SPACE.index("thing")] = 5.0
    w_q[EXAMPLE_FEATURES.index("seeks person"), EXAMPLE_SPACE.index("thing")] = 5.0
    return w_q


def _check_query_edit(fn: Callable[[Tensor], Tensor]) -> None:
    _, original, _ = worked_example()
    given = original.clone()
    new = fn(given)
    expect(
        new is not None,
        tr(
            "Return the edited W_Q (a tensor of shape (6, 3)); your function returned None.",
            "要返回修改后的 W_Q（形状为 (6, 3) 的张量）；你的函数返回了 None。",
        ),
    )
    expect(
        torch.equal(given, original),
        tr(
            "your function changed the W_Q it was given: edit a copy (w_q = w_q.clone()) and return that, so the "
            "notebook's W_Q stays as it is.",
            "你的函数改动了传入的 W_Q：请修改一个副本（w_q = w_q.clone()）并返回它，这样笔记本里的 W_Q 保持不变。",
        ),
    )
    expect_tensor(
        new,
        tr("your W_Q", "你的 W_Q"),
        original.shape,
        tr("(6 features, 3 query dimensions)", "（6 个特征，3 个查询维度）"),
    )
    changed = (new.detach() != original).nonzero().tolist()
    expect(
        len(changed) <= 2,
        tr(
            f"You changed {len(changed)} entries of W_Q; two are enough (one per goal). Changed (feature, dim): ",
            f"你改动了 W_Q 的 {len(changed)} 个元素；两个就够了（每个目标一个）。改动的（特征，维度）：",
        )
        + ", ".join(f"({display_name(EXAMPLE_FEATURES[i])!r}, {display_name(EXAMPLE_SPACE[j])!r})" for i, j in changed),
    )
    tok = EXAMPLE_TOKENS.index
    # the features as the notebook's tables show them (in Chinese: 人, 动作, 找人, ...)
    person, thing, action, seeks_person = map(display_name, ("person", "thing", "action", "seeks person"))
    w, before = example_weights(new.detach().float()), example_weights(original)
    ate_apple, ate_apple_before = w[tok("ate"), tok("apple")].item(), before[tok("ate"), tok("apple")].item()
    he_ming, he_apple = w[tok("he"), tok("Ming")].item(), w[tok("he"), tok("apple")].item()
    if ate_apple <= 0.5:
        more = tr("more than before, but ", "比之前多，但") if ate_apple > ate_apple_before + 1e-6 else ""
        raise ExerciseMistake(
            tr(
                f"'ate' gives {ate_apple:.2f} of its weight to 'apple', {more}not more than half. 'ate' has only the "
                "feature 'action', so its query is the row 'action' of W_Q. Against six scores of 0, a scaled score "
                "a = entry / sqrt(3) gets the weight e^a / (e^a + 6), so a must exceed ln 6 = 1.79.",
                f"'ate' 分给 'apple' 的权重是 {ate_apple:.2f}，{more}没有超过一半。'ate' 只有特征“{action}”，"
                f"所以它的查询就是 W_Q 的“{action}”这一行。其余六个分数都是 0。设这一行中相应的元素为 w，"
                "则缩放后的分数为 a = w / sqrt(3)，对应的权重为 e^a / (e^a + 6)，所以 a 必须大于 ln 6 = 1.79。",
            )
        )
    if abs(he_ming - he_apple) >= 0.01:
        raise ExerciseMistake(
            tr(
                f"'he' gives {he_ming:.2f} to 'Ming' and {he_apple:.2f} to 'apple'. Equal weights need equal scores: "
                "the row 'seeks person' (the only feature of 'he') must seek a thing exactly as strongly as a person.",
                f"'he' 分给 'Ming' {he_ming:.2f}，分给 'apple' {he_apple:.2f}。权重相等需要分数相等："
                f"“{seeks_person}”这一行（'he' 唯一的特征）寻找“{thing}”的强度必须与寻找“{person}”的完全相同。",
            )
        )
    if he_ming + he_apple <= 0.5:
        raise ExerciseMistake(
            tr(
                f"'he' gives 'Ming' and 'apple' {he_ming:.2f} each, together not more than half: it spreads its "
                "weight over the other tokens too. Keep it looking for a person and make it look for a thing as "
                "strongly.",
                f"'he' 分给 'Ming' 和 'apple' 各 {he_ming:.2f}，合起来没有超过一半：它把权重也分散到了其他词元上。"
                f"让它继续寻找“{person}”，并以同样的强度寻找“{thing}”。",
            )
        )


def check_query_edit(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 4.3: ``fn(w_q)`` must return W_Q with at most two entries changed so that "ate" gives more than half
    its weight to "apple", "he" splits its weight evenly between "Ming" and "apple" (together more than half)."""
    return report(QUERY_EDIT, lambda: _check_query_edit(fn))
