"""The checkers of notebook 03 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course import sinusoidal_table
from transformer_course.exercises import positional_encoding as ex


def _angles(max_len: int, d_model: int, exponent_index: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    return pos * torch.exp(-exponent_index.double() / d_model * math.log(10000.0))


def _interleave(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    return torch.stack([first, second], dim=-1).reshape(first.shape[0], -1).float()


def test_reference_table_equals_the_package():
    torch.testing.assert_close(ex.reference_sinusoidal_table(300, 32), sinusoidal_table(300, 32), atol=1e-4, rtol=0)


def test_reference_table_rejects_odd_width():
    with pytest.raises(ValueError, match="even d_model"):
        ex.reference_sinusoidal_table(10, 5)


def test_table_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_sinusoidal_table(ex.reference_sinusoidal_table)
    assert ex.check_sinusoidal_table(sinusoidal_table)
    assert "correct" in capsys.readouterr().out


def test_table_checker_says_not_attempted(capsys):
    def stub(max_len, d_model):
        raise NotImplementedError

    assert not ex.check_sinusoidal_table(stub)
    assert "not attempted yet" in capsys.readouterr().out


def _swapped(max_len, d_model):
    a = _angles(max_len, d_model, torch.arange(0, d_model, 2))
    return _interleave(torch.cos(a), torch.sin(a))


def _halves(max_len, d_model):
    a = _angles(max_len, d_model, torch.arange(0, d_model, 2))
    return torch.cat([torch.sin(a), torch.cos(a)], dim=-1).float()


def _forgot_two(max_len, d_model):
    a = _angles(max_len, d_model, torch.arange(d_model // 2))
    return _interleave(torch.sin(a), torch.cos(a))


def _per_column(max_len, d_model):
    a = _angles(max_len, d_model, torch.arange(d_model))
    return torch.where(torch.arange(d_model) % 2 == 0, torch.sin(a), torch.cos(a)).float()


def _from_one(max_len, d_model):
    return sinusoidal_table(max_len + 1, d_model)[1:]


def _transposed(max_len, d_model):
    return sinusoidal_table(max_len, d_model).T


def _numpy(max_len, d_model):
    return sinusoidal_table(max_len, d_model).numpy()


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_swapped, "swapped"),
        (_halves, "interleave"),
        (_forgot_two, "2i/d_model"),
        (_per_column, "share one frequency"),
        (_from_one, "start at 0"),
        (_transposed, "shape"),
        (_numpy, "torch.Tensor"),
    ],
)
def test_table_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_sinusoidal_table(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_table_checker_reports_a_crash(capsys):
    assert not ex.check_sinusoidal_table(lambda max_len, d_model: torch.zeros(max_len) @ torch.zeros(3))
    assert "your code raised RuntimeError" in capsys.readouterr().out


def test_reference_rotation_moves_every_position_by_k():
    table = sinusoidal_table(200, 16).double()
    for k in (0, 1, 7, 60):
        m = ex.reference_rotation_matrix(k, 16).double()
        torch.testing.assert_close(table[: 200 - k] @ m.T, table[k:], atol=1e-4, rtol=0)
        torch.testing.assert_close(m.T @ m, torch.eye(16, dtype=torch.float64), atol=1e-6, rtol=0)


def test_rotation_checker_accepts_the_reference(capsys):
    assert ex.check_rotation_matrix(ex.reference_rotation_matrix)
    assert "correct" in capsys.readouterr().out


def _backwards(k, d_model):
    return ex.reference_rotation_matrix(k, d_model).T


def _same_angle(k, d_model):
    c, s = math.cos(k), math.sin(k)
    return torch.block_diag(*[torch.tensor([[c, s], [-s, c]])] * (d_model // 2))


def _identity(k, d_model):
    return torch.eye(d_model)


def _full_rotation_wrong_shape(k, d_model):
    return ex.reference_rotation_matrix(k, d_model)[:, :-1]


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_backwards, "backwards"),
        (_same_angle, "same angle"),
        (_identity, "differs from PE(pos + k)"),
        (_full_rotation_wrong_shape, "shape"),
    ],
)
def test_rotation_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_rotation_matrix(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_rotation_checker_wants_the_identity_for_k_zero(capsys):
    def zero_for_k0(k, d_model):
        return torch.zeros(d_model, d_model) if k == 0 else ex.reference_rotation_matrix(k, d_model)

    assert not ex.check_rotation_matrix(zero_for_k0)
    assert "identity" in capsys.readouterr().out
