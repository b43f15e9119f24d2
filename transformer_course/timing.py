"""Wall-clock timing for the notebooks: several methods measured in turns, the best of several repeats.

A learner's laptop is rarely quiet: a browser, an update or another program takes the CPU in bursts. Timing method A
five times and then method B five times lets a burst land on one of them only. :func:`time_in_turns` measures them
in turns instead (A, B, C, A, B, C, ...), so a burst hits every method alike, and keeps each method's shortest
measurement, the one the other programs disturbed least. Each measurement follows an untimed call of the same
method, so that it does not pay for what the method before it left behind::

    timings = time_in_turns({"plain": plain, "cached": cached}, repeats=3)
    observe(timings.ratio("plain", "cached") > 1, "the cache is faster", measured=timings.seconds)

Times differ between machines and runs: print them in a cell whose output nbval ignores, and report claims about them
with ``claims.observe``. :func:`ratio` (and :meth:`Timings.ratio`) returns nan instead of dividing by zero when a
coarse clock saw no time, and a comparison with nan is False, so such a claim is reported as not seen.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

__all__ = ["Timings", "ratio", "time_in_turns"]

MAX_CALLS = 2**16  # calls in a row per measurement at most, however coarse the clock


def ratio(a: float, b: float) -> float:
    """``a / b``, or nan when ``b`` is not above zero (a coarse clock saw no time for it).

    Every comparison with nan is False, so ``observe(ratio(a, b) > 2, ...)`` reports "not seen" instead of failing.
    """
    return a / b if b > 0 else math.nan


@dataclass(frozen=True)
class Timings:
    """What :func:`time_in_turns` measured.

    ``seconds[key]``: the shortest measured time of one call of that method, in seconds. ``calls[key]``: how many
    calls in a row one measurement timed (its time divided by them gives the time per call). ``repeats``: how many
    measurements of each method the shortest was taken from. Keys are in the order the methods were given.
    """

    seconds: dict[Hashable, float]
    calls: dict[Hashable, int]
    repeats: int

    def ratio(self, a: Hashable, b: Hashable) -> float:
        """The time of method ``a`` over that of method ``b`` (nan if the clock saw no time for ``b``)."""
        for key in (a, b):
            if key not in self.seconds:
                raise ValueError(f"no method {key!r} was timed; the methods are {list(self.seconds)}")
        return ratio(self.seconds[a], self.seconds[b])


def _measure(fn: Callable[[], object], calls: int, clock: Callable[[], float]) -> float:
    """Seconds that ``calls`` calls of ``fn`` in a row took on ``clock``."""
    start = clock()
    for _ in range(calls):
        fn()
    return clock() - start


def time_in_turns(
    functions: Mapping[Hashable, Callable[[], object]],
    repeats: int = 5,
    *,
    at_least: float = 0.005,
    settle: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> Timings:
    """Time each method taking turns with the others, and keep its best (shortest) measurement.

    functions: ``{name: fn}``, each ``fn`` called with no arguments (wrap arguments in a lambda or
    ``functools.partial``); its return value is ignored. First each method gets a warm-up call, which pays for
    first-time costs (allocations, caches) and is not kept; when that call lasts less than ``at_least`` seconds,
    the number of calls in a row is doubled until they last that long, so that a coarse clock still sees them
    (at most ``MAX_CALLS``). Then ``repeats`` rounds: in each round every method is measured once, in the order
    given (A, B, C, A, B, C, ...). With ``settle`` each measurement follows one untimed call of the same method, so
    that it does not pay for what the method before it left behind (memory it freed, caches it filled: a first
    call can take many times as long); ``settle=False`` saves that call where one call lasts so long that such
    costs do not matter. ``clock`` returns seconds (``time.perf_counter``; tests pass a fake one).

    Returns :class:`Timings`, the best time per call of each method in seconds. Raises ``ValueError`` for no
    methods, a method that is not callable, ``repeats`` below 1, ``at_least`` below 0 or a ``settle`` that is not a
    bool.
    """
    if not isinstance(functions, Mapping):
        raise ValueError(f"functions must be a mapping {{name: function}}, got {type(functions).__name__}")
    if not functions:
        raise ValueError("functions is empty: expected at least one {name: function} to time")
    for key, fn in functions.items():
        if not callable(fn):
            raise ValueError(f"functions[{key!r}] must be callable with no arguments, got {type(fn).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(at_least, bool) or not isinstance(at_least, int | float) or not 0 <= at_least < math.inf:
        raise ValueError(f"at_least must be a finite number of seconds >= 0, got {at_least!r}")
    if not isinstance(settle, bool):
        raise ValueError(f"settle must be True or False, got {settle!r}")
    if not callable(clock):
        raise ValueError(f"clock must be callable and return seconds, got {type(clock).__name__}")

    calls = dict.fromkeys(functions, 1)
    for key, fn in functions.items():
        elapsed = _measure(fn, 1, clock)  # the warm-up call, timed only to see whether one call is long enough
        while elapsed < at_least and calls[key] < MAX_CALLS:
            calls[key] *= 2
            elapsed = _measure(fn, calls[key], clock)
    best = dict.fromkeys(functions, math.inf)
    for _ in range(repeats):
        for key, fn in functions.items():  # one measurement of each method per round: they take turns
            if settle:
                fn()
            best[key] = min(best[key], _measure(fn, calls[key], clock) / calls[key])
    return Timings(seconds=best, calls=calls, repeats=repeats)
