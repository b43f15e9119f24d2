"""Exercises of notebook 06 (masks): their checkers and reference solutions.

6.1 ``check_causal_additive_mask(fn)``: ``fn(len_q, len_k)`` returns the (len_q, len_k) additive causal mask for
    queries that are the last len_q of len_k positions: 0 where a query may look, -inf at the keys after it.
6.2 ``check_padding_mask_from_lengths(fn)``: ``fn(lengths, max_len)`` returns the bool padding mask
    (batch, 1, 1, max_len), ``True`` at real tokens.
6.3 ``check_masked_softmax(fn)``: ``fn(scores, mask)`` returns softmax weights that ignore masked keys and are all
    zero in a row whose keys are all masked (no NaN, no uniform row), in float32 and in float16.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..core.masks import causal_mask
from ._core import Exercise, ExerciseMistake, expect, expect_close, expect_tensor, explain_shape_error, report, tr

CAUSAL_ADDITIVE_MASK = Exercise("6.1", "a causal mask for the last queries", "最后几个查询的因果掩码")
PADDING_MASK_FROM_LENGTHS = Exercise("6.2", "padding mask from lengths", "由长度生成填充掩码")
MASKED_SOFTMAX = Exercise("6.3", "a softmax that survives fully masked rows", "能处理全屏蔽行的 softmax")


def reference_causal_additive_mask(len_q: int, len_k: int) -> Tensor:
    """Reference solution of exercise 6.1.

    The queries are the last ``len_q`` of ``len_k`` positions: query row i sits at position len_k - len_q + i.
    Returns a float (len_q, len_k) tensor: M[i, j] = 0 for j <= len_k - len_q + i (the past and the present of
    that query), -inf for the keys after it. With len_q = len_k it is the square mask of section 3.
    """
    offset = len_k - len_q  # how many positions came before the first query
    future = torch.ones(len_q, len_k, dtype=torch.bool).triu(diagonal=offset + 1)  # True where j > offset + i
    return torch.zeros(len_q, len_k).masked_fill(future, float("-inf"))


def reference_padding_mask_from_lengths(lengths: Tensor, max_len: int) -> Tensor:
    """Reference solution of exercise 6.2.

    lengths: (batch,) number of real tokens per sequence. Returns bool (batch, 1, 1, max_len), ``True`` at the
    positions 0 .. length - 1 (real tokens), ``False`` at the padding.
    """
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def reference_masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Reference solution of exercise 6.3.

    scores: (..., len_q, len_k); mask: bool, broadcastable to scores, ``True`` = may attend.
    Returns weights of the scores' shape: each row sums to 1 over its visible keys, or is all zeros if it has none.
    """
    mask = mask.expand_as(scores)
    empty = ~mask.any(dim=-1, keepdim=True)  # rows with nothing to look at
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)  # no all -inf row, so no 0/0
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)


# --------------------------------------------------------------------------------------------- exercise 6.1
def _top_left(len_q: int, len_k: int) -> Tensor:
    """The likeliest slip: the square rule j > i applied to a rectangle, as if the queries were the FIRST ones."""
    return torch.zeros(len_q, len_k).masked_fill(torch.ones(len_q, len_k, dtype=torch.bool).triu(1), float("-inf"))


def _called(fn: Callable, default: str) -> str:
    """The name the learner gave ``fn`` (a lambda has none: then ``default``), for the feedback's labels."""
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else default


