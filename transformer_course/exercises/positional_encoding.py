"""Exercises of notebook 03 (positional encoding): their checkers and reference solutions.

1. ``check_sinusoidal_table(fn)``: ``fn(max_len, d_model)`` builds the sinusoidal table by hand.
2. ``check_rotation_matrix(fn)``: ``fn(k, d_model)`` builds the matrix M_k with PE(pos + k) = M_k PE(pos).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..positional import sinusoidal_table
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report

BASE = 10000.0


def _frequencies(d_model: int, base: float = BASE, dtype: torch.dtype = torch.float64) -> Tensor:
    """omega_i = base^(-2i / d_model) for i = 0 .. d_model/2 - 1; returns (d_model // 2,)."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    return torch.exp(-two_i / d_model * math.log(base))


def reference_sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """Reference solution of exercise 1. Returns (max_len, d_model): sin in even columns, cos in odd ones."""
    if max_len < 1 or d_model < 2 or d_model % 2:
        raise ValueError(f"need max_len >= 1 and an even d_model >= 2, got max_len={max_len}, d_model={d_model}")
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * _frequencies(d_model)  # (max_len, d_model/2)
    table = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)  # (max_len, d_model/2, 2)
    return table.reshape(max_len, d_model).float()


def reference_rotation_matrix(k: int, d_model: int) -> Tensor:
    """Reference solution of exercise 2. Returns M_k (d_model, d_model), block-diagonal with 2 x 2 rotations.

    Block i acts on (sin(w_i pos), cos(w_i pos)) and turns it by the angle w_i k:
    [[cos(w_i k), sin(w_i k)], [-sin(w_i k), cos(w_i k)]].
    """
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even int >= 2, got {d_model}")
    angle = k * _frequencies(d_model)  # (d_model/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d_model/2, 2, 2)
    return torch.block_diag(*blocks).float()


# ----------------------------------------------------------------------------------------------- exercise 1
_TABLE_SIZES = ((6, 4), (50, 16), (128, 64))


def _table_mistakes(max_len: int, d_model: int) -> dict[str, Tensor]:
    """Tables that typical mistakes produce, each with the hint the checker gives for it."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos * _frequencies(d_model)
    swapped = torch.zeros(max_len, d_model, dtype=torch.float64)
    swapped[:, 0::2], swapped[:, 1::2] = torch.cos(angle), torch.sin(angle)
    halves = torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)
    pair_index = pos * torch.exp(-torch.arange(d_model // 2, dtype=torch.float64) / d_model * math.log(BASE))
    forgot_two = torch.zeros(max_len, d_model, dtype=torch.float64)
    forgot_two[:, 0::2], forgot_two[:, 1::2] = torch.sin(pair_index), torch.cos(pair_index)
    column = pos * torch.exp(-torch.arange(d_model, dtype=torch.float64) / d_model * math.log(BASE))
    per_column = torch.where(torch.arange(d_model) % 2 == 0, torch.sin(column), torch.cos(column))
    from_one = sinusoidal_table(max_len + 1, d_model)[1:].double()
    return {
        "sin and cos are swapped: even columns (0, 2, 4, ...) hold sin, odd columns cos": swapped,
        "all sines come first and all cosines after; interleave them (column 2i is sin, 2i+1 is cos)": halves,
        "the exponent should be 2i/d_model with i the pair index (0, 1, 2, ...); yours looks like i/d_model": (
            forgot_two
        ),
        "columns 2i and 2i+1 must share one frequency, base^(-2i/d_model); yours gives every column its own": (
            per_column
        ),
        "positions start at 0, not 1 (row 0 should be [0, 1, 0, 1, ...])": from_one,
    }


def _check_table(fn: Callable[[int, int], Tensor]) -> None:
    for max_len, d_model in _TABLE_SIZES:
        what = f"your table for max_len={max_len}, d_model={d_model}"
        out = fn(max_len, d_model)
        expect_tensor(out, what, (max_len, d_model))
        expected = sinusoidal_table(max_len, d_model)
        if torch.allclose(out.detach().double(), expected.double(), atol=1e-4):
            continue
        for hint, wrong in _table_mistakes(max_len, d_model).items():
            if torch.allclose(out.detach().double(), wrong, atol=1e-4):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(out, expected, what, atol=1e-4, rtol=1e-4)


def check_sinusoidal_table(fn: Callable[[int, int], Tensor]) -> bool:
    """Exercise 1: ``fn(max_len, d_model)`` must return the (max_len, d_model) sinusoidal table."""
    return report("Exercise 1 (sinusoidal table)", lambda: _check_table(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
_SHIFTS = (0, 1, 5, 37)
_DIMS = (4, 16)


def _check_rotation(fn: Callable[[int, int], Tensor]) -> None:
    for d_model in _DIMS:
        table = sinusoidal_table(128, d_model).double()  # rows are PE(pos)
        for k in _SHIFTS:
            what = f"your M_k for k={k}, d_model={d_model}"
            m = fn(k, d_model)
            expect(isinstance(m, Tensor), f"{what} should be a torch.Tensor, got {type(m).__name__}")
            expect(
                tuple(m.shape) == (d_model, d_model),
                f"{what} has shape {tuple(m.shape)}, expected {(d_model, d_model)}",
            )
            m = m.detach().double()
            moved = table[: 128 - k] @ m.T  # row pos holds M_k PE(pos)
            if torch.allclose(moved, table[k:], atol=1e-4):
                continue
            if k and torch.allclose(table[k:] @ m.T, table[: 128 - k], atol=1e-4):
                raise ExerciseMistake(
                    f"{what} moves positions backwards (M_k PE(pos) = PE(pos - k)): flip the signs of the sin terms."
                )
            angle = torch.full((d_model // 2,), float(k), dtype=torch.float64)
            cos, sin = torch.cos(angle), torch.sin(angle)
            same_angle = torch.block_diag(*torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2))
            if k and torch.allclose(m, same_angle, atol=1e-4):
                raise ExerciseMistake(
                    f"{what} turns every block by the same angle k; block i must turn by omega_i * k, "
                    "with omega_i = 10000^(-2i/d_model) its frequency."
                )
            if k == 0:
                expect_close(m, torch.eye(d_model, dtype=torch.float64), f"{what} (k = 0 should be the identity)")
            worst = (moved - table[k:]).abs().max().item()
            raise ExerciseMistake(f"{what}: M_k PE(pos) differs from PE(pos + k) by up to {worst:.3g}.")


def check_rotation_matrix(fn: Callable[[int, int], Tensor]) -> bool:
    """Exercise 2: ``fn(k, d_model)`` must return M_k (d_model, d_model) with M_k PE(pos) = PE(pos + k)."""
    return report("Exercise 2 (rotation matrix M_k)", lambda: _check_rotation(fn))
