"""The shared machinery of every checker: run a check, turn the outcome into one line of feedback."""

from __future__ import annotations

from collections.abc import Callable

import torch


class ExerciseMistake(AssertionError):
    """Raised by a check when the reader's answer is wrong; its message tells the reader what to look at."""


def expect(condition: bool, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ExerciseMistake(message)


def expect_tensor(actual: object, what: str, shape: tuple[int, ...] | torch.Size, meaning: str = "") -> None:
    """Fail unless ``actual`` is a tensor of ``shape``. ``meaning`` follows the expected shape in the message,
    for instance the names of the axes: "(batch, heads, len, d_k)"."""
    expect(isinstance(actual, torch.Tensor), f"{what} should be a torch.Tensor, got {type(actual).__name__}")
    assert isinstance(actual, torch.Tensor)
    expected = f"{tuple(shape)} {meaning}" if meaning else f"{tuple(shape)}"
    expect(tuple(actual.shape) == tuple(shape), f"{what} has shape {tuple(actual.shape)}, expected {expected}")


def expect_close(actual: object, expected: torch.Tensor, what: str, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail unless ``actual`` is a tensor of ``expected``'s shape whose values are close to it."""
    expect_tensor(actual, what, expected.shape)
    assert isinstance(actual, torch.Tensor)
    actual_f, expected_f = actual.detach().double(), expected.detach().double()
    if not torch.allclose(actual_f, expected_f, atol=atol, rtol=rtol, equal_nan=False):
        worst = (actual_f - expected_f).abs().nan_to_num(float("inf")).max().item()
        raise ExerciseMistake(f"{what} differs from the expected values (largest difference {worst:.3g})")


def as_sentence(message: str) -> str:
    """``message`` as a sentence: a capital first letter (unless it starts with code, such as ``k_cache`` or
    ``fn(...)``) and a full stop at the end."""
    first = message.split(" ", 1)[0].rstrip(",;:")
    if first.isalpha() and first.islower():
        message = message[0].upper() + message[1:]
    if message and message[-1] not in ".!?":
        message += "."
    return message


def report(exercise: str, check: Callable[[], None]) -> bool:
    """Run ``check`` and print one line: correct, not attempted yet, or what went wrong. Returns True if correct."""
    try:
        check()
    except NotImplementedError:
        print(f"{exercise}: not attempted yet - replace the `raise NotImplementedError` with your code.")
        return False
    except ExerciseMistake as mistake:
        print(f"{exercise}: not yet. {as_sentence(str(mistake))}")
        return False
    except Exception as error:  # the reader's code crashed: show it as feedback, not as a traceback
        print(f"{exercise}: your code raised {type(error).__name__}: {error}")
        return False
    print(f"{exercise}: correct!")
    return True