def _check_causal(fn: Callable[[int, int], Tensor]) -> None:
    for len_q, len_k in ((3, 3), (1, 1), (6, 6), (2, 5), (1, 4), (3, 7)):
        out = fn(len_q, len_k)
        label = f"{_called(fn, 'causal_additive_mask')}({len_q}, {len_k})"
        got = type(out).__name__
        expect(
            isinstance(out, Tensor),
            tr(f"{label} should be a torch.Tensor, got {got}", f"{label} 应是 torch.Tensor，得到的是 {got}"),
        )
        expect(
            out.dtype.is_floating_point,
            tr(
                f"{label} has dtype {out.dtype}: an additive mask holds floats, 0.0 and float('-inf') "
                "(True/False is the other, boolean convention).",
                f"{label} 的 dtype 是 {out.dtype}：加性掩码存的是浮点数 0.0 和 float('-inf')"
                "（True/False 是另一种约定，即布尔掩码）。",
            ),
        )
        if len_q != len_k and tuple(out.shape) == (len_k, len_q):
            raise ExerciseMistake(
                tr(
                    f"{label} has shape ({len_k}, {len_q}): one row per query, (len_q, len_k).",
                    f"{label} 的形状是 ({len_k}, {len_q})：应是每个查询一行，即 (len_q, len_k)。",
                )
            )
        expect(
            tuple(out.shape) == (len_q, len_k),
            tr(
                f"{label} has shape {tuple(out.shape)}, expected ({len_q}, {len_k})",
                f"{label} 的形状是 {tuple(out.shape)}，应为 ({len_q}, {len_k})。",
            ),
        )
        expected = reference_causal_additive_mask(len_q, len_k)
        o = out.detach().cpu().double()
        if torch.equal(o, expected.double()):
            continue
        offset = len_k - len_q
        row_pos = f"{offset} + i" if offset else "i"  # the position of query row i, as the hints write it
        own = o[torch.arange(len_q), torch.arange(len_q) + offset]  # each query's own position
        if len_q == len_k and len_q > 1 and torch.equal(o, expected.T.double()):
            raise ExerciseMistake(
                tr(
                    f"{label} is transposed: row i is the query, so -inf belongs ABOVE the diagonal "
                    "(j > i, the future), 0 on and below it.",
                    f"{label} 转置了：第 i 行是查询，所以 -inf 应在对角线上方（j > i，即未来），对角线上及其下方为 0。",
                )
            )
        if o.numel() > 1 and o.isinf().all():
            raise ExerciseMistake(
                tr(
                    f"{label} blocks everything; only the keys after each query should be -inf.",
                    f"{label} 把所有位置都屏蔽了；只有每个查询之后的键才应是 -inf。",
                )
            )
        if len_q != len_k and torch.equal(o, _top_left(len_q, len_k).double()):
            raise ExerciseMistake(
                tr(
                    f"{label} treats the queries as the FIRST {len_q} positions. They are the LAST {len_q} of "
                    f"{len_k}: query row i sits at position {row_pos} and may see every key up to that one. Shift the "
                    "diagonal: torch.triu(..., diagonal=...) takes it as an argument.",
                    f"{label} 把查询当成了最前面的 {len_q} 个位置。它们其实是 {len_k} 个位置中最后的 "
                    f"{len_q} 个：查询行 i 位于位置 {row_pos}，可以看到直到这个位置为止的每一个键。"
                    "要把对角线右移，用 torch.triu(..., diagonal=...) 的 diagonal 参数。",
                )
            )
        if torch.equal(o.isinf(), ~expected.isinf()):
            raise ExerciseMistake(
                tr(
                    f"{label} is inverted: it blocks the keys a query may see and keeps the ones after it. 0 goes "
                    f"where j <= {row_pos}, -inf where j > {row_pos}.",
                    f"{label} 反了：它屏蔽了查询可以看的键，却保留了查询之后的键。j <= {row_pos} 处应为 0，"
                    f"j > {row_pos} 处为 -inf。",
                )
            )
        if torch.isinf(own).any():
            raise ExerciseMistake(
                tr(
                    f"{label} blocks a query's own position (row i, column {row_pos}): a position may attend to "
                    "itself, only the keys after it are -inf (one more than the diagonal you used).",
                    f"{label} 屏蔽了查询自己的位置（第 i 行，第 {row_pos} 列）：一个位置可以关注它自己，"
                    "只有它之后的键才是 -inf（对角线要比你用的再往后一格）。",
                )
            )
        visible = ~torch.ones(len_q, len_k, dtype=torch.bool).triu(offset + 1)
        if (~visible).any() and torch.isfinite(o[~visible]).all() and (o[~visible] < -1e3).all():
            raise ExerciseMistake(
                tr(
                    f"{label} uses a large finite number for the blocked keys; the additive mask uses exactly -inf "
                    "(finite stand-ins like -1e9 overflow in float16 and behave differently on fully masked rows).",
                    f"{label} 对被屏蔽的键用了一个很大的有限数；加性掩码要用的正是 -inf（像 -1e9 这样的有限替代值"
                    "在 float16 中会溢出，而且遇到全屏蔽行时表现不同）。",
                )
            )
        if (~visible).any() and (o[visible] == 1).all() and (o[~visible] == 0).all():
            raise ExerciseMistake(
                tr(
                    f"{label} is a 1/0 multiplier; the additive mask is 0 (keep) and -inf (block).",
                    f"{label} 是 1/0 的乘性掩码；加性掩码是 0（保留）和 -inf（屏蔽）。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{label} is not 0 where query i may look (keys j <= {row_pos}) and -inf at the keys after it.",
                f"{label} 不对：查询 i 可以看的地方（键 j <= {row_pos}）应为 0，之后的键应为 -inf。",
            )
        )


def check_causal_additive_mask(fn: Callable[[int, int], Tensor]) -> bool:
    """Exercise 6.1: ``fn(len_q, len_k)`` must return the (len_q, len_k) float mask with 0 for j <= len_k - len_q + i
    and -inf for the keys after that."""
    return report(CAUSAL_ADDITIVE_MASK, lambda: _check_causal(fn))


