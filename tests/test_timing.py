"""time_in_turns on a fake clock: the order of the calls, the warm-up, the calls in a row and the minimum are
checked exactly, and no test depends on how long anything really takes."""

import math

import pytest

from transformer_course import timing
from transformer_course.timing import Timings, ratio, time_in_turns


class FakeClock:
    """A clock that moves only when a fake method says it took time; it records the order of the calls."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now

    def method(self, name: str, durations: list[float]):
        """A method whose k-th call takes durations[k] seconds (the last one again once the list runs out)."""
        calls = iter(durations)
        last = durations[-1]

        def fn() -> None:
            nonlocal last
            last = next(calls, last)
            self.now += last
            self.log.append(name)

        return fn


def test_methods_take_turns_after_one_warm_up_call_each():
    clock = FakeClock()
    functions = {name: clock.method(name, [1.0]) for name in "abc"}
    timings = time_in_turns(functions, repeats=3, at_least=0.0, settle=False, clock=clock)
    assert clock.log == ["a", "b", "c"] + ["a", "b", "c"] * 3  # warm-ups, then A, B, C, A, B, C, ...
    assert timings.calls == {"a": 1, "b": 1, "c": 1}
    assert timings.repeats == 3
    assert list(timings.seconds) == ["a", "b", "c"]


def test_with_settle_each_measurement_follows_an_untimed_call_of_the_same_method():
    clock = FakeClock()
    functions = {name: clock.method(name, [1.0]) for name in "abc"}
    time_in_turns(functions, repeats=2, at_least=0.0, clock=clock)  # settle=True is the default
    assert clock.log == ["a", "b", "c"] + ["a", "a", "b", "b", "c", "c"] * 2


def test_settle_keeps_what_the_method_before_left_behind_out_of_the_measurement():
    clock = FakeClock()
    previous = None

    def method(name: str, seconds: float):
        def fn() -> None:  # the first call after another method's pays 10 s more (memory given back, caches...)
            nonlocal previous
            clock.now += seconds + (10.0 if previous not in (None, name) else 0.0)
            previous = name

        return fn

    functions = {"a": method("a", 1.0), "b": method("b", 2.0)}
    assert time_in_turns(functions, repeats=3, at_least=0.0, clock=clock).seconds == {"a": 1.0, "b": 2.0}
    assert time_in_turns(functions, repeats=3, at_least=0.0, settle=False, clock=clock).seconds == {
        "a": 11.0,
        "b": 12.0,
    }


def test_keeps_the_shortest_measurement_and_not_the_warm_up():
    clock = FakeClock()
    functions = {
        "a": clock.method("a", [0.5, 4.0, 3.0, 2.0, 6.0]),  # the warm-up (0.5) is the fastest call: not kept
        "b": clock.method("b", [9.0, 7.0, 8.0, 1.5, 7.5]),
    }
    timings = time_in_turns(functions, repeats=4, at_least=0.0, settle=False, clock=clock)
    assert timings.seconds == {"a": 2.0, "b": 1.5}
    assert timings.ratio("a", "b") == 2.0 / 1.5


def test_a_burst_of_load_in_one_round_does_not_decide_the_comparison():
    clock = FakeClock()
    # round 2 (the third call of each) is slowed down by a burst that hits both methods, as turn-taking makes it
    functions = {"a": clock.method("a", [2.0, 2.0, 20.0, 2.0]), "b": clock.method("b", [1.0, 1.0, 10.0, 1.0])}
    timings = time_in_turns(functions, repeats=3, at_least=0.0, settle=False, clock=clock)
    assert timings.seconds == {"a": 2.0, "b": 1.0}


def test_short_calls_are_repeated_in_a_row_until_they_last_at_least_that_long():
    clock = FakeClock()
    fast, slow = 2.0**-10, 2.0**-4  # exact in binary, so the per-call times below are exact
    functions = {"fast": clock.method("fast", [fast]), "slow": clock.method("slow", [slow])}
    timings = time_in_turns(functions, repeats=2, at_least=2.0**-6, clock=clock)
    assert timings.calls == {"fast": 16, "slow": 1}  # 16 fast calls last 2**-6 s
    # calibration: fast 1 + 2 + 4 + 8 + 16 calls, slow only its warm-up
    # then the rounds, still in turns, each measurement after one untimed call
    assert clock.log == ["fast"] * 31 + ["slow"] + (["fast"] * 17 + ["slow"] * 2) * 2
    assert timings.seconds == {"fast": fast, "slow": slow}


def test_a_clock_that_sees_no_time_gives_zero_seconds_and_a_nan_ratio(monkeypatch):
    monkeypatch.setattr(timing, "MAX_CALLS", 8)  # the cap, lowered to keep the test quick
    clock = FakeClock()
    functions = {"a": clock.method("a", [0.0]), "b": clock.method("b", [0.0])}
    timings = time_in_turns(functions, repeats=2, clock=clock)
    assert timings.calls == {"a": 8, "b": 8}
    assert timings.seconds == {"a": 0.0, "b": 0.0}
    assert math.isnan(timings.ratio("a", "b"))
    assert not timings.ratio("a", "b") > 1  # so observe() reports "not seen" instead of raising


def test_ratio_never_divides_by_zero():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(0.0, 2.0) == 0.0
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(0.0, 0.0))
    assert math.isnan(ratio(1.0, math.nan))


def test_real_clock_returns_a_finite_time_for_each_method():
    timings = time_in_turns({"noop": lambda: None, ("sum", 10): lambda: sum(range(10))}, repeats=2, at_least=0.0)
    assert isinstance(timings, Timings)
    assert list(timings.seconds) == ["noop", ("sum", 10)]
    assert all(0.0 <= s < math.inf for s in timings.seconds.values())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"functions": {}}, "functions is empty"),
        ({"functions": [lambda: None]}, "must be a mapping"),
        ({"functions": {"a": 3}}, r"functions\['a'\] must be callable"),
        ({"repeats": 0}, "repeats must be an integer >= 1, got 0"),
        ({"repeats": 2.5}, "repeats must be an integer >= 1, got 2.5"),
        ({"repeats": True}, "repeats must be an integer >= 1, got True"),
        ({"at_least": -0.1}, "at_least must be a finite number of seconds >= 0, got -0.1"),
        ({"at_least": math.nan}, "at_least must be a finite number"),
        ({"at_least": math.inf}, "at_least must be a finite number"),
        ({"settle": 1}, "settle must be True or False, got 1"),
        ({"clock": 0.0}, "clock must be callable"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    arguments = {"functions": {"a": lambda: None}, "repeats": 1, "at_least": 0.0} | kwargs
    with pytest.raises(ValueError, match=message):
        time_in_turns(**arguments)


def test_ratio_of_a_method_that_was_not_timed_raises():
    timings = time_in_turns({"a": lambda: None}, repeats=1, at_least=0.0)
    with pytest.raises(ValueError, match=r"no method 'b' was timed; the methods are \['a'\]"):
        timings.ratio("a", "b")
