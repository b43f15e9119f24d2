"""Exercises of notebook 03 (positional encoding): their checkers and reference solutions.

3.1 ``check_read_position(fn)``: ``fn(row)`` reads the position back from one row PE(pos) of the sinusoidal table.
3.2 ``check_halves_rotation(fn)``: ``fn(k, d_model)`` builds the shift matrix for the table laid out as all sines
    first, then all cosines: M_k [sin; cos](pos) = [sin; cos](pos + k).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
from torch import Tensor

from ..core.positional import sinusoidal_table
from ._core import Exercise, ExerciseMistake, expect_close, expect_tensor, report, tr

READ_POSITION = Exercise("3.1", "read the position back", "把位置读回来")
HALVES_ROTATION = Exercise("3.2", "the shift matrix, sines first", "正弦在前的位移矩阵")

BASE = 10000.0


def _frequencies(d_model: int, base: float = BASE, dtype: torch.dtype = torch.float64) -> Tensor:
    """omega_i = base^(-2i / d_model) for i = 0 .. d_model/2 - 1; returns (d_model // 2,)."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    return torch.exp(-two_i / d_model * math.log(base))


def reference_read_position(row: Tensor) -> int:
    """Reference solution of exercise 3.1. row: (d_model,), PE(pos) for a whole number 0 <= pos < 10000.

    The slowest pair (columns d_model - 2 and d_model - 1) turns by less than half a circle over 10000 positions
    whenever d_model >= 32, so its angle, read with atan2 from its sine and cosine, is pos * omega and never wraps.
    """
    d_model = row.shape[-1]
    omega_last = _frequencies(d_model)[-1].item()
    angle = torch.atan2(row[d_model - 2].double(), row[d_model - 1].double()).item()  # in (-pi, pi]
    return round(angle / omega_last)


def halves_table(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model): the sinusoidal table laid out as all sines (columns 0 .. d/2 - 1), then all cosines."""
    table = sinusoidal_table(max_len, d_model)
    return torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)


def reference_halves_rotation(k: int, d_model: int) -> Tensor:
    """Reference solution of exercise 3.2. Returns (d_model, d_model): M_k with M_k H(pos) = H(pos + k), where
    H(pos) = [sin(w_0 pos), ..., sin(w_{d/2-1} pos), cos(w_0 pos), ..., cos(w_{d/2-1} pos)].

    Pair i still turns by the angle w_i k, but its sine sits in row i and its cosine in row i + d_model/2, so the
    matrix is four diagonal blocks [[C, S], [-S, C]] with C = diag(cos(w_i k)), S = diag(sin(w_i k)).
    """
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even int >= 2, got {d_model}")
    angle = k * _frequencies(d_model)  # (d_model/2,)
    c, s = torch.diag(torch.cos(angle)), torch.diag(torch.sin(angle))
    return torch.cat([torch.cat([c, s], dim=1), torch.cat([-s, c], dim=1)], dim=0).float()


def _interleaved_rotation(k: int, d_model: int, angle: Tensor | None = None) -> Tensor:
    """M_k for the interleaved layout (notebook 03, section 5): block i is [[cos, sin], [-sin, cos]] of w_i k."""
    angle = k * _frequencies(d_model) if angle is None else angle
    cos, sin = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d_model/2, 2, 2)
    return torch.block_diag(*blocks)


# ------------------------------------------------------------------------------------------- exercise 3.1
_READ_DIMS = (64, 32)
_SMALL_POSITIONS = (0, 1, 2, 3)  # below pi: even pair 0 read with atan2 gets these right
_LARGE_POSITIONS = (7, 50, 600, 4321, 9999)


def _misreadings(row: Tensor) -> dict[str, int]:
    """What typical wrong ways of reading a row give, each with the hint the checker shows for it."""
    d = row.shape[-1]
    row = row.double()
    omega = _frequencies(d)
    sin_last, cos_last = row[d - 2], row[d - 1]
    return {
        tr(
            "pair 0 turns a full circle every 2*pi = 6.3 positions, so its angle repeats: read a pair whose "
            "wavelength is longer than 10000 positions (the slowest, columns d_model - 2 and d_model - 1)",
            "第 0 对每 2*pi = 6.3 个位置就转一整圈，所以它的角度会重复：要读一个波长超过 10000 个位置的维度对"
            "（最慢的那一对，即第 d_model - 2 和 d_model - 1 列）",
        ): round(torch.atan2(row[0], row[1]).item() / omega[0].item()),
        tr(
            "the sine alone is ambiguous past a quarter turn (sin(pi - a) = sin a): use both columns of the pair, "
            "torch.atan2(sin, cos)",
            "转过四分之一圈以后，只看正弦是有歧义的（sin(pi - a) = sin a）：要用这一对的两列，即 torch.atan2(sin, cos)",
        ): round(torch.asin(sin_last).item() / omega[-1].item()),
        tr(
            "column 2i holds the sine and column 2i + 1 the cosine: the angle is torch.atan2(sin, cos), sine first",
            "第 2i 列是正弦，第 2i + 1 列是余弦：角度是 torch.atan2(sin, cos)，正弦在前",
        ): round(torch.atan2(cos_last, sin_last).item() / omega[-1].item()),
        tr(
            "that is the pair's angle in radians, pos * omega_i: divide it by the pair's frequency omega_i",
            "你返回的是这一对以弧度表示的角度 pos * omega_i：还要除以这一对的频率 omega_i",
        ): round(torch.atan2(sin_last, cos_last).item()),
    }


def _check_read(fn: Callable[[Tensor], int]) -> None:
    for d_model in _READ_DIMS:
        table = sinusoidal_table(10000, d_model)
        answers, wrong_ways = {}, {}
        for pos in _SMALL_POSITIONS + _LARGE_POSITIONS:
            got = fn(table[pos].clone())
            if isinstance(got, bool) or not isinstance(got, numbers.Integral):
                raise ExerciseMistake(
                    tr(
                        f"return the position as a Python int, got {type(got).__name__} {got!r} for PE({pos}): "
                        "round(angle / omega) gives one.",
                        f"要把位置作为 Python int 返回，对 PE({pos}) 得到的却是 {type(got).__name__} {got!r}："
                        "round(angle / omega) 给出的就是 int。",
                    )
                )
            answers[pos] = got
            for hint, value in _misreadings(table[pos]).items():
                wrong_ways.setdefault(hint, {})[pos] = value
        if all(answers[pos] == pos for pos in answers):
            continue
        for hint, values in wrong_ways.items():
            if values == answers:
                raise ExerciseMistake(tr(f"{hint}.", f"{hint}。"))
        pos = next(p for p in answers if answers[p] != p)
        if all(answers[p] in (p, p - 1) for p in answers):
            raise ExerciseMistake(
                tr(
                    f"PE({pos}) gave {pos - 1} (d_model={d_model}): in floating point angle / omega can come out a "
                    "hair below the whole number, and int() cuts the fraction off; round(angle / omega) gives the "
                    "nearest one.",
                    f"PE({pos}) 得到的是 {pos - 1}（d_model={d_model}）：在浮点运算中，angle / omega "
                    "可能比整数略小一点，而 int() 会直接截掉小数部分；round(angle / omega) 给出的是最接近的整数。",
                )
            )
        large_right = all(abs(answers[p] - p) <= 1 for p in _LARGE_POSITIONS)
        if large_right and any(answers[p] < p for p in _SMALL_POSITIONS):
            small = next(p for p in _SMALL_POSITIONS if answers[p] < p)
            raise ExerciseMistake(
                tr(
                    f"large positions come out right, but PE({small}) gave {answers[small]} (d_model={d_model}): "
                    "near an angle of 0 the cosine is flat (cos a = 1 - a^2/2), so in float32 it rounds to 1.0 and "
                    "acos(cos) loses small angles; read the angle with torch.atan2(sin, cos), which keeps them.",
                    f"大的位置是对的，但 PE({small}) 得到的是 {answers[small]}（d_model={d_model}）："
                    "角度接近 0 时余弦几乎不变（cos a = 1 - a^2/2），在 float32 中会舍入成 1.0，"
                    "所以 acos(cos) 会丢掉小的角度；要用 torch.atan2(sin, cos) 读角度，它能保留小角度。",
                )
            )
        ratios = [answers[p] / p for p in _LARGE_POSITIONS if p >= 50]  # 7 is too small for a clean ratio
        scaled = max(ratios) - min(ratios) < 0.01 * max(ratios) and abs(ratios[-1] - 1) > 0.02
        if scaled and all(answers[p] == p for p in _SMALL_POSITIONS[:2]):
            raise ExerciseMistake(
                tr(
                    f"every large position comes out multiplied by {ratios[-1]:.3g} (d_model={d_model}), "
                    "so the angle is read right but divided by the wrong frequency: the slowest pair's frequency is "
                    "10000^(-(d_model - 2)/d_model), with 2i = d_model - 2 the column of its sine.",
                    f"每个大的位置都被乘上了 {ratios[-1]:.3g}（d_model={d_model}），说明角度读对了，"
                    "但除错了频率：最慢那一对的频率是 10000^(-(d_model - 2)/d_model)，其中 2i = d_model - 2 "
                    "是它的正弦所在的列。",
                )
            )
        if all(answers[p] == p for p in _SMALL_POSITIONS):
            raise ExerciseMistake(
                tr(
                    f"right for small positions, but PE({pos}) gave {answers[pos]} (d_model={d_model}): a pair's "
                    "angle wraps around once per wavelength; read the slowest pair.",
                    f"小的位置是对的，但 PE({pos}) 得到的是 {answers[pos]}（d_model={d_model}）："
                    "一对的角度每经过一个波长就绕回一次；要读最慢的那一对。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"PE({pos}) with d_model={d_model} should give {pos}, got {answers[pos]}.",
                f"d_model={d_model} 时，PE({pos}) 应得到 {pos}，得到的是 {answers[pos]}。",
            )
        )


def check_read_position(fn: Callable[[Tensor], int]) -> bool:
    """Exercise 3.1: ``fn(row)`` must return pos (an int) for row = PE(pos), 0 <= pos < 10000."""
    return report(READ_POSITION, lambda: _check_read(fn))


# ------------------------------------------------------------------------------------------- exercise 3.2
_SHIFTS = (0, 1, 5, 37)
_DIMS = (4, 16)


def _halves(m: Tensor) -> Tensor:
    """The same linear map written for the halves layout: rows and columns reordered (sines, then cosines)."""
    d = m.shape[0]
    order = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    return m[order][:, order]


def _check_halves_rotation(fn: Callable[[int, int], Tensor]) -> None:
    for d_model in _DIMS:
        table = halves_table(128, d_model).double()  # rows are H(pos)
        for k in _SHIFTS:
            what = tr(f"your M_k for k={k}, d_model={d_model}", f"你给出的 M_k（k={k}，d_model={d_model}）")
            m = fn(k, d_model)
            expect_tensor(m, what, (d_model, d_model))
            m = m.detach().double()
            moved = table[: 128 - k] @ m.T  # row pos holds M_k H(pos)
            if torch.allclose(moved, table[k:], atol=1e-4):
                continue
            if k and torch.allclose(m, _interleaved_rotation(k, d_model), atol=1e-4):
                raise ExerciseMistake(
                    tr(
                        f"{what} is the matrix for the interleaved layout of section 5; here the sine of pair i is in "
                        "column i and its cosine in column i + d_model/2, so the cos and sin of pair i go in rows and "
                        "columns i and i + d_model/2.",
                        f"{what}是第 5 节交错布局下的矩阵（那里正弦和余弦逐列交替）；"
                        "这里第 i 对的正弦在第 i 列，余弦在第 i + d_model/2 列，"
                        "所以第 i 对的 cos 和 sin 要放在第 i 和第 i + d_model/2 行、列上。",
                    )
                )
            if k and torch.allclose(table[k:] @ m.T, table[: 128 - k], atol=1e-4):
                raise ExerciseMistake(
                    tr(
                        f"{what} moves positions backwards (M_k H(pos) = H(pos - k)): flip the signs of the sin terms.",
                        f"{what}把位置往回移了（M_k H(pos) = H(pos - k)）：要把 sin 项的符号反过来。",
                    )
                )
            if k and torch.allclose(m.abs(), reference_halves_rotation(k, d_model).double().abs(), atol=1e-4):
                raise ExerciseMistake(
                    tr(
                        f"{what} has the right entries in the right places, but a sign is wrong: "
                        "sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b, so the "
                        "only minus sign goes on the sin terms in the cosine rows (rows d_model/2 and up).",
                        f"{what}的每个元素都放对了位置，但有的正负号错了：sin(a + b) = sin a cos b + cos a sin b，"
                        "cos(a + b) = cos a cos b - sin a sin b，"
                        "所以只有余弦行（第 d_model/2 行及以后）里的 sin 项前面带负号。",
                    )
                )
            same_angle = _halves(_interleaved_rotation(k, d_model, torch.full((d_model // 2,), float(k))))
            if k and torch.allclose(m, same_angle.double(), atol=1e-4):
                raise ExerciseMistake(
                    tr(
                        f"{what} turns every pair by the same angle k; pair i must turn by omega_i * k, "
                        "with omega_i = 10000^(-2i/d_model) its frequency.",
                        f"{what}让每一对都转了同一个角度 k；第 i 对必须转 omega_i * k，"
                        "其中 omega_i = 10000^(-2i/d_model) 是它的频率。",
                    )
                )
            if k == 0:
                expect_close(
                    m,
                    torch.eye(d_model, dtype=torch.float64),
                    tr(f"{what} (k = 0 should be the identity)", f"{what}（k = 0 时应是单位矩阵）"),
                )
            worst = (moved - table[k:]).abs().max().item()
            raise ExerciseMistake(
                tr(
                    f"{what}: M_k H(pos) differs from H(pos + k) by up to {worst:.3g}.",
                    f"{what}：M_k H(pos) 与 H(pos + k) 最多相差 {worst:.3g}。",
                )
            )


def check_halves_rotation(fn: Callable[[int, int], Tensor]) -> bool:
    """Exercise 3.2: ``fn(k, d_model)`` must return M_k (d_model, d_model) for the sines-then-cosines layout."""
    return report(HALVES_ROTATION, lambda: _check_halves_rotation(fn))