# --------------------------------------------------------------------------------------------- exercise 6.2
def _padding_cases() -> list[tuple[Tensor, int]]:
    return [(torch.tensor([3, 1, 4]), 5), (torch.tensor([2, 2]), 2), (torch.tensor([0, 6]), 6)]


def _check_padding(fn: Callable[[Tensor, int], Tensor]) -> None:
    for lengths, max_len in _padding_cases():
        try:
            out = fn(lengths.clone(), max_len)
        except RuntimeError as error:
            if "must match the size" in str(error):
                raise ExerciseMistake(
                    tr(
                        f"the lengths {lengths.tolist()} and the positions 0 .. {max_len - 1} did not broadcast "
                        f"({error}). Give them different axes: compare torch.arange(max_len)[None, :], shape "
                        "(1, max_len), with lengths[:, None], shape (batch, 1), to get a (batch, max_len) table.",
                        f"长度 {lengths.tolist()} 和位置 0 .. {max_len - 1} 放在了同一个轴上："
                        f"{explain_shape_error(error)}。要让它们位于不同的轴："
                        "把形状为 (1, max_len) 的 torch.arange(max_len)[None, :] 与形状为 (batch, 1) 的 "
                        "lengths[:, None] 比较，得到一张 (batch, max_len) 的表。",
                    )
                ) from error
            raise
        label = tr(
            f"the mask for lengths {lengths.tolist()} and max_len {max_len}",
            f"长度为 {lengths.tolist()}、max_len 为 {max_len} 时的掩码",
        )
        expected = reference_padding_mask_from_lengths(lengths, max_len)
        got = type(out).__name__
        expect(
            isinstance(out, Tensor),
            tr(f"{label} should be a torch.Tensor, got {got}", f"{label}应是 torch.Tensor，得到的是 {got}"),
        )
        expect(
            out.dtype == torch.bool,
            tr(
                f"{label} has dtype {out.dtype}; return a bool mask (True = may attend)",
                f"{label}的 dtype 是 {out.dtype}；要返回布尔掩码（True = 可以关注）。",
            ),
        )
        batch = lengths.shape[0]
        if tuple(out.shape) == (batch, max_len):
            raise ExerciseMistake(
                tr(
                    f"{label} has shape {tuple(out.shape)}; add two axes to get (batch, 1, 1, max_len), which "
                    "broadcasts over heads and queries against scores (batch, heads, len_q, len_k).",
                    f"{label}的形状是 {tuple(out.shape)}；要再加两个轴得到 (batch, 1, 1, max_len)，"
                    "这样它与分数 (batch, heads, len_q, len_k) 运算时才能在头和查询上广播。",
                )
            )
        expect(
            tuple(out.shape) == tuple(expected.shape),
            tr(
                f"{label} has shape {tuple(out.shape)}, expected (batch, 1, 1, max_len) = {tuple(expected.shape)}",
                f"{label}的形状是 {tuple(out.shape)}，应为 (batch, 1, 1, max_len) = {tuple(expected.shape)}。",
            ),
        )
        if torch.equal(out, expected):
            continue
        if torch.equal(out, ~expected):
            raise ExerciseMistake(
                tr(
                    f"{label} is inverted: True should mark the real tokens (may attend), not pads.",
                    f"{label}反了：True 应标出真实词元（可以关注），而不是填充。",
                )
            )
        positions = torch.arange(max_len)
        if torch.equal(out, (positions[None, :] <= lengths[:, None])[:, None, None, :]):
            raise ExerciseMistake(
                tr(
                    f"{label} keeps one pad too many: position p is real when p < length (not <=).",
                    f"{label}多保留了一个填充：位置 p 是真实词元的条件是 p < length（不是 <=）。",
                )
            )
        expect(
            torch.equal(out, expected),
            tr(
                f"{label} is wrong: True exactly at positions 0 .. length - 1",
                f"{label}不对：应恰好在位置 0 .. length - 1 处为 True",
            ),
        )


