"""The checkers of notebook 03 accept the reference solutions and reject typical mistakes with their hint."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course import sinusoidal_table
from transformer_course.exercises import positional_encoding as ex


def _omega(d_model: int, pair: int) -> float:
    return 10000.0 ** (-2 * pair / d_model)


# ------------------------------------------------------------------------------------------- exercise 3.1
def test_reference_reads_every_position_back():
    for d_model in (32, 64, 512):
        table = sinusoidal_table(10000, d_model)
        assert [ex.reference_read_position(table[pos]) for pos in range(0, 10000, 7)] == list(range(0, 10000, 7))
        assert ex.reference_read_position(table[9999]) == 9999


@functools.cache
def _table(d_model):
    return sinusoidal_table(10000, d_model)


def _nearest_row(row):
    return int((_table(row.shape[0]) @ row).argmax())


@pytest.mark.parametrize("answer", [ex.reference_read_position, _nearest_row])
def test_read_checker_accepts_right_answers(answer, capsys):
    assert ex.check_read_position(answer)
    assert "Exercise 3.1 (read the position back): correct!" in capsys.readouterr().out


def test_read_checker_says_not_attempted(capsys):
    def stub(row):
        raise NotImplementedError

    assert not ex.check_read_position(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _slowest(row):
    d = row.shape[0]
    return row[d - 2].item(), row[d - 1].item(), _omega(d, d // 2 - 1)


def _pair_zero(row):
    return round(math.atan2(row[0].item(), row[1].item()))


def _asin(row):
    sin, _, omega = _slowest(row)
    return round(math.asin(sin) / omega)


def _swapped(row):
    sin, cos, omega = _slowest(row)
    return round(math.atan2(cos, sin) / omega)


def _angle_only(row):
    sin, cos, _ = _slowest(row)
    return round(math.atan2(sin, cos))


def _a_tensor(row):
    sin, cos, omega = _slowest(row)
    return torch.tensor(math.atan2(sin, cos) / omega)


def _a_float(row):
    sin, cos, omega = _slowest(row)
    return math.atan2(sin, cos) / omega


def _truncated(row):
    sin, cos, omega = _slowest(row)
    return int(torch.atan2(torch.tensor(sin), torch.tensor(cos)).item() / omega)


def _acos(row):
    d = row.shape[0]
    return round(torch.acos(row[d - 1]).item() / _omega(d, d // 2 - 1))  # float32: cos of a small angle is 1.0


def _cosine_column_frequency(row):
    sin, cos, _ = _slowest(row)
    d = row.shape[0]
    return round(math.atan2(sin, cos) / 10000 ** (-(d - 1) / d))  # 2i taken as d - 1, the cosine's column


def _fourth_slowest(row):
    d = row.shape[0]
    pair = d // 2 - 4
    return round(math.atan2(row[2 * pair].item(), row[2 * pair + 1].item()) / _omega(d, pair))


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_pair_zero, "Pair 0 turns a full circle"),
        (_asin, "The sine alone is ambiguous"),
        (_swapped, "sine first"),
        (_angle_only, "divide it by the pair's frequency"),
        (_a_tensor, "Return the position as a Python int, got Tensor"),
        (_a_float, "Return the position as a Python int, got float"),
        (_truncated, "int() cuts the fraction off"),
        (_fourth_slowest, "Right for small positions"),
        (_acos, "Large positions come out right, but PE(1) gave 0 (d_model=64)"),
        (_cosine_column_frequency, "multiplied by 1.15 (d_model=64)"),
        (lambda row: 0, "should give"),
    ],
)
def test_read_checker_rejects_typical_mistakes_with_their_hint(wrong, hint, capsys):
    assert not ex.check_read_position(wrong)
    out = capsys.readouterr().out
    assert "Exercise 3.1 (read the position back): not yet." in out and hint in out


# ------------------------------------------------------------------------------------------- exercise 3.2
def test_reference_halves_rotation_moves_every_position_by_k():
    table = ex.halves_table(200, 16).double()
    for k in (0, 1, 7, 60):
        m = ex.reference_halves_rotation(k, 16).double()
        torch.testing.assert_close(table[: 200 - k] @ m.T, table[k:], atol=1e-4, rtol=0)
        torch.testing.assert_close(m.T @ m, torch.eye(16, dtype=torch.float64), atol=1e-6, rtol=0)


def test_halves_table_holds_the_same_numbers_reordered():
    table, halves = sinusoidal_table(50, 8), ex.halves_table(50, 8)
    torch.testing.assert_close(halves[:, :4], table[:, 0::2], atol=0, rtol=0)
    torch.testing.assert_close(halves[:, 4:], table[:, 1::2], atol=0, rtol=0)


def test_halves_checker_accepts_the_reference(capsys):
    assert ex.check_halves_rotation(ex.reference_halves_rotation)
    assert "Exercise 3.2 (the shift matrix, sines first): correct!" in capsys.readouterr().out


def test_halves_checker_says_not_attempted(capsys):
    def stub(k, d_model):
        raise NotImplementedError

    assert not ex.check_halves_rotation(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _blocks(k, d_model, angle=None):
    angle = [_omega(d_model, i) * k for i in range(d_model // 2)] if angle is None else angle
    return torch.block_diag(*[torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]) for a in angle])


def _interleaved(k, d_model):
    return _blocks(k, d_model)


def _backwards(k, d_model):
    return ex.reference_halves_rotation(k, d_model).T


def _same_angle(k, d_model):
    c, s = torch.eye(d_model // 2) * math.cos(k), torch.eye(d_model // 2) * math.sin(k)
    return torch.cat([torch.cat([c, s], 1), torch.cat([-s, c], 1)], 0)


def _no_minus(k, d_model):
    m = ex.reference_halves_rotation(k, d_model).clone()
    half = d_model // 2
    m[half:, :half] *= -1  # cos(a + b) written as cos a cos b + sin a sin b
    return m


def _identity(k, d_model):
    return torch.eye(d_model)


def _wrong_shape(k, d_model):
    return ex.reference_halves_rotation(k, d_model)[:, :-1]


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_interleaved, "interleaved layout"),
        (_backwards, "backwards"),
        (_same_angle, "same angle"),
        (_no_minus, "a sign is wrong"),
        (_identity, "differs from H(pos + k)"),
        (_wrong_shape, "shape"),
    ],
)
def test_halves_checker_rejects_typical_mistakes_with_their_hint(wrong, hint, capsys):
    assert not ex.check_halves_rotation(wrong)
    out = capsys.readouterr().out
    assert "Exercise 3.2 (the shift matrix, sines first): not yet." in out and hint in out


def test_halves_checker_wants_the_identity_for_k_zero(capsys):
    def zero_for_k0(k, d_model):
        return torch.zeros(d_model, d_model) if k == 0 else ex.reference_halves_rotation(k, d_model)

    assert not ex.check_halves_rotation(zero_for_k0)
    assert "identity" in capsys.readouterr().out


def test_halves_checker_reports_a_crash(capsys):
    assert not ex.check_halves_rotation(lambda k, d_model: torch.zeros(d_model) @ torch.zeros(3))
    assert "your code raised RuntimeError" in capsys.readouterr().out


# ---- the feedback in Chinese ----------------------------------------------------------------------------------------


CHECKERS = {
    "3.1": (ex.check_read_position, ex.reference_read_position),
    "3.2": (ex.check_halves_rotation, ex.reference_halves_rotation),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_read_position, _pair_zero, "第 0 对每 2*pi = 6.3 个位置就转一整圈"),
        (ex.check_read_position, _asin, "只看正弦是有歧义的"),
        (ex.check_read_position, _a_float, "要把位置作为 Python int 返回"),
        (ex.check_read_position, _truncated, "int() 会直接截掉小数部分"),
        (ex.check_read_position, _fourth_slowest, "小的位置是对的"),
        (ex.check_read_position, _acos, "要用 torch.atan2(sin, cos) 读角度"),
        (ex.check_read_position, _cosine_column_frequency, "但除错了频率"),
        (ex.check_halves_rotation, _interleaved, "第 5 节交错布局下的矩阵"),
        (ex.check_halves_rotation, _backwards, "把位置往回移了"),
        (ex.check_halves_rotation, _same_angle, "让每一对都转了同一个角度 k"),
        (ex.check_halves_rotation, _no_minus, "但有的正负号错了"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)
