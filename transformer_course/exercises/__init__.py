"""Checkers for the notebooks' exercises, one module per notebook (for example ``exercises.introduction``).

A checker calls the reader's function on test inputs and prints one line of feedback:
"correct", "not attempted yet" (the stub still raises ``NotImplementedError``), or what is wrong. It returns
``True`` only for a correct answer. Reference solutions live beside the checkers, and the tests prove that
each checker accepts them and rejects typical mistakes.
"""

from transformer_course.language import get_language, set_language, tr

from ._core import (
    EXERCISES,
    Exercise,
    ExerciseMistake,
    expect,
    expect_close,
    expect_tensor,
    report,
    translate_feedback,
)

__all__ = [
    "EXERCISES",
    "Exercise",
    "ExerciseMistake",
    "expect",
    "expect_close",
    "expect_tensor",
    "get_language",
    "report",
    "set_language",
    "tr",
    "translate_feedback",
]