def check_padding_mask_from_lengths(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 6.2: ``fn(lengths, max_len)`` must return the bool (batch, 1, 1, max_len) mask, True at real tokens."""
    return report(PADDING_MASK_FROM_LENGTHS, lambda: _check_padding(fn))


# --------------------------------------------------------------------------------------------- exercise 6.3
def _softmax_cases() -> list[tuple[str, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(63)
    causal = causal_mask(4)
    lengths = torch.tensor([4, 2])
    padding = reference_padding_mask_from_lengths(lengths, 4)
    left_padded = torch.tensor([[False, False, True, True]])[:, None, None, :] & causal  # rows 0, 1 see nothing
    empty_row = torch.ones(3, 5, dtype=torch.bool)
    empty_row[1] = False
    return [
        (tr("a causal mask", "因果掩码"), torch.randn(2, 3, 4, 4, generator=g), causal),
        (
            tr("a padding mask (batch, 1, 1, len_k)", "填充掩码 (batch, 1, 1, len_k) "),
            torch.randn(2, 3, 4, 4, generator=g),
            padding,
        ),
        (
            tr("a left-padded causal mask with fully masked rows", "左侧填充的因果掩码（含全屏蔽行）"),
            torch.randn(1, 2, 4, 4, generator=g) * 3,
            left_padded,
        ),
        (
            tr("a (3, 5) mask whose row 1 is all False", "第 1 行全为 False 的 (3, 5) 掩码"),
            torch.randn(3, 5, generator=g),
            empty_row,
        ),
        (
            tr("half-precision (float16) scores and fully masked rows", "半精度（float16）分数与含全屏蔽行的掩码"),
            (torch.randn(1, 2, 4, 4, generator=g) * 3).half(),
            left_padded,
        ),
    ]


def _check_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    for what, scores, mask in _softmax_cases():
        half = scores.dtype == torch.float16
        try:
            out = fn(scores.clone(), mask.clone())
        except RuntimeError as error:
            if half and "overflow" in str(error):
                raise ExerciseMistake(
                    tr(
                        f'on {what}, your code raised "{error}". float16 holds nothing beyond +-65504, so a '
                        "finite stand-in like -1e9 cannot even be stored (section 6). Fill with float('-inf') and "
                        "handle the rows that have no visible key, or use torch.finfo(scores.dtype).min.",
                        f"在{what}上，你的代码抛出了“{error}”。float16 存不下绝对值超过 65504 的数，"
                        "所以像 -1e9 这样的有限替代值根本存不进去（第 6 节）。要用 float('-inf') 填充，"
                        "并处理没有可见键的行，或者改用 torch.finfo(scores.dtype).min。",
                    )
                ) from error
            raise
        label = tr(f"the weights for {what}", f"{what}下的权重")
        expected = reference_masked_softmax(scores.float(), mask)  # float16 scores: compared in float32
        tolerance = 2e-3 if half else 1e-5  # float16 keeps about 3 significant digits
        expect_tensor(out, label, expected.shape, tr("(the scores' shape)", "（与分数的形状相同）"))
        o = out.detach().double()
        full_mask = mask.expand_as(scores)
        empty = ~full_mask.any(dim=-1)
        expect(
            not torch.isnan(o).any().item(),
            tr(
                f"{label} contain NaN: a row whose keys are all masked is softmax over only -inf (0/0). "
                "Give such rows finite scores first, then zero their weights.",
                f"{label}含有 NaN：全屏蔽行是在全为 -inf 的分数上做 softmax（0/0）。"
                "要先给这样的行有限的分数，再把它们的权重清零。",
            ),
        )
        if empty.any():
            rows = o[empty]
            if torch.allclose(rows, torch.full_like(rows, 1.0 / scores.shape[-1]), atol=1e-6):
                raise ExerciseMistake(
                    tr(
                        f"{label}: a fully masked row came out uniform (1/len_k each), which is what a -1e9 fill "
                        "does; it spreads the attention over keys the row must not see. It should be all zeros.",
                        f"{label}：全屏蔽行得到的是均匀分布（每个都是 1/len_k），用 -1e9 填充就会这样；"
                        "它把注意力分散到了这一行不该看到的键上。这一行应全为 0。",
                    )
                )
        if (o[full_mask.logical_not()].abs() > 1e-6).any():
            if torch.allclose(o, reference_masked_softmax(scores, ~mask.expand_as(scores)).double(), atol=1e-6):
                raise ExerciseMistake(
                    tr(
                        f"{label} use the inverted mask: True means MAY attend.",
                        f"{label}用的是反过来的掩码：这里 True 表示可以关注。",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"{label} give weight to masked keys; those weights must be exactly 0.",
                    f"{label}给被屏蔽的键分了权重；这些权重必须恰好为 0。",
                )
            )
        sums = o.sum(-1)[~empty]
        if not torch.allclose(sums, torch.ones_like(sums), atol=5 * tolerance):
            raise ExerciseMistake(
                tr(
                    f"{label}: rows with visible keys do not sum to 1. Mask the scores (with -inf) BEFORE the "
                    "softmax, over the last dim; zeroing weights after it leaves rows that sum to less than 1.",
                    f"{label}：有可见键的行之和不为 1。要在 softmax（在最后一维上做）之前，先用 -inf 屏蔽分数；"
                    "在 softmax 之后再把权重清零，会让行之和小于 1。",
                )
            )
        expect_close(out, expected, label, atol=tolerance, rtol=0.0 if half else 1e-4)


def check_masked_softmax(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 6.3: ``fn(scores, mask)`` must return masked softmax weights with all-zero fully masked rows."""
    return report(MASKED_SOFTMAX, lambda: _check_softmax(fn))
