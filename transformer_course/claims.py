"""Claims the prose makes about numbers that differ from machine to machine, checked where they are measured.

A trained accuracy, a timing or a float difference changes in its last digits between CPUs, thread counts and
library versions, so a notebook cannot promise its exact value. It can promise a threshold ("above 99.5% exact
match", "at least 3x faster") and check it on every run::

    check(result.exact_match > 0.995, "exact match on the held-out dates is above 99.5%", measured=result.exact_match)

prints one line that is the same on every machine, ``holds: exact match on the held-out dates is above 99.5%``,
and raises :class:`ClaimFailed` with the measured value when the claim does not hold, so the notebook stops
there with an error instead of showing text its own numbers contradict.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ClaimFailed", "check", "within"]


class ClaimFailed(AssertionError):
    """A claim the notebook makes about a measured number did not hold on this run."""


def check(condition: Any, claim: str, measured: Any = None) -> None:
    """Print ``holds: <claim>`` if ``condition`` is true, else raise :class:`ClaimFailed` naming the measured value.

    ``condition`` is anything with a truth value: a bool, a 0-d boolean tensor or NumPy bool.
    ``claim`` is the sentence the prose states, worded as the threshold that is checked.
    ``measured`` is what was measured (a number, a tuple, a dict); it appears only in the error, so the printed
    line stays the same on every machine.
    """
    if not isinstance(claim, str) or not claim.strip():
        raise ValueError(f"claim must be a non-empty sentence (str), got {claim!r}")
    try:
        holds = bool(condition)
    except (TypeError, RuntimeError, ValueError) as error:  # e.g. a tensor with several elements
        raise ValueError(f"condition must have one truth value (a bool or a one-element tensor): {error}") from None
    if not holds:
        detail = "" if measured is None else f" (measured: {measured!r})"
        raise ClaimFailed(f"the claim does not hold on this run: {claim}{detail}")
    print(f"holds: {claim}")


def within(measured: float, low: float, high: float) -> bool:
    """True if ``low <= measured <= high``: a range claim, e.g. ``within(var, 0.9, 1.1)``."""
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low!r}, high={high!r}")
    return low <= float(measured) <= high
