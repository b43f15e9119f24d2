"""Claims the prose makes about numbers that differ from machine to machine, checked where they are measured.

A trained accuracy, a timing or a float difference changes in its last digits between CPUs, thread counts and
library versions, so a notebook cannot promise its exact value. It can promise a threshold ("above 99.5% exact
match", "at least 3x faster") and check it on every run::

    check(result.exact_match > 0.995, "exact match on the held-out dates is above 99.5%", measured=result.exact_match)

prints one line that is the same on every machine, ``holds: exact match on the held-out dates is above 99.5%``,
and raises :class:`ClaimFailed` with the measured value when the claim does not hold, so the notebook stops
there with an error instead of showing text its own numbers contradict.

Some things a notebook shows cannot be promised on every machine: which of two methods is faster by the clock, how
much a model learns in a given number of seconds. A second program sharing the CPU, a laptop on battery, another
CPU change them. Those are reported, never raised, with :func:`observe`::

    observe(cached < plain, "greedy decoding is faster with the cache", measured=(cached, plain))

prints ``seen on this run: ...`` or ``not seen on this run: ... (measured: ...)`` and returns whether it was seen,
so Run All never stops on a busy machine. ``check`` stays for what holds anywhere: counts, shapes, work counted
from the shapes, bytes, trained numbers with a tolerance.

In the Chinese edition (``set_language("zh")``, :mod:`transformer_course.language`) the notebook's code passes the
claim in Chinese and the lines read ``成立：...``, ``本次运行中观察到：...``, ``本次运行中未观察到：...``; the
error says in Chinese that the claim does not hold.
"""

from __future__ import annotations

from typing import Any

from transformer_course.language import tr

__all__ = ["ClaimFailed", "check", "observe", "within"]


class ClaimFailed(AssertionError):
    """A claim the notebook makes about a measured number did not hold on this run."""


def _truth(condition: Any, claim: Any) -> bool:
    if not isinstance(claim, str) or not claim.strip():
        raise ValueError(f"claim must be a non-empty sentence (str), got {claim!r}")
    try:
        return bool(condition)
    except (TypeError, RuntimeError, ValueError) as error:  # e.g. a tensor with several elements
        raise ValueError(f"condition must have one truth value (a bool or a one-element tensor): {error}") from None


def _rounded(value: Any) -> Any:
    """``value`` with every float in it (inside tuples, lists and dicts too) rounded to 4 significant digits, so that
    a measured ratio reads 1.45, not 1.4499999999999999."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, tuple | list):
        return type(value)(_rounded(v) for v in value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _measured(measured: Any) -> str:
    """`` (measured: ...)`` after a claim, in the reader's language; empty when nothing was measured."""
    if measured is None:
        return ""
    shown = _rounded(measured)
    return tr(f" (measured: {shown!r})", f"（测得：{shown!r}）")


def check(condition: Any, claim: str, measured: Any = None) -> None:
    """Print ``holds: <claim>`` if ``condition`` is true, else raise :class:`ClaimFailed` naming the measured value.

    ``condition`` is anything with a truth value: a bool, a 0-d boolean tensor or NumPy bool.
    ``claim`` is the sentence the prose states, worded as the threshold that is checked.
    ``measured`` is what was measured (a number, a tuple, a dict); it appears only in the error, so the printed
    line stays the same on every machine.
    """
    if not _truth(condition, claim):
        raise ClaimFailed(
            tr("the claim does not hold on this run: ", "本次运行中这一结论不成立：") + claim + _measured(measured)
        )
    print(tr("holds: ", "成立：") + claim)


def observe(condition: Any, claim: str, measured: Any = None) -> bool:
    """Report whether what the prose expects showed on this run; never raise for it. Returns the truth value.

    For what depends on the machine's speed or its load (wall-clock comparisons, speed-ups, seconds), or on float
    details a margin cannot cover (which of two close trained runs comes out ahead). Prints ``seen on this run:
    <claim>``, or ``not seen on this run: <claim> (measured: ...)`` followed by a reminder that this depends on the
    machine. Call it in a cell whose output nbval ignores: the line differs between runs.
    Bad arguments still raise ``ValueError``, as in :func:`check`.
    """
    seen = _truth(condition, claim)
    if seen:
        print(tr("seen on this run: ", "本次运行中观察到：") + claim)
    else:
        print(
            tr("not seen on this run: ", "本次运行中未观察到：")
            + claim
            + _measured(measured)
            + tr(
                ". This depends on the machine (its speed, its load, its arithmetic), so it is reported, not checked.",
                "。这取决于机器（速度、负载和浮点运算的细节），所以这里只报告，不检查。",
            )
        )
    return seen


def within(measured: float, low: float, high: float) -> bool:
    """True if ``low <= measured <= high``: a range claim, e.g. ``within(var, 0.9, 1.1)``."""
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low!r}, high={high!r}")
    return low <= float(measured) <= high
